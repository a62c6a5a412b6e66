"""Count windows and dynamic-gap sessions, as PyFlink's ``pyflink.datastream.window``.

Count windows (``CountTumblingWindowAssigner``, ``CountSlidingWindowAssigner``)
follow PyFlink's rule, not Java's ``GlobalWindows`` + ``CountTrigger``: the
assigner keeps a per-key element counter in keyed state and puts element
number ``n`` (0-based) into ``CountWindow(n // size)`` (tumbling) or into every
``CountWindow(id)`` whose range ``[id * slide, id * slide + size - 1]`` holds
``n`` (sliding); the default trigger is ``CountTrigger(size)``, so a window
fires once, when it holds ``size`` elements, and a window that never fills
never fires (port of ``flink-python/pyflink/datastream/window.py``, 2.3.0).

Dynamic sessions take their gap from each element
(``SessionWindowTimeGapExtractor.extract``); windows merge as fixed-gap
sessions do (``DynamicEventTimeSessionWindows.java``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from streamflow.runtime.events import MAX_WATERMARK
from streamflow.state.keyed import ValueStateDescriptor
from streamflow.windowing.assigners import (
    MergingWindowAssigner,
    WindowAssigner,
    _processing_time,
    require_timestamp,
)
from streamflow.windowing.context import WindowAssignerContext
from streamflow.windowing.triggers import (
    CountTrigger,
    EventTimeTrigger,
    ProcessingTimeTrigger,
    Trigger,
)
from streamflow.windowing.windows import TimeWindow, Window

__all__ = [
    "CountSlidingWindowAssigner",
    "CountTumblingWindowAssigner",
    "CountWindow",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "SessionWindowTimeGapExtractor",
]


class CountWindow(Window):
    """The window of a count assigner, identified by its number."""

    __slots__ = ("id",)

    def __init__(self, id: int) -> None:
        self.id = id

    def max_timestamp(self) -> int:
        return MAX_WATERMARK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountWindow) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("CountWindow", self.id))

    def __lt__(self, other: CountWindow) -> bool:
        return self.id < other.id

    def __reduce__(self) -> tuple[Any, ...]:
        return CountWindow, (self.id,)

    def __repr__(self) -> str:
        return f"CountWindow(id={self.id})"


def _runtime_context(ctx: Any, owner: object) -> Any:
    get = getattr(ctx, "get_runtime_context", None)
    if get is None:
        raise ValueError(f"{type(owner).__name__} needs keyed state: use it on a keyed stream")
    return get()


class _CountAssigner(WindowAssigner):
    descriptor_name = ""

    def __init__(self, window_size: int) -> None:
        if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size <= 0:
            raise ValueError(f"{type(self).__name__} window size must be a positive int, got {window_size!r}")
        self._window_size = window_size
        self._count_descriptor = ValueStateDescriptor(self.descriptor_name)

    def _next_count(self, ctx: WindowAssignerContext | None) -> int:
        state = _runtime_context(ctx, self).get_state(self._count_descriptor)
        current = state.value() or 0
        state.update(current + 1)
        return int(current)

    def get_default_trigger(self, env: object = None) -> Trigger:
        return CountTrigger(self._window_size)

    def get_window_serializer(self) -> Any:
        from streamflow.types.serializer import CountWindowSerializer

        return CountWindowSerializer()

    def is_event_time(self) -> bool:
        return False


class CountTumblingWindowAssigner(_CountAssigner):
    """Windows of ``window_size`` consecutive elements per key."""

    __slots__ = ("_count_descriptor", "_window_size")
    descriptor_name = "tumble-count-assigner"

    @staticmethod
    def of(window_size: int) -> CountTumblingWindowAssigner:
        return CountTumblingWindowAssigner(window_size)

    def assign_windows(
        self, element: Any, timestamp: int | None, ctx: WindowAssignerContext | None = None
    ) -> list[CountWindow]:
        return [CountWindow(self._next_count(ctx) // self._window_size)]

    def __repr__(self) -> str:
        return f"CountTumblingWindowAssigner({self._window_size})"


class CountSlidingWindowAssigner(_CountAssigner):
    """Windows of ``window_size`` elements per key, a new one every ``window_slide`` elements."""

    __slots__ = ("_count_descriptor", "_window_size", "_window_slide")
    descriptor_name = "slide-count-assigner"

    def __init__(self, window_size: int, window_slide: int) -> None:
        super().__init__(window_size)
        if isinstance(window_slide, bool) or not isinstance(window_slide, int) or window_slide <= 0:
            raise ValueError(f"CountSlidingWindowAssigner slide must be a positive int, got {window_slide!r}")
        self._window_slide = window_slide

    @staticmethod
    def of(window_size: int, window_slide: int) -> CountSlidingWindowAssigner:
        return CountSlidingWindowAssigner(window_size, window_slide)

    def assign_windows(
        self, element: Any, timestamp: int | None, ctx: WindowAssignerContext | None = None
    ) -> list[CountWindow]:
        n = self._next_count(ctx)
        last_id = n // self._window_slide
        start = last_id * self._window_slide
        windows = []
        while last_id >= 0 and start <= n <= start + self._window_size - 1:
            windows.append(CountWindow(last_id))
            last_id -= 1
            start -= self._window_slide
        return windows

    def __repr__(self) -> str:
        return f"CountSlidingWindowAssigner({self._window_size}, {self._window_slide})"


class SessionWindowTimeGapExtractor:
    """Extracts the session gap (ms) of an element for dynamic session windows."""

    def extract(self, element: Any) -> int:
        raise NotImplementedError


def _extractor(extractor: SessionWindowTimeGapExtractor | Callable[[Any], int]) -> Callable[[Any], int]:
    extract = getattr(extractor, "extract", None)
    if extract is not None:
        return extract
    if callable(extractor):
        return extractor
    raise TypeError(f"with_dynamic_gap() expects a SessionWindowTimeGapExtractor, got {extractor!r}")


class _DynamicSession(MergingWindowAssigner):
    __slots__ = ("_extract", "_extractor")

    def get_window_serializer(self) -> Any:
        from streamflow.types.serializer import TimeWindowSerializer

        return TimeWindowSerializer()

    def __init__(self, extractor: SessionWindowTimeGapExtractor | Callable[[Any], int]) -> None:
        self._extractor = extractor
        self._extract = _extractor(extractor)

    def _window(self, element: Any, start: int) -> list[TimeWindow]:
        gap = int(self._extract(element))
        if gap <= 0:
            raise ValueError(f"Dynamic session time gap must satisfy 0 < gap, got {gap} for {element!r}")
        return [TimeWindow(start, start + gap)]

    def merge_windows(
        self, windows: Iterable[TimeWindow], callback: Callable[[list[TimeWindow], TimeWindow], None]
    ) -> None:
        TimeWindow.merge_windows(windows, callback)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._extractor is self._extractor

    def __hash__(self) -> int:
        return hash((type(self), id(self._extractor)))


class DynamicEventTimeSessionWindows(_DynamicSession):
    """Event-time sessions whose gap each element gives."""

    __slots__ = ()

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor | Callable[[Any], int],
    ) -> DynamicEventTimeSessionWindows:
        return DynamicEventTimeSessionWindows(extractor)

    def assign_windows(
        self, element: Any, timestamp: int | None, ctx: WindowAssignerContext | None = None
    ) -> list[TimeWindow]:
        return self._window(element, require_timestamp(timestamp))

    def get_default_trigger(self, env: object = None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True


class DynamicProcessingTimeSessionWindows(_DynamicSession):
    """Processing-time sessions whose gap each element gives."""

    __slots__ = ()

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor | Callable[[Any], int],
    ) -> DynamicProcessingTimeSessionWindows:
        return DynamicProcessingTimeSessionWindows(extractor)

    def assign_windows(
        self, element: Any, timestamp: int | None, ctx: WindowAssignerContext | None = None
    ) -> list[TimeWindow]:
        return self._window(element, _processing_time(ctx, self))

    def get_default_trigger(self, env: object = None) -> Trigger:
        return ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return False
