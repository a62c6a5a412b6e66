"""A port of Flink's ``TriggerTestHarness``: drive one trigger for one key, no operator.

Flink's ``flink-streaming-java/src/test/java/org/apache/flink/streaming/runtime/operators/
windowing/TriggerTestHarness.java`` (with ``TestInternalTimerService``): timers are a *set*
of ``(window, time)`` per time domain (registering one twice keeps one), state lives in a
store keyed by ``(window, descriptor name)`` (``num_state_entries`` counts the non-empty
slots, as ``HeapKeyedStateBackend.numKeyValueStateEntries``). ``advance_watermark`` /
``advance_processing_time`` first take every due timer off the queue, then call the trigger
for each one in time order, returning ``[(window, result)]`` -- timers the trigger registers
meanwhile wait for the next advance, as in Flink. ``merge_windows`` calls ``on_merge`` with
an ``OnMergeContext`` (the merged windows' state is folded into the target and removed, as
``InternalMergingState.mergeNamespaces``), then ``clear`` for each merged window, as the
window operator does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamflow.runtime.events import MIN_WATERMARK
from streamflow.windowing.context import merge_reducing_state
from streamflow.windowing.trigger_state import merge_function, partitioned_state
from streamflow.windowing.triggers import Trigger, TriggerResult

NO_TIMESTAMP = MIN_WATERMARK
"""The timestamp of Flink's ``new StreamRecord<>(1)`` (``getTimestamp()`` without one)."""


class _Context:
    """Flink's ``TestTriggerContext`` (and ``TestOnMergeContext`` when ``merged`` is given)."""

    def __init__(self, harness: TriggerTestHarness, window: Any, merged: Iterable[Any] = ()) -> None:
        self.harness, self.window, self.merged = harness, window, list(merged)

    def get_current_watermark(self) -> int:
        return self.harness.watermark

    def get_current_processing_time(self) -> int:
        return self.harness.processing_time

    def get_metric_group(self) -> Any:
        return None

    def register_event_time_timer(self, time: int) -> None:
        self.harness.event_timers.add((self.window, time))

    def register_processing_time_timer(self, time: int) -> None:
        self.harness.processing_timers.add((self.window, time))

    def delete_event_time_timer(self, time: int) -> None:
        self.harness.event_timers.discard((self.window, time))

    def delete_processing_time_timer(self, time: int) -> None:
        self.harness.processing_timers.discard((self.window, time))

    def get_partitioned_state(self, descriptor: Any) -> Any:
        return partitioned_state(self.harness.store, (self.window, descriptor.name), descriptor)

    def merge_partitioned_state(self, descriptor: Any) -> None:
        merge_reducing_state(
            self.harness.store,
            [(w, descriptor.name) for w in self.merged],
            (self.window, descriptor.name),
            merge_function(descriptor),
        )


class TriggerTestHarness:
    """One trigger, one key: timers, state and the calls of Flink's ``TriggerTestHarness``."""

    def __init__(self, trigger: Trigger) -> None:
        self.trigger = trigger
        self.watermark = MIN_WATERMARK
        self.processing_time = MIN_WATERMARK
        self.event_timers: set[tuple[Any, int]] = set()
        self.processing_timers: set[tuple[Any, int]] = set()
        self.store: dict[Any, Any] = {}

    # -- counts
    def num_event_time_timers(self, window: Any = None) -> int:
        return sum(1 for w, _ in self.event_timers if window is None or w == window)

    def num_processing_time_timers(self, window: Any = None) -> int:
        return sum(1 for w, _ in self.processing_timers if window is None or w == window)

    def num_state_entries(self, window: Any = None) -> int:
        return sum(
            1
            for (w, _), value in self.store.items()
            if (window is None or w == window) and value not in (None, [])
        )

    # -- calls
    def process_element(self, window: Any, timestamp: int = NO_TIMESTAMP, element: Any = 1) -> TriggerResult:
        return self.trigger.on_element(element, timestamp, window, _Context(self, window))

    def advance_watermark(self, time: int, window: Any = None) -> Any:
        """All firings ``[(window, result)]``; with ``window``, the result of the one firing."""
        self.watermark = time
        due = _take_due(self.event_timers, time)
        firings = [(w, self.trigger.on_event_time(t, w, _Context(self, w))) for w, t in due]
        return firings if window is None else _single(firings, window)

    def advance_processing_time(self, time: int, window: Any = None) -> Any:
        self.processing_time = time
        due = _take_due(self.processing_timers, time)
        firings = [(w, self.trigger.on_processing_time(t, w, _Context(self, w))) for w, t in due]
        return firings if window is None else _single(firings, window)

    def invoke_on_event_time(self, time: int, window: Any) -> TriggerResult:
        return self.trigger.on_event_time(time, window, _Context(self, window))

    def merge_windows(self, target: Any, merged: Iterable[Any]) -> None:
        merged = list(merged)
        self.trigger.on_merge(target, _Context(self, target, merged))  # type: ignore[arg-type]
        for window in merged:
            self.clear_trigger_state(window)

    def clear_trigger_state(self, window: Any) -> None:
        self.trigger.clear(window, _Context(self, window))


def _take_due(timers: set[tuple[Any, int]], time: int) -> list[tuple[Any, int]]:
    due = sorted((t for t in timers if t[1] <= time), key=lambda t: (t[1], repr(t[0])))
    timers.difference_update(due)
    return due


def _single(firings: list[tuple[Any, TriggerResult]], window: Any) -> TriggerResult:
    if len(firings) != 1:
        raise AssertionError(f"Must have exactly one timer firing. Fired timers: {firings}")
    fired_window, result = firings[0]
    if fired_window != window:
        raise AssertionError(f"Trigger fired for another window: {fired_window!r}")
    return result
