"""Event time end to end against Flink's rules: watermark generation, timestamps, timers.

Each test states the Flink behaviour it checks (``TimestampsAndWatermarksOperator``,
``KeyedProcessOperator``, ``InternalTimerServiceImpl``) and runs it through the public API.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from test_event_time import Feed  # tests/test_event_time.py

import streamflow as sf
from streamflow.common import Configuration, Types
from streamflow.common.serialization import SimpleStringSchema
from streamflow.connectors.kafka_replay import ReplaySource
from streamflow.datastream import BroadcastProcessFunction, TimeCharacteristic
from streamflow.datastream.state import MapStateDescriptor
from streamflow.testing import ManualClock
from streamflow.windowing import TumblingEventTimeWindows

MIN = -(2**63)


async def settle(rounds: int = 40) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


class SeenWatermark(sf.ProcessFunction):
    """Each record with its timestamp and the watermark its operator had seen before it."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield (value, ctx.timestamp(), ctx.timer_service().current_watermark())


@pytest.mark.parametrize(("interval", "expected"), [(0, [MIN, MIN]), (1_000, [MIN, MIN]), (200, [MIN, 89])])
async def test_the_auto_watermark_interval_set_after_building_the_pipeline_applies(
    interval: int, expected: list[int]
) -> None:
    """Flink's TimestampsAndWatermarksOperator reads the interval from the ExecutionConfig
    when it opens (0: no periodic watermarks), so a setting made before execute() counts."""
    clock = ManualClock(1_000_000)
    env = sf.StreamExecutionEnvironment(clock=clock)
    feed, out = Feed(), []
    strategy = sf.WatermarkStrategy.for_bounded_out_of_orderness(10).with_timestamp_assigner(lambda e: e)
    stream = env.from_async_iterable(lambda: feed.__aiter__()).assign_timestamps_and_watermarks(strategy)
    stream.process(SeenWatermark()).add_sink(out.append)
    env.get_config().set_auto_watermark_interval(interval)  # after the pipeline, before execute
    client = await env.execute_async()
    feed.push(100)
    await settle()
    clock.advance(250)  # past a 200 ms interval, not a 1 s one
    await settle()
    feed.push(200)
    await settle()
    await asyncio.wait_for(client.cancel(), 30)
    assert out == [(100, 100, expected[0]), (200, 200, expected[1])]


@pytest.mark.parametrize(
    ("characteristic", "interval"),
    [(TimeCharacteristic.ProcessingTime, 0), (TimeCharacteristic.EventTime, 200)],
)
async def test_the_time_characteristic_sets_the_auto_watermark_interval(
    characteristic: TimeCharacteristic, interval: int
) -> None:
    """Flink's (deprecated) setStreamTimeCharacteristic sets the interval: 0 for processing
    time (no periodic watermarks), 200 ms otherwise, replacing one set before it."""
    clock = ManualClock(1_000_000)
    env = sf.StreamExecutionEnvironment(clock=clock)
    env.get_config().set_auto_watermark_interval(2_000)
    env.set_stream_time_characteristic(characteristic)
    assert env.get_config().get_auto_watermark_interval() == interval
    feed, out = Feed(), []
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e: e)
    stream = env.from_async_iterable(lambda: feed.__aiter__()).assign_timestamps_and_watermarks(strategy)
    stream.process(SeenWatermark()).add_sink(out.append)
    client = await env.execute_async()
    feed.push(100)
    await settle()
    clock.advance(250)
    await settle()
    feed.push(200)
    await settle()
    await asyncio.wait_for(client.cancel(), 30)
    assert out == [(100, 100, MIN), (200, 200, 99 if interval else MIN)]


