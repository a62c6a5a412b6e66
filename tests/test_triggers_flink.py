"""Flink's own trigger tests, ported on a port of its ``TriggerTestHarness``.

Sources (apache/flink, ``flink-streaming-java/src/test/java/org/apache/flink/streaming/
runtime/operators/windowing/``): ``CountTriggerTest``, ``EventTimeTriggerTest``,
``ProcessingTimeTriggerTest``, ``PurgingTriggerTest``, ``ProcessingTimeoutTriggerTest``,
``ContinuousEventTimeTriggerTest``
and ``ContinuousProcessingTimeTriggerTest`` (its operator-level cases on streamflow's
``WindowOperator`` through ``tests/window_harness.py``). Each test names its Java test. The harness
(``tests/trigger_harness.py``) counts timers and state entries as Flink's does, so the
assertions are Flink's numbers. ``tests/test_windowing.py`` has streamflow's own scripts.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from trigger_harness import NO_TIMESTAMP, TriggerTestHarness

from streamflow.runtime.events import MAX_WATERMARK
from streamflow.windowing import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    EventTimeTrigger,
    ProcessingTimeoutTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    TimeWindow,
    Trigger,
    TriggerResult,
    TriggerStateDescriptor,
)

TW = TimeWindow
CONTINUE, FIRE, PURGE = TriggerResult.CONTINUE, TriggerResult.FIRE, TriggerResult.PURGE
FIRE_AND_PURGE = TriggerResult.FIRE_AND_PURGE
W02, W24, W46, W04 = TW(0, 2), TW(2, 4), TW(4, 6), TW(0, 4)
HOUR = timedelta(hours=1)


def _counts(h: TriggerTestHarness, window: Any = None) -> tuple[int, int, int]:
    """(state entries, processing-time timers, event-time timers), of one window or all."""
    return h.num_state_entries(window), h.num_processing_time_timers(window), h.num_event_time_timers(window)


# ============================================================================ CountTriggerTest


def test_count_window_separation_and_firing() -> None:
    """CountTriggerTest.testWindowSeparationAndFiring: counts per window, cleared on FIRE."""
    h = TriggerTestHarness(CountTrigger.of(3))
    assert h.process_element(W02) is CONTINUE
    assert h.process_element(W24) is CONTINUE
    assert _counts(h) == (2, 0, 0)
    assert h.num_state_entries(W02) == h.num_state_entries(W24) == 1
    assert h.process_element(W02) is CONTINUE
    assert h.process_element(W02) is FIRE
    assert h.process_element(W24) is CONTINUE
    # CountTrigger clears its state in onElement when firing
    assert (h.num_state_entries(), h.num_state_entries(W02), h.num_state_entries(W24)) == (1, 0, 1)
    assert h.process_element(W24) is FIRE
    assert h.num_state_entries() == 0


def test_count_clear() -> None:
    """CountTriggerTest.testClear: clear() does not leak across windows."""
    h = TriggerTestHarness(CountTrigger.of(3))
    h.process_element(W02)
    h.process_element(W24)
    h.clear_trigger_state(W24)
    assert (h.num_state_entries(), h.num_state_entries(W02), h.num_state_entries(W24)) == (1, 1, 0)
    h.clear_trigger_state(W02)
    assert _counts(h) == (0, 0, 0)


def test_count_merging_windows() -> None:
    """CountTriggerTest.testMergingWindows: the merged windows' counts add up in the target."""
    h = TriggerTestHarness(CountTrigger.of(3))
    for window in (W02, W24, W46):
        assert h.process_element(window) is CONTINUE
    assert _counts(h) == (3, 0, 0)
    h.merge_windows(W04, [W02, W24])
    assert [h.num_state_entries(w) for w in (None, W02, W24, W04, W46)] == [2, 0, 0, 1, 1]
    assert h.process_element(W04) is FIRE
    assert [h.num_state_entries(w) for w in (None, W04, W46)] == [1, 0, 1]
    assert h.process_element(W46) is CONTINUE
    assert h.process_element(W46) is FIRE
    assert h.num_state_entries() == 0


def test_count_merge_subsuming_window() -> None:
    """CountTriggerTest.testMergeSubsumingWindow: a target covering both merged windows."""
    h = TriggerTestHarness(CountTrigger.of(3))
    h.process_element(W24)
    h.process_element(W46)
    h.merge_windows(TW(0, 8), [W24, W46])
    assert [h.num_state_entries(w) for w in (None, W24, W46, TW(0, 8))] == [1, 0, 0, 1]
    assert h.process_element(TW(0, 8)) is FIRE
    assert h.num_state_entries() == 0


# ========================= EventTimeTriggerTest / ProcessingTimeTriggerTest

TIME_TRIGGERS = {
    "EventTimeTriggerTest": (EventTimeTrigger.create(), "event"),
    "ProcessingTimeTriggerTest": (ProcessingTimeTrigger.create(), "processing"),
}


def _timers(h: TriggerTestHarness, domain: str, window: Any = None) -> int:
    if domain == "event":
        return h.num_event_time_timers(window)
    return h.num_processing_time_timers(window)


def _other_timers(h: TriggerTestHarness, domain: str) -> int:
    return _timers(h, "processing" if domain == "event" else "event")


def _advance(h: TriggerTestHarness, domain: str, time: int, window: Any = None) -> Any:
    if domain == "event":
        return h.advance_watermark(time, window)
    return h.advance_processing_time(time, window)


@pytest.mark.parametrize("test", list(TIME_TRIGGERS))
def test_time_window_separation_and_firing(test: str) -> None:
    """{EventTime,ProcessingTime}TriggerTest.testWindowSeparationAndFiring: one timer per
    window at its max timestamp (registering again keeps one), no state."""
    trigger, domain = TIME_TRIGGERS[test]
    h = TriggerTestHarness(trigger)
    for window in (W02, W02, W02, W24, W24):
        assert h.process_element(window) is CONTINUE
    assert (h.num_state_entries(), _other_timers(h, domain), _timers(h, domain)) == (0, 0, 2)
    assert _timers(h, domain, W02) == _timers(h, domain, W24) == 1
    assert _advance(h, domain, 2, W02) is FIRE
    assert (_timers(h, domain), _timers(h, domain, W02), _timers(h, domain, W24)) == (1, 0, 1)
    assert _advance(h, domain, 4, W24) is FIRE
    assert _counts(h) == (0, 0, 0)


def test_event_time_late_element_triggers_immediately() -> None:
    """EventTimeTriggerTest.testLateElementTriggersImmediately: FIRE, and no timer."""
    h = TriggerTestHarness(EventTimeTrigger.create())
    h.advance_watermark(2)
    assert h.process_element(W02) is FIRE
    assert _counts(h) == (0, 0, 0)


@pytest.mark.parametrize("test", list(TIME_TRIGGERS))
def test_time_clear(test: str) -> None:
    """{EventTime,ProcessingTime}TriggerTest.testClear: clear() deletes this window's timer only."""
    trigger, domain = TIME_TRIGGERS[test]
    h = TriggerTestHarness(trigger)
    h.process_element(W02)
    h.process_element(W24)
    h.clear_trigger_state(W24)
    assert (_timers(h, domain), _timers(h, domain, W02), _timers(h, domain, W24)) == (1, 1, 0)
    h.clear_trigger_state(W02)
    assert _counts(h) == (0, 0, 0)


@pytest.mark.parametrize("test", list(TIME_TRIGGERS))
def test_time_merging_windows(test: str) -> None:
    """{EventTime,ProcessingTime}TriggerTest.testMergingWindows: the merged windows' timers
    are gone (clear), the target's is registered and fires."""
    trigger, domain = TIME_TRIGGERS[test]
    assert trigger.can_merge()
    h = TriggerTestHarness(trigger)
    h.process_element(W02)
    h.process_element(W24)
    h.merge_windows(W04, [W02, W24])
    assert [_timers(h, domain, w) for w in (None, W02, W24, W04)] == [1, 0, 0, 1]
    assert h.num_state_entries() == 0
    assert _advance(h, domain, 4, W04) is FIRE
    assert _counts(h) == (0, 0, 0)


