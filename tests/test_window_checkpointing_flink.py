"""Event-time windows with a failure injected after a checkpoint, ported from Flink's
``flink-tests/src/test/java/org/apache/flink/test/checkpointing/EventTimeWindowCheckpointingITCase.java``
(``testTumblingTimeWindow``, ``testSlidingTimeWindow``, ``testPreAggregatedTumblingTimeWindow``,
``testPreAggregatedSlidingTimeWindow``; ``FailingSource``, ``ValidatingSink``) with the
session-window case of ``EventTimeAllWindowCheckpointingITCase`` keyed, and the keyed
running state of ``KeyedStateCheckpointingITCase#testWithMemoryBackendSync`` (``OnceFailingPartitionedSum``,
``CounterSink``: per-key sums in keyed state, exactly once across a failure).

Theory of the check: the sink keeps, in its own checkpointed state, how many times it saw each
window result; the failure (raised once, after a checkpoint completed) rolls the sink back with
the windows' state, so at the end every window fires exactly once with the exact sum and count
of the elements in it. Window operators run at parallelism 1 and 4 (the source at 1), on the
heap and the RocksDB backend (Flink parameterizes over its state backends).
Volumes are scaled down from Flink's (5 keys x 600 elements).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.checkpoint.restore import RestoredCheckpoint
from streamflow.checkpoint.storage import FileSystemCheckpointStorage
from streamflow.datastream.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from streamflow.runtime.operator import StreamOperator

KEYS = 5
N = 600  # elements per key; element i of every key has event time i (gaps for sessions)
SIZE, SLIDE, GAP = 100, 20, 30


class Progress:
    def __init__(self) -> None:
        self.completed = 0
        self.failed = False
        self.final: dict[int, dict[Any, int]] = {}


class ValidatingSink(sf.Sink):
    """Counts each result in checkpointed operator state (``ValidatingSink``'s windowCounts)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def create_operator(self, name: str) -> StreamOperator:
        progress = self.progress

        class _Validating(StreamOperator):
            def initialize_state(self, restored: Any | None) -> None:
                own = None if restored is None else restored.own
                self.seen: dict[Any, int] = {} if own is None else {tuple(k): n for k, n in own}
                progress.final[self.ctx.subtask_index] = self.seen

            async def process_batch(self, records: list, timestamps: Any) -> None:
                for r in records:
                    self.seen[tuple(r)] = self.seen.get(tuple(r), 0) + 1

            def snapshot_state(self, checkpoint_id: int) -> Any:
                return [[list(k), n] for k, n in self.seen.items()]

            def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
                progress.completed += 1

        return _Validating(name)


class FailOnce(sf.MapFunction):
    """``FailingSource``'s failure: once, in the second half, after two checkpoints completed."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def map(self, value: Any) -> Any:
        if not self.progress.failed and self.progress.completed >= 2 and value[1] >= N // 2:
            self.progress.failed = True
            raise RuntimeError(f"injected failure at {value!r}")
        return value


def event_time(i: int, sessions: bool) -> int:
    return i + (i // 40) * 50 if sessions else i  # sessions: a gap of 50 > GAP after every 40


def source(progress: Progress, sessions: bool) -> Callable[[], AsyncIterator[Any]]:
    """``(key, value, event time)``; the second half waits for two completed checkpoints."""

    async def records() -> AsyncIterator[Any]:
        for i in range(N):
            if i == N // 2:
                for _ in range(12_000):
                    if progress.completed >= 2:
                        break
                    await asyncio.sleep(0.005)
            for k in range(KEYS):
                yield (k, i, event_time(i, sessions))
            if i % 20 == 0:
                await asyncio.sleep(0.001)  # let checkpoints pass

    return records


def expected_windows(kind: str) -> set[tuple[int, int, int, int, int]]:
    """(key, start, end, sum of values, count) of every window."""
    sessions = kind == "session"
    times = [(i, event_time(i, sessions)) for i in range(N)]
    windows: dict[tuple[int, int], list[int]] = {}
    if kind == "session":
        start, prev, values = times[0][1], times[0][1], []
        for v, t in times:
            if t - prev >= GAP:
                windows[(start, prev + GAP)] = values
                start, values = t, []
            values.append(v)
            prev = t
        windows[(start, prev + GAP)] = values
    else:
        slide = SIZE if kind == "tumbling" else SLIDE
        for v, t in times:
            last = t - t % slide
            for s in range(last, t - SIZE, -slide):
                windows.setdefault((s, s + SIZE), []).append(v)
    return {(k, s, e, sum(vs), len(vs)) for k in range(KEYS) for (s, e), vs in windows.items()}


def assigner(kind: str) -> Any:
    if kind == "tumbling":
        return TumblingEventTimeWindows.of(SIZE)
    if kind == "sliding":
        return SlidingEventTimeWindows.of(SIZE, SLIDE)
    return EventTimeSessionWindows.with_gap(GAP)


def apply_sum(key: int, window: Any, inputs: Iterable[Any]) -> Iterable[Any]:
    values = [r[1] for r in inputs]
    yield (key, window.start, window.end, sum(values), len(values))


class WithWindow(sf.ProcessWindowFunction):
    """The window function after a pre-aggregation: one ``(key, sum, count)`` per window."""

    def process(self, key: int, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        for _, total, count in elements:
            yield (key, context.window().start, context.window().end, total, count)


class SumCount(sf.AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: Any, accumulator: list[int]) -> list[int]:
        return [accumulator[0] + value[1], accumulator[1] + 1]

    def get_result(self, accumulator: list[int]) -> Any:
        return (None, accumulator[0], accumulator[1])

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


def window_job(
    tmp_path: Path,
    kind: str,
    function: str,
    parallelism: int,
    progress: Progress,
    backend: str,
    sink_uid: str = "sink",
) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    if backend == "rocksdb":  # Flink's StateBackendEnum ROCKSDB_INCREMENTAL (incremental here)
        env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(2, 0))
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e: e[2])
    stream = (
        env.from_async_iterable(source(progress, kind == "session"))
        .uid("src")
        .set_parallelism(1)
        .assign_timestamps_and_watermarks(strategy)
        .map(FailOnce(progress))
        .uid("fail")
        .set_parallelism(1)
    )
    windowed = stream.key_by(lambda r: r[0]).window(assigner(kind))
    if function == "apply":
        out = windowed.apply(apply_sum)
    elif function == "reduce":
        out = (
            stream.map(lambda r: (r[0], r[1], 1))
            .key_by(lambda r: r[0])
            .window(assigner(kind))
            .reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2]), window_function=WithWindow())
        )
    else:
        out = windowed.aggregate(SumCount(), window_function=WithWindow())
    out.uid("window").sink_to(ValidatingSink(progress)).uid(sink_uid)
    return env


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("function", ["apply", "reduce", "aggregate"])
@pytest.mark.parametrize("kind", ["tumbling", "sliding", "session"])
@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_event_time_windows_exactly_once_across_a_failure(
    tmp_path: Path, backend: str, kind: str, function: str, parallelism: int
) -> None:
    """``test{,PreAggregated}{Tumbling,Sliding}TimeWindow`` (and sessions): every window
    fires exactly once with its exact sum and count although the job failed and restored."""
    progress = Progress()
    window_job(tmp_path, kind, function, parallelism, progress, backend).execute(kind)
    assert progress.failed, "the failure was not injected"
    counts: dict[Any, int] = {}
    for seen in progress.final.values():
        for result, n in seen.items():
            counts[result] = counts.get(result, 0) + n
    assert set(counts) == expected_windows(kind)
    assert {r: n for r, n in counts.items() if n != 1} == {}


class PartitionedSum(sf.KeyedProcessFunction):
    """``KeyedStateCheckpointingITCase.OnceFailingPartitionedSum``: a running sum per key in
    keyed ``ValueState``, emitting ``(key, sum)``."""

    def open(self, ctx: sf.RuntimeContext) -> None:
        self.sum = ctx.get_state(sf.ValueStateDescriptor("sum"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        total = (self.sum.value() or 0) + value[1]
        self.sum.update(total)
        yield (value[0], total)


@pytest.mark.parametrize("parallelism", [1, 4])
def test_keyed_state_sums_exactly_once_across_a_failure(tmp_path: Path, parallelism: int) -> None:
    """``KeyedStateCheckpointingITCase#testWithMemoryBackendSync``: the counter sink (in
    checkpointed state) holds each key's running sums exactly once; the last is the full sum."""
    progress = Progress()
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(2, 0))
    (
        env.from_async_iterable(source(progress, False))
        .uid("src")
        .set_parallelism(1)
        .map(FailOnce(progress))
        .uid("fail")
        .set_parallelism(1)
        .key_by(lambda r: r[0])
        .process(PartitionedSum())
        .uid("sum")
        .sink_to(ValidatingSink(progress))
        .uid("sink")
    )
    env.execute("keyed sums")
    assert progress.failed
    counts: dict[Any, int] = {}
    for seen in progress.final.values():
        for result, n in seen.items():
            counts[result] = counts.get(result, 0) + n
    running = {(k, sum(range(i + 1))) for k in range(KEYS) for i in range(N)}
    assert set(counts) == running
    assert {r: n for r, n in counts.items() if n != 1} == {}


