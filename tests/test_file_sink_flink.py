"""Ports of Flink's FileSink integration tests on streamflow's public (PyFlink-named) API:
``flink-connectors/flink-connector-files/src/test/java/org/apache/flink/connector/file/sink/``
``FileSinkITBase.testFileSink`` with ``StreamingExecutionFileSinkITCase`` and
``BatchExecutionFileSinkITCase`` (``triggerFailover`` false and true): four sources each emit
the integers ``0 .. NUM_RECORDS-1``, three sink subtasks write them with a policy that rolls at
1 KiB and on every checkpoint, and at the end every integer is in the finished part files
exactly ``NUM_SOURCES`` times (``IntegerFileSinkTestDataUtils.checkIntegerSequenceSinkOutput``),
also when a failure restarts the job midway.

Flink's parallel legacy source is four sources here (``union``): the same records. Its
``ModuloBucketAssigner`` (a bucket per ``value % 4``) is a Java ``BucketAssigner`` PyFlink
cannot express (PyFlink has the base-path and date-time assigners only), so the files sit in
the base path.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streamflow.common.restart_strategy import RestartStrategies
from streamflow.common.serialization import Encoder
from streamflow.connectors.file_sink_policy import PartFileInfo, RollingPolicy
from streamflow.datastream import (
    CheckpointingMode,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
)
from streamflow.datastream.connectors.file_system import BucketAssigner, FileSink
from streamflow.datastream.functions import MapFunction

NUM_SOURCES = 4
NUM_SINKS = 3
NUM_RECORDS = 10_000
FAILOVER_RATIO = 0.4


class PartSizeAndCheckpointRollingPolicy(RollingPolicy):
    """Flink's ``FileSinkITBase.PartSizeAndCheckpointRollingPolicy``: a ``CheckpointRollingPolicy``
    (rolls on every checkpoint) that also rolls a part of ``max_part_size`` bytes or more."""

    def __init__(self, max_part_size: int) -> None:
        self.max_part_size = max_part_size

    def should_roll_on_checkpoint(self, part: PartFileInfo) -> bool:
        return True

    def should_roll_on_event(self, part: PartFileInfo) -> bool:
        return part.size >= self.max_part_size

    def should_roll_on_processing_time(self, part: PartFileInfo, now_ms: int) -> bool:
        return False


def _finished_files(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")]


def _check_integer_sequence_output(path: Path) -> None:
    """Flink's ``IntegerFileSinkTestDataUtils.checkIntegerSequenceSinkOutput`` (buckets
    aside): every integer in the finished files exactly ``NUM_SOURCES`` times; and no
    in-progress or pending file is left behind."""
    counts: Counter[int] = Counter()
    for file in _finished_files(path):
        counts.update(int(line) for line in file.read_text().splitlines())
    wrong = {v: n for v, n in counts.items() if n != NUM_SOURCES}
    missing = [v for v in range(NUM_RECORDS) if v not in counts]
    assert not wrong and not missing, f"wrong counts {dict(list(wrong.items())[:5])}, missing {missing[:5]}"
    assert len(counts) == NUM_RECORDS
    leftovers = [p.name for p in path.rglob(".*")]
    assert leftovers == [], leftovers


class Numbers:
    """Flink's test sources, one subtask: the integers ``0 .. n-1``. With ``gate_on`` (the
    streaming failover scenario), after the first ``FAILOVER_RATIO / 2`` of them it waits
    until some part file is committed (Flink's source waits for a completed checkpoint)."""

    def __init__(self, n: int, gate_on: Path | None) -> None:
        self.n, self.gate_on = n, gate_on

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        gate_at = int(self.n * FAILOVER_RATIO * 0.5) if self.gate_on is not None else -1
        for i in range(self.n):
            if i == gate_at and self.gate_on is not None:
                for _ in range(3000):
                    if _finished_files(self.gate_on):
                        break
                    await asyncio.sleep(0.01)
                else:
                    raise AssertionError("no part file was committed within 30 s")
            if i % 100 == 0:
                await asyncio.sleep(0)  # let checkpoints through
            yield i


class OnceFailingMap(MapFunction):
    """Flink's ``BatchExecutionOnceFailingMap`` (and the streaming source's designated failure):
    subtask 0 fails on attempt 0 at the first value at or past ``FAILOVER_RATIO`` of the range."""

    def __init__(self, trigger_failover: bool) -> None:
        self.trigger_failover = trigger_failover

    def open(self, runtime_context: Any) -> None:
        self.context = runtime_context

    def map(self, value: int) -> int:
        if (
            self.trigger_failover
            and self.context.get_index_of_this_subtask() == 0
            and self.context.get_attempt_number() == 0
            and value >= FAILOVER_RATIO * NUM_RECORDS
        ):
            raise RuntimeError("Designated Failure")
        return value


def _file_sink(path: Path, compact: bool = False) -> Any:
    """``FileSinkITBase.createFileSink``; with ``compact``, the compacting ITCases' sink
    (``enableCompact``: size threshold 10000, compaction every 5 checkpoints; Flink's
    record-wise compactor of its binary ints is a concatenation of these text lines)."""
    from streamflow.datastream.connectors.file_system import FileCompactor, FileCompactStrategy

    builder = (
        FileSink.for_row_format(str(path), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .with_rolling_policy(PartSizeAndCheckpointRollingPolicy(1024))
    )
    if compact:
        strategy = (
            FileCompactStrategy.builder()
            .set_size_threshold(10_000)
            .enable_compaction_on_checkpoint(5)
            .build()
        )
        builder = builder.enable_compact(strategy, FileCompactor.concat_file_compactor(b""))
    return builder.build()


def _run(path: Path, mode: RuntimeExecutionMode, trigger_failover: bool, compact: bool = False) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(mode)
    if mode is RuntimeExecutionMode.STREAMING:
        env.enable_checkpointing(10, CheckpointingMode.EXACTLY_ONCE)
    if trigger_failover:
        env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 100))
    else:
        env.set_restart_strategy(RestartStrategies.no_restart())
    gate = path if trigger_failover and mode is RuntimeExecutionMode.STREAMING else None
    sources = [
        env.from_async_iterable(Numbers(NUM_RECORDS, gate).__aiter__).name(f"Source {i}")
        for i in range(NUM_SOURCES)
    ]
    numbers = sources[0].union(*sources[1:])
    (
        numbers.rebalance()
        .map(OnceFailingMap(trigger_failover))
        .set_parallelism(NUM_SINKS)
        .sink_to(_file_sink(path, compact))
        .set_parallelism(NUM_SINKS)
    )
    env.execute("file sink")


