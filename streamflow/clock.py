"""Time sources. Core code never calls ``time.time()``: it asks a :class:`Clock`.

``SystemClock`` is the real one; :class:`streamflow.testing.ManualClock` is the
test double that only moves when told to (and never backwards).
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock (processing) time in epoch milliseconds."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds, for durations and timeouts."""
        ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()
