"""KafkaSource properties with Flink's meaning (``KafkaSourceOptions`` and
``KafkaSourceBuilder.parseAndSetRequiredProperties``), on the session's test broker."""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from waiting import wait_until  # tests/waiting.py

import streamflow as sf
from streamflow.common.serialization import SimpleStringSchema
from streamflow.datastream.connectors.kafka import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaSource,
    KafkaSourceBuilder,
    KafkaTopicPartition,
)
from streamflow.testing.kafka_broker import create_topic, produce

_ids = itertools.count()


def _builder(bootstrap: str, topic: str) -> KafkaSourceBuilder:
    return (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_topics(topic)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
    )


async def _committed(bootstrap: str, group: str, topic: str) -> int | None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return await consumer.committed(TopicPartition(topic, 0))
    finally:
        await consumer.stop()


async def test_commit_offsets_on_checkpoint_is_on_by_default_and_can_be_turned_off(kafka, tmp_path):
    """Flink commits a group's offsets when a checkpoint completes unless
    ``commit.offsets.on.checkpoint`` is false (the property was refused as unknown)."""
    bs, topic = kafka.bootstrap_servers, f"commit-{next(_ids)}"
    await create_topic(bs, topic, 1)
    await produce(bs, topic, [b"a", b"b", b"c"])
    on, off = f"on-{topic}", f"off-{topic}"
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    env.enable_checkpointing(60_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
    out: list[str] = []
    committing = _builder(bs, topic).set_group_id(on).build()
    silent = (_builder(bs, topic).set_group_id(off)
              .set_property("commit.offsets.on.checkpoint", "false").build())
    env.from_source(committing, None, "on").add_sink(out.append)
    env.from_source(silent, None, "off").add_sink(out.append)
    client = await env.execute_async("kafka-commit")
    try:
        await wait_until(lambda: len(out) == 6)
        await client.trigger_checkpoint()
        committed = None
        for _ in range(200):  # the commit runs in the background after the notification
            committed = await _committed(bs, on, topic)
            if committed is not None:
                break
            await asyncio.sleep(0.05)
        assert committed == 3
        assert await _committed(bs, off, topic) is None
    finally:
        await client.cancel()


def test_commit_offsets_on_checkpoint_needs_a_group_id():
    """Flink's sanity check: an explicit ``commit.offsets.on.checkpoint=true`` without group.id
    fails ``build()``; without the property, no group id just means no commits."""
    builder = _builder("localhost:1", "t").set_property("commit.offsets.on.checkpoint", "true")
    with pytest.raises(ValueError, match=r"group\.id is required when offset commit is enabled"):
        builder.build()
    assert _builder("localhost:1", "t").build().commit_offsets_on_checkpoint is False


def test_client_id_prefix_and_auto_offset_reset_properties(caplog):
    """``client.id.prefix`` is the property ``set_client_id_prefix`` sets in Flink; Flink overrides
    ``auto.offset.reset`` with the starting offsets' strategy (a warning), it does not fail."""
    caplog.set_level(logging.WARNING, "streamflow.connectors.kafka_source")
    source = (_builder("localhost:1", "t").set_property("client.id.prefix", "my-app")
              .set_property("auto.offset.reset", "latest").build())
    assert source.client_id_prefix == "my-app"
    assert "auto.offset.reset=latest has no effect" in caplog.text


def test_client_id_prefix_defaults_to_the_group_id_else_a_random_one_as_flinks():
    """Flink's KafkaSourceBuilder.parseAndSetRequiredProperties: without client.id.prefix the
    prefix is group.id, else "KafkaSource-" and a random long (drawn per built source); the
    source used "streamflow" for every source."""
    assert _builder("localhost:1", "t").set_group_id("orders").build().client_id_prefix == "orders"
    assert (_builder("localhost:1", "t").set_group_id("orders").set_client_id_prefix("mine").build()
            .client_id_prefix == "mine")
    prefixes = {_builder("localhost:1", "t").build().client_id_prefix for _ in range(3)}
    assert len(prefixes) == 3
    for prefix in prefixes:
        assert prefix.startswith("KafkaSource-")
        assert -(1 << 63) <= int(prefix[len("KafkaSource-"):]) < 1 << 63


def test_client_id_property_is_overridden_by_prefix_and_subtask_as_flinks(caplog):
    """Flink's KafkaPartitionSplitReader sets each consumer's client.id to
    "<client.id.prefix>-<subtask>", over a client.id property; the property won here, so every
    subtask's consumer had the same client id."""
    from streamflow.connectors.kafka_common import consumer_config

    caplog.set_level(logging.WARNING, "streamflow.connectors.kafka_source")
    source = (_builder("localhost:1", "t").set_client_id_prefix("app")
              .set_property("client.id", "shared").build())
    kw = consumer_config(source.bootstrap_servers, None, source.properties, f"{source.client_id_prefix}-2")
    assert kw["client_id"] == "app-2"
    assert "client.id=shared has no effect" in caplog.text


@pytest.mark.parametrize("role", ["starting", "stopping"])
def test_committed_offsets_need_a_group_id_at_build(role):
    """Flink validates committed offsets, starting or stopping, against group.id at build();
    as stopping offsets they failed only when the job started, in the consumer."""
    builder = _builder("localhost:1", "t")
    initializer = KafkaOffsetsInitializer.committed_offsets()
    if role == "starting":
        builder.set_starting_offsets(initializer)
    else:
        builder.set_bounded(initializer)
    with pytest.raises(ValueError, match=f"committed_offsets\\(\\) as {role} offsets needs set_group_id"):
        builder.build()


async def test_a_topic_or_partition_the_brokers_do_not_have_fails_the_job(kafka):
    """Flink's subscribers fail the source on a topic of set_topics() or a partition of
    set_partitions() that does not exist. A bounded job over a misspelt topic ended with no
    records as if it had read them all; a partition that does not exist made the job hang."""
    bs, topic = kafka.bootstrap_servers, f"exists-{next(_ids)}"
    await create_topic(bs, topic, 1)
    await produce(bs, topic, [b"a"])
    by_topics = _builder(bs, f"missing-{topic}")
    by_partitions = (KafkaSource.builder().set_bootstrap_servers(bs)
                     .set_partitions({KafkaTopicPartition(topic, 0), KafkaTopicPartition(topic, 3)})
                     .set_value_only_deserializer(SimpleStringSchema()))
    for builder, named in ((by_topics, f"missing-{topic}"), (by_partitions, f"{topic}-3")):
        env = sf.StreamExecutionEnvironment()
        env.set_restart_strategy(sf.RestartStrategies.no_restart())
        out: list[str] = []
        env.from_source(builder.set_bounded(KafkaOffsetsInitializer.latest()).build(), None, "k").add_sink(
            out.append)
        client = await env.execute_async("missing")
        with pytest.raises(Exception, match=f"{named}.* do not exist on the Kafka brokers"):
            await asyncio.wait_for(client.get_job_execution_result(), 30)


async def test_an_out_of_range_offset_follows_the_starting_offsets_reset_strategy(kafka):
    """Flink sets the consumer's ``auto.offset.reset`` from the starting offsets initializer: an
    offset out of range (past the end here; deleted by retention in life) resets per its
    strategy, and with ``NONE`` fails the job. The consumer always reset to the earliest offset,
    so this job read the topic from its start instead."""
    bs, topic = kafka.bootstrap_servers, f"range-{next(_ids)}"
    await create_topic(bs, topic, 1)
    await produce(bs, topic, [b"a", b"b", b"c"])
    env = sf.StreamExecutionEnvironment()
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    out: list[str] = []
    past_the_end = {KafkaTopicPartition(topic, 0): 100}
    start = KafkaOffsetsInitializer.offsets(past_the_end, KafkaOffsetResetStrategy.NONE)
    env.from_source(_builder(bs, topic).set_starting_offsets(start).build(), None, "k").add_sink(out.append)
    client = await env.execute_async("out-of-range")
    with pytest.raises(Exception, match="OffsetOutOfRange"):
        await asyncio.wait_for(client.get_job_execution_result(), 30)
    assert out == []


def test_the_reset_strategy_of_each_starting_offsets_initializer():
    """Flink's ``getAutoOffsetResetStrategy``: earliest() EARLIEST, latest() and timestamp()
    LATEST, committed_offsets() and offsets() their argument (NONE and EARLIEST by default)."""
    tp, init = {KafkaTopicPartition("t", 0): 1}, KafkaOffsetsInitializer
    latest = KafkaOffsetResetStrategy.LATEST
    resets = [
        init.earliest(), init.latest(), init.timestamp(5), init.committed_offsets(),
        init.committed_offsets(latest), init.offsets(tp), init.offsets(tp, latest),
    ]
    assert [i.auto_offset_reset() for i in resets] == [
        "earliest", "latest", "latest", "none", "latest", "earliest", "latest"]


async def test_a_completed_checkpoint_commits_its_own_offsets_not_a_later_ones(kafka):
    """Flink's KafkaSourceReader commits the offsets of the checkpoint that completed: with a
    later checkpoint taken while it was in flight (concurrent checkpoints, a savepoint), the
    reader committed the latest snapshot's offsets, ahead of every completed checkpoint."""
    bs, topic = kafka.bootstrap_servers, f"commit-own-{next(_ids)}"
    await create_topic(bs, topic, 1)
    await produce(bs, topic, [str(i).encode() for i in range(10)])
    group = f"g-{topic}"
    reader = _builder(bs, topic).set_group_id(group).build().create_reader(0, 1)
    await reader.start(lambda: None)
    read: list = []

    async def read_until(n: int) -> None:
        while len(read) < n:
            batch = reader.poll_batch(n - len(read))
            if isinstance(batch, tuple):  # (records, timestamps)
                read.extend(batch[0])
            else:
                await asyncio.sleep(0.01)

    async def committed_once_it_changes(before: int | None) -> int | None:
        for _ in range(200):  # the commit runs in the background
            now = await _committed(bs, group, topic)
            if now != before:
                return now
            await asyncio.sleep(0.05)
        return before

    try:
        await asyncio.wait_for(read_until(4), 30)
        assert reader.snapshot_for_checkpoint(1) == [[topic, 0, 4]]
        await asyncio.wait_for(read_until(10), 30)
        assert reader.snapshot_for_checkpoint(2) == [[topic, 0, 10]]
        reader.notify_checkpoint_complete(1)
        assert await committed_once_it_changes(None) == 4
        reader.notify_checkpoint_complete(2)
        assert await committed_once_it_changes(4) == 10
    finally:
        await reader.close()
