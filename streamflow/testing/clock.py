"""A manual clock for tests: time moves only when the test says so."""

from __future__ import annotations


class ManualClock:
    """Implements :class:`streamflow.clock.Clock`; never goes backwards."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._now_ms / 1000.0

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"ManualClock cannot go backwards (advance by {ms} ms)")
        self._now_ms += ms

    def set(self, now_ms: int) -> None:
        if now_ms < self._now_ms:
            raise ValueError(f"ManualClock cannot go backwards ({self._now_ms} -> {now_ms})")
        self._now_ms = now_ms
