"""Continuous triggers: fire periodically inside a window, and at its end.

Theory of operation
-------------------
A continuous trigger keeps one piece of state per (key, window): the time of
its pending fire (merging keeps the earliest, reduce = ``min``). The first
element schedules a fire at the next multiple of ``interval``; each fire
schedules the next one, capped at ``window.max_timestamp()`` so the last
stretch of the window is not lost (FLINK-20443); the fire at ``max_timestamp()``
schedules none (FLINK-35069: capped, the next fire would be that same time
again, and a processing-time trigger on an event-time window, which nothing
cleans up at its end, would fire forever). The event-time variant also
registers the window's end and fires there, like ``EventTimeTrigger``; for the
processing-time variant the window operator's cleanup at the window's end
deletes the remaining timer. Neither purges: wrap in ``PurgingTrigger`` for
that.

Ported from ``flink-streaming-java/.../streaming/api/windowing/triggers/``
``ContinuousEventTimeTrigger.java`` and ``ContinuousProcessingTimeTrigger.java``
(names as in ``flink-python/pyflink/datastream/window.py``). One deliberate
difference: the first fire is aligned with Python's floor ``%``, so for
negative timestamps it is the next multiple of ``interval`` (Java's
truncating ``%`` would skip one) -- which is what PyFlink's own Python
``ContinuousEventTimeTrigger`` (``timestamp - (timestamp % self.interval)``
in ``window.py``) computes, so a PyFlink program sees the same fires.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from streamflow.windowing.context import (
    OnMergeContext,
    TriggerContext,
    TriggerState,
    TriggerStateDescriptor,
)
from streamflow.windowing.triggers import Trigger, TriggerResult
from streamflow.windowing.windows import Duration, Window, duration_to_millis

__all__ = ["ContinuousEventTimeTrigger", "ContinuousProcessingTimeTrigger"]


def _check_interval(interval: Duration, owner: str) -> int:
    millis = duration_to_millis(interval, f"{owner} interval")
    if millis <= 0:
        raise ValueError(f"{owner} interval must be > 0, got {millis}")
    return millis


@dataclass(frozen=True, slots=True)
class _Continuous(Trigger):
    """What both continuous triggers share; they differ only in their timers' time domain."""

    interval: int
    STATE: ClassVar[TriggerStateDescriptor] = TriggerStateDescriptor("fire-time", min)

    def __post_init__(self) -> None:
        object.__setattr__(self, "interval", _check_interval(self.interval, type(self).__name__))

    def _register_timer(self, ctx: TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _delete_timer(self, ctx: TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _fire_if_due(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        fire_time = ctx.get_partitioned_state(self.STATE)
        if fire_time.get() == time:
            fire_time.clear()
            if time < window.max_timestamp():
                # the fire at the window's end is the last: the next one, capped at the end,
                # would be this very time again and fire forever (FLINK-35069)
                self._register_next(time, window, ctx, fire_time)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.STATE)
        next_fire = ctx.get_partitioned_state(self.STATE).get()
        if next_fire is not None:
            self._register_timer(ctx, next_fire)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        fire_time = ctx.get_partitioned_state(self.STATE)
        pending = fire_time.get()
        if pending is not None:
            self._delete_timer(ctx, pending)
            fire_time.clear()

    def _register_next(self, time: int, window: Window, ctx: TriggerContext, fire_time: TriggerState) -> None:
        next_fire = min(time + self.interval, window.max_timestamp())
        fire_time.add(next_fire)
        self._register_timer(ctx, next_fire)


@dataclass(frozen=True, slots=True)
class ContinuousEventTimeTrigger(_Continuous):
    """Fires every ``interval`` ms of event time, and at the window's end.

    Port of ``ContinuousEventTimeTrigger.java``: the first element schedules a
    fire at the next multiple of ``interval``; each fire schedules the next
    one, capped at ``window.max_timestamp()`` (FLINK-20443). The state keeps
    the pending fire time; merging keeps the earliest (reduce = ``min``).
    Alignment uses Python's floor ``%``, so for negative timestamps the
    first fire is the next multiple of ``interval`` (Java's truncating ``%``
    would skip one).
    """

    @staticmethod
    def of(interval: Duration) -> ContinuousEventTimeTrigger:
        return ContinuousEventTimeTrigger(duration_to_millis(interval, "interval"))

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        max_ts = window.max_timestamp()
        if max_ts <= ctx.get_current_watermark():
            # the watermark is already past the window: fire immediately
            return TriggerResult.FIRE
        ctx.register_event_time_timer(max_ts)
        fire_time = ctx.get_partitioned_state(self.STATE)
        if fire_time.get() is None:
            self._register_next(timestamp - timestamp % self.interval, window, ctx, fire_time)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        return self._fire_if_due(time, window, ctx)

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def _register_timer(self, ctx: TriggerContext, time: int) -> None:
        ctx.register_event_time_timer(time)

    def _delete_timer(self, ctx: TriggerContext, time: int) -> None:
        ctx.delete_event_time_timer(time)


@dataclass(frozen=True, slots=True)
class ContinuousProcessingTimeTrigger(_Continuous):
    """Fires every ``interval`` ms of processing time (``ContinuousProcessingTimeTrigger.java``).

    The next fire is capped at ``window.max_timestamp()``; the window
    operator's cleanup at the window's end deletes the last timer.
    """

    @staticmethod
    def of(interval: Duration) -> ContinuousProcessingTimeTrigger:
        return ContinuousProcessingTimeTrigger(duration_to_millis(interval, "interval"))

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        fire_time = ctx.get_partitioned_state(self.STATE)
        if fire_time.get() is None:
            now = ctx.get_current_processing_time()
            self._register_next(now - now % self.interval, window, ctx, fire_time)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return self._fire_if_due(time, window, ctx)

    def _register_timer(self, ctx: TriggerContext, time: int) -> None:
        ctx.register_processing_time_timer(time)

    def _delete_timer(self, ctx: TriggerContext, time: int) -> None:
        ctx.delete_processing_time_timer(time)
