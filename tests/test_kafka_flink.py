"""Flink's Kafka connector tests, ported to streamflow's public API on the session's test broker.

Sources (apache/flink-connector-kafka, flink-connector-kafka/src/test/java/org/apache/flink/
connector/kafka/): ``source/reader/KafkaSourceReaderTest``, ``source/reader/
KafkaPartitionSplitReaderTest``, ``sink/KafkaSinkITCase``, ``sink/KafkaWriterITCase``.
Volumes are small (the test broker rewrites one JSON file per change).
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

import streamflow as sf
from streamflow.common.serialization import SimpleStringSchema
from streamflow.connectors.kafka_reader import split_owner
from streamflow.datastream import RuntimeExecutionMode
from streamflow.datastream.connectors.base import DeliveryGuarantee
from streamflow.datastream.connectors.kafka import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
    KafkaSourceBuilder,
    KafkaTopicPartition,
)
from streamflow.testing.kafka_broker import create_topic, open_transactions, produce, read_topic

_ids = itertools.count()
RECORDS_PER_SPLIT = 5


def topic_name(label: str) -> str:
    return f"flink-{label}-{next(_ids)}-{id(object())}"


async def two_partitions(bs: str, label: str) -> str:
    """Flink's ``KafkaSourceTestEnv``: a topic whose partitions hold ``RECORDS_PER_SPLIT`` records each."""
    topic = topic_name(label)
    await create_topic(bs, topic, 2)
    for p in range(2):
        await produce(bs, topic, [f"{p}:{i}".encode() for i in range(RECORDS_PER_SPLIT)], partition=p)
    return topic


def source(bs: str, topic: str) -> KafkaSourceBuilder:
    return (
        KafkaSource.builder()
        .set_bootstrap_servers(bs)
        .set_topics(topic)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
    )


