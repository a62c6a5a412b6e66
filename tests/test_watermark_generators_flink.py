"""Ports of Flink's watermark-generator tests onto streamflow's event time.

Sources (apache/flink):
* flink-core/src/test/java/org/apache/flink/api/common/eventtime/BoundedOutOfOrdernessWatermarksTest.java
* flink-core/src/test/java/org/apache/flink/api/common/eventtime/WatermarksWithIdlenessTest.java
* flink-core/src/test/java/org/apache/flink/api/common/eventtime/WatermarkStrategyTest.java
* flink-streaming-java/src/test/java/org/apache/flink/streaming/runtime/operators/
  TimestampsAndWatermarksOperatorTest.java (:class:`AssignerHarness` plays its
  ``OneInputStreamOperatorTestHarness`` with an auto-watermark interval of 50 ms; processing
  time is a manual clock, so idleness is clock-driven, never by sleeping).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from streamflow.eventtime import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    IdlenessTimer,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarkStrategy,
    WatermarksWithIdleness,
)
from streamflow.runtime.context import OperatorContext
from streamflow.runtime.events import MAX_WATERMARK, MIN_WATERMARK, Watermark, WatermarkStatus
from streamflow.runtime.metrics import MetricGroup
from streamflow.runtime.operator import BatchTarget, Output
from streamflow.runtime.processing_time import ProcessingTimeService
from streamflow.runtime.timestamps import TimestampsAndWatermarksOperator
from streamflow.testing import ManualClock

AUTO_WATERMARK_INTERVAL = 50


class RecordingOutput:
    """Flink's TestingWatermarkOutput: remembers what a generator emitted."""

    def __init__(self) -> None:
        self.watermarks: list[int] = []
        self.idle = False

    def emit_watermark(self, watermark: Watermark) -> None:
        self.watermarks.append(watermark.timestamp)
        self.idle = False

    def mark_idle(self) -> None:
        self.idle = True

    def mark_active(self) -> None:
        self.idle = False

    def last_watermark(self) -> int | None:
        return self.watermarks[-1] if self.watermarks else None


# ---------------------------------------------------------------- BoundedOutOfOrdernessWatermarksTest


def test_watermark_before_records() -> None:
    """BoundedOutOfOrdernessWatermarksTest.testWatermarkBeforeRecords: Long.MIN_VALUE before any event."""
    output = RecordingOutput()
    BoundedOutOfOrdernessWatermarks(10).on_periodic_emit(output)
    assert output.last_watermark() == MIN_WATERMARK


def test_watermark_after_event() -> None:
    """BoundedOutOfOrdernessWatermarksTest.testWatermarkAfterEvent: max timestamp - bound - 1."""
    output = RecordingOutput()
    watermarks = BoundedOutOfOrdernessWatermarks(timedelta(milliseconds=10))
    watermarks.on_event(object(), 1337, output)
    watermarks.on_periodic_emit(output)
    assert output.last_watermark() == 1326


@pytest.mark.parametrize("batched", [False, True], ids=["on_event", "on_batch"])
def test_watermark_after_non_monotonous_events(batched: bool) -> None:
    """BoundedOutOfOrdernessWatermarksTest.testWatermarkAfterNonMonotonousEvents: the highest
    timestamp counts, not the last (per event and through streamflow's batched on_batch)."""
    output = RecordingOutput()
    watermarks = BoundedOutOfOrdernessWatermarks(10)
    timestamps = [12345, 12300, 12340, 12280]
    if batched:
        watermarks.on_batch([object()] * 4, timestamps, output)
    else:
        for ts in timestamps:
            watermarks.on_event(object(), ts, output)
    watermarks.on_periodic_emit(output)
    assert output.last_watermark() == 12334


def test_repeated_probe() -> None:
    """BoundedOutOfOrdernessWatermarksTest.testRepeatedProbe: a second probe gives the same watermark."""
    watermarks = BoundedOutOfOrdernessWatermarks(10)
    watermarks.on_event(object(), 723456, RecordingOutput())
    watermarks.on_periodic_emit(RecordingOutput())
    output = RecordingOutput()
    watermarks.on_periodic_emit(output)
    assert output.last_watermark() == 723445


def test_ascending_timestamps_trail_by_one_millisecond() -> None:
    """AscendingTimestampsWatermarksTest (flink-core): the watermark of ascending timestamps is
    the highest minus 1 ms (a bound of 0), MIN before any event."""
    output = RecordingOutput()
    watermarks = AscendingTimestampsWatermarks()
    watermarks.on_periodic_emit(output)
    watermarks.on_event(object(), 1337, output)
    watermarks.on_periodic_emit(output)
    assert output.watermarks == [MIN_WATERMARK, 1336]


