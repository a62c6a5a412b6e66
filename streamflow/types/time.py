"""``Time``, ``Duration`` and ``Instant`` with PyFlink's names.

Everywhere in streamflow a span of time is integer milliseconds (or a
``datetime.timedelta``). :class:`Time` and :class:`Duration` therefore *are*
ints (subclasses of ``int`` holding milliseconds), so ``Time.seconds(5)`` and
``Duration.of_millis(200)`` go wherever milliseconds are accepted, with no
conversion step. ``Duration.of_nanos`` keeps its nanoseconds in ``nanos`` and
rounds down to whole milliseconds where it is used as a span.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Duration", "Instant", "Time"]


class Time(int):
    """A span of time in milliseconds (PyFlink's deprecated ``Time``)."""

    def __new__(cls, milliseconds: int) -> Time:
        return super().__new__(cls, int(milliseconds))

    def to_milliseconds(self) -> int:
        return int(self)

    @staticmethod
    def milliseconds(milliseconds: int) -> Time:
        return Time(milliseconds)

    @staticmethod
    def seconds(seconds: int) -> Time:
        return Time(seconds * 1000)

    @staticmethod
    def minutes(minutes: int) -> Time:
        return Time(minutes * 60_000)

    @staticmethod
    def hours(hours: int) -> Time:
        return Time(hours * 3_600_000)

    @staticmethod
    def days(days: int) -> Time:
        return Time(days * 86_400_000)

    def __str__(self) -> str:
        return f"{int(self)} ms"

    def __repr__(self) -> str:
        return f"Time.milliseconds({int(self)})"


class Duration(int):
    """A span of time (Java's ``Duration``); its int value is whole milliseconds."""

    nanos: int

    def __new__(cls, nanos: int) -> Duration:
        self = super().__new__(cls, int(nanos) // 1_000_000)
        self.nanos = int(nanos)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return Duration, (self.nanos,)

    @staticmethod
    def of_days(days: int) -> Duration:
        return Duration(days * 86_400 * 10**9)

    @staticmethod
    def of_hours(hours: int) -> Duration:
        return Duration(hours * 3_600 * 10**9)

    @staticmethod
    def of_minutes(minutes: int) -> Duration:
        return Duration(minutes * 60 * 10**9)

    @staticmethod
    def of_seconds(seconds: int) -> Duration:
        return Duration(seconds * 10**9)

    @staticmethod
    def of_millis(millis: int) -> Duration:
        return Duration(millis * 10**6)

    @staticmethod
    def of_nanos(nanos: int) -> Duration:
        return Duration(nanos)

    def to_milliseconds(self) -> int:
        return int(self)

    def to_millis(self) -> int:
        return int(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Duration):
            return self.nanos == other.nanos
        return int.__eq__(self, other)

    def __hash__(self) -> int:
        return int.__hash__(self)

    def __repr__(self) -> str:
        return f"Duration.of_nanos({self.nanos})"


class Instant:
    """A point on the time line: seconds and nanoseconds since the epoch."""

    def __init__(self, seconds: int, nanos: int) -> None:
        self.seconds = seconds
        self.nanos = nanos

    def to_epoch_milli(self) -> int:
        return self.seconds * 1000 + self.nanos // 1_000_000

    @staticmethod
    def of_epoch_milli(epoch_milli: int) -> Instant:
        secs, millis = divmod(epoch_milli, 1000)
        return Instant(secs, millis * 1_000_000)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Instant) and (self.seconds, self.nanos) == (other.seconds, other.nanos)

    def __hash__(self) -> int:
        return hash((self.seconds, self.nanos))

    def __repr__(self) -> str:
        return f"Instant<{self.seconds}, {self.nanos}>"
