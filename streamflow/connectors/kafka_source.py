"""KafkaSource with PyFlink's names: partitions assigned by the source, offsets in checkpoints.

The source's settings (topics, a pattern or fixed partitions; starting and stopping
offsets; the deserializer; consumer properties, ``partition.discovery.interval.ms``)
and PyFlink's ``KafkaSourceBuilder``. What each subtask does with them (assignment by
Flink's split-owner rule, fetching, positions in checkpoints, bounded mode, dead
letters) is the reader's: :mod:`.kafka_reader`, whose docstring is the theory of
operation; modelled on Flink's FLIP-27 ``KafkaSource``
(apache/flink-connector-kafka ``.../source/KafkaSource.java``).
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Iterable
from typing import Any

from .base import Source, SourceReader
from .kafka_common import (
    KafkaOffsetsInitializer,
    KafkaRecordDeserializationSchema,
    KafkaTopicPartition,
    consumer_config,
    warn_ignored_consumer_properties,
)
from .kafka_reader import QUEUE_LIMIT, KafkaSourceReader, split_owner
from .serialization import DeserializationSchema

__all__ = ["QUEUE_LIMIT", "KafkaSource", "KafkaSourceBuilder", "KafkaSourceReader", "split_owner"]

log = logging.getLogger("streamflow.connectors.kafka_source")

DEFAULT_DISCOVERY_MS = 300_000  # Flink's KafkaSourceOptions: 5 minutes (Kafka's metadata.max.age.ms)


class KafkaSource(Source):
    """Build with ``KafkaSource.builder()``; see the module docstring."""

    supports_parallelism = True

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        topics: Iterable[str] = (),
        topic_pattern: str | None = None,
        partitions: Iterable[KafkaTopicPartition] = (),
        group_id: str | None = None,
        starting_offsets: KafkaOffsetsInitializer | None = None,
        stopping_offsets: KafkaOffsetsInitializer | None = None,
        deserializer: KafkaRecordDeserializationSchema | None = None,
        properties: dict[str, str] | None = None,
        client_id_prefix: str | None = None,
        bounded: bool | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topics = list(topics)
        self.topic_pattern = re.compile(topic_pattern) if topic_pattern else None
        self.partitions = list(partitions)
        if sum(map(bool, (self.topics, self.topic_pattern, self.partitions))) != 1:
            raise ValueError("KafkaSource: give exactly one of set_topics, set_topic_pattern, set_partitions")
        if deserializer is None:
            raise ValueError("KafkaSource: set_value_only_deserializer() or set_deserializer() is required")
        self.group_id = group_id
        self.starting_offsets = starting_offsets or KafkaOffsetsInitializer.earliest()
        self.stopping_offsets = stopping_offsets
        # Flink's boundedness: BOUNDED by set_bounded; set_unbounded(stopping) stops each partition
        # at its stopping offset but stays CONTINUOUS_UNBOUNDED (discovery goes on)
        self.bounded = stopping_offsets is not None if bounded is None else bounded
        self.deserializer = deserializer
        self.properties = dict(properties or {})
        # Flink's parseAndSetRequiredProperties: without client.id.prefix, the group id, else
        # "KafkaSource-" and a random (signed 64-bit) long; each subtask's client is "<prefix>-<i>"
        if client_id_prefix is None:
            random_long = random.getrandbits(64) - (1 << 63)
            client_id_prefix = group_id if group_id is not None else f"KafkaSource-{random_long}"
        self.client_id_prefix = client_id_prefix
        interval = int(self.properties.pop("partition.discovery.interval.ms", DEFAULT_DISCOVERY_MS))
        # Flink: a non-positive interval disables discovery (one listing at start), as does bounded
        self.discovery_interval_ms = 0 if self.bounded or interval <= 0 else interval
        for role, initializer in (("starting", self.starting_offsets), ("stopping", stopping_offsets)):
            if initializer is not None and initializer.needs_group() and not group_id:
                # Flink's ReaderHandledOffsetsInitializer.validate, at build()
                raise ValueError(f"KafkaSource: committed_offsets() as {role} offsets needs set_group_id()")
        self.commit_offsets_on_checkpoint = _commit_on_checkpoint(
            self.properties.pop("commit.offsets.on.checkpoint", None), group_id)
        reset = self.properties.pop("auto.offset.reset", None)
        if reset is not None:  # Flink overrides it with the starting offsets' reset strategy
            log.warning("kafka source: property auto.offset.reset=%s has no effect: the starting offsets "
                        "initializer (%r) decides where to start, as in Flink", reset, self.starting_offsets)
        client_id = self.properties.pop("client.id", None)
        if client_id is not None:  # Flink's KafkaPartitionSplitReader sets it to "<prefix>-<subtask>"
            log.warning("kafka source: property client.id=%s has no effect: each subtask's consumer is "
                        "'%s-<subtask>', as in Flink; set client.id.prefix instead", client_id,
                        self.client_id_prefix)
        if str(self.properties.get("enable.auto.commit", "")).strip().lower() == "true" and not group_id:
            # Flink's KafkaSourceBuilder.sanityCheck
            raise ValueError("KafkaSource: property group.id is required when offset commit is enabled "
                             "(enable.auto.commit=true): call set_group_id()")
        consumer_config(bootstrap_servers, group_id, self.properties, "")  # a bad value fails build()
        warn_ignored_consumer_properties(self.properties)
        self.watermark_strategy: Any = None  # set by with_watermark_strategy (per-partition watermarks)
        self.watermark_interval_ms = 200

    def with_watermark_strategy(self, strategy: Any, interval_ms: int = 200) -> KafkaSource:
        """A copy generating watermarks per partition (``from_source`` calls this; see
        :mod:`.kafka_watermarks`)."""
        import copy

        source = copy.copy(self)
        source.watermark_strategy = strategy
        source.watermark_interval_ms = interval_ms
        return source

    @staticmethod
    def builder() -> KafkaSourceBuilder:
        return KafkaSourceBuilder()

    def get_produced_type(self) -> Any:
        """The type of its records, as Flink's source takes it from its value deserializer
        (a row type of the JSON/CSV row schemas), else ``None`` (undeclared)."""
        schema = getattr(self.deserializer, "value_schema", None)
        produced = getattr(schema, "get_produced_type", None)
        return produced() if callable(produced) else None

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        return KafkaSourceReader(self, subtask_index, parallelism)


def _commit_on_checkpoint(value: str | None, group_id: str | None) -> bool:
    """Flink's ``commit.offsets.on.checkpoint`` (default true; Java's ``Boolean.parseBoolean``):
    off without a group id, which an explicit ``true`` requires (``KafkaSourceBuilder.sanityCheck``)."""
    if value is None:
        return bool(group_id)
    enabled = str(value).strip().lower() == "true"
    if enabled and not group_id:
        raise ValueError("KafkaSource: property group.id is required when offset commit is enabled "
                         "(commit.offsets.on.checkpoint=true): call set_group_id()")
    return enabled


class KafkaSourceBuilder:
    """PyFlink's ``KafkaSourceBuilder``."""

    def __init__(self) -> None:
        self._kw: dict[str, Any] = {"properties": {}}
        self._bootstrap = ""

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSourceBuilder:
        self._bootstrap = bootstrap_servers
        return self

    def set_topics(self, *topics: str) -> KafkaSourceBuilder:
        flat: list[str] = []
        for t in topics:
            flat.extend([t] if isinstance(t, str) else t)
        self._kw["topics"] = flat
        return self

    def set_topic_pattern(self, topic_pattern: str) -> KafkaSourceBuilder:
        self._kw["topic_pattern"] = topic_pattern
        return self

    def set_partitions(self, partitions: Iterable[KafkaTopicPartition]) -> KafkaSourceBuilder:
        self._kw["partitions"] = list(partitions)
        return self

    def set_group_id(self, group_id: str) -> KafkaSourceBuilder:
        self._kw["group_id"] = group_id
        return self

    def set_client_id_prefix(self, prefix: str) -> KafkaSourceBuilder:
        self._kw["client_id_prefix"] = prefix
        return self

    def set_starting_offsets(self, initializer: KafkaOffsetsInitializer) -> KafkaSourceBuilder:
        self._kw["starting_offsets"] = initializer
        return self

    def set_bounded(self, stopping_offsets: KafkaOffsetsInitializer) -> KafkaSourceBuilder:
        self._kw["stopping_offsets"] = stopping_offsets
        self._kw["bounded"] = True
        return self

    def set_unbounded(self, stopping_offsets: KafkaOffsetsInitializer | None = None) -> KafkaSourceBuilder:
        """Flink's ``setUnbounded``: each partition stops at ``stopping_offsets``, the source stays
        unbounded (partition discovery goes on; streaming only)."""
        self._kw["stopping_offsets"] = stopping_offsets
        self._kw["bounded"] = False
        return self

    def set_value_only_deserializer(
        self, schema: DeserializationSchema | Callable[[bytes], Any]
    ) -> KafkaSourceBuilder:
        self._kw["deserializer"] = KafkaRecordDeserializationSchema.value_only(schema)
        return self

    def set_deserializer(
        self, deserializer: KafkaRecordDeserializationSchema | Callable[[Any], Any]
    ) -> KafkaSourceBuilder:
        if not isinstance(deserializer, KafkaRecordDeserializationSchema):
            deserializer = KafkaRecordDeserializationSchema.of(deserializer)
        self._kw["deserializer"] = deserializer
        return self

    def set_property(self, key: str, value: str) -> KafkaSourceBuilder:
        # as Flink's builder: bootstrap.servers and group.id are what their setters set
        if key == "bootstrap.servers":
            return self.set_bootstrap_servers(value)
        if key == "group.id":
            return self.set_group_id(value)
        if key == "client.id.prefix":
            return self.set_client_id_prefix(value)
        self._kw["properties"][key] = value
        return self

    def set_properties(self, props: dict[str, str]) -> KafkaSourceBuilder:
        for key, value in props.items():
            self.set_property(key, value)
        return self

    def build(self) -> KafkaSource:
        if not self._bootstrap:
            raise ValueError("KafkaSource: set_bootstrap_servers() is required")
        return KafkaSource(self._bootstrap, **self._kw)