@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compacting"])
@pytest.mark.parametrize("trigger_failover", [False, True])
def test_streaming_execution_file_sink(tmp_path: Path, trigger_failover: bool, compact: bool) -> None:
    """Flink's ``StreamingExecutionFileSinkITCase`` (``FileSinkITBase.testFileSink``), and with
    ``compact`` ``StreamingCompactingFileSinkITCase``: checkpoints every 10 ms, exactly once;
    with a failure after some files are committed."""
    out = tmp_path / "out"
    _run(out, RuntimeExecutionMode.STREAMING, trigger_failover, compact)
    _check_integer_sequence_output(out)


@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compacting"])
@pytest.mark.parametrize("trigger_failover", [False, True])
def test_batch_execution_file_sink(tmp_path: Path, trigger_failover: bool, compact: bool) -> None:
    """Flink's ``BatchExecutionFileSinkITCase`` (``FileSinkITBase.testFileSink``), and with
    ``compact`` ``BatchCompactingFileSinkITCase``: batch mode, no checkpoints; with a failure
    of the map before sink subtask 0 midway."""
    out = tmp_path / "out"
    _run(out, RuntimeExecutionMode.BATCH, trigger_failover, compact)
    _check_integer_sequence_output(out)


def test_part_files_roll_at_the_size_and_on_every_checkpoint(tmp_path: Path) -> None:
    """The policy of ``FileSinkITBase``: no finished part is much larger than 1 KiB (a part
    rolls at the first record at or past it), so the ten thousand records make many parts."""
    out = tmp_path / "out"
    _run(out, RuntimeExecutionMode.STREAMING, False)
    sizes = [p.stat().st_size for p in _finished_files(out)]
    assert len(sizes) >= NUM_SOURCES * NUM_RECORDS * 4 // 1024 // 2
    assert max(sizes) < 1024 + 16, max(sizes)
    assert os.listdir(out)


