"""More of Flink's Kafka source tests, ported at the reader level on the session's test broker.

Sources (apache/flink-connector-kafka, flink-connector-kafka/src/test/java/org/apache/flink/
connector/kafka/source/): ``reader/KafkaSourceReaderTest``, ``KafkaSourceITCase``, and the rule of
``split/KafkaPartitionSplitState#toKafkaPartitionSplit`` (a split's stopping offset is part of
its checkpointed state). Volumes are small (the test broker rewrites one JSON file per change).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from test_kafka_flink import RECORDS_PER_SPLIT, committed, source, topic_name, two_partitions

import streamflow as sf
from streamflow.connectors.base import END
from streamflow.datastream.connectors.kafka import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaRecordDeserializationSchema,
    KafkaSource,
    KafkaSourceBuilder,
    KafkaTopicPartition,
)
from streamflow.testing.kafka_broker import create_topic, produce


async def read_until(reader: Any, count: int | None) -> list:
    """Poll ``reader`` (one record per poll) until ``count`` records (None: until its END)."""
    out: list = []
    async with asyncio.timeout(20):
        while count is None or len(out) < count:
            batch = reader.poll_batch(1)
            if batch is END:
                assert count is None, f"the reader ended after {out}"
                return out
            if isinstance(batch, tuple):
                out.extend(batch[0])
            else:
                await asyncio.sleep(0.01)
    return out


FAR_FUTURE_MS = 4_000_000_000_000  # no record has a timestamp at or after it: stop at the end


@pytest.mark.parametrize("stopping", ["latest", "timestamp"])
async def test_a_bounded_split_keeps_its_stopping_offset_across_a_restore(kafka, stopping):
    """Flink resolves ``latest()`` and ``timestamp(t)`` stopping offsets once, when a partition is
    first assigned (``KafkaSourceEnumerator.initializePartitionSplits``), and the split keeps that
    offset in every checkpoint (``KafkaPartitionSplitState#toKafkaPartitionSplit``). A bounded job
    restored in the middle therefore ends where it would have ended without the failure: records
    appended to the topic since its start are not read (KafkaSourceITCase's bounded reads, with
    a restore in the middle)."""
    bs = kafka.bootstrap_servers
    topic = await two_partitions(bs, f"stop-{stopping}")
    stop = (KafkaOffsetsInitializer.latest() if stopping == "latest"
            else KafkaOffsetsInitializer.timestamp(FAR_FUTURE_MS))
    src = source(bs, topic).set_bounded(stop).build()
    reader = src.create_reader(0, 1)
    await reader.start(lambda: None)
    try:
        first = await read_until(reader, 3)
        position = reader.snapshot_for_checkpoint(1)
    finally:
        await reader.close()
    for p in range(2):  # written after the bounded job started: beyond its stopping offsets
        await produce(bs, topic, [f"{p}:late{i}".encode() for i in range(2)], partition=p)
    restored = src.create_reader(0, 1)
    restored.restore_positions([position])
    await restored.start(lambda: None)
    try:
        rest = await read_until(restored, None)
    finally:
        await restored.close()
    expected = [f"{p}:{i}" for p in range(2) for i in range(RECORDS_PER_SPLIT)]
    assert sorted(first + rest) == expected


async def test_a_checkpoint_completing_during_an_earlier_commit_is_committed_too(kafka):
    """KafkaSourceReaderTest#testOffsetCommitOnCheckpointComplete, with the notifications close
    together: Flink's reader hands every completed checkpoint's offsets to its fetcher, which
    commits them in turn (``KafkaSourceFetcherManager#commitOffsets``); none is dropped because an
    earlier commit is still running, so the group ends at the last completed checkpoint."""
    bs = kafka.bootstrap_servers
    topic = await two_partitions(bs, "commit-overlap")
    group = f"g-{topic}"
    reader = source(bs, topic).set_group_id(group).build().create_reader(0, 1)
    await reader.start(lambda: None)
    try:
        await read_until(reader, 2)
        reader.snapshot_for_checkpoint(1)
        await read_until(reader, 2 * RECORDS_PER_SPLIT - 2)
        reader.snapshot_for_checkpoint(2)
        reader.notify_checkpoint_complete(1)
        reader.notify_checkpoint_complete(2)  # checkpoint 1's commit has not even started
        expected = {0: RECORDS_PER_SPLIT, 1: RECORDS_PER_SPLIT}
        deadline = time.monotonic() + 5
        while (got := await committed(bs, group, topic)) != expected and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert got == expected
    finally:
        await reader.close()


class _WithTimestamp(sf.ProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield (value, ctx.timestamp())


async def run_job(src: KafkaSource, parallelism: int = 1, stamp: bool = False) -> list:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    out: list = []
    stream = env.from_source(src, sf.WatermarkStrategy.no_watermarks(), "kafka")
    (stream.process(_WithTimestamp()) if stamp else stream).add_sink(out.append)
    await asyncio.wait_for((await env.execute_async("flink-source")).get_job_execution_result(), 60)
    return out


def bounded(bs: str, topic: str) -> KafkaSourceBuilder:
    return source(bs, topic).set_bounded(KafkaOffsetsInitializer.latest())


async def test_timestamp(kafka):
    """KafkaSourceITCase#testTimestamp: each record's element timestamp is its Kafka timestamp."""
    bs, topic = kafka.bootstrap_servers, topic_name("timestamp")
    await create_topic(bs, topic, 1)
    now = int(time.time() * 1000)
    await produce(bs, topic, [b"0", b"1", b"2"], keys=[b"key0", b"key1", b"key2"],
                  timestamps=[now + 1, now + 2, now + 3])
    out = await run_job(bounded(bs, topic).build(), stamp=True)
    assert out == [("0", now + 1), ("1", now + 2), ("2", now + 3)]


async def test_value_only_deserializer(kafka):
    """KafkaSourceITCase#testValueOnlyDeserializer: the values alone, through a value-only
    deserializer (here a callable on the value's bytes), from two topics."""
    bs = kafka.bootstrap_servers
    topics = [topic_name("value-only") for _ in range(2)]
    for topic in topics:
        await create_topic(bs, topic, 2)
        for p in range(2):
            await produce(bs, topic, [str(v).encode() for v in range(p, RECORDS_PER_SPLIT)], partition=p)
    src = (KafkaSource.builder().set_bootstrap_servers(bs).set_topics(*topics)
           .set_value_only_deserializer(lambda raw: int(raw))
           .set_bounded(KafkaOffsetsInitializer.latest()).build())
    out = await run_job(src)
    assert sum(out) == 2 * sum(v for p in range(2) for v in range(p, RECORDS_PER_SPLIT))


async def test_record_deserializer_sees_key_headers_timestamp_and_position(kafka):
    """KafkaSourceITCase's ``TestingKafkaRecordDeserializationSchema`` and
    KafkaRecordDeserializationSchemaTest#testKafkaDeserializationSchemaWrapper: a record
    deserializer gets the whole Kafka record (key, value, headers, timestamp, topic, partition,
    offset)."""
    from aiokafka import AIOKafkaProducer

    bs, topic = kafka.bootstrap_servers, topic_name("record")
    await create_topic(bs, topic, 1)
    producer = AIOKafkaProducer(bootstrap_servers=bs)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"v0", key=b"k0", partition=0, timestamp_ms=1000,
                                     headers=[("h", b"x"), ("h", b"y")])
        await producer.send_and_wait(topic, None, key=b"k1", partition=0, timestamp_ms=2000)
    finally:
        await producer.stop()

    def whole(r: Any) -> tuple:
        return (r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, list(r.headers))

    src = bounded(bs, topic).set_deserializer(KafkaRecordDeserializationSchema.of(whole)).build()
    assert await run_job(src) == [(topic, 0, 0, 1000, b"k0", b"v0", [("h", b"x"), ("h", b"y")]),
                                  (topic, 0, 1, 2000, b"k1", None, [])]


@pytest.mark.parametrize(("partitions", "filled", "parallelism", "group"), [
    (1, 0, 1, True),  # testConsumingEmptyTopic
    (3, 2, 1, True),  # testConsumingTopicWithEmptyPartitions
    (2, 2, 3, True),  # testRedundantParallelism: one reader owns no partition and ends
    (2, 2, 1, False),  # testBasicReadWithoutGroupId
], ids=["empty-topic", "empty-partitions", "redundant-parallelism", "without-group-id"])
async def test_bounded_reads(kafka, partitions, filled, parallelism, group):
    """KafkaSourceITCase#testConsumingEmptyTopic, #testConsumingTopicWithEmptyPartitions,
    #testRedundantParallelism, #testBasicReadWithoutGroupId: a source bounded by ``latest()``
    reads every record there is and the job ends."""
    bs, topic = kafka.bootstrap_servers, topic_name("bounded")
    await create_topic(bs, topic, partitions)
    for p in range(filled):
        await produce(bs, topic, [f"{p}:{i}".encode() for i in range(RECORDS_PER_SPLIT)], partition=p)
    builder = bounded(bs, topic)
    if group:
        builder = builder.set_group_id(f"g-{topic}")
    out = await run_job(builder.build(), parallelism)
    assert sorted(out) == [f"{p}:{i}" for p in range(filled) for i in range(RECORDS_PER_SPLIT)]


async def test_specific_offsets_initializer(kafka):
    """OffsetsInitializerTest#testSpecificOffsetsInitializer: ``offsets({...})`` starts a partition
    it names at the given offset; one it does not name at the group's committed offset, and only
    one without a committed offset by the reset strategy (EARLIEST)
    (``SpecifiedOffsetsInitializer#getPartitionOffsets``)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.structs import OffsetAndMetadata

    bs = kafka.bootstrap_servers
    topic, other = await two_partitions(bs, "specific"), await two_partitions(bs, "specific-other")
    group = f"g-{topic}"
    consumer = AIOKafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(other, 0)]
        consumer.assign(tps)
        await consumer.commit({tps[0]: OffsetAndMetadata(3, "")})
        initializer = KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 1): 1})
        offsets = await initializer.resolve(consumer, tps, group)
    finally:
        await consumer.stop()
    assert offsets == {tps[0]: 3, tps[1]: 1, tps[2]: 0}


class _RacingConsumer:
    """A partition's log as a consumer sees it while a record with timestamp 2001 is appended at
    offset 5 between two calls: first no record at or after the timestamp, then the new end."""

    def __init__(self) -> None:
        self.appended = False

    async def end_offsets(self, tps: list) -> dict:
        return {tp: 6 if self.appended else 5 for tp in tps}

    async def offsets_for_times(self, query: dict) -> dict:
        found = {tp: None for tp in query}
        self.appended = True
        return found


async def test_timestamp_offsets_initializer_takes_the_end_offsets_first():
    """OffsetsInitializerTest#testTimestampOffsetsInitializer and Flink's
    ``TimestampOffsetsInitializer``: the end offsets are read before the offsets for the timestamp,
    so a partition without a record at or after it starts at the end seen *before* the lookup,
    and a record appended meanwhile is read, not skipped."""
    from aiokafka import TopicPartition

    tp = TopicPartition("t", 0)
    offsets = await KafkaOffsetsInitializer.timestamp(2001).resolve(_RacingConsumer(), [tp], None)
    assert offsets == {tp: 5}


async def test_kafka_source_metrics(kafka):
    """KafkaSourceReaderTest#testKafkaSourceMetrics (KafkaSourceReaderMetrics' names): per
    partition, ``currentOffset`` is the offset of the last record emitted and
    ``committedOffset`` the last offset committed to the group (both -1 until there is one);
    ``commitsSucceeded`` counts the commits of completed checkpoints."""
    from streamflow.runtime.metrics import MetricGroup

    bs = kafka.bootstrap_servers
    topic = await two_partitions(bs, "metrics")
    registry: dict[str, Any] = {}
    reader = source(bs, topic).set_group_id(f"g-{topic}").build().create_reader(0, 1)
    reader.set_metric_group(MetricGroup("src[0]", registry))
    await reader.start(lambda: None)

    def metric(name: str) -> Any:
        found = registry[f"src[0].KafkaSourceReader.{name}"]
        return found.get_value() if hasattr(found, "get_value") else found.get_count()

    def per_partition(name: str) -> list:
        return [metric(f"topic.{topic}.partition.{p}.{name}") for p in range(2)]

    try:
        assert per_partition("currentOffset") == [-1, -1]
        await read_until(reader, 2 * RECORDS_PER_SPLIT)
        assert per_partition("currentOffset") == [RECORDS_PER_SPLIT - 1] * 2
        assert per_partition("committedOffset") == [-1, -1]
        reader.snapshot_for_checkpoint(15213)
        reader.notify_checkpoint_complete(15213)
        async with asyncio.timeout(5):
            while per_partition("committedOffset") != [RECORDS_PER_SPLIT] * 2:
                await asyncio.sleep(0.02)
        assert metric("commitsSucceeded") > 0 and metric("commitsFailed") == 0
        assert per_partition("pendingRecords") == [0, 0]
    finally:
        await reader.close()


@pytest.mark.parametrize("bounded", [False, True], ids=["unbounded-with-stops", "bounded"])
async def test_commit_offsets_without_alive_fetchers(kafka, bounded):
    """KafkaSourceReaderTest#testCommitOffsetsWithoutAliveFetchers: every split reached its
    stopping offset and the fetch loop has ended; a checkpoint completed after that still
    commits the finished splits' offsets to the group."""
    bs = kafka.bootstrap_servers
    topic = await two_partitions(bs, "no-fetchers")
    group = f"g-{topic}"
    stop = KafkaOffsetsInitializer.latest()
    # unbounded: discovery off, Flink's notifyNoMoreSplits (the fetch loop ends once all are done)
    builder = source(bs, topic).set_group_id(group).set_property("partition.discovery.interval.ms", "0")
    builder = builder.set_bounded(stop) if bounded else builder.set_unbounded(stop)
    reader = builder.build().create_reader(0, 1)
    await reader.start(lambda: None)
    try:
        await read_until(reader, 2 * RECORDS_PER_SPLIT)
        async with asyncio.timeout(5):
            while not reader._task.done():
                await asyncio.sleep(0.01)
        reader.snapshot_for_checkpoint(100)
        reader.notify_checkpoint_complete(100)
        expected = {0: RECORDS_PER_SPLIT, 1: RECORDS_PER_SPLIT}
        deadline = time.monotonic() + 5
        while (got := await committed(bs, group, topic)) != expected and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert got == expected
    finally:
        await reader.close()


@pytest.mark.parametrize(("initializer", "commits"), [
    (KafkaOffsetsInitializer.earliest(), False),
    (KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST), False),
    (KafkaOffsetsInitializer.latest(), True),
], ids=["earliest", "committed", "latest"])
async def test_not_commit_offsets_for_uninitialized_splits(kafka, initializer, commits):
    """KafkaSourceReaderTest#testNotCommitOffsetsForUninitializedSplits: a split at
    EARLIEST_OFFSET (Flink's reader resolves ``earliest()`` and ``committed_offsets()`` itself)
    has no offset to commit until its first record: the checkpoint's offsets to commit are
    empty. ``latest()`` the enumerator resolves to the end offset (``LatestOffsetsInitializer``),
    which is committed. The mark survives a restore (Flink's split keeps its sentinel), and a
    record read clears it."""
    bs, topic = kafka.bootstrap_servers, topic_name("uninitialized")
    await create_topic(bs, topic, 1)
    group = f"g-{topic}"
    src = source(bs, topic).set_group_id(group).set_starting_offsets(initializer).build()
    expected = {(topic, 0): 0} if commits else {}
    reader = src.create_reader(0, 1)
    await reader.start(lambda: None)
    try:
        position = reader.snapshot_for_checkpoint(1234)
        assert reader._to_commit[1234] == expected
    finally:
        await reader.close()
    restored = src.create_reader(0, 1)
    restored.restore_positions([position])
    await restored.start(lambda: None)
    try:
        restored.snapshot_for_checkpoint(1)
        assert restored._to_commit[1] == expected
        await produce(bs, topic, [b"x"])
        assert await read_until(restored, 1) == ["x"]
        restored.snapshot_for_checkpoint(2)
        assert restored._to_commit[2] == {(topic, 0): 1}
        restored.notify_checkpoint_complete(2)
        deadline = time.monotonic() + 5
        while (got := await committed(bs, group, topic, 1)) != {0: 1} and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert got == {0: 1}
    finally:
        await restored.close()


