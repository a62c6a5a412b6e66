"""Window state (merging session windows, sliding panes, pre-aggregated accumulators) restored
from a retained checkpoint at another parallelism on both backends, ported from Flink's
``flink-tests/src/test/java/org/apache/flink/test/checkpointing/RescalingITCase.java``
(``testCheckpointRescalingInKeyedState`` / ``...OutKeyedState``, rescaling from a retained
checkpoint) over the window jobs of ``EventTimeWindowCheckpointingITCase`` (parameterized
there over the heap and RocksDB backends).

Theory of the check (as ``test_windows_restore_a_retained_checkpoint_at_another_parallelism``,
which covers tumbling windows on the heap): the first run keeps every checkpoint; a checkpoint
from the middle restores into a second run at another parallelism with a fresh sink, and the
first run's sink counts as of that checkpoint plus the second run's count every window exactly
once with its exact sum and count (so every window's contents, merging-window metadata and
timers moved with their key groups).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_window_checkpointing_flink import Progress, expected_windows, window_job

import streamflow as sf
from streamflow.checkpoint.restore import RestoredCheckpoint
from streamflow.checkpoint.storage import FileSystemCheckpointStorage


@pytest.mark.parametrize(
    ("backend", "kind", "function", "old", "new"),
    [
        ("heap", "session", "apply", 4, 3),
        ("rocksdb", "session", "aggregate", 2, 4),
        ("rocksdb", "sliding", "reduce", 4, 3),
        ("heap", "sliding", "reduce", 2, 4),
    ],
)
def test_windows_rescale_from_a_retained_checkpoint(
    tmp_path: Path, backend: str, kind: str, function: str, old: int, new: int
) -> None:
    progress = Progress()
    progress.failed = True  # no failure: run to the end, keeping every checkpoint
    env = window_job(tmp_path, kind, function, old, progress, backend)
    env.get_checkpoint_config().set_max_retained_checkpoints(1_000)
    env.execute("windows")
    handles = FileSystemCheckpointStorage(tmp_path / "chk").complete_checkpoints()
    assert len(handles) >= 3
    middle = handles[len(handles) // 2]
    before: dict[Any, int] = {}
    for own in RestoredCheckpoint.load(middle, sf.CheckpointConfig().codec).ops["sink"].values():
        for k, n in own or []:
            before[tuple(k)] = before.get(tuple(k), 0) + n
    progress2 = Progress()
    progress2.failed, progress2.completed = True, 2
    env2 = window_job(tmp_path / "second", kind, function, new, progress2, backend, "sink-2")
    env2.configure(
        {"execution.savepoint.path": str(middle.path), "execution.savepoint.ignore-unclaimed-state": "true"}
    )
    env2.execute("windows")
    counts = dict(before)
    for seen in progress2.final.values():
        for result, n in seen.items():
            counts[result] = counts.get(result, 0) + n
    assert set(counts) == expected_windows(kind)
    assert {r: n for r, n in counts.items() if n != 1} == {}
