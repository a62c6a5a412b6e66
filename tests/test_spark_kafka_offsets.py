"""The Spark engine's Kafka source honours Flink's other ``OffsetsInitializer``\\ s
(``streamflow/spark/kafka_offsets.py``): starting at ``offsets({...})``, ``timestamp(ms)`` and
``committed_offsets(reset)``, a bounded source stopping at ``offsets({...})`` and
``timestamp(ms)``; each job's answer is the asyncio engine's on the same topic. Resolved once,
when the query first plans, into the offsets Spark's checkpoint keeps: a reader planning from
those offsets (a restarted query) does not resolve a timestamp again."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pyspark  # noqa: F401  (installed by scripts/install-test-deps; never skipped)

from streamflow import StreamExecutionEnvironment, WatermarkStrategy
from streamflow.datastream.connectors.kafka import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaSource,
    KafkaTopicPartition,
)
from streamflow.testing import ListSink
from streamflow.testing.kafka_broker import create_topic, produce

N = 10  # records per partition; record i of partition p has Kafka timestamp 1000 * i + p


def _topic(bootstrap: str, name: str) -> str:
    topic = f"spark-offsets-{name}-{os.getpid()}"

    async def setup() -> None:
        await create_topic(bootstrap, topic, 2)
        for p in (0, 1):
            await produce(bootstrap, topic, [f"{p}-{i}".encode() for i in range(N)], partition=p,
                          timestamps=[1000 * i + p for i in range(N)])  # fmt: skip

    asyncio.run(setup())
    return topic


def _read(
    engine: str, bootstrap: str, topic: str, starting: Any, stopping: Any, group: str | None = None
) -> list:
    env = StreamExecutionEnvironment()
    env.set_engine(engine)
    builder = (KafkaSource.builder().set_bootstrap_servers(bootstrap).set_topics(topic)
               .set_value_only_deserializer(lambda b: b.decode())
               .set_starting_offsets(starting).set_bounded(stopping))  # fmt: skip
    if group is not None:
        builder.set_group_id(group)
    sink = ListSink()
    env.from_source(builder.build(), WatermarkStrategy.no_watermarks(), "kafka").sink_to(sink)
    env.execute(f"offsets on {engine}")
    return sorted(sink.results)


def _expected(ranges: dict[int, range]) -> list[str]:
    return sorted(f"{p}-{i}" for p, r in ranges.items() for i in r)


def test_timestamp_start_and_given_stopping_offsets_as_on_asyncio(kafka: Any) -> None:
    bs = kafka.bootstrap_servers
    topic = _topic(bs, "ts")
    starting = KafkaOffsetsInitializer.timestamp(4500)  # p0: offset 5 (5000), p1: offset 5 (5001)
    stopping = KafkaOffsetsInitializer.offsets(
        {KafkaTopicPartition(topic, 0): 8, KafkaTopicPartition(topic, 1): 3}
    )
    expected = _expected({0: range(5, 8), 1: range(0)})  # p1 starts past its stop: nothing
    assert _read("asyncio", bs, topic, starting, stopping) == expected
    assert _read("spark", bs, topic, starting, stopping) == expected


def test_committed_start_with_a_reset_and_timestamp_stop_as_on_asyncio(kafka: Any) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.structs import OffsetAndMetadata

    bs = kafka.bootstrap_servers
    topic = _topic(bs, "committed")
    group = f"spark-offsets-group-{os.getpid()}"

    async def commit() -> None:  # the group has committed offset 3 of partition 0, none of 1
        consumer = AIOKafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "")})
        finally:
            await consumer.stop()

    asyncio.run(commit())
    starting = KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST)
    stopping = KafkaOffsetsInitializer.timestamp(6500)  # p0, p1: offset 7; a later time: the end
    expected = _expected({0: range(3, 7), 1: range(0, 7)})
    assert _read("asyncio", bs, topic, starting, stopping, group) == expected
    assert _read("spark", bs, topic, starting, stopping, group) == expected


def test_a_query_planning_from_its_checkpoint_offsets_keeps_the_resolved_stops(kafka: Any) -> None:
    """The stopping offsets of timestamp(ms) travel in every offset Spark logs: a reader planning
    from such an offset (a restarted query) stops there even though the same timestamp now
    resolves to other offsets (records at or after it arrived since)."""
    from streamflow.spark import kafka_offsets
    from streamflow.spark.kafka import data_source_class

    bs = kafka.bootstrap_servers
    topic = _topic(bs, "restart")
    options = {"bootstrap": bs, "topics": topic, "bounded": "true", "max_records": "0", "group": "",
               "starting": kafka_offsets.spec(KafkaOffsetsInitializer.earliest()),
               "stopping": kafka_offsets.spec(KafkaOffsetsInitializer.timestamp(50_000))}  # fmt: skip
    reader_class = data_source_class()(options).streamReader
    first = reader_class(None)
    initial = first.initialOffset()  # no record at or after 50 s: each partition's end, 10
    assert kafka_offsets.stops(initial) == {f"{topic}:0": N, f"{topic}:1": N}
    asyncio.run(produce(bs, topic, [b"late"] * 3, partition=0, timestamps=[60_000] * 3))
    assert kafka_offsets.resolve(options, options["stopping"], [(topic, 0)]) == {f"{topic}:0": N}
    asyncio.run(produce(bs, topic, [b"x"], partition=0, timestamps=[0]))  # (resolving again: 10 then 13)

    restarted = reader_class(None)  # a new planner process, planning from the logged offset
    end = restarted.latestOffset(initial, None)
    assert kafka_offsets.positions(end) == {f"{topic}:0": N, f"{topic}:1": N}
    assert end["eof"] == 1
    assert kafka_offsets.stops(end) == kafka_offsets.stops(initial)
