"""Keyed stages on Spark: one streamflow keyed operator under ``applyInPandasWithState``.

Theory of operation
-------------------
Spark calls :class:`KeyedRunner` once per key and micro-batch with the key's rows (pandas
frames) and its group state (one binary column: the operator's snapshot restricted to that
key). The call:

1. restores the key's operator state (keyed state and timers) into an operator,
2. advances the operator to Spark's watermark, firing due event-time timers exactly as a
   watermark does in the asyncio engine (Spark's watermark ``W`` is streamflow's ``W - 1``:
   Flink emits ``max - delay - 1``; Spark times a group out once its watermark passes the
   timeout, so a timer at ``t`` fires when ``W - 1 >= t``, the asyncio engine's rule),
3. feeds the key's rows in ``order`` (rows of a key arrive unordered after the shuffle); a
   two-input operator's rows whose ``tag`` is ``"1"`` go to its second input,
4. snapshots the key's state into the group state and asks Spark for a timeout at the
   operator's next event-time timer.

**One operator per worker, not per call.** Building an operator, its context and its
user function for every key call costs more than the call's work. For the operator types
whose whole per-key state lives in the keyed backend, the timer service and (windows) the
pane tables (:data:`_RESETTABLE`), one operator per stage is kept in the Python worker
(workers are reused across tasks) and opened once; each call clears its state in place
(the user function's state handles stay bound to the same tables) and loads the key's.
Any other operator type gets a fresh operator per call, opened and closed around it.

**Batch feeding.** A rolling reduce emits exactly one output per input record, so a key's
rows are fed as one batch and output ``i`` takes input ``i``'s order. Every other operator
is fed record by record in one pass of the event loop, so each output's order extends its
own input's.

Output rows are built column-wise (no per-row tuples or namedtuples): pandas' per-call
overhead is what dominates a call with a handful of rows.

**Batch jobs** (``RuntimeExecutionMode.BATCH``, ``api/batch.py``): the asyncio engine sorts
a keyed operator's whole input and runs it key by key, each key's records in timestamp order
(a record without one first, equal timestamps in input order), then fires the key's timers
with the watermark at ``+inf`` (``runtime/sorting_input.py``). Here (``batch=True``) a key's
calls only append its rows (``order``, ``ts``, encoded record) to its group state and ask
for an event-time timeout just below the end-of-input row's event time: the stage's Spark
event time is that row's alone, so every key times out in the trailing micro-batch after
the end of input, and that call sorts the key's rows as the sorter does, feeds them, fires
the key's timers at the maximum watermark and drops the key's state. With
``execution.sorted-inputs.enabled: false`` the rows are fed in input order instead.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..checkpoint.restore import OperatorRestore
from ..runtime.events import MAX_WATERMARK, MIN_WATERMARK, Watermark
from ..runtime.keyed_operators import KeyedFunctionOperator, ReduceOperator
from ..runtime.operator import StreamOperator
from ..runtime.process_operators import KeyedProcessOperator
from ..runtime.timer_operator import TimerOperator
from ..runtime.timers import TimerService
from ..runtime.window_operator import WindowOperator
from ..state.no_key import NO_KEY
from .encoding import ROW_COLUMNS
from .harness import EOF_TS, TIMER_ORDER, NodeSpec, _Stage

_log = logging.getLogger(__name__)

_RESETTABLE = (ReduceOperator, KeyedProcessOperator, KeyedFunctionOperator, WindowOperator)
_STAGES: OrderedDict[str, _Stage] = OrderedDict()  # per worker process: token -> opened stage
_MAX_STAGES = 16


def _reset(op: TimerOperator) -> None:
    """Forget every key's state, in place (state handles keep pointing at the same tables)."""
    backend = op.backend
    for table in backend._tables.values():
        table.clear()
    backend.current_key = NO_KEY
    backend.restored_key_types = None
    op.timers = TimerService()
    op.current_watermark = MIN_WATERMARK
    # op._check_key_type stays: the first call in a worker probes the first key (an unhashable
    # one gets hashable stand-ins from then on, state/hashable_keys.py)
    if isinstance(op, WindowOperator):
        op.panes.clear()
        op._fired.clear()
        op._refire.clear()