# --------------------------------------------------------------------------- WatermarksWithIdlenessTest


@pytest.mark.parametrize("timeout", [0, -1, timedelta(0)])
def test_zero_or_negative_timeout_is_refused(timeout: Any) -> None:
    """WatermarksWithIdlenessTest.testZeroTimeout / testNegativeTimeout: IllegalArgumentException."""
    with pytest.raises(ValueError, match="idle timeout"):
        WatermarksWithIdleness(AscendingTimestampsWatermarks(), timeout, ManualClock(0))
    with pytest.raises(ValueError, match="idle timeout"):
        WatermarkStrategy.for_monotonous_timestamps().with_idleness(timeout)


def _idle_timer(clock: ManualClock, timeout: int) -> IdlenessTimer:
    """WatermarksWithIdlenessTest.createTimerAndMakeIdle."""
    timer = IdlenessTimer(clock, timeout)
    timer.check_if_idle()  # start the timer
    clock.advance(timeout + 1)
    assert timer.check_if_idle()
    return timer


def test_initially_active() -> None:
    """WatermarksWithIdlenessTest.testInitiallyActive."""
    assert not IdlenessTimer(ManualClock(123456), 10).check_if_idle()


def test_idle_without_events() -> None:
    """WatermarksWithIdlenessTest.testIdleWithoutEvents: idle once strictly more than the timeout passed."""
    clock = ManualClock(123456)
    timer = IdlenessTimer(clock, 10)
    timer.check_if_idle()
    clock.advance(10)
    assert not timer.check_if_idle()  # exactly the timeout: not yet
    clock.advance(1)
    assert timer.check_if_idle()


def test_repeated_idle_checks() -> None:
    """WatermarksWithIdlenessTest.testRepeatedIdleChecks: idle stays idle."""
    clock = ManualClock(123456)
    timer = _idle_timer(clock, 122)
    assert timer.check_if_idle()
    clock.advance(100)
    assert timer.check_if_idle()


def test_active_after_idleness() -> None:
    """WatermarksWithIdlenessTest.testActiveAfterIdleness: activity ends idleness."""
    clock = ManualClock(123456)
    timer = _idle_timer(clock, 10)
    timer.activity()
    assert not timer.check_if_idle()


def test_idle_active_idle() -> None:
    """WatermarksWithIdlenessTest.testIdleActiveIdle: idle, active again, then idle again after
    a new countdown."""
    clock = ManualClock(123456)
    timer = _idle_timer(clock, 122)
    timer.activity()
    assert not timer.check_if_idle()
    timer.check_if_idle()  # start the timer
    clock.advance(123)
    assert timer.check_if_idle()


def test_a_timer_at_clock_zero_still_counts_down() -> None:
    """WatermarksWithIdleness.IdlenessTimer marks "no countdown" with 0; a manual clock at 0 must
    still go idle (streamflow keeps None for that state)."""
    clock = ManualClock(0)
    timer = _idle_timer(clock, 5)
    assert timer.check_if_idle()


def test_an_idle_generator_stops_periodic_emits_and_the_next_event_resumes() -> None:
    """WatermarksWithIdleness.onPeriodicEmit: while idle the wrapped generator's onPeriodicEmit
    is not called and markIdle is called once; an event makes the watermark progress again."""
    clock = ManualClock(0)
    output = RecordingOutput()
    generator = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), 10, clock)
    generator.on_event(object(), 100, output)
    generator.on_periodic_emit(output)  # activity since the last check
    generator.on_periodic_emit(output)  # no activity: countdown starts
    clock.advance(11)
    generator.on_periodic_emit(output)
    assert output.idle and output.watermarks == [99, 99]
    generator.on_event(object(), 200, output)
    generator.on_periodic_emit(output)
    assert not output.idle and output.watermarks == [99, 99, 199]


# --------------------------------------------------------------------------- WatermarkStrategyTest


def test_default_timestamp_assigner_keeps_record_timestamps() -> None:
    """WatermarkStrategyTest.testDefaultTimeStampAssigner: without an assigner the record's own
    timestamp is kept (Flink's RecordTimestampAssigner; streamflow: no assigner)."""
    assert WatermarkStrategy.for_monotonous_timestamps().create_timestamp_assigner() is None


