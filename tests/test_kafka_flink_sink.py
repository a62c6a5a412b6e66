"""More of Flink's Kafka sink tests, ported at the operator level on a test broker.

Sources (apache/flink-connector-kafka, flink-connector-kafka/src/test/java/org/apache/flink/
connector/kafka/sink/): ``KafkaSinkITCase``, ``ExactlyOnceKafkaWriterITCase``,
``internal/KafkaCommitterTest``, ``internal/TransactionAbortStrategyImplTest``. A sink subtask is
driven by hand as Flink's writer tests drive theirs: records, ``prepare_snapshot_pre_barrier`` and
``snapshot_state`` (the barrier), ``notify_checkpoint_complete``; a "restore" is a fresh operator
given the state of a checkpoint. The output is read by a fresh ``read_committed`` consumer.

The broker-restart cases run on a broker of their own: the test broker loses a transaction
begun before its restart while later sends and the commit report success, so the sink must
treat a connection lost during a transaction as a task failure (kafka_sink's module doc).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from aiokafka.errors import (
    InvalidProducerEpoch,
    KafkaError,
    KafkaTimeoutError,
    NodeNotReadyError,
    ProducerFenced,
    RequestTimedOutError,
)

from streamflow import _faults as faults
from streamflow.clock import SYSTEM_CLOCK
from streamflow.common.serialization import SimpleStringSchema
from streamflow.connectors.kafka_sink import KafkaSinkOperator
from streamflow.datastream.connectors.base import DeliveryGuarantee
from streamflow.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink
from streamflow.runtime.context import OperatorContext
from streamflow.runtime.metrics import MetricGroup
from streamflow.runtime.operator import Output
from streamflow.state import codec
from streamflow.testing.kafka_broker import (
    KafkaBroker,
    add_partitions,
    create_topic,
    open_transactions,
    read_topic,
)

_ids = itertools.count()


def name(label: str) -> str:
    return f"sink-{label}-{next(_ids)}-{id(object())}"


async def sink_op(bs: str, topic: str, prefix: str, restored: Any = None, *, subtask: int = 0,
                  parallelism: int = 1,
                  guarantee: DeliveryGuarantee = DeliveryGuarantee.EXACTLY_ONCE,
                  sink: KafkaSink | None = None, start: bool = True) -> KafkaSinkOperator:
    """An opened sink subtask writing strings to ``topic``, restored from ``restored`` (a state);
    ``start=False``: not opened yet."""
    sink = sink or (KafkaSink.builder().set_bootstrap_servers(bs)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(topic)
                                   .set_value_serialization_schema(SimpleStringSchema()).build())
            .set_delivery_guarantee(guarantee).set_transactional_id_prefix(prefix).build())
    op = sink.create_operator("Sink")
    assert isinstance(op, KafkaSinkOperator)
    ctx = OperatorContext(uid="sink", name="Sink", task_name="Sink", subtask_index=subtask,
                          parallelism=parallelism, max_parallelism=128, clock=SYSTEM_CLOCK,
                          metrics=MetricGroup(f"sink[{subtask}]", {}), processing_time=None,  # type: ignore[arg-type]
                          checkpointing=True)
    op.setup(ctx, Output([], {}))
    op.initialize_state(restored)
    if start:
        await op.open()
    return op


async def barrier(op: KafkaSinkOperator, checkpoint_id: int) -> Any:
    """The sink's part of checkpoint ``checkpoint_id``: pre-commit, then its state (encoded and
    decoded as a checkpoint stores it)."""
    await op.prepare_snapshot_pre_barrier(checkpoint_id)
    return codec.decode(codec.encode(op.snapshot_state(checkpoint_id)))


async def output(bs: str, topic: str) -> list[str]:
    assert await open_transactions(bs, topic) == {}, "a transaction is still open"
    return sorted(m.value.decode() for m in await read_topic(bs, topic))


async def restart(broker: KafkaBroker) -> None:
    await asyncio.to_thread(broker.stop)
    await asyncio.to_thread(broker.start)


async def test_broker_restart_after_the_pre_commit_fails_the_commit_and_the_restore_resends(tmp_path):
    """The broker restarts between barrier 1 (T_1 pre-committed) and checkpoint 1's completion:
    the broker has lost T_1, so the commit must fail the task rather than report success; the
    restore from checkpoint 1 re-sends epoch 1 and commits it. Every record once."""
    with KafkaBroker(str(tmp_path)) as broker:
        bs, topic = broker.bootstrap_servers, name("restart-precommit")
        await create_topic(bs, topic, 1)
        op = await sink_op(bs, topic, topic)
        await op.process_batch([f"a{i}" for i in range(5)], None)
        state = await barrier(op, 1)
        await restart(broker)
        with pytest.raises(ConnectionError):
            async with asyncio.timeout(20):
                await op.notify_checkpoint_complete(1)
        await op.close()
        op = await sink_op(bs, topic, topic, state)
        await op.process_batch(["b0", "b1"], None)
        await barrier(op, 2)
        await op.notify_checkpoint_complete(2)
        await op.close()
        assert await output(bs, topic) == ["a0", "a1", "a2", "a3", "a4", "b0", "b1"]


async def test_broker_restart_inside_an_open_transaction_fails_the_task(tmp_path):
    """The broker restarts while T_1 holds records and no barrier came yet: the next batch (or
    the pre-commit) fails the task; the job restarts with no checkpoint and sends everything
    again. Every record once."""
    with KafkaBroker(str(tmp_path)) as broker:
        bs, topic = broker.bootstrap_servers, name("restart-open")
        await create_topic(bs, topic, 1)
        op = await sink_op(bs, topic, topic)
        await op.process_batch(["a0", "a1"], None)
        await op._flush()  # sent and acknowledged inside T_1
        await restart(broker)
        with pytest.raises(ConnectionError):
            async with asyncio.timeout(20):
                await op.process_batch(["a2"], None)
                await barrier(op, 1)
        await op.close()
        op = await sink_op(bs, topic, topic)
        await op.process_batch(["a0", "a1", "a2"], None)
        await barrier(op, 1)
        await op.notify_checkpoint_complete(1)
        await op.close()
        assert await output(bs, topic) == ["a0", "a1", "a2"]



@pytest.mark.parametrize("step", ["write", "flush", "close"])
async def test_at_least_once_fails_when_kafka_is_unavailable(tmp_path, step):
    """KafkaWriterFaultToleranceITCase#test{Write,Flush,Close}ExceptionWhenKafkaUnavailable: an
    AT_LEAST_ONCE writer (``request.timeout.ms=1000``) whose broker went away fails with the
    network or timeout error of the failed delivery: at the next write once the producer has
    reported it (Flink's ``KafkaWriter#checkAsyncException`` in ``write``), at the flush of the
    next barrier, or at close; never by waiting for the broker forever, nor by dropping the
    records silently."""
    with KafkaBroker(str(tmp_path)) as broker:
        bs, topic = broker.bootstrap_servers, name(f"unavailable-{step}")
        await create_topic(bs, topic, 1)
        sink = (KafkaSink.builder().set_bootstrap_servers(bs)
                .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(topic)
                                       .set_value_serialization_schema(SimpleStringSchema()).build())
                .set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE)
                .set_property("request.timeout.ms", "1000").build())
        op = await sink_op(bs, topic, topic, sink=sink)
        await op.process_batch(["1"], None)
        await op.prepare_snapshot_pre_barrier(1)
        await asyncio.to_thread(broker.stop)
        await op.process_batch(["1"], None)
        if step != "flush":  # the producer's own flush: the delivery fails, nothing raises yet
            async with asyncio.timeout(10):
                await op.producer.flush()
        with pytest.raises(KafkaError) as failure:
            async with asyncio.timeout(10):
                if step == "write":
                    await op.process_batch(["1"], None)
                elif step == "flush":
                    await op.prepare_snapshot_pre_barrier(2)
                else:
                    await op.close()
        assert isinstance(failure.value, (NodeNotReadyError, KafkaTimeoutError, RequestTimedOutError)), \
            repr(failure.value)
        if step != "close":
            await op.close()


@pytest.mark.parametrize("step", ["write", "flush", "close"])
async def test_a_fenced_producer_fails_the_task(kafka, step):
    """ExactlyOnceKafkaWriterITCase#test{Write,Flush,Close}AsyncErrorPropagationAndErrorCounter:
    another producer initialises the sink's transactional id (a zombie's restart, or a second job
    with the same prefix) and commits a transaction; the sink's next write, pre-commit flush or
    close fails with the fencing error, which is counted once in ``numRecordsOutErrors``; the
    fencing job's record is the only output."""
    from aiokafka import AIOKafkaProducer

    bs, topic = kafka.bootstrap_servers, name(f"fenced-{step}")
    await create_topic(bs, topic, 1)
    op = await sink_op(bs, topic, topic)
    fencer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=op.transactional_id)
    await fencer.start()
    try:
        async with fencer.transaction():
            await fencer.send_and_wait(topic, b"fencer")
    finally:
        await fencer.stop()
    await op.process_batch(["1"], None)
    if step != "flush":
        async with asyncio.timeout(10):
            await op.producer.flush()
    with pytest.raises(KafkaError) as failure:
        async with asyncio.timeout(10):
            if step == "write":
                await op.process_batch(["2"], None)
            elif step == "flush":
                await barrier(op, 1)
            else:
                await op.close()
    assert isinstance(failure.value, (ProducerFenced, InvalidProducerEpoch)), repr(failure.value)
    if step != "close":
        await op.close()
    assert await output(bs, topic) == ["fencer"]


