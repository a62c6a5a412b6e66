"""Idle connections dropped by the Kafka client do not touch exactly-once output.

aiokafka (as Kafka's Java client) closes a connection that has been idle for
``connections.max.idle.ms`` (default 9 minutes) and reconnects on the next request. An
EXACTLY_ONCE job whose checkpoint interval (or a quiet input) is longer than that has its
producer's connections dropped while a transaction is open: after some sends, before the
commit. A transaction belongs to the producer id and epoch on the broker, not to a TCP
connection, so the later sends and the commit on new connections continue it; the connection
guard (``kafka_connection_guard``) fails the task only for a broken or timed-out connection, not
for the client's own idle drop. This module proves it end to end on the test broker with a
1-second idle limit, a checkpoint interval above it, and a fresh ``read_committed`` reader.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from typing import Any

import aiokafka
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions
from aiokafka.conn import AIOKafkaConnection, CloseReason
from test_kafka_e2e import _string_sink  # the string-valued KafkaSink of the e2e tests

import streamflow as sf
from streamflow.common.serialization import SimpleStringSchema
from streamflow.datastream.connectors.base import DeliveryGuarantee
from streamflow.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource
from streamflow.testing.kafka_broker import create_topic, open_transactions, produce, read_topic

_ids = itertools.count()
IDLE_MS = 700


class _Drops:
    """Every idle drop of a sink or source connection, with the sink's transaction at that moment
    (the partitions its open transaction has written to, None outside a transaction)."""

    def __init__(self, monkeypatch: Any) -> None:
        self.sink: list[tuple[float, frozenset | None]] = []
        self.source: list[float] = []
        self.producer: Any = None
        drops = self
        real_close = AIOKafkaConnection.close

        def close(conn: Any, reason: Any = None, exc: Any = None) -> Any:
            if reason == CloseReason.IDLE_DROP:
                if conn._client_id == "idle-sink" and drops.producer is not None:
                    txn = drops.producer._txn_manager
                    drops.sink.append((time.monotonic(), frozenset(txn.txn_partitions)
                                       if txn.is_in_transaction() else None))
                elif conn._client_id.startswith("idle-source"):
                    drops.source.append(time.monotonic())
            return real_close(conn, reason, exc)

        class Producer(aiokafka.AIOKafkaProducer):  # type: ignore[misc]
            def __init__(self, **kw: Any) -> None:
                super().__init__(**kw)
                if drops.producer is None and kw.get("transactional_id"):  # the sink's (then the probe
                    # of lingering ids, which only initialises its id)
                    drops.producer = self

        monkeypatch.setattr(AIOKafkaConnection, "close", close)
        monkeypatch.setattr(aiokafka, "AIOKafkaProducer", Producer)

    async def until(self, what: str, cond: Any, job: asyncio.Future, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert not job.done(), f"the job ended waiting for an idle drop {what}: {job.result()!r}"
            assert time.monotonic() < deadline, (f"no idle drop {what} within {timeout} s: "
                                                 f"{self.sink} {self.source}")
            await asyncio.sleep(0.05)


async def test_idle_drops_in_and_between_transactions_keep_every_record_exactly_once(kafka, tmp_path,
                                                                                      monkeypatch):
    """EXACTLY_ONCE, ``connections.max.idle.ms`` 0.7 s on the sink's producer and the source's
    consumers, a checkpoint every 1.5 s: (1) records are sent into a transaction, its
    connections are dropped idle while it is open, more records follow, a checkpoint commits it;
    (2) the producer idles in the next (empty) transaction, its connections dropped again; (3) a
    source subtask that owns no partition idles between discoveries (1.5 s) and its consumer's
    connection is dropped; discovery then gives it a new partition, whose records it reads on a
    new connection. Every record is committed exactly once, no transaction stays open, and the
    job never failed (no restart allowed)."""
    drops = _Drops(monkeypatch)
    bs = kafka.bootstrap_servers
    n = next(_ids)
    src, dst = f"idle-in-{n}", f"idle-out-{n}"
    await create_topic(bs, src, 1)
    await create_topic(bs, dst, 1)
    batches = [[f"{b}{i}" for i in range(20)] for b in "ABC"]

    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(1500)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
    env.set_restart_strategy(sf.RestartStrategies.no_restart())  # a task failure fails the test
    source = (
        KafkaSource.builder().set_bootstrap_servers(bs).set_topics(src)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_property("partition.discovery.interval.ms", "1500")
        .set_property("connections.max.idle.ms", str(IDLE_MS)).set_property("client.id.prefix", "idle-source")
        .set_value_only_deserializer(SimpleStringSchema()).build()
    )  # fmt: skip
    sink = _string_sink(bs, dst, DeliveryGuarantee.EXACTLY_ONCE, connections_max_idle_ms=str(IDLE_MS),
                        client_id="idle-sink")
    # two source subtasks, one sink subtask: the source subtask without a partition idles
    env.from_source(source, None, "kafka").uid("idle-in").set_parallelism(2).sink_to(sink).uid("idle-out")
    client = await env.execute_async("idle-connections")
    job = asyncio.ensure_future(client.get_job_execution_result())
    try:
        # (1) sends, then an idle drop while the transaction is open with them, then more sends
        await produce(bs, src, [v.encode() for v in batches[0]])
        await drops.until("in an open transaction", lambda: any(parts for _, parts in drops.sink), job)
        mid = time.monotonic()
        await produce(bs, src, [v.encode() for v in batches[1]])
        # (2) committed, then idle in the next transaction before any send; (3) a source idle too
        await drops.until("between transactions",
                          lambda: any(at > mid and not parts for at, parts in drops.sink), job)
        await drops.until("of a source's consumer", lambda: any(at > mid for at in drops.source), job)
        await add_partitions(bs, src, 2)  # the new partition goes to the subtask that owned none
        await produce(bs, src, [v.encode() for v in batches[2]], partition=1)
        expected = Counter(v for b in batches for v in b)
        deadline = time.monotonic() + 15
        while Counter(m.value.decode() for m in await read_topic(bs, dst)) != expected:
            assert not job.done(), job.result()
            assert time.monotonic() < deadline, "records not committed within 15 s"
            await asyncio.sleep(0.2)
    finally:
        if not job.done():
            await client.cancel()
    out = [m.value.decode() for m in await read_topic(bs, dst)]
    assert Counter(out) == expected
    assert await open_transactions(bs, dst) == {}


async def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_partitions({topic: NewPartitions(total)})
    finally:
        await admin.close()