def test_lambda_and_class_timestamp_assigners() -> None:
    """WatermarkStrategyTest.testLambdaTimestampAssigner, testAnonymousInnerTimestampAssigner and
    testClassTimestampAssigner: each assigner gives 42 for a record at 13."""
    from streamflow.eventtime import TimestampAssigner

    class FortyTwo(TimestampAssigner):
        def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
            return 42

    for assigner in (lambda event, ts: 42, lambda event: 42, FortyTwo()):
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(assigner)
        created = strategy.create_timestamp_assigner()
        assert created is not None and created.extract_timestamp(None, 13) == 42


def test_with_idleness_helper() -> None:
    """WatermarkStrategyTest.testWithIdlenessHelper: idleness wraps the generator, keeps the assigner."""
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(timedelta(days=7))
    assert strategy.create_timestamp_assigner() is None
    assert isinstance(strategy.create_watermark_generator(ManualClock(0)), WatermarksWithIdleness)


def test_with_watermark_alignment_mixes_with_idleness() -> None:
    """WatermarkStrategyTest.testWithWatermarkAlignment: alignment parameters (default update
    interval 1 s) survive a later with_idleness."""
    strategy = (
        WatermarkStrategy.for_monotonous_timestamps()
        .with_watermark_alignment("group-1", timedelta(milliseconds=200))
        .with_idleness(timedelta(milliseconds=200))
    )
    assert strategy.alignment == ("group-1", 200, 1000)
    assert strategy.create_timestamp_assigner() is None
    assert isinstance(strategy.create_watermark_generator(ManualClock(0)), WatermarksWithIdleness)


# ---------------------------------------------------------------- TimestampsAndWatermarksOperatorTest


class PeriodicWatermarkGenerator(WatermarkGenerator):
    """TimestampsAndWatermarksOperatorTest's: the last timestamp - 1, not enforcing monotony."""

    def __init__(self) -> None:
        self.current = MIN_WATERMARK

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        self.current = event_timestamp

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        output.emit_watermark(Watermark(MIN_WATERMARK if self.current == MIN_WATERMARK else self.current - 1))


class PunctuatedWatermarkGenerator(WatermarkGenerator):
    """TimestampsAndWatermarksOperatorTest's: a watermark at an event's timestamp if its flag is set."""

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        if event[0]:
            output.emit_watermark(Watermark(event[1]))


class NeverWatermarkGenerator(WatermarkGenerator):
    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        pass


class _Collect(BatchTarget):
    def __init__(self) -> None:
        self.events: list[tuple] = []

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        assert timestamps is not None
        self.events.extend(("record", r, t) for r, t in zip(records, timestamps, strict=True))

    async def process_watermark(self, watermark: Watermark) -> None:
        self.events.append(("wm", watermark.timestamp))

    async def process_watermark_status(self, status: WatermarkStatus) -> None:
        self.events.append(("status", status.name))


class AssignerHarness:
    """A TimestampsAndWatermarksOperator on a manual processing-time clock (Flink's harness)."""

    def __init__(self, strategy: WatermarkStrategy, interval: int = AUTO_WATERMARK_INTERVAL) -> None:
        self.clock = ManualClock(0)
        self.timers = ProcessingTimeService(self.clock, lambda: None)
        self.op = TimestampsAndWatermarksOperator("Timestamps/Watermarks", strategy, interval)
        ctx = OperatorContext(
            uid="tw",
            name="Timestamps/Watermarks",
            task_name="Timestamps/Watermarks",
            subtask_index=0,
            parallelism=1,
            max_parallelism=128,
            clock=self.clock,
            metrics=MetricGroup("tw[0]", {}),
            processing_time=self.timers,
            keyed_backend=None,
        )
        self.out = _Collect()
        self.op.setup(ctx, Output([self.out], {}))
        self.op.initialize_state(None)

    async def open(self) -> AssignerHarness:
        await self.op.open()
        return self

    async def element(self, value: Any, ts: int | None = 1) -> None:
        await self.op.process_batch([value], None if ts is None else [ts])

    async def set_processing_time(self, now: int) -> None:
        self.clock.set(now)
        await self.timers.run_due()

    def poll(self) -> list[tuple]:
        """Everything emitted since the last poll."""
        events, self.out.events = self.out.events, []
        return events


def _periodic() -> WatermarkStrategy:
    return WatermarkStrategy.for_generator(PeriodicWatermarkGenerator).with_timestamp_assigner(
        lambda v, ts: v
    )


