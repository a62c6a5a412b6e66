"""Kafka source and sink end to end through the public API, on the session's test broker."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter

import orjson
import pytest

import streamflow as sf
from streamflow.checkpoint import driver as driver_module
from streamflow.common import Types
from streamflow.common.serialization import JsonRowDeserializationSchema, SimpleStringSchema
from streamflow.datastream.connectors.base import DeliveryGuarantee
from streamflow.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from streamflow.testing.kafka_broker import create_topic, open_transactions, produce, read_topic

_ids = itertools.count()


def topic_name(label: str) -> str:
    return f"{label}-{next(_ids)}-{id(object())}"


async def test_bounded_source_to_exactly_once_sink(kafka, tmp_path):
    await _bounded_exactly_once(kafka, tmp_path, stateful=False)


async def test_final_state_waits_for_slow_incremental_acknowledgements(kafka, tmp_path, monkeypatch):
    """A keyed task's incremental state is written before its acknowledgement is posted. When
    the writes are slow, the task ends while its last acknowledgement is still unposted: its
    final state must still come after that checkpoint (it failed with 'barrier N after pending
    checkpoint N', or lost the records sent after the barrier)."""
    real = driver_module.produce_all

    async def slow_produce_all(uploads):
        await asyncio.sleep(0.3)
        return await real(uploads)

    monkeypatch.setattr(driver_module, "produce_all", slow_produce_all)
    await _bounded_exactly_once(kafka, tmp_path, stateful=True)


class _Numbered(sf.KeyedProcessFunction):
    def open(self, ctx):
        self.seen = ctx.get_state(sf.ValueStateDescriptor("seen", Types.INT()))

    def process_element(self, d, ctx):
        self.seen.update((self.seen.value() or 0) + 1)
        yield f"{d['key']}:{d['value']}"


async def _bounded_exactly_once(kafka, tmp_path, stateful: bool):
    bs = kafka.bootstrap_servers
    src, dst = topic_name("in"), topic_name("out")
    await create_topic(bs, src, 2)
    await create_topic(bs, dst, 2)
    records = [orjson.dumps({"key": f"k{i % 7}", "value": i}) for i in range(300)]
    await produce(bs, src, records, keys=[f"k{i % 7}".encode() for i in range(300)])

    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    env.enable_checkpointing(50)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(bs)
        .set_topics(src)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(JsonRowDeserializationSchema())
        .build()
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(bs)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(dst)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(topic_name("tx"))
        .build()
    )
    keyed = env.from_source(source, None, "kafka").uid("kafka-in").key_by(lambda d: d["key"])
    lines = keyed.process(_Numbered()) if stateful else keyed.map(lambda d: f"{d['key']}:{d['value']}")
    lines.sink_to(sink).uid("kafka-out")
    await asyncio.wait_for(_run(env), 60)
    out = [m.value.decode() for m in await read_topic(bs, dst)]
    assert Counter(out) == Counter(f"k{i % 7}:{i}" for i in range(300))
    assert await open_transactions(bs, dst) == {}


async def _run(env):
    client = await env.execute_async("kafka-e2e")
    await client.get_job_execution_result()


async def test_source_reports_offsets_and_consumer_lag_per_partition(kafka):
    bs, src = kafka.bootstrap_servers, topic_name("lag")
    await create_topic(bs, src, 1)
    await produce(bs, src, [str(i).encode() for i in range(300)])

    async def slow(v: str) -> str:
        await asyncio.sleep(0.01)
        return v

    env = sf.StreamExecutionEnvironment()
    env.set_batch_size(4)
    env.set_channel_capacity(8)
    source = (
        KafkaSource.builder().set_bootstrap_servers(bs).set_topics(src)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema()).build()
    )  # fmt: skip
    env.from_source(source, None, "kafka").uid("kafka-in").rebalance().map(slow, concurrency=1).add_sink(
        lambda v: None
    )  # one call at a time: the consumer is slow (an async map keeps `concurrency` calls in flight)
    env.disable_operator_chaining()
    client = await env.execute_async("lag")
    prefix = f"kafka-in[0].KafkaSourceReader.topic.{src}.partition.0"
    try:
        for _ in range(100):
            await asyncio.sleep(0.1)
            m = client.get_metrics()
            if m.get(f"{prefix}.pendingRecords", 0) > 0:
                break
        offset, lag = m[f"{prefix}.currentOffset"], m[f"{prefix}.pendingRecords"]
        # currentOffset: the last record emitted (Flink's); the slow consumer lags behind
        assert 0 < offset < 300 and lag == 300 - (offset + 1)
    finally:
        await client.cancel()