async def test_abort_on_close(kafka):
    """ExactlyOnceKafkaWriterITCase#testAbortOnClose: a sink closed with records in its open
    transaction (the job cancelled, or failed for good) aborts that transaction, as Flink's
    ``ExactlyOnceKafkaWriter#close`` aborts its current producer's: ``read_committed`` consumers
    then read past it at once, instead of stalling until the transaction times out (forever on a
    broker without a transaction timeout). Those records are in no completed checkpoint; a
    restored job sends them again. A next writer with the same id then commits its own."""
    bs, topic = kafka.bootstrap_servers, name("abort-on-close")
    await create_topic(bs, topic, 1)
    op = await sink_op(bs, topic, topic)
    await op.process_batch(["1"], None)
    await op._flush()  # in the open transaction on the broker
    assert await open_transactions(bs, topic) == {0: 1}
    await op.close()
    assert await output(bs, topic) == []
    op = await sink_op(bs, topic, topic)
    await op.process_batch(["2"], None)
    await barrier(op, 1)
    await op.notify_checkpoint_complete(1)
    await op.close()
    assert await output(bs, topic) == ["2"]


@pytest.mark.parametrize("parallelism", [1, 2])
async def test_recovery_with_exactly_once_and_concurrent_checkpoints(kafka, tmp_path, parallelism):
    """KafkaSinkITCase#testRecoveryWithExactlyOnceGuaranteeAndConcurrentCheckpoints: with two
    checkpoints in flight at once (a barrier n+1 before n's notification: the sink's book keeps
    n+1's records out of T_n), a failure and a restart from the latest checkpoint leave every
    record exactly once for a read_committed consumer."""
    from test_kafka_flink import FailOnce, string_sink, values

    import streamflow as sf

    bs, topic = kafka.bootstrap_servers, name(f"concurrent-{parallelism}")
    await create_topic(bs, topic, 2)

    async def slow(v: str) -> str:
        await asyncio.sleep(0.002)
        return v

    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(10)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_max_concurrent_checkpoints(2)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(1, 0))
    (env.from_collection([str(i) for i in range(200)]).map(slow, concurrency=1)
     .map(FailOnce(str(tmp_path), 150)).rebalance()
     .sink_to(string_sink(bs, topic, DeliveryGuarantee.EXACTLY_ONCE, topic)))
    await asyncio.wait_for((await env.execute_async("concurrent")).get_job_execution_result(), 60)
    assert str(tmp_path) in FailOnce.failed
    assert sorted(map(int, await values(bs, topic))) == list(range(200))
    assert await open_transactions(bs, topic) == {}


