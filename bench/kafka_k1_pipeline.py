"""K1 on streamflow: Kafka `in` -> keyed running sum -> Kafka `out`, exactly once, a checkpoint every second.

usage: python bench/kafka_k1_pipeline.py BOOTSTRAP [PARALLELISM]

The pipeline script the K1 driver (shared/bench/kafka/bench.py) times: it reads the JSON records
``{"key", "value", "ts"}`` of `in`, keeps a running sum per key and writes one ``{"key", "sum"}``
per input to `out`, keyed by the key, through KafkaSink EXACTLY_ONCE (transactions committed when
each checkpoint completes). It runs until the driver stops it (SIGTERM).
"""

from __future__ import annotations

import sys

import orjson

import streamflow as sf
from streamflow.common.serialization import JsonRowDeserializationSchema
from streamflow.datastream.connectors.base import DeliveryGuarantee
from streamflow.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)


def main(bootstrap: str, parallelism: int) -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage_dir("chk")  # the driver runs us in a fresh dir
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_topics("in")
        .set_group_id("streamflow-k1")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(JsonRowDeserializationSchema(["key", "value"]))
        .build()
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic("out")
            .set_key_serialization_schema(lambda r: r[0].encode())
            .set_value_serialization_schema(lambda r: orjson.dumps({"key": r[0], "sum": r[1]}))
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix("streamflow-k1")
        .build()
    )
    (
        env.from_source(source, None, "in")
        .uid("in")
        .key_by(lambda r: r[0])
        .sum(1)
        .uid("sum")
        .sink_to(sink)
        .uid("out")
    )
    env.execute("k1")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)
