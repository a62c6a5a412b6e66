"""MergingWindowSet: the in-flight windows of one key under a merging assigner.

Theory of operation
-------------------
With session windows every element brings a new window that may merge with
the windows already in flight. Moving window contents on every merge would
be costly, so, as Flink does, the set keeps a mapping *in-flight window ->
state window*: the state window is the namespace where the window's
contents actually live, and it stays put while the in-flight window grows.

``add_window(new_window, merge_function)`` asks the assigner which of the
in-flight windows plus the new one merge. For each group it

1. takes the state window of one of the merged pre-existing windows (the
   first one in the group's order, so the choice is deterministic) as the
   state window of the merge result,
2. drops the merged windows from the mapping and maps the merge result to
   that state window,
3. calls ``merge_function(merge_result, merged_windows, state_window_result,
   merged_state_windows)`` -- ``merged_windows`` never contains the new
   window (it had no state yet), ``merged_state_windows`` never contains
   the surviving state window -- unless the only thing "merged" is the new
   window into one pre-existing window that covers it unchanged, which is
   no merge at all.

The caller (the window operator) must, in ``merge_function``, merge the
contents of ``merged_state_windows`` into ``state_window_result``, call the
trigger's ``on_merge`` for ``merge_result``, clear the trigger of each of
``merged_windows`` and move their cleanup timers. ``add_window`` returns the
window the new element now belongs to: the new window itself, or the merge
result that swallowed it. ``retire_window`` removes a window once it is
purged or cleaned up.

State for checkpoints is plain data: ``persist()`` returns the mapping as a
list of ``(window, state_window)`` pairs; ``MergingWindowSet(assigner,
pairs)`` (or ``restore``) rebuilds it; ``changed`` says whether the mapping
differs from the one last restored or persisted, so the operator can skip
rewriting an unchanged set (Flink's ``persist`` writes only then).

Port of ``flink-streaming-java/.../streaming/runtime/operators/windowing/
MergingWindowSet.java``. One deliberate difference: when the new window
merges with nothing but is already in flight (an identical window), Flink
re-maps it to itself and so could orphan the contents of a window whose
state lives elsewhere; here the existing state window is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from streamflow.windowing.assigners import MergingWindowAssigner

__all__ = ["MergeFunction", "MergingWindowSet"]

W = TypeVar("W", bound=Hashable)

MergeFunction = Callable[[Any, list[Any], Any, list[Any]], None]
"""``merge_function(merge_result, merged_windows, state_window_result, merged_state_windows)``."""


class MergingWindowSet(Generic[W]):
    """In-flight windows of one key and the state window each one's contents live in."""

    __slots__ = ("_assigner", "_baseline", "_mapping")

    def __init__(
        self,
        window_assigner: MergingWindowAssigner,
        state: Iterable[tuple[W, W]] | None = None,
    ) -> None:
        if not window_assigner.merging:
            raise ValueError(f"{window_assigner!r} is not a merging window assigner")
        self._assigner = window_assigner
        self._mapping: dict[W, W] = dict(state) if state is not None else {}
        self._baseline: dict[W, W] = dict(self._mapping)

    @classmethod
    def restore(
        cls, window_assigner: MergingWindowAssigner, state: Iterable[tuple[W, W]]
    ) -> MergingWindowSet[W]:
        """Rebuild a set from the pairs returned by :meth:`persist`."""
        return cls(window_assigner, state)

    def persist(self) -> list[tuple[W, W]]:
        """The mapping as ``(window, state_window)`` pairs; resets :attr:`changed`."""
        self._baseline = dict(self._mapping)
        return list(self._mapping.items())

    @property
    def changed(self) -> bool:
        """True if the mapping differs from the one last restored or persisted."""
        return self._mapping != self._baseline

    def get_state_window(self, window: W) -> W | None:
        """The window whose namespace holds ``window``'s contents, or None if not in flight."""
        return self._mapping.get(window)

    def retire_window(self, window: W) -> None:
        """Remove ``window`` from the in-flight windows (after purge or cleanup)."""
        if self._mapping.pop(window, None) is None:
            raise ValueError(f"Window {window!r} is not in in-flight window set.")

    def add_window(self, new_window: W, merge_function: MergeFunction) -> W:
        """Add ``new_window``, merging as the assigner says; returns its representative window.

        Add elements and call the trigger only on the returned window, never
        on ``new_window`` when it was swallowed by a merge.
        """
        mapping = self._mapping
        candidates = [*mapping, new_window]
        merge_results: dict[W, list[W]] = {}

        def collect(to_be_merged: list[W], merge_result: W) -> None:
            merge_results[merge_result] = list(to_be_merged)

        self._assigner.merge_windows(candidates, collect)

        result_window = new_window
        merged_new_window = False
        for merge_result, merged_windows in merge_results.items():
            # if our new window is among the merged windows the merge result is the result
            if new_window in merged_windows:
                merged_windows.remove(new_window)
                merged_new_window = True
                result_window = merge_result

            # the state window of (the first of) the merged windows survives
            state_window = mapping[merged_windows[0]]
            merged_state_windows: list[W] = []
            for window in merged_windows:
                removed = mapping.pop(window, None)
                if removed is not None:
                    merged_state_windows.append(removed)
            mapping[merge_result] = state_window
            # don't merge the surviving state window into itself
            if state_window in merged_state_windows:
                merged_state_windows.remove(state_window)

            # merging the new window into one pre-existing window that covers it is no merge
            if not (len(merged_windows) == 1 and merged_windows[0] == merge_result):
                merge_function(merge_result, merged_windows, state_window, merged_state_windows)

        # the new window is self-contained: it merged with nothing
        if not merge_results or (result_window == new_window and not merged_new_window):
            mapping.setdefault(result_window, result_window)
        return result_window

    def __len__(self) -> int:
        return len(self._mapping)

    def __contains__(self, window: object) -> bool:
        return window in self._mapping

    def __iter__(self) -> Iterator[W]:
        """The in-flight windows."""
        return iter(list(self._mapping))

    def __repr__(self) -> str:
        return f"MergingWindowSet(windows={self._mapping!r})"
