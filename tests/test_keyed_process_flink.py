"""Flink's KeyedProcessOperatorTest, ported through the DataStream API: flink-streaming-java/src/
test/java/org/apache/flink/streaming/api/operators/KeyedProcessOperatorTest.java.

Flink's KeyedOneInputStreamOperatorTestHarness becomes a job: a :class:`ScriptedSource` that the
test feeds (records with timestamps, watermarks), a :class:`ManualClock` as processing time, the
key selector the identity, each test on the heap backend and on RocksDB; after the operator a
process function records each output with its timestamp (``None`` for a record without one),
so the outputs' timestamps are checked as Flink's harness checks its StreamRecords.

Not ported: testNullOutputTagRefusal (a Python function emits side outputs by yielding
``(OutputTag, value)``; a ``(None, value)`` pair is an ordinary main-output tuple).
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
from streamflow.datastream import OutputTag, StreamExecutionEnvironment, TimeDomain
from streamflow.datastream.functions import KeyedProcessFunction, ProcessFunction
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


class Harness:
    """A running job around one keyed process function (KeyedOneInputStreamOperatorTestHarness)."""

    def __init__(self, function: Any, key: Any = lambda v: v, savepoint: str | None = None) -> None:
        self.source = ScriptedSource([], end=False)
        self.clock = ManualClock()
        self.env = StreamExecutionEnvironment(clock=self.clock).set_parallelism(1)
        if savepoint is not None:
            self.env.configure({"execution.savepoint.path": savepoint})
        self.sink = ListSink()
        self.sides: dict[str, ListSink] = {}
        self.stream = (
            self.env.from_source(self.source, None, "src").uid("src").key_by(key)
            .process(function).uid("op")
        )
        self.stream.process(_Stamped(self)).sink_to(self.sink)
        self.client: Any = None
        self.opened = False

    def side(self, tag: OutputTag) -> ListSink:
        sink = self.sides[tag.tag_id] = ListSink()
        self.stream.get_side_output(tag).process(_Stamped(self)).sink_to(sink)
        return sink

    async def start(self) -> Harness:
        self.client = await self.env.execute_async("keyed-process")
        await wait_until(lambda: self.opened)
        return self

    async def settle(self) -> None:
        for _ in range(300):
            await asyncio.sleep(0)

    async def element(self, value: Any, timestamp: int | None = None) -> None:
        self.source.push(Record(value, timestamp))
        await self.settle()

    async def watermark(self, ts: int) -> None:
        self.source.push(sf.Watermark(ts))
        await self.settle()

    async def processing_time(self, ms: int) -> None:
        self.clock.set(ms)
        await self.settle()

    async def close(self) -> list:
        self.source.finish()
        await asyncio.wait_for(self.client.get_job_execution_result(), 60)
        return self.sink.results


async def test_key_querying() -> None:
    """KeyedProcessOperatorTest#testKeyQuerying: ctx.get_current_key() is the record's key."""

    class KeyQuerying(KeyedProcessFunction):
        def process_element(self, value, ctx):
            assert ctx.get_current_key() == value[0], "Did not get expected key."
            yield value[1]

    h = await Harness(KeyQuerying(), key=lambda v: v[0]).start()
    await h.element((5, "5"), 12)
    await h.element((42, "42"), 13)
    assert await h.close() == [("5", 12), ("42", 13)]


class Querying(KeyedProcessFunction):
    """KeyedProcessOperatorTest.QueryingFlatMapFunction."""

    def __init__(self, domain: TimeDomain) -> None:
        self.domain = domain

    def process_element(self, value, ctx):
        ts = ctx.timestamp()
        ts_text = "null" if ts == MIN_WATERMARK else ts
        service = ctx.timer_service()
        now = service.current_watermark() if self.domain == TimeDomain.EVENT_TIME else (
            service.current_processing_time())
        yield f"{value}TIME:{now} TS:{ts_text}"


