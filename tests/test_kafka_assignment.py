"""Which Kafka partitions a source reads and which subtask reads each: Flink's subscribers and
``KafkaSourceEnumerator.getSplitOwner``, as pure logic (no broker).

Sources (apache/flink-connector-kafka, flink-connector-kafka/src/main/java/org/apache/flink/
connector/kafka/source/enumerator/KafkaSourceEnumerator.java ``getSplitOwner``; its tests in
src/test/java/.../source/enumerator/KafkaSourceEnumeratorTest.java and
.../enumerator/subscriber/KafkaSubscriberTest.java). The expected owners were
computed by Java itself (``String.hashCode`` and the formula, run with javac/java 2026-11-29).
"""

from __future__ import annotations

import pytest

from streamflow.common.serialization import SimpleStringSchema
from streamflow.connectors.kafka_assignment import java_string_hash, subscribed_partitions
from streamflow.connectors.kafka_common import KafkaRecordDeserializationSchema, KafkaTopicPartition
from streamflow.connectors.kafka_source import KafkaSource, split_owner

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


class _Cluster:
    """aiokafka ``ClusterMetadata`` as ``subscribed_partitions`` reads it: KafkaSubscriberTest's
    brokers (``topic1``, ``pattern-topic``: KafkaSourceTestEnv's NUM_PARTITIONS = 10 each)."""

    def __init__(self, topics: dict[str, int]) -> None:
        self._topics = topics

    def topics(self) -> set[str]:
        return set(self._topics)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self._topics.get(topic)
        return None if n is None else set(range(n))


CLUSTER = _Cluster({"topic1": 10, "pattern-topic": 10})


def _subscribed(**kw: object) -> list[KafkaTopicPartition]:
    deserializer = KafkaRecordDeserializationSchema.value_only(SimpleStringSchema())
    src = KafkaSource("127.0.0.1:1", deserializer=deserializer, **kw)  # type: ignore[arg-type]
    return subscribed_partitions(src, CLUSTER)


def _all(topic: str) -> list[KafkaTopicPartition]:
    return [KafkaTopicPartition(topic, p) for p in range(10)]


def test_topic_list_subscriber() -> None:
    """KafkaSubscriberTest#testTopicListSubscriber: every partition of the listed topics."""
    assert sorted(_subscribed(topics=["topic1", "pattern-topic"])) == _all("pattern-topic") + _all("topic1")


def test_non_existing_topic() -> None:
    """KafkaSubscriberTest#testNonExistingTopic: a listed topic the brokers do not have fails
    (Flink: UnknownTopicOrPartitionException), naming it."""
    with pytest.raises(ValueError, match=r"topics \['removed'\] of set_topics\(\) do not exist"):
        _subscribed(topics=["topic1", "removed"])


def test_topic_pattern_subscriber() -> None:
    """KafkaSubscriberTest#testTopicPatternSubscriber: ``pattern.*`` matches the whole name
    (``Matcher#matches``): ``pattern-topic`` only; ``topic`` alone matches no topic (not a
    search)."""
    assert _subscribed(topic_pattern="pattern.*") == _all("pattern-topic")
    assert _subscribed(topic_pattern="topic") == []


def test_partition_set_subscriber() -> None:
    """KafkaSubscriberTest#testPartitionSetSubscriber: exactly the given partitions (a set: a
    partition named twice is read once)."""
    partitions = _all("topic1") + _all("pattern-topic")
    partitions.remove(KafkaTopicPartition("topic1", 1))
    assert _subscribed(partitions=partitions + partitions[:2]) == sorted(partitions)


def test_non_existing_partition() -> None:
    """KafkaSubscriberTest#testNonExistingPartition: a partition the brokers do not have fails
    (Flink: "Partition '...' does not exist on Kafka brokers"), naming it."""
    with pytest.raises(ValueError, match=r"\['topic1-2147483647'\] of set_partitions\(\) do not exist"):
        _subscribed(partitions=[KafkaTopicPartition("topic1", 2**31 - 1)])