def test_enable_auto_commit_without_group_id_fails_at_build(caplog: pytest.LogCaptureFixture):
    """KafkaSourceBuilderTest#testEnableAutoCommitWithoutGroupId: ``enable.auto.commit=true``
    without a group id fails ``build()`` (Flink's ``sanityCheck``); a property the consumer
    does not take is ignored with a warning at build, as Kafka's consumer warns about a config
    it does not know (PyFlink's test_set_properties sets ``test_property``)."""
    def builder() -> KafkaSourceBuilder:
        return (KafkaSource.builder().set_bootstrap_servers("localhost:9").set_topics("t")
                .set_value_only_deserializer(lambda raw: raw))

    with pytest.raises(ValueError, match=r"group\.id is required when offset commit is enabled"):
        builder().set_property("enable.auto.commit", "true").build()
    with caplog.at_level(logging.WARNING, logger="streamflow"):
        built = builder().set_property("no.such.property", "1").build()
    assert built.properties["no.such.property"] == "1"
    assert "['no.such.property'] are not consumer settings streamflow applies: ignored" in caplog.text


async def test_enable_auto_commit_commits_the_consumer_position(kafka):
    """Flink passes ``enable.auto.commit=true`` (with a group id) to its consumer, which then
    commits its positions every ``auto.commit.interval.ms`` without any checkpoint."""
    bs = kafka.bootstrap_servers
    topic = await two_partitions(bs, "auto-commit")
    group = f"g-{topic}"
    reader = (source(bs, topic).set_group_id(group).set_property("enable.auto.commit", "true")
              .set_property("auto.commit.interval.ms", "100").build().create_reader(0, 1))
    await reader.start(lambda: None)
    try:
        await read_until(reader, 2 * RECORDS_PER_SPLIT)
        expected = {0: RECORDS_PER_SPLIT, 1: RECORDS_PER_SPLIT}
        deadline = time.monotonic() + 5
        while (got := await committed(bs, group, topic)) != expected and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert got == expected
    finally:
        await reader.close()