async def committed(bs: str, group: str, topic: str, partitions: int = 2) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        out = {p: await consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
        return {p: off for p, off in out.items() if off is not None}
    finally:
        await consumer.stop()


async def run_bounded(src: KafkaSource, parallelism: int = 1) -> list:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    out: list = []
    env.from_source(src, None, "kafka").add_sink(out.append)
    await asyncio.wait_for((await env.execute_async("bounded")).get_job_execution_result(), 60)
    return out


async def test_offset_commit_on_checkpoint_complete(kafka):
    """KafkaSourceReaderTest#testOffsetCommitOnCheckpointComplete: a checkpoint per poll, none
    completed; completing the last one subsumes the others and commits every partition's end."""
    bs = kafka.bootstrap_servers
    topic = await two_partitions(bs, "commit")
    group = f"g-{topic}"
    reader = source(bs, topic).set_group_id(group).build().create_reader(0, 1)
    await reader.start(lambda: None)
    read: list = []
    checkpoint = 0
    try:
        async with asyncio.timeout(30):
            while len(read) < 2 * RECORDS_PER_SPLIT:
                batch = reader.poll_batch(1)
                if isinstance(batch, tuple):
                    read.extend(batch[0])
                else:
                    await asyncio.sleep(0.01)
                checkpoint += 1
                reader.snapshot_for_checkpoint(checkpoint)
            reader.notify_checkpoint_complete(checkpoint)
            while (got := await committed(bs, group, topic)) != {0: RECORDS_PER_SPLIT, 1: RECORDS_PER_SPLIT}:
                await asyncio.sleep(0.05)
        assert got == {0: RECORDS_PER_SPLIT, 1: RECORDS_PER_SPLIT}
    finally:
        await reader.close()


async def test_commit_empty_offsets(kafka):
    """KafkaSourceReaderTest#testCommitEmptyOffsets: a reader without splits (a subtask that owns
    no partition) checkpoints and completes checkpoints; nothing is committed to its group."""
    bs, topic = kafka.bootstrap_servers, topic_name("empty-commit")
    await create_topic(bs, topic, 1)
    group = f"g-{topic}"
    src = source(bs, topic).set_group_id(group).build()
    reader = src.create_reader(1 - split_owner(KafkaTopicPartition(topic, 0), 2), 2)
    await reader.start(lambda: None)
    try:
        for cid in (100, 101, 102):
            assert reader.snapshot_for_checkpoint(cid) == []
        reader.notify_checkpoint_complete(101)
        await asyncio.sleep(0.2)
    finally:
        await reader.close()
    assert await committed(bs, group, topic, 1) == {}


@pytest.mark.parametrize("only_empty", [False, True], ids=["with-normal", "empty-only"])
async def test_assigning_empty_splits(kafka, only_empty):
    """KafkaSourceReaderTest#testAssigningEmptySplits / #testAssigningEmptySplitOnly: a bounded
    split whose starting offset is its stopping offset finishes with no record, and the reader
    (the job) ends."""
    bs = kafka.bootstrap_servers
    topic = await two_partitions(bs, "empty-split")
    p0, p1 = KafkaTopicPartition(topic, 0), KafkaTopicPartition(topic, 1)
    start = {p0: RECORDS_PER_SPLIT if only_empty else 0, p1: RECORDS_PER_SPLIT}
    stop = {p0: RECORDS_PER_SPLIT, p1: RECORDS_PER_SPLIT}
    src = (source(bs, topic).set_starting_offsets(KafkaOffsetsInitializer.offsets(start))
           .set_bounded(KafkaOffsetsInitializer.offsets(stop)).build())
    out = await run_bounded(src, 2)
    assert sorted(out) == ([] if only_empty else [f"0:{i}" for i in range(RECORDS_PER_SPLIT)])


async def test_bounded_stopping_offsets_per_partition(kafka):
    """KafkaPartitionSplitReaderTest#testHandleSplitChangesAndFetch (bounded splits): each
    partition is read from its starting offset up to its stopping offset, exclusive."""
    bs = kafka.bootstrap_servers
    topic = await two_partitions(bs, "stop")
    p0, p1 = KafkaTopicPartition(topic, 0), KafkaTopicPartition(topic, 1)
    src = (source(bs, topic).set_starting_offsets(KafkaOffsetsInitializer.offsets({p0: 1, p1: 0}))
           .set_bounded(KafkaOffsetsInitializer.offsets({p0: 3, p1: 4})).build())
    assert sorted(await run_bounded(src)) == ["0:1", "0:2", "1:0", "1:1", "1:2", "1:3"]


async def test_committed_offsets_with_none_reset_strategy_fail(kafka):
    """KafkaPartitionSplitReaderTest#testUsingCommittedOffsetsWithNoneOffsetResetStrategy: no
    committed offset and the NONE strategy: the source fails, naming the partition."""
    bs = kafka.bootstrap_servers
    topic = await two_partitions(bs, "none-reset")
    src = (source(bs, topic).set_group_id(f"g-{topic}")
           .set_starting_offsets(KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.NONE))
           .set_bounded(KafkaOffsetsInitializer.latest()).build())
    with pytest.raises(Exception, match=f"no committed offset for .*{topic}-0"):
        await run_bounded(src)


@pytest.mark.parametrize("strategy", ["EARLIEST", "LATEST"])
async def test_committed_offsets_with_earliest_or_latest_reset_strategy(kafka, strategy):
    """KafkaPartitionSplitReaderTest#testUsingCommittedOffsetsWithEarliestOrLatestOffsetResetStrategy:
    a partition without a committed offset starts at the strategy's end; one with a committed
    offset starts there."""
    bs = kafka.bootstrap_servers
    topic = await two_partitions(bs, "reset")
    group = f"g-{topic}"
    consumer = AIOKafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 1)])
        await consumer.commit({TopicPartition(topic, 1): OffsetAndMetadata(3, "")})
    finally:
        await consumer.stop()
    reset = KafkaOffsetResetStrategy[strategy]
    src = (source(bs, topic).set_group_id(group)
           .set_starting_offsets(KafkaOffsetsInitializer.committed_offsets(reset))
           .set_bounded(KafkaOffsetsInitializer.latest()).build())
    from_p0 = [f"0:{i}" for i in range(RECORDS_PER_SPLIT)] if strategy == "EARLIEST" else []
    assert sorted(await run_bounded(src)) == [*from_p0, "1:3", "1:4"]


