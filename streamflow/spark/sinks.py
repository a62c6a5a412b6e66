"""Sinks on the Spark engine: one ``foreachBatch`` query per sink.

Spark's ``foreachBatch`` is at-least-once: after a driver crash the last micro-batch runs
again with the same batch id. So each sink is written idempotently per batch id:

* ``FileSink`` writes one part file per micro-batch, named by the sink's uid and the batch
  id, atomically (temporary file, fsync, rename): a replayed batch rewrites the same file
  with the same bytes, and a half-written one is never visible. Exactly once. Its base path
  only: a date-time bucket assigner is refused (a replayed batch would change buckets).
* Every other sink (collect, print, queue, a ``SinkFunction``) gets the records through its
  own operator, run in the job's event loop, in input order; the last batch id delivered
  is remembered so a batch is never delivered twice within one run. Across a driver
  crash these are at-least-once, as they are on the asyncio engine without checkpoints.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ..connectors.file_sink import FileSinkOperator
from ..connectors.kafka_sink import KafkaSinkOperator
from ..connectors.kafka_txn import CommitHistory, TransactionBook
from ..runtime.operator import Output, StreamOperator
from ..state.codec import Codec
from .encoding import batch_codec, sort_by_order
from .harness import NodeSpec, _context
from .native import Layout, records_from_arrow

_log = logging.getLogger(__name__)


class BatchSink:
    """Receives the decoded records of one micro-batch, in order."""

    def open(self) -> None: ...

    def write(self, batch_id: int, records: list, timestamps: list[int | None]) -> None:
        raise NotImplementedError

    def finish(self) -> None: ...

    def close(self) -> None: ...


class FileBatchSink(BatchSink):
    def __init__(self, operator: FileSinkOperator, uid: str) -> None:
        self.sink = operator.sink
        self.uid = uid
        if self.sink.bucket_assigner.kind != "base-path":
            # a replayed micro-batch (same batch id, later processing time) would land in another
            # bucket next to its first copy: refused before any query starts, not ignored
            raise ValueError(
                f"on the Spark engine a FileSink writes each micro-batch into its base path; "
                f"{self.sink.bucket_assigner!r} would put a micro-batch replayed after a driver crash "
                "into another bucket than its first run (its processing time differs), breaking "
                "exactly-once: use BucketAssigner.base_path_bucket_assigner(), or run the job on the "
                "asyncio engine"
            )
        if self.sink.compact_strategy is not None:
            # one part file per micro-batch, replayed by batch id: compacting them needs its own
            # protocol (a replay must not write a batch a compacted file already holds); refused
            # rather than writing uncompacted files
            raise ValueError(
                "on the Spark engine a FileSink writes one part file per micro-batch and does not "
                "compact them: enable_compact() is not supported there (drop it, or run the job on "
                "the asyncio engine)"
            )

    def open(self) -> None:
        os.makedirs(self.sink.base_path, exist_ok=True)

    def write(self, batch_id: int, records: list, timestamps: list[int | None]) -> None:
        if not records:
            return
        config = self.sink.output_file_config
        name = f"{config.part_prefix}-spark-{_safe(self.uid)}-{batch_id:08d}{config.part_suffix}"
        final = os.path.join(self.sink.base_path, name)
        tmp = os.path.join(self.sink.base_path, f".{name}.tmp")
        data = self.sink.encoder.encode_batch(records)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        fd = os.open(self.sink.base_path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class OperatorBatchSink(BatchSink):
    """Any other sink: its operator runs in the job's event loop (the caller's)."""

    def __init__(self, operator: StreamOperator, spec: NodeSpec, loop: asyncio.AbstractEventLoop) -> None:
        self.op = operator
        self.spec = spec
        self.loop = loop
        self.last_batch = -1

    def _call(self, coro: Any) -> None:
        future: Future[None] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        future.result()

    def open(self) -> None:
        self.op.setup(_context(self.spec, {}), Output([], {}))
        self.op.initialize_state(None)
        self._call(self.op.open())

    def write(self, batch_id: int, records: list, timestamps: list[int | None]) -> None:
        if batch_id <= self.last_batch or not records:
            return
        ts = timestamps if all(t is not None for t in timestamps) else None
        self._call(self.op.process_batch(records, ts))  # type: ignore[arg-type]
        self.last_batch = batch_id

    def finish(self) -> None:
        self._call(self.op.finish())

    def close(self) -> None:
        try:
            self._call(self.op.close())
        finally:
            self.op.dispose()


class KafkaBatchSink(OperatorBatchSink):
    """A KafkaSink: each micro-batch is one checkpoint epoch of its two-phase commit (see
    :mod:`.kafka`); a batch whose commit marker is already there is not written again.

    The marker counts batch ids, which restart at 0 with a new checkpoint location, so only
    what it says of this one is trusted: its commit history (the offset's metadata,
    :class:`.kafka_txn.CommitHistory`, shared by the runs writing that transactional id) has an
    entry per run, and the run id is kept in the query's checkpoint directory, made anew when
    that directory holds no offset log yet (no batch of it can have been written)."""

    op: KafkaSinkOperator

    def __init__(self, operator: KafkaSinkOperator, spec: NodeSpec, loop: asyncio.AbstractEventLoop,
                 checkpoint_dir: str) -> None:
        super().__init__(operator, spec, loop)
        self.checkpoint_dir = checkpoint_dir
        self.committed = -1

    def open(self) -> None:
        super().open()
        if not self.op.eos:
            return
        run = _run_id(self.checkpoint_dir)
        self.op.book = TransactionBook(run)  # tokens "<run>/<batch id + 1>": this checkpoint's own
        markers = self._result(self._marker())  # one per marker topic the group has
        where = f"kafka sink {self.spec.uid}: marker group {self.op.marker_group!r}"
        found = [n for m in markers if (n := dict(CommitHistory.parse(m, where).last).get(run)) is not None]
        mine = max(found, default=None)
        if markers and mine is None:
            _log.info("kafka sink %s: the commit markers (%r) name no batch of checkpoint location %s "
                      "(run %s); every micro-batch is written", self.spec.uid, markers, self.checkpoint_dir,
                      run)
        elif mine is not None:
            self.committed = mine
            _log.info("kafka sink %s: micro-batches up to %d committed before this start", self.spec.uid,
                      mine - 1)

    def _result(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _marker(self) -> list[str]:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=self.op.sink.bootstrap_servers)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets(self.op.marker_group)
        finally:
            await admin.close()
        return [meta.metadata or "" for meta in offsets.values()]

    def write(self, batch_id: int, records: list, timestamps: list[int | None]) -> None:
        epoch = batch_id + 1
        if not records:
            return
        if epoch <= self.committed:
            _log.info("kafka sink %s: micro-batch %d (%d records) was committed before a restart; "
                      "not written again", self.spec.uid, batch_id, len(records))
            return
        ts = timestamps if all(t is not None for t in timestamps) else None
        self._call(self.op.process_batch(records, ts))  # type: ignore[arg-type]
        self._call(self.op.prepare_snapshot_pre_barrier(epoch))
        self.op.snapshot_state(epoch)
        done = self.op.notify_checkpoint_complete(epoch)
        if done is not None:
            self._call(done)
        self.committed = epoch
        _log.debug("kafka sink %s: micro-batch %d committed (%d records)", self.spec.uid, batch_id,
                   len(records))

    def finish(self) -> None:
        return None  # every micro-batch committed its own transaction


def _run_id(checkpoint_dir: str) -> str:
    """The run id of a query's checkpoint directory (see :class:`KafkaBatchSink`)."""
    path = os.path.join(checkpoint_dir, "streamflow-sink-run")
    offsets = os.path.join(checkpoint_dir, "offsets")
    started = os.path.isdir(offsets) and any(n.isdigit() for n in os.listdir(offsets))
    if started:
        try:
            with open(path) as f:
                return f.read().strip()
        except FileNotFoundError:
            _log.warning("Spark checkpoint %s has batches but no %s (written by an older version?): "
                         "a new run id; a replayed micro-batch may be written twice", checkpoint_dir, path)
    run = uuid.uuid4().hex[:16]
    os.makedirs(checkpoint_dir, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(run)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return run


def batch_sink_for(spec: NodeSpec, loop: asyncio.AbstractEventLoop, checkpoint_dir: str) -> BatchSink:
    """The sink of ``spec``'s query, whose Spark checkpoint location is ``checkpoint_dir``."""
    op = spec.factory.create(0)
    if isinstance(op, FileSinkOperator):
        return FileBatchSink(op, spec.uid)
    if isinstance(op, KafkaSinkOperator):
        return KafkaBatchSink(op, spec, loop, checkpoint_dir)
    return OperatorBatchSink(op, spec, loop)


def foreach_batch(sink: BatchSink, codec: Codec, after: Callable[[int], None] | None = None,
                  layout: Layout | None = None) -> Any:
    """The ``foreachBatch`` function: collect, sort by input order, decode (or rebuild from typed
    columns, with ``layout``), write."""

    _encode_many, decode_many = batch_codec(codec.encode, codec.decode)
    columns = ["value"] if layout is None else layout.columns

    def run(batch_df: Any, batch_id: int) -> None:
        table = batch_df.where("eof = false").select("order", "ts", *columns).toArrow()
        table = table.take(sort_by_order(table.column("order").combine_chunks()))
        records = (decode_many(table.column("value").to_pylist()) if layout is None
                   else records_from_arrow(table, layout))
        sink.write(batch_id, records, table.column("ts").to_pylist())
        if after is not None:
            after(batch_id)

    return run


def _safe(uid: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in uid)
