"""Exactly-once from Kafka to Kafka on the Spark engine under driver SIGKILLs.

A subprocess driver runs tests/spark_kafka_kill_job.py (Kafka, 3 partitions -> keyed running sum ->
KafkaSink exactly-once; 100 records per micro-batch) against the test broker. The driver is killed
(the whole process group: Python, the JVM and its Python workers, as a crashed driver machine) at
chosen moments and at a random one, and restarted from the same checkpoint directory; the run to
the end is in the test's own Spark session (a driver that never saw the job, as a restarted one,
without a JVM start); then a fresh read_committed consumer must see every expected output exactly
once, and no transaction may stay open. The chosen moments, for micro-batch b (its transaction T_b):

* ``commit``: the commit marker (batch b + 1) is in T_b, the commit not sent: the restart's producer
  fences the old one, T_b is aborted, Spark replays b and the sink writes it again;
* ``committed`` and ``STREAMFLOW_SPARK_KILL_AFTER_BATCH``: T_b committed, Spark's commit log does not
  have b: Spark replays b and the sink must skip it (its marker is there), logged with the batch id.

One test takes them in turn on one job (each driver run costs a JVM start and the first
micro-batch's Python workers, 20-30 s here): the chosen moments first, then a random one (a seed
per run, tests/kill_moments.py: other moments each run, one driver run instead of the two random
kills at the same two moments each run before).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from streamflow.common.serialization import SimpleStringSchema
from streamflow.datastream.connectors.base import DeliveryGuarantee
from streamflow.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink
from streamflow.testing.kafka_broker import KafkaBroker, create_topic, open_transactions, produce, read_topic

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from kafka_kill_job import data, expected  # noqa: E402
from kill_moments import kill_rng  # noqa: E402
from spark_jvm import driver_env  # noqa: E402
from test_spark import _spark_log  # noqa: E402

N = 500
PER_BATCH = 100  # micro-batches 0..4 (the last one also carries the end of input)
_ids = itertools.count()
_COMMITTED = re.compile(r"micro-batch (\d+) committed")
_SKIPPED = re.compile(r"micro-batch (\d+) \(\d+ records\) was committed before a restart; not written again")


class Job:
    def __init__(self, broker: KafkaBroker, tmp: Path) -> None:
        n = next(_ids)
        self.bs = broker.bootstrap_servers
        self.in_topic, self.out_topic = f"skill-in-{os.getpid()}-{n}", f"skill-out-{os.getpid()}-{n}"
        self.prefix = f"skill-tx-{os.getpid()}-{n}"
        self.tmp = tmp
        self.runs = 0

    async def setup(self) -> None:
        await create_topic(self.bs, self.in_topic, 3)
        records = data(N)
        await produce(self.bs, self.in_topic, [f"{k},{v}".encode() for k, v in records],
                      keys=[k.encode() for k, _ in records])
        await create_topic(self.bs, self.out_topic, 2)

    def start(self, **faults: str) -> tuple[subprocess.Popen[bytes], Path]:
        env = driver_env()
        for name in ("STREAMFLOW_KILL_AT", "STREAMFLOW_SPARK_KILL_AFTER_BATCH"):
            env.pop(name, None)
        env.update(faults)
        self.runs += 1
        log = self.tmp / f"run-{self.runs}.log"
        self.tmp.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, str(HERE / "spark_kafka_kill_job.py"), self.bs, self.in_topic,
                 self.out_topic, str(self.tmp / "chk"), self.prefix, str(PER_BATCH)],
                env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )
        return proc, log

    def run(self, **faults: str) -> tuple[int, str]:
        """One driver run to its end (a fault hook may end it): (return code, its log)."""
        proc, log = self.start(**faults)
        try:
            proc.wait(timeout=600)
        finally:
            _kill_group(proc)
        return proc.returncode, log.read_text()

    def finish(self) -> None:
        """The run to the end, in this process's Spark session (a driver that never saw the job,
        as a restarted one; the fan-out kill test resumes so too): no JVM start, and the session's
        Python workers are up, instead of a subprocess driver's 15-25 s. It raises what the job
        raises."""
        import spark_kafka_kill_job

        self.runs += 1
        spark_kafka_kill_job.main(self.bs, self.in_topic, self.out_topic, str(self.tmp / "chk"), self.prefix,
                                  PER_BATCH)

    async def check(self) -> None:
        out = [m.value.decode() for m in await read_topic(self.bs, self.out_topic)]
        got, want = Counter(out), Counter(expected(N))
        missing, extra = list((want - got).items())[:5], list((got - want).items())[:5]
        assert got == want, f"missing {missing}, extra {extra}"
        assert await open_transactions(self.bs, self.out_topic) == {}

    async def committed(self) -> int:
        return len(await read_topic(self.bs, self.out_topic))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL what is left of the driver's process group (the JVM and its Python workers outlive a
    driver that killed itself) and wait until it is gone, so no old JVM touches the checkpoint."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        if proc.poll() is None:
            proc.wait(timeout=10)
        time.sleep(0.05)
    raise AssertionError(f"the driver's process group {proc.pid} survived SIGKILL")


@pytest.mark.timeout(1800)  # 3 driver runs, 1 in this process: up to 3 min each on a loaded 2-core machine
async def test_driver_killed_around_the_commit_and_at_random_moments_resumes_exactly_once(kafka, tmp_path):
    """The chosen moments, then a random one, on one job (each driver run pays a JVM start
    and the first micro-batch's Python workers, so the random kill takes the restart after the
    chosen ones instead of a job of their own), then the run to the end in this process's
    session (Job.finish): 5 micro-batches, 0..4."""
    job = Job(kafka, tmp_path)
    await job.setup()
    # 1. T_1 holds batch 1 and its marker, not committed: only batch 0 is visible
    rc, log = await asyncio.to_thread(job.run, STREAMFLOW_KILL_AT="commit:2")
    assert rc == -signal.SIGKILL, log[-3000:]
    assert await job.committed() == PER_BATCH
    # 2. batch 1 is written again (T_1 was aborted), T_2 commits, the driver dies before Spark's commit log
    rc, log = await asyncio.to_thread(job.run, STREAMFLOW_KILL_AT="committed:3")
    assert rc == -signal.SIGKILL, log[-3000:]
    assert [int(b) for b in _COMMITTED.findall(log)] == [1], log[-3000:]  # batch 2's line: after the hook
    assert not _SKIPPED.search(log)
    assert await job.committed() == 3 * PER_BATCH
    # 3. Spark replays batch 2, which the sink skips, saying so (its first batch); then a kill at
    # a random delay after that skipped replay or after batch 3 committed (tests/kill_moments.py:
    # a seed per run, printed); then a run to the end. Two keyed batches are left after the skip
    # (>= 3 s on an idle machine): delays from the skip alone (0-1.5 s) all landed inside batch 3
    # (fresh clone, loaded machine: batch 3 committed 3.5 s after the skip, batch 4 6.4 s), never
    # between batch 3's Kafka commit and Spark's, nor in batch 4
    rng = kill_rng("spark-kafka")
    # after batch 3's commit at most 0.5 s: batch 4 took 2.85 s there under load (met), and a
    # kill after the query's end would find the driver gone (an idle CI machine runs it faster)
    anchor, longest = rng.choice(((_SKIPPED, 1.5), (_COMMITTED, 0.5)))
    delay = rng.uniform(0.0, longest)
    proc, path = job.start()
    try:
        await _until_logged(proc, path, _SKIPPED)
        first = path.read_text()
        assert [int(b) for b in _SKIPPED.findall(first)] == [2], first[-3000:]
        assert not _COMMITTED.search(first), first[-3000:]
        await _until_logged(proc, path, anchor)
        await asyncio.sleep(delay)
        assert proc.poll() is None, "the driver ended before its random kill"
    finally:
        _kill_group(proc)
    text = path.read_text()
    assert proc.returncode == -signal.SIGKILL, text[-3000:]
    after = "batch 3 committed" if anchor is _COMMITTED else "the skipped replay of batch 2"
    await _landed_mid_job(job, text, f"{delay:.2f} s after {after}")
    await asyncio.to_thread(job.finish)
    await job.check()


async def _landed_mid_job(job: Job, log: str, moment: str) -> None:
    """Where the random kill landed, from what the killed run left (printed: pytest shows it with
    a failure, beside the seed): it is timed from the sink's skip of the replayed batch 2 (the
    query's first micro-batch in that run, after the JVM start, the imports and the first batch's
    Python workers) or from batch 3's commit, so it lands inside the query run; and before the
    query's end (Spark had not committed its last batch, 4): the resumed run has batches to run or
    replay. What the killed run
    committed to Kafka (its log, plus at most one batch committed but not yet logged) is what the
    read_committed consumer sees, and batch 2 is never written again."""
    by_sink = [int(b) for b in _COMMITTED.findall(log)]
    planned, committed = (_spark_log(job.tmp / "chk", "kafka-out", kind) for kind in ("offsets", "commits"))
    visible = await job.committed()
    print(f"random kill {moment}: the killed run committed "
          f"batches {by_sink} to Kafka ({visible} records visible); Spark had planned {planned}, "
          f"committed {committed}")
    assert [int(b) for b in _SKIPPED.findall(log)] == [2], log[-3000:]  # its first micro-batch ran
    assert by_sink == list(range(3, 3 + len(by_sink))), log[-3000:]  # batch 2 not written again
    assert visible in (PER_BATCH * (3 + len(by_sink)), PER_BATCH * (4 + len(by_sink))), (visible, by_sink)
    assert committed == list(range(len(committed))) and 2 <= len(committed) <= 4, committed
    assert planned == list(range(len(planned))) and len(planned) >= 3, planned  # batch 2 was replayed


async def _until_logged(proc: subprocess.Popen[bytes], log: Path, line: re.Pattern[str]) -> None:
    """Until the driver's log has ``line`` (polled every 50 ms)."""
    deadline = time.monotonic() + 300
    while not line.search(log.read_text()):
        assert proc.poll() is None, f"the driver ended before it logged {line.pattern!r}"
        assert time.monotonic() < deadline, f"{line.pattern!r} not logged within 300 s"
        await asyncio.sleep(0.05)


