"""KafkaRecordSerializationSchema and its builder (PyFlink's names): what KafkaSink writes where."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .serialization import SerializationSchema, as_serializer

__all__ = [
    "KafkaProducerRecord",
    "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder",
    "Partitioner",
]

Partitioner = Callable[[Any, bytes | None, bytes | None, str, list[int]], int]


@dataclass(frozen=True)
class KafkaProducerRecord:
    """One record as :meth:`KafkaRecordSerializationSchema.serialize` makes it (Flink's
    ``ProducerRecord``): ``partition`` is ``None`` when the producer picks it."""

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes
    timestamp: int | None
    headers: list[tuple[str, bytes | None]] | None


class KafkaRecordSerializationSchema:
    """Topic (or a selector), value and key schemas, partitioner, headers (PyFlink's builder)."""

    def __init__(
        self,
        topic: str | None = None,
        value_serialization_schema: SerializationSchema | Callable[[Any], bytes] | None = None,
        *,
        topic_selector: Callable[[Any], str] | None = None,
        key_serialization_schema: SerializationSchema | Callable[[Any], bytes] | None = None,
        partitioner: Partitioner | None = None,
        header_provider: Callable[[Any], list[tuple[str, bytes | None]]] | None = None,
    ) -> None:
        if (topic is None) == (topic_selector is None):
            raise ValueError("KafkaRecordSerializationSchema: set one of set_topic and set_topic_selector")
        if value_serialization_schema is None:
            raise ValueError("KafkaRecordSerializationSchema: set_value_serialization_schema() is required")
        self.topic = topic
        self.topic_selector = topic_selector
        self.value_schema = as_serializer(value_serialization_schema)
        self.key_schema = as_serializer(key_serialization_schema) if key_serialization_schema else None
        self.partitioner = partitioner
        self.header_provider = header_provider

    @staticmethod
    def builder() -> KafkaRecordSerializationSchemaBuilder:
        return KafkaRecordSerializationSchemaBuilder()

    def serialize(
        self,
        element: Any,
        context: Any = None,
        timestamp: int | None = None,
        partitions: list[int] | None = None,
    ) -> KafkaProducerRecord:
        """Flink's ``serialize(element, context, timestamp)``: the record the sink writes for
        ``element`` (its topic, key, value and headers). The partition is the partitioner's
        choice among ``partitions`` (the topic's, which the sink looks up) when both are given,
        else ``None`` (the sink's choice: by the key's hash, else sticky). ``context`` is accepted
        for Flink's signature (the sink's subtask context) and not used."""
        topic = self.topic_selector(element) if self.topic_selector is not None else self.topic
        assert topic is not None  # one of the two is set (checked in __init__)
        value = self.value_schema.serialize(element)
        key = self.key_schema.serialize(element) if self.key_schema is not None else None
        headers = self.header_provider(element) if self.header_provider is not None else None
        partition = None
        if self.partitioner is not None and partitions:
            partition = self.partitioner(element, key, value, topic, partitions)
        if timestamp is not None and timestamp < 0:  # Flink's wrapper: no timestamp for a negative one
            timestamp = None
        return KafkaProducerRecord(topic, partition, key, value, timestamp, headers)


class KafkaRecordSerializationSchemaBuilder:
    def __init__(self) -> None:
        self._kw: dict[str, Any] = {}

    def set_topic(self, topic: str) -> KafkaRecordSerializationSchemaBuilder:
        self._kw["topic"] = topic
        return self

    def set_topic_selector(self, selector: Callable[[Any], str]) -> KafkaRecordSerializationSchemaBuilder:
        self._kw["topic_selector"] = selector
        return self

    def set_value_serialization_schema(self, schema: Any) -> KafkaRecordSerializationSchemaBuilder:
        self._kw["value_serialization_schema"] = schema
        return self

    def set_key_serialization_schema(self, schema: Any) -> KafkaRecordSerializationSchemaBuilder:
        self._kw["key_serialization_schema"] = schema
        return self

    def set_partitioner(self, partitioner: Partitioner) -> KafkaRecordSerializationSchemaBuilder:
        self._kw["partitioner"] = partitioner
        return self

    def set_header_provider(
        self, fn: Callable[[Any], list[tuple[str, bytes | None]]]
    ) -> KafkaRecordSerializationSchemaBuilder:
        self._kw["header_provider"] = fn
        return self

    def build(self) -> KafkaRecordSerializationSchema:
        return KafkaRecordSerializationSchema(**self._kw)
