"""Time sources. Core code never calls ``time.time()``: it asks a :class:`Clock`.

``SystemClock`` is the real one; :class:`streamflow.testing.ManualClock` is the
test double that only moves when told to (and never backwards).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable


class Cancellable(Protocol):
    def cancel(self) -> None: ...


@runtime_checkable
class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock (processing) time in epoch milliseconds."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds, for durations and timeouts."""
        ...

    def call_at_ms(self, at_ms: int, callback: Callable[[], None]) -> Cancellable:
        """Run ``callback`` (on the running event loop) once ``now_ms() >= at_ms``."""
        ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def call_at_ms(self, at_ms: int, callback: Callable[[], None]) -> Cancellable:
        delay = max(0.0, (at_ms - self.now_ms()) / 1000.0)
        return asyncio.get_running_loop().call_later(delay, callback)


SYSTEM_CLOCK = SystemClock()
