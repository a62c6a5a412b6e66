"""Kafka -> keyed running sum -> Kafka (exactly once) on the Spark engine: the driver-kill tests'
job (tests/test_spark_kafka_kill.py).

Usage: python tests/spark_kafka_kill_job.py BOOTSTRAP IN_TOPIC OUT_TOPIC CHECKPOINT_DIR TXN_PREFIX
       RECORDS_PER_BATCH

The records and the expected output are those of tests/kafka_kill_job.py (``key,value`` lines keyed
by key; each ``key:running sum`` once). Fault hooks, read from the environment:
``STREAMFLOW_KILL_AT=commit:E`` / ``committed:E`` (the Kafka sink, for micro-batch E - 1 and later:
its commit marker is in the transaction and the commit not sent / the transaction committed) and
``STREAMFLOW_SPARK_KILL_AFTER_BATCH=B`` (the driver, after the sink wrote micro-batch B, before
Spark wrote B to its commit log). Restarting the same command resumes from the checkpoint.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import streamflow as sf
from streamflow.common.serialization import SimpleStringSchema
from streamflow.datastream.connectors.base import DeliveryGuarantee
from streamflow.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)

sys.path.insert(0, str(Path(__file__).parent))
from kafka_kill_job import parse


def main(bootstrap: str, in_topic: str, out_topic: str, chk: str, prefix: str, per_batch: int) -> None:
    env = sf.StreamExecutionEnvironment()
    env.set_engine("spark")
    env.configure({"execution.spark.records-per-batch": per_batch})
    env.get_checkpoint_config().set_checkpoint_storage_dir(chk)
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_topics(in_topic)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(out_topic)
            .set_key_serialization_schema(lambda r: r.split(":")[0].encode())
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(prefix)
        .build()
    )
    (
        env.from_source(source, None, "kafka-in")
        .map(parse)
        .key_by(lambda r: r[0])
        .sum(1)
        .map(lambda r: f"{r[0]}:{r[1]}")
        .sink_to(sink)
        .uid("kafka-out")
    )
    env.execute("spark-kafka-kill-test")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("streamflow.spark.sinks").setLevel(logging.DEBUG)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    main(*sys.argv[1:6], int(sys.argv[6]))