@pytest.mark.parametrize("test", list(TIME_TRIGGERS))
def test_time_merging_late_windows(test: str) -> None:
    """{EventTime,ProcessingTime}TriggerTest.testMergingLateWindows: merging windows whose end
    passed registers no timer (it would fire a second time)."""
    trigger, domain = TIME_TRIGGERS[test]
    h = TriggerTestHarness(trigger)
    h.process_element(W02)
    h.process_element(W24)
    _advance(h, domain, 10)
    assert _counts(h) == (0, 0, 0)
    h.merge_windows(W04, [W02, W24])
    assert _counts(h) == (0, 0, 0)
    assert _timers(h, domain, W04) == 0


# ============================================================================ PurgingTriggerTest


def test_purging_all_methods_implemented() -> None:
    """PurgingTriggerTest.testAllMethodsImplemented: PurgingTrigger overrides every method of
    Trigger (so none silently falls back to the base class)."""
    methods = {
        name for name, _ in inspect.getmembers(Trigger, inspect.isfunction) if not name.startswith("_")
    }
    assert methods >= {"on_element", "on_event_time", "on_processing_time", "can_merge", "on_merge", "clear"}
    missing = {name for name in methods if name not in vars(PurgingTrigger)}
    assert not missing


@dataclass(eq=False)
class ScriptedTrigger(Trigger):
    """Flink's mocked nested trigger: answers ``result``; ``timers`` are registered on the
    next element; calls are recorded."""

    result: TriggerResult = CONTINUE
    timers: tuple[str, list[int]] | None = None
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        if self.timers is not None:
            domain, times = self.timers
            for time in times:
                (ctx.register_event_time_timer if domain == "event" else ctx.register_processing_time_timer)(
                    time
                )
            self.timers = None
            return CONTINUE
        return self.result

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return self.result

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return self.result

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Any) -> None:
        self.calls.append(("on_merge", window))

    def clear(self, window: Any, ctx: Any) -> None:
        self.calls.append(("clear", window))


PURGED = [(CONTINUE, CONTINUE), (FIRE, FIRE_AND_PURGE), (FIRE_AND_PURGE, FIRE_AND_PURGE), (PURGE, PURGE)]


def test_purging_forwarding() -> None:
    """PurgingTriggerTest.testForwarding: every result of the nested trigger, on element,
    event time and processing time, with FIRE turned into FIRE_AND_PURGE; on_merge and clear
    are forwarded."""
    nested = ScriptedTrigger()
    h = TriggerTestHarness(PurgingTrigger.of(nested))
    for given, expected in PURGED:
        nested.result = given
        assert h.process_element(W02) is expected
    for domain in ("event", "processing"):
        nested.timers = (domain, [1, 2, 3, 4])
        h.process_element(W02)
        assert _timers(h, domain, W02) == 4
        for time, (given, expected) in enumerate(PURGED, start=1):
            nested.result = given
            assert _advance(h, domain, time, W02) is expected
    h.merge_windows(W02, [TW(0, 1)])
    assert nested.calls == [("on_merge", W02), ("clear", TW(0, 1))]
    h.clear_trigger_state(W02)
    assert nested.calls[-1] == ("clear", W02)


# ============================================================================ ContinuousEventTimeTriggerTest


def test_continuous_event_time_handles_all_on_timer_calls() -> None:
    """ContinuousEventTimeTriggerTest.testTriggerHandlesAllOnTimerCalls: a timer firing for a
    window without trigger state (a late window, then a GC timer) does not fail."""
    h = TriggerTestHarness(ContinuousEventTimeTrigger.of(5))
    assert _counts(h) == (0, 0, 0)
    h.advance_watermark(10)
    assert h.process_element(W02) is FIRE
    assert h.invoke_on_event_time(20, W02) is CONTINUE


def test_continuous_event_time_window_separation_and_firing() -> None:
    """ContinuousEventTimeTriggerTest.testWindowSeparationAndFiring: per window a fire-time
    state and two timers (the end of the window, the next interval)."""
    h = TriggerTestHarness(ContinuousEventTimeTrigger.of(HOUR))
    for window in (W02, W02, W02, W24, W24):
        assert h.process_element(window) is CONTINUE
    assert _counts(h) == (2, 0, 4)
    assert h.num_event_time_timers(W02) == h.num_event_time_timers(W24) == 2
    firings = h.advance_watermark(2)
    assert [r for w, r in firings if w == W02] and all(r is FIRE for w, r in firings if w == W02)
    assert _counts(h) == (2, 0, 3)
    assert (h.num_event_time_timers(W02), h.num_event_time_timers(W24)) == (1, 2)
    firings = h.advance_watermark(4)
    assert [r for w, r in firings if w == W24] and all(r is FIRE for w, r in firings if w == W24)
    assert _counts(h) == (2, 0, 2)


def test_continuous_event_time_late_element_triggers_immediately() -> None:
    """ContinuousEventTimeTriggerTest.testLateElementTriggersImmediately: FIRE, no state, no timer."""
    h = TriggerTestHarness(ContinuousEventTimeTrigger.of(HOUR))
    h.advance_watermark(2)
    assert h.process_element(W02) is FIRE
    assert _counts(h) == (0, 0, 0)


def test_continuous_event_time_clear() -> None:
    """ContinuousEventTimeTriggerTest.testClear: clear() deletes the window's state and its
    interval timer, not its end-of-window timer."""
    h = TriggerTestHarness(ContinuousEventTimeTrigger.of(HOUR))
    h.process_element(W02)
    h.process_element(W24)
    assert _counts(h) == (2, 0, 4)
    h.clear_trigger_state(W24)
    assert _counts(h) == (1, 0, 3)
    assert (h.num_event_time_timers(W02), h.num_event_time_timers(W24)) == (2, 1)
    h.clear_trigger_state(W02)
    assert _counts(h) == (0, 0, 2)  # doesn't clean up the end-of-window timers


def test_continuous_event_time_merging_windows() -> None:
    """ContinuousEventTimeTriggerTest.testMergingWindows: the fire time moves to the target,
    which gets one timer (its next fire); the merged windows' timers stay; the target fires."""
    assert ContinuousEventTimeTrigger.of(HOUR).can_merge()
    h = TriggerTestHarness(ContinuousEventTimeTrigger.of(HOUR))
    h.process_element(W02)
    h.process_element(W24)
    h.merge_windows(W04, [W02, W24])
    assert _counts(h) == (1, 0, 5)  # on merging, timers are not cleaned up
    assert [h.num_event_time_timers(w) for w in (W02, W24, W04)] == [2, 2, 1]
    firings = h.advance_watermark(4)
    assert [r for w, r in firings if w == W04] == [FIRE]
    assert _counts(h) == (1, 0, 1)


def test_continuous_processing_time_last_fire_at_the_window_end() -> None:
    """ContinuousProcessingTimeTriggerTest.testEventTimeWindowFiring, at trigger level: the fire
    at the window's max timestamp registers no further timer (FLINK-35069: capped at the end,
    the next fire would be the same time again, forever, for a window nothing cleans up by
    processing time)."""
    h = TriggerTestHarness(ContinuousProcessingTimeTrigger.of(5))
    h.processing_time = 0
    window = TW(0, 10)
    assert h.process_element(window, 1) is CONTINUE
    assert h.advance_processing_time(5, window) is FIRE
    assert h.num_processing_time_timers(window) == 1  # the next fire, capped at 9
    assert h.advance_processing_time(10, window) is FIRE
    assert _counts(h) == (0, 0, 0)
    assert h.advance_processing_time(20) == []


def test_continuous_processing_time_can_merge() -> None:
    """ContinuousProcessingTimeTriggerTest.testProcessingTimeWindowFiring / testMergingWindows
    (their trigger-level part): ``canMerge()`` is true."""
    assert ContinuousProcessingTimeTrigger.of(5).can_merge()


# ========================= ContinuousProcessingTimeTriggerTest (operator)


def _window_sum(key: Any, ctx: Any, elements: Any) -> list:
    """Flink's IntegerSumWindowFunction: ``WindowedInteger(window, sum)``."""
    window = ctx.window()
    return [((window.start, window.end), sum(v for _, v in elements))]


