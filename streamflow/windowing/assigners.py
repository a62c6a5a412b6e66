"""Window assigners: which windows an element belongs to.

Theory of operation
-------------------
An assigner maps an element and its timestamp to zero or more windows; the
elements of one key in one window form a *pane*. Each assigner also names
its default trigger (``get_default_trigger``), says whether it works in
event time (``is_event_time``) and whether its windows merge (``merging``).

* **Tumbling** (size, offset): one window per element, ``[start, start +
  size)`` with ``start = TimeWindow.get_window_start_with_offset(ts, offset,
  size)``; windows never overlap.
* **Sliding** (size, slide, offset): starts are aligned to ``slide``; an
  element belongs to every window whose start is in ``(ts - size,
  last_start]``, from the latest start backwards, so ``ceil(size / slide)``
  or ``floor(size / slide)`` windows (zero when ``slide > size`` and the
  element falls in a gap).
* **Session** (gap): each element gets ``[ts, ts + gap)``; the window
  operator merges windows that overlap or touch through
  :class:`~streamflow.windowing.merging.MergingWindowSet`, using the
  assigner's ``merge_windows`` (``TimeWindow.merge_windows``).
* **Global**: every element goes to the single ``GlobalWindow``; the default
  trigger never fires, so pair it with e.g. ``CountTrigger``.

The processing-time twins use ``ctx.get_current_processing_time()`` instead
of the element's timestamp. Event-time assigners reject a missing timestamp
(``None`` or ``MIN_WATERMARK``, Flink's "no timestamp" marker).

Hot path: the window operator may skip ``TimeWindow`` objects and call the
arithmetic directly -- ``window_start(ts)`` / ``window_start_batch(tss)`` on
the tumbling assigners, ``window_starts(ts)`` (a ``range``, latest first) on
the sliding ones.

Ported from ``flink-streaming-java/.../streaming/api/windowing/assigners/``
(``TumblingEventTimeWindows.java``, ``SlidingEventTimeWindows.java``,
``EventTimeSessionWindows.java``, ``TumblingProcessingTimeWindows.java``,
``SlidingProcessingTimeWindows.java``, ``ProcessingTimeSessionWindows.java``,
``GlobalWindows.java``, ``MergingWindowAssigner.java``); names as in
``flink-python/pyflink/datastream/window.py``. Window staggering is not ported.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from streamflow.runtime.events import MIN_WATERMARK
from streamflow.windowing.context import WindowAssignerContext
from streamflow.windowing.triggers import (
    EndOfStreamTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    Trigger,
)
from streamflow.windowing.windows import Duration, GlobalWindow, TimeWindow
from streamflow.windowing.windows import duration_to_millis as _ms

__all__ = [
    "EventTimeSessionWindows",
    "GlobalWindows",
    "MergingWindowAssigner",
    "ProcessingTimeSessionWindows",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "WindowAssigner",
]


class WindowAssigner(ABC):
    """Assigns zero or more windows to an element (Flink's ``WindowAssigner``)."""

    __slots__ = ()

    def __class_getitem__(cls, item: Any) -> type:
        """``WindowAssigner[T, W]``, as PyFlink's generic class."""
        return cls

    @abstractmethod
    def assign_windows(
        self, element: Any, timestamp: int | None, ctx: WindowAssignerContext | None = None
    ) -> Sequence[Any]:
        """The windows ``element`` (with ``timestamp``) belongs to."""

    @abstractmethod
    def get_default_trigger(self, env: object = None) -> Trigger:
        """The trigger used when the user sets none (``env`` is ignored, as in PyFlink)."""

    @abstractmethod
    def is_event_time(self) -> bool:
        """True if windows follow element timestamps, False for processing time."""

    def get_window_serializer(self) -> Any:
        """The ``TypeSerializer`` of this assigner's windows (PyFlink's; a custom assigner's
        windows are checkpointed with it when it has one: ``runtime/window_operator.py``)."""
        raise NotImplementedError(f"{type(self).__name__} has no window serializer")

    @property
    def merging(self) -> bool:
        """True if windows may merge (the window operator then uses a MergingWindowSet)."""
        return False


class _PyFlinkWindowAssignerContext(WindowAssignerContext, Protocol):
    """PyFlink's ``WindowAssigner.WindowAssignerContext``: also the operator's runtime context
    (the window operator is this context; streamflow's own assigners need only the time)."""

    def get_runtime_context(self) -> Any: ...


WindowAssigner.WindowAssignerContext = _PyFlinkWindowAssignerContext  # type: ignore[attr-defined]


class MergingWindowAssigner(WindowAssigner):
    """An assigner whose windows merge (Flink's ``MergingWindowAssigner``)."""

    __slots__ = ()

    @property
    def merging(self) -> bool:
        return True

    class MergeCallback:
        """PyFlink's callback type of ``merge_windows``: ``merge(to_be_merged, merge_result)``."""

        def __class_getitem__(cls, item: Any) -> type:  # generic, as PyFlink's
            return cls

        def merge(self, to_be_merged: Iterable[Any], merge_result: Any) -> None:
            raise NotImplementedError

    @abstractmethod
    def merge_windows(self, windows: Iterable[Any], callback: Callable[[list[Any], Any], None]) -> None:
        """Call ``callback(to_be_merged, merge_result)`` for each group of windows to merge."""


def require_timestamp(timestamp: int | None) -> int:
    if timestamp is None or timestamp <= MIN_WATERMARK:
        raise ValueError(
            "Record has no timestamp (None or MIN_WATERMARK). Did you forget to call "
            "'data_stream.assign_timestamps_and_watermarks(...)', or did you mean a "
            "processing-time window?"
        )
    return timestamp


def _processing_time(ctx: WindowAssignerContext | None, owner: object) -> int:
    if ctx is None:
        raise ValueError(f"{type(owner).__name__} needs a WindowAssignerContext (processing time)")
    return ctx.get_current_processing_time()


class _EventTime:
    """Assigns by the element's timestamp; fires with the watermark."""

    __slots__ = ()

    def assign_windows(
        self, element: Any, timestamp: int | None, ctx: WindowAssignerContext | None = None
    ) -> list[TimeWindow]:
        return self._assign(require_timestamp(timestamp))  # type: ignore[attr-defined]

    def get_window_serializer(self) -> Any:
        from ..types.serializer import TimeWindowSerializer

        return TimeWindowSerializer()

    def get_default_trigger(self, env: object = None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True


class _ProcessingTime:
    """Assigns by the operator's processing time; fires by the clock."""

    __slots__ = ()

    def assign_windows(
        self, element: Any, timestamp: int | None, ctx: WindowAssignerContext | None = None
    ) -> list[TimeWindow]:
        return self._assign(_processing_time(ctx, self))  # type: ignore[attr-defined]

    def get_window_serializer(self) -> Any:
        from ..types.serializer import TimeWindowSerializer

        return TimeWindowSerializer()

    def get_default_trigger(self, env: object = None) -> Trigger:
        return ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return False


# ----------------------------------------------------------------------------- tumbling


@dataclass(frozen=True, slots=True)
class _Tumbling(WindowAssigner):
    size: int
    offset: int = 0

    def __post_init__(self) -> None:
        name = type(self).__name__
        size = _ms(self.size, f"{name} size")
        offset = _ms(self.offset, f"{name} offset")
        # Flink's one check, ``Math.abs(offset) >= size``, also refuses size <= 0; its message
        # names the rule, so does this one (with the size > 0 it implies)
        if abs(offset) >= size:
            raise ValueError(
                f"{name} parameters must satisfy abs(offset) < size (so size > 0), "
                f"got size={size}, offset={offset}"
            )
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "offset", offset)

    def window_start(self, timestamp: int) -> int:
        """Start of the window holding ``timestamp`` (arithmetic only)."""
        return timestamp - (timestamp - self.offset) % self.size

    def window_start_batch(self, timestamps: Iterable[int]) -> list[int]:
        """``window_start`` for many timestamps (one list comprehension)."""
        size, offset = self.size, self.offset
        return [ts - (ts - offset) % size for ts in timestamps]

    def _assign(self, timestamp: int) -> list[TimeWindow]:
        start = timestamp - (timestamp - self.offset) % self.size
        return [TimeWindow(start, start + self.size)]


@dataclass(frozen=True, slots=True)
class TumblingEventTimeWindows(_EventTime, _Tumbling):
    """Non-overlapping windows of ``size`` ms by element timestamp, shifted by ``offset``.

    ``TumblingEventTimeWindows.of(timedelta(days=1), timedelta(hours=-8))``
    gives days starting at local midnight in UTC+8.
    """

    @staticmethod
    def of(size: Duration, offset: Duration = 0) -> TumblingEventTimeWindows:
        return TumblingEventTimeWindows(_ms(size, "size"), _ms(offset, "offset"))


@dataclass(frozen=True, slots=True)
class TumblingProcessingTimeWindows(_ProcessingTime, _Tumbling):
    """Non-overlapping windows of ``size`` ms by processing time, shifted by ``offset``."""

    @staticmethod
    def of(size: Duration, offset: Duration = 0) -> TumblingProcessingTimeWindows:
        return TumblingProcessingTimeWindows(_ms(size, "size"), _ms(offset, "offset"))


# ----------------------------------------------------------------------------- sliding


@dataclass(frozen=True, slots=True)
class _Sliding(WindowAssigner):
    size: int
    slide: int
    offset: int = 0

    def __post_init__(self) -> None:
        name = type(self).__name__
        size = _ms(self.size, f"{name} size")
        slide = _ms(self.slide, f"{name} slide")
        offset = _ms(self.offset, f"{name} offset")
        # Flink's check, ``Math.abs(offset) >= slide || size <= 0``, with Flink's message
        if abs(offset) >= slide or size <= 0:
            raise ValueError(
                f"{name} parameters must satisfy abs(offset) < slide and size > 0 (so slide > 0), "
                f"got size={size}, slide={slide}, offset={offset}"
            )
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "slide", slide)
        object.__setattr__(self, "offset", offset)

    def window_starts(self, timestamp: int) -> range:
        """Starts of the windows holding ``timestamp``, latest first (arithmetic only)."""
        slide = self.slide
        last_start = timestamp - (timestamp - self.offset) % slide
        return range(last_start, timestamp - self.size, -slide)

    def _assign(self, timestamp: int) -> list[TimeWindow]:
        size = self.size
        return [TimeWindow(start, start + size) for start in self.window_starts(timestamp)]


