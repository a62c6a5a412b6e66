"""Triggers: when a pane (the elements of one key in one window) is evaluated.

Theory of operation
-------------------
The window operator calls a trigger for every element added to a pane
(``on_element``), for every event-time or processing-time timer that fires
for the pane's (key, window) (``on_event_time`` / ``on_processing_time``),
when merging windows merge (``on_merge``), and when the window is purged or
cleaned up (``clear``). Each call answers a :class:`TriggerResult`: fire the
window function or not, purge the pane's contents or not (FIRE on an empty
pane produces nothing). Triggers are stateless objects shared by all keys:
whatever they remember lives in per-(key, window) state reached through the
:class:`~streamflow.windowing.context.TriggerContext`, and whatever they wait
for is a timer registered through it (see ``context.py``).

Rules ported from ``flink-streaming-java/.../streaming/api/windowing/triggers/``:
``TriggerResult.java``, ``Trigger.java``, ``EventTimeTrigger.java``,
``ProcessingTimeTrigger.java``, ``CountTrigger.java``, ``PurgingTrigger.java``
and ``assigners/GlobalWindows.java`` (``NeverTrigger``, ``EndOfStreamTrigger``); names follow
``flink-python/pyflink/datastream/window.py``. The periodic triggers live in
``continuous.py``.
"""

from __future__ import annotations

import enum
import operator
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from streamflow.windowing.context import OnMergeContext, TriggerContext, TriggerStateDescriptor
from streamflow.windowing.windows import Window

__all__ = [
    "CountTrigger",
    "EndOfStreamTrigger",
    "EventTimeTrigger",
    "NeverTrigger",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
    "Trigger",
    "TriggerResult",
]


class TriggerResult(enum.Enum):
    """What to do with a pane; ``(fire, purge)`` as in Flink's ``TriggerResult``."""

    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        """True for FIRE and FIRE_AND_PURGE: evaluate the window function."""
        return self.value[0]

    def is_purge(self) -> bool:
        """True for PURGE and FIRE_AND_PURGE: drop the pane's contents."""
        return self.value[1]


class Trigger(ABC):
    """Decides when a pane is evaluated (PyFlink's ``Trigger``; Flink's ``Trigger.java``).

    A trigger used with a merging assigner must return True from
    :meth:`can_merge` and implement :meth:`on_merge`.
    """

    __slots__ = ()

    def __class_getitem__(cls, item: Any) -> type:
        return cls

    @abstractmethod
    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        """Called for every element added to a pane."""

    @abstractmethod
    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        """Called when an event-time timer registered through ``ctx`` fires."""

    @abstractmethod
    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        """Called when a processing-time timer registered through ``ctx`` fires."""

    def can_merge(self) -> bool:
        """True if this trigger supports merging windows (then implement :meth:`on_merge`)."""
        return False

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        """Called when windows merged into ``window``: re-register timers, merge state."""
        raise NotImplementedError(f"{type(self).__name__} does not support merging")

    @abstractmethod
    def clear(self, window: Window, ctx: TriggerContext) -> None:
        """Delete the timers and state this trigger holds for ``window``."""


# PyFlink's names: ``Trigger.TriggerContext``, ``Trigger.OnMergeContext`` (set here, after the class,
# so that the annotations inside it keep naming the protocols)
class _PyFlinkTriggerContext(TriggerContext, Protocol):
    """PyFlink's ``Trigger.TriggerContext``: also the operator's metric group (the window
    operator's context has it; streamflow's own triggers need only the protocol)."""

    def get_metric_group(self) -> Any: ...


Trigger.TriggerContext = _PyFlinkTriggerContext  # type: ignore[attr-defined]
Trigger.OnMergeContext = OnMergeContext  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class EventTimeTrigger(Trigger):
    """Fires once the watermark passes the end of the window (``EventTimeTrigger.java``).

    A window whose ``max_timestamp()`` is already behind the watermark fires
    on each element (late data within allowed lateness).
    """

    @staticmethod
    def create() -> EventTimeTrigger:
        return EventTimeTrigger()

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        max_ts = window.max_timestamp()
        if max_ts <= ctx.get_current_watermark():
            # the watermark is already past the window: fire immediately
            return TriggerResult.FIRE
        ctx.register_event_time_timer(max_ts)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        # only register a timer if the watermark is not yet past the end of the merged
        # window, in line with on_element (otherwise the window would fire twice)
        max_ts = window.max_timestamp()
        if max_ts > ctx.get_current_watermark():
            ctx.register_event_time_timer(max_ts)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())


@dataclass(frozen=True, slots=True)
class ProcessingTimeTrigger(Trigger):
    """Fires once processing time passes the end of the window (``ProcessingTimeTrigger.java``)."""

    @staticmethod
    def create() -> ProcessingTimeTrigger:
        return ProcessingTimeTrigger()

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        max_ts = window.max_timestamp()
        if max_ts > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(max_ts)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())


@dataclass(frozen=True, slots=True)
class CountTrigger(Trigger):
    """Fires (without purging) every ``max_count`` elements of a pane (``CountTrigger.java``)."""

    max_count: int
    STATE: ClassVar[TriggerStateDescriptor] = TriggerStateDescriptor("count", operator.add)

    def __post_init__(self) -> None:
        if isinstance(self.max_count, bool) or not isinstance(self.max_count, int):
            raise TypeError(f"CountTrigger count must be an int, got {self.max_count!r}")
        if self.max_count <= 0:
            raise ValueError(f"CountTrigger count must be > 0, got {self.max_count}")

    @staticmethod
    def of(window_size: int) -> CountTrigger:
        return CountTrigger(window_size)

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        count = ctx.get_partitioned_state(self.STATE)
        count.add(1)
        if (count.get() or 0) >= self.max_count:
            count.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.STATE)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.get_partitioned_state(self.STATE).clear()


@dataclass(frozen=True, slots=True)
class PurgingTrigger(Trigger):
    """Turns the nested trigger's FIRE into FIRE_AND_PURGE (``PurgingTrigger.java``)."""

    nested_trigger: Trigger

    @staticmethod
    def of(nested_trigger: Trigger) -> PurgingTrigger:
        return PurgingTrigger(nested_trigger)

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return _purging(self.nested_trigger.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return _purging(self.nested_trigger.on_event_time(time, window, ctx))

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return _purging(self.nested_trigger.on_processing_time(time, window, ctx))

    def can_merge(self) -> bool:
        return self.nested_trigger.can_merge()

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        self.nested_trigger.on_merge(window, ctx)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        self.nested_trigger.clear(window, ctx)


def _purging(result: TriggerResult) -> TriggerResult:
    return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result


@dataclass(frozen=True, slots=True)
class NeverTrigger(Trigger):
    """Never fires: the default trigger of ``GlobalWindows`` (``GlobalWindows.NeverTrigger``)."""

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        pass

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        pass


@dataclass(frozen=True, slots=True)
class EndOfStreamTrigger(NeverTrigger):
    """Fires the global window once, at the end of input (``GlobalWindows.EndOfStreamTrigger``).

    Each element registers an event-time timer at ``window.max_timestamp()``, the maximum
    watermark, which only the end of a bounded input reaches: the window fires then, with
    everything it holds. The default trigger of ``GlobalWindows.create_with_end_of_stream_trigger()``.
    Processing time, merging and clearing do nothing, as for :class:`NeverTrigger`.
    """

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE
