"""The base of every operator with per-key timers: the keyed process operator, windows, the
keyed aggregations and the sorted inputs.

:class:`TimerOperator` fires event-time timers when the watermark passes them, before
forwarding the watermark, and processing-time timers from the task's processing-time service,
between batches. It owns the keyed state backend's lifecycle in the operator: snapshots of state
and timers (incremental where the backend is), the notifications, and the restore (rescaled by
key group, and from a RocksDB savepoint onto the heap). The current key is set before
``on_event_timer`` or ``on_processing_timer`` is called.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..state.hashable_keys import probe
from ..state.key_groups import key_group_of
from ..state.keyed import KeyedStateBackend
from ..state.rocksdb_to_heap import heap_state_of
from ..state.ttl_migration import note_restored, user_states
from .events import MAX_WATERMARK, MIN_WATERMARK, Watermark
from .item_getters import item_getter
from .loop_budget import yield_point
from .operator import StreamOperator
from .processing_time import Registration
from .timer_checkpoints import TimerCheckpoints, TimerRestore, columns_of, is_incremental, timer_columns
from .timers import Timer, TimerService

if TYPE_CHECKING:
    from ..state.rocksdb_backend import RocksDBKeyedStateBackend


_log = logging.getLogger(__name__)


class TimerOperator(StreamOperator):
    """Base for keyed operators with timers; subclasses implement ``on_event_timer`` and
    ``on_processing_timer``; the current key is set before either is called."""

    def __init__(self, name: str, key_selector: Callable[[Any], Any]) -> None:
        super().__init__(name)
        self.key_selector = item_getter(key_selector) or key_selector  # lambda e: e[0] runs in C
        self.timers = TimerService()
        self._timer_ck: TimerCheckpoints | None = None  # incremental timer checkpoints (heap)
        self._timer_restore: TimerRestore | None = None  # restored timers not registered yet
        self._rocks_restore: tuple[list[Any], Any] | None = None  # timers once RocksDB restored
        self._heap_migration: tuple[list[Any], Any] | None = None  # RocksDB state onto the heap
        self._full_timers: dict[str, Any] | None = None  # captured for a full snapshot (capture_shared)
        self.current_watermark = MIN_WATERMARK
        # the one wake-up pending at the task's processing-time service, for the earliest
        # processing-time timer: (its time, its registration), or None (see _wake_at)
        self._wakeup: tuple[int, Registration] | None = None
        self._quiesced = False  # batch mode, at the end of input: new processing timers are ignored
        # the first batch probes its first key: an unhashable one (a list, as PyFlink allows)
        # gets a hashable stand-in from then on, a restored operator checks the key's type
        self._check_key_type = True

    @property
    def backend(self) -> KeyedStateBackend:
        backend = self.ctx.keyed_backend
        assert backend is not None, "a keyed operator needs a keyed state backend"
        return backend

    def setup(self, ctx: Any, output: Any) -> None:
        super().setup(ctx, output)
        # Flink 1.20's operator metrics (FLINK-35065, InternalTimeServiceManagerImpl): every timer
        # that fires, whichever domain, backend or input (sorted batch input, a window's panes)
        self._fired_counter = ctx.metrics.counter("numFiredTimers")
        self._fired_meter = ctx.metrics.meter("numFiredTimersPerSecond")
        rocks = self._rocks
        if rocks is not None:  # timers in RocksDB beside the keyed state (state/rocksdb_timers.py)
            from ..state.rocksdb_timers import RocksDBTimerService

            self.timers = RocksDBTimerService(rocks, self.encode_namespace, self.decode_namespace)
            return
        settings = getattr(ctx.keyed_backend, "incremental_settings", None)
        if settings is not None:  # heap backend, incremental checkpoints: timers too (timer_checkpoints.py)
            enc = self.encode_namespace if self.timer_namespaces else None
            self._timer_ck = TimerCheckpoints(self.timers, settings, enc)

    def register_processing_timer(self, key: Any, namespace: Any, ts: int) -> None:
        if self._quiesced:
            _log.warning(
                "operator %r: the timer service is quiesced at the end of a batch job's input; "
                "processing time timer for timestamp %d ignored (as in Flink)",
                self.name,
                ts,
            )
            return
        if self.timers.register_processing_time_timer(key, namespace, ts):
            wakeup = self._wakeup
            if wakeup is None or ts < wakeup[0]:
                self._wake_at(ts)

    def _wake_at(self, ts: int | None) -> None:
        """One physical processing-time timer per operator, for the earliest timer, as Flink's
        ``InternalTimerServiceImpl`` keeps one ``nextTimer``: a registration earlier than it
        cancels it and schedules its own time; when it fires, the due timers fire and the next
        wake-up is scheduled for the new head. A deletion leaves it (it finds nothing due and
        schedules the head). So millions of timers (or restored ones) cost one entry at the
        task's processing-time service, not one per distinct timestamp."""
        wakeup, self._wakeup = self._wakeup, None
        if wakeup is not None:
            wakeup[1].cancel()
        if ts is not None:
            self._wakeup = (ts, self.ctx.processing_time.register(ts, self._on_processing_time))

    async def _on_processing_time(self, at: int) -> None:
        self._wakeup = None
        await self._fire_due(False, self.ctx.clock.now_ms(), False)
        self._schedule_next_processing_time()

    def _schedule_next_processing_time(self) -> None:
        nxt = self.timers.next_processing_time()
        wakeup = self._wakeup
        if wakeup is None or nxt is None or nxt < wakeup[0]:
            self._wake_at(nxt)

    async def process_watermark(self, watermark: Watermark) -> None:
        ts = watermark.timestamp
        self.current_watermark = ts
        if ts == MAX_WATERMARK and self.ctx.batch:
            self._quiesced = True  # the end of a batch job's input: see fire_processing_timers_at_end
        await self._fire_due(True, ts, True)  # a watermark may fire a timer per key: pauses between them
        if ts == MAX_WATERMARK and self.ctx.batch:
            await self.fire_processing_timers_at_end()
        await self.output.emit_watermark(watermark)

    async def fire_processing_timers_at_end(self) -> None:
        """Batch mode (Flink's ``BatchExecutionInternalTimeService``): at the end of input every
        pending processing-time timer fires, after the event-time ones; the timer service is
        quiesced then (from the end-of-input watermark on), so a processing-time timer a timer
        callback registers is ignored (logged), as in Flink."""
        self._quiesced = True
        await self._fire_due(False, MAX_WATERMARK, True)

    async def _fire_due(self, event_time: bool, time: int, pause: bool) -> None:
        """Fire the timers of one domain due at ``time``, in order; a long run of deleted timers
        is skipped a slice at a time, pausing through the loop budget between two slices
        (``TimerService.drop_dead_*``); ``pause``: between two timers too. The timers fired
        are counted once at the end (``numFiredTimers``), a timer whose callback failed too."""
        t, e = self.timers, event_time
        pop, drop, on = (t.pop_event_timer, t.drop_dead_event_timers, self.on_event_timer) if e else (
            t.pop_processing_timer, t.drop_dead_processing_timers, self.on_processing_timer)  # fmt: skip
        n = 0
        try:
            while True:
                while not drop(time):
                    await yield_point()
                if (timer := pop(time)) is None:
                    return
                n += 1
                self.backend.current_key = timer.key
                await on(timer)
                if pause:
                    await yield_point()
        finally:
            self.count_fired(n)

    def count_fired(self, n: int) -> None:
        """Add ``n`` fired timers to ``numFiredTimers`` and ``numFiredTimersPerSecond`` (once
        per firing run, not per timer: Flink's counter and meter count the same events)."""
        if n:
            self._fired_counter.count += n
            self._fired_meter.count += n

    def next_event_time(self) -> int | None:
        """The earliest watermark at which this operator has work (a timer to fire), or None.
        Engines that wake operators by timeouts (Spark) use it; the asyncio engine does not."""
        return self.timers.next_event_time()

    async def on_event_timer(self, timer: Timer) -> None:
        pass

    async def on_processing_timer(self, timer: Timer) -> None:
        pass

    # -- checkpoints: keyed state and timers, redistributed by key group ------
    timer_namespaces = True  # whether timers may have a namespace (encode_namespace converts it)

    async def capture_shared(self, checkpoint_id: int, savepoint: bool) -> Any:
        """At the barrier, before :meth:`snapshot_state`: the timers' incremental capture (a
        ``SharedUpload``), or None (their snapshot holds them, see ``timer_checkpoints.py``)."""
        ck = self._timer_ck
        if ck is None or ck.timers is not self.timers:
            if self._rocks is None:  # a full snapshot's timer columns, in slices that yield
                self._full_timers = {}
                codec = self.backend.state_codec  # each slice encoded: opaque bytes to the checkpoint
                for _ in timer_columns(self.timers, self.encode_namespace, self._full_timers, codec):
                    await yield_point()
            return None
        return await ck.capture(checkpoint_id, savepoint)

    def encode_namespace(self, namespace: Any) -> Any:
        return namespace

    def decode_namespace(self, plain: Any) -> Any:
        return plain

    def snapshot_state(self, checkpoint_id: int) -> Any:
        rocks = self._rocks
        if rocks is not None:  # RocksDB: the timers are in its files with the keyed state
            timers: dict[str, Any] = {"event_time": [], "processing_time": []}
        else:
            captured = None if self._timer_ck is None else self._timer_ck.snapshot()
            if captured is None:  # a full snapshot: its columns captured at the barrier (capture_shared)
                captured, self._full_timers = self._full_timers, None
                if captured is None:  # no capture ran (a final snapshot): now, in one piece
                    captured = {}
                    deque(timer_columns(self.timers, self.encode_namespace, captured), maxlen=0)
            timers = captured
        keyed = rocks.snapshot(checkpoint_id) if rocks is not None else self.backend.snapshot()
        snap = {"keyed": keyed, "timers": timers}
        # the declared types, also of restored states not declared again (state/typed.py)
        types = {**self.backend.restored_types, **self.backend.declared_types}
        if types:
            snap["types"] = types
        flags = user_states(self.backend)  # which user states have a TTL (state/ttl_migration.py)
        if flags:
            snap["user_states"] = flags
        return snap

    # -- a keyed state backend with its own checkpoints (RocksDB: state/rocksdb_backend.py) --
    @property
    def _rocks(self) -> RocksDBKeyedStateBackend | None:
        backend = getattr(getattr(self, "ctx", None), "keyed_backend", None)
        return (
            cast("RocksDBKeyedStateBackend", backend) if backend is not None and backend.is_rocksdb else None
        )

    async def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        await super().prepare_snapshot_pre_barrier(checkpoint_id)
        rocks = self._rocks
        if rocks is not None:
            # its memtable flush runs in a worker thread (the loop stays free); this task
            # processes no record until it returns
            await asyncio.to_thread(rocks.prepare(checkpoint_id))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> Awaitable[None] | None:
        # RocksDB: its files are stored; the heap: its incremental chain advances (and the timers')
        self.backend.checkpoint_complete(checkpoint_id)
        if self._timer_ck is not None:
            self._timer_ck.confirm(checkpoint_id)
        return super().notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        rocks = self._rocks
        if rocks is not None:
            rocks.checkpoint_aborted(checkpoint_id)
        super().notify_checkpoint_aborted(checkpoint_id)

    def take_shared_files(self, checkpoint_id: int) -> tuple[dict[str, Path], list[str]]:
        """The shared files (RocksDB's SST files) of this operator's snapshot ``checkpoint_id``:
        ``({name: path} to store, [names] stored by an earlier checkpoint)``."""
        rocks = self._rocks
        return rocks.take_shared(checkpoint_id) if rocks is not None else ({}, [])

    def dispose(self) -> None:
        rocks = self._rocks
        if rocks is not None:
            rocks.close()
        super().dispose()

    def initialize_state(self, restored: Any) -> None:
        if restored is None:
            return
        maxp = self.ctx.max_parallelism
        groups = restored.key_groups
        states = [s for s in restored.all if s is not None]
        for s in states:
            self.backend.restored_types.update(s.get("types", {}))
        note_restored(self.backend, states)
        rocks = self._rocks
        if rocks is not None:
            files = getattr(restored, "shared_path", None), getattr(restored, "read_shared", None)
            rocks.restore([s["keyed"] for s in states], lambda g: g in groups, *files)
            if rocks.start_pending:  # restored when the task starts it, off the loop: timers then
                self._rocks_restore = (states, restored)
                return
            cast(Any, self.timers).reset(restored=True)
        else:
            if any(s["keyed"].get("rocksdb") for s in states):  # a job moving from RocksDB to the heap
                if getattr(self.backend, "defer_restore", False):  # read off the loop: start_restore
                    self._heap_migration = (states, restored)
                    return
                states = [heap_state_of(states, restored, maxp, self.backend.state_codec)]
            self._restore_heap(states, restored)
        self._restore_timers(states, restored)

    def _restore_heap(self, states: list[Any], restored: Any) -> None:
        groups = restored.key_groups
        self.backend.restore_from(
            [s["keyed"] for s in states],
            lambda g: g in groups,
            key_groups=groups,
            read_shared=getattr(restored, "read_shared", None),
            codec=getattr(restored, "codec", None),
        )

    async def start_restore(self) -> None:
        """The task, once its keyed backends started: a RocksDB snapshot restored onto the heap
        is read through a scratch RocksDB (``state/rocksdb_to_heap.py``: open, restore, read,
        close) in a worker thread, then restored as a heap snapshot."""
        pending, self._heap_migration = self._heap_migration, None
        if pending is None:
            return
        states, restored = pending
        maxp, codec = self.ctx.max_parallelism, self.backend.state_codec
        heap = [await asyncio.to_thread(heap_state_of, states, restored, maxp, codec)]
        self._restore_heap(heap, restored)
        self._restore_timers(heap, restored)

    def _restore_timers(self, states: list[Any], restored: Any) -> None:
        maxp, groups = self.ctx.max_parallelism, restored.key_groups

        def owns_key(key: Any) -> bool:
            return key_group_of(key, maxp) in groups

        dec, codec = self.decode_namespace, getattr(restored, "codec", None)
        for s in states:
            if is_incremental(s["timers"]):
                continue
            timers = {}
            for domain, stored in s["timers"].items():  # parts, columns or tuples (timer_checkpoints)
                ts, keys, plain = columns_of(stored, codec)
                timers[domain] = zip(ts, keys, [ns if ns is None else dec(ns) for ns in plain], strict=True)
            self.timers.restore(timers, owns_key)
        chains = [s["timers"] for s in states if is_incremental(s["timers"])]
        if not chains:
            self._timers_restored()
            return
        # incremental timer checkpoints: files read now, timers registered by the task before
        # its operators open, in slices (timer_checkpoints.TimerRestore)
        read_shared = getattr(restored, "read_shared", None)
        done = self._timers_restored
        restore = TimerRestore(self.timers, chains, read_shared, codec, groups, maxp, dec, done)
        if getattr(self.backend, "defer_restore", False):
            self._timer_restore = restore
        else:
            restore.finish_now()

    async def finish_restore(self) -> None:
        """The task, before opening its operators (after starting the keyed backend): register
        restored timers in slices; RocksDB's: those its DB holds now."""
        rocks_restore, self._rocks_restore = self._rocks_restore, None
        if rocks_restore is not None:
            cast(Any, self.timers).reset(restored=True)
            self._restore_timers(*rocks_restore)
        restore, self._timer_restore = self._timer_restore, None
        if restore is not None:
            await restore.finish()

    def _timers_restored(self) -> None:
        """Every timer is back: the next timer checkpoint is a base; processing time wakes."""
        if self._timer_ck is not None:
            self._timer_ck.restored()
        self._schedule_next_processing_time()  # Flink's startTimerService: the restored head

    def check_key_type(self, records: list, attr: str = "key_selector") -> Callable[[Any], Any]:
        """Once, on the first records: the key selector named ``attr`` is replaced by one giving
        hashable stand-ins if its first key is unhashable (``state/hashable_keys.py``; a hashable
        key costs nothing per record), and after a restore the key's type is checked against the
        checkpoint's. Returns the selector to use."""
        key_of = getattr(self, attr)
        if not records:
            return key_of
        if attr == "key_selector":
            self._check_key_type = False
        try:
            key_of, key = probe(key_of, records[0], repr(self.name))
        except Exception as exc:
            raise self.failure(exc, records[0]) from None
        setattr(self, attr, key_of)
        self.backend.check_key_type(key, repr(self.name))
        return key_of