@dataclass(frozen=True, slots=True)
class SlidingEventTimeWindows(_EventTime, _Sliding):
    """Windows of ``size`` ms every ``slide`` ms by element timestamp (may overlap)."""

    @staticmethod
    def of(size: Duration, slide: Duration, offset: Duration = 0) -> SlidingEventTimeWindows:
        return SlidingEventTimeWindows(_ms(size, "size"), _ms(slide, "slide"), _ms(offset, "offset"))


@dataclass(frozen=True, slots=True)
class SlidingProcessingTimeWindows(_ProcessingTime, _Sliding):
    """Windows of ``size`` ms every ``slide`` ms by processing time (may overlap)."""

    @staticmethod
    def of(size: Duration, slide: Duration, offset: Duration = 0) -> SlidingProcessingTimeWindows:
        return SlidingProcessingTimeWindows(_ms(size, "size"), _ms(slide, "slide"), _ms(offset, "offset"))


# ----------------------------------------------------------------------------- sessions


@dataclass(frozen=True, slots=True)
class _Session(MergingWindowAssigner):
    gap: int

    def __post_init__(self) -> None:
        name = type(self).__name__
        gap = _ms(self.gap, f"{name} gap")
        if gap <= 0:
            # Flink's message names the gap "size" (``withGap(Duration size)``)
            raise ValueError(f"{name} parameters must satisfy 0 < size (the gap), got gap={gap}")
        object.__setattr__(self, "gap", gap)

    def merge_windows(
        self,
        windows: Iterable[TimeWindow],
        callback: Callable[[list[TimeWindow], TimeWindow], None],
    ) -> None:
        TimeWindow.merge_windows(windows, callback)

    def _assign(self, timestamp: int) -> list[TimeWindow]:
        return [TimeWindow(timestamp, timestamp + self.gap)]