def _bounded_json_source(bs: str, topic: str) -> KafkaSource:
    return (
        KafkaSource.builder()
        .set_bootstrap_servers(bs)
        .set_topics(topic)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(JsonRowDeserializationSchema())
        .build()
    )


async def test_bad_records_go_to_dead_letters_and_are_counted(kafka):
    bs = kafka.bootstrap_servers
    topic = topic_name("bad")
    await create_topic(bs, topic, 1)
    values = [b'{"v": 1}', b"not json", b'{"v": 2}', b"{broken", b'{"v": 3}']
    await produce(bs, topic, values)
    env = sf.StreamExecutionEnvironment()
    stream = env.from_source(_bounded_json_source(bs, topic), None, "kafka")
    good, dead = sf.CollectSink(), sf.CollectSink()
    stream.map(lambda d: d["v"]).sink_to(good)
    stream.get_side_output(sf.DEAD_LETTER).sink_to(dead)
    client = await env.execute_async("dead-letters")
    result = await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert good.results == [1, 2, 3]
    assert [(d.topic, d.partition, d.offset, d.raw) for d in dead.results] == [
        (topic, 0, 1, b"not json"), (topic, 0, 3, b"{broken")]
    assert all("JSONDecodeError" in d.error for d in dead.results)
    malformed = {k: v for k, v in result.metrics.items() if k.endswith("numRecordsMalformed")}
    assert sum(malformed.values()) == 2, malformed


async def test_a_bad_record_fails_the_job_when_nobody_reads_dead_letters(kafka):
    bs = kafka.bootstrap_servers
    topic = topic_name("bad")
    await create_topic(bs, topic, 1)
    await produce(bs, topic, [b'{"v": 1}', b"oops"])
    env = sf.StreamExecutionEnvironment()
    env.from_source(_bounded_json_source(bs, topic), None, "kafka").sink_to(sf.CollectSink())
    client = await env.execute_async("no-dead-letters")
    with pytest.raises(Exception, match=rf"{topic}-0@1"):
        await asyncio.wait_for(client.get_job_execution_result(), 60)


def _string_sink(bs: str, topic: str, guarantee: DeliveryGuarantee, **props: str) -> KafkaSink:
    builder = (
        KafkaSink.builder()
        .set_bootstrap_servers(bs)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(topic)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(guarantee)
        .set_transactional_id_prefix(topic_name("tx"))
    )
    for key, value in props.items():
        builder.set_property(key.replace("_", "."), value)
    return builder.build()


async def test_sink_properties_reach_the_producer(kafka):
    """Flink's producer property names apply to the producer: gzip-compressed output reads back;
    a ``max.request.size`` smaller than a record fails the job, naming Kafka's error."""
    bs, dst = kafka.bootstrap_servers, topic_name("props")
    await create_topic(bs, dst, 1)
    env = sf.StreamExecutionEnvironment()
    sink = _string_sink(bs, dst, DeliveryGuarantee.AT_LEAST_ONCE, compression_type="gzip", linger_ms="1")
    env.from_collection([f"v{i}" for i in range(50)]).sink_to(sink)
    await asyncio.wait_for(_run(env), 60)
    assert sorted(m.value.decode() for m in await read_topic(bs, dst)) == sorted(f"v{i}" for i in range(50))

    env = sf.StreamExecutionEnvironment()
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    sink = _string_sink(bs, dst, DeliveryGuarantee.AT_LEAST_ONCE, max_request_size="200")
    env.from_collection(["x" * 1000]).sink_to(sink)
    with pytest.raises(Exception, match=r"exceeds max\.request\.size=200"):
        await asyncio.wait_for(_run(env), 60)


