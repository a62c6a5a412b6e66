"""Per-partition watermarks of the Kafka source (``connectors.kafka_watermarks``): scripts on a
manual clock, then end to end on the test broker (idleness, a subtask without partitions)."""

from __future__ import annotations

import asyncio
import logging

import orjson
from waiting import wait_until

import streamflow as sf
from streamflow.common.serialization import JsonRowDeserializationSchema
from streamflow.common.time import Duration
from streamflow.connectors.kafka_watermarks import PartitionWatermarks
from streamflow.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource, KafkaTopicPartition
from streamflow.runtime.events import Watermark, WatermarkStatus
from streamflow.testing import ManualClock
from streamflow.testing.kafka_broker import create_topic, produce
from streamflow.windowing import TumblingEventTimeWindows

IDLE, ACTIVE = WatermarkStatus.IDLE, WatermarkStatus.ACTIVE


def json_source(bs: str, topic: str, fields: list[str], stop: dict | None = None) -> KafkaSource:
    """A KafkaSource of JSON rows from the earliest offsets (bounded at ``stop`` if given)."""
    builder = (
        KafkaSource.builder()
        .set_bootstrap_servers(bs)
        .set_topics(topic)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(JsonRowDeserializationSchema(fields))
    )
    return (builder if stop is None else builder.set_bounded(KafkaOffsetsInitializer.offsets(stop))).build()


def window_sums(env: sf.StreamExecutionEnvironment, source: KafkaSource, size_ms: int) -> sf.CollectSink:
    """Per-key sums of the second field in tumbling event-time windows of ``size_ms``."""
    sink = sf.CollectSink()
    (
        env.from_source(source, sf.WatermarkStrategy.for_monotonous_timestamps(), "kafka")
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(size_ms))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(sink)
    )
    return sink


def drain(wm: PartitionWatermarks) -> list:
    out = []
    while (event := wm.take()) is not None:
        out.append(event)
    return out


def tick(wm: PartitionWatermarks, clock: ManualClock, ms: int = 200) -> list:
    clock.advance(ms)
    wm.on_periodic()
    return drain(wm)


def test_output_is_the_minimum_over_partitions_and_only_rises():
    clock = ManualClock()
    wm = PartitionWatermarks(sf.WatermarkStrategy.for_monotonous_timestamps(), clock)
    wm.add_partition(0)
    wm.add_partition(1)
    wm.on_batch(0, ["a", "b"], [10, 20])
    assert tick(wm, clock) == []  # partition 1 has seen nothing: it holds the output back
    wm.on_batch(1, ["c"], [5])
    assert tick(wm, clock) == [Watermark(4)]
    wm.on_batch(1, ["d"], [30])
    assert tick(wm, clock) == [Watermark(19)]  # now partition 0 is the slowest
    wm.on_batch(1, ["e"], [3])  # late in partition 1: never goes back
    assert tick(wm, clock) == []


def test_an_idle_partition_is_excluded_and_all_idle_marks_the_reader_idle():
    clock = ManualClock()
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_idleness(300)
    wm = PartitionWatermarks(strategy, clock)
    wm.add_partition(0)
    wm.add_partition(1)
    out = []
    for i in range(4):
        wm.on_batch(0, ["a"], [100 + i])
        out += tick(wm, clock)
    assert out == [Watermark(101), Watermark(102)]  # partition 1 went idle: partition 0 alone decides
    for _ in range(4):
        out += tick(wm, clock)
    assert out == [Watermark(101), Watermark(102), IDLE]  # both idle: once
    wm.on_batch(1, ["b"], [500])
    assert tick(wm, clock) == [ACTIVE, Watermark(499)]


def test_all_partitions_idle_flush_the_maximum():
    """FLINK-38454 (apache/flink#27066; WatermarkOutputMultiplexerTest#
    whenAllImmediateOutputsBecomeIdleWatermarkAdvances): when every partition is idle, the
    reader emits the maximum of their watermarks before IDLE, whichever went idle last."""
    clock = ManualClock()
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_idleness(300)
    wm = PartitionWatermarks(strategy, clock)
    wm.add_partition(0)
    wm.add_partition(1)
    wm.on_batch(0, ["a"], [101])
    wm.on_batch(1, ["b"], [51])
    out = tick(wm, clock)
    assert out == [Watermark(50)]
    for _ in range(4):
        out += tick(wm, clock)
    assert out == [Watermark(50), Watermark(100), IDLE]
    wm.on_batch(1, ["c"], [80])  # behind the flushed 100: active again, no watermark
    assert tick(wm, clock) == [ACTIVE]


def test_a_paused_partition_is_never_idle():
    clock = ManualClock()
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_idleness(300)
    wm = PartitionWatermarks(strategy, clock)
    wm.add_partition(0)
    wm.add_partition(1)
    wm.on_batch(0, ["a"], [100])
    wm.on_batch(1, ["b"], [50])
    wm.pause(1)  # alignment or backpressure: no data, but not idle (FLIP-471)
    out = []
    for _ in range(5):
        wm.on_batch(0, ["x"], [100 + clock.now_ms()])
        out += tick(wm, clock)
    assert out == [Watermark(49)]