def string_sink(bs: str, topic: str, guarantee: DeliveryGuarantee, prefix: str | None = None) -> KafkaSink:
    return (
        KafkaSink.builder()
        .set_bootstrap_servers(bs)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder().set_topic(topic)
            .set_value_serialization_schema(SimpleStringSchema()).build()
        )
        .set_delivery_guarantee(guarantee)
        .set_transactional_id_prefix(prefix or topic_name("tx"))
        .build()
    )


async def values(bs: str, topic: str) -> list[str]:
    return [r.value.decode() for r in await read_topic(bs, topic, committed=True)]


@pytest.mark.parametrize("guarantee", list(DeliveryGuarantee), ids=lambda g: g.name)
async def test_write_records_to_kafka(kafka, tmp_path, guarantee):
    """KafkaSinkITCase#testWriteRecordsToKafkaWith{None,AtLeastOnce,ExactlyOnce}Guarantee: a
    bounded job with checkpointing writes every record; read with read_committed."""
    bs, topic = kafka.bootstrap_servers, topic_name(f"write-{guarantee.name}")
    await create_topic(bs, topic, 1)
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    env.enable_checkpointing(50)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
    env.from_collection([str(i) for i in range(100)]).sink_to(string_sink(bs, topic, guarantee))
    await asyncio.wait_for((await env.execute_async("write")).get_job_execution_result(), 60)
    assert sorted(map(int, await values(bs, topic))) == list(range(100))


async def test_write_records_exactly_once_in_batch_mode(kafka):
    """KafkaSinkITCase#testWriteRecordsToKafkaWithExactlyOnceGuaranteeBatch: BATCH execution,
    no checkpoints: the records are committed at the end of input."""
    bs, topic = kafka.bootstrap_servers, topic_name("batch")
    await create_topic(bs, topic, 1)
    env = sf.StreamExecutionEnvironment().set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.from_collection([str(i) for i in range(50)]).sink_to(
        string_sink(bs, topic, DeliveryGuarantee.EXACTLY_ONCE, "kafka-sink"))
    await asyncio.wait_for((await env.execute_async("batch")).get_job_execution_result(), 60)
    assert sorted(map(int, await values(bs, topic))) == list(range(50))


class FailOnce(sf.MapFunction):
    """Fails once, at record ``at`` (Flink's ``FailingCheckpointMapper``)."""

    failed: set[str] = set()

    def __init__(self, key: str, at: int) -> None:
        self.key, self.at = key, at

    def map(self, value: str) -> str:
        if int(value) == self.at and self.key not in FailOnce.failed:
            FailOnce.failed.add(self.key)
            raise RuntimeError("injected failure")
        return value


@pytest.mark.parametrize("guarantee", [DeliveryGuarantee.AT_LEAST_ONCE, DeliveryGuarantee.EXACTLY_ONCE],
                         ids=lambda g: g.name)
