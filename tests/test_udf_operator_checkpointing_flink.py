"""Rolling aggregations and a keyed reduce across a failure, ported from Flink's
``flink-tests/src/test/java/org/apache/flink/test/checkpointing/UdfStreamOperatorCheckpointingITCase.java``
(``testProgram``/``postSubmit``: ``StatefulMultipleSequence``, ``OnceFailingIdentityMapFunction``,
the built-in ``min(1)`` and a UDF ``reduce`` summing field 1; ``sum(1)`` and ``max_by(1)`` added).

The source emits ``(k, n)`` for every key ``k`` and ``n = 1..N``; ``min(1)`` must say 1 for
every element and the reduce must emit each key's running sums ``1, 3, 6, ...``. A map after
each fails once, in the second half, after two checkpoints completed; the job restores the
aggregations' state from the last checkpoint. Flink checks the last 1,000 outputs of each key
in a plain sink (at least once); here the sink counts every result in its checkpointed state
(``ValidatingSink`` of ``test_window_checkpointing_flink.py``), so the check is stronger:
every running sum exactly once, and ``(k, 1)`` exactly N times. Small batches, on the heap and
the RocksDB backend, at parallelism 1 and 4: the aggregations' inlined batch folds and their
incremental-checkpoint logs (``runtime/keyed_operators.py``) restore exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_window_checkpointing_flink import Progress, ValidatingSink

import streamflow as sf

KEYS = 4
N = 600


class _OnceFailing(sf.MapFunction):
    """``OnceFailingIdentityMapFunction``: one failure, in the second half of the input (the
    count of elements seen, over all subtasks and attempts)."""

    def __init__(self, progress: Progress, seen: list[int]) -> None:
        self.progress, self.seen = progress, seen

    def map(self, value: Any) -> Any:
        self.seen[0] += 1
        if not self.progress.failed and self.progress.completed >= 2 and self.seen[0] >= KEYS * N // 2:
            self.progress.failed = True
            raise RuntimeError(f"injected failure at {value!r}")
        return value[:2]


def _sequence(progress: Progress) -> Any:
    """``StatefulMultipleSequence`` (one subtask, so in order): ``(k, n, n)`` for every key
    (the reduce keeps the last position in field 2)."""

    async def records() -> AsyncIterator[Any]:
        for n in range(1, N + 1):
            if n == N // 2:
                while progress.completed < 2:
                    await asyncio.sleep(0.002)
            for k in range(KEYS):
                yield (k, n, n)
            if n % 20 == 0:
                await asyncio.sleep(0.001)  # let checkpoints pass

    return records


def _job(
    tmp_path: Path, progress: Progress, parallelism: int, backend: str, which: str
) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(8)
    if backend == "rocksdb":
        env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(2, 0))
    keyed = env.from_async_iterable(_sequence(progress)).uid("src").set_parallelism(1).key_by(lambda r: r[0])
    out = (
        keyed.reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
        if which == "reduce"
        else getattr(keyed, which)(1)
    )
    (
        out.uid(which)
        .map(_OnceFailing(progress, [0]))
        .uid("fail")
        .set_parallelism(1)  # one copy of the function: one count, one failure
        .key_by(lambda r: r[0])
        .map(lambda r: r)
        .uid("by-key")
        .sink_to(ValidatingSink(progress))
        .uid("sink")
    )
    return env


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("which", ["min", "reduce", "sum", "max_by"])
@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_rolling_aggregations_exactly_once_across_a_failure(
    tmp_path: Path, backend: str, which: str, parallelism: int
) -> None:
    """``postSubmit``: ``min(1)`` is 1 for every element of every key; the reduce (and
    ``sum(1)``) emits every running sum of every key, ``max_by(1)`` every element, each exactly
    once, though the job failed and restored."""
    progress = Progress()
    _job(tmp_path, progress, parallelism, backend, which).execute(which)
    assert progress.failed, "the failure was not injected"
    counts: dict[Any, int] = {}
    for seen in progress.final.values():
        for result, n in seen.items():
            counts[result] = counts.get(result, 0) + n
    if which == "min":
        assert counts == {(k, 1): N for k in range(KEYS)}
    elif which == "max_by":
        assert counts == {(k, n): 1 for k in range(KEYS) for n in range(1, N + 1)}
    else:
        assert counts == {(k, n * (n + 1) // 2): 1 for k in range(KEYS) for n in range(1, N + 1)}