class FailAfterOthersFinished(MapFunction):
    """Subtask 0, attempt 0: waits until the other subtasks of its chain (map -> sink) have
    closed, so their sinks have finished, then fails; every other call passes the value on."""

    closed: set[int] = set()

    def open(self, runtime_context: Any) -> None:
        self.context = runtime_context

    async def map(self, value: int) -> int:
        if self.context.get_index_of_this_subtask() == 0 and self.context.get_attempt_number() == 0:
            for _ in range(2000):
                if {1, 2} <= FailAfterOthersFinished.closed:
                    break
                await asyncio.sleep(0.005)
            else:
                raise AssertionError("the other subtasks did not finish within 10 s")
            raise RuntimeError("Designated Failure")
        return value

    def close(self) -> None:
        if self.context.get_attempt_number() == 0:
            FailAfterOthersFinished.closed.add(self.context.get_index_of_this_subtask())


def batch_file_sink(out: Path, compact: bool, restarts: int) -> tuple[StreamExecutionEnvironment, Any]:
    """A batch job's environment with ``restarts`` restarts, and a FileSink builder into ``out``
    rolling at 1 KiB (compacting at 4 KiB with ``compact``)."""
    from streamflow.datastream.connectors.file_system import FileCompactor, FileCompactStrategy

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(restarts, 10))
    builder = (
        FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .with_rolling_policy(PartSizeAndCheckpointRollingPolicy(1024))
    )
    if compact:
        strategy = FileCompactStrategy.builder().set_size_threshold(4096).build()
        builder = builder.enable_compact(strategy, FileCompactor.concat_file_compactor(b""))
    return env, builder


@pytest.mark.parametrize("compact", [False, True])
def test_batch_failover_after_some_sink_subtasks_finished_publishes_each_record_once(
    tmp_path: Path, compact: bool
) -> None:
    """``BatchExecutionFileSinkITCase`` with the failure where it hurts: two of the three sink
    subtasks have finished their input when subtask 0 fails. Flink's batch failover restarts
    only the failed region (the finished ones are not run again), so every record is in the
    finished files once. So does streamflow's (``runtime/regions.py``); its sink publishes a
    job's files without checkpoints only once every task has finished, and drops what a failed
    attempt deferred (``ALL_EXCHANGES_PIPELINED`` restarts the whole job, which must not
    publish a finished subtask's files twice either)."""
    FailAfterOthersFinished.closed = set()
    out = tmp_path / "out"
    env, builder = batch_file_sink(out, compact, restarts=1)
    n = 3000
    (
        env.from_collection(list(range(n)))
        .partition_custom(lambda key, channels: 0 if key == 0 else 1 + key % 2, lambda v: v)
        .map(FailAfterOthersFinished())
        .set_parallelism(NUM_SINKS)
        .sink_to(builder.build())
        .set_parallelism(NUM_SINKS)
    )
    env.execute("file sink")
    assert {1, 2} <= FailAfterOthersFinished.closed
    counts = Counter(int(line) for f in _finished_files(out) for line in f.read_text().splitlines())
    assert counts == Counter(range(n))
    assert [p.name for p in out.rglob(".*")] == []


# ------------------------------------------------- FileWriterBucketTest / FileWriterTest (one subtask)


async def test_rolling_on_processing_time_happens_on_the_bucket_check_timer(tmp_path: Path) -> None:
    """Flink's ``FileWriterBucketTest.testRollingOnProcessingTime`` (and the single-bucket half
    of ``FileWriterTest.testOnProcessingTime``): rollover interval 10 ms; records at 11 and 12;
    the check at 20 does not roll (9 ms old); a record at 21 still goes into that file (a write
    asks only ``shouldRollOnEvent``), and the check at 21 rolls it: one pending file of three
    records, nothing in progress."""
    from test_file_sink import committed, hidden, make_op

    from streamflow.connectors.file_sink_policy import DefaultRollingPolicy
    from streamflow.runtime.processing_time import ProcessingTimeService
    from streamflow.testing import ManualClock

    clock = ManualClock(11)
    timers = ProcessingTimeService(clock, lambda: None)
    policy = DefaultRollingPolicy(rollover_interval=10)
    op = make_op(tmp_path, policy=policy, clock=clock, timers=timers, check_interval=1)
    op.initialize_state(None)
    await op.process_batch(["a"], None)
    clock.advance(1)
    await timers.run_due()
    await op.process_batch(["b"], None)
    clock.advance(8)  # 20
    await timers.run_due()
    assert hidden(tmp_path) == [".part-sink-0-0.inprogress"], "not rolled: the interval is not reached"
    clock.advance(1)  # 21
    await op.process_batch(["c"], None)
    await timers.run_due()
    assert hidden(tmp_path) == [".part-sink-0-0.pending"], "rolled: the interval is reached"
    op.snapshot_state(1)
    await op.notify_checkpoint_complete(1)
    assert committed(tmp_path) == ["a", "b", "c"]
    assert hidden(tmp_path) == []


