"""The fast path's panes as tracked tables of the keyed backend (incremental checkpoints).

Theory of operation
-------------------
The window operator's fast path (tumbling event-time windows, default trigger, no
evictor) keeps its state as panes ``{window: {key: acc}}``. Each pane is a table of
the heap keyed backend, named ``window-pane:<start>:<end>`` (kind ``window``), handed
out *tracked* (``KeyedStateBackend.tracked_table``), so the backend's incremental
checkpoints cover it as they cover keyed reduce state: a checkpoint encodes only the
keys written since the last one, in slices that pause through the loop budget, and
never computes a key group (``state/incremental.py``).

What is logged: after each record batch, per pane the keys the batch wrote, with their
accumulators (one ``Changes.extend`` per pane and batch, no per-record hashing). When
a pane is dropped (its cleanup time passed) every key it held is logged as deleted
(a restore from a chain written before then must not bring the pane back), the table is
emptied, and once no checkpoint that may still name it is pending, the backend forgets
it (``discard_tables``: at once when nothing names it, as in a job without checkpoints,
else when a checkpoint completes).

Without incremental checkpoints (no storage, or switched off) the tables are plain
untracked tables: the backend's full snapshots hold them by key group as they hold any
state, and a restore, at any parallelism, brings them back by name.
"""

from __future__ import annotations

from collections import deque
from itertools import repeat
from typing import Any

from ..state import incremental as _inc
from ..windowing.windows import TimeWindow
from .loop_budget import yield_point

PREFIX = "window-pane:"


def pane_name(window: TimeWindow) -> str:
    return f"{PREFIX}{window.start}:{window.end}"


def pane_window(name: str) -> TimeWindow:
    start, end = name[len(PREFIX) :].split(":")
    return TimeWindow(int(start), int(end))


class PaneTables:
    """The panes of one fast-path window operator and the logs of their writes."""

    def __init__(self, backend: Any, panes: dict[TimeWindow, dict[Any, Any]]) -> None:
        self.backend = backend
        self.panes = panes
        self.changes: dict[TimeWindow, _inc.Changes | None] = {}
        self.retired: list[str] = []  # emptied tables the backend still holds

    def new(self, window: TimeWindow) -> dict[Any, Any]:
        table, changes = self.backend.tracked_table(pane_name(window), "window")
        self.panes[window] = table
        self.changes[window] = changes
        return table

    def log(self, touched: dict[TimeWindow, list]) -> None:
        """Log what one record batch wrote: ``touched`` holds per pane the keys, in order."""
        panes = self.panes
        for window, keys in touched.items():
            changes = self.changes.get(window)
            if changes is not None and keys:
                changes.extend(keys, list(map(panes[window].__getitem__, keys)))

    async def drop(self, window: TimeWindow, held: list | None = None) -> None:
        """Forget a pane: its keys are logged as deleted and removed from its table, a slice
        at a time between loop budget checks (freeing a million accumulators at once is a
        long hold). The task is inside a watermark meanwhile: no capture can run. ``held``:
        the keys the pane held (a superset of those still in it), when the caller already
        took some out as they fired (``window_fast_path.fire_panes``)."""
        pane = self.panes.pop(window)
        changes = self.changes.pop(window, None)
        self.retired.append(pane_name(window))
        keys = list(pane) if held is None else held
        for start in range(0, len(keys), _inc.CHUNK):
            part = keys[start : start + _inc.CHUNK]
            if changes is not None:
                changes.extend(part, [_inc.MISSING] * len(part))
                changes.deletes = True
            if held is None:
                deque(map(pane.__delitem__, part), 0)
            elif pane:
                deque(map(pane.pop, part, repeat(None, len(part))), 0)
            if len(part) == _inc.CHUNK:
                await yield_point()
        # forgotten now when nothing may still name it (no log of writes, no pending
        # checkpoint), else at a checkpoint's completion: a job without checkpoints kept
        # every emptied table (a dict keeps its size when emptied), one per window it closed
        self.prune()

    def restored(self) -> None:
        """After a restore: the pane tables the backend brought back become panes."""
        for name in self.backend.table_names(PREFIX):
            table, changes = self.backend.tracked_table(name, "window")
            if table:
                window = pane_window(name)
                self.panes[window] = table
                self.changes[window] = changes
            else:
                self.retired.append(name)

    def prune(self) -> None:
        """Let the backend forget emptied pane tables no pending checkpoint names."""
        if self.retired:
            self.retired = self.backend.discard_tables(self.retired)
