"""ProcessingTimeoutTrigger: any trigger, plus a processing-time timeout.

Theory of operation
-------------------
The wrapper forwards every call to the nested trigger and adds one timer. On
an element it first asks the nested trigger: a FIRE (or FIRE_AND_PURGE) is
returned as is, after clearing the wrapper *and* the nested trigger for the
window (the pane starts over). Otherwise the first element of the pane sets
a processing-time timeout at ``now + interval``, kept in per-(key, window)
state ("timeout"); with ``reset_timer_on_new_record`` each element moves it
to ``now + interval`` (the old timer is deleted). When any timer of the
window fires -- the timeout or one of the nested trigger's own, in either
time domain -- the nested trigger is called first and the window FIREs
regardless: FIRE_AND_PURGE if the nested trigger purged, FIRE otherwise;
with ``should_clear_on_timeout`` the wrapper and the nested trigger are
cleared then. ``clear`` deletes the timeout timer and its state, then clears
the nested trigger. The trigger does not merge (Flink's ``canMerge`` is
false).

Port of ``flink-streaming-java/.../streaming/api/windowing/triggers/
ProcessingTimeoutTrigger.java`` (``of(nested, timeout)`` resets nothing and
clears on timeout, as Flink's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from streamflow.windowing.context import TriggerContext, TriggerStateDescriptor
from streamflow.windowing.triggers import Trigger, TriggerResult
from streamflow.windowing.windows import Duration, Window, duration_to_millis

__all__ = ["ProcessingTimeoutTrigger"]


def _latest(old: Any, new: Any) -> Any:
    return new


@dataclass(frozen=True, slots=True)
class ProcessingTimeoutTrigger(Trigger):
    """Fires when ``nested_trigger`` fires or ``interval`` ms of processing time after the
    pane's first element (or its latest, with ``reset_timer_on_new_record``)."""

    nested_trigger: Trigger
    interval: int
    reset_timer_on_new_record: bool = False
    should_clear_on_timeout: bool = True
    STATE: ClassVar[TriggerStateDescriptor] = TriggerStateDescriptor("timeout", _latest)

    def __post_init__(self) -> None:
        if not isinstance(self.nested_trigger, Trigger):
            raise TypeError(f"ProcessingTimeoutTrigger wraps a Trigger, got {self.nested_trigger!r}")
        object.__setattr__(
            self, "interval", duration_to_millis(self.interval, "ProcessingTimeoutTrigger timeout")
        )

    @staticmethod
    def of(
        nested_trigger: Trigger,
        timeout: Duration,
        reset_timer_on_new_record: bool = False,
        should_clear_on_timeout: bool = True,
    ) -> ProcessingTimeoutTrigger:
        return ProcessingTimeoutTrigger(
            nested_trigger,
            duration_to_millis(timeout, "timeout"),
            reset_timer_on_new_record,
            should_clear_on_timeout,
        )

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        result = self.nested_trigger.on_element(element, timestamp, window, ctx)
        if result.is_fire():
            self.clear(window, ctx)
            return result
        timeout = ctx.get_partitioned_state(self.STATE)
        pending = timeout.get()
        if pending is not None and self.reset_timer_on_new_record:
            ctx.delete_processing_time_timer(pending)
            timeout.clear()
            pending = None
        if pending is None:
            next_fire = ctx.get_current_processing_time() + self.interval
            timeout.add(next_fire)
            ctx.register_processing_time_timer(next_fire)
        return result

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return self._timed_out(self.nested_trigger.on_processing_time(time, window, ctx), window, ctx)

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return self._timed_out(self.nested_trigger.on_event_time(time, window, ctx), window, ctx)

    def _timed_out(self, nested: TriggerResult, window: Window, ctx: TriggerContext) -> TriggerResult:
        if self.should_clear_on_timeout:
            self.clear(window, ctx)
        return TriggerResult.FIRE_AND_PURGE if nested.is_purge() else TriggerResult.FIRE

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        timeout = ctx.get_partitioned_state(self.STATE)
        pending = timeout.get()
        if pending is not None:
            ctx.delete_processing_time_timer(pending)
            timeout.clear()
        self.nested_trigger.clear(window, ctx)

    def __repr__(self) -> str:
        return f"TimeoutTrigger({self.nested_trigger!r})"