async def test_timestamp_and_watermark_querying() -> None:
    """KeyedProcessOperatorTest#testTimestampAndWatermarkQuerying."""
    h = await Harness(Querying(TimeDomain.EVENT_TIME)).start()
    await h.watermark(17)
    await h.element(5, 12)
    await h.watermark(42)
    await h.element(6, 13)
    assert await h.close() == [("5TIME:17 TS:12", 12), ("6TIME:42 TS:13", 13)]


async def test_timestamp_and_processing_time_querying() -> None:
    """KeyedProcessOperatorTest#testTimestampAndProcessingTimeQuerying."""
    h = await Harness(Querying(TimeDomain.PROCESSING_TIME)).start()
    await h.processing_time(17)
    await h.element(5)
    await h.processing_time(42)
    await h.element(6)
    assert await h.close() == [("5TIME:17 TS:null", None), ("6TIME:42 TS:null", None)]


class Triggering(KeyedProcessFunction):
    """KeyedProcessOperatorTest.TriggeringFlatMapFunction: the timer's key and domain checked."""

    def __init__(self, domain: TimeDomain, expected_key: Any) -> None:
        self.domain, self.expected_key = domain, expected_key

    def process_element(self, value, ctx):
        yield value
        service = ctx.timer_service()
        if self.domain == TimeDomain.EVENT_TIME:
            service.register_event_time_timer(service.current_watermark() + 5)
        else:
            service.register_processing_time_timer(service.current_processing_time() + 5)

    def on_timer(self, timestamp, ctx):
        assert ctx.get_current_key() == self.expected_key
        assert ctx.time_domain() == self.domain
        yield 1777


async def test_event_time_timers() -> None:
    """KeyedProcessOperatorTest#testEventTimeTimers: an event-time timer's output carries the
    timer's timestamp."""
    h = await Harness(Triggering(TimeDomain.EVENT_TIME, 17)).start()
    await h.watermark(0)
    await h.element(17, 42)
    await h.watermark(5)
    assert await h.close() == [(17, 42), (1777, 5)]


async def test_processing_time_timers() -> None:
    """KeyedProcessOperatorTest#testProcessingTimeTimers: a processing-time timer's output has
    no timestamp (Flink's onProcessingTime erases it)."""
    h = await Harness(Triggering(TimeDomain.PROCESSING_TIME, 17)).start()
    await h.element(17)
    await h.processing_time(5)
    assert await h.close() == [(17, None), (1777, None)]


class TriggeringStateful(KeyedProcessFunction):
    """KeyedProcessOperatorTest.TriggeringStatefulFlatMapFunction: a key's second record clears
    its state and deletes its timer."""

    def __init__(self, domain: TimeDomain) -> None:
        self.domain = domain
        self.descriptor = ValueStateDescriptor("seen-element", Types.INT())

    def open(self, ctx):
        self.state = ctx.get_state(self.descriptor)

    def process_element(self, value, ctx):
        service = ctx.timer_service()
        event = self.domain == TimeDomain.EVENT_TIME
        now = service.current_watermark() if event else service.current_processing_time()
        if self.state.value() is None:
            yield f"INPUT:{value}"
            self.state.update(value)
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

    def on_timer(self, timestamp, ctx):
        assert ctx.time_domain() == self.domain
        yield f"STATE:{self.state.value()}"


async def test_event_time_timer_with_state() -> None:
    """KeyedProcessOperatorTest#testEventTimeTimerWithState: no leakage between keys, and a
    deleted timer does not fire."""
    h = await Harness(TriggeringStateful(TimeDomain.EVENT_TIME)).start()
    await h.watermark(1)
    await h.element(17, 0)  # timer for 6
    await h.element(13, 0)  # timer for 6
    await h.watermark(2)
    await h.element(42, 1)  # timer for 7
    await h.element(13, 1)  # deletes 13's timer
    await h.watermark(6)
    await h.watermark(7)
    assert await h.close() == [
        ("INPUT:17", 0), ("INPUT:13", 0), ("INPUT:42", 1), ("STATE:17", 6), ("STATE:42", 7),
    ]


