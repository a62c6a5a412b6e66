"""Which Kafka partitions a source reads, and which subtask reads each: Flink's subscribers
(``KafkaSubscriber``) and ``KafkaSourceEnumerator.getSplitOwner``.

Theory of operation
-------------------
**Subscription.** A source subscribes to a topic list (``set_topics``: a topic the brokers do
not have fails the source, as Flink's ``TopicListSubscriber`` fails on
``UnknownTopicOrPartitionException``), to the topics whose whole name matches a regex
(``set_topic_pattern``: Flink's ``TopicPatternSubscriber``, ``Matcher#matches``; a topic
created later that matches is found by the next discovery), or to a fixed partition set
(``set_partitions``: a partition the brokers do not have fails the source, Flink's
``PartitionSetSubscriber``). :func:`subscribed_partitions` answers from one metadata snapshot.

**Ownership.**
Flink's enumerator hands partition ``p`` of topic ``t`` to reader
``(start(t) + p) % numReaders`` with ``start(t) = ((t.hashCode() * 31) & 0x7FFFFFFF) %
numReaders`` (apache/flink-connector-kafka ``.../source/enumerator/KafkaSourceEnumerator.java``):
a topic's partitions go round-robin from a start reader that depends on the topic, so the
partitions of several topics spread evenly. ``hashCode`` is Java's ``String.hashCode``: the
polynomial ``s[0]*31^(n-1) + ... + s[n-1]`` over the string's UTF-16 code units (a character
outside the Basic Multilingual Plane counts as its two surrogates), in 32-bit two's-complement
arithmetic. Only the low 31 bits of ``hashCode * 31`` survive the mask, and those depend only on
the low bits of the factors, so the product needs no wrap-around of its own here.

streamflow has no enumerator: every reader applies this rule to the partitions it lists and
keeps those it owns, restored ones included (``KafkaSourceReader.restore_positions``), so each
partition has exactly one owner at any parallelism and lands on the subtask Flink would give it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .kafka_common import KafkaTopicPartition

if TYPE_CHECKING:
    from .kafka_source import KafkaSource

__all__ = ["java_string_hash", "split_owner", "subscribed_partitions"]


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` of ``s`` (a signed 32-bit int)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def split_owner(tp: KafkaTopicPartition, parallelism: int) -> int:
    """The subtask of ``parallelism`` that owns ``tp`` (module doc)."""
    if parallelism <= 0:
        raise ValueError(f"kafka source: split_owner of {tp.topic}-{tp.partition} needs a positive "
                         f"parallelism, not {parallelism}")
    start = ((java_string_hash(tp.topic) * 31) & 0x7FFFFFFF) % parallelism
    return (start + tp.partition) % parallelism


def subscribed_partitions(src: KafkaSource, cluster: Any) -> list[KafkaTopicPartition]:
    """The partitions ``src`` subscribes to, sorted by topic and partition (module doc).
    ``cluster``: metadata with ``topics()`` and ``partitions_for_topic(topic)`` (None for a topic
    the brokers do not have), as aiokafka's ``ClusterMetadata``."""
    if src.partitions:
        missing = [f"{tp.topic}-{tp.partition}" for tp in src.partitions
                   if tp.partition not in (cluster.partitions_for_topic(tp.topic) or ())]
        if missing:
            raise ValueError(f"kafka source: partitions {sorted(missing)} of set_partitions() do not "
                             f"exist on the Kafka brokers at {src.bootstrap_servers}")
        return sorted(set(src.partitions))  # a set, as Flink's PartitionSetSubscriber takes
    if src.topic_pattern is not None:
        topics = sorted(t for t in cluster.topics() if src.topic_pattern.fullmatch(t))
    else:
        topics = src.topics
        unknown = [t for t in topics if cluster.partitions_for_topic(t) is None]
        if unknown:
            raise ValueError(f"kafka source: topics {unknown} of set_topics() do not exist on the "
                             f"Kafka brokers at {src.bootstrap_servers}")
    return [KafkaTopicPartition(topic, p) for topic in topics
            for p in sorted(cluster.partitions_for_topic(topic) or ())]
