"""Count windows (PyFlink's ``CountTumblingWindowAssigner`` / ``CountSlidingWindowAssigner``: the
element count per key in keyed state, windows of ``size`` elements firing once full),
exactly once across an injected failure and across a rescale from a retained checkpoint, heap
and RocksDB: the pattern of Flink's
``flink-tests/src/test/java/org/apache/flink/test/checkpointing/EventTimeWindowCheckpointingITCase.java``
(``FailingSource``/``ValidatingSink``) and ``RescalingITCase#testCheckpointRescaling*KeyedState``
over the windows of ``KeyedStream.count_window(size[, slide])``.

Theory of the check: the assigner's per-key element count and the count trigger's per-window
count live in keyed state, the elements in the window's list state; after the failure (or the
restore at another parallelism) all must be exactly as of the checkpoint, so every window
fires once with exactly its ``size`` elements.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from test_window_checkpointing_flink import KEYS, FailOnce, N, Progress, ValidatingSink, source

import streamflow as sf
from streamflow.checkpoint.restore import RestoredCheckpoint
from streamflow.checkpoint.storage import FileSystemCheckpointStorage

SIZE, SLIDE = 10, 3


def summarize(key: int, window: Any, inputs: Iterable[Any]) -> Iterable[Any]:
    values = [r[1] for r in inputs]
    yield (key, values[0], values[-1], sum(values), len(values))


def expected(kind: str) -> set[tuple[int, int, int, int, int]]:
    windows = []
    if kind == "tumbling":
        windows = [list(range(c - SIZE, c)) for c in range(SIZE, N + 1, SIZE)]
    else:
        # PyFlink's CountSlidingWindowAssigner: count windows of SIZE elements starting every
        # SLIDE elements, each firing once full
        windows = [list(range(s, s + SIZE)) for s in range(0, N - SIZE + 1, SLIDE)]
    return {(k, w[0], w[-1], sum(w), len(w)) for k in range(KEYS) for w in windows}


def count_job(
    tmp_path: Path, kind: str, parallelism: int, progress: Progress, backend: str, sink_uid: str = "sink"
) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    if backend == "rocksdb":
        env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    env.enable_checkpointing(10)
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    cfg.set_max_retained_checkpoints(1_000)
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(2, 0))
    keyed = (
        env.from_async_iterable(source(progress, False))
        .uid("src")
        .set_parallelism(1)
        .map(FailOnce(progress))
        .uid("fail")
        .set_parallelism(1)
        .key_by(lambda r: r[0])
    )
    windowed = keyed.count_window(SIZE) if kind == "tumbling" else keyed.count_window(SIZE, SLIDE)
    windowed.apply(summarize).uid("window").sink_to(ValidatingSink(progress)).uid(sink_uid)
    return env


def counted(progress: Progress, before: dict[Any, int] | None = None) -> dict[Any, int]:
    counts = dict(before or {})
    for seen in progress.final.values():
        for result, n in seen.items():
            counts[result] = counts.get(result, 0) + n
    return counts


@pytest.mark.parametrize("kind", ["tumbling", "sliding"])
@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_count_windows_exactly_once_across_a_failure(tmp_path: Path, backend: str, kind: str) -> None:
    progress = Progress()
    count_job(tmp_path, kind, 3, progress, backend).execute(kind)
    assert progress.failed, "the failure was not injected"
    counts = counted(progress)
    assert set(counts) == expected(kind)
    assert {r: n for r, n in counts.items() if n != 1} == {}


@pytest.mark.parametrize(("backend", "old", "new"), [("heap", 4, 3), ("rocksdb", 2, 4)])
def test_count_windows_rescale_from_a_retained_checkpoint(
    tmp_path: Path, backend: str, old: int, new: int
) -> None:
    progress = Progress()
    progress.failed = True
    count_job(tmp_path, "sliding", old, progress, backend).execute("count")
    handles = FileSystemCheckpointStorage(tmp_path / "chk").complete_checkpoints()
    assert len(handles) >= 3
    middle = handles[len(handles) // 2]
    before: dict[Any, int] = {}
    for own in RestoredCheckpoint.load(middle, sf.CheckpointConfig().codec).ops["sink"].values():
        for k, n in own or []:
            before[tuple(k)] = before.get(tuple(k), 0) + n
    progress2 = Progress()
    progress2.failed, progress2.completed = True, 2
    env2 = count_job(tmp_path / "second", "sliding", new, progress2, backend, "sink-2")
    env2.configure(
        {"execution.savepoint.path": str(middle.path), "execution.savepoint.ignore-unclaimed-state": "true"}
    )
    env2.execute("count")
    counts = counted(progress2, before)
    assert set(counts) == expected("sliding")
    assert {r: n for r, n in counts.items() if n != 1} == {}
