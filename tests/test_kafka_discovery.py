"""Partition discovery of the Kafka source, on the session's test broker.

Every ``partition.discovery.interval.ms`` a reader lists the subscribed partitions from fresh
metadata of the cluster: partitions added to a topic it reads and topics created later that
match its pattern are picked up (the consumer's own metadata follows only the assigned topics
and shows neither).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from waiting import read_until, wait_until  # tests/waiting.py

import streamflow as sf
from streamflow.common.serialization import SimpleStringSchema
from streamflow.connectors.kafka_common import KafkaTopicPartition
from streamflow.connectors.kafka_source import split_owner
from streamflow.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource, KafkaSourceBuilder
from streamflow.runtime.events import WatermarkStatus
from streamflow.testing.kafka_broker import add_partitions, create_topic, produce

_ids = itertools.count()


def _builder(bootstrap: str) -> KafkaSourceBuilder:
    return (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_value_only_deserializer(SimpleStringSchema())
        .set_property("partition.discovery.interval.ms", "100")
    )




async def _collect(source: KafkaSource, parallelism: int, out: list) -> Any:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    env.from_source(source, None, "kafka").add_sink(out.append)
    return await env.execute_async("kafka-discovery")


async def test_partitions_added_to_a_topic_are_read(kafka):
    bs, topic = kafka.bootstrap_servers, f"grow-{next(_ids)}"
    await create_topic(bs, topic, 1)
    await produce(bs, topic, [b"p0"])
    out: list[str] = []
    client = await _collect(_builder(bs).set_topics(topic).build(), 2, out)
    await wait_until(lambda: out == ["p0"])
    await add_partitions(bs, topic, 3)
    await produce(bs, topic, [b"p1"], partition=1)
    await produce(bs, topic, [b"p2"], partition=2)
    await wait_until(lambda: len(out) == 3)
    await client.cancel()
    assert sorted(out) == ["p0", "p1", "p2"]


async def test_topics_created_later_that_match_the_pattern_are_read(kafka):
    bs, label = kafka.bootstrap_servers, f"pat{next(_ids)}"
    await create_topic(bs, f"{label}-a", 1)
    await produce(bs, f"{label}-a", [b"a"])
    out: list[str] = []
    client = await _collect(_builder(bs).set_topic_pattern(f"{label}-.*").build(), 1, out)
    await wait_until(lambda: out == ["a"])
    for topic, value in ((f"{label}-b", b"b"), (f"other-{label}", b"not matched")):
        await create_topic(bs, topic, 1)
        await produce(bs, topic, [value])
    await wait_until(lambda: len(out) == 2)
    await asyncio.sleep(0.3)  # time for a record of the topic the pattern does not match
    await client.cancel()
    assert sorted(out) == ["a", "b"]


async def test_a_reader_that_owned_nothing_turns_active_before_its_first_records(kafka):
    """At parallelism 2 a one-partition topic leaves one reader without a partition: it marks
    itself idle so downstream watermarks do not wait for it. When discovery gives it a
    partition it must say ACTIVE before its records, or downstream would keep ignoring its
    watermarks (a channel's watermarks count only while it is active)."""
    bs, topic = kafka.bootstrap_servers, f"wake-{next(_ids)}"
    await create_topic(bs, topic, 1)
    idle = next(s for s in range(2) if split_owner(KafkaTopicPartition(topic, 0), 2) != s)
    gets_partition = next(p for p in range(1, 10) if split_owner(KafkaTopicPartition(topic, p), 2) == idle)
    reader = _builder(bs).set_topics(topic).build().create_reader(idle, 2)
    await reader.start(lambda: None)
    events: list[Any] = []
    try:
        events.append(reader.poll_batch(100))
        assert events == [WatermarkStatus.IDLE]
        await add_partitions(bs, topic, gets_partition + 1)
        await produce(bs, topic, [b"x"], partition=gets_partition)

        def polled() -> bool:
            batch = reader.poll_batch(100)
            if batch is not None:
                events.append(batch)
            return any(isinstance(e, tuple) for e in events)

        await wait_until(polled)
    finally:
        await reader.close()
    assert events[:2] == [WatermarkStatus.IDLE, WatermarkStatus.ACTIVE]
    assert [e[0] for e in events[2:] if isinstance(e, tuple)] == [["x"]]


async def test_partitions_found_after_the_start_are_read_from_the_earliest_offset(kafka):
    """Flink (FLIP-288): the starting offsets initializer applies to the first listing; a
    partition discovered later starts at its earliest offset, so records written to it before
    discovery saw it are read. Here the initializer skips records older than t=3000, and the
    added partition's record is older: it is read all the same."""
    bs, topic = kafka.bootstrap_servers, f"later-{next(_ids)}"
    await create_topic(bs, topic, 1)
    await produce(bs, topic, [b"old", b"new"], timestamps=[1000, 5000])
    out: list[str] = []
    source = _builder(bs).set_topics(topic).set_starting_offsets(KafkaOffsetsInitializer.timestamp(3000))
    client = await _collect(source.build(), 1, out)
    await wait_until(lambda: out == ["new"])
    await add_partitions(bs, topic, 2)
    await produce(bs, topic, [b"added"], partition=1, timestamps=[1000])
    await wait_until(lambda: len(out) == 2)
    await client.cancel()
    assert out == ["new", "added"]


async def test_after_a_restore_a_partition_not_in_the_checkpoint_is_read_from_the_earliest_offset(kafka):
    """Flink keeps ``initialDiscoveryFinished`` in its checkpoint: restored, only the checkpoint's
    partitions resume; one it does not hold (added since) is new, read from its earliest offset,
    not from the starting offsets initializer (here: after t=3000, which would skip it)."""
    bs, topic = kafka.bootstrap_servers, f"restored-{next(_ids)}"
    await create_topic(bs, topic, 2)
    await produce(bs, topic, [b"p0-a", b"p0-b"], partition=0, timestamps=[1000, 1000])
    await produce(bs, topic, [b"p1"], partition=1, timestamps=[1000])
    source = _builder(bs).set_topics(topic).set_starting_offsets(KafkaOffsetsInitializer.timestamp(3000))
    reader = source.build().create_reader(0, 1)
    reader.restore_positions([[[topic, 0, 1]]])  # a checkpoint of partition 0 only, after "p0-a"
    await reader.start(lambda: None)
    got: list[str] = []

    try:
        await read_until(reader, got, lambda: len(got) >= 2)
    finally:
        await reader.close()
    assert sorted(got) == ["p0-b", "p1"]


async def test_a_non_positive_discovery_interval_disables_discovery(kafka):
    """Flink: ``partition.discovery.interval.ms`` <= 0 lists the partitions once, at the start
    (-1 made the reader list them again on every fetch, and pick up a partition added later)."""
    bs, topic = kafka.bootstrap_servers, f"nodisc-{next(_ids)}"
    await create_topic(bs, topic, 1)
    source = _builder(bs).set_topics(topic).set_property("partition.discovery.interval.ms", "-1").build()
    assert source.discovery_interval_ms == 0
    reader = source.create_reader(0, 1)
    await reader.start(lambda: None)
    got: list[str] = []

    try:
        await add_partitions(bs, topic, 2)
        await produce(bs, topic, [b"added"], partition=1)
        await asyncio.sleep(0.3)  # several fetches: each listed the partitions again with -1
        await produce(bs, topic, [b"last"], partition=0)
        await read_until(reader, got, lambda: "last" in got)
    finally:
        await reader.close()
    assert got == ["last"]
