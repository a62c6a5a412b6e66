"""Processing-time windows across a failure, ported from Flink's
``flink-tests/src/test/java/org/apache/flink/test/checkpointing/ProcessingTimeWindowCheckpointingITCase.java``
(``testTumblingProcessingTimeWindow``, ``testSlidingProcessingTimeWindow``,
``testAggregatingTumblingProcessingTimeWindow``, ``testAggregatingSlidingProcessingTimeWindow``).

Each element ``(i, i)`` is its own key, so it is in exactly one tumbling window (100 ms) or
three sliding ones (150 ms sliding by 50 ms); the window function emits ``(key, 1)`` per
element (the apply cases) or per window (the reduce cases); the validating sink counts per
key in its checkpointed state. The source fails once, in the second half, after two
checkpoints completed; the job restores the windows' state, their processing-time timers
and the sink's counts from the last checkpoint, so at the end every key was counted exactly
once per window it belongs to. Time is a ``ManualClock`` the source advances (5 ms an
element), so the windows close at exact, repeatable points; after the last element it moves
past every window and waits for the sink to have counted everything (Flink's source also runs
until its checker succeeds). Window operators run at parallelism 1 and 4, the source at 1,
as Flink's rebalance to PARALLELISM = 4.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest
from test_window_checkpointing_flink import Progress, ValidatingSink

import streamflow as sf
from streamflow.testing import ManualClock
from streamflow.windowing import SlidingProcessingTimeWindows, TumblingProcessingTimeWindows

N = 400
STEP_MS = 5


class _FailOnce(sf.MapFunction):
    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def map(self, value: Any) -> Any:
        if not self.progress.failed and self.progress.completed >= 2 and value[0] >= N // 2:
            self.progress.failed = True
            raise RuntimeError(f"injected failure at {value!r}")
        return value


def _counted(progress: Progress) -> int:
    return sum(n for seen in progress.final.values() for n in seen.values())


def _source(progress: Progress, clock: ManualClock, expected: int) -> Any:
    async def records() -> AsyncIterator[Any]:
        for i in range(N):
            if i == N // 2:  # the second half after two completed checkpoints
                while progress.completed < 2:
                    clock.advance(STEP_MS)
                    await asyncio.sleep(0)
            yield (i, i)
            clock.advance(STEP_MS)
            await asyncio.sleep(0)
        clock.advance(1_000)  # every window's end has passed
        for _ in range(100_000):  # until the sink holds every count (then the job may end)
            if _counted(progress) >= expected and progress.completed >= 4:
                break
            clock.advance(STEP_MS)
            await asyncio.sleep(0)

    return records


def _apply(key: int, window: Any, values: Iterable[Any]) -> Iterable[Any]:
    for value in values:
        assert value[0] == value[1]
        yield (value[0], 1)


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("function", ["apply", "reduce"])
@pytest.mark.parametrize("kind", ["tumbling", "sliding"])
def test_processing_time_windows_exactly_once_across_a_failure(
    tmp_path: Path, kind: str, function: str, parallelism: int
) -> None:
    """``test{,Aggregating}{Tumbling,Sliding}ProcessingTimeWindow``: every key counted once per
    window it belongs to (1 tumbling, 3 sliding), though the job failed and restored."""
    per_key = 1 if kind == "tumbling" else 3
    progress = Progress()
    clock = ManualClock(0)
    env = sf.StreamExecutionEnvironment(clock=clock).set_parallelism(parallelism).set_batch_size(16)
    env.enable_checkpointing(20)
    env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(1, 0))
    assigner = (
        TumblingProcessingTimeWindows.of(100)
        if kind == "tumbling"
        else SlidingProcessingTimeWindows.of(150, 50)
    )
    stream = (
        env.from_async_iterable(_source(progress, clock, N * per_key))
        .uid("src")
        .set_parallelism(1)
        .map(_FailOnce(progress))
        .uid("fail")
        .set_parallelism(1)
    )
    if function == "apply":
        out = stream.rebalance().key_by(lambda r: r[0]).window(assigner).apply(_apply)
    else:
        out = (
            stream.map(lambda r: (r[0], 1))
            .rebalance()
            .key_by(lambda r: r[0])
            .window(assigner)
            .reduce(lambda a, b: (a[0], 1))
        )
    out.uid("window").sink_to(ValidatingSink(progress)).uid("sink").set_parallelism(1)
    env.execute(f"{kind} {function}")
    assert progress.failed, "the failure was not injected"
    counts: dict[int, int] = {}
    for seen in progress.final.values():
        for (key, one), n in seen.items():
            counts[key] = counts.get(key, 0) + one * n
    assert sorted(counts) == list(range(N))
    assert {k: n for k, n in counts.items() if n != per_key} == {}