class _BoundedEvents(list):
    """The recorder's list of outputs, failing on a runaway fire loop instead of hanging."""

    def append(self, item: Any) -> None:
        if len(self) >= 100:
            raise AssertionError("more than 100 window results: a timer keeps firing")
        super().append(item)


async def _run_processing_time_script(assigner: Any, script: list[tuple[Any, ...]]) -> list[list[tuple]]:
    """Drive a WindowOperator (one key, Flink's NullByteKeySelector) with a
    ContinuousProcessingTimeTrigger.of(5): ("now", t) sets processing time and fires the due
    timers; ("e", value, ts) processes one element (ts None: no timestamp). Returns the
    records emitted at each step as ((start, end), sum, timestamp)."""
    from window_harness import WindowHarness

    from streamflow.runtime.window_context import WindowFunctions

    harness = WindowHarness(
        assigner,
        lambda: WindowFunctions(process=_window_sum),
        trigger=ContinuousProcessingTimeTrigger.of(5),
    )
    harness.main.events = _BoundedEvents()
    op = harness.op
    await op.open()
    out = []
    for step in script:
        before = len(harness.main.events)
        if step[0] == "now":
            harness.clock.set(step[1])
            await op.ctx.processing_time.run_due()
        else:
            _, value, ts = step
            await op.process_batch([(0, value)], None if ts is None else [ts])
        out.append([(*r, t) for r, t in harness.main.events[before:] if r != "wm"])
    await op.close()
    return out


async def test_continuous_processing_time_window_firing() -> None:
    """ContinuousProcessingTimeTriggerTest.testProcessingTimeWindowFiring: tumbling
    processing-time windows of 10 ms fire every 5 ms and at the window's last millisecond,
    without purging."""
    from streamflow.windowing import TumblingProcessingTimeWindows

    script = [
        ("now", 0), ("e", 1, None), ("now", 2), ("e", 2, None), ("now", 5),
        ("now", 7), ("e", 3, None), ("now", 9),
        ("now", 10), ("e", 3, None), ("now", 15),
        ("now", 18), ("e", 3, None), ("now", 20),
    ]  # fmt: skip
    out = await _run_processing_time_script(TumblingProcessingTimeWindows.of(10), script)
    fired = {i: records for i, records in enumerate(out) if records}
    assert fired == {
        4: [((0, 10), 3, 9)],
        7: [((0, 10), 6, 9)],
        10: [((10, 20), 3, 19)],
        13: [((10, 20), 6, 19)],
    }


async def test_continuous_processing_time_on_event_time_windows() -> None:
    """ContinuousProcessingTimeTriggerTest.testEventTimeWindowFiring: event-time tumbling
    windows fire by processing time, every 5 ms, the last fire capped at the window's end."""
    from streamflow.windowing import TumblingEventTimeWindows

    script = [
        ("now", 0), ("e", 1, 1), ("e", 2, 3), ("e", 3, 7), ("now", 5),
        ("e", 3, 8), ("now", 10),
        ("e", 3, 12), ("now", 15),
    ]  # fmt: skip
    out = await _run_processing_time_script(TumblingEventTimeWindows.of(10), script)
    fired = {i: records for i, records in enumerate(out) if records}
    assert fired == {4: [((0, 10), 6, 9)], 6: [((0, 10), 9, 9)], 8: [((10, 20), 3, 19)]}


async def test_continuous_processing_time_merging_windows() -> None:
    """ContinuousProcessingTimeTriggerTest.testMergingWindows: processing-time sessions (gap
    10): the merged window keeps the pending fire time (5), fires at 5, 10 and at its end
    (11), and is dropped after."""
    from streamflow.windowing import ProcessingTimeSessionWindows

    script = [
        ("now", 0), ("e", 1, None), ("now", 2), ("e", 2, None),
        ("now", 5), ("now", 9), ("now", 10), ("now", 15), ("now", 100),
    ]  # fmt: skip
    out = await _run_processing_time_script(ProcessingTimeSessionWindows.with_gap(10), script)
    fired = {i: records for i, records in enumerate(out) if records}
    assert fired == {4: [((0, 12), 3, 11)], 6: [((0, 12), 3, 11)], 7: [((0, 12), 3, 11)]}


# ============================================================================ ProcessingTimeoutTriggerTest

MIN = NO_TIMESTAMP  # Flink's Long.MIN_VALUE: the harness's processing time before any advance


def test_timeout_fire_without_reset_timer() -> None:
    """ProcessingTimeoutTriggerTest.testWindowFireWithoutResetTimer: CountTrigger(3) with a
    50 ms timeout from the first element; the timeout fires and clears both triggers' state."""
    h = TriggerTestHarness(ProcessingTimeoutTrigger.of(CountTrigger.of(3), 50, False, True))
    assert h.process_element(W02) is CONTINUE
    assert h.process_element(W02) is CONTINUE
    assert _counts(h) == (2, 1, 0)  # the timeout's state and CountTrigger's
    with pytest.raises(AssertionError, match="exactly one timer firing"):
        h.advance_processing_time(MIN + 40, W02)
    assert h.advance_processing_time(MIN + 50, W02) is FIRE
    assert _counts(h) == (0, 0, 0)
    assert [h.process_element(W02) for _ in range(3)] == [CONTINUE, CONTINUE, FIRE]


def test_timeout_fire_with_reset_timer() -> None:
    """ProcessingTimeoutTriggerTest.testWindowFireWithResetTimer: each element moves the
    timeout to its time + 50."""
    h = TriggerTestHarness(ProcessingTimeoutTrigger.of(CountTrigger.of(3), 50, True, True))
    with pytest.raises(AssertionError, match="exactly one timer firing"):
        h.advance_processing_time(0, W02)
    assert h.process_element(W02) is CONTINUE
    with pytest.raises(AssertionError, match="exactly one timer firing"):
        h.advance_processing_time(10, W02)
    assert h.process_element(W02) is CONTINUE
    assert _counts(h) == (2, 1, 0)
    with pytest.raises(AssertionError, match="exactly one timer firing"):
        h.advance_processing_time(50, W02)  # not at the first element + 50: reset to 60
    assert h.advance_processing_time(60, W02) is FIRE
    assert _counts(h) == (0, 0, 0)
    assert [h.process_element(W02, ts) for ts in (0, 10, 20)] == [CONTINUE, CONTINUE, FIRE]


def test_timeout_fire_with_clear_at_timeout_off() -> None:
    """ProcessingTimeoutTriggerTest.testWindowFireWithClearAtTimeout: without clearing on
    timeout, the timeout's state and CountTrigger's stay."""
    h = TriggerTestHarness(ProcessingTimeoutTrigger.of(CountTrigger.of(3), 50, False, False))
    h.process_element(W02)
    h.process_element(W02)
    assert _counts(h) == (2, 1, 0)
    assert h.advance_processing_time(MIN + 50, W02) is FIRE
    assert _counts(h) == (2, 0, 0)


def test_timeout_purging_when_inner_trigger_is_purging() -> None:
    """ProcessingTimeoutTriggerTest.testWindowPurgingWhenInnerTriggerIsPurging: the timeout
    fires FIRE_AND_PURGE when the nested trigger purges; ProcessingTimeTrigger's own timer stays."""
    h = TriggerTestHarness(
        ProcessingTimeoutTrigger.of(PurgingTrigger.of(ProcessingTimeTrigger.create()), 50, False, False)
    )
    h.process_element(W02)
    h.process_element(W02)
    assert _counts(h) == (1, 2, 0)  # the timeout timer and the window's end
    assert h.advance_processing_time(MIN + 50, W02) is FIRE_AND_PURGE
    assert _counts(h) == (1, 1, 0)


def test_timeout_arguments() -> None:
    """``of(nested, timeout)`` as Flink's: no reset, clear on timeout; a timedelta timeout; the
    trigger does not merge (Flink's default ``canMerge``)."""
    trigger = ProcessingTimeoutTrigger.of(CountTrigger.of(3), timedelta(seconds=1))
    assert (trigger.interval, trigger.reset_timer_on_new_record, trigger.should_clear_on_timeout) == (
        1000,
        False,
        True,
    )
    assert not trigger.can_merge()
    with pytest.raises(TypeError):
        ProcessingTimeoutTrigger.of("not a trigger", 5)  # type: ignore[arg-type]


# ============================================================================ WindowOperatorTest (continuous)


def _session_function(key: Any, ctx: Any, elements: Any) -> list:
    """Flink's WindowOperatorTest.SessionWindowFunction: ``(key-sum, start, end)``."""
    window = ctx.window()
    return [(f"{key}-{sum(v for _, v in elements)}", window.start, window.end)]


async def test_session_windows_with_continuous_event_time_trigger() -> None:
    """WindowOperatorTest.testSessionWindowsWithContinuousEventTimeTrigger: sessions (gap 3 s)
    with ContinuousEventTimeTrigger.of(2 s): merging keeps the earliest pending fire time, the
    merged windows fire at 2000 and again at 4000 -- across a snapshot and restore."""
    from window_harness import WindowHarness, run_script

    from streamflow.runtime.window_context import WindowFunctions
    from streamflow.windowing import EventTimeSessionWindows

    harness = WindowHarness(
        EventTimeSessionWindows.with_gap(3000),
        lambda: WindowFunctions(process=_session_function),
        trigger=ContinuousEventTimeTrigger.of(timedelta(seconds=2)),
    )
    script = [
        ("e", "key1", 1, 1500), ("e", "key2", 1, 0), ("e", "key2", 3, 2500), ("e", "key2", 2, 1000),
        ("w", 2500),  # first trigger time is 2000
        ("e", "key2", 5, 4000), ("w", 3000),
        ("snap",),
        ("e", "key1", 2, 4000), ("e", "key2", 4, 3500),
        ("w", 4000),  # next trigger time is 4000
    ]  # fmt: skip
    out = [event for step in await run_script(harness, script) for event in step]
    assert out == [
        (("key1-1", 1500, 4500), 4499),
        (("key2-6", 0, 5500), 5499),
        ("wm", 2500),
        ("wm", 3000),
        (("key1-3", 1500, 7000), 6999),
        (("key2-15", 0, 7000), 6999),
        ("wm", 4000),
    ]


async def test_continuous_watermark_trigger() -> None:
    """WindowOperatorTest.testContinuousWatermarkTrigger: GlobalWindows with
    ContinuousEventTimeTrigger.of(3 s) and a sum: each key fires at the multiples of 3 s after
    its first element's (3000 for key1, 6000 for key1 and key2), never purging."""
    from window_harness import WindowHarness, run_script

    from streamflow.runtime.events import MAX_WATERMARK
    from streamflow.runtime.window_context import WindowFunctions
    from streamflow.windowing import GlobalWindows

    harness = WindowHarness(
        GlobalWindows.create(),
        lambda: WindowFunctions(reduce=lambda a, b: (a[0], a[1] + b[1])),
        trigger=ContinuousEventTimeTrigger.of(timedelta(seconds=3)),
    )
    elements = [("key1", 0), ("key2", 3000), ("key2", 3999), ("key1", 20), ("key1", 999)]
    elements += [("key2", 1998), ("key2", 1999), ("key2", 1000)]
    script = [("e", key, 1, ts) for key, ts in elements]
    script += [("w", t) for t in (1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000)]
    out = [event for step in await run_script(harness, script) for event in step]
    assert out == [
        ("wm", 1000),
        ("wm", 2000),
        (("key1", 3), MAX_WATERMARK),
        ("wm", 3000),
        ("wm", 4000),
        ("wm", 5000),
        (("key1", 3), MAX_WATERMARK),
        (("key2", 5), MAX_WATERMARK),
        ("wm", 6000),
        ("wm", 7000),
        ("wm", 8000),
    ]


def test_processing_timeout_trigger_through_the_datastream_api() -> None:
    """ProcessingTimeoutTrigger on ``key_by().window().trigger()``: CountTrigger(3) fires (and,
    through the wrapper, clears its count) every third element without purging; at the end of
    input the window's cleanup timer is an event-time timer of the window, and the wrapper FIREs
    on any timer (Flink's ``onEventTime``), so the rest of the pane is emitted too."""
    import streamflow as sf
    from streamflow.common import WatermarkStrategy
    from streamflow.windowing import TumblingEventTimeWindows

    env = sf.StreamExecutionEnvironment()
    data = [("a", i, i) for i in range(1, 8)]
    stream = env.from_collection(data).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, t: e[2])
    )
    sums = (
        stream.key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(10))
        .trigger(ProcessingTimeoutTrigger.of(CountTrigger.of(3), timedelta(hours=1)))
        .reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
    )
    assert [r[1] for r in sums.execute_and_collect()] == [6, 21, 28]


# ============================================================================ WindowOperatorContractTest


@dataclass(eq=False)
class ContractTrigger(Trigger):
    """WindowOperatorContractTest's mocked trigger: ``on_element`` registers a timer at
    ``timer`` (in ``domain``) and answers ``result``; timer callbacks answer CONTINUE and are
    recorded, as are ``clear`` calls."""

    domain: str = "event"
    timer: int | None = 0
    result: TriggerResult = CONTINUE
    merging: bool = False
    time_result: TriggerResult = CONTINUE
    timer_calls: list[tuple[int, Any]] = field(default_factory=list)
    clears: list[Any] = field(default_factory=list)

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        register = (
            ctx.register_event_time_timer if self.domain == "event" else ctx.register_processing_time_timer
        )
        if self.timer is not None:
            register(self.timer)
        return self.result

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        self.timer_calls.append((time, window))
        return self.time_result

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        self.timer_calls.append((time, window))
        return self.time_result

    def can_merge(self) -> bool:
        return self.merging

    def on_merge(self, window: Any, ctx: Any) -> None:
        pass

    def clear(self, window: Any, ctx: Any) -> None:
        self.clears.append(window)


@dataclass(frozen=True)
class FixedWindows:
    """WindowOperatorContractTest's mocked assigner: every element into ``window``."""

    domain: str
    merging_: bool
    window: Any = field(default_factory=lambda: TW(2, 4))

    def assign_windows(self, element: Any, timestamp: Any, ctx: Any = None) -> list[Any]:
        return [self.window]

    def get_default_trigger(self, env: object = None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return self.domain == "event"

    @property
    def merging(self) -> bool:
        return self.merging_

    def merge_windows(self, windows: Any, callback: Any) -> None:
        TW.merge_windows(windows, callback)


async def _contract_harness(
    domain: str, merging: bool, trigger: ContractTrigger, window: Any = None, lateness: int = 0
) -> Any:
    from window_harness import WindowHarness

    from streamflow.runtime.window_context import WindowFunctions
    from streamflow.windowing import MergingWindowAssigner, WindowAssigner

    base = MergingWindowAssigner if merging else WindowAssigner
    assigner_type = type("ContractAssigner", (FixedWindows, base), {})
    calls: list[Any] = []

    def function(key: Any, ctx: Any, elements: Any) -> list:
        calls.append(list(elements))
        return []

    harness = WindowHarness(
        assigner_type(domain, merging, TW(2, 4) if window is None else window),
        lambda: WindowFunctions(process=function),
        trigger=trigger,
        lateness=lateness,
    )
    harness.function_calls = calls
    await harness.op.open()
    return harness


async def _advance_operator(harness: Any, domain: str, time: int) -> None:
    from streamflow.runtime.events import Watermark

    if domain == "event":
        await harness.op.process_watermark(Watermark(time))
    else:
        harness.clock.set(time)
        await harness.op.ctx.processing_time.run_due()


def _num_timers(harness: Any, domain: str) -> int:
    timers = harness.op.timers
    return int(timers.num_event_time_timers if domain == "event" else timers.num_processing_time_timers)


@pytest.mark.parametrize("merging", [False, True], ids=["window", "merging window"])
@pytest.mark.parametrize("domain", ["event", "processing"])
async def test_no_timer_firing_for_purged_window(domain: str, merging: bool) -> None:
    """WindowOperatorContractTest.testNo{EventTime,ProcessingTime}FiringForPurged{,Merging}Window:
    the trigger registers a timer at 0 and PURGEs; when the timer fires the trigger is called
    once, the window function never (nothing left), and only the GC timer stays."""
    trigger = ContractTrigger(domain=domain, timer=0, result=PURGE, merging=merging)
    harness = await _contract_harness(domain, merging, trigger)
    await harness.op.process_batch([(0, 0)], [0] if domain == "event" else None)
    assert _num_timers(harness, domain) == 2  # the trigger's timer and the GC timer
    await _advance_operator(harness, domain, 0)
    assert len(trigger.timer_calls) == 1
    assert harness.function_calls == []
    assert _num_timers(harness, domain) == 1  # only the GC timer
    await harness.op.close()


@pytest.mark.parametrize("domain", ["event", "processing"])
async def test_no_timer_firing_for_garbage_collected_merging_window(domain: str) -> None:
    """WindowOperatorContractTest.testNo{EventTime,ProcessingTime}FiringForGarbageCollectedMergingWindow:
    a merging window GC'd at its end (the trigger is called for the GC timer, then cleared);
    the trigger's dangling timer at 10 later fires nothing, as the window is gone."""
    trigger = ContractTrigger(domain=domain, timer=10, result=CONTINUE, merging=True)
    harness = await _contract_harness(domain, True, trigger)
    await harness.op.process_batch([(0, 0)], [0] if domain == "event" else None)
    assert _num_timers(harness, domain) == 2
    await _advance_operator(harness, domain, 4)  # GC of [2, 4) at 3
    assert trigger.clears == [TW(2, 4)]
    assert _num_timers(harness, domain) == 1  # the trigger's dangling timer
    assert len(trigger.timer_calls) == 1
    assert harness.function_calls == []
    await _advance_operator(harness, domain, 10)
    assert len(trigger.timer_calls) == 1  # not called again for a window that is gone
    await harness.op.close()


@dataclass
class ShrinkingAssigner:
    """WindowOperatorContractTest's mocked merging assigner: assigns ``window``; merges all
    windows into ``merge_to`` when set."""

    domain: str
    window: TW = field(default_factory=lambda: TW(0, 22))
    merge_to: TW | None = None

    def assign_windows(self, element: Any, timestamp: Any, ctx: Any = None) -> list[TW]:
        return [self.window]

    def merge_windows(self, windows: Any, callback: Any) -> None:
        windows = list(windows)
        if self.merge_to is not None and len(set(windows)) > 1:
            callback(windows, self.merge_to)

    def get_default_trigger(self, env: object = None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return self.domain == "event"

    @property
    def merging(self) -> bool:
        return True


@pytest.mark.parametrize("domain", ["event", "processing"])
async def test_reject_shrinking_merging_windows(domain: str) -> None:
    """WindowOperatorContractTest.testRejectShrinkingMerging{EventTime,ProcessingTime}Windows: a
    misbehaving merging assigner may not make a window late by merging -- a merge result whose
    end (plus allowed lateness) is at or before the watermark / processing time is refused
    (Flink: UnsupportedOperationException). Processing time was not checked before, and event
    time failed with a bare AssertionError."""
    from window_harness import WindowHarness

    from streamflow.runtime.window_context import WindowFunctions
    from streamflow.windowing import MergingWindowAssigner

    lateness = 10 if domain == "event" else 0
    assigner = type("Shrinking", (ShrinkingAssigner, MergingWindowAssigner), {})(domain)
    harness = WindowHarness(
        assigner,
        lambda: WindowFunctions(process=lambda k, c, e: []),
        lateness=lateness,
        trigger=ContractTrigger(domain=domain, timer=10**9, merging=True),
    )
    await harness.op.open()
    await _advance_operator(harness, domain, 0)
    ts = [0] if domain == "event" else None
    await harness.op.process_batch([(0, 0)], ts)
    assigner.window = TW(0, 25)
    await _advance_operator(harness, domain, 20)
    # 20 - lateness + 2: a window (0, 12) has 11 as max timestamp, not late at watermark 20
    assigner.merge_to = TW(0, 20 - lateness + 2)
    await harness.op.process_batch([(0, 0)], ts)
    assigner.merge_to = TW(0, 20 - lateness + 1)  # now just late
    with pytest.raises(NotImplementedError, match="cannot become earlier than the current"):
        await harness.op.process_batch([(0, 0)], ts)


def _num_other_timers(harness: Any, domain: str) -> int:
    return _num_timers(harness, "processing" if domain == "event" else "event")


@pytest.mark.parametrize("domain", ["event", "processing"])
async def test_no_garbage_collection_timer_for_global_window(domain: str) -> None:
    """WindowOperatorContractTest.testNo{EventTime,ProcessingTime}GarbageCollectionTimerForGlobalWindow:
    the global window ends at Long.MAX_VALUE, so it gets no GC timer in either domain."""
    from streamflow.windowing import GlobalWindow

    harness = await _contract_harness(
        domain, False, ContractTrigger(domain=domain, timer=None), GlobalWindow.get()
    )
    await harness.op.process_batch([(0, 0)], [0] if domain == "event" else None)
    assert (_num_timers(harness, domain), _num_other_timers(harness, domain)) == (0, 0)
    await harness.op.close()


async def test_no_event_time_garbage_collection_timer_for_long_max() -> None:
    """WindowOperatorContractTest.testNoEventTimeGarbageCollectionTimerForLongMax: a window
    ending near Long.MAX_VALUE whose end + allowed lateness overflows gets no GC timer."""
    window = TW(0, MAX_WATERMARK - 10)
    harness = await _contract_harness("event", False, ContractTrigger(timer=None), window, lateness=20)
    await harness.op.process_batch([(0, 0)], [0])
    assert (_num_timers(harness, "event"), _num_other_timers(harness, "event")) == (0, 0)
    await harness.op.close()


async def test_processing_time_garbage_collection_timer_is_always_window_max_timestamp() -> None:
    """WindowOperatorContractTest.testProcessingTimeGarbageCollectionTimerIsAlwaysWindowMaxTimestamp:
    allowed lateness does not apply to processing time: the GC timer is the window's max
    timestamp, where the trigger is cleared."""
    window = TW(0, MAX_WATERMARK - 10)
    trigger = ContractTrigger(domain="processing", timer=None)
    harness = await _contract_harness("processing", False, trigger, window, lateness=20)
    await harness.op.process_batch([(0, 0)], None)
    assert (_num_timers(harness, "event"), _num_timers(harness, "processing")) == (0, 1)
    assert trigger.clears == []
    await _advance_operator(harness, "processing", MAX_WATERMARK - 10)
    assert trigger.clears == [window]
    assert (_num_timers(harness, "event"), _num_timers(harness, "processing")) == (0, 0)
    await harness.op.close()


@pytest.mark.parametrize("domain", ["event", "processing"])
async def test_garbage_collection_timer(domain: str) -> None:
    """WindowOperatorContractTest.test{EventTime,ProcessingTime}GarbageCollectionTimer: one GC
    timer at max timestamp + allowed lateness (none for processing time); the trigger is still
    called for it and may FIRE -- the function runs a last time -- then it is cleared."""
    lateness = 20 if domain == "event" else 0
    trigger = ContractTrigger(domain=domain, timer=None, time_result=FIRE)
    harness = await _contract_harness(domain, False, trigger, TW(0, 20), lateness=lateness)
    await harness.op.process_batch([(0, 0)], [0] if domain == "event" else None)
    assert (_num_timers(harness, domain), _num_other_timers(harness, domain)) == (1, 0)
    await _advance_operator(harness, domain, 19 + lateness)
    assert trigger.timer_calls == [(19 + lateness, TW(0, 20))]
    assert harness.function_calls == [[(0, 0)]]
    assert trigger.clears == [TW(0, 20)]
    assert (_num_timers(harness, domain), _num_other_timers(harness, domain)) == (0, 0)
    await harness.op.close()


@pytest.mark.parametrize("domain", ["event", "processing"])
async def test_trigger_timer_and_garbage_collection_timer_coincide(domain: str) -> None:
    """WindowOperatorContractTest.test{EventTime,ProcessingTime}TriggerTimerAndGarbageCollectionTimerCoincide:
    the trigger's timer at the window's max timestamp and the GC timer are one timer; the
    trigger is called once and cleared once."""
    trigger = ContractTrigger(domain=domain, timer=19)
    harness = await _contract_harness(domain, False, trigger, TW(0, 20))
    await harness.op.process_batch([(0, 0)], [0] if domain == "event" else None)
    assert (_num_timers(harness, domain), _num_other_timers(harness, domain)) == (1, 0)
    await _advance_operator(harness, domain, 19)
    assert len(trigger.timer_calls) == 1
    assert trigger.clears == [TW(0, 20)]
    assert (_num_timers(harness, domain), _num_other_timers(harness, domain)) == (0, 0)
    await harness.op.close()


@pytest.mark.parametrize("domain", ["element", "event", "processing"])
async def test_purge_does_not_cleanup_merging_set(domain: str) -> None:
    """WindowOperatorContractTest.testOn{Element,EventTime,ProcessingTime}PurgeDoesNotCleanupMergingSet:
    PURGE drops the contents, not the window from the merging set, nor its GC timer."""
    time_domain = "event" if domain == "element" else domain
    if domain == "element":
        trigger = ContractTrigger(domain=time_domain, timer=None, result=PURGE, merging=True)
    else:
        trigger = ContractTrigger(domain=time_domain, timer=1, time_result=PURGE, merging=True)
    harness = await _contract_harness(time_domain, True, trigger, TW(0, 4))
    await harness.op.process_batch([(0, 0)], [0] if time_domain == "event" else None)
    if domain != "element":
        assert _num_timers(harness, time_domain) == 2  # a cleanup timer and the trigger's
        await _advance_operator(harness, time_domain, 1)
    assert TW(0, 4) in harness.op.merging_sets[0]
    assert not harness.op.contents.get(0)
    assert _num_timers(harness, time_domain) == 1  # the cleanup timer
    assert harness.function_calls == []
    await harness.op.close()


HELLO = TriggerStateDescriptor("hello", lambda old, new: new)


@dataclass(eq=False)
class StatefulTrigger(ContractTrigger):
    """WindowOperatorContractTest's trigger for the GC cases: on an element it registers a timer
    far in the future (1000) and keeps some state; ``clear`` deletes both."""

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        register = (
            ctx.register_event_time_timer if self.domain == "event" else ctx.register_processing_time_timer
        )
        register(1000)
        ctx.get_partitioned_state(HELLO).add("hello")
        return self.result

    def clear(self, window: Any, ctx: Any) -> None:
        self.clears.append(window)
        (ctx.delete_event_time_timer if self.domain == "event" else ctx.delete_processing_time_timer)(1000)
        ctx.get_partitioned_state(HELLO).clear()


def _state_of(harness: Any) -> tuple[bool, bool, bool]:
    """(window contents, trigger state, merging window set) held for key 0."""
    op = harness.op
    return bool(op.contents.get(0)), bool(op.trigger_state.get(0)), bool(op.merging_sets.get(0))


@pytest.mark.parametrize(
    ("result", "merging", "before"),
    [
        (CONTINUE, False, (True, True, False)),
        (PURGE, False, (False, True, False)),
        (PURGE, True, (False, True, True)),
    ],
    ids=["", "WithPurgingTrigger", "WithPurgingTriggerAndMergingWindows"],
)
@pytest.mark.parametrize("domain", ["event", "processing"])
async def test_state_and_timer_cleanup_at_garbage_collection(
    domain: str, result: TriggerResult, merging: bool, before: tuple[bool, bool, bool]
) -> None:
    """WindowOperatorContractTest.testStateAndTimerCleanupAt{EventTime,ProcessingTime}GarbageCollection
    (and ...WithPurgingTrigger, ...WithPurgingTriggerAndMergingWindows): at the GC time (max
    timestamp + allowed lateness 20; processing time: the max timestamp) the trigger is cleared
    once and no state or timer of the window is left, purged or not."""
    trigger = StatefulTrigger(domain=domain, result=result, merging=merging)
    harness = await _contract_harness(domain, merging, trigger, TW(0, 20), lateness=20)
    await harness.op.process_batch([(0, 0)], [0] if domain == "event" else None)
    assert trigger.clears == []
    assert _state_of(harness) == before
    assert (_num_timers(harness, domain), _num_other_timers(harness, domain)) == (2, 0)
    await _advance_operator(harness, domain, 19 + 20)
    assert trigger.clears == [TW(0, 20)]
    assert _state_of(harness) == (False, False, False)
    assert (_num_timers(harness, domain), _num_other_timers(harness, domain)) == (0, 0)
    await harness.op.close()


@pytest.mark.parametrize("domain", ["event", "processing"])
async def test_merging_window_set_cleared_at_garbage_collection(domain: str) -> None:
    """WindowOperatorContractTest.testMergingWindowSetClearedAt{EventTime,ProcessingTime}GarbageCollection."""
    harness = await _contract_harness(
        domain, True, ContractTrigger(domain=domain, timer=None, merging=True), TW(0, 20), 20
    )
    await harness.op.process_batch([(0, 0)], [0] if domain == "event" else None)
    assert _state_of(harness) == (True, False, True)
    assert _num_timers(harness, domain) == 1  # the GC timer
    await _advance_operator(harness, domain, 19 + 20)
    assert _state_of(harness) == (False, False, False)
    assert _num_timers(harness, domain) == 0
    await harness.op.close()


@pytest.mark.parametrize(
    ("watermark", "fired"), [(20, True), (21, False)], ids=["WithinAllowedLateness", "LateWindowDropping"]
)
async def test_allowed_lateness_limit(watermark: int, fired: bool) -> None:
    """WindowOperatorContractTest.testProcessingElementsWithinAllowedLateness / testLateWindowDropping:
    window [0, 2) (max timestamp 1), allowed lateness 20, a trigger that FIREs on elements: at
    watermark 20 the element is processed and fires (contents and GC timer stay); at 21 the
    window is late: nothing is kept, no timer, no output."""
    trigger = ContractTrigger(timer=None, result=FIRE)
    harness = await _contract_harness("event", False, trigger, TW(0, 2), lateness=20)
    await _advance_operator(harness, "event", watermark)
    await harness.op.process_batch([(0, 0)], [0])
    assert harness.function_calls == ([[(0, 0)]] if fired else [])
    assert trigger.clears == []
    assert _state_of(harness) == (fired, False, False)
    assert (_num_timers(harness, "event"), _num_timers(harness, "processing")) == (int(fired), 0)
    await harness.op.close()


@pytest.mark.parametrize(
    ("watermark", "windows", "late"),
    [(0, None, False), (20, [TW(0, 0)], True), (20, None, True)],
    ids=["no windows, not late: not side output", "late window", "no windows, late"],
)
async def test_late_side_output(watermark: int, windows: list | None, late: bool) -> None:
    """WindowOperatorContractTest.testLateSideOutput (and the case before it, an element that
    no window takes at watermark 0): an element is late-side-output when no window took it
    and its timestamp + allowed lateness is at or before the watermark -- also when the
    assigner gave it no window at all."""
    trigger = ContractTrigger(timer=None)
    harness = await _contract_harness("event", False, trigger, TW(0, 0))
    if windows is None:
        object.__setattr__(harness.op.assigner, "assign_windows", lambda element, ts, ctx=None: [])
    await _advance_operator(harness, "event", watermark)
    await harness.op.process_batch([(0, 5)], [5])
    assert harness.late.events == ([("late", (0, 5), 5)] if late else [])
    await harness.op.close()


async def test_assigner_with_multiple_windows() -> None:
    """WindowOperatorContractTest.testAssignerWithMultipleWindows / testOnElementCalledPerWindow:
    an element assigned to two windows is added to both, the trigger is called per window, and
    a FIRE runs the function once per window."""
    trigger = ContractTrigger(timer=None, result=FIRE)
    harness = await _contract_harness("event", False, trigger, TW(2, 4))
    object.__setattr__(
        harness.op.assigner, "assign_windows", lambda element, ts, ctx=None: [TW(2, 4), TW(0, 2)]
    )
    await harness.op.process_batch([(0, 42)], [1])
    assert harness.function_calls == [[(0, 42)], [(0, 42)]]
    assert [(r, t) for r, t in harness.main.events if r != "wm"] == []  # the function emits nothing
    await harness.op.close()


@dataclass(eq=False)
class MergeStateTrigger(StatefulTrigger):
    """testMergingOfExistingWindows' trigger: a timer at 0 and some state, on elements and on
    merges; ``clear`` deletes both."""

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        self._set(ctx)
        return CONTINUE

    def on_merge(self, window: Any, ctx: Any) -> None:
        self._set(ctx)

    def _set(self, ctx: Any) -> None:
        (ctx.register_event_time_timer if self.domain == "event" else ctx.register_processing_time_timer)(0)
        ctx.get_partitioned_state(HELLO).add("hello")

    def clear(self, window: Any, ctx: Any) -> None:
        self.clears.append(window)
        (ctx.delete_event_time_timer if self.domain == "event" else ctx.delete_processing_time_timer)(0)
        ctx.get_partitioned_state(HELLO).clear()


def _entries(harness: Any) -> int:
    """Flink's numKeyedStateEntries for key 0: window contents, trigger states, merging set."""
    op = harness.op
    return (
        len(op.contents.get(0) or {}) + len(op.trigger_state.get(0) or {}) + int(bool(op.merging_sets.get(0)))
    )


@pytest.mark.parametrize("domain", ["event", "processing"])
async def test_merging_of_existing_windows(domain: str) -> None:
    """WindowOperatorContractTest.testMergingOf{Existing,}{EventTime,ProcessingTime}Windows: an
    assigner that merges only when asked to (not [0, 2) with [2, 4) by itself); the window [1, 3)
    merges all three into [0, 4): one state window stays, the merged windows' trigger state and
    GC timers are gone."""
    trigger = MergeStateTrigger(domain=domain, merging=True)
    harness = await _contract_harness(domain, True, trigger, TW(0, 2))
    assigner = harness.op.assigner

    def merge_windows(windows: Any, callback: Any) -> None:
        windows = list(windows)
        if TW(1, 3) in windows:
            callback(windows, TW(0, 4))

    object.__setattr__(assigner, "merge_windows", merge_windows)
    ts = [0] if domain == "event" else None
    await harness.op.process_batch([(0, 0)], ts)
    assert (_entries(harness), _num_timers(harness, domain)) == (3, 2)  # + the trigger's timer and GC
    object.__setattr__(assigner, "window", TW(2, 4))
    await harness.op.process_batch([(0, 0)], ts)
    assert (_entries(harness), _num_timers(harness, domain)) == (5, 4)
    object.__setattr__(assigner, "window", TW(1, 3))
    await harness.op.process_batch([(0, 0)], ts)
    assert (_entries(harness), _num_timers(harness, domain)) == (3, 2)
    assert list(harness.op.merging_sets[0]) == [TW(0, 4)]
    assert harness.function_calls == []
    await harness.op.close()


@pytest.mark.timeout(60)
def test_continuous_processing_time_trigger_on_event_time_windows_through_the_datastream_api() -> None:
    """ContinuousProcessingTimeTriggerTest.testEventTimeWindowFiring's situation in a plain job:
    event-time windows far in the processing-time past with ContinuousProcessingTimeTrigger.
    The first fire is capped at the window's max timestamp and due at once; it fires, and
    schedules nothing more (FLINK-35069). The job used to never finish: the capped next fire
    was the same past time, due again, forever. (How many partial results come, and when,
    depends on when the timer runs relative to the input, as in Flink; the pane is never
    purged, so they only grow.)"""
    import streamflow as sf
    from streamflow.common import WatermarkStrategy
    from streamflow.windowing import TumblingEventTimeWindows

    env = sf.StreamExecutionEnvironment()
    data = [("a", i, i) for i in range(1, 8)]
    stream = env.from_collection(data).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, t: e[2])
    )
    sums = (
        stream.key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(10))
        .trigger(ContinuousProcessingTimeTrigger.of(5))
        .reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
    )
    sums_seen = [r[1] for r in sums.execute_and_collect()]
    assert sums_seen and sums_seen == sorted(sums_seen) and sums_seen[-1] <= 28
    assert len(sums_seen) <= len(data)


async def test_end_of_stream_trigger() -> None:
    """WindowOperatorTest.testEndOfStreamTrigger: GlobalWindows.create_with_end_of_stream_trigger()
    (Flink's createWithEndOfStreamTrigger) emits nothing until the maximum watermark, then each
    key's sum once."""
    from window_harness import FUNCTIONS, WindowHarness, run_script

    from streamflow.windowing import GlobalWindows

    assigner = GlobalWindows.create_with_end_of_stream_trigger()
    harness = WindowHarness(assigner, FUNCTIONS["reduce"], trigger=assigner.get_default_trigger())
    elements = [("key2", 3000), ("key2", 3999), ("key1", 20), ("key1", 0), ("key1", 999)]
    elements += [("key2", 1998), ("key2", 1999), ("key2", 1000)]
    out = await run_script(harness, [*[("e", key, 1, ts) for key, ts in elements], ("w", MAX_WATERMARK)])
    assert [event for step in out[:-1] for event in step] == []
    assert out[-1] == [(("key1", 3), MAX_WATERMARK), (("key2", 5), MAX_WATERMARK), ("wm", MAX_WATERMARK)]


def test_end_of_stream_trigger_through_the_datastream_api() -> None:
    """``window(GlobalWindows.create_with_end_of_stream_trigger())`` on a bounded stream: one
    result per key at the end of input (the plain ``GlobalWindows.create()`` emits nothing)."""
    import streamflow as sf
    from streamflow.windowing import EndOfStreamTrigger, GlobalWindows, NeverTrigger

    assert isinstance(
        GlobalWindows.create_with_end_of_stream_trigger().get_default_trigger(), EndOfStreamTrigger
    )
    assert isinstance(GlobalWindows.create().get_default_trigger(), NeverTrigger)
    assert repr(GlobalWindows.create()) == "GlobalWindows()"
    for assigner, expected in [
        (GlobalWindows.create_with_end_of_stream_trigger(), [("a", 6), ("b", 9)]),
        (GlobalWindows.create(), []),
    ]:
        env = sf.StreamExecutionEnvironment()
        data = [("a", 1), ("b", 4), ("a", 2), ("b", 5), ("a", 3)]
        sums = (
            env.from_collection(data)
            .key_by(lambda e: e[0])
            .window(assigner)
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
        )
        assert sorted(sums.execute_and_collect()) == expected


