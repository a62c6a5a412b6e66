"""Exactly-once from Kafka to Kafka under SIGKILL and broker restarts.

A subprocess job (tests/kafka_kill_job.py: Kafka -> keyed running sum -> Kafka, exactly once) is
killed at every two-phase-commit boundary and at random moments (tests/kill_moments.py: a few per
test, at other moments each run), at parallelism 1 and 2, and
restarted from its checkpoints; then a fresh read_committed consumer must see every expected output
exactly once, and no transaction may stay open (last stable offset = high watermark). The broker is
also stopped and restarted under a running job, which fails over and ends with the same output.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from child_env import child_env

from streamflow.testing.kafka_broker import KafkaBroker, create_topic, open_transactions, produce, read_topic

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from kafka_kill_job import RUNNING, data, expected  # noqa: E402
from kill_moments import KILLS, Landings, kill_rng, newest_checkpoint, wait_running  # noqa: E402

N = 1200
# Seconds between the job's start (its imports done: RUNNING) and a random kill. The job runs
# 1.1-1.7 s from there (first checkpoint after 0.15 s; a restored run has less to do), so a kill
# lands in its run; counted from the process's start (0.2-1.2 s before) about a third of the
# kills landed in the imports (0.5 s with bytecode) and every kill of a fresh clone's first run
# in its compilation (2 s).
KILL_AFTER = (0.05, 0.7)
_ids = itertools.count()


class Job:
    def __init__(self, broker: KafkaBroker, tmp: Path, parallelism: int) -> None:
        n = next(_ids)
        self.bs = broker.bootstrap_servers
        self.in_topic, self.out_topic = f"kill-in-{os.getpid()}-{n}", f"kill-out-{os.getpid()}-{n}"
        self.prefix = f"kill-tx-{os.getpid()}-{n}"
        self.tmp, self.parallelism = tmp, parallelism

    async def setup(self) -> None:
        await create_topic(self.bs, self.in_topic, 2)
        await create_topic(self.bs, self.out_topic, 2)
        records = data(N)
        await produce(self.bs, self.in_topic, [f"{k},{v}".encode() for k, v in records],
                      keys=[k.encode() for k, _ in records])

    def start(self, kill_at: str | None = None, interval_ms: int = 30) -> subprocess.Popen[bytes]:
        env = child_env()
        env.pop("STREAMFLOW_KILL_AT", None)
        if kill_at:
            env["STREAMFLOW_KILL_AT"] = kill_at
        chk = str(self.tmp / "chk")
        args = [self.bs, self.in_topic, self.out_topic, chk, str(self.parallelism), self.prefix]
        args.append(str(interval_ms))
        return subprocess.Popen([sys.executable, str(HERE / "kafka_kill_job.py"), *args], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def finish(self) -> None:
        proc = self.start()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-4000:]

    async def check(self) -> None:
        out = [m.value.decode() for m in await read_topic(self.bs, self.out_topic)]
        got, want = Counter(out), Counter(expected(N))
        missing, extra = list((want - got).items())[:5], list((got - want).items())[:5]
        assert got == want, f"missing {missing}, extra {extra}"
        assert await open_transactions(self.bs, self.out_topic) == {}


POINTS = [
    "snapshot",  # after pre-commit: the sink flushed and snapshotted T_n, checkpoint n not complete
    "complete",  # checkpoint n complete and durable, before the sink was notified (T_n not committed)
    "commit",  # during the commit: marker written into T_n, commit not yet sent
    "committed",  # T_n committed, before the next transaction began
]


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("point", POINTS)
async def test_kill_at_each_two_phase_commit_boundary(kafka, tmp_path, point, parallelism):
    job = Job(kafka, tmp_path, parallelism)
    await job.setup()
    proc = job.start(f"{point}:3")
    _, err = await asyncio.to_thread(proc.communicate, timeout=120)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-3000:]  # it really died at that point
    await asyncio.to_thread(job.finish)
    await job.check()


async def test_kill_during_the_recommit_of_a_restore(kafka, tmp_path):
    """Killed with checkpoint 3 complete and its transaction open (``complete``), then killed
    again while the restored sink re-commits that epoch (``recommit``: its records and the marker
    history naming it are in the transaction, not committed); the next start aborts that
    transaction and re-sends the epoch once more, which the marker still does not name."""
    job = Job(kafka, tmp_path, 2)
    await job.setup()
    for kill_at in ("complete:3", "recommit"):
        proc = job.start(kill_at)
        _, err = await asyncio.to_thread(proc.communicate, timeout=120)
        assert proc.returncode == -signal.SIGKILL, f"{kill_at}: " + err.decode()[-3000:]
    await asyncio.to_thread(job.finish)
    await job.check()


@pytest.mark.parametrize("parallelism", [1, 2])
async def test_kill_after_the_final_pre_commit(kafka, tmp_path, parallelism):
    """No periodic checkpoint runs (a one-hour interval): the tasks finish, the sink pre-commits
    its last epoch in its final state, labelled checkpoint 1, and the process dies before that
    checkpoint completes. The restart replays everything from the start, exactly once."""
    job = Job(kafka, tmp_path, parallelism)
    await job.setup()
    proc = job.start("snapshot:1", interval_ms=3_600_000)
    _, err = await asyncio.to_thread(proc.communicate, timeout=120)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-3000:]
    assert await read_topic(job.bs, job.out_topic) == []  # nothing committed before the kill
    await asyncio.to_thread(job.finish)
    await job.check()


@pytest.mark.parametrize("parallelism", [1, 2])
async def test_kill_at_random_moments(kafka, tmp_path, parallelism):
    """``KILLS`` SIGKILLs at random moments of the job's run (a seed per run, printed; counted from
    its start, ``KILL_AFTER``); a job that finishes between kills is checked and replaced. Some
    kills must land after a checkpoint of their run (``Landings``)."""
    rng = kill_rng(f"kafka-{parallelism}")
    round_no = 0
    job = Job(kafka, tmp_path / "0", parallelism)
    await job.setup()
    killed = checked = 0
    landings = Landings(f"kafka-{parallelism}")
    while killed < KILLS:
        assert checked <= KILLS, f"the job finished before {checked} of {checked + killed} kills"
        before = newest_checkpoint(job.tmp / "chk")
        proc = job.start()
        early = await asyncio.to_thread(wait_running, proc, RUNNING)
        await asyncio.sleep(rng.uniform(*KILL_AFTER))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        _, err = await asyncio.to_thread(proc.communicate, timeout=120)
        err = early + err
        if proc.returncode == -signal.SIGKILL:
            landings.killed(before, newest_checkpoint(job.tmp / "chk"))
        if proc.returncode == 0:  # it finished before this kill: check, then start over
            await job.check()
            checked += 1
            round_no += 1
            job = Job(kafka, tmp_path / str(round_no), parallelism)
            await job.setup()
        else:
            assert proc.returncode == -signal.SIGKILL, err.decode()[-3000:]
    await asyncio.to_thread(job.finish)
    await job.check()
    landings.check()


async def test_broker_restart_mid_run_fails_over_and_stays_exactly_once(tmp_path):
    with KafkaBroker() as broker:
        if broker.external:
            pytest.fail("this test restarts the broker: unset STREAMFLOW_KAFKA_BOOTSTRAP to run it")
        job = Job(broker, tmp_path, 2)
        await job.setup()
        proc = job.start()
        deadline = asyncio.get_running_loop().time() + 60
        while not await read_topic(job.bs, job.out_topic, committed=False):  # mid-run: output flowing
            assert proc.poll() is None and asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        assert proc.poll() is None, "the job ended before the broker restart"
        await asyncio.to_thread(broker.stop)
        await asyncio.sleep(0.5)
        await asyncio.to_thread(broker.start)
        _, err = await asyncio.to_thread(proc.communicate, timeout=120)
        assert proc.returncode == 0, err.decode()[-4000:]
        assert b"lost" in err or b"restart" in err.lower()  # the failover happened and was logged
        await job.check()



@pytest.mark.parametrize(("before", "after"), [(2, 1), (2, 3)])
@pytest.mark.parametrize("point", ["complete", "commit"])
async def test_killed_then_resumed_at_another_parallelism(kafka, tmp_path, point, before, after):
    """Killed with checkpoint 3 complete and its transaction open (at ``commit`` the marker is in
    it), then resumed at another parallelism. Scaling down, a remaining subtask takes over the
    vanished one's state: it aborts the transaction left open under that subtask's id and re-sends
    the uncommitted epochs under that subtask's marker; the source's offsets and the running sums
    are redistributed."""
    job = Job(kafka, tmp_path, before)
    await job.setup()
    proc = job.start(f"{point}:3")
    _, err = await asyncio.to_thread(proc.communicate, timeout=120)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-3000:]
    job.parallelism = after
    await asyncio.to_thread(job.finish)
    await job.check()
