"""The broadcast state pattern's operators: ``connect(broadcast_stream).process(...)``.

Input 1 is the non-broadcast stream (forward, or key-partitioned for a
``KeyedBroadcastProcessFunction``); input 2 is the broadcast stream, which
reaches every subtask (a broadcast edge). Elements of input 2 go to
``process_broadcast_element`` with read-write broadcast state; elements of
input 1 to ``process_element`` with read-only broadcast state (and, when
keyed, keyed state and timers of their key). Broadcast state is
checkpointed per subtask and restored from one copy at any parallelism
(``streamflow/state/broadcast.py``); keyed state and timers as in the keyed
process operator. Rules as in Flink's ``CoBroadcastWithNonKeyedOperator`` and
``CoBroadcastWithKeyedOperator``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..functions import TimeDomain
from ..state.broadcast import BroadcastStateStore
from ..state.no_key import BROADCAST_NO_KEY
from .basic_operators import resolve_function
from .context import keyed_state
from .events import MAX_WATERMARK, Watermark
from .operator import TwoInputOperator
from .process_operators import KeyedProcessOperator, ProcessOperator, RecordContext, _CurrentTime, _Emitter
from .timers import Timer


class _ReadOnlyContext(RecordContext):
    """``process_element``'s context (and ``on_timer``'s): broadcast state is read-only."""

    __slots__ = ("_domain",)

    def __init__(self, op: Any) -> None:
        super().__init__(op)
        self._domain: TimeDomain = TimeDomain.EVENT_TIME

    def current_processing_time(self) -> int:
        return int(self._op.ctx.clock.now_ms())

    def current_watermark(self) -> int:
        return int(self._op.current_watermark)

    def get_broadcast_state(self, state_descriptor: Any) -> Any:
        return self._op.broadcast.read_only(state_descriptor)

    def timer_service(self) -> Any:
        return self._op.timer_facade

    def get_current_key(self) -> Any:
        return self._op.backend.current_key

    def time_domain(self) -> int:
        return self._domain


class _BroadcastTimers(_CurrentTime):
    """``process_broadcast_element``'s timer service: the current times, no timers (no key)."""

    def _no_timers(self, *_: Any) -> None:
        raise BROADCAST_NO_KEY.error("a timer")

    register_event_time_timer = register_processing_time_timer = _no_timers
    delete_event_time_timer = delete_processing_time_timer = _no_timers


class _BroadcastContext(_ReadOnlyContext):
    """``process_broadcast_element``'s context: broadcast state is writable."""

    __slots__ = ()

    def timer_service(self) -> Any:
        return _BroadcastTimers(self._op)

    def get_broadcast_state(self, state_descriptor: Any) -> Any:
        return self._op.broadcast.writable(state_descriptor)

    def apply_to_keyed_state(self, state_descriptor: Any, function: Callable[[Any, Any], None]) -> None:
        """Call ``function(key, state)`` for every key that has ``state_descriptor``'s state."""
        self._op.apply_to_keyed_state(state_descriptor, function)


class BroadcastProcessOperator(ProcessOperator, TwoInputOperator):
    """A ``BroadcastProcessFunction`` on a non-keyed stream."""

    method = "process_element"

    def __init__(self, name: str, function: Any, descriptors: list[Any]) -> None:
        super().__init__(name, function)
        self.call2 = resolve_function(function, "process_broadcast_element", name)
        self.broadcast = BroadcastStateStore([d.name for d in descriptors])

    # batch mode: the regular input's batches held until the broadcast input ends (end_input),
    # only where input selection (input_selection.py: the task reads no regular record until
    # then) could deadlock; with it, no regular batch arrives before end_input(2)
    _held: list[tuple[list, list[int] | None]] | None = None
    _broadcast_ended = False

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if self.ctx.batch and not self._broadcast_ended:  # Flink's BatchCoBroadcastWithNonKeyedOperator
            if self._held is None:  # reads the broadcast input to its end first
                self._held = []
            self._held.append((records, timestamps))
            return
        await _run(self, records, timestamps, self.call, _ReadOnlyContext(self), None)

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        await _run(self, records, timestamps, self.call2, _BroadcastContext(self), None)

    async def end_input(self, input_id: int) -> None:
        """Input ``input_id`` (1 regular, 2 broadcast) has ended: in batch mode the regular
        records held until the broadcast input's end are processed now, in arrival order."""
        if input_id != 2 or self._broadcast_ended:
            return
        self._broadcast_ended = True
        held, self._held = self._held or [], None
        for records, timestamps in held:
            await _run(self, records, timestamps, self.call, _ReadOnlyContext(self), None)

    async def process_watermark(self, watermark: Watermark) -> None:
        if self.ctx.batch and not self._broadcast_ended:
            if watermark.timestamp < MAX_WATERMARK:
                return  # batch mode: event time jumps to the end; nothing held may turn late
            await self.end_input(2)
        await super().process_watermark(watermark)

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"broadcast": self.broadcast.snapshot()}

    def initialize_state(self, restored: Any) -> None:
        if restored is not None:
            self.broadcast.restore(restored.all, self.ctx.subtask_index, self.ctx.parallelism)


