"""Sorted inputs and per-key timers of keyed operators in a batch job (Flink's BATCH runtime).

Theory of operation
-------------------
In ``RuntimeExecutionMode.BATCH`` Flink puts a sorter in front of every keyed
operator (``SortingDataInput``; ``MultiInputSortingDataInput`` when both inputs
of a two-input operator are keyed), so the operator sees one key's records
after another, each key's in timestamp order; its timer service
(``BatchExecutionInternalTimeService``) holds the timers of the current key
only and fires them when the key changes: first the event-time timers (the
watermark is ``+inf`` for that key), then the processing-time ones; and its
keyed state backend (``BatchExecutionKeyedStateBackend``) keeps only the
current key's state. :func:`install_sorted_input` gives an operator that
behaviour: its class becomes a subclass with :class:`SortedKeyedInput` in
front, which

* **buffers** every record of a keyed input in a
  :class:`~streamflow.runtime.sort_buffer.SortBuffer` (keys probed as the
  operator probes them, so list keys get their stand-ins); a broadcast input
  (the second input of a ``KeyedBroadcastProcessFunction``) passes straight
  through, so it is read in full before any keyed record, as Flink reads
  broadcast inputs first;
* drops watermarks and watermark statuses below the end of input (Flink's
  sorted inputs do not forward them: a batch job's event time jumps to the end);
* at the end of input (the maximum watermark) **drains** the buffer: for each
  key in order its records go to the operator's own ``process_batch`` (or
  ``process_batch2``), in timestamp order, in chunks of one input; then
  :meth:`SortedKeyedInput.end_of_key` fires that key's event-time timers in
  timestamp order (the operator's watermark is ``MAX`` meanwhile: window
  panes of the fast path fire too), then its processing-time timers, and drops
  the key's state (heap tables; RocksDB's stay on disk). While they fire the
  timer service is quiesced as Flink's is: a timer a callback registers is
  ignored and logged. The watermark is ``MIN`` again for the next key, as in
  Flink, so no record is ever late. Processing-time timers are never
  scheduled on the clock in batch mode: they wait for their key's end.
* then hands the maximum watermark to the operator as before (which finds no
  timer left and forwards it).

While draining, the operator's output is a :class:`CoalescingOutput`: the many
small results of key-by-key processing (one per key for a reduce) travel
downstream in batches of the job's batch size, in order, flushed before the
watermark. Streaming jobs never get here: the subclass is installed only in
batch mode (``Execution``), so the streaming hot path is untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from functools import cache
from typing import Any, cast

from ..state.codec import Codec
from .events import MAX_WATERMARK, MIN_WATERMARK, Watermark, WatermarkStatus
from .item_getters import failed_record
from .loop_budget import yield_point
from .operator import Output, StreamOperator
from .sort_buffer import DEFAULT_SORT_MEMORY, SortBuffer
from .timer_operator import TimerOperator
from .window_fast_path import fire_panes
from .window_operator import WindowOperator

__all__ = ["CoalescingOutput", "SortedKeyedInput", "install_sorted_input"]

_log = logging.getLogger(__name__)
_WORK_SLICE = 2048  # records fed (a key's end counting as _KEY_END_WORK) between yield points
_KEY_END_WORK = 8


def install_sorted_input(
    op: StreamOperator,
    memory: int = DEFAULT_SORT_MEMORY,
    batch_size: int = 512,
    spill: tuple[Codec, str | None, set[str]] | None = None,
) -> None:
    """Give a keyed operator of a batch job its sorted input and per-key timers (module doc).
    ``spill``: how its runs are written (``sort_runs.py``): the codec, why a record the codec
    refuses may be pickled (None: it may not), the operators whose fallback was logged."""
    if not isinstance(op, TimerOperator):
        raise TypeError(f"operator {op.name!r}: a keyed operator must keep per-key timers to sort its input")
    put_in_front(op, SortedKeyedInput, "Sorted", memory, batch_size, spill)


def put_in_front(op: StreamOperator, front: type, prefix: str, memory: int, batch_size: int,
                 spill: tuple[Codec, str | None, set[str]] | None) -> Any:
    """Put ``front`` before ``op``'s own class (one class made per operator class) and give it the
    sorter's settings; ``op``, typed for the front's attributes (half_sorted_input.py too)."""
    op.__class__ = _front_class(front, prefix, cast(Hashable, type(op)))
    sorted_op: Any = op
    sorted_op._sort_memory = memory
    sorted_op._sort_chunk = batch_size
    if spill is not None:
        sorted_op._sort_spill = spill
    return sorted_op


@cache
def _front_class(front: type, prefix: str, cls: Any) -> type:
    return type(f"{prefix}{cls.__name__}", (front, cls), {"__module__": cls.__module__})


class SortedKeyedInput(TimerOperator):
    """The front of a keyed operator in a batch job (module doc). Only ever a base of a
    class made by :func:`install_sorted_input`, in front of the operator's own class."""

    _sort_memory = DEFAULT_SORT_MEMORY
    _sort_chunk = 512
    _sort_spill: tuple[Codec | None, str | None, set[str] | None] = (None, None, None)
    _sorter: SortBuffer | None = None

    def _sorted_buffer(self) -> SortBuffer:
        sorter = self._sorter
        if sorter is None:
            where = f"operator {self.name!r} (uid {self.uid!r})"
            codec, pickle_reason, logged = self._sort_spill
            sorter = self._sorter = SortBuffer(
                where, self._sort_memory, codec=codec, pickle_reason=pickle_reason, logged=logged
            )
        return sorter

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if not records:
            return
        if self._check_key_type:
            self.check_key_type(records)  # list keys get hashable stand-ins (as the operator would)
        self._sorted_add(0, self.key_selector, records, timestamps)

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        key_of = getattr(self, "key_selector2", None)
        if key_of is None:  # a broadcast input: read in full before any keyed record
            await super().process_batch2(records, timestamps)  # type: ignore[misc]
            return
        if not records:
            return
        if getattr(self, "_check_key_type2", False):
            self._check_key_type2 = False
            key_of = self.check_key_type(records, "key_selector2")
        self._sorted_add(1, key_of, records, timestamps)

    def _sorted_add(self, input_index: int, key_of: Any, records: list, timestamps: list[int] | None) -> None:
        it = iter(records)
        try:
            keys = list(map(key_of, it))  # in C (an indexing key selector is an itemgetter)
        except Exception as exc:
            raise self.failure(exc, failed_record(records, it)) from None
        try:
            self._sorted_buffer().add(input_index, keys, records, timestamps)
        except Exception as exc:
            raise self.failure(exc) from None

    async def process_watermark(self, watermark: Watermark) -> None:
        if watermark.timestamp < MAX_WATERMARK:
            return  # sorted inputs forward no watermark before the end (Flink's SortingDataInput)
        await self._sorted_drain()
        await super().process_watermark(watermark)

    async def process_watermark_status(self, status: WatermarkStatus) -> None:
        pass  # nor watermark statuses: the operator runs after its whole input has arrived

    def register_processing_timer(self, key: Any, namespace: Any, ts: int) -> None:
        """Batch mode: a processing-time timer waits for the end of its key (never on the clock)."""
        if self._quiesced:
            self.quiesced_timer("processing", ts)
            return
        self.timers.register_processing_time_timer(key, namespace, ts)

    _quiesce_logged = False

    def quiesced_timer(self, domain: str, ts: int) -> None:
        """A timer registered while a key's timers fire: ignored, as Flink ignores it, with a
        warning (once per operator subtask; the next ones at DEBUG, a trigger may re-register
        on every firing)."""
        level = logging.DEBUG if self._quiesce_logged else logging.WARNING
        self._quiesce_logged = True
        _log.log(
            level,
            "operator %r: the timer service is quiesced while a key's timers fire (batch mode); "
            "%s time timer for timestamp %d ignored (as in Flink)%s", self.name, domain, ts,
            "" if level == logging.DEBUG else "; further ones are logged at DEBUG",
        )  # fmt: skip

    async def _sorted_drain(self) -> None:
        sorter, self._sorter = self._sorter, None
        if sorter is None:
            return
        first = super().process_batch
        second: Any = getattr(super(), "process_batch2", None)
        output = self.output
        coalescing = self.output = CoalescingOutput(output, self._sort_chunk)
        try:
            current, key, work = -1, None, 0
            for kid, k, input_index, records, timestamps in sorter.drain(self._sort_chunk):
                if kid != current:
                    if current >= 0:
                        await self.end_of_key(key)
                        work += _KEY_END_WORK
                    current, key = kid, k
                await (first if input_index == 0 else second)(records, timestamps)
                work += len(records)
                if work >= _WORK_SLICE:  # the loop budget may pause (a reduce emits nothing meanwhile)
                    work = 0
                    await yield_point()
            if current >= 0:
                await self.end_of_key(key)
            await coalescing.flush()
        finally:
            sorter.close()
            self.output = output

    async def end_of_key(self, key: Any) -> None:
        """Flink's ``BatchExecutionInternalTimeService.setCurrentKey`` for the next key: the
        key's event-time timers fire (watermark ``MAX``), then its processing-time timers, with
        the timer service quiesced; then its state goes (``BatchExecutionKeyedStateBackend``)."""
        timers, backend = self.timers, self.backend
        self.current_watermark = MAX_WATERMARK
        self._quiesced = True
        self.timers = _Quiesced(timers, self)  # type: ignore[assignment]
        fired = [0]  # counted once for the key (numFiredTimers), a failed timer too
        try:
            await self._sorted_fire_event_time(timers, fired)
            while (timer := timers.pop_processing_timer(MAX_WATERMARK)) is not None:
                fired[0] += 1
                backend.current_key = timer.key
                await self.on_processing_timer(timer)
        finally:
            self.count_fired(fired[0])
            self.timers = timers
            self._quiesced = False
            self.current_watermark = MIN_WATERMARK
        for table in backend.heap_tables():
            table.pop(key, None)

    async def _sorted_fire_event_time(self, timers: Any, fired: list[int]) -> None:
        """The key's event-time timers (a window's panes too), counted in ``fired[0]``."""
        backend = self.backend
        if isinstance(self, WindowOperator):  # windows fire their panes and timers, then flush
            try:
                if self.fast:
                    fired[0] += await fire_panes(self, MAX_WATERMARK)
                while (timer := timers.pop_event_timer(MAX_WATERMARK)) is not None:
                    fired[0] += 1
                    backend.current_key = timer.key
                    self._on_timer(timer, event_time=True)
            except Exception as exc:
                raise self.failure(exc) from None
            await self.out.flush(self, True)
            return
        while (timer := timers.pop_event_timer(MAX_WATERMARK)) is not None:
            fired[0] += 1
            backend.current_key = timer.key
            await self.on_event_timer(timer)

    def dispose(self) -> None:
        sorter, self._sorter = self._sorter, None
        if sorter is not None:  # a failed or cancelled job: its spill files go
            sorter.close()
        super().dispose()