@pytest.mark.parametrize(("old", "new"), [(4, 2), (2, 4)])
def test_windows_restore_a_retained_checkpoint_at_another_parallelism(
    tmp_path: Path, old: int, new: int
) -> None:
    """``RescalingITCase#testCheckpointRescalingInKeyedState`` / ``...OutKeyedState`` (newer
    Flink: rescaling from a retained checkpoint) with the window operator of this file: the
    windows' state of an aligned checkpoint taken mid-stream restores at another parallelism
    and every window fires once across the two runs."""
    progress = Progress()
    progress.failed = True  # no failure: run to the end, keeping every checkpoint
    env = window_job(tmp_path, "tumbling", "apply", old, progress, "heap")
    env.get_checkpoint_config().set_max_retained_checkpoints(1_000)
    env.execute("windows")
    handles = FileSystemCheckpointStorage(tmp_path / "chk").complete_checkpoints()
    assert len(handles) >= 3
    middle = handles[len(handles) // 2]
    # the first run's sink state as of that checkpoint: what it had emitted by then
    before: dict[Any, int] = {}
    for own in RestoredCheckpoint.load(middle, sf.CheckpointConfig().codec).ops["sink"].values():
        for k, n in own or []:
            before[tuple(k)] = before.get(tuple(k), 0) + n
    progress2 = Progress()
    progress2.failed, progress2.completed = True, 2
    env2 = window_job(tmp_path / "second", "tumbling", "apply", new, progress2, "heap", "sink-2")
    # the verifying sink's own (non-keyed) state cannot be rescaled (Flink's NON_PARTITIONED
    # rule, RescalingITCase#testSavepointRescalingNonPartitionedStateCausesException): the
    # second run has a fresh sink and the first run's count comes from the checkpoint
    env2.configure(
        {"execution.savepoint.path": str(middle.path), "execution.savepoint.ignore-unclaimed-state": "true"}
    )
    env2.execute("windows")
    counts = dict(before)
    for seen in progress2.final.values():
        for result, n in seen.items():
            counts[result] = counts.get(result, 0) + n
    assert set(counts) == expected_windows("tumbling")
    assert {r: n for r, n in counts.items() if n != 1} == {}
