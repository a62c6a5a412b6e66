"""Timeouts and retry backoffs of async I/O requests on the job's clock (processing time).

Flink's ``AsyncWaitOperator`` registers each element's timeout, and each retry's backoff, as a
timer of the task's processing-time service, so a test harness that sets the processing time
(``TestProcessingTimeService``) times requests out, and a job's clock is the one clock of
everything timed. Here the job's :class:`~streamflow.clock.Clock` (a
:class:`~streamflow.testing.ManualClock` in tests) decides when a request's time is up.

Theory of operation. A request runs inside an ``asyncio.timeout(None)`` (a deadline with no
loop timer of its own) and, while it runs, is a member of a *group*: the requests started in
the same millisecond of the clock share one expiry time (``start + timeout``) and one clock
alarm (``Clock.call_at_ms``), so a batch of records started together costs one alarm, not one
per record; a request reads the clock once and adds itself to a set. When the alarm fires, every
member still running has its deadline moved to now (``Timeout.reschedule``): asyncio cancels
it at the next loop iteration and its ``async with`` raises ``TimeoutError`` with
``expired()`` true, exactly as the loop-timed deadline did, so the operator's handling of a
timeout (``timeout(value)``) is unchanged. A request that ends leaves its group; the alarm of a
group that is empty and no longer current is cancelled, so a long timeout does not keep an
alarm per millisecond of traffic pending.

The alarm runs where the clock runs callbacks: the event loop for the system clock, inside
``set``/``advance`` for a manual clock (called from the loop). It does not go through the task's
processing-time service (the mailbox), which an operator waiting for a free place in its queue
does not run: the request's own task handles its timeout.

``backoff(ms)`` sleeps on the same clock: a retry waits until the clock has advanced by its
backoff (Flink's ``RetryableResultHandlerDelegator`` registers a processing-time timer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ..clock import Cancellable, Clock

__all__ = ["Deadlines", "Group"]


class Group:
    """The requests started in one millisecond: one expiry, one alarm (module doc)."""

    __slots__ = ("alarm", "current", "members")

    def __init__(self) -> None:
        self.members: set[asyncio.Timeout] = set()
        self.alarm: Cancellable | None = None
        self.current = True

    def expire(self) -> None:
        self.alarm = None
        if not self.members:
            return
        now = asyncio.get_running_loop().time()
        members, self.members = self.members, set()
        for deadline in members:
            deadline.reschedule(now)  # due now: cancelled at the next iteration, expired()

    def leave(self, deadline: asyncio.Timeout) -> None:
        members = self.members
        members.discard(deadline)
        if not members and not self.current and self.alarm is not None:
            self.alarm.cancel()
            self.alarm = None


class Deadlines:
    """Expiry groups of one operator for ``timeout_ms`` on ``clock`` (module doc)."""

    __slots__ = ("_clock", "_group", "_start", "_timeout_ms")

    def __init__(self, clock: Clock, timeout_ms: int) -> None:
        self._clock, self._timeout_ms = clock, timeout_ms
        self._group: Group | None = None
        self._start = 0

    def _group_now(self) -> Group:
        """The group of a request starting now (a new one when the clock's millisecond moved)."""
        now = self._clock.now_ms()
        group = self._group
        if group is not None and now == self._start:
            return group
        if group is not None:
            group.current = False
            if not group.members and group.alarm is not None:
                group.alarm.cancel()
                group.alarm = None
        group = self._group = Group()
        self._start = now
        group.alarm = self._clock.call_at_ms(now + self._timeout_ms, group.expire)
        return group

    async def run(
        self, call: Callable[[Any], Awaitable[Any]], arg: Any, on_timeout: Callable[[Any], Any]
    ) -> Any:
        """``await call(arg)`` within the timeout from now; when the time runs out, the result
        is ``on_timeout(arg)`` (a ``TimeoutError`` the call raises itself propagates). The
        request joins its group here, when it starts, so a group is never left empty by a
        request not started yet (whose alarm would be cancelled); ``call`` is called here too,
        so a request cancelled before it starts leaves no coroutine never awaited. The
        operator hands this coroutine to its task as it is (no wrapper around it)."""
        deadline = asyncio.timeout(None)
        try:
            async with deadline:
                group = self._group_now()
                group.members.add(deadline)
                try:
                    return await call(arg)
                finally:
                    group.leave(deadline)
        except TimeoutError:
            if not deadline.expired():
                raise
            return on_timeout(arg)


async def backoff(clock: Clock, ms: int) -> None:
    """Sleep until ``clock`` has advanced by ``ms`` (a retry's backoff; module doc)."""
    if ms <= 0:
        await asyncio.sleep(0)
        return
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not future.done():
            future.set_result(None)

    alarm = clock.call_at_ms(clock.now_ms() + ms, wake)
    try:
        await future
    finally:
        alarm.cancel()
