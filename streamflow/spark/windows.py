"""Event-time windows translated natively: Spark groups and fires, streamflow applies.

Theory of operation
-------------------
The general translation of a keyed operator (:mod:`.keyed`) calls a Python function per key
and micro-batch and keeps the operator's whole state in Spark's group state. For the most
common window, that is far more Python than the job needs: a tumbling or sliding event-time
window with the default trigger only has to collect each (key, window)'s elements and apply
the window's function once when the watermark passes the window's end. Spark does exactly
that natively:

    withWatermark(event_time, delay)
    .groupBy(window(event_time, size, slide, offset), key)
    .agg(collect_list(struct(order, value)))             # append mode: once, when it closes

and a ``mapInArrow`` stage (:class:`WindowFirer`) applies the user's functions to every
closed window: the elements sorted by ``order`` (input order, as the asyncio engine adds
them), folded with the reduce function or the aggregate function (``create_accumulator``,
``add``..., ``get_result``) or handed whole to the process/apply function, through the
very :class:`~streamflow.runtime.window_operator.WindowOperator` the asyncio engine runs
(its ``_emit``), so the results, their timestamps (``window.max_timestamp()``) and side
outputs are the asyncio engine's.

Why the semantics are the same. Spark's windows are streamflow's (``start = ts - (ts -
offset) mod slide``, epoch-aligned, ``[start, end)``). A window closes when Spark's watermark
``W`` reaches its end; streamflow's watermark is ``W - 1`` and a window fires when it reaches
``end - 1``: the same moment. Spark drops an input row only when its window has already been
closed in an earlier micro-batch, which is when the window operator (allowed lateness 0)
drops it as late too. The translation is used only when that is all the window does
(:func:`native_window`): an event-time tumbling or sliding assigner, the default trigger, no
evictor, no allowed lateness, no late-data side output and a window function that does not ask
for the watermark. Anything else takes the general path. ``execution.spark.native-windows:
false`` forces the general path everywhere.

The end-of-input row (key ``b""``, event time in 2255) lifts the watermark so every window
closes in Spark's trailing no-data micro-batch; its own window never closes, so the row does
not travel on: a keyed operator downstream reads the window's output from an exchange
(:mod:`.exchange`), which appends an end-of-input row when the window's query has ended.

Elements are ordered by their whole ``order`` (the typed rows straight from a source, whose
orders are one input position, keep that position as a long). A window's own outputs carry
``[TIMER_ORDER, max_timestamp, j]``, so a window after a window (through an exchange) sees its
elements in the order the first window fired them, as on the asyncio engine.

When the window function only aggregates its elements (a field-wise reduce, or a process
function of sums/minima/maxima/counts), :mod:`.window_agg` replaces ``collect_list`` and the
Python stage with Spark aggregates (``window_frame(..., aggregates=...)``).
"""

from __future__ import annotations

import logging
import types
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from ..graph import JobGraph, StreamNode
from ..runtime.window_operator import WindowOperator
from ..state.hashable_keys import hashable_key
from ..windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows
from ..windowing.triggers import EventTimeTrigger
from ..windowing.windows import TimeWindow
from .harness import TIMER_ORDER, NodeSpec, _Stage

_log = logging.getLogger(__name__)

_WATERMARK_NAMES = frozenset({"current_watermark", "get_current_watermark"})