@pytest.mark.parametrize(("bounded", "interval_ms"), [(False, 300_000), (True, 0)],
                         ids=["default", "bounded"])
def test_default_partition_discovery(bounded, interval_ms):
    """KafkaSourceBuilderTest#testDefaultPartitionDiscovery / #testPeriodPartitionDiscovery: an
    unbounded source discovers partitions every 5 minutes by default (``KafkaSourceOptions``:
    Kafka's ``metadata.max.age.ms``); a bounded one never (0 here: off)."""
    builder = (KafkaSource.builder().set_bootstrap_servers("localhost:9").set_topics("t")
               .set_value_only_deserializer(lambda raw: raw))
    if bounded:
        builder = builder.set_bounded(KafkaOffsetsInitializer.latest())
    assert builder.build().discovery_interval_ms == interval_ms


def test_specific_offsets_initializer_on_the_spark_engine(kafka):
    """OffsetsInitializerTest#testSpecificOffsetsInitializer as the Spark engine resolves
    starting offsets (``spark.kafka_offsets.resolve``): a partition ``offsets({...})`` does not
    name starts at the group's committed offset there too."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.structs import OffsetAndMetadata

    from streamflow.spark.kafka_offsets import resolve, spec

    bs = kafka.bootstrap_servers

    async def setup() -> tuple[str, str]:
        topic = await two_partitions(bs, "spark-specific")
        group = f"g-{topic}"
        consumer = AIOKafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "")})
        finally:
            await consumer.stop()
        return topic, group

    topic, group = asyncio.run(setup())
    initializer = KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 1): 1})
    found = resolve({"bootstrap": bs, "group": group}, spec(initializer), [(topic, 0), (topic, 1)])
    assert found == {f"{topic}:0": 3, f"{topic}:1": 1}


async def _read_stamped(reader: Any, count: int) -> list:
    """``count`` elements with their timestamps, one per poll, each with the position after it."""
    out: list = []
    async with asyncio.timeout(20):
        while len(out) < count:
            batch = reader.poll_batch(1)
            if isinstance(batch, tuple):
                out.extend((r, ts, reader.snapshot_position()[0][2]) for r, ts in zip(*batch, strict=True))
            else:
                await asyncio.sleep(0.01)
    return out


@pytest.mark.parametrize("schema", ["callable", "json-ignore-parse-errors", "json-row-ignore-parse-errors"])
async def test_a_record_the_deserializer_makes_nothing_of_is_skipped(kafka, schema):
    """Flink's ``DeserializationSchema#deserialize(message, out)`` collects only a non-null result
    (``KafkaValueOnlyDeserializationSchemaWrapper``): a record the schema turns into nothing (a
    callable returning None, a JSON row schema ignoring a parse error) is skipped; the elements
    after it keep their own records' timestamps, and the position after each is its record's."""
    from streamflow.common import Row, Types
    from streamflow.common.serialization import JsonRowDeserializationSchema

    bs, topic = kafka.bootstrap_servers, topic_name(f"skip-{schema}")
    await create_topic(bs, topic, 1)
    await produce(bs, topic, [b'{"v": 0}', b"not json", b'{"v": 2}'], timestamps=[1000, 2000, 3000])
    json = JsonRowDeserializationSchema.builder().ignore_parse_errors()
    if schema == "json-row-ignore-parse-errors":  # its batch drops what it skips
        json = json.type_info(Types.ROW_NAMED(["v"], [Types.INT()]))
    deserializer: Any = (
        (lambda raw: raw.decode() if raw.startswith(b"{") else None) if schema == "callable"
        else json.build())
    reader = (KafkaSource.builder().set_bootstrap_servers(bs).set_topics(topic)
              .set_value_only_deserializer(deserializer).build().create_reader(0, 1))
    await reader.start(lambda: None)
    try:
        got = await _read_stamped(reader, 2)
    finally:
        await reader.close()
    first, second = {"callable": ('{"v": 0}', '{"v": 2}'), "json-ignore-parse-errors": ({"v": 0}, {"v": 2}),
                     "json-row-ignore-parse-errors": (Row(v=0), Row(v=2))}[schema]
    assert got == [(first, 1000, 1), (second, 3000, 3)]


async def _commit(bs: str, group: str, topic: str, offset: int) -> None:
    """Another consumer of ``group`` commits ``offset`` for ``topic``'s partition 0."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.structs import OffsetAndMetadata

    consumer = AIOKafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])  # aiokafka commits only assigned partitions
        await consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(offset, "")})
    finally:
        await consumer.stop()


