"""Kafka jobs restored from a savepoint at another parallelism, on the session's test broker.

A partition's offset belongs to whichever source subtask owns the partition, so the source's
positions restore at any parallelism (as Flink reassigns restored splits): every record after
the savepoint is read once, none before it again.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

import pytest
from waiting import wait_until  # tests/waiting.py

import streamflow as sf
from streamflow.common.serialization import SimpleStringSchema
from streamflow.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource
from streamflow.testing.kafka_broker import create_topic, produce

_ids = itertools.count()


def _source(bootstrap: str, topic: str) -> KafkaSource:
    return (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_topics(topic)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )


async def _run(bootstrap: str, topic: str, parallelism: int, out: list, want: int,
               savepoint_from: str | None = None, savepoint_to: str | None = None) -> str | None:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    if savepoint_from is not None:
        env.configure({"execution.savepoint.path": savepoint_from})
    env.from_source(_source(bootstrap, topic), None, "kafka").uid("kafka-in").add_sink(out.append)
    client = await env.execute_async("kafka-rescale")
    await wait_until(lambda: len(out) >= want)
    location = await client.trigger_savepoint(savepoint_to) if savepoint_to is not None else None
    await asyncio.wait_for(client.cancel(), 30)
    return location


async def _produce(bootstrap: str, topic: str, label: str, n: int) -> list[str]:
    values = [f"{label}{i}" for i in range(n)]
    await produce(bootstrap, topic, [v.encode() for v in values], keys=[str(i).encode() for i in range(n)])
    return values


@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 1), (1, 4)])
async def test_the_source_resumes_every_partition_at_another_parallelism(kafka, tmp_path, before, after):
    bs, topic = kafka.bootstrap_servers, f"rescale-src-{next(_ids)}"
    await create_topic(bs, topic, 6)
    first = await _produce(bs, topic, "a", 300)
    out1: list[str] = []
    savepoint = await _run(bs, topic, before, out1, 300, savepoint_to=str(tmp_path / "sp"))
    assert Counter(out1) == Counter(first)

    second = await _produce(bs, topic, "b", 300)
    out2: list[str] = []
    await _run(bs, topic, after, out2, 300, savepoint_from=savepoint)
    await asyncio.sleep(0.3)  # a duplicate would arrive by now
    assert Counter(out2) == Counter(second)


def test_restored_positions_are_split_by_the_owner_rule() -> None:
    from streamflow.connectors.kafka_common import KafkaTopicPartition
    from streamflow.connectors.kafka_source import split_owner

    source = _source("127.0.0.1:1", "t")
    old = [[["t", p, 10 * p] for p in range(6) if p % 2 == s] for s in range(2)]  # two former subtasks
    kept: dict[tuple[str, int], int] = {}
    count = 0
    for subtask in range(4):
        reader = source.create_reader(subtask, 4)
        reader.restore_positions(old)
        assert all(split_owner(KafkaTopicPartition(*key), 4) == subtask for key in reader._restored)
        assert reader.snapshot_position() == [[t, p, off] for (t, p), off in sorted(reader._restored.items())]
        kept.update(reader._restored)
        count += len(reader._restored)
    assert kept == {("t", p): 10 * p for p in range(6)} and count == 6  # each kept by exactly one subtask

    with pytest.raises(ValueError, match="two positions for partition t-3"):
        source.create_reader(0, 2).restore_positions([[["t", 3, 5]], [["t", 3, 7]]])