def native_window(graph: JobGraph, node: StreamNode) -> WindowOperator | None:
    """The node's window operator if Spark can run it natively with the same answers, else
    None (the reason is logged)."""
    factory = node.operator_factory
    op = factory.create(0) if factory is not None else None
    if type(op) is not WindowOperator:
        return None
    assert isinstance(op, WindowOperator)
    reason = None
    if type(op.assigner) not in (TumblingEventTimeWindows, SlidingEventTimeWindows):
        reason = f"its assigner {type(op.assigner).__name__} is not a tumbling or sliding event-time one"
    elif type(op.trigger) is not EventTimeTrigger:
        reason = f"it has a custom trigger ({type(op.trigger).__name__})"
    elif op.evictor is not None:
        reason = "it has an evictor"
    elif op.allowed_lateness:
        reason = "it allows lateness"
    elif op.late_tag is not None:
        reason = "it sends late data to a side output"
    elif _asks_for_watermark(op):
        reason = "its window function asks for the current watermark"
    if reason is not None:
        _log.info("window %r runs per key on Spark (applyInPandasWithState): %s", node.name, reason)
        return None
    _log.info("window %r runs natively on Spark (groupBy(window, key) + collect_list)", node.name)
    return op


def _asks_for_watermark(op: WindowOperator) -> bool:
    for fn in op.functions:
        if fn is None:
            continue
        codes: list[types.CodeType] = []
        if isinstance(fn, types.FunctionType | types.MethodType):
            codes.append(fn.__code__)
        for cls in type(fn).__mro__:
            if cls.__module__.startswith("streamflow.") or cls is object:
                continue
            codes.extend(v.__code__ for v in vars(cls).values() if isinstance(v, types.FunctionType))
        if any(_WATERMARK_NAMES & _names(c) for c in codes):
            return True
    return False


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def feeds_keyed(graph: JobGraph, node: StreamNode) -> bool:
    """Whether a keyed operator is downstream of ``node``."""
    todo, seen = [node.id], set()
    while todo:
        for consumer, _edge in graph.consumers.get(todo.pop(), []):
            if consumer.keyed:
                return True
            if consumer.id not in seen:
                seen.add(consumer.id)
                todo.append(consumer.id)
    return False


def window_frame(keyed: Any, op: WindowOperator, delay_ms: int, record_columns: list[str],
                 aggregates: list[Any] | None = None, flat_order: bool = False) -> Any:
    """``keyed`` (rows with a key column and event times) grouped into closed windows:
    columns ``start``, ``end`` (ms), ``key`` and ``rows`` (structs of ``order`` and the record:
    ``value``, or its typed columns), or, with ``aggregates`` (Spark aggregate columns over typed
    rows: see :mod:`.window_agg`), those instead of ``rows``. With ``flat_order`` (every row's
    ``order`` is one input position, ``[seq]``: typed rows straight from a source) the state keeps
    ``seq``, a long; otherwise the whole ``order`` array (a window's outputs have three positions,
    ``[TIMER_ORDER, max_timestamp, j]``, whose first is the same for all of them)."""
    from pyspark.sql import functions as F

    order = F.col("order").getItem(0).alias("order") if flat_order else F.col("order")
    assigner = op.assigner
    size = assigner.size
    slide = assigner.slide if isinstance(assigner, SlidingEventTimeWindows) else size
    window = F.window("event_time", f"{size} milliseconds", f"{slide} milliseconds",
                      f"{assigner.offset % slide} milliseconds")
    if aggregates is not None and flat_order:
        keyed = keyed.withColumn("order", F.col("order").getItem(0))
        columns, names = aggregates, [f"a{n}" for n in range(len(aggregates))]
    else:
        columns, names = [F.collect_list(F.struct(order, *record_columns)).alias("rows")], ["rows"]
    return (
        keyed.withColumn("event_time", F.timestamp_millis("ts"))
        .withWatermark("event_time", f"{delay_ms} milliseconds")
        .groupBy(window.alias("window"), "key")
        .agg(*columns)
        .select(F.unix_millis("window.start").alias("start"), F.unix_millis("window.end").alias("end"),
                "key", *names)
    )


_STAGES: OrderedDict[str, _Stage] = OrderedDict()  # per worker process: token -> opened stage
_MAX_STAGES = 16


