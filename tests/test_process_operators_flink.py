"""Flink's LegacyKeyedProcessOperatorTest and CoProcessOperatorTest, ported through the
DataStream API.

Sources (apache/flink, ``flink-streaming-java/src/test/java/org/apache/flink/streaming/api/
operators/``): ``LegacyKeyedProcessOperatorTest.java`` (a ``ProcessFunction``, not a
``KeyedProcessFunction``, on a keyed stream: Flink's ``LegacyKeyedProcessOperator``; streamflow,
like Flink's Java API, takes one on a ``KeyedStream``) and ``co/CoProcessOperatorTest.java`` (a
non-keyed ``CoProcessFunction``).

The harnesses are jobs over fed :class:`ScriptedSource`\\ s with a :class:`ManualClock`
(``tests/test_keyed_process_flink.py``'s ``Harness`` for the keyed cases, the identity as key
selector, on the heap backend and on RocksDB); each output is recorded with its timestamp
(``None`` for a record without one), as the test harness's StreamRecords. Flink's ``TS:null``
(``ctx.timestamp()`` of a record without one) is PyFlink's ``Long.MIN_VALUE`` here, printed as
``null`` as Flink's test prints it. Not ported: testNullOutputTagRefusal (a Python function emits
side outputs by yielding ``(OutputTag, value)``; ``(None, value)`` is an ordinary tuple).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_keyed_process_flink import Harness
from waiting import wait_until

import streamflow as sf
from streamflow.api.environment import set_default_configuration
from streamflow.common import Types
from streamflow.datastream import OutputTag, StreamExecutionEnvironment, TimeDomain
from streamflow.datastream.functions import CoProcessFunction, ProcessFunction
from streamflow.datastream.state import ValueStateDescriptor
from streamflow.runtime.events import MIN_WATERMARK
from streamflow.testing import ListSink, ManualClock, Record, ScriptedSource


@pytest.fixture(params=["hashmap", "rocksdb"], autouse=True)
def state_backend(request: pytest.FixtureRequest) -> Any:
    set_default_configuration({"state.backend.type": request.param})
    yield request.param
    set_default_configuration({})


def _ts_text(ctx: Any) -> Any:
    ts = ctx.timestamp()
    return "null" if ts == MIN_WATERMARK else ts


class Querying(ProcessFunction):
    """LegacyKeyedProcessOperatorTest.QueryingFlatMapFunction."""

    def __init__(self, domain: TimeDomain) -> None:
        self.domain = domain

    def process_element(self, value: Any, ctx: Any) -> Any:
        service = ctx.timer_service()
        now = service.current_watermark() if self.domain == TimeDomain.EVENT_TIME else (
            service.current_processing_time())
        yield f"{value}TIME:{now} TS:{_ts_text(ctx)}"


async def test_legacy_timestamp_and_watermark_querying() -> None:
    """LegacyKeyedProcessOperatorTest#testTimestampAndWatermarkQuerying."""
    h = await Harness(Querying(TimeDomain.EVENT_TIME)).start()
    await h.watermark(17)
    await h.element(5, 12)
    await h.watermark(42)
    await h.element(6, 13)
    assert await h.close() == [("5TIME:17 TS:12", 12), ("6TIME:42 TS:13", 13)]


async def test_legacy_timestamp_and_processing_time_querying() -> None:
    """LegacyKeyedProcessOperatorTest#testTimestampAndProcessingTimeQuerying."""
    h = await Harness(Querying(TimeDomain.PROCESSING_TIME)).start()
    await h.processing_time(17)
    await h.element(5)
    await h.processing_time(42)
    await h.element(6)
    assert await h.close() == [("5TIME:17 TS:null", None), ("6TIME:42 TS:null", None)]


class Triggering(ProcessFunction):
    """LegacyKeyedProcessOperatorTest.TriggeringFlatMapFunction."""

    def __init__(self, domain: TimeDomain) -> None:
        self.domain = domain

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value
        service = ctx.timer_service()
        if self.domain == TimeDomain.EVENT_TIME:
            service.register_event_time_timer(service.current_watermark() + 5)
        else:
            service.register_processing_time_timer(service.current_processing_time() + 5)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        assert ctx.time_domain() == self.domain
        yield 1777


