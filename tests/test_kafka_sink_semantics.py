"""KafkaSink behaviour with Flink's meaning, end to end on the session's test broker."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import aiokafka
import pytest
from test_kafka_e2e import _string_sink  # the string-valued KafkaSink of the e2e tests

import streamflow as sf
from streamflow.common.serialization import SimpleStringSchema
from streamflow.datastream.connectors.base import DeliveryGuarantee
from streamflow.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from streamflow.testing.kafka_broker import create_topic, produce, read_topic

_ids = itertools.count()


async def test_delivery_guarantee_none_still_fails_on_a_record_the_broker_refuses(kafka):
    """Flink's NONE keeps Kafka's producer default ``acks=all``: a record the broker refuses (here
    larger than the topic's ``max.message.bytes``) fails the job. The sink used ``acks=0``, so the
    job succeeded and the record was gone."""
    bs, dst = kafka.bootstrap_servers, f"refused-{next(_ids)}"
    await create_topic(bs, dst, 1, config={"max.message.bytes": "200"})
    env = sf.StreamExecutionEnvironment()
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    env.from_collection(["ok", "x" * 1000]).sink_to(_string_sink(bs, dst, DeliveryGuarantee.NONE))
    with pytest.raises(Exception, match="MessageSizeTooLarge"):
        client = await env.execute_async("none-refused")
        await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert [m.value for m in await read_topic(bs, dst, committed=False)] in ([], [b"ok"])


async def test_exactly_once_transactions_do_not_time_out_after_a_minute(kafka, tmp_path, monkeypatch):
    """A transaction stays open for a checkpoint interval: Flink's KafkaSinkBuilder sets
    ``transaction.timeout.ms`` to one hour, the producer had aiokafka's 60 s, so a broker aborted
    the transaction of any job checkpointing less often than once a minute. The default is now
    15 minutes, the most a default broker accepts (the test broker refuses Flink's hour, as
    Apache Kafka does). An explicit property still wins."""
    timeouts: list[int] = []

    class Recording(aiokafka.AIOKafkaProducer):  # type: ignore[misc]
        def __init__(self, **kw: Any) -> None:
            timeouts.append(kw.get("transaction_timeout_ms", 60_000))  # 60 s: aiokafka's default
            super().__init__(**kw)

    monkeypatch.setattr(aiokafka, "AIOKafkaProducer", Recording)
    bs, dst = kafka.bootstrap_servers, f"txtimeout-{next(_ids)}"
    await create_topic(bs, dst, 1)
    builder = (KafkaSink.builder().set_bootstrap_servers(bs)
               .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(dst)
                                      .set_value_serialization_schema(SimpleStringSchema()).build())
               .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
               .set_transactional_id_prefix(dst))
    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(60_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
    env.from_collection(["a", "b"]).sink_to(builder.build())
    client = await env.execute_async("eos-timeout")
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert [m.value for m in await read_topic(bs, dst)] == [b"a", b"b"]
    # the sink's producer, then the probe of lingering transactional ids (kafka_txn_admin)
    assert timeouts == [900_000, 900_000]
    explicit = builder.set_property("transaction.timeout.ms", "600000").build()
    assert explicit.producer_kw["transaction_timeout_ms"] == 600_000


async def test_record_timestamps_pass_from_kafka_through_the_job_to_kafka(kafka):
    """Flink: a KafkaSource record's timestamp is its Kafka timestamp, and KafkaSink writes each
    record's timestamp as the Kafka timestamp (a record without one gets the producer's time)."""
    bs, src, dst = kafka.bootstrap_servers, f"ts-in-{next(_ids)}", f"ts-out-{next(_ids)}"
    await create_topic(bs, src, 1)
    await create_topic(bs, dst, 1)
    await produce(bs, src, [b"a", b"b"], timestamps=[1000, 2000])
    source = (KafkaSource.builder().set_bootstrap_servers(bs).set_topics(src)
              .set_bounded(KafkaOffsetsInitializer.latest())
              .set_value_only_deserializer(SimpleStringSchema()).build())
    env = sf.StreamExecutionEnvironment()
    guarantee = DeliveryGuarantee.AT_LEAST_ONCE
    env.from_source(source, None, "kafka").map(str.upper).sink_to(_string_sink(bs, dst, guarantee))
    env.from_collection(["untimed"]).sink_to(_string_sink(bs, dst, guarantee))
    before = int(time.time() * 1000)
    client = await env.execute_async("timestamps")
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    written = {m.value: m.timestamp for m in await read_topic(bs, dst)}
    assert (written[b"A"], written[b"B"]) == (1000, 2000)
    assert written[b"untimed"] >= before


async def test_a_negative_record_timestamp_is_written_as_none_as_flink_does(kafka):
    """Flink's KafkaRecordSerializationSchemaWrapper gives the ProducerRecord a null timestamp
    for a negative one, so the producer stamps its time; the sink wrote the negative one."""
    bs, dst = kafka.bootstrap_servers, f"ts-negative-{next(_ids)}"
    await create_topic(bs, dst, 1)
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda e, ts: int(e.split(":")[1]))
    env = sf.StreamExecutionEnvironment()
    env.from_collection(["a:-5", "b:7", "c:-1"]).assign_timestamps_and_watermarks(strategy).sink_to(
        _string_sink(bs, dst, DeliveryGuarantee.AT_LEAST_ONCE))
    before = int(time.time() * 1000)
    client = await env.execute_async("negative-timestamps")
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    written = {m.value: m.timestamp for m in await read_topic(bs, dst)}
    assert written[b"b:7"] == 7
    assert written[b"a:-5"] >= before and written[b"c:-1"] >= before
