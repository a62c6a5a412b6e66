"""Which subtask reads a Kafka partition: Flink's ``KafkaSourceEnumerator.getSplitOwner``, as pure
logic (no broker).

Sources (apache/flink-connector-kafka, flink-connector-kafka/src/main/java/org/apache/flink/
connector/kafka/source/enumerator/KafkaSourceEnumerator.java ``getSplitOwner``; its tests in
src/test/java/.../source/enumerator/KafkaSourceEnumeratorTest.java). The expected owners were
computed by Java itself (``String.hashCode`` and the formula, run with javac/java 2026-11-29).
"""

from __future__ import annotations

import pytest

from streamflow.connectors.kafka_assignment import java_string_hash
from streamflow.connectors.kafka_common import KafkaTopicPartition
from streamflow.connectors.kafka_source import split_owner

# topic -> (Java's String.hashCode, owner of partition 0 at 1, 2, 3, 4, 7 and 128 readers)
JAVA = {
    "topic": (110546223, [0, 1, 1, 1, 3, 49]),
    "pattern-topic": (1008656562, [0, 0, 2, 2, 5, 14]),
    "dynamic_topic": (846800175, [0, 1, 0, 1, 2, 49]),
    "polygenelubricants": (-2147483648, [0, 0, 0, 0, 0, 0]),  # Integer.MIN_VALUE
    "": (0, [0, 0, 0, 0, 0, 0]),
    "orders": (-1008770331, [0, 1, 0, 3, 3, 59]),
    "Ünïcödé-topic": (1199392823, [0, 1, 1, 1, 5, 41]),
    "emoji-\U0001F600": (1164511306, [0, 0, 2, 2, 3, 118]),  # one character, two UTF-16 units
    "a-very-long-topic-name-that-overflows-the-int-many-times-over": (-1028747765, [0, 1, 1, 1, 0, 85]),
}
READERS = [1, 2, 3, 4, 7, 128]


@pytest.mark.parametrize("topic", list(JAVA))
def test_java_string_hash(topic: str) -> None:
    assert java_string_hash(topic) == JAVA[topic][0]


@pytest.mark.parametrize("topic", list(JAVA))
def test_split_owner_is_flinks(topic: str) -> None:
    """getSplitOwner: ``startIndex = ((topic.hashCode() * 31) & 0x7FFFFFFF) % numReaders``, partition
    ``p`` to ``(startIndex + p) % numReaders``: partition 0 where Java puts it, the next ones
    round-robin from there."""
    for n, start in zip(READERS, JAVA[topic][1], strict=True):
        owners = [split_owner(KafkaTopicPartition(topic, p), n) for p in range(2 * n + 1)]
        assert owners == [(start + p) % n for p in range(2 * n + 1)], (topic, n)


def test_flinks_enumerator_test_topics_on_three_readers() -> None:
    """KafkaSourceEnumeratorTest's topics (``topic``, ``pattern-topic``: KafkaSourceTestEnv's
    NUM_PARTITIONS = 10 each; ``dynamic_topic``: 4) on its NUM_SUBTASKS = 3 readers: the
    assignment its ``getExpectedAssignments`` expects, spelled out."""
    got: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for topic, parts in (("topic", 10), ("pattern-topic", 10), ("dynamic_topic", 4)):
        for p in range(parts):
            got[split_owner(KafkaTopicPartition(topic, p), 3)].append(f"{topic}-{p}")
    assert got[0] == ["topic-2", "topic-5", "topic-8", "pattern-topic-1", "pattern-topic-4",
                      "pattern-topic-7", "dynamic_topic-0", "dynamic_topic-3"]
    assert got[1] == ["topic-0", "topic-3", "topic-6", "topic-9", "pattern-topic-2", "pattern-topic-5",
                      "pattern-topic-8", "dynamic_topic-1"]
    assert got[2] == ["topic-1", "topic-4", "topic-7", "pattern-topic-0", "pattern-topic-3",
                      "pattern-topic-6", "pattern-topic-9", "dynamic_topic-2"]


@pytest.mark.parametrize("parallelism", [1, 2, 3, 5, 8])
def test_every_partition_has_exactly_one_owner(parallelism: int) -> None:
    """The rule every reader applies on its own gives each partition one owner, and spreads a
    topic's partitions evenly (at most one apart)."""
    for topic in JAVA:
        counts = [0] * parallelism
        for p in range(13):
            owner = split_owner(KafkaTopicPartition(topic, p), parallelism)
            assert 0 <= owner < parallelism
            counts[owner] += 1
        assert max(counts) - min(counts) <= 1


def test_a_non_positive_parallelism_fails_naming_the_partition() -> None:
    with pytest.raises(ValueError, match="t-3 needs a positive parallelism, not 0"):
        split_owner(KafkaTopicPartition("t", 3), 0)
