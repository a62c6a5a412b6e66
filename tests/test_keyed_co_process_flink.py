"""Flink's KeyedCoProcessOperatorTest (with the cases it inherits from
LegacyKeyedCoProcessOperatorTest), ported through the DataStream API: flink-streaming-java/src/
test/java/org/apache/flink/streaming/api/operators/co/KeyedCoProcessOperatorTest.java and
LegacyKeyedCoProcessOperatorTest.java.

KeyedTwoInputStreamOperatorTestHarness becomes a job over two fed :class:`ScriptedSource`\\ s,
keyed as Flink's test keys them (input 1: the int as a string, input 2: the string itself), with
a :class:`ManualClock` as processing time, on the heap backend and on RocksDB; the outputs are
recorded with their timestamps (``None`` for a record without one), as the harness's
StreamRecords.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

import streamflow as sf
from streamflow.api.environment import set_default_configuration
from streamflow.common import Types
from streamflow.datastream import StreamExecutionEnvironment, TimeDomain
from streamflow.datastream.functions import KeyedCoProcessFunction, ProcessFunction
from streamflow.datastream.state import ValueStateDescriptor
from streamflow.runtime.events import MIN_WATERMARK
from streamflow.testing import ListSink, ManualClock, Record, ScriptedSource


@pytest.fixture(params=["hashmap", "rocksdb"], autouse=True)
def state_backend(request: pytest.FixtureRequest) -> Any:
    """Every test on the heap backend and on RocksDB (whose timers live in its DB)."""
    set_default_configuration({"state.backend.type": request.param})
    yield request.param
    set_default_configuration({})


class _Stamped(ProcessFunction):
    """Each record with its timestamp; its ``open`` tells the harness the job has started
    (restored and opened: the tests' clock and inputs move only after that)."""

    def __init__(self, harness: Any) -> None:
        self.harness = harness

    def open(self, runtime_context: Any) -> None:
        self.harness.opened = True

    def process_element(self, value: Any, ctx: Any) -> Any:
        ts = ctx.timestamp()
        yield value, (None if ts == MIN_WATERMARK else ts)


def _ts_text(ctx: Any) -> Any:
    ts = ctx.timestamp()
    return "null" if ts == MIN_WATERMARK else ts


class Harness:
    """KeyedTwoInputStreamOperatorTestHarness as a running job."""

    def __init__(self, function: Any, savepoint: str | None = None) -> None:
        self.sources = (ScriptedSource([], end=False), ScriptedSource([], end=False))
        self.clock = ManualClock()
        self.env = StreamExecutionEnvironment(clock=self.clock).set_parallelism(1)
        if savepoint is not None:
            self.env.configure({"execution.savepoint.path": savepoint})
        self.sink = ListSink()
        one = self.env.from_source(self.sources[0], None, "one").uid("one")
        two = self.env.from_source(self.sources[1], None, "two").uid("two")
        self.stream = one.connect(two).key_by(lambda v: str(v), lambda v: v).process(function).uid("op")
        self.stream.process(_Stamped(self)).sink_to(self.sink)
        self.client: Any = None
        self.opened = False

    def side(self, tag: Any) -> ListSink:
        sink = ListSink()
        self.stream.get_side_output(tag).process(_Stamped(self)).sink_to(sink)
        return sink

    async def start(self) -> Harness:
        self.client = await self.env.execute_async("keyed-co-process")
        await wait_until(lambda: self.opened)
        return self

    async def settle(self) -> None:
        for _ in range(300):
            await asyncio.sleep(0)

    async def element1(self, value: Any, timestamp: int | None = None) -> None:
        self.sources[0].push(Record(value, timestamp))
        await self.settle()

    async def element2(self, value: Any, timestamp: int | None = None) -> None:
        self.sources[1].push(Record(value, timestamp))
        await self.settle()

    async def watermark(self, ts: int) -> None:
        """processWatermark1 and processWatermark2."""
        for source in self.sources:
            source.push(sf.Watermark(ts))
        await self.settle()

    async def processing_time(self, ms: int) -> None:
        self.clock.set(ms)
        await self.settle()

    async def close(self) -> list:
        for source in self.sources:
            source.finish()
        await asyncio.wait_for(self.client.get_job_execution_result(), 60)
        return self.sink.results


async def test_get_current_key_from_context() -> None:
    """KeyedCoProcessOperatorTest#testGetCurrentKeyFromContext."""

    class RepeatKey(KeyedCoProcessFunction):
        def process_element1(self, value, ctx):
            yield f"{value},{ctx.get_current_key()}"

        def process_element2(self, value, ctx):
            yield f"{value},{ctx.get_current_key()}"

    h = await Harness(RepeatKey()).start()
    await h.element1(5)
    await h.element1(6)
    await h.element2("hello")
    await h.element2("world")
    assert await h.close() == [("5,5", None), ("6,6", None), ("hello,hello", None),
                               ("world,world", None)]


class EventTimeTriggering(KeyedCoProcessFunction):
    """KeyedCoProcessOperatorTest.EventTimeTriggeringProcessFunction."""

    def process_element1(self, value, ctx):
        yield f"INPUT1:{value}"
        ctx.timer_service().register_event_time_timer(5)

    def process_element2(self, value, ctx):
        yield f"INPUT2:{value}"
        ctx.timer_service().register_event_time_timer(6)

    def on_timer(self, timestamp, ctx):
        assert ctx.time_domain() == TimeDomain.EVENT_TIME
        yield f"{ctx.get_current_key()}:1777"


async def test_get_current_key_from_timers() -> None:
    """KeyedCoProcessOperatorTest#testGetCurrentKeyFromTimers (and the Legacy test's
    testEventTimeTimers): each timer fires under its key, with its timestamp."""
    h = await Harness(EventTimeTriggering()).start()
    await h.element1(17, 42)
    await h.element2("18", 42)
    await h.watermark(5)
    await h.watermark(6)
    assert await h.close() == [("INPUT1:17", 42), ("INPUT2:18", 42), ("17:1777", 5),
                               ("18:1777", 6)]


async def test_timestamp_and_watermark_querying() -> None:
    """LegacyKeyedCoProcessOperatorTest#testTimestampAndWatermarkQuerying."""

    class Querying(KeyedCoProcessFunction):
        def process_element1(self, value, ctx):
            yield f"{value}WM:{ctx.timer_service().current_watermark()} TS:{_ts_text(ctx)}"

        def process_element2(self, value, ctx):
            yield f"{value}WM:{ctx.timer_service().current_watermark()} TS:{_ts_text(ctx)}"

    h = await Harness(Querying()).start()
    await h.watermark(17)
    await h.element1(5, 12)
    await h.watermark(42)
    await h.element2("6", 13)
    assert await h.close() == [("5WM:17 TS:12", 12), ("6WM:42 TS:13", 13)]


async def test_timestamp_and_processing_time_querying() -> None:
    """LegacyKeyedCoProcessOperatorTest#testTimestampAndProcessingTimeQuerying."""

    class Querying(KeyedCoProcessFunction):
        def process_element1(self, value, ctx):
            yield f"{value}PT:{ctx.timer_service().current_processing_time()} TS:{_ts_text(ctx)}"

        def process_element2(self, value, ctx):
            yield f"{value}PT:{ctx.timer_service().current_processing_time()} TS:{_ts_text(ctx)}"

    h = await Harness(Querying()).start()
    await h.processing_time(17)
    await h.element1(5)
    await h.processing_time(42)
    await h.element2("6")
    assert await h.close() == [("5PT:17 TS:null", None), ("6PT:42 TS:null", None)]


async def test_processing_time_timers() -> None:
    """LegacyKeyedCoProcessOperatorTest#testProcessingTimeTimers: processing-time timers'
    outputs have no timestamp."""

    class Triggering(KeyedCoProcessFunction):
        def process_element1(self, value, ctx):
            yield f"INPUT1:{value}"
            ctx.timer_service().register_processing_time_timer(5)

        def process_element2(self, value, ctx):
            yield f"INPUT2:{value}"
            ctx.timer_service().register_processing_time_timer(6)

        def on_timer(self, timestamp, ctx):
            assert ctx.time_domain() == TimeDomain.PROCESSING_TIME
            yield "1777"

    h = await Harness(Triggering()).start()
    await h.element1(17)
    await h.element2("18")
    await h.processing_time(5)
    await h.processing_time(6)
    assert await h.close() == [("INPUT1:17", None), ("INPUT2:18", None), ("1777", None),
                               ("1777", None)]


class TriggeringStateful(KeyedCoProcessFunction):
    """LegacyKeyedCoProcessOperatorTest.{EventTime,ProcessingTime}TriggeringStatefulProcessFunction."""

    def __init__(self, domain: TimeDomain) -> None:
        self.domain = domain
        self.descriptor = ValueStateDescriptor("seen-element", Types.STRING())

    def open(self, ctx):
        self.state = ctx.get_state(self.descriptor)

    def _handle(self, value, ctx, channel):
        service = ctx.timer_service()
        event = self.domain == TimeDomain.EVENT_TIME
        now = service.current_watermark() if event else service.current_processing_time()
        if self.state.value() is None:
            yield f"INPUT{channel}:{value}"
            self.state.update(str(value))
            if event:
                service.register_event_time_timer(now + 5)
            else:
                service.register_processing_time_timer(now + 5)
        else:
            self.state.clear()
            if event:
                service.delete_event_time_timer(now + 4)
            else:
                service.delete_processing_time_timer(now + 4)

    def process_element1(self, value, ctx):
        return self._handle(value, ctx, 1)

    def process_element2(self, value, ctx):
        return self._handle(value, ctx, 2)

    def on_timer(self, timestamp, ctx):
        assert ctx.time_domain() == self.domain
        yield f"STATE:{self.state.value()}"


async def test_event_time_timer_with_state() -> None:
    """LegacyKeyedCoProcessOperatorTest#testEventTimeTimerWithState: no leakage between keys;
    a deleted timer does not fire."""
    h = await Harness(TriggeringStateful(TimeDomain.EVENT_TIME)).start()
    await h.watermark(1)
    await h.element1(17, 0)  # timer for 6
    await h.element1(13, 0)  # timer for 6
    await h.watermark(2)
    await h.element1(13, 1)  # deletes it
    await h.element2("42", 1)  # timer for 7
    await h.watermark(6)
    await h.watermark(7)
    assert await h.close() == [("INPUT1:17", 0), ("INPUT1:13", 0), ("INPUT2:42", 1),
                               ("STATE:17", 6), ("STATE:42", 7)]


async def test_processing_time_timer_with_state() -> None:
    """LegacyKeyedCoProcessOperatorTest#testProcessingTimeTimerWithState."""
    h = await Harness(TriggeringStateful(TimeDomain.PROCESSING_TIME)).start()
    await h.processing_time(1)
    await h.element1(17)
    await h.element1(13)
    await h.processing_time(2)
    await h.element1(13)
    await h.element2("42")
    await h.processing_time(6)
    await h.processing_time(7)
    assert await h.close() == [("INPUT1:17", None), ("INPUT1:13", None), ("INPUT2:42", None),
                               ("STATE:17", None), ("STATE:42", None)]


class BothTriggering(KeyedCoProcessFunction):
    """LegacyKeyedCoProcessOperatorTest.BothTriggeringProcessFunction."""

    def process_element1(self, value, ctx):
        ctx.timer_service().register_event_time_timer(6)
        return []

    def process_element2(self, value, ctx):
        ctx.timer_service().register_processing_time_timer(5)
        return []

    def on_timer(self, timestamp, ctx):
        yield "EVENT:1777" if ctx.time_domain() == TimeDomain.EVENT_TIME else "PROC:1777"


async def test_snapshot_and_restore(tmp_path: Path) -> None:
    """LegacyKeyedCoProcessOperatorTest#testSnapshotAndRestore: both inputs' timers survive a
    savepoint."""
    h = await Harness(BothTriggering()).start()
    await h.element1(5, 12)
    await h.element2("5", 12)
    path = await h.client.trigger_savepoint(str(tmp_path / "sp"))
    await h.client.cancel()
    assert h.sink.results == []

    h2 = Harness(BothTriggering(), savepoint=path)
    h2.sources[0].items.append(Record(5, 12))  # consumed before the savepoint: not read again
    h2.sources[1].items.append(Record("5", 12))
    await h2.start()
    await h2.processing_time(5)
    await h2.watermark(6)
    assert await h2.close() == [("PROC:1777", None), ("EVENT:1777", 6)]


async def test_side_output() -> None:
    """KeyedCoProcessOperatorTest#testSideOutput: both inputs' side outputs carry the record's
    timestamp; a side output from onTimer carries the timer's."""
    from streamflow.datastream import OutputTag

    tag = OutputTag("side", Types.STRING())

    class Sides(KeyedCoProcessFunction):
        def process_element1(self, value, ctx):
            yield f"IN1:{value}"
            yield tag, f"side1:{value}"
            ctx.timer_service().register_event_time_timer(30)

        def process_element2(self, value, ctx):
            yield f"IN2:{value}"
            yield tag, f"side2:{value}"

        def on_timer(self, timestamp, ctx):
            yield tag, f"timer:{ctx.get_current_key()}"

    h = Harness(Sides())
    side = h.side(tag)
    await h.start()
    await h.element1(42, 17)
    await h.element2("x", 18)
    await h.watermark(30)
    assert await h.close() == [("IN1:42", 17), ("IN2:x", 18)]
    assert side.results == [("side1:42", 17), ("side2:x", 18), ("timer:42", 30)]