def test_serialize_record_schema():
    """KafkaRecordSerializationSchemaBuilderTest#testSerializeRecordWithTopicSelector, #...WithKey,
    #...WithHeaderProvider, #...WithPartitioner, #...WithTimestamp: the record ``serialize`` makes
    (a negative timestamp gives none: Flink's ``KafkaRecordSerializationSchemaWrapper``)."""
    from streamflow.common.serialization import SimpleStringSchema as S

    def schema(**kw: Any) -> Any:
        builder = KafkaRecordSerializationSchema.builder().set_value_serialization_schema(S())
        selector = kw.pop("selector", None)
        builder = builder.set_topic_selector(selector) if selector else builder.set_topic("t")
        for key, value in kw.items():
            builder = getattr(builder, f"set_{key}")(value)
        return builder.build()

    selected = schema(selector=lambda e: "topic-a" if e == "a" else "topic-b")
    assert [(r.topic, r.key, r.value) for r in (selected.serialize("a"), selected.serialize("b"))] == [
        ("topic-a", None, b"a"), ("topic-b", None, b"b")]
    keyed = schema(key_serialization_schema=S())
    assert (keyed.serialize("a").key, keyed.serialize("a").value) == (b"a", b"a")
    assert schema(header_provider=lambda e: [("a", b"a")]).serialize("a").headers == [("a", b"a")]
    partitioned = schema(partitioner=lambda element, key, value, topic, partitions: 5)
    assert partitioned.serialize("a", None, None, list(range(8))).partition == 5
    assert [keyed.serialize("a", None, ts).timestamp for ts in (100, 0, None, -100)] == [100, 0, None, None]


