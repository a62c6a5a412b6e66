"""Which source subtask reads a Kafka partition: Flink's ``KafkaSourceEnumerator.getSplitOwner``.

Theory of operation
-------------------
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

from .kafka_common import KafkaTopicPartition

__all__ = ["java_string_hash", "split_owner"]


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