# ==================================================== session lateness (WindowOperatorTest)

_SESSION_PREFIX = [
    (("e", "key2", 1, 1000), []),
    (("w", 1999), [("wm", 1999)]),
    (("e", "key2", 1, 2000), []),
    (("w", 4998), [("wm", 4998)]),
    (("e", "key2", 1, 4500), []),  # not late: its session ends after the watermark
    (("e", "key2", 1, 8500), []),  # a new session
    (("w", 7400), [("wm", 7400)]),
    (("e", "key2", 1, 7000), []),  # merges the two sessions
    (("w", 11501), [(("key2-5", 1000, 11500), 11499), ("wm", 11501)]),
    (("e", "key2", 1, 11600), []),  # a new session
    (("w", 14600), [(("key2-1", 11600, 14600), 14599), ("wm", 14600)]),
]
_LATE_10000 = [(("e", "key2", 1, 10000), [("late", ("key2", 1), 10000)])]
_ZERO_LATENESS_TAIL = [
    *_LATE_10000,
    (("e", "key2", 1, 14500), []),
    (("w", 20000), [(("key2-1", 14500, 17500), 17499), ("wm", 20000)]),
    (("w", 100000), [("wm", 100000)]),
]
SESSION_LATENESS: dict[str, tuple[int, bool, list]] = {
    "testSideOutputDueToLatenessSessionZeroLatenessPurgingTrigger": (0, True, _ZERO_LATENESS_TAIL),
    "testSideOutputDueToLatenessSessionZeroLateness": (0, False, _ZERO_LATENESS_TAIL),
    "testDropDueToLatenessSessionWithLatenessPurgingTrigger": (
        10,
        True,
        [
            (("e", "key2", 1, 10000), [(("key2-1", 10000, 14600), 14599)]),
            (("e", "key2", 1, 14500), []),
            (("w", 20000), [(("key2-1", 10000, 17500), 17499), ("wm", 20000)]),
        ],
    ),
    "testNotSideOutputDueToLatenessSessionWithLateness": (
        10,
        False,
        [
            (("e", "key2", 1, 10000), [(("key2-2", 10000, 14600), 14599)]),  # merged into a late session
            (("e", "key2", 1, 14500), []),
            (("w", 20000), [(("key2-3", 10000, 17500), 17499), ("wm", 20000)]),
        ],
    ),
    "testNotSideOutputDueToLatenessSessionWithHugeLatenessPurgingTrigger": (
        10000,
        True,
        [
            (("e", "key2", 1, 10000), [(("key2-1", 1000, 14600), 14599)]),
            (("e", "key2", 1, 14500), []),
            (("w", 20000), [(("key2-1", 1000, 17500), 17499), ("wm", 20000)]),
        ],
    ),
    "testNotSideOutputDueToLatenessSessionWithHugeLateness": (
        10000,
        False,
        [
            (("e", "key2", 1, 10000), [(("key2-7", 1000, 14600), 14599)]),
            (("e", "key2", 1, 14500), []),
            (("w", 20000), [(("key2-8", 1000, 17500), 17499), ("wm", 20000)]),
        ],
    ),
}