async def _savepoint_unread(src: KafkaSource, path: str) -> str:
    """A job reading ``src`` (into nowhere) stopped at a savepoint it took before any record."""
    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(600_000)
    env.from_source(src, None, "kafka").uid("kafka").add_sink(lambda v: None)
    client = await env.execute_async("unread")
    try:
        return await asyncio.wait_for(client.trigger_savepoint(path), 20)
    finally:
        await client.cancel()


async def _restored_bounded(src: KafkaSource, savepoint: str) -> list:
    """What a bounded job (stopping at ``latest()``) restored from ``savepoint`` reads."""
    env = sf.StreamExecutionEnvironment()
    env.configure({"execution.savepoint.path": savepoint})
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    out: list = []
    env.from_source(src, None, "kafka").uid("kafka").add_sink(out.append)
    await asyncio.wait_for((await env.execute_async("restored")).get_job_execution_result(), 30)
    return out


async def test_an_unread_committed_split_resolves_the_group_offset_again_after_a_restore(kafka, tmp_path):
    """Flink's ``committed_offsets()`` split keeps its COMMITTED_OFFSET sentinel until its first
    record (``KafkaPartitionSplitState``), and the split reader resolves it when the restored split
    is added (``KafkaPartitionSplitReader#handleSplitsChanges``: the consumer's committed offset).
    A job that read nothing is savepointed; another consumer of the group commits offset 4; the
    restored job reads from 4, not from the offset resolved before the savepoint (10)."""
    bs, topic = kafka.bootstrap_servers, topic_name("unread-committed")
    await create_topic(bs, topic, 1)
    await produce(bs, topic, [str(i).encode() for i in range(10)])
    group = f"g-{topic}"
    await _commit(bs, group, topic, 10)
    builder = (source(bs, topic).set_group_id(group)
               .set_starting_offsets(KafkaOffsetsInitializer.committed_offsets()))
    savepoint = await _savepoint_unread(builder.build(), str(tmp_path / "sp"))
    await _commit(bs, group, topic, 4)
    out = await _restored_bounded(builder.set_bounded(KafkaOffsetsInitializer.latest()).build(), savepoint)
    assert out == [str(i) for i in range(4, 10)]


