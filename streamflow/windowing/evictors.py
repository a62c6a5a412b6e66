"""Evictors: remove elements from a pane before or after the window function runs.

Theory of operation
-------------------
A window with an evictor keeps every element (no pre-aggregation). When the
trigger fires, the window operator hands the evictor the pane's contents as
a ``list`` of ``(timestamp, value)`` pairs in arrival order, calls
``evict_before``, runs the window function on what is left, then calls
``evict_after``; what remains after both is written back as the pane.
Evictors edit the list **in place**. Each built-in evictor acts at exactly
one of the two points, chosen by ``do_evict_after`` (default: before), and
``size`` is the element count the operator passes in (``len(elements)``).
A timestamp of ``None`` means the element has no timestamp.

Ported from ``flink-streaming-java/.../streaming/api/windowing/evictors/``
(``Evictor.java``, ``CountEvictor.java``, ``TimeEvictor.java``):

* ``CountEvictor`` keeps the last ``max_count`` elements: if ``size >
  max_count`` it drops the first ``size - max_count``.
* ``TimeEvictor`` keeps the elements of the last ``window_size`` ms: if the
  first element has a timestamp, with ``current = max(timestamps)`` it drops
  every element with ``timestamp <= current - window_size``. Elements
  without a timestamp are kept and ignored for the maximum.
* ``DeltaEvictor`` (``DeltaEvictor.java``) keeps the elements close to the
  last one: it drops every element whose ``delta_function.get_delta(element,
  last)`` is ``>= threshold`` (the last element's own delta is usually 0, so it
  stays). The delta function is Flink's ``DeltaFunction``
  (``.../functions/windowing/delta/DeltaFunction.java``) or a plain callable.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamflow.windowing.context import EvictorContext
from streamflow.windowing.windows import Duration, Window, duration_to_millis

__all__ = ["CountEvictor", "DeltaEvictor", "DeltaFunction", "Evictor", "TimeEvictor", "TimestampedValues"]

TimestampedValues = list[tuple[int | None, Any]]
"""A pane's contents as given to an evictor: ``(timestamp, value)`` in arrival order."""


class Evictor(ABC):
    """Removes elements from a pane around the window function (Flink's ``Evictor``)."""

    __slots__ = ()

    @abstractmethod
    def evict_before(
        self, elements: TimestampedValues, size: int, window: Window, ctx: EvictorContext
    ) -> None:
        """Evict (in place) before the window function is applied."""

    @abstractmethod
    def evict_after(
        self, elements: TimestampedValues, size: int, window: Window, ctx: EvictorContext
    ) -> None:
        """Evict (in place) after the window function was applied."""


class _BeforeOrAfter(Evictor):
    """A built-in evictor: acts at one of the two points, after the window function when its
    ``do_evict_after`` is set, else before it (Flink's ``doEvictAfter``)."""

    __slots__ = ()
    do_evict_after: bool

    def evict_before(
        self, elements: TimestampedValues, size: int, window: Window, ctx: EvictorContext
    ) -> None:
        if not self.do_evict_after:
            self._evict(elements, size)

    def evict_after(
        self, elements: TimestampedValues, size: int, window: Window, ctx: EvictorContext
    ) -> None:
        if self.do_evict_after:
            self._evict(elements, size)

    @abstractmethod
    def _evict(self, elements: TimestampedValues, size: int) -> None:
        """Evict (in place)."""


@dataclass(frozen=True, slots=True)
class CountEvictor(_BeforeOrAfter):
    """Keeps up to ``max_count`` elements: the most recent ones (``CountEvictor.java``)."""

    max_count: int
    do_evict_after: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.max_count, bool) or not isinstance(self.max_count, int):
            raise TypeError(f"CountEvictor count must be an int, got {self.max_count!r}")
        if self.max_count < 0:
            raise ValueError(f"CountEvictor count must be >= 0, got {self.max_count}")

    @staticmethod
    def of(max_count: int, do_evict_after: bool = False) -> CountEvictor:
        return CountEvictor(max_count, do_evict_after)

    def _evict(self, elements: TimestampedValues, size: int) -> None:
        if size > self.max_count:
            del elements[: size - self.max_count]


@dataclass(frozen=True, slots=True)
class TimeEvictor(_BeforeOrAfter):
    """Keeps the elements of the last ``window_size`` ms of the pane (``TimeEvictor.java``)."""

    window_size: int
    do_evict_after: bool = False

    def __post_init__(self) -> None:
        millis = duration_to_millis(self.window_size, "TimeEvictor window size")
        if millis < 0:
            raise ValueError(f"TimeEvictor window size must be >= 0, got {millis}")
        object.__setattr__(self, "window_size", millis)

    @staticmethod
    def of(window_size: Duration, do_evict_after: bool = False) -> TimeEvictor:
        return TimeEvictor(duration_to_millis(window_size, "window_size"), do_evict_after)

    def _evict(self, elements: TimestampedValues, size: int) -> None:
        if not elements or elements[0][0] is None:
            return  # Flink: only if the first element has a timestamp
        stamps = [ts for ts, _ in elements if ts is not None]
        if len(stamps) < len(elements):  # TimestampedValue.getTimestamp() throws
            raise RuntimeError(
                "Record has no timestamp. Is the time characteristic set to 'ProcessingTime', or "
                "did you forget to call 'DataStream.assignTimestampsAndWatermarks(...)'? "
                f"(TimeEvictor({self.window_size}) found an element without one behind one with)"
            )
        cutoff = max(stamps) - self.window_size
        elements[:] = [e for e, ts in zip(elements, stamps, strict=True) if ts > cutoff]


class DeltaFunction(ABC):
    """The distance between two data points (Flink's ``DeltaFunction``)."""

    @abstractmethod
    def get_delta(self, old_data_point: Any, new_data_point: Any) -> float:
        """The delta from ``old_data_point`` to ``new_data_point``."""


def _delta_of(delta_function: DeltaFunction | Callable[[Any, Any], float]) -> Callable[[Any, Any], float]:
    get_delta = getattr(delta_function, "get_delta", None)
    if get_delta is not None:
        return get_delta
    if callable(delta_function):
        return delta_function
    raise TypeError(
        f"DeltaEvictor needs a DeltaFunction or a callable (old, new) -> float, got {delta_function!r}"
    )


@dataclass(frozen=True, slots=True)
class DeltaEvictor(_BeforeOrAfter):
    """Keeps the elements whose delta to the last element is below ``threshold`` (``DeltaEvictor.java``)."""

    threshold: float
    delta_function: Any
    do_evict_after: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int | float):
            raise TypeError(f"DeltaEvictor threshold must be a number, got {self.threshold!r}")
        _delta_of(self.delta_function)

    @staticmethod
    def of(
        threshold: float,
        delta_function: DeltaFunction | Callable[[Any, Any], float],
        do_evict_after: bool = False,
    ) -> DeltaEvictor:
        return DeltaEvictor(threshold, delta_function, do_evict_after)

    def _evict(self, elements: TimestampedValues, size: int) -> None:
        if not elements:
            return
        delta, threshold = _delta_of(self.delta_function), self.threshold
        last = elements[-1][1]
        elements[:] = [e for e in elements if delta(e[1], last) < threshold]

    def __repr__(self) -> str:
        return f"DeltaEvictor({self.threshold}, {self.delta_function!r}, {self.do_evict_after})"