async def test_null_header_values_survive_exactly_once_and_its_recovery(kafka):
    """A header with a null value (Kafka's and Flink's ``RecordHeader(key, null)``) is written as
    such by an EXACTLY_ONCE sink: its checkpoint state packs it, and a restore that re-sends the
    epoch writes it again."""
    bs, topic = kafka.bootstrap_servers, name("null-header")
    await create_topic(bs, topic, 1)
    sink = (KafkaSink.builder().set_bootstrap_servers(bs)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(topic)
                                   .set_value_serialization_schema(SimpleStringSchema())
                                   .set_header_provider(lambda e: [("none", None), ("some", e.encode())])
                                   .build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).set_transactional_id_prefix(topic).build())
    op = await sink_op(bs, topic, topic, sink=sink)
    await op.process_batch(["a"], None)
    state = await barrier(op, 1)
    await op.close()  # checkpoint 1 completed, not committed: the restore re-sends it
    op = await sink_op(bs, topic, topic, state, sink=sink)
    await op.close()
    records = await read_topic(bs, topic)
    assert [(r.value, list(r.headers)) for r in records] == [(b"a", [("none", None), ("some", b"a")])]


class _Restore:
    """What a restore hands the sink at another parallelism: every former subtask's state."""

    def __init__(self, states: list[Any]) -> None:
        self.all = states
        self.own = None


async def _crash(op: KafkaSinkOperator) -> None:
    """The process dies: the producer's connections close, no transaction is ended."""
    from streamflow.connectors import kafka_txn_admin as admin

    await admin.abandon(op.producer, RuntimeError("crashed"), op.name)


@pytest.mark.parametrize(("first", "between", "last"), [(2, 6, 2), (2, 5, 1), (1, 3, 4), (4, 2, 3)],
                         ids=["down-after-intermediate-up", "down-to-one", "up", "down-up"])