def test_a_timestamp_assigner_sees_the_kafka_timestamp():
    clock = ManualClock()
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda value, ts: ts + value
    )
    wm = PartitionWatermarks(strategy, clock)
    assert wm.timestamps([1, 2], [100, 200]) == [101, 202]


async def test_event_time_windows_over_partitions_with_an_idle_subtask(kafka):
    bs = kafka.bootstrap_servers
    topic = f"wm-{id(object())}"
    await create_topic(bs, topic, 1)  # one partition, parallelism 2: one subtask owns nothing
    values = [orjson.dumps({"k": "a", "v": i}) for i in range(10)]
    await produce(bs, topic, values, timestamps=[1000 * i for i in range(10)])
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    sink = window_sums(env, json_source(bs, topic, ["k", "v"]), 3000)  # unbounded: watermarks fire them
    client = await env.execute_async("wm")
    try:
        for _ in range(200):  # windows [0,3000), [3000,6000), [6000,9000) fire; [9000,..) waits
            if len(sink.results) >= 3:
                break
            await asyncio.sleep(0.05)
    finally:
        await client.cancel()
    assert sorted(sink.results) == [("a", 0 + 1 + 2), ("a", 3 + 4 + 5), ("a", 6 + 7 + 8)]


def test_a_finished_partition_holds_the_output_back_no_more():
    """Flink's ``splitFinished``: a bounded partition read to its end leaves the combination."""
    clock = ManualClock()
    wm = PartitionWatermarks(sf.WatermarkStrategy.for_monotonous_timestamps(), clock)
    wm.add_partition(0)
    wm.add_partition(1)
    wm.on_batch(0, ["a"], [10])
    wm.on_batch(1, ["b"], [500])
    assert tick(wm, clock) == [Watermark(9)]
    wm.finish_partition(0)
    assert drain(wm) == [Watermark(499)]


async def test_watermark_alignment_pauses_the_partitions_ahead(kafka, caplog):
    """FLIP-217: in one subtask reading two partitions, the one far ahead in event time stops
    fetching until the other catches up (the records it fetched before still come)."""
    bs = kafka.bootstrap_servers
    topic = f"align-{id(object())}"
    await create_topic(bs, topic, 2)

    async def write(partition: int, stamps: list[int]) -> None:
        values = [orjson.dumps({"p": partition, "t": t}) for t in stamps]
        await produce(bs, topic, values, partition=partition, timestamps=stamps)

    await write(0, list(range(10)))
    await write(1, [100_000])
    env = sf.StreamExecutionEnvironment()
    env.get_config().set_auto_watermark_interval(20)
    source = json_source(bs, topic, ["p", "t"])
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_watermark_alignment(
        "replay", Duration.of_millis(1_000), Duration.of_millis(20)
    )
    sink = sf.CollectSink()
    env.from_source(source, strategy, "kafka").map(lambda r: (r[0], r[1])).sink_to(sink)
    caplog.set_level(logging.DEBUG, logger="streamflow.connectors.kafka_source")
    client = await env.execute_async("aligned")
    try:
        await wait_until(lambda: len(sink.results) == 11)
        # its watermark reported and the group's max allowed announced: partition 1 pauses
        await wait_until(lambda: f"{topic}-1 paused" in caplog.text)
        await write(1, list(range(100_001, 100_011)))  # none of these come
        await asyncio.sleep(1.0)
        assert len(sink.results) == 11
        await write(0, [99_500])  # partition 0 catches up to within the drift: partition 1 resumes
        await wait_until(lambda: len(sink.results) == 22)
    finally:
        await client.cancel()
    assert sorted(t for p, t in sink.results if p == 1) == list(range(100_000, 100_011))


async def test_a_bounded_source_with_per_partition_watermarks_ends(kafka):
    """A bounded partition whose stop offset comes before its last record (found done when
    fetched): its last batch is emitted, then it leaves the watermark combination. That batch's
    timestamps went to a partition already removed (KeyError: the job failed)."""
    bs = kafka.bootstrap_servers
    topic = f"bounded-wm-{id(object())}"
    await create_topic(bs, topic, 2)
    for partition in (0, 1):
        values = [orjson.dumps({"p": partition, "t": t}) for t in range(5)]
        await produce(bs, topic, values, partition=partition, timestamps=[1000 * t for t in range(5)])
    env = sf.StreamExecutionEnvironment()
    stop = {KafkaTopicPartition(topic, p): 4 for p in (0, 1)}
    sink = window_sums(env, json_source(bs, topic, ["p", "t"], stop), 10_000)
    client = await env.execute_async("bounded")
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert sorted(sink.results) == [(0, 0 + 1 + 2 + 3), (1, 0 + 1 + 2 + 3)]  # offsets 0..3