async def test_on_checkpoint_rolling_and_default_policy_at_a_checkpoint(tmp_path: Path) -> None:
    """Flink's ``FileWriterBucketTest.testOnCheckpointNoPendingRecoverable`` and
    ``testOnCheckpointRollingOnCheckpoint``: at a checkpoint the default policy keeps a small
    file in progress (recorded in the state, nothing pending), the on-checkpoint policy rolls
    it (one pending file, nothing in progress)."""
    from test_file_sink import make_op

    from streamflow.connectors.file_sink_policy import RollingPolicy as Policies

    for policy, pending, in_progress in [
        (Policies.default_rolling_policy(), 0, True),
        (Policies.on_checkpoint_rolling_policy(), 1, False),
    ]:
        base = tmp_path / type(policy).__name__
        op = make_op(base, policy=policy)
        op.initialize_state(None)
        await op.process_batch(["test-element"], None)
        await op.prepare_snapshot_pre_barrier(1)
        state = op.snapshot_state(1)
        assert sum(len(names) for _cid, names in state["pending"]) == pending
        assert (state["in_progress"] is not None) == in_progress


async def test_each_element_rolling_leaves_the_last_element_in_progress(tmp_path: Path) -> None:
    """Flink's ``FileWriterBucketTest.testOnCheckpointMultiplePendingFiles``: a policy that
    rolls before every element (not on checkpoints): three elements make two pending files and
    one in progress, whether they come one by one or in one batch."""
    from test_file_sink import make_op

    class EachElement(RollingPolicy):
        def should_roll_on_checkpoint(self, part: PartFileInfo) -> bool:
            return False

        def should_roll_on_event(self, part: PartFileInfo) -> bool:
            return True

        def should_roll_on_processing_time(self, part: PartFileInfo, now_ms: int) -> bool:
            return False

    for batches in ([["e1"], ["e2"], ["e3"]], [["e1", "e2", "e3"]]):
        base = tmp_path / str(len(batches))
        op = make_op(base, policy=EachElement())
        op.initialize_state(None)
        for batch in batches:
            await op.process_batch(batch, None)
        await op.prepare_snapshot_pre_barrier(1)
        state = op.snapshot_state(1)
        assert sum(len(names) for _cid, names in state["pending"]) == 2
        assert state["in_progress"] is not None


async def test_flush_at_the_end_of_input_rolls_the_in_progress_file(tmp_path: Path) -> None:
    """Flink's ``FileWriterBucketTest.testFlush`` (``prepareCommit(flush=true)``, the end of
    input): the default policy's in-progress file is rolled, one pending file, none in
    progress, and the final checkpoint's completion publishes it."""
    from test_file_sink import committed, hidden, make_op

    op = make_op(tmp_path)
    op.initialize_state(None)
    await op.process_batch(["test-element"], None)
    await op.finish()
    assert hidden(tmp_path) == [".part-sink-0-0.pending"]
    op.snapshot_state(1)
    await op.notify_checkpoint_complete(1)
    assert committed(tmp_path) == ["test-element"]


async def test_a_bucket_without_files_is_dropped_after_a_commit(tmp_path: Path) -> None:
    """Flink's ``FileWriterTest.testBucketIsRemovedWhenNotActive``: on-checkpoint rolling, one
    record, a checkpoint completes; the next checkpoint finds nothing open or pending in the
    bucket and the state names no file."""
    from test_file_sink import committed, make_op

    from streamflow.connectors.file_sink_policy import RollingPolicy as Policies

    op = make_op(tmp_path, policy=Policies.on_checkpoint_rolling_policy())
    op.initialize_state(None)
    await op.process_batch(["test"], None)
    await op.prepare_snapshot_pre_barrier(1)
    op.snapshot_state(1)
    await op.notify_checkpoint_complete(1)
    assert committed(tmp_path) == ["test"]
    await op.prepare_snapshot_pre_barrier(2)
    state = op.snapshot_state(2)
    assert state["in_progress"] is None and state["pending"] == []
    assert state.get("buckets", {}) == {}