class WindowFirer:
    """``mapInArrow`` over closed windows: the window operator's functions per window."""

    def __init__(self, spec: NodeSpec, encode: Callable[[Any], bytes], decode: Callable[[bytes], Any],
                 token: str, layout: Any = None) -> None:
        self.spec = spec
        self.encode, self.decode = encode, decode
        self.token = token  # unique per translation: a worker may host stages of several jobs
        self.layout = layout  # a .native.Layout: typed record columns and a native key

    def _stage(self) -> _Stage:
        stage = _STAGES.get(self.token)
        if stage is None:
            stage = _Stage([self.spec])
            stage.head.initialize_state(None)
            stage.open()
            _STAGES[self.token] = stage
            while len(_STAGES) > _MAX_STAGES:
                _STAGES.popitem(last=False)[1].close()
        _STAGES.move_to_end(self.token)
        return stage

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        stage = self._stage()
        try:
            for batch in batches:
                out = stage.run(self._fire(stage, batch))
                if out[0]:
                    yield _arrow(*out)
        except BaseException:
            _STAGES.pop(self.token, None)
            raise

    async def _fire(self, stage: _Stage, batch: Any) -> tuple[list, list, list, list]:
        op = stage.head
        assert isinstance(op, WindowOperator)
        encode, decode = self.encode, self.decode
        starts = batch.column("start").to_pylist()
        ends = batch.column("end").to_pylist()
        keys = batch.column("key").to_pylist()
        rows = batch.column("rows")
        offsets = rows.offsets.to_pylist()
        flat = rows.flatten()
        orders = flat.field("order").to_pylist()
        if self.layout is None:
            values = flat.field("value").to_pylist()
        else:
            from .native import records_from_arrow

            values = records_from_arrow(flat, self.layout)
            decode = _same
        o_out: list[list[int]] = []
        t_out: list[int | None] = []
        g_out: list[str | None] = []
        v_out: list[bytes] = []
        for i, key in enumerate(keys):
            if key == b"" or key is None:  # the end-of-input row's window (it never closes)
                continue
            lo, hi = offsets[i], offsets[i + 1]
            idx = sorted(range(lo, hi), key=orders.__getitem__)
            elements = [decode(values[j]) for j in idx]
            window = TimeWindow(starts[i], ends[i])
            try:
                acc = _accumulate(op, elements)
                op.current_watermark = window.max_timestamp()
                # the key of the window's first element, as the asyncio engine's timer holds it (the
                # key column holds its equality class's representative: .group_keys)
                op._emit(hashable_key(op.key_selector(elements[0])), window, acc)
            except Exception as exc:
                raise op.failure(exc) from None
            await op.out.flush(op, True)
            for tag, recs, tss in stage.outputs():
                for j, (r, t) in enumerate(zip(recs, tss, strict=True)):
                    o_out.append([TIMER_ORDER, t if t is not None else window.max_timestamp(), j])
                    t_out.append(t)
                    g_out.append(tag)
                    v_out.append(encode(r))
        return o_out, t_out, g_out, v_out


def _same(value: Any) -> Any:
    return value


def _accumulate(op: WindowOperator, elements: list[Any]) -> Any:
    """The window's accumulator after adding ``elements`` in order, as the operator does."""
    fn = op.fn
    if fn.reduce is not None:
        acc = elements[0]
        for e in elements[1:]:
            acc = fn.reduce(acc, e)
        return acc
    if fn.aggregate is not None:
        agg = fn.aggregate
        a = agg.create_accumulator()
        for e in elements:
            a = agg.add(e, a)
        return a
    return elements


def _arrow(orders: list, tss: list, tags: list, values: list) -> Any:
    import pyarrow as pa

    from .encoding import row_schema

    schema = row_schema()
    return pa.RecordBatch.from_arrays(
        [pa.array(orders, schema.field("order").type), pa.array(tss, pa.int64()),
         pa.array(tags, pa.string()), pa.array([False] * len(orders), pa.bool_()),
         pa.array(values, pa.binary())],
        schema=schema,
    )
