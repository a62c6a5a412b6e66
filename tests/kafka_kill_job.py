"""The job the Kafka kill tests run in a subprocess: Kafka -> keyed running sum -> Kafka, exactly once.

Usage: python tests/kafka_kill_job.py BOOTSTRAP IN_TOPIC OUT_TOPIC CHECKPOINT_DIR PARALLELISM TXN_PREFIX
       [INTERVAL_MS]  (the checkpoint interval, default 30)

Input records are ``key,value`` strings keyed by key (a key lives in one partition), so each key's
running sums are deterministic; the committed output must hold each ``key:sum`` exactly once.
The source is bounded at the end offsets seen at start; restarting the same command resumes from
the latest complete checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
import sys

import streamflow as sf
from streamflow.common.serialization import SimpleStringSchema
from streamflow.datastream.connectors.base import DeliveryGuarantee
from streamflow.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)

RUNNING = "kafka_kill_job: running"  # the first line of stderr, once the imports are done


def data(n: int) -> list[tuple[str, int]]:
    return [(f"k{i % 11}", i % 97) for i in range(n)]


def expected(n: int) -> list[str]:
    sums: dict[str, int] = {}
    out = []
    for key, value in data(n):
        sums[key] = sums.get(key, 0) + value
        out.append(f"{key}:{sums[key]}")
    return out


async def throttle(record: tuple[str, int]) -> tuple[str, int]:
    if record[1] % 8 == 0:
        await asyncio.sleep(0.001)
    return record


def parse(line: str) -> tuple[str, int]:
    key, value = line.split(",")
    return key, int(value)


def main(
    bootstrap: str, in_topic: str, out_topic: str, chk: str, parallelism: int, prefix: str,
    interval_ms: int = 30,
) -> None:
    print(RUNNING, file=sys.stderr, flush=True)  # imports done: a random kill counts from here
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    env.enable_checkpointing(interval_ms)
    env.get_checkpoint_config().set_checkpoint_storage_dir(chk)
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(30, 300))
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
        .uid("kafka-in")
        .map(parse)
        .uid("parse")
        .map(throttle, concurrency=1)
        .uid("throttle")
        .key_by(lambda r: r[0])
        .sum(1)
        .uid("running-sum")
        .map(lambda r: f"{r[0]}:{r[1]}")
        .uid("format")
        .sink_to(sink)
        .uid("kafka-out")
    )
    env.execute("kafka-kill-test")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("streamflow.connectors.kafka_sink").setLevel(logging.DEBUG)
    main(*sys.argv[1:5], int(sys.argv[5]), sys.argv[6], *(int(a) for a in sys.argv[7:8]))