async def test_legacy_event_time_timers() -> None:
    """LegacyKeyedProcessOperatorTest#testEventTimeTimers."""
    h = await Harness(Triggering(TimeDomain.EVENT_TIME)).start()
    await h.watermark(0)
    await h.element(17, 42)
    await h.watermark(5)
    assert await h.close() == [(17, 42), (1777, 5)]


async def test_legacy_processing_time_timers() -> None:
    """LegacyKeyedProcessOperatorTest#testProcessingTimeTimers."""
    h = await Harness(Triggering(TimeDomain.PROCESSING_TIME)).start()
    await h.element(17)
    await h.processing_time(5)
    assert await h.close() == [(17, None), (1777, None)]


class TriggeringStateful(ProcessFunction):
    """LegacyKeyedProcessOperatorTest.TriggeringStatefulFlatMapFunction: each key's timer reads
    that key's state (no leakage between keys)."""

    def __init__(self, domain: TimeDomain) -> None:
        self.domain = domain

    def open(self, runtime_context: Any) -> None:
        self.state = runtime_context.get_state(ValueStateDescriptor("seen-element", Types.INT()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield f"INPUT:{value}"
        self.state.update(value)
        service = ctx.timer_service()
        if self.domain == TimeDomain.EVENT_TIME:
            service.register_event_time_timer(service.current_watermark() + 5)
        else:
            service.register_processing_time_timer(service.current_processing_time() + 5)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        assert ctx.time_domain() == self.domain
        yield f"STATE:{self.state.value()}"


async def test_legacy_event_time_timer_with_state() -> None:
    """LegacyKeyedProcessOperatorTest#testEventTimeTimerWithState."""
    h = await Harness(TriggeringStateful(TimeDomain.EVENT_TIME)).start()
    await h.watermark(1)
    await h.element(17, 0)  # sets a timer for 6
    await h.watermark(2)
    await h.element(42, 1)  # sets a timer for 7
    await h.watermark(6)
    await h.watermark(7)
    assert await h.close() == [("INPUT:17", 0), ("INPUT:42", 1), ("STATE:17", 6), ("STATE:42", 7)]


async def test_legacy_processing_time_timer_with_state() -> None:
    """LegacyKeyedProcessOperatorTest#testProcessingTimeTimerWithState."""
    h = await Harness(TriggeringStateful(TimeDomain.PROCESSING_TIME)).start()
    await h.processing_time(1)
    await h.element(17)  # sets a timer for 6
    await h.processing_time(2)
    await h.element(42)  # sets a timer for 7
    await h.processing_time(6)
    await h.processing_time(7)
    assert await h.close() == [
        ("INPUT:17", None), ("INPUT:42", None), ("STATE:17", None), ("STATE:42", None)
    ]


class BothTriggering(ProcessFunction):
    """LegacyKeyedProcessOperatorTest.BothTriggeringFlatMapFunction."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        ctx.timer_service().register_processing_time_timer(5)
        ctx.timer_service().register_event_time_timer(6)
        return []

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield "EVENT:1777" if ctx.time_domain() == TimeDomain.EVENT_TIME else "PROC:1777"


async def test_legacy_snapshot_and_restore(tmp_path: Path) -> None:
    """LegacyKeyedProcessOperatorTest#testSnapshotAndRestore: both timers survive a savepoint."""
    h = await Harness(BothTriggering()).start()
    await h.element(5, 12)
    path = await h.client.trigger_savepoint(str(tmp_path / "sp"))
    await h.client.cancel()
    assert h.sink.results == []

    h2 = Harness(BothTriggering(), savepoint=path)
    h2.source.items.append(Record(5, 12))  # consumed before the savepoint: not read again
    await h2.start()
    await h2.processing_time(5)
    await h2.watermark(6)
    assert await h2.close() == [("PROC:1777", None), ("EVENT:1777", 6)]


async def test_legacy_side_output() -> None:
    """LegacyKeyedProcessOperatorTest#testSideOutput: side outputs keep the record's timestamp."""
    ints, longs = OutputTag("int-out", Types.INT()), OutputTag("long-out", Types.LONG())

    class SideOutputs(ProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
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


class _Stamped(ProcessFunction):
    def __init__(self, harness: CoHarness) -> None:
        self.harness = harness

    def open(self, runtime_context: Any) -> None:
        self.harness.opened = True

    def process_element(self, value: Any, ctx: Any) -> Any:
        ts = ctx.timestamp()
        yield value, (None if ts == MIN_WATERMARK else ts)


class CoHarness:
    """TwoInputStreamOperatorTestHarness (non-keyed) as a running job."""

    def __init__(self, function: CoProcessFunction) -> None:
        self.sources = (ScriptedSource([], end=False), ScriptedSource([], end=False))
        self.clock = ManualClock()
        self.env = StreamExecutionEnvironment(clock=self.clock).set_parallelism(1)
        self.sink = ListSink()
        one = self.env.from_source(self.sources[0], None, "one")
        two = self.env.from_source(self.sources[1], None, "two")
        one.connect(two).process(function).process(_Stamped(self)).sink_to(self.sink)
        self.opened = False
        self.client: Any = None

    async def start(self) -> CoHarness:
        self.client = await self.env.execute_async("co-process")
        await wait_until(lambda: self.opened)
        return self

    async def _push(self, i: int, item: Any) -> None:
        self.sources[i].push(item)
        for _ in range(300):
            await asyncio.sleep(0)

    async def element1(self, value: Any, timestamp: int | None = None) -> None:
        await self._push(0, Record(value, timestamp))

    async def element2(self, value: Any, timestamp: int | None = None) -> None:
        await self._push(1, Record(value, timestamp))

    async def watermark1(self, ts: int) -> None:
        await self._push(0, sf.Watermark(ts))

    async def watermark2(self, ts: int) -> None:
        await self._push(1, sf.Watermark(ts))

    async def processing_time(self, ms: int) -> None:
        self.clock.set(ms)
        for _ in range(300):
            await asyncio.sleep(0)

    async def close(self) -> list:
        for source in self.sources:
            source.finish()
        await asyncio.wait_for(self.client.get_job_execution_result(), 60)
        return self.sink.results


class CoQuerying(CoProcessFunction):
    """CoProcessOperatorTest.WatermarkQueryingProcessFunction /
    ProcessingTimeQueryingProcessFunction."""

    def __init__(self, domain: TimeDomain) -> None:
        self.label = "WM" if domain == TimeDomain.EVENT_TIME else "PT"
        self.domain = domain

    def _out(self, value: Any, ctx: Any) -> Any:
        service = ctx.timer_service()
        now = service.current_watermark() if self.domain == TimeDomain.EVENT_TIME else (
            service.current_processing_time())
        yield f"{value}{self.label}:{now} TS:{_ts_text(ctx)}"

    def process_element1(self, value: Any, ctx: Any) -> Any:
        return self._out(value, ctx)

    def process_element2(self, value: Any, ctx: Any) -> Any:
        return self._out(value, ctx)


@pytest.mark.parametrize("state_backend", ["hashmap"], indirect=True)
async def test_co_process_timestamp_and_watermark_querying() -> None:
    """CoProcessOperatorTest#testTimestampAndWatermarkQuerying: the operator's watermark is the
    minimum of its two inputs'."""
    h = await CoHarness(CoQuerying(TimeDomain.EVENT_TIME)).start()
    await h.watermark1(17)
    await h.watermark2(17)
    await h.element1(5, 12)
    await h.watermark1(42)
    await h.watermark2(42)
    await h.element2("6", 13)
    assert await h.close() == [("5WM:17 TS:12", 12), ("6WM:42 TS:13", 13)]


@pytest.mark.parametrize("state_backend", ["hashmap"], indirect=True)
async def test_co_process_timestamp_and_processing_time_querying() -> None:
    """CoProcessOperatorTest#testTimestampAndProcessingTimeQuerying."""
    h = await CoHarness(CoQuerying(TimeDomain.PROCESSING_TIME)).start()
    await h.processing_time(17)
    await h.element1(5)
    await h.processing_time(42)
    await h.element2("6")
    assert await h.close() == [("5PT:17 TS:null", None), ("6PT:42 TS:null", None)]
