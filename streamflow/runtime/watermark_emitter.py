"""Driving one watermark generator at a source split or a timestamp assigner.

The :class:`WatermarkEmitter` is the generator's ``WatermarkOutput``: it feeds the generator
each batch (record by record for punctuated generators, which may emit from ``on_event``),
calls ``on_periodic_emit`` every interval of a time base the caller passes in, and buffers
what goes downstream, deduplicated as Flink's ``WatermarkToDataOutput``. The caller sends a
batch in the pieces ``on_batch`` cuts it into, then ``drain()``; see ``eventtime.py`` for the
whole flow. Time comes only from the numbers passed in: no clock, no I/O.
"""

from __future__ import annotations

from typing import Any

from ..eventtime import (
    DEFAULT_INTERVAL_MS,
    Duration,
    WatermarkGenerator,
    WatermarksWithIdleness,
    to_millis,
)
from .events import MAX_WATERMARK, MIN_WATERMARK, Watermark, WatermarkStatus

_ACTIVE = WatermarkStatus.ACTIVE
_IDLE = WatermarkStatus.IDLE

#: ``(index, control events)``: send the records before ``index``, then the events.
Cut = tuple[int, list[Watermark | WatermarkStatus]]


def _emits_per_event(generator: WatermarkGenerator) -> bool:
    """True if ``generator`` is fed per event (it keeps the base ``on_batch``), so it may emit
    punctuated watermarks from ``on_event``; the idleness wrapper follows what it wraps."""
    if isinstance(generator, WatermarksWithIdleness):
        return _emits_per_event(generator._generator)
    return type(generator).on_batch is WatermarkGenerator.on_batch


class WatermarkEmitter:
    """Drives one generator and buffers what goes downstream; it is the generator's output.

    Deduplicated as Flink's ``WatermarkToDataOutput``: a watermark passes only if above all
    earlier ones, and first marks the output active if it was idle; IDLE/ACTIVE pass only on
    change. Consecutive buffered watermarks collapse into the last (the batch goes first).
    Nothing passes after ``end_of_input``. ``on_periodic(now_ms)``: one time base throughout,
    e.g. ``monotonic_ms(clock)``; the first emit is due ``interval_ms`` after ``start_ms`` (or
    after the first call); an interval of 0 disables periodic emits, as in Flink.
    """

    __slots__ = (
        "_buffer",
        "_generator",
        "_interval_ms",
        "_max_watermark",
        "_next_due",
        "_per_event",
        "_status",
    )

    def __init__(
        self,
        generator: WatermarkGenerator,
        *,
        interval_ms: Duration = DEFAULT_INTERVAL_MS,
        start_ms: int | None = None,
    ) -> None:
        interval = to_millis(interval_ms, "watermark interval", 0)
        self._generator = generator
        self._per_event = _emits_per_event(generator)
        self._interval_ms = interval
        self._next_due = None if start_ms is None else start_ms + interval
        self._buffer: list[Watermark | WatermarkStatus] = []
        self._max_watermark = MIN_WATERMARK
        self._status = _ACTIVE

    @property
    def current_watermark(self) -> int:
        """The highest watermark emitted so far (``MIN_WATERMARK`` before any)."""
        return self._max_watermark

    @property
    def status(self) -> WatermarkStatus:
        return self._status

    @property
    def next_periodic_ms(self) -> int | None:
        """When the next periodic emit is due (None: not armed yet, or disabled)."""
        return self._next_due if self._interval_ms else None

    # -- driving --------------------------------------------------------------------------

    def on_batch(self, events: list[Any], timestamps: list[int]) -> list[Cut]:
        """Feed one batch to the generator; returns where the batch must be cut.

        A control event cuts a batch (the channel rule): a record after a watermark must see
        it. A generator that may emit from ``on_event`` (punctuated watermarks: it does not
        override ``on_batch``) is fed record by record, and each ``(i, events)`` cut means
        "send the records up to index ``i`` (exclusive), then ``events``", which is Flink's
        order (``TimestampsAndWatermarksOperator.processElement``: collect, then ``onEvent``).
        Generators that override ``on_batch`` (the built-in periodic ones) see the whole batch
        at once; what they emit stays buffered for :meth:`drain`, after the batch.
        """
        if not self._per_event:
            self._generator.on_batch(events, timestamps, self)
            return []
        cuts: list[Cut] = []
        on_event = self._generator.on_event
        for i, (event, timestamp) in enumerate(zip(events, timestamps, strict=True)):
            on_event(event, timestamp, self)
            if self._buffer:
                cuts.append((i + 1, self.drain()))
        return cuts

    def on_periodic(self, now_ms: int) -> bool:
        """Call ``on_periodic_emit`` if the interval has elapsed; True if it was called."""
        if not self._interval_ms:
            return False
        if self._next_due is None:
            self._next_due = now_ms + self._interval_ms
            return False
        if now_ms < self._next_due:
            return False
        self._next_due = now_ms + self._interval_ms
        self._generator.on_periodic_emit(self)
        return True

    def end_of_input(self) -> list[Watermark | WatermarkStatus]:
        """Emit ``Watermark(MAX_WATERMARK)`` and return everything still to send."""
        self.emit_watermark(Watermark(MAX_WATERMARK))
        return self.drain()

    def drain(self) -> list[Watermark | WatermarkStatus]:
        """What to send downstream since the last drain, in order."""
        out, self._buffer = self._buffer, []
        return out

    # -- WatermarkOutput --------------------------------------------------------------------

    def emit_watermark(self, watermark: Watermark) -> None:
        if watermark.timestamp <= self._max_watermark:
            return
        self._max_watermark = watermark.timestamp
        self.mark_active()
        buffer = self._buffer
        if buffer and isinstance(buffer[-1], Watermark):
            buffer[-1] = watermark
        else:
            buffer.append(watermark)

    def mark_idle(self) -> None:
        if self._status is _ACTIVE and self._max_watermark != MAX_WATERMARK:
            self._status = _IDLE
            self._buffer.append(_IDLE)

    def mark_active(self) -> None:
        if self._status is _IDLE:
            self._status = _ACTIVE
            self._buffer.append(_ACTIVE)