async def test_output_file_config_prefix_and_suffix_name_every_part(tmp_path: Path) -> None:
    """``OutputFileConfig`` in Flink's FileWriter tests (``new OutputFileConfig("part-", "")``)
    and PyFlink's builder: every part file, in progress, pending or finished, is
    ``{prefix}...{suffix}``, hidden while not finished."""
    from test_file_sink import hidden, make_op, visible

    from streamflow.connectors.file_sink_policy import OutputFileConfig
    from streamflow.connectors.file_sink_policy import RollingPolicy as Policies

    config = OutputFileConfig.builder().with_part_prefix("pre").with_part_suffix(".ext").build()
    op = make_op(tmp_path, config=config, policy=Policies.on_checkpoint_rolling_policy())
    op.initialize_state(None)
    await op.process_batch(["x"], None)
    (name,) = hidden(tmp_path)
    assert name.startswith(".pre-") and ".ext" in name and name.endswith(".inprogress")
    await op.prepare_snapshot_pre_barrier(1)
    op.snapshot_state(1)
    (name,) = hidden(tmp_path)
    assert name.startswith(".pre-") and name.endswith(".pending")
    await op.notify_checkpoint_complete(1)
    (name,) = visible(tmp_path)
    assert name.startswith("pre-") and name.endswith(".ext")


async def test_compaction_switched_on_at_a_restore_keeps_every_record_once(tmp_path: Path) -> None:
    """Flink's ``FileSinkCompactionSwitchITCase`` (compaction off, then on after a restore; the
    other direction is ``test_file_compaction.py``'s ``disable_compact`` case): the state of a
    sink without compaction (a pending file and an in-progress one) restores into a sink with
    compaction; every record is published once and nothing stays hidden."""
    from test_file_sink import committed, hidden, make_op

    from streamflow.connectors.file_sink_policy import DefaultRollingPolicy
    from streamflow.datastream.connectors.file_system import FileCompactor, FileCompactStrategy

    plain = make_op(tmp_path, policy=DefaultRollingPolicy(part_size=2))
    plain.initialize_state(None)
    await plain.process_batch(["aa", "b"], None)  # "aa\n" is past 2 bytes: "b" starts the next
    await plain.prepare_snapshot_pre_barrier(1)
    state = plain.snapshot_state(1)
    assert state["pending"] and state["in_progress"] is not None
    plain.dispose()
    strategy = FileCompactStrategy.builder().enable_compaction_on_checkpoint(1).build()
    compacting = make_op(
        tmp_path, policy=DefaultRollingPolicy(part_size=2),
        compact=(strategy, FileCompactor.concat_file_compactor(b"")),
    )  # fmt: skip
    compacting.initialize_state(state)
    await compacting.process_batch(["c"], None)
    await compacting.finish()
    for checkpoint_id in (2, 3):
        await compacting.prepare_snapshot_pre_barrier(checkpoint_id)
        compacting.snapshot_state(checkpoint_id)
        await compacting.notify_checkpoint_complete(checkpoint_id)
        if compacting.compaction is not None:
            await compacting.compaction.wait()
    assert sorted(committed(tmp_path)) == ["aa", "b", "c"]
    assert hidden(tmp_path) == []