class KeyedRunner:
    """A keyed stage: one keyed operator, called by ``applyInPandasWithState`` per key."""

    def __init__(self, spec: NodeSpec, encode: Callable[[Any], bytes], decode: Callable[[bytes], Any],
                 state_encode: Callable[[Any], bytes], state_decode: Callable[[bytes], Any],
                 event_time: bool, token: str, layout: Any = None, batch: bool = False,
                 sorted_input: bool = True, two_input: bool = False) -> None:
        self.spec = spec
        self.encode, self.decode = encode, decode
        self.state_encode, self.state_decode = state_encode, state_decode
        self.event_time = event_time
        self.token = token  # unique per translation: a worker may host stages of several jobs
        self.layout = layout  # a .native.Layout: rows hold typed record columns, the key is native
        self.batch = batch  # a batch job: a key's rows wait in its state for the end of input
        self.sorted_input = sorted_input  # ... and are then fed in timestamp order (else input order)
        self.two_input = two_input  # a connect(): a row's ``tag`` "1" feeds the second input

    def __call__(self, key: tuple[bytes], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        frames = list(pdfs)
        if key[0] == b"" or key[0] is None:  # the markers' group (None with a native key):
            # pass end-of-input on, drop watermark rows
            yield _frame(*_eof_rows(frames), eof=True)
            return
        if self.batch:
            yield _frame(*self._run_batch(frames, state), eof=False)
            return
        yield _frame(*self._run(frames, state), eof=False)

    # -- one key's call -------------------------------------------------------------
    def _stage(self) -> tuple[_Stage, bool]:
        """The stage to use and whether it is cached (kept open across calls)."""
        stage = _STAGES.get(self.token)
        if stage is not None:
            _STAGES.move_to_end(self.token)
            return stage, True
        stage = _Stage([self.spec])
        if not isinstance(stage.head, _RESETTABLE):
            return stage, False
        stage.head.initialize_state(None)
        stage.open()
        _STAGES[self.token] = stage
        while len(_STAGES) > _MAX_STAGES:
            _token, old = _STAGES.popitem(last=False)
            old.close()
        return stage, True

    @contextmanager
    def _opened(self, restored: OperatorRestore | None) -> Iterator[_Stage]:
        """The stage with ``restored`` (one key's state, or None) loaded: the worker's cached
        stage reset in place, or a fresh one opened and closed after the call. A failure drops
        the cached stage (its operator may be half-way through a call) and closes it."""
        stage, cached = self._stage()
        op = stage.head
        try:
            if cached:
                assert isinstance(op, TimerOperator)
                _reset(op)
                op.initialize_state(restored)
            else:
                op.initialize_state(restored)
                stage.open()
            yield stage
        except BaseException:
            if cached:
                _STAGES.pop(self.token, None)
                cached = False
            raise
        finally:
            if not cached:
                stage.close()

    def _run(self, frames: list[Any], state: Any) -> tuple[list, list, list, list]:
        restored = None
        if state.exists:
            snapshot = self.state_decode(state.get[0])
            restored = OperatorRestore(snapshot, [snapshot], range(self.spec.max_parallelism))
        with self._opened(restored) as stage:
            wm = state.getCurrentWatermarkMs() if self.event_time else 0
            orders, tss, values, seconds = ([], [], [], []) if state.hasTimedOut else self._rows(frames)
            out = stage.run(self._process(stage, wm, orders, tss, values, seconds))
            self._save(stage.head, state)
            return out

    def _run_batch(self, frames: list[Any], state: Any) -> tuple[list, list, list, list]:
        """A batch job's key (see the module docstring): buffer its rows, or at the end of input
        run them all and fire its timers."""
        if not state.hasTimedOut:
            orders, tss, values, seconds = self._rows(frames)
            if self.layout is not None:  # typed rows: kept encoded in the state
                values = [self.encode(v) for v in values]
            rows = self.state_decode(state.get[0]) if state.exists else []
            rows.extend(zip(orders, tss, values, seconds, strict=True))
            state.update((self.state_encode(rows),))
            state.setTimeoutTimestamp(EOF_TS - 1)  # passed once the end-of-input row is
            return [], [], [], []
        rows = self.state_decode(state.get[0])
        state.remove()
        rows.sort(key=self._batch_order)
        with self._opened(None) as stage:
            orders, tss, values = ([list(r[0]) for r in rows], [r[1] for r in rows], [r[2] for r in rows])
            seconds = [r[3] for r in rows]
            return stage.run(self._process(stage, 0, orders, tss, values, seconds, encoded=True, end=True))

    def _batch_order(self, row: tuple) -> tuple:
        """A batch job's order of a key's buffered ``(order, ts, value, second)`` rows: the
        sorter's, by timestamp (none first), then input (the first input's before the second's,
        ``runtime/sort_buffer.py``), then input order; or input order (unsorted)."""
        if self.sorted_input:
            return (MIN_WATERMARK if row[1] is None else row[1], row[3], row[0])
        return (row[0],)

    def _rows(self, frames: list[Any]) -> tuple[list[list[int]], list[int | None], list[Any], list[bool]]:
        """The key's data rows (see :func:`_rows`) and whether each feeds the second input."""
        orders, tss, values, tags = _rows(frames, self.layout, self.two_input)
        return orders, tss, values, [t == "1" for t in tags] if self.two_input else [False] * len(orders)

    async def _process(self, stage: _Stage, wm: int, orders: list[list[int]], tss: list[int | None],
                       values: list[Any], seconds: list[bool], encoded: bool = False, end: bool = False,
                       ) -> tuple[list, list, list, list]:
        """One key's micro-batch in one pass of the event loop: watermark, then records (and with
        ``end``, a batch job's key end: then the maximum watermark). ``values`` are encoded
        records, or records when the rows hold typed columns and not ``encoded``; ``seconds[i]``:
        record ``i`` feeds a two-input operator's second input."""
        op, encode = stage.head, self.encode
        feed: tuple[Callable, Callable] = (op.process_batch, getattr(op, "process_batch2", op.process_batch))
        decode = self.decode if self.layout is None or encoded else _same  # typed rows are records already
        o_out: list[list[int]] = []
        t_out: list[int | None] = []
        g_out: list[str | None] = []
        v_out: list[bytes] = []

        def collect(order: list[int] | None) -> None:
            """The outputs so far; ``order`` is their input's, None for timer firings."""
            for tag, recs, rts in stage.outputs():
                for j, (r, t) in enumerate(zip(recs, rts, strict=True)):
                    o_out.append([*order, j] if order is not None else
                                 [TIMER_ORDER, t if t is not None else wm, j])
                    t_out.append(t)
                    g_out.append(tag)
                    v_out.append(encode(r))

        if wm > 0:
            await op.process_watermark(Watermark(wm - 1))
            collect(None)
        if end:
            for order, ts, value, second in zip(orders, tss, values, seconds, strict=True):
                await feed[second]([decode(value)], None if ts is None else [ts])
                collect(order)
            wm = MAX_WATERMARK
            await op.process_watermark(Watermark(MAX_WATERMARK))
            collect(None)
            return o_out, t_out, g_out, v_out
        if not values:
            return o_out, t_out, g_out, v_out
        has_ts = None not in tss
        if type(op) is ReduceOperator and (has_ts or not any(t is not None for t in tss)):
            # one output per record, in order: feed the key's rows as one batch
            await op.process_batch([decode(v) for v in values], tss if has_ts else None)  # type: ignore[arg-type]
            ((_tag, recs, rts), *side) = stage.outputs()
            if len(recs) == len(values) and not any(r for _t, r, _ts in side):
                o_out.extend([*o, 0] for o in orders)
                t_out.extend(rts)
                g_out.extend([None] * len(recs))
                v_out.extend(map(encode, recs))
                return o_out, t_out, g_out, v_out
            raise RuntimeError(f"{self.spec.name}: a rolling reduce emitted {len(recs)} outputs for "
                               f"{len(values)} records")
        for order, ts, value, second in zip(orders, tss, values, seconds, strict=True):
            await feed[second]([decode(value)], None if ts is None else [ts])
            collect(order)
        return o_out, t_out, g_out, v_out

    def _save(self, op: StreamOperator, state: Any) -> None:
        snapshot = op.snapshot_state(0)
        timers = snapshot.get("timers", {}) if isinstance(snapshot, dict) else {}
        keyed = snapshot.get("keyed", {}) if isinstance(snapshot, dict) else {}
        broadcast = snapshot.get("broadcast", {}) if isinstance(snapshot, dict) else {}
        if not keyed.get("groups") and not any(timers.values()) and not any(broadcast.values()):
            if state.exists:
                state.remove()
            return
        state.update((self.state_encode(snapshot),))
        next_time = getattr(op, "next_event_time", lambda: None)()
        if self.event_time and next_time is not None:
            state.setTimeoutTimestamp(max(next_time, state.getCurrentWatermarkMs()))


def _same(record: Any) -> Any:
    return record


def _rows(frames: list[Any], layout: Any = None, with_tags: bool = False,
          ) -> tuple[list[list[int]], list[int | None], list[Any], list[str | None]]:
    """The key's data rows (markers dropped), sorted by ``order``, column-wise: encoded values,
    or the records themselves when the rows hold typed columns (``layout``), and with
    ``with_tags`` their tags (else no tags)."""
    from .native import records_from_pandas

    orders: list[list[int]] = []
    tss: list[int | None] = []
    values: list[bytes] = []
    tags: list[str | None] = []
    for pdf in frames:
        if with_tags:
            tags.extend(pdf["tag"].tolist())
        orders.extend(a.tolist() for a in pdf["order"].to_numpy())
        ts = pdf["ts"]
        if ts.isna().any():
            tss.extend(None if t != t else int(t) for t in ts.tolist())  # NaN: no timestamp
        else:
            tss.extend(ts.astype("int64").tolist())
        values.extend(pdf["value"].tolist() if layout is None else records_from_pandas(pdf, layout))
    n = len(orders)
    if n > 1:
        idx = sorted(range(n), key=orders.__getitem__)
        if idx != list(range(n)):
            orders = [orders[i] for i in idx]
            tss = [tss[i] for i in idx]
            values = [values[i] for i in idx]
            tags = [tags[i] for i in idx] if with_tags else tags
    return orders, tss, values, tags


def _eof_rows(frames: list[Any]) -> tuple[list, list, list, list]:
    orders: list[list[int]] = []
    tss: list[int | None] = []
    for pdf in frames:
        eof = pdf["eof"].to_numpy(dtype=bool)
        if eof.any():
            sel = pdf[eof]
            orders.extend(a.tolist() for a in sel["order"].to_numpy())
            tss.extend(None if t != t else int(t) for t in sel["ts"].tolist())
    return orders, tss, [None] * len(orders), [b""] * len(orders)


def _frame(orders: list, tss: list, tags: list, values: list, eof: bool) -> Any:
    """A frame of :data:`~.encoding.ROW_COLUMNS` (end-of-input rows, or data rows) built as
    one object block: the cheapest frame pandas makes (Spark converts it column by column)."""
    import numpy as np
    import pandas as pd

    data = np.empty((len(orders), len(ROW_COLUMNS)), dtype=object)
    data[:, 0] = np.fromiter(orders, dtype=object, count=len(orders))  # lists stay cells
    data[:, 1] = tss
    data[:, 2] = tags
    data[:, 3] = eof
    data[:, 4] = values
    return pd.DataFrame(data, columns=ROW_COLUMNS, copy=False)
