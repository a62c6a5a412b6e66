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


def _file_sink(path: Path) -> Any:
    return (
        FileSink.for_row_format(str(path), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .with_rolling_policy(PartSizeAndCheckpointRollingPolicy(1024))
        .build()
    )


def _run(path: Path, mode: RuntimeExecutionMode, trigger_failover: bool) -> None:
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
        .sink_to(_file_sink(path))
        .set_parallelism(NUM_SINKS)
    )
    env.execute("file sink")


@pytest.mark.parametrize("trigger_failover", [False, True])
def test_streaming_execution_file_sink(tmp_path: Path, trigger_failover: bool) -> None:
    """Flink's ``StreamingExecutionFileSinkITCase`` (``FileSinkITBase.testFileSink``):
    checkpoints every 10 ms, exactly once; with a failure after some files are committed."""
    out = tmp_path / "out"
    _run(out, RuntimeExecutionMode.STREAMING, trigger_failover)
    _check_integer_sequence_output(out)


@pytest.mark.parametrize("trigger_failover", [False, True])
def test_batch_execution_file_sink(tmp_path: Path, trigger_failover: bool) -> None:
    """Flink's ``BatchExecutionFileSinkITCase`` (``FileSinkITBase.testFileSink``): batch mode,
    no checkpoints; with a failure of the map before sink subtask 0 midway."""
    out = tmp_path / "out"
    _run(out, RuntimeExecutionMode.BATCH, trigger_failover)
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


@pytest.mark.parametrize("compact", [False, True])
def test_batch_failover_after_some_sink_subtasks_finished_publishes_each_record_once(
    tmp_path: Path, compact: bool
) -> None:
    """``BatchExecutionFileSinkITCase`` with the failure where it hurts: two of the three sink
    subtasks have finished their input when subtask 0 fails. Flink's batch failover restarts
    only the failed region (the finished ones are not run again), so every record is in the
    finished files once. streamflow restarts the whole job; its sink therefore publishes a
    job's files without checkpoints only once every task has finished (it published a
    subtask's files at that subtask's end, and the restart wrote them again)."""
    from streamflow.datastream.connectors.file_system import FileCompactor, FileCompactStrategy

    FailAfterOthersFinished.closed = set()
    out = tmp_path / "out"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 10))
    builder = (
        FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .with_rolling_policy(PartSizeAndCheckpointRollingPolicy(1024))
    )
    if compact:
        strategy = FileCompactStrategy.builder().set_size_threshold(4096).build()
        builder = builder.enable_compact(strategy, FileCompactor.concat_file_compactor(b""))
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