async def test_number_records_out_counter(tmp_path: Path) -> None:
    """FileWriterTest.testNumberRecordsOutCounter (flink-connector-files
    ``.../file/sink/writer/FileWriterTest.java``): the writer counts the records it wrote in its
    operator's numRecordsOut (0 before any write, 1 after the first, 3 after three); streamflow
    counts per batch written (Flink's SinkWriterMetricGroup: numRecordsSend too, the bytes in
    numBytesSend/numBytesOut, no errors, currentSendTime 0: nothing acknowledges a file write),
    and the job page's operator table shows the same numRecordsOut."""
    env = StreamExecutionEnvironment()
    env.set_parallelism(1)
    sink = FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder()).build()
    env.from_collection(["1", "2", "3"]).sink_to(sink).uid("file-sink")
    client = await env.execute_async("records-out")
    result = await client.get_job_execution_result()
    metrics = {
        k.removeprefix("file-sink[0]."): v for k, v in result.metrics.items() if k.startswith("file-sink[0].")
    }
    assert metrics["numRecordsOut"] == metrics["numRecordsSend"] == 3
    assert metrics["numBytesOut"] == metrics["numBytesSend"] == 3 * len("1\n")
    assert metrics["numRecordsOutErrors"] == metrics["numRecordsSendErrors"] == 0
    assert metrics["currentSendTime"] == 0
    (sink_op,) = [
        op
        for v in client.get_metrics_snapshot()["vertices"]
        for s in v["subtasks"]
        for op in s["operators"]
        if op["uid"] == "file-sink"
    ]
    assert sink_op["numRecordsOut"] == 3


async def test_records_out_count_per_write_and_errors_count_a_failed_write(tmp_path: Path) -> None:
    """FileWriterTest.testNumberRecordsOutCounter's steps (1 after the first write, 3 after the
    next two) on the sink's writer, and a write that fails (here: the encoder refuses a record)
    counts its batch in numRecordsSendErrors, not in numRecordsSend."""
    from test_file_sink import make_op  # tests/test_file_sink.py: a sink subtask outside a job

    from streamflow.runtime.metrics import MetricGroup, read_metrics

    def encode(records: list) -> bytes:
        if "bad" in records:
            raise ValueError("no")
        return "".join(f"{r}\n" for r in records).encode()

    op = make_op(tmp_path, encoder=Encoder(encode, "picky"), checkpointing=False)
    registry: dict[str, object] = {}
    op.ctx.metrics = MetricGroup("sink[0]", registry)
    op.initialize_state(None)
    await op.open()
    assert read_metrics(registry)["sink[0].numRecordsOut"] == 0
    await op.process_batch(["1"], None)
    assert read_metrics(registry)["sink[0].numRecordsOut"] == 1
    await op.process_batch(["2", "3"], None)
    read = read_metrics(registry)
    assert read["sink[0].numRecordsOut"] == read["sink[0].numRecordsSend"] == 3
    assert read["sink[0].numBytesSend"] == 6
    with pytest.raises(ValueError):
        await op.process_batch(["4", "bad"], None)
    read = read_metrics(registry)
    assert read["sink[0].numRecordsSendErrors"] == read["sink[0].numRecordsOutErrors"] == 2
    assert read["sink[0].numRecordsSend"] == 3
    await op.close()


@pytest.mark.parametrize("compact", [False, True])
def test_a_failed_publication_at_the_job_end_is_retried_without_running_the_job_again(
    tmp_path: Path, compact: bool
) -> None:
    """A batch job's FileSink publishes every subtask's files once all tasks finished; when
    that publication fails part way (an injected fault after the first rename: some files
    visible, others still pending), the restart strategy retries the publication alone, as
    Flink's committer retries its committables: the tasks' output is complete, and running
    them again would write the published records a second time."""
    from streamflow.testing import faults

    out = tmp_path / "out"
    env, builder = batch_file_sink(out, compact, restarts=2)
    n = 3000
    env.from_collection(list(range(n))).rebalance().map(lambda v: v).set_parallelism(NUM_SINKS).sink_to(
        builder.build()
    ).set_parallelism(NUM_SINKS)
    faults.inject("commit", 0, times=1)
    try:
        result = env.execute("file sink")
        assert faults.hits("commit") == 1, "the publication did not fail"
    finally:
        faults.clear()
    assert result.metrics["job.numRestarts"] == 0  # the tasks ran once
    counts = Counter(int(line) for f in _finished_files(out) for line in f.read_text().splitlines())
    assert counts == Counter(range(n))
    assert [p.name for p in out.rglob(".*")] == []


def test_a_failed_publication_at_the_job_end_without_restarts_fails_the_job_naming_it(tmp_path: Path) -> None:
    from streamflow.testing import faults

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.from_collection(list(range(100))).sink_to(
        FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build()
    )
    faults.inject("commit", 0, times=1)
    try:
        with pytest.raises(
            Exception, match="every task finished, but publishing its output at the job's end failed"
        ):
            env.execute("file sink")
    finally:
        faults.clear()