async def test_an_unread_earliest_split_resolves_the_earliest_offset_again_after_a_restore(kafka, tmp_path):
    """Flink's ``earliest()`` split keeps its EARLIEST_OFFSET sentinel until its first record, and
    the restored split seeks to the beginning *now* (``KafkaPartitionSplitReader#seekToStartingOffsets``).
    A reader checkpointed on an empty partition (earliest: 0, unread); records 0-9 are written and
    those before 6 deleted (``DeleteRecords``); the restored reader starts at 6 and reads 6-9.
    (``earliest()``'s reset strategy is EARLIEST, so a seek to the saved 0 would also be reset to
    6 by the consumer: the restored position is what tells the offsets apart.)"""
    from aiokafka import TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

    bs, topic = kafka.bootstrap_servers, topic_name("unread-earliest")
    await create_topic(bs, topic, 1)
    src = source(bs, topic).build()
    reader = src.create_reader(0, 1)
    await reader.start(lambda: None)
    try:
        position = reader.snapshot_for_checkpoint(1)
    finally:
        await reader.close()
    await produce(bs, topic, [str(i).encode() for i in range(10)])
    admin = AIOKafkaAdminClient(bootstrap_servers=bs)
    await admin.start()
    try:
        await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(6)})
    finally:
        await admin.close()
    restored = src.create_reader(0, 1)
    restored.restore_positions([position])
    await restored.start(lambda: None)
    try:
        assert restored.snapshot_position() == [[topic, 0, 6, None, "earliest"]]
        assert await read_until(restored, 4) == [str(i) for i in range(6, 10)]
    finally:
        await restored.close()