async def test_the_commit_marker_of_another_checkpoint_location_is_not_trusted(kafka, tmp_path):
    """The sink alone (no Spark), as the driver drives it: batches 0, 1 written; a restart on the
    same checkpoint skips batch 1 and writes batch 2; a new checkpoint location with the same
    transactional ids (batch ids start again at 0) writes its batch 0, into another topic; a
    third location writes its batch 0 into the first topic (the marker then names both runs),
    and its restart skips that batch 0 and writes its batch 1."""
    from streamflow.runtime.factory import OperatorFactory
    from streamflow.spark.harness import NodeSpec
    from streamflow.spark.sinks import KafkaBatchSink

    bs = kafka.bootstrap_servers
    tag = f"{os.getpid()}-{next(_ids)}"
    prefix, topics = f"marker-tx-{tag}", [f"marker-out-{tag}-a", f"marker-out-{tag}-b"]
    for topic in topics:
        await create_topic(bs, topic, 1)
    loop = asyncio.get_running_loop()

    def sink(topic: str, chk: Path) -> KafkaBatchSink:
        kafka_sink = (
            KafkaSink.builder().set_bootstrap_servers(bs)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(topic)
                                   .set_value_serialization_schema(SimpleStringSchema()).build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).set_transactional_id_prefix(prefix).build()
        )
        factory = OperatorFactory("kafka sink", lambda: kafka_sink.create_operator("out"))
        return KafkaBatchSink(factory.create(0), NodeSpec("out", "out", factory, False, 128), loop, str(chk))

    def batch(b: int) -> list[str]:
        return [f"b{b}-{i}" for i in range(3)]

    def drive(s: KafkaBatchSink, batches: list[int], offsets_logged: Path | None = None) -> None:
        s.open()
        try:
            for b in batches:
                if offsets_logged is not None:  # as Spark does before it runs a batch
                    (offsets_logged / "offsets").mkdir(parents=True, exist_ok=True)
                    (offsets_logged / "offsets" / str(b)).touch()
                s.write(b, batch(b), [None] * 3)
        finally:
            s.close()

    await asyncio.to_thread(drive, sink(topics[0], tmp_path / "a"), [0, 1], tmp_path / "a")
    await asyncio.to_thread(drive, sink(topics[0], tmp_path / "a"), [1, 2])  # a restart replays 1
    await asyncio.to_thread(drive, sink(topics[1], tmp_path / "b"), [0])
    await asyncio.to_thread(drive, sink(topics[0], tmp_path / "c"), [0], tmp_path / "c")
    await asyncio.to_thread(drive, sink(topics[0], tmp_path / "c"), [0, 1])  # a restart replays 0
    got = [[m.value.decode() for m in await read_topic(bs, t)] for t in topics]
    assert Counter(got[0]) == Counter(batch(0) + batch(1) + batch(2) + batch(0) + batch(1))
    assert got[1] == batch(0)


def test_a_micro_batch_reads_at_most_records_per_batch_shared_by_backlog() -> None:
    from streamflow.spark.kafka import limit_offsets

    start, end = {"t:0": 10, "t:1": 0, "t:2": 5}, {"t:0": 110, "t:1": 50, "t:2": 5}
    assert limit_offsets(start, end, None) == end
    assert limit_offsets(start, end, 150) == end
    cut = limit_offsets(start, end, 31)
    assert cut == {"t:0": 31, "t:1": 10, "t:2": 5}  # 100:50 backlog -> 21 (20 + the remainder) and 10
    assert sum(cut[k] - start[k] for k in end) == 31
    assert limit_offsets({}, {"t:0": 3}, 2) == {"t:0": 2}  # a partition new to the offsets starts at 0
