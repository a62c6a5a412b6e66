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


def _ranges(reader: Any, start: dict, end: dict) -> dict[int, tuple[int, int]]:
    return {r.partition: (r.start, r.end) for r in reader.partitions(start, end) if not r.eof}


def test_a_restarted_query_resolves_its_unread_partitions_again(kafka: Any) -> None:
    """Flink's rule for a restored split still at its EARLIEST_OFFSET / COMMITTED_OFFSET sentinel
    (``KafkaPartitionSplitReader#handleSplitsChanges``; the asyncio engine's
    ``connectors/kafka_sentinels.py``) on the Spark engine: a query that read nothing of a
    partition started at ``committed_offsets()`` restarts from its logged offset after another
    consumer of the group committed 4: it reads from 4, not from the 10 it resolved at its start;
    one started at ``earliest()`` reads from the earliest offset now (records before 6 deleted).
    A partition read before keeps its logged offset."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.structs import OffsetAndMetadata

    from streamflow.spark import kafka_offsets
    from streamflow.spark.kafka import data_source_class

    bs = kafka.bootstrap_servers
    topic = _topic(bs, "unread")
    group = f"spark-unread-group-{os.getpid()}"

    async def commit(offsets: dict[int, int]) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in offsets])
            await consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "")
                                   for p, o in offsets.items()})
        finally:
            await consumer.stop()

    async def delete_before(offset: int) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bs)
        await admin.start()
        try:
            await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(offset)})
        finally:
            await admin.close()

    def reader_class(starting: Any) -> Any:
        options = {"bootstrap": bs, "topics": topic, "bounded": "false", "max_records": "0", "group": group,
                   "starting": kafka_offsets.spec(starting)}  # fmt: skip
        return data_source_class()(options).streamReader

    # committed_offsets(): p0 unread at 10, p1 read from 8 to 10 before the restart
    asyncio.run(commit({0: N, 1: 8}))
    committed = reader_class(KafkaOffsetsInitializer.committed_offsets())
    first = committed(None)
    initial = first.initialOffset()
    logged = first.latestOffset(initial, None)
    assert _ranges(first, initial, logged) == {1: (8, N)}
    asyncio.run(commit({0: 4, 1: 2}))
    restarted = committed(None)
    end = restarted.latestOffset(logged, None)
    assert _ranges(restarted, logged, end) == {0: (4, N)}  # p1 read before: its logged offset
    assert kafka_offsets.unread(end) == {}

    # earliest(): a query that planned its start (0, unread) and nothing else; records 0-5 deleted
    earliest = reader_class(KafkaOffsetsInitializer.earliest())
    initial = earliest(None).initialOffset()
    assert kafka_offsets.unread(initial) == {f"{topic}:0": "earliest", f"{topic}:1": "earliest"}
    asyncio.run(delete_before(6))
    restarted = earliest(None)
    end = restarted.latestOffset(initial, None)
    assert _ranges(restarted, initial, end) == {0: (6, N), 1: (0, N)}
