"""Kafka names shared by the source, the sink and replay: partitions, offsets initializers,
record deserialization with dead letters, delivery guarantees, client configuration."""

from __future__ import annotations

import enum
import itertools
import logging
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .files import DeadLetter
from .serialization import DeserializationSchema, as_deserializer

__all__ = [
    "DeliveryGuarantee",
    "KafkaDeadLetter",
    "KafkaOffsetResetStrategy",
    "KafkaOffsetsInitializer",
    "KafkaRecordDeserializationSchema",
    "KafkaTopicPartition",
]

log = logging.getLogger(__name__)


class DeliveryGuarantee(enum.Enum):
    """PyFlink's ``pyflink.datastream.connectors.base.DeliveryGuarantee``."""

    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"
    NONE = "none"


@dataclass(frozen=True, order=True)
class KafkaTopicPartition:
    """PyFlink's ``KafkaTopicPartition(topic, partition)``."""

    topic: str
    partition: int


@dataclass(frozen=True)
class KafkaDeadLetter(DeadLetter):
    """A Kafka record that could not be deserialized (``raw`` is its value, ``key`` its key)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None = None


class KafkaOffsetResetStrategy(enum.Enum):
    """Where to start when no committed or given offset exists (PyFlink's name)."""

    LATEST = "latest"
    EARLIEST = "earliest"
    NONE = "none"


class KafkaOffsetsInitializer:
    """Starting or stopping offsets (PyFlink's ``KafkaOffsetsInitializer`` factories)."""

    def __init__(self, kind: str, *, timestamp: int | None = None,
                 offsets: Mapping[KafkaTopicPartition, int] | None = None,
                 reset: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST) -> None:
        self.kind = kind
        self.timestamp_ms = timestamp
        self.given = dict(offsets or {})
        self.reset = reset

    @staticmethod
    def earliest() -> KafkaOffsetsInitializer:
        return KafkaOffsetsInitializer("earliest")

    @staticmethod
    def latest() -> KafkaOffsetsInitializer:
        # Flink (since FLINK-28303): LatestOffsetsInitializer, the end offsets resolved up front
        return KafkaOffsetsInitializer("latest", reset=KafkaOffsetResetStrategy.LATEST)

    @staticmethod
    def committed_offsets(
        offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE,
    ) -> KafkaOffsetsInitializer:
        return KafkaOffsetsInitializer("committed", reset=offset_reset_strategy)

    @staticmethod
    def timestamp(timestamp: int) -> KafkaOffsetsInitializer:
        """The first offset whose record timestamp is >= ``timestamp`` (ms); the end if none."""
        return KafkaOffsetsInitializer("timestamp", timestamp=int(timestamp))

    @staticmethod
    def offsets(
        offsets: Mapping[KafkaTopicPartition, int],
        offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST,
    ) -> KafkaOffsetsInitializer:
        """Given offsets; a partition not named starts at the group's committed offset (with a
        group id), else by ``offset_reset_strategy``, as Flink's ``SpecifiedOffsetsInitializer``."""
        return KafkaOffsetsInitializer("offsets", offsets=offsets, reset=offset_reset_strategy)

    def needs_group(self) -> bool:
        return self.kind == "committed"

    def uses_group(self) -> bool:
        """Whether resolving reads the group's committed offsets (``committed_offsets()``, and
        ``offsets()`` for the partitions it does not name): its consumer needs the group id."""
        return self.kind in ("committed", "offsets")

    def auto_offset_reset(self) -> str:
        """Where the consumer goes when a position is out of range (records deleted by retention,
        or an offset past the end): Flink's ``getAutoOffsetResetStrategy`` of this initializer as
        starting offsets, which Flink's builder sets as the consumer's ``auto.offset.reset``."""
        if self.kind in ("latest", "timestamp"):
            return "latest"
        if self.kind == "earliest":
            return "earliest"
        return self.reset.value  # committed_offsets(strategy), offsets(..., strategy)

    def __repr__(self) -> str:
        return f"KafkaOffsetsInitializer.{self.kind}()"

    async def resolve(self, consumer: Any, tps: Sequence[Any], group_id: str | None) -> dict[Any, int]:
        """Offsets for aiokafka ``TopicPartition`` objects, asking the broker as needed."""
        if not tps:
            return {}
        if self.kind == "earliest":
            return dict(await consumer.beginning_offsets(list(tps)))
        if self.kind == "latest":
            return dict(await consumer.end_offsets(list(tps)))
        if self.kind == "timestamp":
            # Flink's TimestampOffsetsInitializer: the end offsets first, so a record at or after the
            # timestamp appended during the lookup is read, not skipped
            ends = await consumer.end_offsets(list(tps))
            found = await consumer.offsets_for_times({tp: self.timestamp_ms for tp in tps})
            return {tp: (found[tp].offset if found.get(tp) is not None else ends[tp]) for tp in tps}
        out: dict[Any, int] = {}
        missing = []
        for tp in tps:
            off: int | None
            if self.kind == "committed":
                off = await consumer.committed(tp)
            else:
                off = self.given.get(KafkaTopicPartition(tp.topic, tp.partition))
            if off is None or off < 0:
                missing.append(tp)
            else:
                out[tp] = int(off)
        if missing and self.kind == "offsets" and group_id:
            # Flink's SpecifiedOffsetsInitializer: a partition not named starts at the group's
            # committed offset, and only one without it by the reset strategy
            for tp in list(missing):
                off = await consumer.committed(tp)
                if off is not None and off >= 0:
                    out[tp] = int(off)
                    missing.remove(tp)
        if missing:
            if self.reset is KafkaOffsetResetStrategy.NONE:
                names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
                raise ValueError(f"kafka source: no {self.kind} offset for {names} (group {group_id!r}) "
                                 "and the reset strategy is NONE")
            fallback = (consumer.beginning_offsets if self.reset is KafkaOffsetResetStrategy.EARLIEST
                        else consumer.end_offsets)
            out.update(await fallback(missing))
        return out


class KafkaRecordDeserializationSchema:
    """How a Kafka record becomes an element: its value only, or a function of the whole record.

    ``of(fn)``: ``fn`` gets aiokafka's ``ConsumerRecord`` (``key``, ``value``, ``headers``,
    ``topic``, ``partition``, ``offset``, ``timestamp``) and returns the element.
    """

    def __init__(self, value_schema: DeserializationSchema | None,
                 record_fn: Callable[[Any], Any] | None, name: str) -> None:
        self.value_schema = value_schema
        self.record_fn = record_fn
        self.name = name

    @staticmethod
    def value_only(
        schema: DeserializationSchema | Callable[[bytes], Any],
    ) -> KafkaRecordDeserializationSchema:
        s = as_deserializer(schema)
        return KafkaRecordDeserializationSchema(s, None, type(s).__name__)

    @staticmethod
    def of(fn: Callable[[Any], Any]) -> KafkaRecordDeserializationSchema:
        return KafkaRecordDeserializationSchema(None, fn, getattr(fn, "__name__", "record deserializer"))

    def deserialize_batch(self, msgs: Sequence[Any]) -> tuple[list, Sequence[Any], list[KafkaDeadLetter]]:
        """(elements, the records they came from, dead letters); one comprehension when all succeed.
        A record deserialized to ``None`` is skipped, as Flink collects only non-null results
        (``DeserializationSchema#deserialize(message, out)``)."""
        try:
            if self.value_schema is not None:
                batch = self.value_schema.deserialize_batch([m.value for m in msgs])
            else:
                fn = self.record_fn
                assert fn is not None
                batch = [fn(m) for m in msgs]
            if len(batch) == len(msgs):  # (a schema's batch may drop what it skips: then one by one)
                if ((self.value_schema is not None and self.value_schema.never_none)
                        or not any(map(operator.is_, batch, itertools.repeat(None)))):
                    return batch, msgs, []
                return ([e for e in batch if e is not None],
                        [m for m, e in zip(msgs, batch, strict=True) if e is not None], [])
        except Exception:
            pass  # a bad record in the batch: the loop below finds it and makes a dead letter
        one: Callable[[Any], Any] = (
            (lambda m: self.value_schema.deserialize(m.value)) if self.value_schema is not None  # type: ignore[union-attr]
            else self.record_fn  # type: ignore[assignment]
        )
        out: list[Any] = []
        kept: list[Any] = []
        letters: list[KafkaDeadLetter] = []
        for m in msgs:
            try:
                element = one(m)
                if element is not None:
                    out.append(element)
                    kept.append(m)
            except Exception as exc:
                letters.append(KafkaDeadLetter(
                    source=f"kafka {m.topic}", location=f"{m.topic}-{m.partition}@{m.offset}",
                    raw=m.value if m.value is not None else b"", error=f"{type(exc).__name__}: {exc}",
                    topic=m.topic, partition=m.partition, offset=m.offset, key=m.key,
                ))
        return out, kept, letters


# Kafka client property names (Flink passes them through) mapped to aiokafka keyword arguments.
def _java_bool(value: str) -> bool:
    """Java's ``Boolean.parseBoolean``, as Kafka's client reads a boolean property."""
    return str(value).strip().lower() == "true"


_CONSUMER_PROPS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "isolation.level": ("isolation_level", str),
    "enable.auto.commit": ("enable_auto_commit", _java_bool),  # Flink passes it on (needs group.id)
    "auto.commit.interval.ms": ("auto_commit_interval_ms", int),
    "client.id": ("client_id", str),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", int),
    "fetch.min.bytes": ("fetch_min_bytes", int),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "connections.max.idle.ms": ("connections_max_idle_ms", int),
    "security.protocol": ("security_protocol", str),
    "sasl.mechanism": ("sasl_mechanism", str),
}