async def test_lingering_transactions_of_other_parallelisms_are_aborted(kafka, first, between, last):
    """TransactionAbortStrategyImplTest (#testDownscaleWithIntermediateUpscale, #testUpscale, ...)
    end to end: a run at ``first`` subtasks completes checkpoint 1 (nothing committed); a run
    restored from it at ``between`` subtasks leaves open transactions on all its ids and dies
    before its next checkpoint; a run restored from checkpoint 1 again at ``last`` subtasks
    aborts every one of them, whichever ids they are, and recovers checkpoint 1's epochs once."""
    bs, topic = kafka.bootstrap_servers, name(f"abort-{first}-{between}-{last}")
    await create_topic(bs, topic, 1)
    states = []
    for i in range(first):
        op = await sink_op(bs, topic, topic, subtask=i, parallelism=first)
        await op.process_batch([f"a{i}"], None)
        states.append(await barrier(op, 1))
        await _crash(op)
    for i in range(between):  # restored from checkpoint 1, dies before checkpoint 2
        op = await sink_op(bs, topic, topic, _Restore(states), subtask=i, parallelism=between)
        await op.process_batch([f"b{i}"], None)
        await op._flush()
        await _crash(op)
    assert await open_transactions(bs, topic)
    for i in range(last):
        op = await sink_op(bs, topic, topic, _Restore(states), subtask=i, parallelism=last)
        await op.process_batch([f"c{i}"], None)
        await barrier(op, 2)
        await op.notify_checkpoint_complete(2)
        await op.close()
    expected = [f"a{i}" for i in range(first)] + [f"c{i}" for i in range(last)]
    assert await output(bs, topic) == sorted(expected)


async def test_keyed_records_follow_partitions_added_to_the_topic(kafka):
    """Flink leaves a keyed record's partition to Kafka's producer, which hashes the key over the
    topic's partitions as its metadata shows them, refreshed every ``metadata.max.age.ms``: after
    partitions are added to the output topic, keys spread over all of them (Kafka's
    ``murmur2(key) % partitions``), as any Kafka client expects."""
    from aiokafka.partitioner import murmur2

    bs, topic = kafka.bootstrap_servers, name("added-partitions")
    await create_topic(bs, topic, 1)
    sink = (KafkaSink.builder().set_bootstrap_servers(bs)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(topic)
                                   .set_value_serialization_schema(SimpleStringSchema())
                                   .set_key_serialization_schema(SimpleStringSchema()).build())
            .set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE)
            .set_property("metadata.max.age.ms", "200").build())
    op = await sink_op(bs, topic, topic, sink=sink)
    keys = [f"k{i}" for i in range(20)]
    await op.process_batch(keys, None)
    await op.prepare_snapshot_pre_barrier(1)
    await add_partitions(bs, topic, 4)
    await asyncio.sleep(1.0)  # several metadata refreshes
    await op.process_batch(keys, None)
    await op.prepare_snapshot_pre_barrier(2)
    await op.close()
    records = await read_topic(bs, topic)
    later = sorted((r.key.decode(), r.partition) for r in records if r.partition or r.offset >= len(keys))
    assert later == sorted((k, (murmur2(k.encode()) & 0x7FFFFFFF) % 4) for k in keys)


async def test_restoring_an_older_savepoint_does_not_rewrite_its_committed_epoch(kafka):
    """KafkaCommitterTest / KafkaSinkITCase's restores, with an older savepoint: checkpoints 1
    and 2 complete and commit; the job is then restored from checkpoint 1 (a savepoint kept
    from before). Flink's committer commits checkpoint 1's transaction again, which changes
    nothing: its records stay once (the source replays only what came after the savepoint).
    The marker's history says checkpoint 1 of that run committed (kafka_txn's rule)."""
    bs, topic = kafka.bootstrap_servers, name("older-savepoint")
    await create_topic(bs, topic, 1)
    op = await sink_op(bs, topic, topic)
    await op.process_batch(["a"], None)
    savepoint = await barrier(op, 1)
    await op.notify_checkpoint_complete(1)
    await op.process_batch(["b"], None)
    await barrier(op, 2)
    await op.notify_checkpoint_complete(2)
    await op.close()
    op = await sink_op(bs, topic, topic, savepoint)
    await op.close()
    assert await output(bs, topic) == ["a", "b"]


