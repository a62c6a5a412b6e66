"""The cases of Apache Flink's ``pyflink/common/tests/test_watermark_strategy.py`` (apache/flink
``91f1987``, the newest stored version) on streamflow.

Flink's cases check the Java class of the strategy or of its generator and read a private
field (``idlenessTimeout``, ``outOfOrdernessMillis``) by reflection. The port checks the
recorded setting and what the generator Flink names does with events: the watermark it emits
after them, or (idleness) the idle mark after the timeout on a manual clock. Nothing is left
out.
"""

from __future__ import annotations

from typing import Any

from streamflow.common import Duration, WatermarkStrategy
from streamflow.eventtime import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    NoWatermarksGenerator,
    WatermarksWithIdleness,
)
from streamflow.testing.clock import ManualClock


class _Output:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit_watermark(self, watermark: Any) -> None:
        self.events.append(watermark.timestamp)

    def mark_idle(self) -> None:
        self.events.append("idle")

    def mark_active(self) -> None:
        self.events.append("active")


def test_with_idleness() -> None:
    strategy = WatermarkStrategy.no_watermarks().with_idleness(Duration.of_seconds(5))
    assert strategy.idle_timeout_ms == 5000
    clock = ManualClock()
    generator = strategy.create_watermark_generator(clock)
    assert isinstance(generator, WatermarksWithIdleness)
    output = _Output()
    generator.on_periodic_emit(output)  # starts the countdown
    clock.advance(5000)
    generator.on_periodic_emit(output)
    assert output.events == []  # not idle at exactly the timeout
    clock.advance(1)
    generator.on_periodic_emit(output)
    assert output.events == ["idle"]


def test_with_watermark_alignment() -> None:
    strategy = WatermarkStrategy.no_watermarks().with_watermark_alignment(
        "alignment-group-1", Duration.of_seconds(20), Duration.of_seconds(10)
    )
    group, max_drift_ms, update_interval_ms = strategy.alignment
    assert group == "alignment-group-1"
    assert max_drift_ms == 20000
    assert update_interval_ms == 10000


def test_for_monotonous_timestamps() -> None:
    generator = WatermarkStrategy.for_monotonous_timestamps().create_watermark_generator(ManualClock())
    assert isinstance(generator, AscendingTimestampsWatermarks)
    output = _Output()
    generator.on_event("a", 1000, output)
    generator.on_periodic_emit(output)
    assert output.events == [999]


def test_for_bounded_out_of_orderness() -> None:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(3))
    generator = strategy.create_watermark_generator(ManualClock())
    assert isinstance(generator, BoundedOutOfOrdernessWatermarks)
    output = _Output()
    generator.on_event("a", 10_000, output)
    generator.on_event("b", 8_000, output)
    generator.on_periodic_emit(output)
    assert output.events == [10_000 - 3000 - 1]


def test_no_watermarks() -> None:
    generator = WatermarkStrategy.no_watermarks().create_watermark_generator(ManualClock())
    assert isinstance(generator, NoWatermarksGenerator)
    output = _Output()
    generator.on_event("a", 10_000, output)
    generator.on_periodic_emit(output)
    assert output.events == []