def _acks(value: str) -> int | str:
    if value in ("all", "-1"):
        return "all"
    if value in ("0", "1"):
        return int(value)
    raise ValueError(f"kafka sink: acks must be all, -1, 0 or 1, got {value!r}")


def _compression(value: str) -> str | None:
    return None if value == "none" else value


# Producer properties applied to aiokafka (Flink passes the same names to its Kafka client).
_PRODUCER_PROPS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "acks": ("acks", _acks),
    "client.id": ("client_id", str),
    "batch.size": ("max_batch_size", int),
    "max.request.size": ("max_request_size", int),
    "compression.type": ("compression_type", _compression),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
    "connections.max.idle.ms": ("connections_max_idle_ms", int),
    "transaction.timeout.ms": ("transaction_timeout_ms", int),
    "security.protocol": ("security_protocol", str),
    "sasl.mechanism": ("sasl_mechanism", str),
}

# Producer properties a Flink program may set that mean nothing to this sink, and why.
_PRODUCER_PROPS_WITHOUT_EFFECT = {
    "linger.ms": "the sink hands the producer whole batches (the engine's: up to the batch size, "
                 "flushed when a source pauses), sent at once",
}


# transaction.timeout.ms of EXACTLY_ONCE: Flink's KafkaSinkBuilder sets 1 hour, which brokers refuse
# unless their transaction.max.timeout.ms is raised (Apache Kafka's default and the test broker's
# is 15 minutes: InvalidTransactionTimeout at init); this is the largest a default broker accepts
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000