class _Quiesced:
    """The timer service while a key's timers fire: registering is ignored (logged), as
    Flink's batch timer service is quiesced then; everything else reaches the real one."""

    __slots__ = ("_op", "_timers")

    def __init__(self, timers: Any, op: SortedKeyedInput) -> None:
        self._timers, self._op = timers, op

    def register_event_time_timer(self, key: Any, namespace: Any, ts: int) -> bool:
        self._op.quiesced_timer("event", ts)
        return False

    def register_processing_time_timer(self, key: Any, namespace: Any, ts: int) -> bool:
        self._op.quiesced_timer("processing", ts)
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._timers, name)


class CoalescingOutput(Output):
    """An output that gathers what it is given into batches of ``size`` records per target
    (main, each side output), in order, and passes them on when full or on ``flush``; a
    batch with timestamps and one without are never merged."""

    __slots__ = ("_inner", "_pending", "_size")

    def __init__(self, inner: Output, size: int) -> None:
        self._inner, self._size = inner, max(1, size)
        # tag (None: main) -> (records, timestamps or None)
        self._pending: dict[str | None, tuple[list, list[int] | None]] = {}

    async def _add(self, tag: str | None, records: list, timestamps: list[int] | None) -> None:
        if not records:
            return
        pending = self._pending.get(tag)
        if pending is not None and (pending[1] is None) != (timestamps is None):
            await self._send(tag)
            pending = None
        if pending is None:
            pending = self._pending[tag] = ([], None if timestamps is None else [])
        pending[0].extend(records)
        if timestamps is not None:
            pending[1].extend(timestamps)  # type: ignore[union-attr]
        if len(pending[0]) >= self._size:
            await self._send(tag)

    async def _send(self, tag: str | None) -> None:
        pending = self._pending.pop(tag, None)
        if pending is None:
            return
        if tag is None:
            await self._inner.push(*pending)
        else:
            await self._inner.push_side(tag, *pending)

    async def flush(self) -> None:
        for tag in list(self._pending):
            await self._send(tag)

    async def push(self, records: list, timestamps: list[int] | None) -> None:
        await self._add(None, records, timestamps)

    def has_side(self, tag_id: str) -> bool:
        return self._inner.has_side(tag_id)

    async def push_side(self, tag_id: str, records: list, timestamps: list[int] | None) -> None:
        await self._add(tag_id, records, timestamps)

    async def emit_watermark(self, watermark: Watermark) -> None:
        await self.flush()
        await self._inner.emit_watermark(watermark)

    async def emit_watermark_status(self, status: WatermarkStatus) -> None:
        await self.flush()
        await self._inner.emit_watermark_status(status)