async def test_processing_time_timer_with_state() -> None:
    """KeyedProcessOperatorTest#testProcessingTimeTimerWithState."""
    h = await Harness(TriggeringStateful(TimeDomain.PROCESSING_TIME)).start()
    await h.processing_time(1)
    await h.element(17)  # timer for 6
    await h.element(13)  # timer for 6
    await h.processing_time(2)
    await h.element(13)  # deletes 13's timer
    await h.element(42)  # timer for 7
    await h.processing_time(6)
    await h.processing_time(7)
    assert await h.close() == [
        ("INPUT:17", None), ("INPUT:13", None), ("INPUT:42", None),
        ("STATE:17", None), ("STATE:42", None),
    ]


class BothTriggering(KeyedProcessFunction):
    """KeyedProcessOperatorTest.BothTriggeringFlatMapFunction."""

    def __init__(self, expected_key: Any) -> None:
        self.expected_key = expected_key

    def process_element(self, value, ctx):
        service = ctx.timer_service()
        service.register_processing_time_timer(3)
        service.register_event_time_timer(4)
        service.register_processing_time_timer(5)
        service.register_event_time_timer(6)
        service.delete_processing_time_timer(3)
        service.delete_event_time_timer(4)
        return []

    def on_timer(self, timestamp, ctx):
        assert ctx.get_current_key() == self.expected_key
        yield "EVENT:1777" if ctx.time_domain() == TimeDomain.EVENT_TIME else "PROC:1777"


async def test_snapshot_and_restore(tmp_path: Path) -> None:
    """KeyedProcessOperatorTest#testSnapshotAndRestore: both kinds of timers (less the deleted
    ones) survive a savepoint and fire, with their key, in the restored job."""
    h = await Harness(BothTriggering(5)).start()
    await h.element(5, 12)
    path = await h.client.trigger_savepoint(str(tmp_path / "sp"))
    await h.client.cancel()
    assert h.sink.results == []

    h2 = Harness(BothTriggering(5), savepoint=path)
    h2.source.items.append(Record(5, 12))  # consumed before the savepoint: not read again
    await h2.start()
    await h2.processing_time(5)
    await h2.watermark(6)
    assert await h2.close() == [("PROC:1777", None), ("EVENT:1777", 6)]


async def test_side_output() -> None:
    """KeyedProcessOperatorTest#testSideOutput: side outputs carry the record's timestamp."""
    ints, longs = OutputTag("int-out", Types.INT()), OutputTag("long-out", Types.LONG())

    class SideOutputs(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield f"IN:{value}"
            yield ints, value
            yield longs, value

    h = Harness(SideOutputs())
    int_sink, long_sink = h.side(ints), h.side(longs)
    await h.start()
    await h.element(42, 17)
    assert await h.close() == [("IN:42", 17)]
    assert int_sink.results == [(42, 17)]
    assert long_sink.results == [(42, 17)]


async def test_on_timer_context_timestamp_is_the_timers() -> None:
    """KeyedProcessOperator.OnTimerContextImpl#timestamp: in onTimer, ctx.timestamp() is the
    firing timer's timestamp in both domains (checked with the watermark and processing time
    the timer service reports there)."""

    class Both(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_event_time_timer(10)
            ctx.timer_service().register_processing_time_timer(20)
            return []

        def on_timer(self, timestamp, ctx):
            service = ctx.timer_service()
            yield (ctx.time_domain().name, timestamp, ctx.timestamp(), service.current_watermark(),
                   service.current_processing_time(), ctx.get_current_key())

    h = await Harness(Both()).start()
    await h.element("k", 1)
    await h.watermark(15)
    await h.processing_time(25)
    assert await h.close() == [
        (("EVENT_TIME", 10, 10, 15, 0, "k"), 10),
        (("PROCESSING_TIME", 20, 20, 15, 25, "k"), None),
    ]
