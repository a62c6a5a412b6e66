"""Keyed state, timers and windows exactly once across several failures of one job (the
second and third restoring checkpoints taken after the first restore), heap (incremental and
full checkpoints) and RocksDB (its checkpoints are always incremental here): Flink's
``StreamFaultToleranceTestBase`` pattern
(``flink-tests/src/test/java/org/apache/flink/test/checkpointing/StreamFaultToleranceTestBase.java``,
``KeyedStateCheckpointingITCase#testWith{MemoryBackendSync,RocksDbBackendFull,RocksDbBackendIncremental}``,
``EventTimeWindowCheckpointingITCase``) with the failure repeated, as Flink's
``UnalignedCheckpointITCase`` does (its ``FailingMapper`` fails several times).

Theory of the check: a failure before any checkpoint restarts from nothing (the local state of
the failed attempt, e.g. a RocksDB instance, must not leak into the new one); later failures
restore the latest completed checkpoint, which for incremental RocksDB is a chain whose base
was written by an earlier attempt. The validating sink's checkpointed counts then hold every
running sum and every window exactly once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from test_window_checkpointing_flink import (
    KEYS,
    N,
    PartitionedSum,
    Progress,
    ValidatingSink,
    expected_windows,
)

import streamflow as sf
from streamflow.common import Types
from streamflow.datastream.window import TumblingEventTimeWindows
from streamflow.functions import ProcessWindowFunction


class SharedProgress(Progress):
    """One object for every copy of the functions (Flink's tests keep such counters in static
    fields): a restarted attempt's copy of the failing map sees the failures so far."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0
        self.completed_at_failure = 0  # checkpoints completed when the last failure was injected

    def due(self, value: int) -> bool:
        """Whether the next failure is due at ``value``: at or past its point, and once two
        checkpoints completed since the last failure (the first failure needs none)."""
        if self.failures >= len(FailRepeatedly.POINTS):
            return False
        needed = 0 if self.failures == 0 else self.completed_at_failure + 2
        return value >= FailRepeatedly.POINTS[self.failures] and self.completed >= needed

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedProgress:
        return self


class FailRepeatedly(sf.MapFunction):
    """Fails at the first record at or past each point, the second and third once two more
    checkpoints completed (the source holds until then: ``holding_source``)."""

    POINTS = [40, N // 2 + 20, N // 2 + 150]

    def __init__(self, progress: SharedProgress) -> None:
        self.progress = progress

    def map(self, value: Any) -> Any:
        progress = self.progress
        if progress.due(value[1]):
            progress.failures += 1
            progress.completed_at_failure = progress.completed
            progress.failed = True
            raise RuntimeError(f"injected failure {progress.failures} at {value!r}")
        return value


def holding_source(progress: SharedProgress) -> Callable[[], AsyncIterator[Any]]:
    """``(key, value, event time)``; before each failure point waits (at most 60 s) until the
    failure is due, so every failure restores a checkpoint of the attempt before it."""

    async def records() -> AsyncIterator[Any]:
        for i in range(N):
            if i in FailRepeatedly.POINTS[1:]:
                for _ in range(12_000):
                    if progress.due(i) or progress.failures > FailRepeatedly.POINTS.index(i):
                        break
                    await asyncio.sleep(0.005)
            for k in range(KEYS):
                yield (k, i, i)
            if i % 20 == 0:
                await asyncio.sleep(0.001)  # let checkpoints pass

    return records


def apply_sum(key: int, window: Any, inputs: Any) -> Any:
    values = [r[1] for r in inputs]
    yield (key, window.start, window.end, sum(values), len(values))


class NumberedFirings(ProcessWindowFunction):
    """Numbers each key's firings in ``global_state`` and keeps the window's sum in
    ``window_state`` (both keyed state the restore must bring back exactly)."""

    def process(self, key: int, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        firings = context.global_state().get_state(sf.ValueStateDescriptor("firings", Types.INT()))
        n = (firings.value() or 0) + 1
        firings.update(n)
        total = context.window_state().get_state(sf.ValueStateDescriptor("total", Types.INT()))
        total.update(sum(r[1] for r in elements))
        yield (key, n, context.window().start, total.value())


def expected_of(what: str) -> set[Any]:
    if what == "sums":
        return {(k, sum(range(i + 1))) for k in range(KEYS) for i in range(N)}
    if what == "windows":
        return expected_windows("tumbling")
    if what == "window-state":
        return {(k, s // 100 + 1, s, sum(range(s, s + 100))) for k in range(KEYS) for s in range(0, N, 100)}
    # count windows of 10 elements every 3 (PyFlink's CountSlidingWindowAssigner)
    return {(k, s, sum(range(s, s + 10))) for k in range(KEYS) for s in range(0, N - 9, 3)}


@pytest.mark.parametrize(
    ("what", "parallelism"), [("sums", 1), ("windows", 3), ("window-state", 3), ("count", 3)]
)
@pytest.mark.parametrize("backend", ["heap", "heap-full", "rocksdb"])
def test_exactly_once_across_repeated_failures(
    tmp_path: Path, backend: str, what: str, parallelism: int
) -> None:
    progress = SharedProgress()
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    if backend == "rocksdb":
        env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    env.enable_checkpointing(10)
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    cfg.enable_incremental_checkpoints(backend != "heap-full")  # RocksDB: always incremental
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(5, 0))
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e: e[2])
    stream = (
        env.from_async_iterable(holding_source(progress))
        .uid("src")
        .set_parallelism(1)
        .assign_timestamps_and_watermarks(strategy)
        .map(FailRepeatedly(progress))
        .uid("fail")
        .set_parallelism(1)
        .key_by(lambda r: r[0])
    )
    if what == "sums":
        out = stream.process(PartitionedSum()).uid("sum")
    elif what == "windows":
        out = stream.window(TumblingEventTimeWindows.of(100)).apply(apply_sum).uid("window")
    elif what == "window-state":
        out = stream.window(TumblingEventTimeWindows.of(100)).process(NumberedFirings()).uid("window")
    else:
        out = stream.count_window(10, 3).apply(lambda k, w, xs: [(k, xs[0][1], sum(x[1] for x in xs))])
        out = out.uid("window")
    out.sink_to(ValidatingSink(progress)).uid("sink")
    env.execute(what)
    assert progress.failures == len(FailRepeatedly.POINTS), "not every failure was injected"
    counts: dict[Any, int] = {}
    for seen in progress.final.values():
        for result, n in seen.items():
            counts[result] = counts.get(result, 0) + n
    assert set(counts) == expected_of(what)
    assert {r: n for r, n in counts.items() if n != 1} == {}