def _punctuated() -> WatermarkStrategy:
    return WatermarkStrategy.for_generator(PunctuatedWatermarkGenerator).with_timestamp_assigner(
        lambda v, ts: v[1]
    )


async def test_input_watermarks_are_not_forwarded() -> None:
    """TimestampsAndWatermarksOperatorTest.inputWatermarksAreNotForwarded."""
    h = await AssignerHarness(_periodic()).open()
    await h.op.process_watermark(Watermark(42))
    await h.set_processing_time(AUTO_WATERMARK_INTERVAL)
    assert h.poll() == []


async def test_input_statuses_are_not_forwarded() -> None:
    """TimestampsAndWatermarksOperatorTest.inputStatusesAreNotForwarded."""
    h = await AssignerHarness(_periodic()).open()
    await h.op.process_watermark_status(WatermarkStatus.IDLE)
    await h.set_processing_time(AUTO_WATERMARK_INTERVAL)
    assert h.poll() == []


async def test_long_max_input_watermark_is_forwarded() -> None:
    """TimestampsAndWatermarksOperatorTest.longMaxInputWatermarkIsForwarded: the end of input."""
    h = await AssignerHarness(_periodic()).open()
    await h.op.process_watermark(Watermark(MAX_WATERMARK))
    assert h.poll() == [("wm", MAX_WATERMARK)]


async def test_periodic_watermarks_emit_on_periodic_emit() -> None:
    """TimestampsAndWatermarksOperatorTest.periodicWatermarksEmitOnPeriodicEmitStreamMode."""
    h = await AssignerHarness(_periodic()).open()
    await h.element(2)
    await h.set_processing_time(AUTO_WATERMARK_INTERVAL)
    assert h.poll() == [("record", 2, 2), ("wm", 1)]
    await h.element(4)
    await h.set_processing_time(AUTO_WATERMARK_INTERVAL * 2)
    assert h.poll() == [("record", 4, 4), ("wm", 3)]


async def test_periodic_watermarks_only_emit_on_periodic_emit() -> None:
    """TimestampsAndWatermarksOperatorTest.periodicWatermarksOnlyEmitOnPeriodicEmitStreamMode:
    also not before the interval has elapsed."""
    h = await AssignerHarness(_periodic()).open()
    await h.element(2)
    await h.set_processing_time(AUTO_WATERMARK_INTERVAL - 1)
    assert h.poll() == [("record", 2, 2)]


async def test_periodic_watermarks_do_not_regress() -> None:
    """TimestampsAndWatermarksOperatorTest.periodicWatermarksDoNotRegressStreamMode: a generator
    that goes back (here also across a later interval) emits nothing."""
    h = await AssignerHarness(_periodic()).open()
    await h.element(4)
    await h.set_processing_time(AUTO_WATERMARK_INTERVAL)
    assert h.poll() == [("record", 4, 4), ("wm", 3)]
    await h.element(2)
    await h.set_processing_time(AUTO_WATERMARK_INTERVAL)
    assert h.poll() == [("record", 2, 2)]
    await h.set_processing_time(AUTO_WATERMARK_INTERVAL * 2)
    assert h.poll() == []


async def test_punctuated_watermarks_emit_immediately() -> None:
    """TimestampsAndWatermarksOperatorTest.punctuatedWatermarksEmitImmediatelyStreamMode: the
    record first, then its watermark, without waiting for an interval."""
    h = await AssignerHarness(_punctuated()).open()
    await h.element((True, 2))
    assert h.poll() == [("record", (True, 2), 2), ("wm", 2)]
    await h.element((True, 4))
    assert h.poll() == [("record", (True, 4), 4), ("wm", 4)]


async def test_punctuated_watermarks_do_not_regress() -> None:
    """TimestampsAndWatermarksOperatorTest.punctuatedWatermarksDoNotRegressStreamMode."""
    h = await AssignerHarness(_punctuated()).open()
    await h.element((True, 4))
    assert h.poll() == [("record", (True, 4), 4), ("wm", 4)]
    await h.element((True, 2))
    assert h.poll() == [("record", (True, 2), 2)]


async def test_punctuated_watermarks_cut_a_batch() -> None:
    """TimestampsAndWatermarksOperator.processElement per record (collect, then onEvent): in a
    batch, each watermark follows its own record and precedes the next."""
    h = await AssignerHarness(_punctuated()).open()
    await h.op.process_batch([(True, 2), (False, 3), (True, 4)], [0, 0, 0])
    assert h.poll() == [
        ("record", (True, 2), 2),
        ("wm", 2),
        ("record", (False, 3), 3),
        ("record", (True, 4), 4),
        ("wm", 4),
    ]


