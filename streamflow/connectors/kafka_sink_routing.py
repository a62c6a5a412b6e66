"""Where the Kafka sink writes each record: its serialization, its partition, its group.

Theory of operation
-------------------
A batch is serialized with one comprehension per schema (:meth:`RecordRouter.serialize`), then
split into one :class:`~.kafka_txn.Group` per topic partition (:meth:`RecordRouter.group`). A
record's partition is the user's partitioner's choice among the topic's partitions, else Kafka's
``murmur2`` of its key over them (what Kafka's producer does with a keyed record, which Flink's
KafkaSink leaves to it), else one partition per batch for keyless records (Kafka's sticky
partitioner). A topic's partitions are those the producer's metadata shows, looked up again once
the answer is ``metadata.max.age.ms`` old (Kafka's producer refreshes its metadata as often), so
keys spread over partitions added to the topic while the job runs.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

from .kafka_record_serialization import KafkaRecordSerializationSchema
from .kafka_txn import Group

__all__ = ["RecordRouter", "Serialized"]

# values, keys, topics (None: the schema's one topic), headers of a batch
Serialized = tuple[list[Any], list[Any] | None, list[str] | None, list[Any] | None]


class RecordRouter:
    """The routing of one sink subtask (see the module docstring). ``lookup(topic)`` asks the
    producer for a topic's partitions; ``max_age_s`` is ``metadata.max.age.ms`` in seconds."""

    def __init__(self, schema: KafkaRecordSerializationSchema,
                 lookup: Callable[[str], Awaitable[list[int]]], max_age_s: float = 300.0) -> None:
        self.schema = schema
        self.lookup = lookup
        self.max_age_s = max_age_s
        self._partitions: dict[str, list[int]] = {}
        self._looked_up: dict[str, float] = {}

    async def partitions_of(self, topic: str) -> list[int]:
        now = asyncio.get_running_loop().time()
        parts = self._partitions.get(topic)
        if parts is None or now - self._looked_up[topic] >= self.max_age_s:
            parts = self._partitions[topic] = sorted(await self.lookup(topic))
            self._looked_up[topic] = now
        return parts

    def serialize(self, records: list) -> Serialized:
        """Raises what the user's schemas raise."""
        schema = self.schema
        values = schema.value_schema.serialize_batch(records)
        keys = schema.key_schema.serialize_batch(records) if schema.key_schema is not None else None
        topics = [schema.topic_selector(r) for r in records] if schema.topic_selector else None
        headers = [schema.header_provider(r) for r in records] if schema.header_provider else None
        return values, keys, topics, headers

    async def group(self, records: list, timestamps: list[int] | None, serialized: Serialized) -> list[Group]:
        """One group per topic partition, in the order of their first records."""
        from aiokafka.partitioner import murmur2

        schema = self.schema
        values, keys, topics, headers = serialized
        if topics is None and keys is None and schema.partitioner is None:
            topic = schema.topic
            assert topic is not None
            parts = await self.partitions_of(topic)
            return [Group(topic, random.choice(parts), values, None, timestamps, headers)]
        n = len(records)
        topic_list: list[str] = topics if topics is not None else [schema.topic or ""] * n
        partitions = {t: await self.partitions_of(t) for t in set(topic_list)}
        sticky = {t: random.choice(parts) for t, parts in partitions.items()}
        out: dict[tuple[str, int], Group] = {}
        for i in range(n):
            topic = topic_list[i]
            parts = partitions[topic]
            key = keys[i] if keys is not None else None
            if schema.partitioner is not None:
                p = schema.partitioner(records[i], key, values[i], topic, parts)
            elif key is not None:
                p = parts[(murmur2(key) & 0x7FFFFFFF) % len(parts)]
            else:
                p = sticky[topic]
            g = out.get((topic, p))
            if g is None:
                g = out[(topic, p)] = Group(topic, p, [], [] if keys is not None else None,
                                            [] if timestamps is not None else None,
                                            [] if headers is not None else None)
            g.values.append(values[i])
            if g.keys is not None:
                g.keys.append(key)
            if g.timestamps is not None:
                g.timestamps.append(timestamps[i])  # type: ignore[index]
            if g.headers is not None:
                g.headers.append(headers[i])  # type: ignore[index]
        return list(out.values())
