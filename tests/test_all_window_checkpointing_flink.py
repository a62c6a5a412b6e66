"""Non-keyed (all) event-time windows with a failure injected after a checkpoint, ported from
Flink's ``flink-tests/src/test/java/org/apache/flink/test/checkpointing/
EventTimeAllWindowCheckpointingITCase.java`` (``testTumblingTimeWindow``,
``testSlidingTimeWindow``, ``testPreAggregatedTumblingTimeWindow``,
``testPreAggregatedSlidingTimeWindow``, ``testSessionWindow``...; ``FailingSource``,
``ValidatingSink``), on the heap and the RocksDB backend.

Theory of the check (that of ``test_window_checkpointing_flink``, whose source, failure and
validating sink this reuses): ``window_all`` runs at parallelism 1 over every key's records;
its windows' contents live in checkpointed state, the failure rolls the window and the sink
back to the last completed checkpoint, and at the end every window fires exactly once with
the sum and count of all keys' elements in it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from test_window_checkpointing_flink import (
    KEYS,
    FailOnce,
    Progress,
    ValidatingSink,
    assigner,
    expected_windows,
    source,
)

import streamflow as sf
from streamflow.functions import ProcessAllWindowFunction


class SumCountAll(sf.AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: Any, accumulator: list[int]) -> list[int]:
        return [accumulator[0] + value[1], accumulator[1] + 1]

    def get_result(self, accumulator: list[int]) -> Any:
        return (accumulator[0], accumulator[1])

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


class WithWindowAll(ProcessAllWindowFunction):
    def process(self, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        for total, count in elements:
            yield (context.window().start, context.window().end, total, count)


def apply_all(window: Any, inputs: Iterable[Any]) -> Iterable[Any]:
    values = [r[1] for r in inputs]
    yield (window.start, window.end, sum(values), len(values))


def expected_all(kind: str) -> set[tuple[int, int, int, int]]:
    """Every window over all keys: the keyed windows' sums and counts times ``KEYS``."""
    return {(s, e, total * KEYS, n * KEYS) for k, s, e, total, n in expected_windows(kind) if k == 0}


@pytest.mark.parametrize(
    ("backend", "kind", "function"),
    [
        ("heap", "tumbling", "apply"),
        ("heap", "sliding", "reduce"),
        ("heap", "session", "aggregate"),
        ("rocksdb", "tumbling", "aggregate"),
        ("rocksdb", "sliding", "apply"),
        ("rocksdb", "session", "reduce"),
    ],
)
def test_all_windows_exactly_once_across_a_failure(
    tmp_path: Path, backend: str, kind: str, function: str
) -> None:
    """Every all-window fires exactly once with its exact sum and count across the failure."""
    progress = Progress()
    env = sf.StreamExecutionEnvironment().set_parallelism(2).set_batch_size(16)
    if backend == "rocksdb":
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
        .rebalance()
        .map(lambda r: r)
        .uid("spread")
    )
    if function == "apply":
        out = stream.window_all(assigner(kind)).apply(apply_all)
    elif function == "reduce":
        out = (
            stream.map(lambda r: (r[0], r[1], 1))
            .uid("ones")
            .window_all(assigner(kind))
            .reduce(
                lambda a, b: (a[0], a[1] + b[1], a[2] + b[2]),
                window_function=lambda w, xs: [(w.start, w.end, x[1], x[2]) for x in xs],
            )
        )
    else:
        out = stream.window_all(assigner(kind)).aggregate(SumCountAll(), window_function=WithWindowAll())
    out.uid("window").sink_to(ValidatingSink(progress)).uid("sink")
    env.execute(kind)
    assert progress.failed, "the failure was not injected"
    counts: dict[Any, int] = {}
    for seen in progress.final.values():
        for result, n in seen.items():
            counts[result] = counts.get(result, 0) + n
    assert set(counts) == expected_all(kind)
    assert {r: n for r, n in counts.items() if n != 1} == {}
