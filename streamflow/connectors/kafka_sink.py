"""KafkaSink with PyFlink's names: delivery guarantee NONE, AT_LEAST_ONCE or EXACTLY_ONCE.

Theory of operation
-------------------
Per batch the operator serializes every record and groups the records per topic partition
(:mod:`.kafka_sink_routing`: the user's partitioner, else Kafka's murmur2 of the key over the
topic's partitions, else Kafka's sticky partitioner), and appends each group
to aiokafka ``BatchBuilder`` objects handed to ``send_batch`` (no per-record ``await``). Delivery
results are futures checked at every flush; the first failed delivery is also kept as it happens and
fails the task at once (a processing-time callback: Flink's mailbox action), or else the next batch
or ``close`` (Flink's ``KafkaWriter#checkAsyncException`` in ``write`` and ``close``); a delivery
that fails once closing began is only logged, as Flink's ``closed`` flag does.
What it writes is counted as Flink's sink writer metrics (``sink_metrics.py``: numRecordsSend,
numBytesSend, errors, send time).

* ``NONE``: no flush at checkpoints; the producer still waits for acknowledgements
  (``acks=all``, Kafka's default, as in Flink), so a record the broker refuses fails the task
  at the next flush or batch (``set_property("acks", "0")`` for fire and forget).
* ``AT_LEAST_ONCE``: ``prepare_snapshot_pre_barrier`` flushes, so every record before barrier n is
  acknowledged before the sink acknowledges n.
* ``EXACTLY_ONCE``: two-phase commit on producer transactions, tied to checkpoints; the bookkeeping
  and the recovery method are in :mod:`.kafka_txn` (read its docstring). Barrier n: flush
  (pre-commit), the epoch's records go into the state; ``notify_checkpoint_complete(n)``: marker,
  ``commit_transaction``, ``begin_transaction``. Transactional id ``{prefix}-{uid}-{subtask}``: a
  restarted job fences its zombie and aborts its open transaction on ``init_transactions``. Restored
  at another parallelism, a subtask takes over the states of former subtasks
  (``rescale.taken_states``): it aborts a vanished one's open transaction (``kafka_txn_admin``) and
  recovers its epochs under that subtask's marker; ids no checkpoint names (a higher parallelism's
  run that failed before its first checkpoint) are probed and aborted as Flink's
  ``TransactionAborter`` does (``kafka_txn_admin.abort_lingering_transactions``). A broker
  connection closed (broken or timed out) during a transaction fails the task: the test broker loses
  a transaction across its restart while later sends and the commit report success, and Apache Kafka
  aborts it; the failover's recovery re-sends it. Closing (whatever ended the task) aborts the open
  transaction, as Flink's ``ExactlyOnceKafkaWriter#close`` aborts its current one, so
  ``read_committed`` consumers read past it at once rather than after the transaction timeout
  (never, on a broker without one); best effort, within ``ABORT_ON_CLOSE_S``, and skipped after a
  lost connection (that transaction is gone). Its records are safe: the epochs of completed
  checkpoints are in their state and recovery re-sends them, the others are replayed. Closing never
  flushes: the batches the sender has not taken are dropped first (a flush waits out a broker
  outage, and batches written into a transaction the broker forgot stay open there).
* Producer properties (``set_property``) map to aiokafka's arguments
  (``kafka_common.producer_config``); any other one is logged as ignored.
* Crash-test points (``testing.faults``): ``commit`` (marker sent, commit not
  yet), ``committed`` (committed, next transaction not begun), ``recommit`` (a restore's
  re-sent epochs and their marker sent, commit not yet).
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from typing import Any

from .. import _faults as faults
from ..runtime.operator import StreamOperator
from . import kafka_txn_admin as admin
from .base import Sink
from .kafka_common import DeliveryGuarantee, producer_config
from .kafka_connection_guard import BrokerConnectionLost, ConnectionGuard
from .kafka_record_serialization import KafkaRecordSerializationSchema
from .kafka_sink_routing import RecordRouter
from .kafka_txn import CommitHistory, Group, TransactionBook, recovery_plan, unpack_groups
from .rescale import taken_states
from .sink_metrics import SinkWriterMetrics

__all__ = ["BrokerConnectionLost", "KafkaRecordSerializationSchema", "KafkaSink", "KafkaSinkBuilder",
           "KafkaSinkOperator"]

log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_SIZE = 1 << 20  # Kafka's and aiokafka's max.request.size
ABORT_ON_CLOSE_S = 5.0  # how long close waits for the abort of the open transaction

class KafkaSink(Sink):
    """Build with ``KafkaSink.builder()``; see the module docstring."""

    has_committer = True  # as Flink 2's KafkaSink (SupportsCommitter), whatever the guarantee

    def __init__(
        self,
        bootstrap_servers: str,
        record_serializer: KafkaRecordSerializationSchema,
        delivery_guarantee: DeliveryGuarantee = DeliveryGuarantee.NONE,
        transactional_id_prefix: str | None = None,
        properties: dict[str, str] | None = None,
    ) -> None:
        if delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE and not transactional_id_prefix:
            raise ValueError("KafkaSink: EXACTLY_ONCE needs set_transactional_id_prefix()")
        self.bootstrap_servers = bootstrap_servers
        self.record_serializer = record_serializer
        self.delivery_guarantee = delivery_guarantee
        self.transactional_id_prefix = transactional_id_prefix
        self.properties = dict(properties or {})
        # checked now: a bad property fails build(), not the running job
        eos = delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
        self.producer_kw = producer_config(self.properties, eos)

    @staticmethod
    def builder() -> KafkaSinkBuilder:
        return KafkaSinkBuilder()

    def create_operator(self, name: str) -> StreamOperator:
        return KafkaSinkOperator(name, self)


class KafkaSinkBuilder:
    def __init__(self) -> None:
        self._bootstrap = ""
        self._serializer: KafkaRecordSerializationSchema | None = None
        self._guarantee = DeliveryGuarantee.NONE
        self._prefix: str | None = None
        self._props: dict[str, str] = {}

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSinkBuilder:
        self._bootstrap = bootstrap_servers
        return self

    def set_record_serializer(self, serializer: KafkaRecordSerializationSchema) -> KafkaSinkBuilder:
        self._serializer = serializer
        return self

    def set_delivery_guarantee(self, guarantee: DeliveryGuarantee) -> KafkaSinkBuilder:
        self._guarantee = guarantee
        return self

    def set_transactional_id_prefix(self, prefix: str) -> KafkaSinkBuilder:
        self._prefix = prefix
        return self

    def set_property(self, key: str, value: str) -> KafkaSinkBuilder:
        if key == "bootstrap.servers":  # as Flink's builder: what set_bootstrap_servers sets
            return self.set_bootstrap_servers(value)
        self._props[key] = value
        return self

    def build(self) -> KafkaSink:
        if not self._bootstrap:
            raise ValueError("KafkaSink: set_bootstrap_servers() is required")
        if self._serializer is None:
            raise ValueError("KafkaSink: set_record_serializer() is required")
        return KafkaSink(self._bootstrap, self._serializer, self._guarantee, self._prefix, self._props)


class KafkaSinkOperator(StreamOperator):
    """One subtask of a :class:`KafkaSink` (see the module docstring)."""

    def __init__(self, name: str, sink: KafkaSink) -> None:
        super().__init__(name)
        self.sink = sink
        self.eos = sink.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
        self.book = TransactionBook(uuid.uuid4().hex[:12])
        self.producer: Any = None
        self._taken: list[tuple[int, dict[str, Any]]] = []  # (former subtask, its state) on restore
        self.router = RecordRouter(sink.record_serializer, self._partitions_for)
        self._futures: list[asyncio.Future[Any]] = []
        self._delivery_error: BaseException | None = None  # the first failed delivery, not yet raised
        self._closing = False
        self._guard = ConnectionGuard(name)  # EXACTLY_ONCE: a lost connection fails the task
        self._committing = asyncio.Lock()  # one commit at a time; close waits for it
        self.marker_topic: str | None = None
        self._history: CommitHistory | None = None  # this subtask's marker (kafka_txn); None: not read
        self.writer_metrics = SinkWriterMetrics()  # in the operator's metric group (initialize_state)
        self.max_request_size = DEFAULT_MAX_REQUEST_SIZE

    def transactional_id_of(self, subtask: int) -> str:
        uid = re.sub(r"[^A-Za-z0-9._-]", "_", self.uid)
        return f"{self.sink.transactional_id_prefix}-{uid}-{subtask}"

    @property
    def transactional_id(self) -> str:
        return self.transactional_id_of(self.ctx.subtask_index)

    @property
    def marker_group(self) -> str:
        return f"{self.transactional_id}.commits"

    # -- lifecycle -----------------------------------------------------------
    def initialize_state(self, restored: Any | None) -> None:
        """Its own state, or on a rescale the states of the former subtasks it takes
        (``rescale.taken_states``): their uncommitted epochs are recovered at ``open``."""
        me = self.ctx.subtask_index
        self.writer_metrics.attach(self.ctx.metrics)
        self._taken = [(j, dict(state)) for j, state in
                       taken_states(restored, me, self.ctx.parallelism, f"kafka sink {self.uid}")]
        for j, state in self._taken:
            if j == me:
                self.marker_topic = state.get("marker_topic")

    async def open(self) -> None:
        await super().open()
        from aiokafka import AIOKafkaProducer

        # acks=all for every guarantee: Kafka's producer default, which Flink's KafkaSink keeps for
        # NONE too (NONE only skips the flush at checkpoints); with acks=0 a record the broker
        # refuses (too large for the topic, ...) was lost without an error
        kw: dict[str, Any] = {"bootstrap_servers": self.sink.bootstrap_servers, "max_batch_size": 1 << 20,
                              "acks": "all"}
        kw.update(self.sink.producer_kw)  # the user's properties (``set_property``)
        self.max_request_size = kw.get("max_request_size", DEFAULT_MAX_REQUEST_SIZE)
        self.router.max_age_s = kw.get("metadata_max_age_ms", 300_000) / 1000  # as the producer's metadata
        if self.eos:
            kw.update(transactional_id=self.transactional_id, enable_idempotence=True)
        self.producer = AIOKafkaProducer(**kw)
        if self.eos:
            self._guard.watch(self.producer)  # before start: connections take the callback when created
        await self.producer.start()  # EOS: InitProducerId fences the old producer, aborts its open txn
        if self.eos:
            for j, state in self._taken:  # a former subtask that no longer exists, or another prefix's
                if (former := admin.former_id(state, self.transactional_id_of(j))) != self.transactional_id:
                    await admin.abort_open_transaction({**kw, "transactional_id": former})
                await self._recover(j, state)
            await admin.abort_lingering_transactions(kw, self.transactional_id_of, self.ctx.subtask_index,
                                               self.ctx.parallelism)
            await self._guarded(self.producer.begin_transaction())

    async def close(self) -> None:
        self._closing = True
        try:
            await super().close()
        finally:
            async with self._committing:  # never stop the producer under a running commit
                producer, self.producer = self.producer, None
            if producer is not None and self.eos:
                try:
                    await self._abort_on_close(producer)
                finally:  # (also when cancelled meanwhile) never flush an open transaction: a flush
                    # waits out a broker outage, and batches written into a transaction the broker
                    # forgot across a restart stay open there
                    cause = self._broken or BrokerConnectionLost("abandoned")
                    await admin.abandon(producer, cause, self.name)
            elif producer is not None:
                try:
                    await producer.stop()
                except Exception as exc:  # closing only: an open transaction is aborted on restart
                    log.warning("kafka sink %s: stopping the producer failed: %r", self.name, exc)
        self._raise_delivery_error()  # reported before close: the records are lost, say so

    async def _abort_on_close(self, producer: Any) -> None:
        """Abort the open transaction (module doc); a failure is logged: the next initialisation of
        this transactional id aborts it."""
        if self._broken is not None or not producer._txn_manager.is_in_transaction():
            return
        dropped = admin.drop_queued(producer, BrokerConnectionLost("closed: the open transaction is aborted"))
        log.debug("kafka sink %s: closing: %d queued records dropped, aborting the open transaction",
                  self.name, dropped)
        try:
            await asyncio.wait_for(self._guard.call(producer.abort_transaction()), ABORT_ON_CLOSE_S)
        except Exception as exc:
            log.info("kafka sink %s: aborting the open transaction of %s at close failed (%r); the next "
                     "start of that transactional id aborts it", self.name, self.transactional_id, exc)

    async def finish(self) -> None:
        log.debug("kafka sink %s: finish (broken: %r)", self.name, self._broken)
        await self._flush()
        if self.eos and not self.ctx.checkpointing:
            self.book.on_barrier(1)
            await self._commit(1)

    # -- data ----------------------------------------------------------------
    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if not records:
            return
        if self._broken is not None:
            log.debug("kafka sink %s: failing process_batch on %r", self.name, self._broken)
            raise self._broken
        self._raise_delivery_error()
        for group in await self._group(records, timestamps):
            if self.eos:
                if self.book.on_records(group):
                    await self._send(group)
            else:
                await self._send(group)
        if len(self._futures) > 4096:
            self._reap()

    async def _group(self, records: list, timestamps: list[int] | None) -> list[Group]:
        """Serialize a batch and split it into one group per topic partition (kafka_sink_routing)."""
        try:
            serialized = self.router.serialize(records)
        except Exception as exc:
            raise self.failure(exc) from None
        groups = await self.router.group(records, timestamps, serialized)
        self.marker_topic = self.marker_topic or groups[0].topic
        return groups

    async def _partitions_for(self, topic: str) -> list[int]:
        return list(await self._guarded(self.producer.partitions_for(topic)))

    async def _send(self, group: Group) -> None:
        producer = self.producer
        keys, ts, hdrs = group.keys, group.timestamps, group.headers
        if ts and min(ts) < 0:  # Flink writes no timestamp for a negative one (the producer's time)
            ts = [t if t >= 0 else None for t in ts]  # type: ignore[misc]
        batch = producer.create_batch()
        for i, value in enumerate(group.values):
            key = keys[i] if keys is not None else None
            if batch.append(key=key, value=value, timestamp=ts[i] if ts is not None else None,
                            headers=hdrs[i] if hdrs is not None else None) is None:
                await self._send_batch(batch, group)
                batch = producer.create_batch()  # (a first record always fits, as in Kafka's)
                batch.append(key=key, value=value, timestamp=ts[i] if ts is not None else None,
                             headers=hdrs[i] if hdrs is not None else None)
        await self._send_batch(batch, group)
        self.writer_metrics.sent(group.values, keys)

    async def _send_batch(self, batch: Any, group: Group) -> None:
        # a batch over max.request.size holds one record that alone is larger (a batch closes at
        # batch.size): refused as Kafka's producer refuses it (send_batch does not check)
        limit = self.max_request_size
        if batch.size() > limit:
            from aiokafka.errors import MessageSizeTooLargeError

            raise MessageSizeTooLargeError(
                f"kafka sink {self.name!r}: a record of {batch.size()} bytes (serialized, with its "
                f"batch header) for {group.topic}-{group.partition} exceeds max.request.size={limit}")
        # closed: the sender takes it at once (aiokafka lets an open batch linger for linger.ms, and
        # a partition's next batch waits until the sender has taken the one before)
        batch.close()
        sent = await self._guarded(self.producer.send_batch(batch, group.topic, partition=group.partition))
        self._futures.append(self.writer_metrics.watch(sent, batch.record_count()))
        sent.add_done_callback(self._delivered)

    def _delivered(self, fut: asyncio.Future[Any]) -> None:
        """Keep the first failed delivery (module doc), unless closing began or a lost connection
        fails the task already (its producer fails what it held with that cause)."""
        exc = None if fut.cancelled() else fut.exception()
        if exc is None or self._delivery_error is not None or self._broken is not None:
            return
        if self._closing:  # (closing drops the queued batches: each fails)
            log.debug("kafka sink %s: a delivery failed while closing: %r", self.name, exc)
            return
        log.warning("kafka sink %s: a delivery failed (failing the task): %r", self.name, exc)
        self._delivery_error = exc
        service = getattr(self.ctx, "processing_time", None)
        if service is not None:  # Flink's mailbox action: fail even with no record or checkpoint to come
            service.register(service.current_processing_time(), self._fail_on_delivery_error)

    async def _fail_on_delivery_error(self, _ts: int) -> None:
        self._raise_delivery_error()

    def _raise_delivery_error(self) -> None:
        if self._delivery_error is not None:
            error, self._delivery_error = self._delivery_error, None
            raise self.failure(error)

    def _reap(self) -> None:
        """Drop delivered futures; raise the first delivery failure."""
        pending = []
        for fut in self._futures:
            if not fut.done():
                pending.append(fut)
            elif fut.exception() is not None:
                self._delivery_error = None  # raised now (Flink's checkAsyncException resets it)
                raise self.failure(fut.exception())  # type: ignore[arg-type]
        self._futures = pending

    async def _flush(self) -> None:
        if self.producer is None:
            return
        if self._futures:
            await self._guarded(asyncio.gather(*self._futures, return_exceptions=True))
        self._reap()
        if self._broken is not None:
            raise self._broken

    # -- checkpoints ---------------------------------------------------------
    async def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        if self.sink.delivery_guarantee is not DeliveryGuarantee.NONE:
            await self._flush()

    def snapshot_state(self, checkpoint_id: int) -> Any:
        if not self.eos:
            return None
        self.book.on_barrier(checkpoint_id)
        # rescalable: a subtask of any parallelism may take it over (rescale.taken_states)
        return {"marker_topic": self.marker_topic, "pending": self.book.snapshot(), "rescalable": True,
                "subtask": self.ctx.subtask_index, "transactional_id": self.transactional_id}

    async def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self.eos:
            await self._commit(checkpoint_id)

    async def _commit(self, checkpoint_id: int) -> None:
        # Notifications may overlap (the driver notifies the final checkpoint directly while a task
        # may still run an earlier notification as mail): commits run one at a time, in any order
        # (a later checkpoint subsumes an earlier one, whose plan is then empty).
        async with self._committing:
            if self.producer is None:
                raise RuntimeError(f"kafka sink {self.name!r}: checkpoint {checkpoint_id} completed after "
                                   "the producer was closed")
            await self._commit_locked(checkpoint_id)

    async def _commit_locked(self, checkpoint_id: int) -> None:
        plan = self.book.on_complete(checkpoint_id)
        if plan is None:
            log.debug("kafka sink %s: checkpoint %d: nothing to commit", self.name, checkpoint_id)
            return
        log.debug("kafka sink %s: checkpoint %d: committing through %d", self.name, checkpoint_id,
                  plan.marker_checkpoint)
        if self._broken is not None:
            raise self._broken
        for group in plan.send_first:
            await self._send(group)
        if self._history is None:  # once per run: the runs committed before this one stay in it
            self._history = await self._read_history(self.marker_group, self.marker_topic)
        history = self._history.with_commit(plan.marker_token)
        await self._mark(plan.marker_checkpoint, history.text())
        if faults.ARMED:
            faults.point("commit", checkpoint_id)
        await self._guarded(self.producer.commit_transaction())
        self._reap()
        if self._broken is not None:  # the commit may have been lost with the connection
            raise self._broken
        self._history = history
        log.debug("kafka sink %s: checkpoint %d: committed", self.name, checkpoint_id)
        if faults.ARMED:
            faults.point("committed", checkpoint_id)
        await self._guarded(self.producer.begin_transaction())
        for group in plan.send_after:
            await self._send(group)

    async def _read_history(self, group: str, topic: str | None) -> CommitHistory:
        metadata = await admin.committed_marker(self.sink.bootstrap_servers, group, topic)
        return CommitHistory.parse(metadata, f"kafka sink {self.name!r}: marker group {group!r}")

    async def _mark(self, checkpoint_id: int, metadata: str, group: str | None = None,
                    topic: str | None = None) -> None:
        """The marker (``metadata``: a :class:`CommitHistory`'s text) in ``group`` (default: this
        subtask's), inside the open transaction."""
        from aiokafka import TopicPartition
        from aiokafka.structs import OffsetAndMetadata

        topic = topic or self.marker_topic
        assert topic is not None
        group = group or self.marker_group
        await self._guarded(self.producer.send_offsets_to_transaction(
            {TopicPartition(topic, 0): OffsetAndMetadata(checkpoint_id, metadata)}, group
        ))

    async def _recover(self, subtask: int, state: dict[str, Any]) -> None:
        """Re-send the restored epochs of ``subtask`` (this one, or a former one taken over on a
        rescale) whose transaction did not commit, with that subtask's marker (see kafka_txn)."""
        pending = state.get("pending") or []
        if not pending:
            return
        topic, txn_id = state.get("marker_topic"), admin.former_id(state, self.transactional_id_of(subtask))
        group = f"{txn_id}.commits"
        history = await self._read_history(group, topic)
        todo = recovery_plan([list(p) for p in pending], history)
        log.info("kafka sink %s: restored %d uncommitted epoch(s) %s of %s; marker says %r; re-sending %d",
                 self.transactional_id, len(pending), [p[0] for p in pending], txn_id, history.text(),
                 len(todo))
        unknown = [str(e[1]) for e in todo if not history.knows(str(e[1]))]
        if unknown:
            log.warning("kafka sink %s: the marker of %s no longer names the runs of epochs %s (more than %d "
                        "runs committed since): re-sending them, which writes them twice if they were "
                        "committed", self.transactional_id, txn_id, unknown, len(history.last))
        own = group == self.marker_group and topic == self.marker_topic
        if not todo:
            if own:
                self._history = history
            return
        history = history.with_commit(str(todo[-1][1]))
        await self._guarded(self.producer.begin_transaction())
        for _cid, _token, blob in todo:
            for group_ in unpack_groups(blob):
                await self._send(group_)
        await self._mark(int(todo[-1][0]), history.text(), group, topic)
        if faults.ARMED:
            faults.point("recommit", int(todo[-1][0]))
        await self._guarded(self.producer.commit_transaction())
        self._reap()
        if self._broken is not None:
            raise self._broken
        if own:
            self._history = history
        log.info("kafka sink %s: re-sent and committed epochs %s of %s", self.transactional_id,
                 [e[0] for e in todo], txn_id)

    async def _guarded(self, aw: Any) -> Any:
        """Await a producer call; EXACTLY_ONCE: through the connection guard (a lost connection
        raises :class:`BrokerConnectionLost`; :mod:`.kafka_connection_guard`)."""
        return await (self._guard.call(aw) if self.eos else aw)

    @property
    def _broken(self) -> BaseException | None:
        return self._guard.broken