async def test_a_job_through_a_broker_restart_stays_exactly_once(tmp_path):
    """The broker is stopped and started again while a job writes with EXACTLY_ONCE, a
    transaction open: the sink fails its task (the lost connection), the job restarts from its
    latest checkpoint and recovers; a fresh read_committed consumer sees every record once."""
    from test_kafka_flink import string_sink, values

    import streamflow as sf

    (tmp_path / "broker").mkdir()
    with KafkaBroker(str(tmp_path / "broker")) as broker:
        bs, topic = broker.bootstrap_servers, name("job-restart")
        await create_topic(bs, topic, 2)

        async def slow(v: str) -> str:
            await asyncio.sleep(0.005)
            return v

        env = sf.StreamExecutionEnvironment().set_parallelism(2).set_batch_size(5)
        env.enable_checkpointing(100)
        env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
        env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(5, 200))
        (env.from_collection([str(i) for i in range(300)]).map(slow, concurrency=1).rebalance()
         .sink_to(string_sink(bs, topic, DeliveryGuarantee.EXACTLY_ONCE, topic)))
        client = await env.execute_async("broker-restart")
        async with asyncio.timeout(20):
            while not await open_transactions(bs, topic):  # records in an open transaction
                await asyncio.sleep(0.02)
        await restart(broker)
        await asyncio.wait_for(client.get_job_execution_result(), 60)
        assert client.get_metrics().get("job.numRestarts", 0) >= 1
        assert sorted(map(int, await values(bs, topic))) == list(range(300))
        assert await open_transactions(bs, topic) == {}


async def test_a_failed_delivery_fails_the_job_with_no_record_to_come(tmp_path):
    """KafkaWriterFaultToleranceITCase#testMailboxExceptionWhenKafkaUnavailable: a NONE sink
    whose broker went away, with no further record to write and no checkpoint to flush: the
    failed delivery still fails the job (Flink's writer callback enqueues a mailbox action that
    throws), rather than leaving it running with the records lost."""
    from test_kafka_flink import string_sink

    import streamflow as sf

    (tmp_path / "broker").mkdir()
    with KafkaBroker(str(tmp_path / "broker")) as broker:
        bs, topic = broker.bootstrap_servers, name("mailbox")
        await create_topic(bs, topic, 1)
        stopped = asyncio.Event()

        async def records() -> Any:
            yield "1"
            await stopped.wait()
            yield "2"  # written after the broker went away
            await asyncio.Event().wait()  # and then nothing, for ever

        env = sf.StreamExecutionEnvironment()
        env.set_restart_strategy(sf.RestartStrategies.no_restart())
        sink = string_sink(bs, topic, DeliveryGuarantee.NONE)
        sink.producer_kw["request_timeout_ms"] = 1000
        env.from_async_iterable(records).sink_to(sink)
        client = await env.execute_async("mailbox")
        async with asyncio.timeout(20):
            while not await read_topic(bs, topic, committed=False):
                await asyncio.sleep(0.05)
        await asyncio.to_thread(broker.stop)
        stopped.set()
        try:
            with pytest.raises(KafkaError):
                await asyncio.wait_for(client.get_job_execution_result(), 15)
        finally:
            await client.cancel()


async def older_savepoint_run(bs: str, topic: str) -> tuple[Any, Any]:
    """Run A: "a" in checkpoint 1, "b" in checkpoint 2, both committed; returns the states of
    checkpoints 1 and 2 (each with its epoch pending, as taken at the barrier)."""
    await create_topic(bs, topic, 1)
    op = await sink_op(bs, topic, topic)
    await op.process_batch(["a"], None)
    first = await barrier(op, 1)
    await op.notify_checkpoint_complete(1)
    await op.process_batch(["b"], None)
    second = await barrier(op, 2)
    await op.notify_checkpoint_complete(2)
    await op.close()
    return first, second