def producer_config(props: Mapping[str, str], exactly_once: bool) -> dict[str, Any]:
    """aiokafka keyword arguments for the Kafka producer properties ``props``. Any other
    property is logged as ignored, as Kafka's producer warns about a config it does not know
    (PyFlink's examples pass ``group.id`` to the sink); an ``acks`` exactly-once cannot honour
    is refused (at ``build()``); exactly-once's ``transaction.timeout.ms`` defaults to
    ``DEFAULT_TRANSACTION_TIMEOUT_MS``."""
    kw: dict[str, Any] = {}
    for key in sorted(set(props) & set(_PRODUCER_PROPS_WITHOUT_EFFECT)):
        log.info("kafka sink: property %s has no effect: %s", key, _PRODUCER_PROPS_WITHOUT_EFFECT[key])
    ignored = sorted(set(props) - set(_PRODUCER_PROPS) - set(_PRODUCER_PROPS_WITHOUT_EFFECT))
    if ignored:
        log.warning("kafka sink: properties %s are not producer settings streamflow applies: ignored "
                    "(applied: %s)", ignored, ", ".join(sorted(_PRODUCER_PROPS)))
    for key, value in props.items():
        if key in _PRODUCER_PROPS:
            name, conv = _PRODUCER_PROPS[key]
            kw[name] = conv(str(value))
    if exactly_once and kw.get("acks", "all") != "all":
        raise ValueError(f"kafka sink: EXACTLY_ONCE needs acks=all (transactions are idempotent), "
                         f"got acks={props['acks']!r}")
    if exactly_once:
        # a transaction stays open for a checkpoint interval and a broker aborts one older than its
        # timeout: aiokafka's 60 s failed every job checkpointing less often than once a minute
        kw.setdefault("transaction_timeout_ms", DEFAULT_TRANSACTION_TIMEOUT_MS)
    return kw


def consumer_config(bootstrap: str, group_id: str | None, props: Mapping[str, str],
                    client_id: str, auto_offset_reset: str = "earliest") -> dict[str, Any]:
    kw: dict[str, Any] = {
        "bootstrap_servers": bootstrap, "group_id": group_id, "enable_auto_commit": False,
        "auto_offset_reset": auto_offset_reset, "client_id": client_id,
        "max_partition_fetch_bytes": 4 << 20, "fetch_max_wait_ms": 100,
    }
    for key, value in props.items():
        if key in _CONSUMER_PROPS:  # any other is ignored: KafkaSource.build() warns once
            name, conv = _CONSUMER_PROPS[key]
            kw[name] = conv(value)
    return kw


def warn_ignored_consumer_properties(props: Mapping[str, str]) -> None:
    """Logs the properties the source's consumer does not take: ignored with a warning, as
    Kafka's consumer warns about a config it does not know ("supplied but isn't a known
    config"; Flink passes every property on to it)."""
    ignored = sorted(set(props) - set(_CONSUMER_PROPS))
    if ignored:
        log.warning("kafka source: properties %s are not consumer settings streamflow applies: ignored "
                    "(applied: %s; the source's own: client.id.prefix, commit.offsets.on.checkpoint, "
                    "partition.discovery.interval.ms)", ignored, ", ".join(sorted(_CONSUMER_PROPS)))