async def test_an_unread_committed_split_restored_without_a_group_id_fails_naming_it(kafka):
    """A checkpoint's partition unread at COMMITTED_OFFSET restored by a source without a group id
    (its starting offsets changed to earliest()): the committed offset cannot be looked up, and the
    error names the partition and the fix (Flink's consumer fails without group.id there too)."""
    bs, topic = kafka.bootstrap_servers, topic_name("unread-no-group")
    await create_topic(bs, topic, 1)
    reader = source(bs, topic).build().create_reader(0, 1)
    reader.restore_positions([[[topic, 0, 0, None, "committed"]]])
    with pytest.raises(ValueError, match=rf"{topic}-0 restored unread .*set_group_id"):
        await reader.start(lambda: None)
    await reader.close()


async def test_an_unread_committed_split_without_a_commit_takes_the_reset_strategy_after_a_restore(kafka):
    """The COMMITTED_OFFSET sentinel of a restored split, the group still without a committed
    offset: Flink's consumer starts by its ``auto.offset.reset``, which the builder sets from the
    starting initializer's reset strategy (``committed_offsets(LATEST)``: the end *now*). A
    reader checkpointed unread on an empty partition (the end then: 0); records 0-9 are written;
    the restored reader starts at 10 and reads only what comes after (before: from 0)."""
    bs, topic = kafka.bootstrap_servers, topic_name("unread-reset")
    await create_topic(bs, topic, 1)
    src = (source(bs, topic).set_group_id(f"g-{topic}")
           .set_starting_offsets(KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.LATEST))
           .build())
    reader = src.create_reader(0, 1)
    await reader.start(lambda: None)
    try:
        position = reader.snapshot_for_checkpoint(1)
    finally:
        await reader.close()
    assert position == [[topic, 0, 0, None, "committed"]]
    await produce(bs, topic, [str(i).encode() for i in range(10)])
    restored = src.create_reader(0, 1)
    restored.restore_positions([position])
    await restored.start(lambda: None)
    try:
        assert restored.snapshot_position() == [[topic, 0, 10, None, "committed"]]
        await produce(bs, topic, [b"after"])
        assert await read_until(restored, 1) == ["after"]
    finally:
        await restored.close()
