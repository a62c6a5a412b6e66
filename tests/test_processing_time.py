"""A task waiting for input wakes for its next due timer, every time (issue 8 item 9).

A real clock's alarm is a callback the event loop runs some time after the
deadline passed; meanwhile the task may have been woken by a record and run the
due callback itself. :class:`LaggingClock` makes that latency explicit: time
moves with ``set``/``advance``, alarms run only on ``deliver()``, so the race is
scripted, not timed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import streamflow as sf
from streamflow.runtime.processing_time import ProcessingTimeService
from streamflow.testing import ManualClock


class LaggingClock(ManualClock):
    """A manual clock whose alarms are delivered only when the test says so."""

    def __init__(self, start_ms: int = 0) -> None:
        super().__init__(start_ms)
        self.alarms: list[tuple[int, Any]] = []

    def call_at_ms(self, at_ms: int, callback: Callable[[], None]) -> Any:
        handle = _Handle(callback)
        self.alarms.append((at_ms, handle))
        return handle

    def deliver(self, early_ms: int = 0) -> int:
        """Run the alarms due at ``now + early_ms`` (early: a clock that fires too soon)."""
        due = [(at, h) for at, h in self.alarms if at <= self.now_ms() + early_ms]
        self.alarms = [(at, h) for at, h in self.alarms if at > self.now_ms() + early_ms]
        for _, handle in sorted(due, key=lambda a: a[0]):
            if not handle.cancelled:
                handle.callback()
        return len(due)

    def pending(self) -> list[int]:
        return sorted(at for at, h in self.alarms if not h.cancelled)


class _Handle:
    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Service:
    """A ProcessingTimeService with a periodic callback that re-registers itself (as the
    timestamps operator's periodic watermark emit does)."""

    def __init__(self) -> None:
        self.clock = LaggingClock(0)
        self.wakes = 0
        self.ran: list[int] = []
        self.service = ProcessingTimeService(self.clock, self._wake)

    def _wake(self) -> None:
        self.wakes += 1

    async def periodic(self, at: int) -> None:
        self.ran.append(at)
        self.service.register(at + 200, self.periodic)


# steps: ("register", at) | ("set", now) | ("deliver", early_ms) | ("run_due",)
# expected after each step: (wakes so far, callbacks run so far, pending alarm times)
SCRIPTS: dict[str, list[tuple[tuple, tuple[int, list[int], list[int]]]]] = {
    "alarm_then_task": [
        (("register", 200), (0, [], [200])),
        (("set", 200), (0, [], [200])),
        (("deliver", 0), (1, [], [])),
        (("run_due",), (1, [200], [400])),
        (("set", 400), (1, [200], [400])),
        (("deliver", 0), (2, [200], [])),
    ],
    # the task, woken by a record, runs the due callback before the alarm is delivered: the
    # alarm for 200 is stale and must not stand in the way of the one for 400
    "task_before_its_alarm": [
        (("register", 200), (0, [], [200])),
        (("set", 200), (0, [], [200])),
        (("run_due",), (0, [200], [400])),
        (("deliver", 0), (0, [200], [400])),
        (("set", 400), (0, [200], [400])),
        (("deliver", 0), (1, [200], [])),
        (("run_due",), (1, [200, 400], [600])),
    ],
    # an alarm delivered before its time (a real clock may): no wake-up, the alarm is re-armed
    "alarm_delivered_early": [
        (("register", 200), (0, [], [200])),
        (("set", 199), (0, [], [200])),
        (("deliver", 1), (0, [], [200])),
        (("set", 200), (0, [], [200])),
        (("deliver", 0), (1, [], [])),
    ],
    "an_earlier_timer_moves_the_alarm": [
        (("register", 500), (0, [], [500])),
        (("register", 300), (0, [], [300])),
        (("register", 400), (0, [], [300])),
        (("set", 300), (0, [], [300])),
        (("deliver", 0), (1, [], [])),
        (("run_due",), (1, [300], [400])),
    ],
}


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_processing_time_service_always_arms_its_next_timer(name: str) -> None:
    s = Service()
    for step, (wakes, ran, pending) in SCRIPTS[name]:
        kind = step[0]
        if kind == "register":
            s.service.register(step[1], s.periodic)
        elif kind == "set":
            s.clock.set(step[1])
        elif kind == "deliver":
            s.clock.deliver(step[1])
        else:
            await s.service.run_due()
        assert (s.wakes, s.ran, s.clock.pending()) == (wakes, ran, pending), f"after {step}"


class Timers(sf.KeyedProcessFunction):
    """One event-time timer per record, at its timestamp; reports the timers that fire."""

    def process_element(self, value: Any, ctx: Any) -> list:
        ctx.timer_service().register_event_time_timer(ctx.timestamp())
        return []

    def on_timer(self, timestamp: int, ctx: Any) -> list:
        return [("fired", ctx.get_current_key(), timestamp)]


async def settle(rounds: int = 40) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


async def test_a_blocked_source_goes_idle_without_records() -> None:
    """The issue's scenario, made deterministic: two async-iterable sources unioned into a keyed
    process function; "quiet" (bounded out-of-orderness 0, idleness 100 ms) yields one record
    just as its first periodic emit is due, then blocks. Its task runs that emit when the record
    wakes it, before the clock's alarm is delivered; it must still wake for every later emit,
    go idle (Flink's IdlenessTimer) and let the downstream watermark follow "busy"."""
    clock = LaggingClock(0)
    env = sf.StreamExecutionEnvironment(clock=clock)
    go, stop = asyncio.Event(), asyncio.Event()
    busy_queue: asyncio.Queue[Any] = asyncio.Queue()

    async def quiet() -> AsyncIterator[Any]:
        await go.wait()
        yield ("q", 1)
        await stop.wait()  # blocks: no record, no end

    async def busy() -> AsyncIterator[Any]:
        while True:
            yield await busy_queue.get()

    def strategy() -> sf.WatermarkStrategy:
        return (
            sf.WatermarkStrategy.for_bounded_out_of_orderness(0)
            .with_idleness(100)
            .with_timestamp_assigner(lambda e: e[1])
        )

    q = env.from_async_iterable(quiet).assign_timestamps_and_watermarks(strategy())
    b = env.from_async_iterable(busy).assign_timestamps_and_watermarks(strategy())
    results: list[tuple] = []
    q.union(b).key_by(lambda e: e[0]).process(Timers()).add_sink(results.append)
    client = await env.execute_async()
    try:
        await settle()
        busy_queue.put_nowait(("b", 10))
        clock.set(200)  # quiet's first periodic emit is due ...
        go.set()  # ... and its record arrives: the task runs the emit before the alarm
        await settle()
        clock.deliver()
        await settle()
        fired_at = None
        for step in range(1, 15):
            busy_queue.put_nowait(("b", 10 + 10 * step))
            clock.advance(200)
            await settle()
            clock.deliver()
            await settle()
            if ("fired", "q", 1) in results:
                fired_at = clock.now_ms()
                break
        # quiet's emits (Flink's IdlenessTimer): at 200 (run before its record) no activity yet,
        # at 400 the record's activity resets the timer, at 600 the countdown starts, at 800 it
        # is more than 100 ms old: idle. Busy's watermark then passes 1 and quiet's timer fires.
        assert fired_at == 800, (fired_at, results)
    finally:
        stop.set()
        await asyncio.wait_for(client.cancel(), 10)


class Ticker(sf.KeyedProcessFunction):
    """A processing-time timer every 100 ms after the first record of a key."""

    def process_element(self, value: Any, ctx: Any) -> list:
        if value[1] == "start":
            ctx.timer_service().register_processing_time_timer(
                ctx.timer_service().current_processing_time() + 100
            )
        return []

    def on_timer(self, timestamp: int, ctx: Any) -> list:
        ctx.timer_service().register_processing_time_timer(timestamp + 100)
        return [(ctx.get_current_key(), timestamp)]


async def test_processing_time_timers_fire_while_the_input_blocks() -> None:
    """A keyed processing-time timer re-registers itself; its task is woken by a record just as
    the first timer is due (and runs it before the clock's alarm is delivered), then the source
    blocks: every later timer must still fire, with no record arriving."""
    clock = LaggingClock(0)
    env = sf.StreamExecutionEnvironment(clock=clock)
    second, stop = asyncio.Event(), asyncio.Event()

    async def blocking() -> AsyncIterator[Any]:
        yield ("k", "start")
        await second.wait()
        yield ("k", "more")
        await stop.wait()  # blocks: no record, no end

    results: list[tuple] = []
    env.from_async_iterable(blocking).key_by(lambda e: e[0]).process(Ticker()).add_sink(results.append)
    client = await env.execute_async()
    try:
        await settle()
        clock.set(100)  # the first timer is due ...
        second.set()  # ... and a record wakes the task, which runs it before the alarm
        await settle()
        clock.deliver()
        await settle()
        for now in (200, 300, 400):
            clock.set(now)
            clock.deliver()
            await settle()
        assert results == [("k", 100), ("k", 200), ("k", 300), ("k", 400)]
    finally:
        stop.set()
        await asyncio.wait_for(client.cancel(), 10)


async def test_a_processing_time_timer_context_has_the_timer_timestamp() -> None:
    """Flink's OnTimerContext.timestamp() (and PyFlink's on_timer context) is the timer's time in
    both domains; a processing-time timer's outputs carry no timestamp (Flink erases it), which
    a process function downstream reads as Long.MIN_VALUE, as PyFlink's context gives it.
    ctx.timestamp() was None for a processing-time timer before."""
    from streamflow.datastream.functions import KeyedProcessFunction, ProcessFunction

    class Remind(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_processing_time_timer(100)
            return ()

        def on_timer(self, timestamp, ctx):
            yield timestamp, ctx.timestamp(), ctx.time_domain()

    class Stamp(ProcessFunction):
        def process_element(self, value, ctx):
            yield (*value, ctx.timestamp())

    clock = ManualClock(0)
    env = sf.StreamExecutionEnvironment(clock=clock)
    stop = asyncio.Event()

    async def one_then_block() -> AsyncIterator[Any]:
        yield "k"
        await stop.wait()

    results: list[tuple] = []
    env.from_async_iterable(one_then_block).key_by(lambda e: e).process(Remind()).process(Stamp()).add_sink(
        results.append
    )
    client = await env.execute_async()
    try:
        await settle()
        clock.set(100)
        await settle()
        assert results == [(100, 100, sf.TimeDomain.PROCESSING_TIME, -(2**63))]
    finally:
        stop.set()
        await asyncio.wait_for(client.get_job_execution_result(), 10)