async def test_restoring_the_same_older_savepoint_twice_writes_nothing_again(kafka):
    """The older savepoint (checkpoint 1) restored twice in a row, each run writing a record
    and committing its own checkpoint 2 (ids reused across the branches): "a" and "b" once,
    each branch's record once."""
    bs, topic = kafka.bootstrap_servers, name("older-twice")
    savepoint, _ = await older_savepoint_run(bs, topic)
    for record in ("c", "d"):
        op = await sink_op(bs, topic, topic, savepoint)
        await op.process_batch([record], None)
        await barrier(op, 2)
        await op.notify_checkpoint_complete(2)
        await op.close()
    assert await output(bs, topic) == ["a", "b", "c", "d"]


async def test_restoring_the_latest_checkpoint_after_an_older_savepoint(kafka):
    """Run A's checkpoints 1 and 2 commit; a run restored from checkpoint 1 commits its own
    checkpoint 2 ("c"); then A's checkpoint 2 is restored: its epoch ("b") was committed by A
    (the marker's last entry is the other run's checkpoint 2, which must not decide), so
    nothing is written again."""
    bs, topic = kafka.bootstrap_servers, name("latest-after-older")
    savepoint, latest = await older_savepoint_run(bs, topic)
    op = await sink_op(bs, topic, topic, savepoint)
    await op.process_batch(["c"], None)
    await barrier(op, 2)
    await op.notify_checkpoint_complete(2)
    await op.close()
    op = await sink_op(bs, topic, topic, latest)
    await op.close()
    assert await output(bs, topic) == ["a", "b", "c"]


async def test_a_branch_reusing_checkpoint_ids_does_not_hide_an_uncommitted_epoch(kafka):
    """Run A commits checkpoint 1 ("a"), takes checkpoint 2 ("b") and dies before it commits;
    a run restored from checkpoint 1 commits its own checkpoint 2 ("c"). Restoring A's
    checkpoint 2 must still write "b": the same checkpoint id committed on another branch says
    nothing about A's epoch (KafkaCommitter commits the restored transaction: "b" appears)."""
    bs, topic = kafka.bootstrap_servers, name("branch-reuses-ids")
    await create_topic(bs, topic, 1)
    op = await sink_op(bs, topic, topic)
    await op.process_batch(["a"], None)
    savepoint = await barrier(op, 1)
    await op.notify_checkpoint_complete(1)
    await op.process_batch(["b"], None)
    uncommitted = await barrier(op, 2)
    await op.close()  # dies before checkpoint 2 completes: T_2 aborted
    op = await sink_op(bs, topic, topic, savepoint)
    await op.process_batch(["c"], None)
    await barrier(op, 2)
    await op.notify_checkpoint_complete(2)
    await op.close()
    op = await sink_op(bs, topic, topic, uncommitted)
    await op.close()
    assert await output(bs, topic) == ["a", "b", "c"]


async def test_a_failure_during_the_recommit_leaves_the_restore_to_redo_it(kafka):
    """A restore's re-commit fails after its re-sent epoch and marker went into the transaction
    (fault point ``recommit``); the next restore of the same checkpoint aborts that transaction
    (a new producer of the id) and re-sends the epoch again, which the marker (only committed
    with it) still does not name: "b" once."""
    bs, topic = kafka.bootstrap_servers, name("recommit-fails")
    await create_topic(bs, topic, 1)
    op = await sink_op(bs, topic, topic)
    await op.process_batch(["a"], None)
    await barrier(op, 1)
    await op.notify_checkpoint_complete(1)
    await op.process_batch(["b"], None)
    state = await barrier(op, 2)
    await op.close()
    crashed = await sink_op(bs, topic, topic, state, start=False)
    faults.inject("recommit")
    try:
        with pytest.raises(faults.InjectedFault):
            await crashed.open()
    finally:
        faults.clear()
    op = await sink_op(bs, topic, topic, state)  # (the crashed one left its transaction open)
    await op.close()
    await crashed.close()  # fenced by now: its abort fails, logged
    assert await output(bs, topic) == ["a", "b"]
