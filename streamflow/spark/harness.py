"""Running streamflow's own operators inside Spark's Python workers.

Theory of operation
-------------------
The Spark engine does not re-implement operators: a translated stage runs the very
operator objects the asyncio engine runs (built by the graph node's factory), so a map,
a KeyedProcessFunction with timers or a window with a custom trigger, evictor and allowed
lateness gives the same answers on both engines. This module is the small runtime that
hosts them in a worker: an operator context without channels, outputs that collect into
lists, and a private event loop that drives the (async) operator methods to completion.

Rows between stages carry ``order`` (array<long>: the record's position in the input, so
per-key order survives Spark's unordered shuffles), ``ts`` (event time in ms, or null),
``tag`` (the side output the row belongs to, null for the main output), ``eof`` (the
end-of-input marker row, see :mod:`streamflow.spark.plan`) and ``value`` (the record,
encoded by the job's state codec; never pickled unless the user chose the pickle codec).

* :class:`ChainRunner` (stateless stages, through ``mapInArrow``) feeds each Arrow batch
  as one streamflow batch when its rows arrive in input order (straight from a source),
  and record by record otherwise, so an output's ``order`` is always its input's order
  extended by its position among that input's outputs. A non-keyed two-input operator at the
  head gets each row on the input its ``tag`` names (``"1"``: the second).
* Keyed stages (``applyInPandasWithState``) are :class:`.keyed.KeyedRunner`'s, and
  natively translated windows :mod:`.windows`'; both host operators with this module.
* **Async I/O** (``AsyncDataStream.ordered_wait``/``unordered_wait`` and their ``_with_retry``
  and ``_batch`` forms, ``async def`` map/filter/flat_map) runs the asyncio engine's
  ``AsyncQueueOperator`` in the worker's event loop: every input batch starts its requests
  (at most ``capacity`` in flight; each under its timeout, retried by its strategy, all in
  the operator), and the stage then *quiesces* (:meth:`_Stage.quiesce`): it waits for every
  request still queued, so a batch's outputs are complete when it is answered (ordered mode
  in input order, unordered in completion order). The queue's own drains are posted as
  processing-time mail in the asyncio engine; here they are dropped (:class:`_Quiesced`):
  the stage drains the queue itself, in ``process_batch`` when the queue is full and at the
  quiesce. An async batch function's ``batch_timeout`` timer is dropped too: the partial
  batch is called at the quiesce. Rows in no input order (after a shuffle) are fed one at a
  time, so that each output's order extends its own input's; an async operator among them
  still gets all of an Arrow batch's rows at once, tagged with their inputs
  (:func:`_run_segments`), so its requests run concurrently.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..clock import SystemClock
from ..errors import StreamflowError
from ..runtime.async_wait import AsyncQueueOperator
from ..runtime.context import OperatorContext
from ..runtime.events import Watermark, WatermarkStatus
from ..runtime.factory import OperatorFactory
from ..runtime.metrics import MetricGroup
from ..runtime.operator import BatchTarget, Output, StreamOperator
from ..runtime.processing_time import ProcessingTimeService, Registration
from ..runtime.timestamps import TimestampsAndWatermarksOperator
from ..state.keyed import KeyedStateBackend

_log = logging.getLogger(__name__)

EOF_TS = 9_000_000_000_000  # ms, the year 2255: below pandas' nanosecond limit (2262)
EOF_ORDER = [2**62]
WATERMARK_TAG = "\x00watermark"  # marker rows that carry Spark's event time (see key_column.KeyColumn)
TIMER_ORDER = -1  # outputs fired by timers come before the outputs of the batch's records


class SparkUnsupportedError(StreamflowError, RuntimeError):
    """Something the job does at run time that the Spark engine cannot do."""


@dataclass
class NodeSpec:
    """What a worker needs to build one operator: picklable (Spark ships it to workers)."""

    name: str
    uid: str
    factory: OperatorFactory
    keyed: bool
    max_parallelism: int
    side_tags: list[str] = field(default_factory=list)  # the side outputs consumed downstream
    # the subtask the operator plays (a broadcast stage runs one group per subtask: .broadcast)
    subtask_index: int = 0
    parallelism: int = 1


class _Collect(BatchTarget):
    """The end of a stage: gathers (record, timestamp) pairs of one output."""

    def __init__(self) -> None:
        self.records: list[Any] = []
        self.timestamps: list[int | None] = []

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        self.records.extend(records)
        self.timestamps.extend(timestamps if timestamps is not None else [None] * len(records))

    async def process_watermark(self, watermark: Watermark) -> None:
        return None  # Spark owns the watermark between stages

    async def process_watermark_status(self, status: WatermarkStatus) -> None:
        return None

    def take(self) -> tuple[list[Any], list[int | None]]:
        out = self.records, self.timestamps
        self.records, self.timestamps = [], []
        return out


class _NoProcessingTime(ProcessingTimeService):
    """Refuses processing-time timers; the periodic watermark emit of a timestamps operator
    is ignored instead (Spark computes the watermark itself)."""

    def register(self, at_ms: int, callback: Any) -> Registration:
        if isinstance(getattr(callback, "__self__", None), TimestampsAndWatermarksOperator):
            return Registration(None)
        raise SparkUnsupportedError(
            "processing-time timers cannot run on the Spark engine (a micro-batch has no "
            "processing-time clock between batches): use event-time timers, or the asyncio engine"
        )


class _Quiesced(ProcessingTimeService):
    """An async I/O operator's processing-time service: its drain mail (and an async batch
    function's ``batch_timeout``) is dropped, as the stage quiesces the operator after every
    input batch (module doc)."""

    def register(self, at_ms: int, callback: Any) -> Registration:
        return Registration(None)  # never runs


def _create(spec: NodeSpec) -> StreamOperator:
    op = spec.factory.create(0)
    if not isinstance(op, StreamOperator):
        raise TypeError(f"{spec.name}: the node's factory built {op!r}, not an operator")
    return op


def _context(spec: NodeSpec, metrics: dict[str, object], quiesced: bool = False) -> OperatorContext:
    clock = SystemClock()
    time_service = _Quiesced if quiesced else _NoProcessingTime
    return OperatorContext(
        uid=spec.uid,
        name=spec.name,
        task_name=f"{spec.name} (spark)",
        subtask_index=spec.subtask_index,
        parallelism=spec.parallelism,
        max_parallelism=spec.max_parallelism,
        clock=clock,
        metrics=MetricGroup(spec.uid, metrics),
        processing_time=time_service(clock, lambda: None),
        keyed_backend=KeyedStateBackend(spec.max_parallelism) if spec.keyed else None,
    )


_LOOP: list[asyncio.AbstractEventLoop] = []


def _worker_loop() -> asyncio.AbstractEventLoop:
    """One event loop per Python worker process (workers are single-threaded), reused by every
    stage call: a keyed stage is called once per key and micro-batch."""
    if not _LOOP or _LOOP[0].is_closed():
        _LOOP[:] = [asyncio.new_event_loop()]
    return _LOOP[0]


@dataclass
class _Segment:
    """Part of a chain cut at its async I/O operators (:meth:`_Stage.__init__`): one async
    operator, or a run of the others; ``out`` collects its outputs (None: the stage's own)."""

    head: StreamOperator
    out: _Collect | None
    concurrent: bool  # an async I/O operator (fed with ``process_tagged``)


class _Stage:
    """Operators wired like a chain, each output collected at the end of the stage. With
    ``split_async`` (rows in no input order, fed record by record), the chain is cut before
    and after each async I/O operator into :class:`_Segment` s, each collecting its outputs,
    so that :func:`_run_segments` can feed an async operator many records at once."""

    def __init__(self, specs: list[NodeSpec], split_async: bool = False) -> None:
        self.loop = _worker_loop()
        self.metrics: dict[str, object] = {}
        self.main = _Collect()
        last = specs[-1]
        self.side = {tag: _Collect() for tag in last.side_tags}
        self.ops: list[StreamOperator] = [_create(s) for s in specs]
        concurrent = [isinstance(op, AsyncQueueOperator) for op in self.ops]
        starts: set[int] = set()  # where a segment starts (none: not split)
        if split_async and any(concurrent):
            starts = {0} | {j for i, c in enumerate(concurrent) if c for j in (i, i + 1) if j < len(self.ops)}
        self.segments: list[_Segment] = []  # (empty: not split)
        output = Output([self.main], {tag: [c] for tag, c in self.side.items()})
        out: _Collect | None = None
        for i in reversed(range(len(self.ops))):
            spec, op = specs[i], self.ops[i]
            op.setup(_context(spec, self.metrics, concurrent[i]), output)
            output = Output([op], {})
            if i in starts:
                self.segments.insert(0, _Segment(op, out, concurrent[i]))
                out = _Collect()
                output = Output([out], {})
        self.head = self.ops[0]
        self.waiting = [op for op in self.ops if isinstance(op, AsyncQueueOperator)]  # (async I/O)

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def open(self) -> None:
        for op in reversed(self.ops):
            self.run(op.open())

    def close(self) -> None:
        try:
            for op in self.ops:
                self.run(op.close())
        finally:
            for op in self.ops:
                op.dispose()

    async def quiesce(self) -> None:
        """Wait for the requests of the stage's async I/O operators, in chain order (an
        operator's results feed the next one's requests)."""
        for op in self.waiting:
            await op.finish()

    def outputs(self) -> list[tuple[str | None, list[Any], list[int | None]]]:
        out: list[tuple[str | None, list[Any], list[int | None]]] = [(None, *self.main.take())]
        out.extend((tag, *c.take()) for tag, c in self.side.items())
        return out


Row = tuple[list[int], int | None, str | None, bool, bytes]  # order, ts, tag, eof, value


class ChainRunner:
    """A stateless stage: a chain of non-keyed operators over ``mapInArrow`` batches."""

    def __init__(self, specs: list[NodeSpec], encode: Callable[[Any], bytes],
                 decode: Callable[[bytes], Any], ordered_input: bool, layout: Any = None,
                 two_input: bool = False, replicas: int = 0) -> None:
        self.specs = specs
        self.encode, self.decode = encode, decode
        self.ordered_input = ordered_input and not replicas
        self.layout = layout  # a .native.Layout when the input rows hold typed record columns
        self.two_input = two_input  # the head is a connect(): a row's ``tag`` "1" feeds its second input
        # broadcast partitioning into the head (.replicate): a row's ``tag`` is the subtask it
        # goes to, and each subtask index has a stage of its own (0: one stage, no such tags)
        self.replicas = replicas

    def _records(self, data: Any) -> list:
        """The decoded records of an Arrow batch (or table) of data rows."""
        if self.layout is None:
            return self.decode_many(data.column("value").to_pylist())
        from .native import records_from_arrow

        return records_from_arrow(data, self.layout)

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        from .encoding import batch_codec

        self.encode_many, self.decode_many = batch_codec(self.encode, self.decode)
        stages = _Subtasks(self.specs, self.replicas, not self.ordered_input)
        try:
            for batch in batches:
                yield from self._run(stages, batch)
        finally:
            stages.close()

    def _run(self, stages: _Subtasks, batch: Any) -> Iterator[Any]:
        """One Arrow batch: its outputs (Arrow batches), then its end-of-input rows."""
        import numpy as np
        import pyarrow as pa

        from .encoding import order_column, row_schema, rows_to_arrow

        eof = batch.column("eof").to_numpy(zero_copy_only=False)
        data = np.flatnonzero(~eof)
        if len(data) and self.ordered_input:  # one streamflow batch; outputs numbered in order
            stage = stages.of(0)
            rows = batch if len(data) == len(batch) else batch.take(pa.array(data))
            ts = rows.column("ts")
            timestamps = ts.to_pylist() if ts.null_count == 0 else None
            stage.run(stage.head.process_batch(self._records(rows), timestamps))
            if stage.waiting:
                stage.run(stage.quiesce())
            base = batch.column("order")[int(data[0])].as_py()
            schema = row_schema()
            for tag, recs, rts in stage.outputs():
                if recs:
                    n = len(recs)
                    yield pa.RecordBatch.from_arrays(
                        [order_column(base, n), pa.array(rts, pa.int64()), pa.array([tag] * n, pa.string()),
                         pa.array(np.zeros(n, dtype=bool)), pa.array(self.encode_many(recs), pa.binary())],
                        schema=schema)
        elif len(data):
            picked = batch.take(pa.array(data))
            records = self._records(picked)
            tags = picked.column("tag").to_pylist()
            seconds = [t == "1" for t in tags] if self.two_input else [False] * len(records)
            subtasks = [int(t) for t in tags] if self.replicas else [0] * len(records)
            for subtask in sorted(set(subtasks)):  # (opened outside the loop pass below)
                stages.of(subtask)
            rows = _worker_loop().run_until_complete(self._one_by_one(stages, list(zip(
                picked.column("order").to_pylist(), picked.column("ts").to_pylist(), records, seconds,
                subtasks, strict=True))))
            if rows:
                yield rows_to_arrow(rows)
        if len(data) < len(batch):
            ends = batch.filter(pa.array(eof))
            yield rows_to_arrow([(o, t, None, True, b"") for o, t in
                                 zip(ends.column("order").to_pylist(), ends.column("ts").to_pylist(),
                                     strict=True)])

    async def _one_by_one(self, stages: _Subtasks, rows: list[tuple]) -> list[Row]:
        """Record by record (each output's order extends its own input's), in one loop pass;
        a row ``(order, ts, record, second, subtask)`` with ``second`` feeds the head's second
        input, of the stage playing ``subtask``."""
        encode = self.encode
        out: list[Row] = []
        if rows and stages.stages[rows[0][4]].segments:  # async I/O: many requests at once
            for subtask in sorted({row[4] for row in rows}):
                mine = [row for row in rows if row[4] == subtask]
                out.extend((o, t, tag, False, encode(r)) for o, t, tag, r in
                           await _run_segments(stages.stages[subtask], mine))
            return out
        for o, ts, record, second, subtask in rows:
            stage = stages.stages[subtask]
            head = stage.head
            feed = getattr(head, "process_batch2", head.process_batch) if second else head.process_batch
            await feed([record], None if ts is None else [ts])
            await stage.quiesce()
            for tag, recs, rts in stage.outputs():
                out.extend(([*o, j], t, tag, False, encode(r)) for j, (r, t) in
                           enumerate(zip(recs, rts, strict=True)))
        return out


class _Subtasks:
    """The stages of a stateless stage, opened when first used: one (subtask 0) as a rule; with
    broadcast partitioning into the head (``replicas`` > 0: :mod:`.replicate`) one per subtask
    index, each operator of the chain playing that subtask, as the asyncio engine runs one
    chained task per subtask of the broadcast consumer."""

    def __init__(self, specs: list[NodeSpec], replicas: int, split_async: bool = False) -> None:
        self.specs, self.replicas, self.split_async = specs, replicas, split_async
        self.stages: dict[int, _Stage] = {}

    def of(self, subtask: int) -> _Stage:
        stage = self.stages.get(subtask)
        if stage is None:
            specs = self.specs
            if self.replicas:
                specs = [dataclasses.replace(s, subtask_index=subtask % s.parallelism) for s in specs]
            stage = self.stages[subtask] = _Stage(specs, self.split_async)
            stage.open()
        return stage

    def close(self) -> None:
        """Close every stage; the first failure is raised, the others are logged."""
        errors: list[Exception] = []
        for subtask, stage in self.stages.items():
            try:
                stage.close()
            except Exception as exc:
                if errors:
                    _log.error("closing %s (subtask %d) failed too: %r", self.specs[0].name, subtask, exc)
                errors.append(exc)
        if errors:
            raise errors[0]


_Out = tuple[list[int], int | None, str | None, Any]  # order, ts, tag, record


async def _run_segments(stage: _Stage, rows: list[tuple]) -> list[_Out]:
    """Rows ``(order, ts, record, second, subtask)`` in no input order through a chain cut at
    its async I/O operators (:class:`_Stage`): the others take the records one at a time, as
    :meth:`ChainRunner._one_by_one` feeds a whole chain, and an async operator takes all of
    them at once (``process_tagged``: at most its capacity in flight, each request under its
    timeout and retries, then ``finish``), so a partition's requests run concurrently as on
    the asyncio engine. Each output keeps the path of output indexes from its input through the
    segments; its order is its input's extended by its rank among that input's outputs of the
    same tag, by path: what one pass of the whole chain per record gives. Returns
    ``(order, ts, tag, record)`` for every output."""
    # (input position, path of output indexes, record, timestamp)
    items: list[tuple[int, tuple[int, ...], Any, int | None]] = [
        (n, (), row[2], row[1]) for n, row in enumerate(rows)]
    done: list[tuple[int, tuple[int, ...], str | None, Any, int | None]] = []
    last = len(stage.segments) - 1
    for k, segment in enumerate(stage.segments):
        produced: list[tuple[int, tuple[int, ...], str | None, Any, int | None]] = []
        if segment.concurrent:
            op = segment.head
            assert isinstance(op, AsyncQueueOperator)
            await op.process_tagged([i[2] for i in items], [i[3] for i in items], list(range(len(items))))
            await op.finish()
            taken = segment.out.take()[0] if segment.out is not None else stage.main.take()[0]
            counts = [0] * len(items)
            for i, record, ts in taken:
                produced.append((items[i][0], (*items[i][1], counts[i]), None, record, ts))
                counts[i] += 1
        else:
            head = segment.head
            for n, path, record, ts in items:
                second = k == 0 and rows[n][3]
                feed = getattr(head, "process_batch2", head.process_batch) if second else head.process_batch
                await feed([record], None if ts is None else [ts])
                groups = stage.outputs() if segment.out is None else [(None, *segment.out.take())]
                for tag, recs, rts in groups:
                    produced.extend((n, (*path, j), tag, r, t) for j, (r, t) in
                                    enumerate(zip(recs, rts, strict=True)))
        if k == last:
            done = produced
        else:
            items = [(n, path, record, ts) for n, path, _tag, record, ts in produced]
    done.sort(key=lambda d: (d[0], d[2] or "", d[1]))
    out: list[_Out] = []
    rank, previous = 0, None
    for n, _path, tag, record, ts in done:
        rank = rank + 1 if previous == (n, tag) else 0
        previous = (n, tag)
        out.append(([*rows[n][0], rank], ts, tag, record))
    return out
