"""KafkaSink behaviour with Flink's meaning, end to end on the session's test broker."""

from __future__ import annotations

import asyncio
import itertools

import pytest

import streamflow as sf
from streamflow.common.serialization import SimpleStringSchema
from streamflow.datastream.connectors.base import DeliveryGuarantee
from streamflow.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink
from streamflow.testing.kafka_broker import create_topic, read_topic

_ids = itertools.count()


def _sink(bs: str, topic: str, guarantee: DeliveryGuarantee) -> KafkaSink:
    return (
        KafkaSink.builder()
        .set_bootstrap_servers(bs)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(topic)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(guarantee)
        .build()
    )


async def test_delivery_guarantee_none_still_fails_on_a_record_the_broker_refuses(kafka):
    """Flink's NONE keeps Kafka's producer default ``acks=all``: a record the broker refuses (here
    larger than the topic's ``max.message.bytes``) fails the job. The sink used ``acks=0``, so the
    job succeeded and the record was gone."""
    bs, dst = kafka.bootstrap_servers, f"refused-{next(_ids)}"
    await create_topic(bs, dst, 1, config={"max.message.bytes": "200"})
    env = sf.StreamExecutionEnvironment()
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    env.from_collection(["ok", "x" * 1000]).sink_to(_sink(bs, dst, DeliveryGuarantee.NONE))
    with pytest.raises(Exception, match="MessageSizeTooLarge"):
        client = await env.execute_async("none-refused")
        await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert [m.value for m in await read_topic(bs, dst, committed=False)] in ([], [b"ok"])
