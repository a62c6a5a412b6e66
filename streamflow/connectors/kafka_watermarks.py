"""Per-partition watermarks inside a Kafka source reader (Flink's per-split watermarks).

Theory of operation
-------------------
As Flink's ``SourceOperator`` with per-split ``WatermarkOutputMultiplexer``
(apache/flink ``flink-core .../eventtime/WatermarkOutputMultiplexer.java``): each partition
owned by the reader drives its own generator from the user's ``WatermarkStrategy`` (with
its idleness wrapper, if any) through a :class:`~streamflow.runtime.watermark_emitter.WatermarkEmitter`;
the reader's output watermark is combined by the valve's rules:

* the output is the minimum over the partitions that are not idle; a partition that has
  seen no record yet holds it at ``MIN_WATERMARK`` (unless idleness marks it idle);
* it only rises (a watermark not above the last output is not emitted);
* when every partition is idle the reader flushes: it emits the maximum over the
  partitions' watermarks (if above the last output), then IDLE, once; ACTIVE before the
  next watermark once a partition is active again (Flink's ``CombinedWatermarkStatus``
  since FLINK-38454: before it, the output of partitions going idle at 100 and 50 stayed at
  50 or became 100 depending on which went idle first);
* a partition paused by backpressure or alignment is never counted idle (FLIP-471): when the
  task does not poll, nothing is emitted, and :meth:`pause` stops a partition's idleness clock.

Records get their element timestamps here: the strategy's timestamp assigner if it has one
(it sees the Kafka timestamp as ``record_timestamp``), else the Kafka record timestamp.
Punctuated generators (``on_event``) see records one by one; what they emit applies after the
batch of their partition (a simplification of Flink's per-record order).
"""

from __future__ import annotations

from typing import Any

from ..clock import Clock
from ..eventtime import monotonic_ms
from ..runtime.events import MAX_WATERMARK, MIN_WATERMARK, Watermark, WatermarkStatus
from ..runtime.watermark_emitter import WatermarkEmitter

__all__ = ["PartitionWatermarks"]


class PartitionWatermarks:
    """The per-partition emitters of one reader and their combination (pure; time from a Clock)."""

    def __init__(self, strategy: Any, clock: Clock, interval_ms: int = 200) -> None:
        self.strategy = strategy
        self.clock = clock
        self.interval_ms = interval_ms
        self.assigner = strategy.create_timestamp_assigner()
        self.emitters: dict[int, WatermarkEmitter] = {}
        self.paused: set[int] = set()
        self.last_output = MIN_WATERMARK
        self.idle = False
        self._pending: list[Watermark | WatermarkStatus] = []
        self._next_periodic = monotonic_ms(clock) + interval_ms

    def add_partition(self, index: int) -> None:
        generator = self.strategy.create_watermark_generator(self.clock)
        self.emitters[index] = WatermarkEmitter(generator, interval_ms=self.interval_ms,
                                                start_ms=monotonic_ms(self.clock))

    def timestamps(self, records: list, kafka_timestamps: list[int]) -> list[int]:
        assigner = self.assigner
        if assigner is None:
            return kafka_timestamps
        extract = assigner.extract_timestamp
        return [extract(r, ts) for r, ts in zip(records, kafka_timestamps, strict=True)]

    def on_batch(self, index: int, records: list, timestamps: list[int]) -> None:
        emitter = self.emitters[index]
        emitter.on_batch(records, timestamps)
        emitter.drain()
        self._combine()

    def pause(self, index: int) -> None:
        self.paused.add(index)

    def resume(self, index: int) -> None:
        self.paused.discard(index)

    def finish_partition(self, index: int) -> None:
        """A partition read to its end holds the output back no more (Flink's ``splitFinished``)."""
        self.emitters.pop(index, None)
        self.paused.discard(index)
        self._combine()

    def on_periodic(self) -> None:
        """Periodic generators emit and idleness is judged every ``interval_ms``."""
        now = monotonic_ms(self.clock)
        if now < self._next_periodic:
            return
        self._next_periodic = now + self.interval_ms
        for emitter in self.emitters.values():  # a paused one counts as active in _combine (FLIP-471)
            emitter.on_periodic(now)
            emitter.drain()
        self._combine()

    def due_in_ms(self) -> int:
        return max(0, self._next_periodic - monotonic_ms(self.clock))

    def _combine(self) -> None:
        active = [e.current_watermark for i, e in self.emitters.items()
                  if e.status is WatermarkStatus.ACTIVE or i in self.paused]
        if not active:
            if self.emitters and not self.idle:
                high = max(e.current_watermark for e in self.emitters.values())
                if self.last_output < high < MAX_WATERMARK:  # the flush (module docstring)
                    self.last_output = high
                    self._pending.append(Watermark(high))
                self.idle = True
                self._pending.append(WatermarkStatus.IDLE)
            return
        low = min(active)
        if low > self.last_output and low < MAX_WATERMARK:
            if self.idle:
                self.idle = False
                self._pending.append(WatermarkStatus.ACTIVE)
            self.last_output = low
            self._pending.append(Watermark(low))
        elif self.idle:
            self.idle = False
            self._pending.append(WatermarkStatus.ACTIVE)

    def take(self) -> Watermark | WatermarkStatus | None:
        """The next control event to emit (before the next batch), or None."""
        return self._pending.pop(0) if self._pending else None