class KeyedBroadcastProcessOperator(KeyedProcessOperator, TwoInputOperator):
    """A ``KeyedBroadcastProcessFunction``: keyed state and timers on input 1."""

    method = "process_element"

    def __init__(
        self, name: str, key_selector: Callable[[Any], Any], function: Any, descriptors: list[Any]
    ) -> None:
        super().__init__(name, key_selector, function)
        self.call2 = resolve_function(function, "process_broadcast_element", name)
        self.broadcast = BroadcastStateStore([d.name for d in descriptors])

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if self._check_key_type:
            self.check_key_type(records)
        await _run(self, records, timestamps, self.call, _ReadOnlyContext(self), self.key_selector)

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        self.backend.current_key = BROADCAST_NO_KEY  # no key on the broadcast side
        await _run(self, records, timestamps, self.call2, _BroadcastContext(self), None)

    async def _fire(self, timer: Timer, domain: TimeDomain) -> None:
        if self.on_timer is None:
            return
        ctx, emitter = _ReadOnlyContext(self), _Emitter()
        ts = timer.timestamp if domain == TimeDomain.EVENT_TIME else None
        ctx._ts, ctx._domain = timer.timestamp, domain  # the timer's time in both domains
        try:
            emitter.add(self.on_timer(timer.timestamp, ctx), ts)
        except Exception as exc:
            raise self.failure(exc) from None
        await emitter.flush(self, ts is not None)

    def apply_to_keyed_state(self, descriptor: Any, function: Callable[[Any, Any], None]) -> None:
        backend = self.backend
        previous = backend.current_key
        try:
            state = keyed_state(self.ctx, descriptor)  # as the function's own (TTL, type)
            table, _dirty = backend.tracked_table(descriptor.name, descriptor.kind)  # keys only
            for key in list(table):
                backend.current_key = key
                function(key, state)
        finally:
            backend.current_key = previous

    def snapshot_state(self, checkpoint_id: int) -> Any:
        state = super().snapshot_state(checkpoint_id)
        state["broadcast"] = self.broadcast.snapshot()
        return state

    def initialize_state(self, restored: Any) -> None:
        super().initialize_state(restored)
        if restored is not None:
            self.broadcast.restore(restored.all, self.ctx.subtask_index, self.ctx.parallelism)


async def _run(
    op: Any,
    records: list,
    timestamps: list[int] | None,
    call: Callable[..., Any],
    ctx: _ReadOnlyContext,
    key_of: Callable[[Any], Any] | None,
) -> None:
    """Call ``call(record, ctx)`` per record (under its key when keyed), draining its outputs."""
    emitter = _Emitter()
    backend = op.backend if key_of is not None else None
    try:
        for i, record in enumerate(records):
            if backend is not None:
                backend.current_key = key_of(record)  # type: ignore[misc]
            ts = None if timestamps is None else timestamps[i]
            ctx._ts = ts
            emitter.add(call(record, ctx), ts)
    except Exception as exc:
        raise op.failure(exc) from None
    await emitter.flush(op, timestamps is not None)