async def test_recovery(kafka, tmp_path, guarantee):
    """KafkaSinkITCase#testRecoveryWithAtLeastOnceGuarantee / #testRecoveryWithExactlyOnceGuarantee:
    a failure after checkpoints, a restart from the latest: every record at least once, and
    with EXACTLY_ONCE exactly once for a read_committed consumer."""
    bs, topic = kafka.bootstrap_servers, topic_name(f"recovery-{guarantee.name}")
    await create_topic(bs, topic, 1)

    async def slow(v: str) -> str:
        await asyncio.sleep(0.002)
        return v

    env = sf.StreamExecutionEnvironment().set_parallelism(1).set_batch_size(10)
    env.enable_checkpointing(20)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(1, 0))
    (env.from_collection([str(i) for i in range(200)]).map(slow, concurrency=1)
     .map(FailOnce(str(tmp_path), 150)).sink_to(string_sink(bs, topic, guarantee)))
    await asyncio.wait_for((await env.execute_async("recovery")).get_job_execution_result(), 60)
    got = list(map(int, await values(bs, topic)))
    assert str(tmp_path) in FailOnce.failed
    assert set(got) == set(range(200))
    if guarantee is DeliveryGuarantee.EXACTLY_ONCE:
        assert sorted(got) == list(range(200))


async def _leave_open_transactions(bs: str, topic: str, prefix: str, parallelism: int) -> None:
    """A job that writes with EXACTLY_ONCE and is cancelled before its first checkpoint, its
    records sent into open transactions (Flink's ``FailAsyncCheckpointMapper(0)`` run)."""
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(5)
    env.enable_checkpointing(600_000)

    async def forever(v: str) -> str:
        if int(v) >= 10 * parallelism:
            await asyncio.sleep(3600)
        return v

    (env.from_collection([str(i) for i in range(20 * parallelism)]).rebalance().map(forever)
     .sink_to(string_sink(bs, topic, DeliveryGuarantee.EXACTLY_ONCE, prefix)).uid("sink"))
    client = await env.execute_async("first")
    async with asyncio.timeout(30):
        # every subtask's records (the 10 of the first 10 * parallelism the rebalance deals it,
        # before its map blocks) sent into its open transaction: the topic's one partition holds
        # them all past its last stable offset
        while sum((await open_transactions(bs, topic)).values()) < 10 * parallelism:
            await asyncio.sleep(0.05)
    await client.cancel()


async def test_abort_transactions_after_scale_in_before_first_checkpoint(kafka):
    """KafkaSinkITCase#testAbortTransactionsAfterScaleInBeforeFirstCheckpoint: a first job at
    parallelism 5 leaves open transactions (no checkpoint); a second job, same prefix, at
    parallelism 1 and without state, aborts all of them, so a read_committed consumer sees
    its committed records at once (the open ones held the last stable offset back)."""
    bs, topic = kafka.bootstrap_servers, topic_name("scale-in")
    await create_topic(bs, topic, 1)
    prefix = topic_name("tx")
    await _leave_open_transactions(bs, topic, prefix, 5)
    assert await values(bs, topic) == []
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    env.enable_checkpointing(50)
    (env.from_collection([f"{1000 + i}" for i in range(20)])
     .sink_to(string_sink(bs, topic, DeliveryGuarantee.EXACTLY_ONCE, prefix)).uid("sink"))
    await asyncio.wait_for((await env.execute_async("second")).get_job_execution_result(), 60)
    assert await open_transactions(bs, topic) == {}
    assert sorted(map(int, await values(bs, topic))) == [1000 + i for i in range(20)]


