"""Idle connections dropped by the Kafka client do not touch exactly-once output.

aiokafka (as Kafka's Java client) closes a connection that has been idle for
``connections.max.idle.ms`` (default 9 minutes) and reconnects on the next request. An
EXACTLY_ONCE job whose checkpoint interval (or a quiet input) is longer than that has its
producer's connections dropped while a transaction is open: after some sends, before the
commit. A transaction belongs to the producer id and epoch on the broker, not to a TCP
connection, so the later sends and the commit on new connections continue it; the connection
guard (``kafka_connection_guard``) fails the task only for a broken or timed-out connection, not
for the client's own idle drop. This module proves it end to end on the test broker with a
0.5 s idle limit, a checkpoint interval four times that, and a fresh ``read_committed`` reader.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import Counter
from typing import Any

import aiokafka
from aiokafka.conn import AIOKafkaConnection, CloseReason
from test_kafka_e2e import _string_sink  # the string-valued KafkaSink of the e2e tests

import streamflow as sf
from streamflow.common.serialization import SimpleStringSchema
from streamflow.datastream.connectors.base import DeliveryGuarantee
from streamflow.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource
from streamflow.testing.kafka_broker import (
    add_partitions,
    create_topic,
    open_transactions,
    produce,
    read_topic,
)

_ids = itertools.count()
IDLE_MS = 500
INTERVAL_MS = 2000  # the checkpoint interval: four idle limits


class _Events:
    """What the sink's producer and the source's consumers did, in order: ``("send", parts)`` a
    batch handed to the sink's producer, ``("commit", None)`` its transaction committed,
    ``("drop", parts)`` an idle drop of one of its connections, with the partitions its open
    transaction had written to at that moment (empty: no record yet, or no transaction), and
    ``("source drop", client id)`` an idle drop of a source consumer's connection."""

    def __init__(self, monkeypatch: Any) -> None:
        self.log: list[tuple[str, Any]] = []
        self.producer: Any = None
        events = self
        real_close = AIOKafkaConnection.close

        def close(conn: Any, reason: Any = None, exc: Any = None) -> Any:
            if reason == CloseReason.IDLE_DROP:
                if conn._client_id == "idle-sink" and events.producer is not None:
                    txn = events.producer._txn_manager
                    parts = txn.txn_partitions if txn.is_in_transaction() else ()
                    events.log.append(("drop", frozenset(parts)))
                elif conn._client_id.startswith("idle-source"):
                    events.log.append(("source drop", conn._client_id))
            return real_close(conn, reason, exc)

        class Producer(aiokafka.AIOKafkaProducer):  # type: ignore[misc]
            def __init__(self, **kw: Any) -> None:
                super().__init__(**kw)
                if events.producer is None and kw.get("transactional_id"):  # the sink's (then the
                    events.producer = self  # probe of lingering ids, which only initialises its id)

            async def send_batch(self, batch: Any, topic: str, *, partition: int) -> Any:
                events.log.append(("send", (topic, partition)))
                return await super().send_batch(batch, topic, partition=partition)

            async def commit_transaction(self) -> None:
                await super().commit_transaction()
                events.log.append(("commit", None))

        monkeypatch.setattr(AIOKafkaConnection, "close", close)
        monkeypatch.setattr(aiokafka, "AIOKafkaProducer", Producer)

    def drop_in_a_transaction_between_sends(self) -> bool:
        """Case (1): a drop while the open transaction holds records, then a send before the next
        commit, then that commit."""
        state = "before"
        for kind, info in self.log:
            if kind == "drop" and info and state == "before":
                state = "dropped"
            elif kind == "send" and state == "dropped":
                state = "sent after"
            elif kind == "commit":
                if state == "sent after":
                    return True
                state = "before"
        return False

    async def until(self, what: str, cond: Any, job: asyncio.Future, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert not job.done(), f"the job ended waiting for {what}: {job.result()!r}"
            assert time.monotonic() < deadline, f"no {what} within {timeout} s: {self.log}"
            await asyncio.sleep(0.02)


async def test_idle_drops_in_and_between_transactions_keep_every_record_exactly_once(kafka, tmp_path,
                                                                                      monkeypatch, caplog):
    """EXACTLY_ONCE, ``connections.max.idle.ms`` 0.5 s on the sink's producer and the source's
    consumers, a checkpoint every 2 s: (1) records are sent into a transaction, its connections
    are dropped idle while it is open, more records follow into it, the checkpoint commits it;
    (2) the producer idles in the next (empty) transaction, its connections dropped again; (3) a
    source subtask that owns no partition idles between discoveries (2 s) and its consumer's
    connection is dropped; discovery then gives it a new partition, whose records it reads on a
    new connection. Every record is committed exactly once, no transaction stays open, the job
    never failed (no restart allowed), and the source's offset commits to its group after each
    checkpoint (on a dropped coordinator connection too) never failed."""
    events = _Events(monkeypatch)
    bs = kafka.bootstrap_servers
    n = next(_ids)
    src, dst = f"idle-in-{n}", f"idle-out-{n}"
    await create_topic(bs, src, 1)
    await create_topic(bs, dst, 1)

    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(INTERVAL_MS)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
    env.set_restart_strategy(sf.RestartStrategies.no_restart())  # a task failure fails the test
    source = (
        KafkaSource.builder().set_bootstrap_servers(bs).set_topics(src).set_group_id(f"idle-group-{n}")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_property("partition.discovery.interval.ms", str(INTERVAL_MS))
        .set_property("connections.max.idle.ms", str(IDLE_MS)).set_property("client.id.prefix", "idle-source")
        .set_value_only_deserializer(SimpleStringSchema()).build()
    )  # fmt: skip
    sink = _string_sink(bs, dst, DeliveryGuarantee.EXACTLY_ONCE, connections_max_idle_ms=str(IDLE_MS),
                        client_id="idle-sink")
    # two source subtasks, one sink subtask: the source subtask without a partition idles
    env.from_source(source, None, "kafka").uid("idle-in").set_parallelism(2).sink_to(sink).uid("idle-out")
    client = await env.execute_async("idle-connections")
    job = asyncio.ensure_future(client.get_job_execution_result())
    caplog.set_level(logging.WARNING, logger="streamflow")
    sent: list[str] = []

    async def send(label: str, partition: int = 0) -> None:
        values = [f"{label}{i}" for i in range(20)]
        await produce(bs, src, [v.encode() for v in values], partition=partition)
        sent.extend(values)

    def completed() -> int:
        return int(client.get_metrics().get("checkpoints.numberOfCompletedCheckpoints", 0))

    try:
        # (1) right after a checkpoint (2 s to the next): sends, an idle drop while the
        # transaction holds them, more sends into it; retried if the machine was too slow
        for attempt in range(3):
            done = completed()
            await events.until("checkpoint", lambda: completed() > done, job)  # noqa: B023
            seen = len(events.log)
            await send(f"A{attempt}-")
            await events.until("drop in an open transaction",
                               lambda: any(k == "drop" and i for k, i in events.log[seen:]), job)  # noqa: B023
            await send(f"B{attempt}-")
            await events.until("commit", lambda: ("commit", None) in events.log[seen:], job)  # noqa: B023
            if events.drop_in_a_transaction_between_sends():
                break
        else:
            raise AssertionError(f"never a drop between sends of one transaction: {events.log}")
        # (2) idle in the next transaction before any send; (3) an idle source subtask's consumer
        seen = len(events.log)
        await events.until("drop between transactions",
                           lambda: any(k == "drop" and not i for k, i in events.log[seen:]), job)
        await events.until("source drop", lambda: any(k == "source drop" for k, _ in events.log[seen:]), job)
        await add_partitions(bs, src, 2)  # the new partition goes to the subtask that owned none
        await send("C", partition=1)
        deadline = time.monotonic() + 15
        while Counter(m.value.decode() for m in await read_topic(bs, dst)) != Counter(sent):
            assert not job.done(), job.result()
            assert time.monotonic() < deadline, "records not committed within 15 s"
            await asyncio.sleep(0.2)
    finally:
        if not job.done():
            await client.cancel()
    out = [m.value.decode() for m in await read_topic(bs, dst)]
    assert Counter(out) == Counter(sent)
    assert await open_transactions(bs, dst) == {}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert await committed_offset(bs, f"idle-group-{n}", src, 0) == sent.index("C0")  # A and B


async def committed_offset(bootstrap: str, group: str, topic: str, partition: int) -> int | None:
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                         enable_auto_commit=False)
    await consumer.start()
    try:
        return await consumer.committed(aiokafka.TopicPartition(topic, partition))
    finally:
        await consumer.stop()


