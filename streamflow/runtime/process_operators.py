"""Process functions: ``ProcessFunction`` and ``KeyedProcessFunction`` with timers.

``process_element`` (and ``on_timer``) return or yield outputs; yielding
``(output_tag, value)`` sends ``value`` to that side output. Outputs carry the
input record's timestamp (an event-time timer's output carries the timer's).

The keyed process operator is a :class:`~.timer_operator.TimerOperator` (the
base of every operator with per-key timers: ``timer_operator.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..functions import OutputTag, TimeDomain
from .basic_operators import resolve_function
from .events import MIN_WATERMARK, Watermark
from .operator import StreamOperator
from .timer_operator import TimerOperator
from .timers import Timer


class _Emitter:
    """Collects one call's outputs: main records and side outputs, with timestamps."""

    __slots__ = ("main", "main_ts", "side")

    def __init__(self) -> None:
        self.main: list = []
        self.main_ts: list[int] = []
        self.side: dict[str, tuple[list, list[int]]] = {}

    def add(self, result: Iterable[Any] | None, ts: int | None) -> None:
        if result is None:
            return
        for item in result:
            if type(item) is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
                recs, tss = self.side.setdefault(item[0].tag_id, ([], []))
                recs.append(item[1])
                tss.append(ts)  # type: ignore[arg-type]
            else:
                self.main.append(item)
                self.main_ts.append(ts)  # type: ignore[arg-type]

    async def flush(self, op: StreamOperator, with_timestamps: bool) -> None:
        if self.main:
            await op.output.push(self.main, self.main_ts if with_timestamps else None)
        for tag, (recs, tss) in self.side.items():
            await op.output.push_side(tag, recs, tss if with_timestamps else None)
        self.main, self.main_ts, self.side = [], [], {}


class RecordContext:
    """What every process function's context has: the operator and the current record's
    timestamp (``ctx.timestamp()``: Long.MIN_VALUE for a record without one, as PyFlink gives
    Python)."""

    __slots__ = ("_op", "_ts")

    def __init__(self, op: Any) -> None:
        self._op = op
        self._ts: int | None = None

    def timestamp(self) -> int:
        ts = self._ts
        return MIN_WATERMARK if ts is None else ts


class _ProcessContext(RecordContext):
    __slots__ = ()

    def timer_service(self) -> Any:
        return self._op.timer_facade


class ProcessOperator(StreamOperator):
    """A non-keyed ``ProcessFunction``: no keyed state, no timers (as in Flink)."""

    method = "process_element"

    def __init__(self, name: str, function: Any) -> None:
        super().__init__(name)
        self.functions = (function,)
        self.call = resolve_function(function, self.method, name)
        self.timer_facade = _CurrentTime(self)
        self.current_watermark = MIN_WATERMARK

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        await self._process(records, timestamps, self.call)

    async def _process(self, records: list, timestamps: list[int] | None, call: Callable) -> None:
        ctx, emitter = _ProcessContext(self), _Emitter()
        try:
            for i, record in enumerate(records):
                ts = None if timestamps is None else timestamps[i]
                ctx._ts = ts
                emitter.add(call(record, ctx), ts)
        except Exception as exc:
            raise self.failure(exc) from None
        await emitter.flush(self, timestamps is not None)

    async def process_watermark(self, watermark: Watermark) -> None:
        self.current_watermark = watermark.timestamp
        await self.output.emit_watermark(watermark)


class _CurrentTime:
    """``ctx.timer_service()`` where timers are not allowed (non-keyed streams)."""

    def __init__(self, op: Any) -> None:
        self._op = op

    def current_processing_time(self) -> int:
        return self._op.ctx.clock.now_ms()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def _no_timers(self, *_: Any) -> None:
        raise RuntimeError(
            f"timers need a keyed stream: operator {self._op.name!r} is not keyed (call key_by())"
        )

    register_event_time_timer = register_processing_time_timer = _no_timers
    delete_event_time_timer = delete_processing_time_timer = _no_timers


class _KeyedTimerService(_CurrentTime):
    """``ctx.timer_service()`` of a keyed process function: timers of the current key."""

    def register_event_time_timer(self, timestamp: int) -> None:
        self._op.timers.register_event_time_timer(self._op.backend.current_key, None, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._op.timers.delete_event_time_timer(self._op.backend.current_key, None, timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._op.register_processing_timer(self._op.backend.current_key, None, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._op.timers.delete_processing_time_timer(self._op.backend.current_key, None, timestamp)


class _KeyedContext(RecordContext):
    __slots__ = ("_domain",)

    def __init__(self, op: KeyedProcessOperator) -> None:
        super().__init__(op)
        self._domain: TimeDomain = TimeDomain.EVENT_TIME

    def timer_service(self) -> _KeyedTimerService:
        return self._op.timer_facade

    def get_current_key(self) -> Any:
        return self._op.backend.current_key

    def time_domain(self) -> int:
        return self._domain


class KeyedProcessOperator(TimerOperator):
    """Runs a ``KeyedProcessFunction`` with keyed state and per-key timers.

    The function's results (a generator, often) are drained right after each
    call, while the current key is the record's (or the timer's) key."""

    method = "process_element"
    timer_namespaces = False  # its timers have none: written as they are
    emitter: type[_Emitter] = _Emitter  # collects each element's outputs (the interval join's: timed)

    def __init__(self, name: str, key_selector: Callable[[Any], Any], function: Any) -> None:
        super().__init__(name, key_selector)
        self.functions = (function,)
        self.call = resolve_function(function, self.method, name)
        on_timer = getattr(function, "on_timer", None)
        self.on_timer = on_timer if callable(on_timer) else None
        self.timer_facade = _KeyedTimerService(self)

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if self._check_key_type:
            self.check_key_type(records)
        await self._process(records, timestamps, self.call, self.key_selector)

    async def _process(
        self, records: list, timestamps: list[int] | None, call: Callable, key_of: Callable[[Any], Any]
    ) -> None:
        backend = self.backend
        ctx, emitter = _KeyedContext(self), self.emitter()
        try:
            for i, record in enumerate(records):
                backend.current_key = key_of(record)
                ts = None if timestamps is None else timestamps[i]
                ctx._ts = ts
                emitter.add(call(record, ctx), ts)
        except Exception as exc:
            raise self.failure(exc) from None
        await emitter.flush(self, timestamps is not None)

    async def _fire(self, timer: Timer, domain: TimeDomain) -> None:
        if self.on_timer is None:
            return
        ctx, emitter = _KeyedContext(self), _Emitter()
        ts = timer.timestamp if domain == TimeDomain.EVENT_TIME else None
        ctx._ts, ctx._domain = timer.timestamp, domain  # the timer's time in both domains
        try:
            emitter.add(self.on_timer(timer.timestamp, ctx), ts)
        except Exception as exc:
            raise self.failure(exc) from None
        await emitter.flush(self, ts is not None)

    async def on_event_timer(self, timer: Timer) -> None:
        await self._fire(timer, TimeDomain.EVENT_TIME)

    async def on_processing_timer(self, timer: Timer) -> None:
        await self._fire(timer, TimeDomain.PROCESSING_TIME)