@dataclass(frozen=True, slots=True)
class EventTimeSessionWindows(_EventTime, _Session):
    """Sessions by element timestamp: activity separated by more than ``gap`` ms of silence."""

    @staticmethod
    def with_gap(size: Duration) -> EventTimeSessionWindows:
        return EventTimeSessionWindows(_ms(size, "gap"))

    @staticmethod
    def with_dynamic_gap(extractor: Any) -> Any:
        """Sessions whose gap each element gives (``SessionWindowTimeGapExtractor``)."""
        from streamflow.windowing.count import DynamicEventTimeSessionWindows

        return DynamicEventTimeSessionWindows(extractor)


@dataclass(frozen=True, slots=True)
class ProcessingTimeSessionWindows(_ProcessingTime, _Session):
    """Sessions by processing time: activity separated by more than ``gap`` ms of silence."""

    @staticmethod
    def with_gap(size: Duration) -> ProcessingTimeSessionWindows:
        return ProcessingTimeSessionWindows(_ms(size, "gap"))

    @staticmethod
    def with_dynamic_gap(extractor: Any) -> Any:
        """Sessions whose gap each element gives (``SessionWindowTimeGapExtractor``)."""
        from streamflow.windowing.count import DynamicProcessingTimeSessionWindows

        return DynamicProcessingTimeSessionWindows(extractor)


# ----------------------------------------------------------------------------- global

_GLOBAL_WINDOW = GlobalWindow.get()


@dataclass(frozen=True, slots=True, repr=False)
class GlobalWindows(WindowAssigner):
    """Puts every element into the one ``GlobalWindow``; the default trigger never fires, or,
    with ``create_with_end_of_stream_trigger()``, fires once at the end of input."""

    end_of_stream: bool = False

    @staticmethod
    def create() -> GlobalWindows:
        return GlobalWindows()

    @staticmethod
    def create_with_end_of_stream_trigger() -> GlobalWindows:
        """Flink's ``GlobalWindows.createWithEndOfStreamTrigger()``: the default trigger is
        ``EndOfStreamTrigger``, the window fires when a bounded input ends."""
        return GlobalWindows(end_of_stream=True)

    def assign_windows(
        self, element: Any, timestamp: int | None, ctx: WindowAssignerContext | None = None
    ) -> list[GlobalWindow]:
        return [_GLOBAL_WINDOW]

    def get_window_serializer(self) -> Any:
        from ..types.serializer import GlobalWindowSerializer

        return GlobalWindowSerializer()

    def get_default_trigger(self, env: object = None) -> Trigger:
        return EndOfStreamTrigger() if self.end_of_stream else NeverTrigger()

    def __repr__(self) -> str:
        # Flink's toString, "GlobalWindows()", for the usual one
        return "GlobalWindows(end_of_stream_trigger)" if self.end_of_stream else "GlobalWindows()"

    def is_event_time(self) -> bool:
        return False