class Stamp(sf.ProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield (value, ctx.timestamp())


class KeyedStamp(sf.KeyedProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield (value, ctx.timestamp())


class CoStamp(sf.CoProcessFunction):
    def process_element1(self, value: Any, ctx: Any) -> Any:
        yield (value, ctx.timestamp())

    def process_element2(self, value: Any, ctx: Any) -> Any:
        yield (value, ctx.timestamp())


class BroadcastStamp(BroadcastProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield (value, ctx.timestamp())

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        yield (value, ctx.timestamp())


@pytest.mark.parametrize("kind", ["process", "keyed", "co", "broadcast"])
def test_a_record_without_a_timestamp_has_the_minimum_timestamp_in_the_context(kind: str) -> None:
    """PyFlink hands Python ``element.getTimestamp()``, which is Long.MIN_VALUE for a record
    without a timestamp (ExternalPython*/EmbeddedPython* operators), not None."""
    env = sf.StreamExecutionEnvironment()
    ds = env.from_collection([1, 2])
    if kind == "process":
        out = ds.process(Stamp())
    elif kind == "keyed":
        out = ds.key_by(lambda v: v).process(KeyedStamp())
    elif kind == "co":
        out = ds.connect(env.from_collection([3])).process(CoStamp())
    else:
        state = MapStateDescriptor("b", Types.INT(), Types.INT())
        out = ds.connect(env.from_collection([3]).broadcast(state)).process(BroadcastStamp())
    values = [1, 2, 3] if kind in ("co", "broadcast") else [1, 2]
    assert sorted(out.execute_and_collect()) == [(v, MIN) for v in values]


def test_a_source_with_per_partition_watermarks_takes_the_interval_set_before_execute(tmp_path: Any) -> None:
    """The Kafka and replay sources generate watermarks per partition (from_source hands them
    the strategy); Flink's SourceOperator reads the interval when it opens, so an interval set
    after from_source() applies, as for assign_timestamps_and_watermarks."""
    env = sf.StreamExecutionEnvironment()
    source = ReplaySource(tmp_path / "r.jsonl", SimpleStringSchema())
    env.from_source(source, sf.WatermarkStrategy.for_monotonous_timestamps(), "replay").print()
    env.get_config().set_auto_watermark_interval(0)
    graph = env.get_job_graph()
    [running] = [n.source for n in graph.nodes if n.source is not None]
    assert isinstance(running, ReplaySource) and running.watermark_interval_ms == 0


@pytest.mark.parametrize(
    ("value", "ms"), [("1 s", 1_000), ("500ms", 500), ("0", 0), (250, 250), ("2 min", 120_000)]
)
def test_the_auto_watermark_interval_configuration_key(value: Any, ms: int) -> None:
    """Flink's ``pipeline.auto-watermark-interval`` (a duration: a bare number is ms)."""
    configuration: Any = {"pipeline.auto-watermark-interval": value}
    if isinstance(value, str):  # PyFlink's way: a Configuration of strings
        configuration = Configuration()
        configuration.set_string("pipeline.auto-watermark-interval", value)
    env = sf.StreamExecutionEnvironment()
    env.configure(configuration)
    assert env.get_config().get_auto_watermark_interval() == ms


def test_an_unreadable_auto_watermark_interval_is_refused() -> None:
    with pytest.raises(ValueError, match=r"pipeline\.auto-watermark-interval"):
        sf.StreamExecutionEnvironment().configure({"pipeline.auto-watermark-interval": "1.5 s"})


def test_a_negative_auto_watermark_interval_is_refused_when_set() -> None:
    """Flink's ExecutionConfig.setAutoWatermarkInterval checks it; it failed only when the job ran."""
    env = sf.StreamExecutionEnvironment()
    with pytest.raises(ValueError, match="must not be negative"):
        env.get_config().set_auto_watermark_interval(-5)
    assert env.get_auto_watermark_interval() == 200


@pytest.mark.parametrize("batch_size", [1, 100])
@pytest.mark.parametrize("apply", ["reduce", "process"])
def test_an_event_time_window_refuses_records_with_the_minimum_timestamp(batch_size: int, apply: str) -> None:
    """A strategy without an assigner gives untimed records Long.MIN_VALUE; Flink's event-time
    window assigners refuse that marker ("Record has Long.MIN_VALUE timestamp (= no timestamp
    marker)"): the job fails, on the windows' fast path (reduce) as on the general one."""
    env = sf.StreamExecutionEnvironment()
    env.set_batch_size(batch_size)
    ds = env.from_collection([("a", 1), ("a", 2), ("b", 3)])
    keyed = ds.assign_timestamps_and_watermarks(sf.WatermarkStrategy.for_monotonous_timestamps())
    windowed = keyed.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(10))
    if apply == "reduce":
        out = windowed.reduce(lambda a, b: (a[0], a[1] + b[1]))
    else:
        out = windowed.process(lambda key, ctx, elements: [(key, len(list(elements)))])
    out.print()
    with pytest.raises(Exception, match="no timestamp"):
        env.execute()


class WatermarkSeen(sf.ProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield (value, ctx.timer_service().current_watermark())


class KeyedWatermarkSeen(sf.KeyedProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield (value, ctx.timer_service().current_watermark())


def _watermarks_seen(script: list, parallelism: int, keyed: bool) -> list:
    from streamflow.testing import ListSink, ScriptedSource

    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    sink = ListSink()
    ds = env.from_source(ScriptedSource(script), None, "scripted").set_parallelism(1)
    out = ds.key_by(lambda v: 0).process(KeyedWatermarkSeen()) if keyed else ds.process(WatermarkSeen())
    out.sink_to(sink)
    env.execute()
    return sorted(sink.results)


@pytest.mark.parametrize("keyed", [False, True], ids=["chained", "keyed"])
@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_sources_watermark_passes_only_above_every_earlier_one(parallelism: int, keyed: bool) -> None:
    """Flink's ``WatermarkToDataOutput.emitWatermark`` (the output of every FLIP-27 source,
    flink-streaming-java ``api/operators/source/WatermarkToDataOutput.java``): a watermark
    not above the highest one emitted so far is dropped, so the operators after a source never
    see time go back, whether chained to it (parallelism 1) or behind a channel. streamflow
    passed a source's watermarks as they came: the chained operator saw 20, then 5."""
    from streamflow.testing import Record

    script = [
        Record("a", 5), sf.Watermark(20), sf.Watermark(5), Record("b", 25),
        Record("c", 15), sf.Watermark(12), sf.Watermark(30), Record("d", 40),
    ]  # fmt: skip
    assert _watermarks_seen(script, parallelism, keyed) == [("a", MIN), ("b", 20), ("c", 20), ("d", 30)]


@pytest.mark.parametrize("keyed", [False, True], ids=["chained", "keyed"])
@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_sources_watermark_after_idle_marks_it_active_first(parallelism: int, keyed: bool) -> None:
    """``WatermarkToDataOutput.emitWatermark``: a watermark of a source that went idle first
    marks its output ACTIVE, then passes (and ``markIdle``/ACTIVE pass only on a change).
    streamflow forwarded the watermark on the idle channel, where the downstream valve drops
    it (StatusWatermarkValve: a watermark on an idle channel is ignored), so the records
    after it saw no watermark at all behind a channel."""
    from streamflow.runtime.events import WatermarkStatus
    from streamflow.testing import Record

    script = [
        Record("a", 1), WatermarkStatus.IDLE, WatermarkStatus.IDLE, sf.Watermark(20), Record("b", 25),
        WatermarkStatus.ACTIVE, sf.Watermark(30), Record("c", 35),
    ]  # fmt: skip
    assert _watermarks_seen(script, parallelism, keyed) == [("a", MIN), ("b", 20), ("c", 30)]


class _Recording:
    """The chain after a source: records what ``SourceWatermarkOutput`` passes."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    async def emit_watermark(self, watermark: Any) -> None:
        self.events.append(watermark.timestamp)

    async def emit_watermark_status(self, status: Any) -> None:
        self.events.append(status.name)


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        # WatermarkToDataOutputTest.testInitialZeroWatermark
        ([0], [0]),
        # WatermarkToDataOutputTest.testWatermarksDoNotRegress
        ([12, 17, 10, 18, 17, 18], [12, 17, 18]),
        # WatermarkToDataOutputTest.becomingActiveEmitsStatus
        (["IDLE", 100], ["IDLE", "ACTIVE", 100]),
        # markIdle / markActive pass only on a change; a watermark not above the last one
        # leaves an idle output idle
        (
            ["ACTIVE", "IDLE", "IDLE", 5, "IDLE", 3, "ACTIVE", "ACTIVE", 7],
            ["IDLE", "ACTIVE", 5, "IDLE", "ACTIVE", 7],
        ),
    ],
)
async def test_source_watermark_output(steps: list, expected: list) -> None:
    """Flink's ``WatermarkToDataOutputTest`` (flink-streaming-java ``api/operators/source/``)
    on streamflow's ``SourceWatermarkOutput``: exactly these events, in this order."""
    from streamflow.runtime.events import WatermarkStatus
    from streamflow.runtime.source_task import SourceWatermarkOutput

    recording = _Recording()
    output = SourceWatermarkOutput(recording)  # type: ignore[arg-type]
    for step in steps:
        if isinstance(step, int):
            await output.emit_watermark(sf.Watermark(step))
        else:
            await output.emit_status(WatermarkStatus[step])
    assert recording.events == expected
