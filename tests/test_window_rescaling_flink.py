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
    ("backend", "kind", "function", "old", "new", "fail_after"),
    [
        ("heap", "session", "apply", 4, 3, False),
        ("rocksdb", "session", "aggregate", 2, 4, False),
        ("rocksdb", "sliding", "reduce", 4, 3, False),
        ("heap", "sliding", "reduce", 2, 4, False),
        ("rocksdb", "tumbling", "apply", 2, 3, True),
        ("rocksdb", "session", "aggregate", 4, 2, True),
    ],
)
def test_windows_rescale_from_a_retained_checkpoint(
    tmp_path: Path, backend: str, kind: str, function: str, old: int, new: int, fail_after: bool
) -> None:
    """``fail_after``: the rescaled run fails once after two checkpoints and restores its own
    (a rescaled RocksDB restore followed by a second restore)."""
    progress = Progress()
    progress.failed = True  # no failure: run to the end, keeping every checkpoint
    env = window_job(tmp_path, kind, function, old, progress, backend)
    env.get_checkpoint_config().set_max_retained_checkpoints(1_000)
    env.execute("windows")
    handles = FileSystemCheckpointStorage(tmp_path / "chk").complete_checkpoints()
    assert len(handles) >= 3
    middle = handles[len(handles) // (3 if fail_after else 2)]
    before: dict[Any, int] = {}
    for own in RestoredCheckpoint.load(middle, sf.CheckpointConfig().codec).ops["sink"].values():
        for k, n in own or []:
            before[tuple(k)] = before.get(tuple(k), 0) + n
    progress2 = Progress()
    if not fail_after:
        progress2.failed, progress2.completed = True, 2
    env2 = window_job(tmp_path / "second", kind, function, new, progress2, backend, "sink-2")
    env2.configure(
        {"execution.savepoint.path": str(middle.path), "execution.savepoint.ignore-unclaimed-state": "true"}
    )
    env2.execute("windows")
    assert progress2.failed, "the failure was not injected"
    counts = dict(before)
    for seen in progress2.final.values():
        for result, n in seen.items():
            counts[result] = counts.get(result, 0) + n
    assert set(counts) == expected_windows(kind)
    assert {r: n for r, n in counts.items() if n != 1} == {}
