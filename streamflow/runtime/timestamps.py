"""Assigns event timestamps and generates watermarks (Flink's TimestampsAndWatermarksOperator).

Per batch: one comprehension computes the timestamps, then the generator sees
the whole batch at once (built-in generators only take ``max``); a generator
that emits from ``on_event`` (punctuated) is fed per record and its watermarks
cut the batch, so a record after a watermark sees it, as in Flink. Periodic
emission runs from the task's processing-time service every
``auto_watermark_interval`` ms, which is also when idleness is detected. The
batch always goes downstream before the watermarks it produced.

Watermarks from upstream are replaced by this operator's own, except the
final ``MAX_WATERMARK`` of a bounded input, which is forwarded. Records that
come without timestamps to a strategy without an assigner get the minimum
timestamp, as Flink's ``Long.MIN_VALUE`` (logged once).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..eventtime import NoWatermarksGenerator, WatermarkStrategy, _ValueAndTimestampAssigner, _ValueAssigner
from .events import MAX_WATERMARK, MIN_WATERMARK, Watermark, WatermarkStatus
from .item_getters import failed_record, item_getter
from .operator import StreamOperator
from .watermark_alignment import AlignmentMember
from .watermark_emitter import WatermarkEmitter

log = logging.getLogger(__name__)


class TimestampsAndWatermarksOperator(StreamOperator):
    def __init__(self, name: str, strategy: WatermarkStrategy, interval_ms: int) -> None:
        super().__init__(name)
        if not isinstance(strategy, WatermarkStrategy):
            raise TypeError(f"expected a WatermarkStrategy, got {type(strategy).__name__}")
        self.strategy = strategy
        self.interval_ms = interval_ms
        self._ended = False
        self._warned_untimed = False
        self._getter: Callable[[Any], Any] | None = None
        self.alignment: AlignmentMember | None = None  # from_source()'s strategy aligns its source

    async def open(self) -> None:
        clock = self.ctx.clock
        self.assigner = assigner = self.strategy.create_timestamp_assigner()
        # an assigner returning value[k] (lambda e: e[2], or such an extract_timestamp method)
        self._getter = None
        if isinstance(assigner, _ValueAndTimestampAssigner):  # fn(value) or fn(value, ts)
            self._getter = item_getter(assigner._fn, 1 if isinstance(assigner, _ValueAssigner) else 2)
        elif assigner is not None:
            self._getter = item_getter(assigner.extract_timestamp, 2)
        alignment = self.alignment  # its idleness clock stands still while the source waits
        generator = self.strategy.create_watermark_generator(
            clock if alignment is None else alignment.activity_clock(clock)
        )
        self.emitter = WatermarkEmitter(generator, interval_ms=self.interval_ms, start_ms=clock.now_ms())
        # no_watermarks() chose an event time that never advances: records without timestamps
        # are not worth a warning there (from_source(src, no_watermarks(), name), PyFlink's idiom)
        self._warned_untimed = isinstance(generator, NoWatermarksGenerator)
        self._schedule()

    def _schedule(self) -> None:
        due = self.emitter.next_periodic_ms
        if due is not None and not self._ended:
            self.ctx.processing_time.register(due, self._periodic)

    async def _periodic(self, at: int) -> None:
        if self._ended:
            return
        self.emitter.on_periodic(self.ctx.clock.now_ms())
        await self._emit(self.emitter.drain())
        self._schedule()

    async def _emit(self, events: list[Watermark | WatermarkStatus]) -> None:
        alignment = self.alignment
        for ev in events:
            if type(ev) is Watermark:
                if alignment is not None:
                    alignment.on_watermark(ev.timestamp)
                await self.output.emit_watermark(ev)
            else:
                if alignment is not None:
                    alignment.on_status(ev is WatermarkStatus.IDLE)
                await self.output.emit_watermark_status(ev)  # type: ignore[arg-type]

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        assigner = self.assigner
        if assigner is not None:
            try:
                getter = self._getter
                if getter is not None:  # value[k]: computed in C
                    it = iter(records)
                    try:
                        timestamps = list(map(getter, it))
                    except Exception as exc:
                        record = failed_record(records, it)  # named in the error
                        raise self.failure(exc, record) from None
                elif isinstance(assigner, _ValueAssigner):
                    fn = assigner._fn
                    timestamps = [fn(record) for record in records]
                else:
                    extract = assigner.extract_timestamp
                    if timestamps is None:
                        timestamps = [extract(record, MIN_WATERMARK) for record in records]
                    else:
                        timestamps = [
                            extract(record, ts) for record, ts in zip(records, timestamps, strict=True)
                        ]
            except Exception as exc:
                raise self.failure(exc) from None
        elif timestamps is None:
            # Flink's TimestampsAndWatermarksOperator: a record without a timestamp gets
            # Long.MIN_VALUE (so the watermark cannot advance); said once, not failed
            if not self._warned_untimed:
                self._warned_untimed = True
                log.warning(
                    "%s: records have no timestamps and the WatermarkStrategy has no timestamp "
                    "assigner: they get the minimum timestamp (as in Flink) and event time does not "
                    "advance before the end of input; give it one with .with_timestamp_assigner(fn)",
                    self.name,
                )
            timestamps = [MIN_WATERMARK] * len(records)
        cuts = self.emitter.on_batch(records, timestamps)
        start = 0
        for end, events in cuts:  # punctuated watermarks cut the batch (the channel rule)
            if end > start:
                await self.output.push(records[start:end], timestamps[start:end])
            await self._emit(events)
            start = end
        if start < len(records):
            await self.output.push(
                records[start:] if start else records, timestamps[start:] if start else timestamps
            )
        pending = self.emitter.drain()
        if pending:
            await self._emit(pending)

    async def process_watermark(self, watermark: Watermark) -> None:
        if watermark.timestamp == MAX_WATERMARK and not self._ended:
            self._ended = True
            await self._emit(self.emitter.end_of_input())

    async def process_watermark_status(self, status: WatermarkStatus) -> None:
        pass  # this operator decides the status of its output

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return None