async def test_none_and_at_least_once_write_outside_transactions(kafka, tmp_path):
    """KafkaWriterITCase (NONE / AT_LEAST_ONCE writers): without transactions, records are
    readable by read_committed consumers before any checkpoint completes."""
    bs, topic = kafka.bootstrap_servers, topic_name("visible")
    await create_topic(bs, topic, 1)
    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(600_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
    gate = asyncio.Event()

    async def hold(v: str) -> str:
        if v == "9":
            await gate.wait()
        return v

    (env.from_collection([str(i) for i in range(10)]).map(hold, concurrency=1)
     .sink_to(string_sink(bs, topic, DeliveryGuarantee.AT_LEAST_ONCE)))
    client = await env.execute_async("visible")
    try:
        async with asyncio.timeout(30):
            while len(await values(bs, topic)) < 9:
                await asyncio.sleep(0.05)
    finally:
        gate.set()
    await asyncio.wait_for(client.get_job_execution_result(), 30)
    assert sorted(map(int, await values(bs, topic))) == list(range(10))


async def test_abort_transactions_of_the_previous_prefix_after_a_restore(kafka, tmp_path):
    """KafkaSinkITCase#testAbortTransactionsOfPendingCheckpointsAfterFailure: a first job leaves
    a transaction open after its last checkpoint (a savepoint here); a second job restored from
    it with a *new* transactional id prefix aborts the lingering transaction of the old prefix
    (Flink keeps the prefix in the writer state), so a read_committed consumer sees exactly the
    records, each once."""
    bs, topic = kafka.bootstrap_servers, topic_name("new-prefix")
    await create_topic(bs, topic, 1)

    async def slow(v: str) -> str:
        await asyncio.sleep(0.01)
        return v

    records = [str(i) for i in range(200)]

    def job(prefix: str, savepoint: str | None) -> sf.StreamExecutionEnvironment:
        env = sf.StreamExecutionEnvironment().set_batch_size(5)
        if savepoint is not None:
            env.configure({"execution.savepoint.path": savepoint})
        env.enable_checkpointing(600_000 if savepoint is None else 50)
        env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
        (env.from_collection(records).uid("src").map(slow, concurrency=1).uid("slow")
         .sink_to(string_sink(bs, topic, DeliveryGuarantee.EXACTLY_ONCE, prefix)).uid("sink"))
        return env

    client = await job(topic_name("first"), None).execute_async("first")
    async with asyncio.timeout(30):
        while len(await open_transactions(bs, topic)) < 1:  # records sent, uncommitted
            await asyncio.sleep(0.02)
        savepoint = await client.trigger_savepoint(str(tmp_path / "sp"))  # commits them
        while len(await open_transactions(bs, topic)) < 1:  # later records in a new transaction
            await asyncio.sleep(0.02)
    await client.cancel()
    second = await job(topic_name("second"), savepoint).execute_async("second")
    await asyncio.wait_for(second.get_job_execution_result(), 60)
    assert await open_transactions(bs, topic) == {}
    assert sorted(map(int, await values(bs, topic))) == list(range(200))


async def test_a_transactional_id_prefix_is_reused_by_the_next_job(kafka):
    """KafkaSinkITCase (every EXACTLY_ONCE case runs jobs with the prefix of an earlier one, e.g.
    testWriteRecordsToKafkaWithExactlyOnceGuaranteeBatch's "kafka-sink"): a finished job's
    transactional ids serve the next job of the same sink; both outputs committed, once each."""
    bs, topic = kafka.bootstrap_servers, topic_name("reuse")
    await create_topic(bs, topic, 1)
    prefix = topic_name("tx")
    for run in range(2):
        env = sf.StreamExecutionEnvironment().set_parallelism(2)
        env.enable_checkpointing(50)
        (env.from_collection([f"{run}:{i}" for i in range(20)])
         .sink_to(string_sink(bs, topic, DeliveryGuarantee.EXACTLY_ONCE, prefix)).uid("sink"))
        await asyncio.wait_for((await env.execute_async(f"run-{run}")).get_job_execution_result(), 60)
    assert sorted(await values(bs, topic)) == sorted(f"{run}:{i}" for run in range(2) for i in range(20))
    assert await open_transactions(bs, topic) == {}


@pytest.mark.parametrize("guarantee", [DeliveryGuarantee.AT_LEAST_ONCE, DeliveryGuarantee.EXACTLY_ONCE])
async def test_increasing_record_based_counters(kafka, guarantee):
    """KafkaWriterITCase#testIncreasingRecordBasedCounters and #testCurrentSendTimeMetric: the sink
    writer counts the records and bytes it wrote to Kafka (numRecordsSend/numRecordsOut,
    numBytesSend/numBytesOut), no errors, and the time the last write took (currentSendTime)."""
    bs, topic = kafka.bootstrap_servers, topic_name("counters")
    await create_topic(bs, topic, 1)
    env = sf.StreamExecutionEnvironment()
    env.from_collection([str(i) for i in range(12)]).sink_to(
        string_sink(bs, topic, guarantee)).uid("kafka-sink")
    client = await env.execute_async("counters")
    result = await client.get_job_execution_result()
    # the job page's operator table shows the same records out (as Flink's IO metrics of a sink)
    (sink_op,) = [op for v in client.get_metrics_snapshot()["vertices"] for s in v["subtasks"]
                  for op in s["operators"] if op["uid"] == "kafka-sink"]
    assert sink_op["numRecordsOut"] == 12
    metrics = {k.removeprefix("kafka-sink[0]."): v for k, v in result.metrics.items()
               if k.startswith("kafka-sink[0].")}
    assert metrics["numRecordsOut"] == metrics["numRecordsSend"] == 12
    assert metrics["numBytesOut"] == metrics["numBytesSend"] == 10 + 2 * 2  # "0".."9", "10", "11"
    assert metrics["numRecordsOutErrors"] == metrics["numRecordsSendErrors"] == 0
    assert metrics["currentSendTime"] > 0


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
async def test_bounded_read_of_a_transactional_topic_ends(kafka, isolation):
    """KafkaPartitionSplitReaderTest (bounded splits; Flink finishes a split when the consumer's
    position reaches the stopping offset, so the commit markers closing a transactional topic,
    which are never records, do not keep it open): a topic written by an EXACTLY_ONCE job, read
    to latest(), ends with every record."""
    bs, topic = kafka.bootstrap_servers, topic_name(f"txn-read-{isolation}")
    await create_topic(bs, topic, 1)
    env = sf.StreamExecutionEnvironment()
    env.from_collection([str(i) for i in range(20)]).sink_to(
        string_sink(bs, topic, DeliveryGuarantee.EXACTLY_ONCE))
    await asyncio.wait_for((await env.execute_async("write")).get_job_execution_result(), 60)
    src = (source(bs, topic).set_property("isolation.level", isolation)
           .set_bounded(KafkaOffsetsInitializer.latest()).build())
    assert sorted(map(int, await run_bounded(src))) == list(range(20))


class FailAfterSome(sf.MapFunction):
    """Attempt 0 of every subtask fails after ``after`` records (some already sent to Kafka)."""

    def __init__(self, after: int) -> None:
        self.after = after

    def open(self, runtime_context) -> None:
        self.attempt, self.count = runtime_context.get_attempt_number(), 0

    def map(self, value: str) -> str:
        self.count += 1
        if self.attempt == 0 and self.count > self.after:
            raise RuntimeError("injected failure")
        return value


async def test_exactly_once_in_batch_mode_through_a_region_failover(kafka):
    """BATCH execution (no checkpoints): the sink's region fails after its producer sent records
    in its transaction; only that region restarts (runtime/regions.py), its new producer
    (same transactional id) aborts the failed attempt's transaction, and the records committed
    at the end of input are each once."""
    bs, topic = kafka.bootstrap_servers, topic_name("batch-region")
    await create_topic(bs, topic, 2)
    env = sf.StreamExecutionEnvironment().set_runtime_mode(RuntimeExecutionMode.BATCH).set_parallelism(2)
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(3, 0))
    (env.from_collection([str(i) for i in range(3000)]).rebalance().map(FailAfterSome(1000))
     .sink_to(string_sink(bs, topic, DeliveryGuarantee.EXACTLY_ONCE, topic_name("region-tx"))))
    client = await env.execute_async("batch region")
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert client.restarts == 2  # one per sink subtask
    assert sorted(map(int, await values(bs, topic))) == list(range(3000))
