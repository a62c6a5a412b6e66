"""The window operator (a port of Flink's WindowOperator and EvictingWindowOperator).

Theory of operation
-------------------
State per key lives in the keyed backend: ``window-contents`` maps a key to
``{state window: accumulator}`` and ``window-trigger`` to the key's trigger
state. The accumulator is the reduced value (``reduce``), the aggregate
accumulator (``aggregate``), or the list of elements (``process``; with an
evictor, a list of ``(timestamp, element)``). For merging assigners
(sessions) a :class:`MergingWindowSet` per key maps in-flight windows to the
state window that holds their contents.

Per element (Flink's ``processElement``): assign windows; skip a window whose
cleanup time (``max_timestamp + allowed_lateness``) the watermark has
passed; add the element; ask the trigger; FIRE emits the window's result with
the timestamp ``window.max_timestamp()``, PURGE clears the contents; register
the cleanup timer. An element that fell into no window because all of them
were late is late: it goes to the late-data side output if one is set, and
is counted either way.

Timers are (key, window, time). When one fires the trigger decides; at the
cleanup time every piece of the window's state is cleared.

Fast path: tumbling event-time windows with the default trigger and no
evictor (the common case) do the same thing with arithmetic instead of
assigner/trigger calls per element; results are identical. Panes are
``{window: {key: acc}}`` and the timers are implied: a pane fires once when the
watermark passes ``window.max_timestamp()`` and is dropped at its cleanup time.
``_fired`` is the bookkeeping that stands in for the general path's timers: a
pane that fired (on time, or at once for a late element within the allowed
lateness) is in it, so a later watermark does not fire it again; only a late
element fires a fired pane again (``EventTimeTrigger.on_element``). After a
restore the operator's watermark starts at MIN (as in Flink, it is not part of
the snapshot), so an element for a fired pane registers, on the general path, an
event-time timer for its key: ``_refire`` holds those keys per pane, and the next
watermark past the pane's end fires them (and only them). The differential tests
(tests/test_window_fast_path.py) run every scenario through both paths.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from functools import partial
from typing import Any

from ..state.keyed import snapshot_tables
from ..windowing.assigners import TumblingEventTimeWindows
from ..windowing.count import CountWindow
from ..windowing.merging import MergingWindowSet
from ..windowing.triggers import EventTimeTrigger, Trigger, TriggerResult
from ..windowing.windows import GlobalWindow, TimeWindow
from .context import RuntimeContext
from .events import MAX_WATERMARK, Watermark
from .loop_budget import yield_point
from .process_operators import TimerOperator, _Emitter
from .timers import Timer
from .window_context import WindowContext, WindowFunctions
from .window_panes import PaneTables, pane_name

FIRE_SLICE = 1_024  # fired keys between two loop budget checks (process_watermark)

_MISSING = object()


class WindowOperator(TimerOperator):
    def __init__(
        self,
        name: str,
        key_selector: Callable[[Any], Any],
        assigner: Any,
        trigger: Trigger | None,
        evictor: Any,
        allowed_lateness: int,
        late_tag: str | None,
        functions: WindowFunctions,
    ) -> None:
        super().__init__(name, key_selector)
        self.assigner = assigner
        # the API passes the assigner's default trigger, asked with the env (Flink's WindowOperatorBuilder)
        self.trigger: Trigger = trigger if trigger is not None else assigner.get_default_trigger(None)
        self.evictor = evictor
        self.allowed_lateness = allowed_lateness
        self.late_tag = late_tag
        self.fn = functions
        self.functions = functions.user_functions
        self.event_time = assigner.is_event_time()
        self.merging = bool(getattr(assigner, "merging", False))
        self.fast = (
            type(assigner) is TumblingEventTimeWindows
            and type(self.trigger) is EventTimeTrigger
            and evictor is None
            and not _clears(functions.process_function)  # its clear() runs on the general path
        )
        self.out = _Emitter()
        self.panes: dict[TimeWindow, dict[Any, Any]] = {}  # fast path only
        self._fired: set[TimeWindow] = set()
        self._refire: dict[TimeWindow, set[Any]] = {}  # fast path: keys whose timer is pending again

    # -- lifecycle -----------------------------------------------------------
    def setup(self, ctx: Any, output: Any) -> None:
        super().setup(ctx, output)
        backend = self.backend
        if backend.is_rocksdb:
            self._rocksdb_tables(backend)
            return
        self._pane_tables = PaneTables(backend, self.panes)
        # general path: tracked tables, written by incremental checkpoints in plain form
        # (windows as tuples, converted at the capture); the fast path keeps its state in pane
        # tables (window_panes.py), and these hold only a restored general path's state
        enc = self.encode_namespace
        self.contents, self._contents_log = backend.tracked_table(
            "window-contents", "window", lambda wins: {enc(w): acc for w, acc in wins.items()}
        )
        self.trigger_state, self._trigger_log = backend.tracked_table(
            "window-trigger", "window", lambda store: {(enc(w), name): v for (w, name), v in store.items()}
        )
        self.merging_sets, self._merging_log = backend.tracked_table(
            "window-merging", "window", lambda mws: [(enc(a), enc(b)) for a, b in mws.persist()]
        )

    def _touched(self, key: Any) -> None:
        """Log ``key``'s window state after an element or a timer of the general path (every
        write to the three tables happens inside one of them, for the current key)."""
        for table, log in (
            (self.contents, self._contents_log),
            (self.trigger_state, self._trigger_log),
            (self.merging_sets, self._merging_log),
        ):
            if log is not None:
                value = table.get(key, _MISSING)
                if value is _MISSING:
                    log.delete(key)
                else:
                    log.put(key, value)

    def _rocksdb_tables(self, backend: Any) -> None:
        """Window state in RocksDB: no fast path (its panes live in the operator), and the
        tables store windows in their plain form (``encode_namespace``), as checkpoints do."""
        self.fast = False
        self._contents_log = self._trigger_log = self._merging_log = None  # RocksDB keeps them
        enc, dec, assigner = self.encode_namespace, self.decode_namespace, self.assigner
        self.contents = backend.table(
            "window-contents", "window",
            to_plain=lambda wins: {enc(w): acc for w, acc in wins.items()},
            from_plain=lambda plain: {dec(w): acc for w, acc in plain.items()},
        )  # fmt: skip
        self.trigger_state = backend.table(
            "window-trigger", "window",
            to_plain=lambda store: {(enc(w), name): v for (w, name), v in store.items()},
            from_plain=lambda plain: {(dec(w), name): v for (w, name), v in plain.items()},
        )  # fmt: skip
        self.merging_sets = backend.table(
            "window-merging", "window",
            to_plain=lambda mws: [(enc(a), enc(b)) for a, b in mws.persist()],
            from_plain=lambda pairs: MergingWindowSet(assigner, [(dec(a), dec(b)) for a, b in pairs]),
        )  # fmt: skip

    # -- checkpoints: windows travel as plain tuples --------------------------
    def encode_namespace(self, window: Any) -> Any:
        if isinstance(window, TimeWindow):
            return ("w", window.start, window.end)
        if isinstance(window, CountWindow):
            return ("c", window.id)
        if isinstance(window, GlobalWindow):
            return ("g",)
        # a custom assigner's window: the bytes of its serializer (PyFlink's
        # get_window_serializer()), else the window itself, for the state codec
        serializer = self._window_serializer()
        if serializer is None:
            return ("o", window)
        buf = io.BytesIO()
        serializer.serialize(window, buf)
        return ("s", buf.getvalue())

    def decode_namespace(self, plain: Any) -> Any:
        kind = plain[0]
        if kind == "w":
            return TimeWindow(plain[1], plain[2])
        if kind == "c":
            return CountWindow(plain[1])
        if kind == "s":
            serializer = self._window_serializer()
            if serializer is None:
                raise ValueError(
                    f"operator {self.name!r}: the checkpoint holds windows written by a window "
                    f"serializer, but assigner {type(self.assigner).__name__} has none now"
                )
            return serializer.deserialize(io.BytesIO(plain[1]))
        return plain[1] if kind == "o" else GlobalWindow.get()

    def _window_serializer(self) -> Any:
        """The assigner's ``get_window_serializer()`` (custom windows only), or None."""
        get = getattr(self.assigner, "get_window_serializer", None)
        try:
            return get() if callable(get) else None
        except NotImplementedError:
            return None

    def get_runtime_context(self) -> RuntimeContext:
        """For assigners that keep keyed state (PyFlink's count assigners)."""
        return RuntimeContext(self.ctx)

    def snapshot_state(self, checkpoint_id: int) -> Any:
        if self.backend.is_rocksdb:  # the tables are the state (see _rocksdb_tables)
            return {**super().snapshot_state(checkpoint_id), "fired": [], "refire": []}
        enc = self.encode_namespace
        if self.fast or self.backend.incremental:  # the backend's snapshot holds the tables
            state = super().snapshot_state(checkpoint_id)
        else:
            tables: dict[str, dict] = {
                "window-contents": {
                    key: {enc(w): acc for w, acc in wins.items()} for key, wins in self.contents.items()
                },
                "window-trigger": {
                    key: {(enc(w), name): v for (w, name), v in store.items()}
                    for key, store in self.trigger_state.items()
                },
                "window-merging": {
                    key: [(enc(a), enc(b)) for a, b in mws.persist()]
                    for key, mws in self.merging_sets.items()
                },
            }
            state = super().snapshot_state(checkpoint_id)
            state["keyed"] = snapshot_tables(
                tables, dict.fromkeys(tables, "window"), self.ctx.max_parallelism
            )
        state["fired"] = [enc(w) for w in self._fired]
        state["refire"] = [(enc(w), list(keys)) for w, keys in self._refire.items()]
        return state

    def notify_checkpoint_complete(self, checkpoint_id: int) -> Any:
        result = super().notify_checkpoint_complete(checkpoint_id)
        if not self.backend.is_rocksdb:
            self._pane_tables.prune()  # emptied panes no pending checkpoint names any more
        return result

    def initialize_state(self, restored: Any) -> None:
        super().initialize_state(restored)
        if restored is None or self.backend.is_rocksdb:
            return
        self.backend.table_names()  # a deferred chain restore is decoded now: converted below
        dec = self.decode_namespace
        contents = {key: {dec(w): acc for w, acc in wins.items()} for key, wins in self.contents.items()}
        self.contents.clear()
        panes = self._pane_tables
        panes.restored()
        if self.fast:
            for key, wins in contents.items():  # a checkpoint of the general path
                for w, acc in wins.items():
                    (self.panes.get(w) or panes.new(w))[key] = acc
        else:
            self.contents.update(contents)
            for w, pane in self.panes.items():  # a checkpoint of the fast path
                for key, acc in pane.items():
                    self.contents.setdefault(key, {})[w] = acc
                panes.retired.append(pane_name(w))
                pane.clear()
            self.panes.clear()
            panes.prune()
        for key, store in list(self.trigger_state.items()):
            self.trigger_state[key] = {(dec(w), name): v for (w, name), v in store.items()}
        for key, pairs in list(self.merging_sets.items()):
            self.merging_sets[key] = MergingWindowSet(self.assigner, [(dec(a), dec(b)) for a, b in pairs])
        for s in restored.all:
            if s is not None:
                self._fired.update(w for w in map(dec, s.get("fired", ())) if w in self.panes)
                for plain, keys in s.get("refire", ()):
                    w = dec(plain)
                    owned = [k for k in keys if k in self.panes.get(w, ())]
                    if owned:
                        self._refire.setdefault(w, set()).update(owned)

    async def open(self) -> None:
        metrics = self.ctx.metrics
        self.late_counter = metrics.counter("numLateRecords")
        self.dropped_counter = metrics.counter("numLateRecordsDropped")
        await super().open()

    # -- elements ------------------------------------------------------------
    def cleanup_time(self, window: Any) -> int:
        if not self.event_time:
            return window.max_timestamp()
        t = window.max_timestamp() + self.allowed_lateness
        return t if t >= window.max_timestamp() else MAX_WATERMARK

    def is_window_late(self, window: Any) -> bool:
        return self.event_time and self.cleanup_time(window) <= self.current_watermark

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if timestamps is None and self.event_time:
            raise self.failure(
                ValueError(
                    f"event-time window {type(self.assigner).__name__} needs record timestamps: "
                    "call assign_timestamps_and_watermarks() (or from_source with a "
                    "WatermarkStrategy) upstream"
                )
            )
        if self._check_key_type:
            self.check_key_type(records)
        late: list = []
        late_ts: list[int] = []
        try:
            if self.fast and timestamps is not None:  # fast implies event time: checked above
                self._fast_elements(records, timestamps, late, late_ts)
            else:
                now = self.ctx.clock.now_ms()
                for i, record in enumerate(records):
                    ts = timestamps[i] if timestamps is not None else now
                    if self._element(record, ts):
                        late.append(record)
                        late_ts.append(ts)
        except Exception as exc:
            raise self.failure(exc) from None
        if late:
            self.late_counter.inc(len(late))
            if self.late_tag is not None:
                await self.output.push_side(self.late_tag, late, late_ts)
            else:
                self.dropped_counter.inc(len(late))
        await self.out.flush(self, True)

    def _fast_elements(self, records: list, timestamps: list[int], late: list, late_ts: list) -> None:
        """Tumbling event-time windows, default trigger: panes are ``{window: {key: acc}}``
        and the timers are implied (every pane fires at ``window.max_timestamp()``). The
        keys each pane got are logged for incremental checkpoints (window_panes.py)."""
        touched: dict[TimeWindow, list] = {}
        self._fast_loop(records, timestamps, late, late_ts, touched)
        self._pane_tables.log(touched)

    def _fast_loop(
        self, records: list, timestamps: list[int], late: list, late_ts: list, touched: dict[TimeWindow, list]
    ) -> None:
        size, offset = self.assigner.size, self.assigner.offset
        wm, lateness = self.current_watermark, self.allowed_lateness
        key_of, panes, fired = self.key_selector, self.panes, self._fired
        reduce, agg = self.fn.reduce, self.fn.aggregate
        last_start: int | None = None
        window = TimeWindow(0, 0)
        pane: dict[Any, Any] = {}
        refire: set[Any] | None = None
        max_ts = 0
        keys: list = []
        for record, ts in zip(records, timestamps, strict=True):
            start = ts - (ts - offset + size) % size
            if start != last_start:
                max_ts = start + size - 1
                if max_ts + lateness <= wm:
                    late.append(record)
                    late_ts.append(ts)
                    continue
                last_start = start
                window = TimeWindow(start, start + size)
                found = panes.get(window)
                if found is None:
                    found = self._pane_tables.new(window)
                pane = found
                logged = touched.get(window)
                if logged is None:
                    logged = touched[window] = []
                keys = logged
                # a fired pane while the watermark is behind its end (only after a restore):
                # the general path's trigger registers a timer for the key, so it fires again
                refire = self._refire.setdefault(window, set()) if max_ts > wm and window in fired else None
            key = key_of(record)
            keys.append(key)
            acc = pane.get(key)
            if acc is None:
                if reduce is not None:
                    acc = record
                elif agg is not None:
                    acc = agg.add(record, agg.create_accumulator())
                else:
                    acc = [record]
                pane[key] = acc
            elif reduce is not None:
                acc = pane[key] = reduce(acc, record)
            elif agg is not None:
                acc = pane[key] = agg.add(record, acc)
            else:
                acc.append(record)
            if max_ts <= wm:  # within allowed lateness: a late firing updates the result
                self._emit(key, window, acc)
                # the pane counts as fired, as the general path's EventTimeTrigger registers no
                # timer for a passed window: the next watermark must not fire it again
                fired.add(window)
            elif refire is not None:
                refire.add(key)

    def next_event_time(self) -> int | None:
        """Timers, and on the fast path the panes' implied timers (firing, then cleanup)."""
        lateness = self.allowed_lateness
        due = [w.end - 1 + lateness if w in self._fired else w.end - 1 for w in self.panes]
        timer = super().next_event_time()
        if timer is not None:
            due.append(timer)
        return min(due) if due else None

    async def _fire_panes(self, wm: int) -> None:
        """Fire every pane the watermark passed (once; again only for the keys in ``_refire``),
        drop those past their cleanup time. Every ``FIRE_SLICE`` keys the output goes out and
        the job's loop budget may pause (a window over a million keys closes at one watermark)."""
        panes, fired, refire, lateness = self.panes, self._fired, self._refire, self.allowed_lateness
        due = sorted(w for w in panes if w.end - 1 <= wm and (w not in fired or w in refire))
        for window in due:
            pane = panes[window]
            keys = refire.pop(window, None)
            chosen = list(pane) if keys is None else [k for k in pane if k in keys]
            for start in range(0, len(chosen), FIRE_SLICE):
                part = chosen[start : start + FIRE_SLICE]
                self._emit_pane(window, pane, part)
                if len(part) == FIRE_SLICE:
                    await self._between_slices()
            if lateness:
                fired.add(window)
        for window in due if not lateness else [w for w in fired if w.end - 1 + lateness <= wm]:
            await self._pane_tables.drop(window)
            fired.discard(window)
            refire.pop(window, None)

    def _emit_pane(self, window: TimeWindow, pane: dict[Any, Any], keys: Any) -> None:
        """``_emit`` for these keys of one pane (fast path: no evictor), with one context whose
        key is set before each call (Flink reuses its window context too)."""
        fn, add, ts, reduce = self.fn, self.out.add, window.end - 1, self.fn.reduce
        result = None if fn.aggregate is None else fn.aggregate.get_result
        process, ctx, backend = fn.process, WindowContext(self, None, window), self.backend
        for key in keys:
            acc = pane[key]
            values = [result(acc)] if result is not None else [acc] if reduce is not None else acc
            if process is None:
                add(values, ts)
            else:
                ctx.key = backend.current_key = key  # the function's keyed state is this key's
                add(process(key, ctx, values), ts)

    def _element(self, record: Any, ts: int) -> bool:
        """Flink's processElement for one element; True if the element is late."""
        key = self.key_selector(record)
        self.backend.current_key = key
        windows = self.assigner.assign_windows(record, ts, self)
        skipped = True
        mws = self._merging_set(key) if self.merging else None
        for window in windows:
            actual = window
            if mws is not None:
                actual = mws.add_window(window, partial(self._merge, key))
            if self.is_window_late(actual):
                if mws is not None:
                    mws.retire_window(actual)
                continue
            skipped = False
            state_window = mws.get_state_window(actual) if mws is not None else actual
            self._add(key, state_window, record, ts)
            ctx = WindowContext(self, key, actual)
            result = self.trigger.on_element(record, ts, actual, ctx)
            self._act(result, key, actual, state_window)
            self._register_cleanup(key, actual)
        self._touched(key)
        return skipped and self.event_time and ts + self.allowed_lateness <= self.current_watermark

    def _merging_set(self, key: Any) -> MergingWindowSet:
        mws = self.merging_sets.get(key)
        if mws is None:
            mws = self.merging_sets[key] = MergingWindowSet(self.assigner)
        return mws

    def _merge(self, key: Any, result: Any, merged: list, state_result: Any, merged_states: list) -> None:
        if self.event_time and result.max_timestamp() + self.allowed_lateness <= self.current_watermark:
            raise AssertionError(f"merged window {result} is already past the watermark")
        ctx = WindowContext(self, key, result)
        ctx._merged = list(merged)
        self.trigger.on_merge(result, ctx)
        for w in merged:
            self.trigger.clear(w, WindowContext(self, key, w))
            self._delete_cleanup(key, w)
        wins = self.contents.setdefault(key, {})
        acc = wins.get(state_result, _MISSING)
        for sw in merged_states:
            other = wins.pop(sw, _MISSING)
            if other is _MISSING:
                continue
            acc = other if acc is _MISSING else self._merge_acc(acc, other)
        if acc is not _MISSING:
            wins[state_result] = acc

    def _merge_acc(self, a: Any, b: Any) -> Any:
        if self.fn.reduce is not None:
            return self.fn.reduce(a, b)
        if self.fn.aggregate is not None:
            return self.fn.aggregate.merge(a, b)
        return a + b

    def _add(self, key: Any, state_window: Any, record: Any, ts: int) -> None:
        wins = self.contents.setdefault(key, {})
        acc = wins.get(state_window, _MISSING)
        if self.evictor is not None:
            if acc is _MISSING:
                wins[state_window] = [(ts, record)]
            else:
                acc.append((ts, record))
        elif self.fn.reduce is not None:
            wins[state_window] = record if acc is _MISSING else self.fn.reduce(acc, record)
        elif self.fn.aggregate is not None:
            agg = self.fn.aggregate
            wins[state_window] = agg.add(record, agg.create_accumulator() if acc is _MISSING else acc)
        elif acc is _MISSING:
            wins[state_window] = [record]
        else:
            acc.append(record)

    def _act(self, result: TriggerResult, key: Any, window: Any, state_window: Any) -> None:
        wins = self.contents.get(key)
        if result.is_fire():
            acc = None if wins is None else wins.get(state_window, _MISSING)
            if acc is not None and acc is not _MISSING:
                self._emit(key, window, acc)
        if result.is_purge() and wins is not None:
            wins.pop(state_window, None)
            if not wins:
                del self.contents[key]

    def _emit(self, key: Any, window: Any, acc: Any) -> None:
        fn = self.fn
        ctx = WindowContext(self, key, window)
        if self.evictor is not None:
            elements = list(acc)
            self.evictor.evict_before(elements, len(elements), window, ctx)
            values = [v for _, v in elements]
            if fn.reduce is not None:
                values = [_fold(fn.reduce, values)] if values else []
            elif fn.aggregate is not None:
                a = fn.aggregate.create_accumulator()
                for v in values:
                    a = fn.aggregate.add(v, a)
                values = [fn.aggregate.get_result(a)]
            self.evictor.evict_after(elements, len(elements), window, ctx)
            acc[:] = elements
        elif fn.reduce is not None:
            values = [acc]
        elif fn.aggregate is not None:
            values = [fn.aggregate.get_result(acc)]
        else:
            values = acc
        results = fn.process(key, ctx, values) if fn.process is not None else values
        self.out.add(results, window.max_timestamp())

    # -- timers --------------------------------------------------------------
    def _register_cleanup(self, key: Any, window: Any) -> None:
        t = self.cleanup_time(window)
        if t == MAX_WATERMARK:
            return  # GlobalWindow: never cleaned up
        if self.event_time:
            self.timers.register_event_time_timer(key, window, t)
        else:
            self.register_processing_timer(key, window, t)

    def _delete_cleanup(self, key: Any, window: Any) -> None:
        t = self.cleanup_time(window)
        if self.event_time:
            self.timers.delete_event_time_timer(key, window, t)
        else:
            self.timers.delete_processing_time_timer(key, window, t)

    async def process_watermark(self, watermark: Watermark) -> None:
        ts = watermark.timestamp
        self.current_watermark = ts
        if ts == MAX_WATERMARK and self.ctx.batch:
            self._quiesced = True  # the end of a batch job's input (TimerOperator)
        pop = self.timers.pop_event_timer
        try:
            if self.fast:
                await self._fire_panes(ts)
            n = 0
            while (timer := pop(ts)) is not None:
                self.backend.current_key = timer.key
                self._on_timer(timer, event_time=True)
                n += 1
                if n % FIRE_SLICE == 0:
                    await self._between_slices()
        except Exception as exc:
            raise self.failure(exc) from None
        await self.out.flush(self, True)
        if ts == MAX_WATERMARK and self.ctx.batch:  # processing-time windows fire too (api/batch.py)
            await self.fire_processing_timers_at_end()
        await self.output.emit_watermark(watermark)

    async def on_processing_timer(self, timer: Timer) -> None:
        try:
            self._on_timer(timer, event_time=False)
        except Exception as exc:
            raise self.failure(exc) from None
        await self.out.flush(self, True)

    def _on_timer(self, timer: Timer, event_time: bool) -> None:
        key, window = timer.key, timer.namespace
        mws = self.merging_sets.get(key) if self.merging else None
        state_window = window
        if mws is not None:
            state_window = mws.get_state_window(window)
            if state_window is None:
                return  # the window was merged away or already cleaned up
        ctx = WindowContext(self, key, window)
        if event_time:
            result = self.trigger.on_event_time(timer.timestamp, window, ctx)
        else:
            result = self.trigger.on_processing_time(timer.timestamp, window, ctx)
        self._act(result, key, window, state_window)
        if self.event_time == event_time and timer.timestamp == self.cleanup_time(window):
            self._clear_all(key, window, state_window, mws)
        self._touched(key)

    def _clear_all(self, key: Any, window: Any, state_window: Any, mws: Any) -> None:
        wins = self.contents.get(key)
        if wins is not None:
            wins.pop(state_window, None)
            if not wins:
                del self.contents[key]
        ctx = WindowContext(self, key, window)
        self.trigger.clear(window, ctx)
        pf = self.fn.process_function
        if pf is not None and hasattr(pf, "clear"):
            pf.clear(ctx)
        if mws is not None:
            mws.retire_window(window)
            if not len(mws):
                del self.merging_sets[key]
        store = self.trigger_state.get(key)
        if store is not None and not store:
            del self.trigger_state[key]

    async def _between_slices(self) -> None:
        """Send what fired so far, then pause if the job's loop budget is used up. Nothing else
        of this task runs meanwhile (it is inside this watermark), so the panes and timers stay
        as they are."""
        await self.out.flush(self, True)
        await yield_point()

    # WindowAssignerContext
    def get_current_processing_time(self) -> int:
        return self.ctx.clock.now_ms()


def _clears(process_function: Any) -> bool:
    """Whether a ProcessWindowFunction overrides ``clear(context)`` (called at each window's
    cleanup: the fast path drops its panes without a per-key call)."""
    from ..functions import ProcessAllWindowFunction, ProcessWindowFunction

    if process_function is None:
        return False
    # window_all's adapter (api/all_windowed.py) clears through the user's function
    target = getattr(process_function, "clear_target", process_function)
    return getattr(type(target), "clear", None) not in (
        None,
        ProcessWindowFunction.clear,
        ProcessAllWindowFunction.clear,
    )


def _fold(reduce: Callable[[Any, Any], Any], values: list) -> Any:
    acc = values[0]
    for v in values[1:]:
        acc = reduce(acc, v)
    return acc
