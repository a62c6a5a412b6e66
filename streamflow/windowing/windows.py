"""Windows: the finite buckets a window assigner puts elements into.

Theory of operation
-------------------
A window is a value object used as the *namespace* of window state and
timers, so it must be immutable and hashable. Two kinds exist, as in Flink:

* :class:`TimeWindow` ``[start, end)`` -- ``start`` inclusive, ``end``
  exclusive, both epoch milliseconds. Its last timestamp is
  ``max_timestamp() == end - 1``; an event-time window fires when the
  watermark reaches ``end - 1`` (see ``EventTimeTrigger``). Ported from
  ``flink-streaming-java/.../streaming/api/windowing/windows/TimeWindow.java``.
* :class:`GlobalWindow` -- the single window of ``GlobalWindows``; its
  ``max_timestamp()`` is the maximum watermark, so it never ends by time.
  Ported from ``.../windowing/windows/GlobalWindow.java``.

``TimeWindow.get_window_start_with_offset`` is the one alignment rule every
tumbling and sliding assigner uses. It is Flink's current formula (the
``remainder < 0`` fix for negative timestamps), which in Python is simply
``timestamp - (timestamp - offset) % size`` because Python's ``%`` already
floors. ``TimeWindow.merge_windows`` is the session-merging rule: sort by
start, merge every window that intersects *or touches* the running cover
(``intersects`` uses ``<=``/``>=``), report each group of more than one.

Durations throughout the package are ``int`` milliseconds or
:class:`datetime.timedelta`; :func:`duration_to_millis` normalises them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import NamedTuple

from streamflow.runtime.events import MAX_WATERMARK

__all__ = [
    "Duration",
    "GlobalWindow",
    "MergeCallback",
    "TimeWindow",
    "Window",
    "duration_to_millis",
]

Duration = int | timedelta
"""A span of time: ``int`` milliseconds or a :class:`datetime.timedelta`."""

_ONE_MS = timedelta(milliseconds=1)


def duration_to_millis(value: Duration, name: str = "duration") -> int:
    """Normalise ``value`` (int ms or timedelta) to integer milliseconds.

    Raises ``TypeError`` for other types (``bool`` and ``float`` included) and
    ``ValueError`` for a timedelta that is not a whole number of milliseconds.
    """
    if isinstance(value, timedelta):
        millis, rest = divmod(value, _ONE_MS)
        if rest:
            raise ValueError(f"{name} must be a whole number of milliseconds, got {value!r}")
        return int(millis)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{name} must be int milliseconds or datetime.timedelta, got {type(value).__name__}: {value!r}"
        )
    return value


class Window(ABC):
    """A grouping of elements into a finite bucket (Flink's ``Window``)."""

    __slots__ = ()

    @abstractmethod
    def max_timestamp(self) -> int:
        """The largest timestamp that still belongs to this window."""


MergeCallback = Callable[[list["TimeWindow"], "TimeWindow"], None]
"""``callback(to_be_merged, merge_result)`` as given to ``merge_windows``."""


class _Interval(NamedTuple):
    start: int
    end: int


class TimeWindow(_Interval):
    """The interval ``[start, end)`` in epoch milliseconds.

    Ordering is ``(start, end)``, as PyFlink's ``TimeWindow.__lt__``. A tuple
    underneath: windows are dict keys on the hot path, and a tuple's hash and
    equality run in C.
    """

    __slots__ = ()

    def max_timestamp(self) -> int:
        """``end - 1``: the last timestamp inside the window."""
        return self.end - 1

    def intersects(self, other: TimeWindow) -> bool:
        """True if the windows overlap *or are adjacent* (Flink's rule)."""
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: TimeWindow) -> TimeWindow:
        """The minimal window covering both windows."""
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """Start of the window of ``window_size`` (shifted by ``offset``) holding ``timestamp``.

        Flink's ``TimeWindow.getWindowStartWithOffset``: ``remainder = (ts - offset) %
        size``, plus ``size`` when negative. Python's ``%`` floors, so the
        correction is built in and negative timestamps land in the window
        that really contains them.
        """
        return timestamp - (timestamp - offset) % window_size

    @staticmethod
    def merge_windows(windows: Iterable[TimeWindow], callback: MergeCallback) -> None:
        """Merge overlapping (or touching) windows; port of ``TimeWindow.mergeWindows``.

        Windows are sorted by start (stable), then folded: a candidate that
        ``intersects`` the running cover joins it. ``callback(to_be_merged,
        merge_result)`` is invoked, in start order, once per group holding
        more than one *distinct* window (Flink collects each group in a
        set); ``to_be_merged`` lists the distinct windows in start order.
        """
        merged: list[tuple[TimeWindow, list[TimeWindow]]] = []
        current: TimeWindow | None = None
        members: list[TimeWindow] = []
        for candidate in sorted(windows, key=_start_of):
            if current is None:
                current, members = candidate, [candidate]
            elif current.intersects(candidate):
                current = current.cover(candidate)
                if candidate not in members:
                    members.append(candidate)
            else:
                merged.append((current, members))
                current, members = candidate, [candidate]
        if current is not None:
            merged.append((current, members))
        for result, group in merged:
            if len(group) > 1:
                callback(group, result)

    def __repr__(self) -> str:
        return f"TimeWindow(start={self.start}, end={self.end})"


Window.register(TimeWindow)


def _start_of(window: TimeWindow) -> int:
    return window.start


class GlobalWindow(Window):
    """The one window of ``GlobalWindows``: ``GlobalWindow() is GlobalWindow.get()``."""

    __slots__ = ()
    _instance: GlobalWindow | None = None

    def __new__(cls) -> GlobalWindow:
        instance = cls._instance
        if instance is None:
            instance = super().__new__(cls)
            cls._instance = instance
        return instance

    @staticmethod
    def get() -> GlobalWindow:
        """The singleton (PyFlink's ``GlobalWindow.get()``)."""
        return GlobalWindow()

    def max_timestamp(self) -> int:
        """The maximum watermark: a global window never ends by time."""
        return MAX_WATERMARK

    def __reduce__(self) -> tuple[type[GlobalWindow], tuple[()]]:
        # unpickling / deepcopy return the singleton
        return (GlobalWindow, ())

    def __repr__(self) -> str:
        return "GlobalWindow()"
