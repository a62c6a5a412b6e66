"""Which former subtasks' states a sink subtask takes on restore, at any parallelism.

A transactional sink's state belongs to the subtask that wrote it (its pending files, its
uncommitted transactions), so on a rescale someone must finish it: subtask *i* of *p* takes
the state of every former subtask *j* with *j* mod *p* = *i*, as Flink redistributes writer
and committer state round-robin. At the same parallelism each subtask takes its own. A state
records its subtask index (``"subtask"``); one without it counts by its position.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["taken_states"]

log = logging.getLogger(__name__)


def _subtask_of(state: Any, default: int) -> int:
    sub = state.get("subtask") if isinstance(state, dict) else None
    return sub if type(sub) is int else default


def taken_states(restored: Any | None, subtask: int, parallelism: int, what: str) -> list[tuple[int, Any]]:
    """``[(former subtask, state), ...]`` that subtask ``subtask`` of ``parallelism`` takes.
    ``restored``: an ``OperatorRestore`` (every former subtask's state), one state, or None;
    ``what`` names the operator in the log line of a rescale."""
    if restored is None:
        return []
    if not hasattr(restored, "all"):  # one state, handed over as it is
        return [(_subtask_of(restored, subtask), restored)]
    indexed = [(_subtask_of(s, j), s) for j, s in enumerate(restored.all) if s is not None]
    if len(restored.all) == parallelism:
        return [(j, s) for j, s in indexed if j == subtask]
    taken = [(j, s) for j, s in indexed if j % parallelism == subtask]
    if taken:
        log.info("%s subtask %d takes the state of subtasks %s (rescaled from %d to %d)",
                 what, subtask, [j for j, _ in taken], len(restored.all), parallelism)
    return taken