async def test_negative_timestamps() -> None:
    """TimestampsAndWatermarksOperatorTest.testNegativeTimestamps: every timestamp, Long.MIN_VALUE
    to Long.MAX_VALUE, is forwarded as assigned."""
    strategy = WatermarkStrategy.for_generator(NeverWatermarkGenerator).with_timestamp_assigner(
        lambda v, ts: v
    )
    h = await AssignerHarness(strategy).open()
    values = [MIN_WATERMARK, -1, 0, 1, 2, 3, MAX_WATERMARK]
    for value in values:
        await h.element(value, None)
    assert h.poll() == [("record", v, v) for v in values]


async def test_records_without_timestamps_and_no_assigner_get_the_minimum() -> None:
    """TimestampsAndWatermarksOperator with the default RecordTimestampAssigner: a record without a
    timestamp has Long.MIN_VALUE, and the watermark does not advance before the end of input."""
    h = await AssignerHarness(WatermarkStrategy.for_bounded_out_of_orderness(0)).open()
    await h.element("a", None)
    await h.set_processing_time(AUTO_WATERMARK_INTERVAL)
    assert h.poll() == [("record", "a", MIN_WATERMARK)]
    await h.op.process_watermark(Watermark(MAX_WATERMARK))
    assert h.poll() == [("wm", MAX_WATERMARK)]


async def test_records_keep_their_timestamps_without_an_assigner() -> None:
    """RecordTimestampAssigner: without an assigner a record keeps the timestamp it came with,
    and the bounded-out-of-orderness watermark follows it (max - bound - 1)."""
    h = await AssignerHarness(WatermarkStrategy.for_bounded_out_of_orderness(10)).open()
    await h.element("a", 100)
    await h.element("b", 50)
    await h.set_processing_time(AUTO_WATERMARK_INTERVAL)
    assert h.poll() == [("record", "a", 100), ("record", "b", 50), ("wm", 89)]


async def test_idleness_is_detected_on_the_clock_and_ends_with_a_higher_watermark() -> None:
    """WatermarksWithIdleness in TimestampsAndWatermarksOperator.onProcessingTime: with no events
    for more than the timeout the output goes IDLE; the next watermark above all earlier ones
    first marks it ACTIVE (Flink's WatermarkToDataOutput)."""
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(100)
    h = await AssignerHarness(strategy).open()
    await h.element("a", 10)
    await h.set_processing_time(50)  # activity since the last check
    assert h.poll() == [("record", "a", 10), ("wm", 9)]
    await h.set_processing_time(100)  # no activity: the countdown starts at 100
    await h.set_processing_time(200)  # 100 ms: not more than the timeout
    assert h.poll() == []
    await h.set_processing_time(250)  # 150 ms > 100 ms
    assert h.poll() == [("status", "IDLE")]
    await h.set_processing_time(300)
    assert h.poll() == []  # IDLE once
    await h.element("b", 20)
    await h.set_processing_time(350)
    assert h.poll() == [("record", "b", 20), ("status", "ACTIVE"), ("wm", 19)]


async def test_an_event_that_does_not_advance_the_watermark_leaves_the_output_idle() -> None:
    """WatermarksWithIdleness.onEvent only resets the idleness timer (it does not mark the output
    active); TimestampsAndWatermarksOperator's WatermarkEmitter marks it ACTIVE only when it emits
    a watermark above all earlier ones. So an idle input's record at or below its watermark keeps
    it IDLE (downstream keeps ignoring its watermark), and idleness is not announced again."""
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(100)
    h = await AssignerHarness(strategy).open()
    await h.element("a", 10)
    for now in (50, 100, 150, 250):
        await h.set_processing_time(now)
    assert h.poll() == [("record", "a", 10), ("wm", 9), ("status", "IDLE")]
    await h.element("old", 5)
    for now in (300, 350, 400, 450, 500, 550):
        await h.set_processing_time(now)
    assert h.poll() == [("record", "old", 5)]  # still IDLE: no ACTIVE, no second IDLE
    await h.element("new", 30)
    await h.set_processing_time(600)
    assert h.poll() == [("record", "new", 30), ("status", "ACTIVE"), ("wm", 29)]