@pytest.mark.parametrize("name", list(SESSION_LATENESS))
async def test_session_windows_and_lateness(name: str) -> None:
    """WindowOperatorTest's session lateness cases (gap 3 s, a sum as ``key-sum``, late data to a
    side output): with allowed lateness 0 a late element is side output; with 10 it merges into
    the session still kept and fires at once (the merged window is already past the watermark);
    with 10000 the sessions reach back to the first one. Purging or accumulating as Flink."""
    from window_harness import WindowHarness, run_script

    from streamflow.runtime.window_context import WindowFunctions
    from streamflow.windowing import EventTimeSessionWindows

    lateness, purging, tail = SESSION_LATENESS[name]
    trigger = PurgingTrigger.of(EventTimeTrigger.create()) if purging else EventTimeTrigger.create()
    harness = WindowHarness(
        EventTimeSessionWindows.with_gap(3000),
        lambda: WindowFunctions(process=_session_function),
        lateness=lateness,
        trigger=trigger,
    )
    table = [*_SESSION_PREFIX, *tail]
    outputs = await run_script(harness, [step for step, _ in table])
    for (step, expected), got in zip(table, outputs, strict=True):
        assert got == expected, step


async def test_cleanup_timer_with_empty_state_no_result_for_tumbling_windows() -> None:
    """WindowOperatorTest.testCleanupTimerWithEmptyStateNoResultForTumblingWindows: a trigger that
    FIREs on every element and timer, a function that emits nothing, allowed lateness 1: the
    pane keeps its element through the firings and is dropped at the cleanup time (2000)."""
    trigger = ContractTrigger(timer=1999, result=FIRE, time_result=FIRE)
    harness = await _contract_harness("event", False, trigger, TW(0, 2000), lateness=1)
    await harness.op.process_batch([("test_key", 1)], [1000])
    for watermark, kept in [
        (1599, True),
        (1699, True),
        (1799, True),
        (1999, True),
        (2000, False),
        (5000, False),
    ]:
        await _advance_operator(harness, "event", watermark)
        assert bool(harness.op.contents.get("test_key")) is kept, watermark
    assert [e for e in harness.main.events if e[0] != "wm"] == []
    await harness.op.close()


async def test_cleanup_timer_with_empty_reduce_state_for_session_windows() -> None:
    """WindowOperatorTest.testCleanupTimerWithEmpty{Reduce,List}StateForSessionWindows: a
    session fires at its end and is cleaned up at end + allowed lateness (10) without a
    second result."""
    from window_harness import WindowHarness, run_script

    from streamflow.runtime.window_context import WindowFunctions
    from streamflow.windowing import EventTimeSessionWindows

    harness = WindowHarness(
        EventTimeSessionWindows.with_gap(3000),
        lambda: WindowFunctions(process=_session_function),
        lateness=10,
    )
    out = await run_script(harness, [("e", "key2", 1, 1000), ("w", 4998), ("w", 14600)])
    assert out == [[], [(("key2-1", 1000, 4000), 3999), ("wm", 4998)], [("wm", 14600)]]
    assert not harness.op.contents and not harness.op.merging_sets


@dataclass(eq=False)
class OnElementTrigger(ContractTrigger):
    """testOnElement*'s trigger: registers a timer at the window's end (at 0 for PURGE), keeps
    some state, answers ``result``."""

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        ctx.register_event_time_timer(0 if self.result is PURGE else window.end)
        ctx.get_partitioned_state(HELLO).add("hello")
        return self.result


@pytest.mark.parametrize(
    ("result", "calls", "entries"),
    [(CONTINUE, 0, 4), (FIRE, 2, 4), (FIRE_AND_PURGE, 2, 2), (PURGE, 0, 2)],
    ids=["testOnElementContinue", "testOnElementFire", "testOnElementFireAndPurge", "testOnElementPurge"],
)
async def test_on_element_results(result: TriggerResult, calls: int, entries: int) -> None:
    """WindowOperatorContractTest.testOnElement{Continue,Fire,FireAndPurge,Purge}: an element in
    two windows; FIRE runs the function once per window; purging drops the contents but not
    the trigger state; all timers (the trigger's and the GC timers) stay; clear is not called."""
    trigger = OnElementTrigger(result=result)
    harness = await _contract_harness("event", False, trigger, TW(2, 4))
    object.__setattr__(
        harness.op.assigner, "assign_windows", lambda element, ts, ctx=None: [TW(2, 4), TW(0, 2)]
    )
    await harness.op.process_batch([(0, 0)], [0])
    assert len(harness.function_calls) == calls
    assert trigger.clears == []
    assert _entries(harness) == entries  # window contents and trigger state of two windows
    assert _num_timers(harness, "event") == 4
    await harness.op.close()


@pytest.mark.parametrize(
    ("result", "calls", "entries"),
    [(CONTINUE, 0, 4), (FIRE, 2, 4), (FIRE_AND_PURGE, 2, 2), (PURGE, 0, 2)],
    ids=["Continue", "Fire", "FireAndPurge", "Purge"],
)
@pytest.mark.parametrize("domain", ["event", "processing"])
async def test_on_time_results(domain: str, result: TriggerResult, calls: int, entries: int) -> None:
    """WindowOperatorContractTest.testOn{EventTime,ProcessingTime}{Continue,Fire,FireAndPurge,Purge}:
    an element in two windows, each with a trigger timer at 0 and some trigger state; when the
    timers fire the trigger's answer applies per window; the GC timers and the trigger state
    stay, clear is not called."""
    trigger = StatefulTrigger(domain=domain, time_result=result)
    object.__setattr__(trigger, "on_element", _register_at_zero(trigger))
    harness = await _contract_harness(domain, False, trigger, TW(2, 4))
    object.__setattr__(
        harness.op.assigner, "assign_windows", lambda element, ts, ctx=None: [TW(2, 4), TW(0, 2)]
    )
    await harness.op.process_batch([(0, 0)], [0] if domain == "event" else None)
    assert (_entries(harness), _num_timers(harness, domain)) == (4, 4)
    await _advance_operator(harness, domain, 0)
    assert len(harness.function_calls) == calls
    assert trigger.clears == []
    assert (_entries(harness), _num_timers(harness, domain)) == (entries, 2)  # only the GC timers
    await harness.op.close()


def _register_at_zero(trigger: ContractTrigger) -> Any:
    def on_element(element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        (ctx.register_event_time_timer if trigger.domain == "event" else ctx.register_processing_time_timer)(
            0
        )
        ctx.get_partitioned_state(HELLO).add("hello")
        return CONTINUE

    return on_element
