"""A manual clock for tests: time moves only when the test says so."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class _Scheduled:
    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """Implements :class:`streamflow.clock.Clock`; never goes backwards.

    Callbacks scheduled with ``call_at_ms`` run inside ``advance``/``set`` once
    their time is reached, so tests of processing time and idleness never sleep.
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms
        self._scheduled: list[tuple[int, int, _Scheduled]] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._now_ms / 1000.0

    def call_at_ms(self, at_ms: int, callback: Callable[[], None]) -> _Scheduled:
        handle = _Scheduled(callback)
        if at_ms <= self._now_ms:
            callback()
        else:
            heapq.heappush(self._scheduled, (at_ms, next(self._seq), handle))
        return handle

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"ManualClock cannot go backwards (advance by {ms} ms)")
        self.set(self._now_ms + ms)

    def set(self, now_ms: int) -> None:
        if now_ms < self._now_ms:
            raise ValueError(f"ManualClock cannot go backwards ({self._now_ms} -> {now_ms})")
        self._now_ms = now_ms
        while self._scheduled and self._scheduled[0][0] <= now_ms:
            _, _, handle = heapq.heappop(self._scheduled)
            if not handle.cancelled:
                handle.callback()
