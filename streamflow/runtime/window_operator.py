"""The window operator (a port of Flink's WindowOperator and EvictingWindowOperator).

Theory of operation
-------------------
State per key lives in the keyed backend: ``window-contents`` maps a key to
``{state window: accumulator}`` and ``window-trigger`` to the key's trigger
state. The accumulator is the reduced value (``reduce``), the aggregate
accumulator (``aggregate``), or the list of elements (``process``; with an
evictor, a list of ``(timestamp, element)``). For merging assigners
(sessions) a :class:`MergingWindowSet` per key maps in-flight windows to the
state window that holds their contents. Where these tables live (heap or
RocksDB) and how windows travel in checkpoints: ``window_tables.py``, the base
class :class:`~streamflow.runtime.window_tables.WindowTables`.

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
assigner/trigger calls per element, on panes ``{window: {key: acc}}`` whose
timers are implied; results are identical (``window_fast_path.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ..windowing.merging import MergingWindowSet
from ..windowing.triggers import Trigger, TriggerResult
from .context import RuntimeContext
from .detach import detached
from .events import MAX_WATERMARK, Watermark
from .loop_budget import yield_point
from .process_operators import _Emitter
from .timers import Timer
from .window_context import WindowContext, WindowFunctions
from .window_fast_path import FIRE_SLICE, fast_elements, fast_path_applies, fire_panes
from .window_tables import WindowTables

__all__ = ["FIRE_SLICE", "WindowOperator"]

_MISSING = object()


class WindowOperator(WindowTables):
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
        self.fast = fast_path_applies(assigner, self.trigger, evictor, functions)
        self.out = _Emitter()
        self.panes = {}  # fast path only (window_fast_path.py)
        self._fired = set()
        self._refire = {}

    async def open(self) -> None:
        metrics = self.ctx.metrics
        self.late_counter = metrics.counter("numLateRecords")
        self.dropped_counter = metrics.counter("numLateRecordsDropped")
        await super().open()

    # -- elements ------------------------------------------------------------
    def cleanup_time(self, window: Any) -> int:
        if not self.event_time:
            return window.max_timestamp()
        # Flink's ``cleanupTime``: past Long.MAX_VALUE (Java's overflow) is Long.MAX_VALUE, which
        # means no cleanup timer (_register_cleanup); Python's ints do not overflow, so cap
        t = window.max_timestamp() + self.allowed_lateness
        return t if t < MAX_WATERMARK else MAX_WATERMARK

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
                fast_elements(self, records, timestamps, late, late_ts)
            else:
                now = self.ctx.clock.now_ms()
                stamped = timestamps is not None
                for i, record in enumerate(records):
                    ts = timestamps[i] if timestamps is not None else now
                    if self._element(record, ts, stamped):
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

    def next_event_time(self) -> int | None:
        """Timers, and on the fast path the panes' implied timers (firing, then cleanup)."""
        due = [self.cleanup_time(w) if w in self._fired else w.end - 1 for w in self.panes]
        timer = super().next_event_time()
        if timer is not None:
            due.append(timer)
        return min(due) if due else None

    def _element(self, record: Any, ts: int, stamped: bool = True) -> bool:
        """Flink's processElement for one element; True if the element is late. A record
        without a timestamp (``stamped`` False) has the processing time as ``ts`` for the
        assigner and trigger, and no timestamp for an evictor (a ``TimeEvictor`` evicts nothing
        from a pane whose first element has none, and fails on one without behind one with)."""
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
            self._add(key, state_window, record, ts if stamped else None)
            ctx = WindowContext(self, key, actual)
            result = self.trigger.on_element(record, ts, actual, ctx)
            self._act(result, key, actual, state_window)
            self._register_cleanup(key, actual)
        self._touched(key)
        # Flink's isElementLate; ts + lateness past Long.MAX_VALUE (Java wraps to a negative, late)
        late_at = min(ts + self.allowed_lateness, MAX_WATERMARK)
        return skipped and self.event_time and late_at <= self.current_watermark

    def _merging_set(self, key: Any) -> MergingWindowSet:
        mws = self.merging_sets.get(key)
        if mws is None:
            mws = self.merging_sets[key] = MergingWindowSet(self.assigner)
        return mws

    def _merge(self, key: Any, result: Any, merged: list, state_result: Any, merged_states: list) -> None:
        # a misbehaving assigner could make a window late by merging: refused, as Flink does
        # (WindowOperator.processElement's merge function, UnsupportedOperationException)
        if self.event_time:
            if self.cleanup_time(result) <= self.current_watermark:
                raise NotImplementedError(
                    "The end timestamp of an event-time window cannot become earlier than the current "
                    f"watermark by merging. Current watermark: {self.current_watermark} window: {result}"
                )
        elif result.max_timestamp() <= (now := self.get_current_processing_time()):
            raise NotImplementedError(
                "The end timestamp of a processing-time window cannot become earlier than the current "
                f"processing time by merging. Current processing time: {now} window: {result}"
            )
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
            if other is _MISSING or other is None:  # None: contents a function emptied (_add)
                continue
            acc = other if acc is _MISSING or acc is None else self._merge_acc(acc, other)
        if acc is not _MISSING:
            wins[state_result] = acc

    def _merge_acc(self, a: Any, b: Any) -> Any:
        if self.evictor is not None:
            return a + b  # with an evictor the contents are (timestamp, element) lists (_add)
        if self.fn.reduce is not None:
            return self.fn.reduce(a, b)
        if self.fn.aggregate is not None:
            return self.fn.aggregate.merge(a, b)
        return a + b

    def _add(self, key: Any, state_window: Any, record: Any, ts: int | None) -> None:
        """Add ``record`` to the window's contents. Reduced or aggregated contents of None (a
        function returned None) are no contents: the next record starts them afresh, and the
        window does not fire with them (Flink's window contents are a ReducingState or
        AggregatingState, whose null state is no state)."""
        wins = self.contents.setdefault(key, {})
        acc = wins.get(state_window, _MISSING)
        if acc is None and self.evictor is None:
            acc = _MISSING
        if self.evictor is not None:
            if acc is _MISSING:
                wins[state_window] = [(ts, record)]
            else:
                acc.append((ts, record))
        elif self.fn.reduce is not None:  # the pane's own copy of a first record (detach.py)
            wins[state_window] = detached(record) if acc is _MISSING else self.fn.reduce(acc, record)
        elif self.fn.aggregate is not None:
            agg = self.fn.aggregate
            wins[state_window] = agg.add(record, agg.create_accumulator() if acc is _MISSING else acc)
        elif acc is _MISSING:
            wins[state_window] = [record]
        else:
            acc.append(record)

    def _act(self, result: TriggerResult, key: Any, window: Any, state_window: Any) -> None:
        wins = self.contents.get(key)
        purge = result.is_purge()
        if result.is_fire():
            acc = None if wins is None else wins.get(state_window, _MISSING)
            if acc is not None and acc is not _MISSING:
                self._emit(key, window, acc, kept=not purge)
                # an evictor that kept nothing empties the window: no firing until an element
                # comes (Flink re-adds the kept elements to a cleared ListState)
                purge = purge or (self.evictor is not None and not acc)
        if purge and wins is not None:
            wins.pop(state_window, None)
            if not wins:
                del self.contents[key]

    def _emit(self, key: Any, window: Any, acc: Any, kept: bool = True) -> None:
        """Fire ``window`` of ``key`` with its contents ``acc``. ``kept``: the contents stay in
        state after this firing (no purge), so a process function gets a copy of the element
        list (``runtime/detach.py``): one it emitted or changed must not be the list the next
        element is appended to (PyFlink hands it a fresh list per firing)."""
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
            values = [detached(acc)]  # a later reduce may change the pane's value in place
        elif fn.aggregate is not None:  # a result may be the accumulator, which later adds change
            values = [detached(fn.aggregate.get_result(acc))]
        else:
            values = list(acc) if kept and fn.process is not None else acc
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
        n = 0
        try:
            if self.fast:
                self.count_fired(await fire_panes(self, ts))
            drop = self.timers.drop_dead_event_timers
            while True:
                while not drop(ts):  # a long run of deleted timers: skipped a slice at a time
                    await self._between_slices()
                if (timer := pop(ts)) is None:
                    break
                n += 1
                self.backend.current_key = timer.key
                self._on_timer(timer, event_time=True)
                if n % FIRE_SLICE == 0:
                    await self._between_slices()
        except Exception as exc:
            raise self.failure(exc) from None
        finally:
            self.count_fired(n)
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
        if self.merging:
            # a timer of a window no longer in flight (merged away, or cleaned up -- with the
            # key's last window its whole set is gone): a trigger that left a timer behind; its
            # state is cleared already, so neither the trigger nor the function runs (Flink's
            # WindowOperator.onEventTime/onProcessingTime: "Timer firing for non-existent window")
            state_window = None if mws is None else mws.get_state_window(window)
            if state_window is None:
                return
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
    def get_runtime_context(self) -> RuntimeContext:
        """For assigners that keep keyed state (PyFlink's count assigners)."""
        return RuntimeContext(self.ctx)

    def get_current_processing_time(self) -> int:
        return self.ctx.clock.now_ms()


def _fold(reduce: Callable[[Any, Any], Any], values: list) -> Any:
    acc = detached(values[0])  # the evictor's kept elements stay as they came
    for v in values[1:]:
        acc = reduce(acc, v)
    return acc
