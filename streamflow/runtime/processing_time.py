"""Processing-time callbacks of one task, run by the task itself (mailbox style).

Operators register ``callback(timestamp_ms)`` for a processing time. The
service asks the clock to wake the task at the earliest deadline; the task's
loop then calls :meth:`run_due` between batches, so a callback never runs
while an operator is in the middle of a batch.

The invariant that keeps a waiting task waking for its next timer every time
(periodic watermarks, idleness, processing-time timers never depend on records
arriving): while callbacks are registered, exactly one alarm is pending and it
is for the earliest one. The alarm and the task race: the task may run a due
callback (woken by a record) before the alarm for it is delivered, and a real
clock's alarm may be delivered a little early. So ``_arm`` replaces an alarm
that is not for the current head, and an alarm that finds nothing due re-arms
instead of waking.

A registration returns a handle whose ``cancel`` withdraws the callback (Flink's
``ScheduledFuture.cancel``): the entry stays in the heap, marked, and is dropped when it reaches
the head, so a cancellation costs nothing; when cancelled entries outnumber the live ones the
heap is rebuilt without them (registrations that keep moving a wake-up earlier leave no trail);
``pending`` lists the live ones (Flink's ``TestProcessingTimeService.getActiveTimerTimestamps``).

Held (``hold``, by a task that snapshotted the savepoint of a stop-with-savepoint): nothing is
due, so no callback runs (no periodic watermark, no processing-time timer: nothing may follow
the savepoint's barrier); ``release`` (the savepoint was aborted) re-arms and wakes the task
if a callback is due meanwhile.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Awaitable, Callable

from ..clock import Cancellable, Clock

Callback = Callable[[int], Awaitable[None]]


class Registration:
    """One registered callback; ``cancel`` withdraws it (a no-op once it ran)."""

    __slots__ = ("callback", "service")

    def __init__(self, callback: Callback | None, service: ProcessingTimeService | None = None) -> None:
        self.callback: Callback | None = callback
        self.service = service

    def cancel(self) -> None:
        if self.callback is not None:
            self.callback = None
            if self.service is not None:
                self.service._cancelled()


_COMPACT_AT = 64  # heap entries before cancelled ones are worth a rebuild


class ProcessingTimeService:
    def __init__(self, clock: Clock, wake: Callable[[], None]) -> None:
        self._clock = clock
        self._wake = wake
        self._heap: list[tuple[int, int, Registration]] = []
        self._seq = itertools.count()
        self._alarm: Cancellable | None = None
        self._alarm_at: int | None = None
        self._held = False
        self._live = 0  # registrations neither run nor cancelled

    def current_processing_time(self) -> int:
        return self._clock.now_ms()

    def register(self, at_ms: int, callback: Callback) -> Registration:
        """Run ``callback(at_ms)`` once processing time reaches ``at_ms``; the handle cancels it."""
        registration = Registration(callback, self)
        heapq.heappush(self._heap, (at_ms, next(self._seq), registration))
        self._live += 1
        self._arm()
        return registration

    def _cancelled(self) -> None:
        self._live -= 1
        heap = self._heap
        if len(heap) > _COMPACT_AT and 2 * self._live < len(heap):
            heap[:] = [entry for entry in heap if entry[2].callback is not None]
            heapq.heapify(heap)

    def pending(self) -> list[int]:
        """The times of the registered callbacks not run nor cancelled, in order."""
        return sorted(at for at, _, r in self._heap if r.callback is not None)

    def _drop_cancelled(self) -> None:
        heap = self._heap
        while heap and heap[0][2].callback is None:
            heapq.heappop(heap)

    def _arm(self) -> None:
        self._drop_cancelled()
        if not self._heap:
            return  # a pending alarm may stay: when it fires it finds nothing and re-arms nothing
        at = self._heap[0][0]
        if self._alarm is not None:
            if self._alarm_at == at:
                return
            # an alarm for another time: one already run by the task (stale) or a later one
            self._alarm.cancel()
        self._alarm_at = at
        self._alarm = self._clock.call_at_ms(at, self._fire)

    def _fire(self) -> None:
        self._alarm = None
        self._alarm_at = None
        if self._held:
            return  # release() re-arms
        if self.has_due():
            self._wake()
        else:
            self._arm()  # delivered early, or its callback already ran: wait for the next one

    def has_due(self) -> bool:
        self._drop_cancelled()
        return not self._held and bool(self._heap) and self._heap[0][0] <= self._clock.now_ms()

    def hold(self) -> None:
        """Run no callback until ``release`` (see the module docstring)."""
        self._held = True

    def release(self) -> None:
        self._held = False
        self._fire_at_release()

    def _fire_at_release(self) -> None:
        if self.has_due():
            self._wake()
        else:
            self._arm()

    async def run_due(self) -> None:
        now = self._clock.now_ms()
        heap = self._heap
        while heap and heap[0][0] <= now and not self._held:
            at, _, registration = heapq.heappop(heap)
            callback, registration.callback = registration.callback, None
            if callback is not None:
                self._live -= 1
                await callback(at)
        self._arm()

    def cancel_all(self) -> None:
        for _, _, registration in self._heap:
            registration.callback = None
        self._heap.clear()
        self._live = 0
        if self._alarm is not None:
            self._alarm.cancel()
            self._alarm = None
            self._alarm_at = None