async def test_the_final_watermark_ends_idleness() -> None:
    """WatermarkToDataOutput.emitWatermark: the end of input's Long.MAX_VALUE watermark marks an
    idle output ACTIVE first; nothing is emitted after it."""
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(10)
    h = await AssignerHarness(strategy).open()
    for now in (50, 100):
        await h.set_processing_time(now)
    assert h.poll() == [("status", "IDLE")]
    await h.op.process_watermark(Watermark(MAX_WATERMARK))
    assert h.poll() == [("status", "ACTIVE"), ("wm", MAX_WATERMARK)]
    await h.element("late", 5)
    await h.set_processing_time(1000)
    assert h.poll() == [("record", "late", 5)]


async def test_periodic_watermarks_batch_mode() -> None:
    """TimestampsAndWatermarksOperatorTest.periodicWatermarksBatchMode: in batch execution the
    operator assigns timestamps but emits no progressive watermarks (streamflow: the strategy
    that ``api/batch.py`` gives it), only the final one."""
    from streamflow.api.batch import batch_watermarks

    h = await AssignerHarness(batch_watermarks(_periodic())).open()
    await h.element(2)
    await h.set_processing_time(AUTO_WATERMARK_INTERVAL)
    assert h.poll() == [("record", 2, 2)]
    await h.element(4)
    await h.set_processing_time(AUTO_WATERMARK_INTERVAL * 2)
    assert h.poll() == [("record", 4, 4)]
    await h.op.process_watermark(Watermark(MAX_WATERMARK))
    assert h.poll() == [("wm", MAX_WATERMARK)]


async def test_punctuated_watermarks_batch_mode() -> None:
    """TimestampsAndWatermarksOperatorTest.punctuatedWatermarksBatchMode: no punctuated
    watermarks in batch execution either."""
    from streamflow.api.batch import batch_watermarks

    h = await AssignerHarness(batch_watermarks(_punctuated())).open()
    await h.element((True, 2))
    assert h.poll() == [("record", (True, 2), 2)]
    await h.element((True, 4))
    assert h.poll() == [("record", (True, 4), 4)]


@pytest.mark.parametrize("bound", [-1, timedelta(milliseconds=-1)])
def test_negative_out_of_orderness_is_refused(bound: Any) -> None:
    """BoundedOutOfOrdernessWatermarks's constructor: checkArgument(!maxOutOfOrderness.isNegative())."""
    with pytest.raises(ValueError, match="max_out_of_orderness"):
        WatermarkStrategy.for_bounded_out_of_orderness(bound)
    with pytest.raises(ValueError, match="max_out_of_orderness"):
        BoundedOutOfOrdernessWatermarks(bound)


async def test_an_auto_watermark_interval_of_zero_disables_periodic_emission() -> None:
    """TimestampsAndWatermarksOperator.open: no periodic timer when the auto-watermark interval
    is 0 (``watermarkInterval > 0``); punctuated watermarks and the final one still pass."""
    h = await AssignerHarness(_periodic(), interval=0).open()
    await h.element(2)
    for now in (50, 200, 10_000):
        await h.set_processing_time(now)
    assert h.poll() == [("record", 2, 2)]
    await h.op.process_watermark(Watermark(MAX_WATERMARK))
    assert h.poll() == [("wm", MAX_WATERMARK)]
    p = await AssignerHarness(_punctuated(), interval=0).open()
    await p.element((True, 3))
    assert p.poll() == [("record", (True, 3), 3), ("wm", 3)]


async def test_an_idle_aligned_source_stays_idle_on_records_behind_its_watermark() -> None:
    """WatermarksWithIdleness.onEvent (no markActive) with watermark alignment (FLIP-182: an idle
    source reports Long.MAX_VALUE): an idle source that reads a record behind its watermark stays
    idle, so it keeps holding no one back; the faster source of its group keeps reading."""
    from test_watermark_alignment import (
        DRIFT,
        _first_reports,
        _max,
        _start,
        aligned,
        settle,
        tick,
        tick_until,
    )

    from streamflow.testing import ScriptedSource

    fast, slow = ScriptedSource(end=False), ScriptedSource(end=False)
    clock, out, client = await _start(fast, slow, aligned().with_idleness(25))
    await _first_reports(clock, fast, slow, out)
    fast.push(*[("a", t) for t in range(1, 5_000)])
    await tick_until(clock, lambda: _max(out, "a") >= 5 * DRIFT)  # the slow source went idle
    slow.push(("b", 0))  # behind its watermark 0: no watermark, no ACTIVE
    await settle()
    await tick(clock)  # the slow source's next report (before: its watermark 0, holding "a" back)
    before = _max(out, "a")
    await tick(clock, 3)
    assert _max(out, "a") >= before + DRIFT
    await client.cancel()