@pytest.mark.parametrize("guarantee", [DeliveryGuarantee.AT_LEAST_ONCE, DeliveryGuarantee.EXACTLY_ONCE])
async def test_the_sink_sends_each_batch_at_once(kafka, guarantee):
    """Every batch the sink hands the producer is sent at once, whatever ``linger.ms`` says: an
    open aiokafka batch lingers, and a partition's next batch waits until the sender has taken
    it, so 20 batches on one partition with ``linger.ms=60000`` took 60 s each (and failed the
    job at ``request.timeout.ms``)."""
    bs, dst = kafka.bootstrap_servers, topic_name("nolinger")
    await create_topic(bs, dst, 1)
    env = sf.StreamExecutionEnvironment().set_batch_size(10)
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    sink = _string_sink(bs, dst, guarantee, linger_ms="60000")
    env.from_collection([f"v{i}" for i in range(200)]).sink_to(sink)
    await asyncio.wait_for(_run(env), 30)
    assert [m.value.decode() for m in await read_topic(bs, dst)] == [f"v{i}" for i in range(200)]


def test_sink_properties_are_checked_at_build(caplog):
    """A property the producer does not take is logged as ignored, as Kafka's producer warns
    (PyFlink's examples set ``group.id`` on the sink); an ``acks`` EXACTLY_ONCE cannot honour
    fails ``build()``."""
    with caplog.at_level(logging.INFO, logger="streamflow"):
        _string_sink("localhost:1", "t", DeliveryGuarantee.NONE, **{"group.id": "g", "linger.ms": "5"})
    assert "properties ['group.id'] are not producer settings streamflow applies: ignored" in caplog.text
    assert "property linger.ms has no effect: the sink hands the producer whole batches" in caplog.text
    with pytest.raises(ValueError, match="EXACTLY_ONCE needs acks=all"):
        _string_sink("localhost:1", "t", DeliveryGuarantee.EXACTLY_ONCE, acks="1")
    _string_sink("localhost:1", "t", DeliveryGuarantee.EXACTLY_ONCE, acks="-1", transaction_timeout_ms="6000")


async def test_a_failed_job_never_flushes_its_open_transaction(kafka):
    """EXACTLY_ONCE: the sink closed after a failure drops the records its open transaction still
    queues, as Flink closes a producer in a transaction without flushing
    (``FlinkKafkaInternalProducer.close``): they are in no checkpoint, and the restarted job
    sends them again. Flushed, they were written into a transaction that only a later
    ``init_transactions`` aborts; and a flush that waited through a broker restart wrote them
    into a transaction the test broker had forgotten, open for ever (a committed read stuck at
    their offset: ``test_kafka_kill``'s broker restart once read no output at all)."""
    bs, dst = kafka.bootstrap_servers, topic_name("noflush")
    await create_topic(bs, dst, 1)

    def fail_at_the_second_batch(v: str) -> str:
        if v == "v40":
            raise RuntimeError("injected failure")
        return v

    env = sf.StreamExecutionEnvironment().set_batch_size(40)
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    # the first batch's 40 records are still queued in the producer when the second batch fails:
    # the chained task fails before the producer's sender task has had a turn of the loop
    sink = _string_sink(bs, dst, DeliveryGuarantee.EXACTLY_ONCE)
    env.from_collection([f"v{i}" for i in range(80)]).map(fail_at_the_second_batch).sink_to(sink)
    with pytest.raises(Exception, match="injected failure"):
        await asyncio.wait_for(_run(env), 60)
    assert await read_topic(bs, dst, committed=False) == []  # nothing of the transaction was written
    assert await open_transactions(bs, dst) == {}
