"""Tests of streamflow.eventtime: generators, idleness, strategies, assigners, the emitter.

Scripts are tables: each step feeds one input and lists exactly what must come out.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
from datetime import timedelta
from typing import Any

import pytest
from stable_ids import stable_repr  # tests/stable_ids.py

from streamflow import eventtime
from streamflow.eventtime import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    IdlenessTimer,
    NoWatermarksGenerator,
    TimestampAssigner,
    WatermarkGenerator,
    WatermarkStrategy,
    WatermarksWithIdleness,
    monotonic_ms,
    to_millis,
)
from streamflow.runtime.events import MAX_WATERMARK, MIN_WATERMARK, Watermark, WatermarkStatus
from streamflow.runtime.watermark_emitter import WatermarkEmitter
from streamflow.testing import ManualClock

W = Watermark
ACTIVE = WatermarkStatus.ACTIVE
IDLE = WatermarkStatus.IDLE
MIN = MIN_WATERMARK
MAX = MAX_WATERMARK


class Recorder:
    """A WatermarkOutput that records every call, with no deduplication."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def emit_watermark(self, watermark: Watermark) -> None:
        self.calls.append(watermark)

    def mark_idle(self) -> None:
        self.calls.append(IDLE)

    def mark_active(self) -> None:
        self.calls.append(ACTIVE)

    def pop(self) -> list[Any]:
        out, self.calls = self.calls, []
        return out


class Scripted(WatermarkGenerator):
    """A punctuated generator driven by its events: ("wm", t), ("idle",) or ("active",)."""

    def __init__(self) -> None:
        self.periodic_calls = 0

    def on_event(self, event: Any, event_timestamp: int, output: Any) -> None:
        if event[0] == "wm":
            output.emit_watermark(W(event[1]))
        elif event[0] == "idle":
            output.mark_idle()
        else:
            output.mark_active()

    def on_periodic_emit(self, output: Any) -> None:
        self.periodic_calls += 1


# -- generators ---------------------------------------------------------------------------

# steps: ("event", ts) | ("batch", [ts, ...]) | ("periodic",) | ("advance", ms), expected calls
GENERATOR_SCRIPTS: dict[str, tuple[Any, list[tuple[Any, ...]]]] = {
    "bounded_before_any_event_is_min": (
        lambda clock: BoundedOutOfOrdernessWatermarks(10),
        [(("periodic",), [W(MIN)])],
    ),
    "bounded_max_minus_bound_minus_one": (
        lambda clock: BoundedOutOfOrdernessWatermarks(10),
        [
            (("event", 100), []),
            (("periodic",), [W(89)]),
            (("event", 95), []),  # late by less than the bound: max stays 100
            (("periodic",), [W(89)]),
            (("batch", [120, 101, 99]), []),
            (("periodic",), [W(109)]),
            (("batch", []), []),
            (("periodic",), [W(109)]),
            (("batch", [110]), []),
            (("periodic",), [W(109)]),
        ],
    ),
    "bounded_timedelta_bound": (
        lambda clock: BoundedOutOfOrdernessWatermarks(timedelta(seconds=1)),
        [(("event", 5000), []), (("periodic",), [W(3999)])],
    ),
    "bounded_zero_bound_at_min_timestamp": (
        lambda clock: BoundedOutOfOrdernessWatermarks(0),
        [(("event", MIN), []), (("periodic",), [W(MIN)]), (("event", MAX), [])],
    ),
    "bounded_huge_bound_does_not_overflow": (
        lambda clock: BoundedOutOfOrdernessWatermarks(MAX),
        [(("periodic",), [W(MIN)]), (("event", 0), []), (("periodic",), [W(MIN)])],
    ),
    "ascending_trails_by_one": (
        lambda clock: AscendingTimestampsWatermarks(),
        [
            (("periodic",), [W(MIN)]),
            (("event", 5), []),
            (("periodic",), [W(4)]),
            (("event", 3), []),
            (("periodic",), [W(4)]),
            (("batch", [6, 9, 7]), []),
            (("periodic",), [W(8)]),
        ],
    ),
    "no_watermarks": (
        lambda clock: NoWatermarksGenerator(),
        [(("event", 5), []), (("batch", [1, 2]), []), (("periodic",), [])],
    ),
    "idleness_flink_timing": (
        lambda clock: WatermarksWithIdleness(AscendingTimestampsWatermarks(), 1000, clock),
        [
            (("event", 10), []),
            (("periodic",), [W(9)]),  # activity since the last check: reset, delegate
            (("advance", 200), []),
            (("periodic",), [W(9)]),  # first check without activity: countdown from 200
            (("advance", 1000), []),
            (("periodic",), [W(9)]),  # 1200 - 200 = 1000: not strictly more
            (("advance", 1), []),
            (("periodic",), [IDLE]),
            (("advance", 200), []),
            (("periodic",), []),  # already idle: nothing, and no delegation
            (("event", 20), []),  # resets the timer only (Flink: the output turns ACTIVE
            # when it emits the next higher watermark, WatermarkToDataOutput)
            (("periodic",), [W(19)]),
            (("event", 21), []),
        ],
    ),
    "idleness_never_when_records_keep_coming": (
        lambda clock: WatermarksWithIdleness(AscendingTimestampsWatermarks(), 300, clock),
        [
            step
            for t in range(1, 11)
            for step in ((("advance", 250), []), (("batch", [t]), []), (("periodic",), [W(t - 1)]))
        ],
    ),
    "idleness_empty_batch_is_no_activity": (
        lambda clock: WatermarksWithIdleness(AscendingTimestampsWatermarks(), 100, clock),
        [
            (("periodic",), [W(MIN)]),  # starts the countdown at 0
            (("advance", 101), []),
            (("batch", []), []),
            (("periodic",), [IDLE]),
            (("batch", []), []),
            (("batch", [7, 8]), []),  # Flink: activity only; the next watermark re-activates
            (("periodic",), [W(7)]),
        ],
    ),
    "idleness_idle_from_the_start": (
        lambda clock: WatermarksWithIdleness(NoWatermarksGenerator(), timedelta(seconds=1), clock),
        [
            (("periodic",), []),
            (("advance", 1001), []),
            (("periodic",), [IDLE]),
            (("periodic",), []),
        ],
    ),
}


def _run_generator(generator: WatermarkGenerator, clock: ManualClock, script: list[Any]) -> None:
    out = Recorder()
    for number, (step, expected) in enumerate(script):
        if step[0] == "event":
            generator.on_event(("event", step[1]), step[1], out)
        elif step[0] == "batch":
            generator.on_batch([("event", t) for t in step[1]], step[1], out)
        elif step[0] == "periodic":
            generator.on_periodic_emit(out)
        else:
            clock.advance(step[1])
        assert out.pop() == expected, f"step {number}: {step}"


@pytest.mark.parametrize(
    ("factory", "script"), GENERATOR_SCRIPTS.values(), ids=GENERATOR_SCRIPTS.keys()
)
def test_generator_script(factory: Any, script: list[Any]) -> None:
    clock = ManualClock()
    _run_generator(factory(clock), clock, script)


@pytest.mark.parametrize(
    "timestamps", [[5], [3, 1, 2], [7, 7, 7], [MIN, 0, MAX], list(range(100, 0, -3))]
)
@pytest.mark.parametrize("bound", [0, 1, 250])
def test_bounded_batch_equals_per_event(timestamps: list[int], bound: int) -> None:
    by_event = BoundedOutOfOrdernessWatermarks(bound)
    by_batch = BoundedOutOfOrdernessWatermarks(bound)
    out = Recorder()
    for t in timestamps:
        by_event.on_event(None, t, out)
    by_batch.on_batch([None] * len(timestamps), timestamps, out)
    by_event.on_periodic_emit(out)
    by_batch.on_periodic_emit(out)
    first, second = out.pop()
    assert first == second == W(max(timestamps) - bound - 1)


def test_default_on_batch_calls_on_event_in_order() -> None:
    out = Recorder()
    Scripted().on_batch([("wm", 3), ("idle",), ("wm", 1), ("active",)], [0, 0, 0, 0], out)
    assert out.pop() == [W(3), IDLE, W(1), ACTIVE]
    with pytest.raises(ValueError):
        Scripted().on_batch([("wm", 3)], [], out)


def test_base_generator_is_a_no_op() -> None:
    out = Recorder()
    generator = WatermarkGenerator()
    generator.on_batch(["a", "b"], [1, 2], out)
    generator.on_periodic_emit(out)
    assert out.pop() == []


# -- the idleness timer -------------------------------------------------------------------

# steps: ("activity",) -> None, ("advance", ms) -> None, ("check",) -> expected bool
TIMER_SCRIPTS: dict[str, list[tuple[tuple[Any, ...], bool | None]]] = {
    "countdown_starts_at_first_quiet_check": [
        (("advance", 5000), None),  # nothing checked yet: no countdown
        (("check",), False),  # starts the countdown at 5000
        (("advance", 401), None),
        (("check",), True),
    ],
    "activity_resets": [
        (("check",), False),
        (("advance", 600), None),
        (("activity",), None),
        (("check",), False),  # activity: reset
        (("advance", 600), None),
        (("check",), False),  # countdown starts now (at 1200)
        (("advance", 400), None),
        (("check",), False),
        (("advance", 1), None),
        (("check",), True),  # 1601 - 1200 > 400
        (("activity",), None),
        (("check",), False),
    ],
    "exactly_the_timeout_is_not_idle": [
        (("check",), False),
        (("check",), False),
        (("advance", 400), None),
        (("check",), False),
        (("advance", 1), None),
        (("check",), True),
        (("check",), True),
    ],
}


@pytest.mark.parametrize("script", TIMER_SCRIPTS.values(), ids=TIMER_SCRIPTS.keys())
def test_idleness_timer(script: list[Any]) -> None:
    clock = ManualClock(start_ms=0)  # the manual clock reads 0: a valid countdown start
    timer = IdlenessTimer(clock, 400)
    for number, (step, expected) in enumerate(script):
        if step[0] == "activity":
            timer.activity()
        elif step[0] == "advance":
            clock.advance(step[1])
        else:
            assert timer.check_if_idle() is expected, f"step {number}"


@pytest.mark.parametrize("timeout", [0, -5, timedelta(0), timedelta(microseconds=999)])
def test_idle_timeout_must_be_positive(timeout: Any) -> None:
    with pytest.raises(ValueError):
        IdlenessTimer(ManualClock(), timeout)
    with pytest.raises(ValueError):
        WatermarkStrategy.for_monotonous_timestamps().with_idleness(timeout)


def test_monotonic_ms_reads_the_manual_clock() -> None:
    clock = ManualClock(1_700_000_000_123)
    assert monotonic_ms(clock) == 1_700_000_000_123
    clock.advance(7)
    assert monotonic_ms(clock) == 1_700_000_000_130


# -- durations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("duration", "ms"),
    [
        (0, 0),
        (5, 5),
        (timedelta(seconds=1), 1000),
        (timedelta(minutes=1, milliseconds=5), 60_005),
        (timedelta(microseconds=1500), 1),
        (timedelta(microseconds=999), 0),
    ],
)
def test_to_millis(duration: Any, ms: int) -> None:
    assert to_millis(duration) == ms


@pytest.mark.parametrize("duration", ["5", 1.5, True, None])
def test_to_millis_rejects_other_types(duration: Any) -> None:
    with pytest.raises(TypeError):
        to_millis(duration)


def test_to_millis_minimum() -> None:
    assert to_millis(3, "x", minimum=3) == 3
    with pytest.raises(ValueError, match="x must be at least 4"):
        to_millis(3, "x", minimum=4)


# -- strategies ---------------------------------------------------------------------------

# (strategy, expected generator type, expected idle timeout ms, batch, periodic output)
# fmt: off
STRATEGIES: dict[str, tuple[WatermarkStrategy, type, int | None, list[int], list[Any]]] = {
    "bounded_ms": (
        WatermarkStrategy.for_bounded_out_of_orderness(2000),
        BoundedOutOfOrdernessWatermarks, None, [10_000], [W(7999)],
    ),
    "bounded_timedelta": (
        WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=2)),
        BoundedOutOfOrdernessWatermarks, None, [10_000], [W(7999)],
    ),
    "monotonous": (
        WatermarkStrategy.for_monotonous_timestamps(),
        AscendingTimestampsWatermarks, None, [10_000], [W(9999)],
    ),
    "no_watermarks": (
        WatermarkStrategy.no_watermarks(), NoWatermarksGenerator, None, [10_000], [],
    ),
    "for_generator": (
        WatermarkStrategy.for_generator(AscendingTimestampsWatermarks),
        AscendingTimestampsWatermarks, None, [3], [W(2)],
    ),
    "idleness_ms": (
        WatermarkStrategy.for_monotonous_timestamps().with_idleness(1500),
        WatermarksWithIdleness, 1500, [10_000], [W(9999)],
    ),
    "idleness_timedelta": (
        WatermarkStrategy.for_bounded_out_of_orderness(1).with_idleness(timedelta(seconds=3)),
        WatermarksWithIdleness, 3000, [10_000], [W(9998)],
    ),
}
# fmt: on


@pytest.mark.parametrize(
    ("strategy", "kind", "idle_ms", "batch", "expected"), STRATEGIES.values(), ids=STRATEGIES.keys()
)
def test_strategy(
    strategy: WatermarkStrategy, kind: type, idle_ms: int | None, batch: list[int], expected: Any
) -> None:
    clock = ManualClock()
    generator = strategy.create_watermark_generator(clock)
    assert type(generator) is kind
    assert strategy.idle_timeout_ms == idle_ms
    assert strategy.create_timestamp_assigner() is None
    assert strategy.create_watermark_generator(clock) is not generator  # fresh per call
    out = Recorder()
    generator.on_batch(batch, batch, out)
    generator.on_periodic_emit(out)
    assert out.pop() == expected


def test_strategy_is_immutable() -> None:
    base = WatermarkStrategy.for_monotonous_timestamps()
    idle = base.with_idleness(100)
    assigned = idle.with_timestamp_assigner(lambda v: v)
    assert base.idle_timeout_ms is None and base.create_timestamp_assigner() is None
    assert idle.idle_timeout_ms == 100 and idle.create_timestamp_assigner() is None
    assert assigned.idle_timeout_ms == 100
    assert assigned.create_timestamp_assigner() is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.idle_timeout_ms = 5  # type: ignore[misc]


def test_strategy_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        WatermarkStrategy.for_bounded_out_of_orderness(-1)
    with pytest.raises(ValueError):
        WatermarkStrategy.for_bounded_out_of_orderness(timedelta(milliseconds=-1))
    with pytest.raises(TypeError):
        WatermarkStrategy.for_bounded_out_of_orderness(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        WatermarkStrategy.for_generator(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        WatermarkStrategy.for_generator(lambda: "no").create_watermark_generator(ManualClock())
    with pytest.raises(TypeError):
        WatermarkStrategy.no_watermarks().with_timestamp_assigner(5)  # type: ignore[arg-type]


# -- timestamp assigners ------------------------------------------------------------------


class ByKey(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return value["ts"] + record_timestamp


class CallableOne:
    def __call__(self, value: Any) -> int:
        return value["ts"]


class Holder:
    def both(self, value: Any, record_timestamp: int) -> int:
        return record_timestamp - value["ts"]


def _with_default(value: Any, record_timestamp: int = 0) -> int:
    return record_timestamp


def _value_and_rest(value: Any, *rest: int) -> int:
    return sum(rest)


# value = {"ts": 7}, record_timestamp = 99
ASSIGNERS: dict[str, tuple[Any, int]] = {
    "two_args": (lambda v, ts: ts, 99),
    "one_arg": (lambda v: v["ts"], 7),
    "default_second_arg_gets_it": (_with_default, 99),
    "var_positional": (lambda *args: len(args), 2),
    "value_and_var_positional": (_value_and_rest, 99),
    "itemgetter_without_signature": (operator.itemgetter("ts"), 7),
    "callable_object": (CallableOne(), 7),
    "bound_method": (Holder().both, 92),
    "partial": (functools.partial(lambda a, v, ts: a + ts, 1), 100),
    "timestamp_assigner_subclass": (ByKey(), 106),
}


@pytest.mark.parametrize(("assigner", "expected"), ASSIGNERS.values(), ids=ASSIGNERS.keys())
def test_assigner_arity(assigner: Any, expected: int) -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(assigner)
    made = strategy.create_timestamp_assigner()
    assert isinstance(made, TimestampAssigner)
    assert made.extract_timestamp({"ts": 7}, 99) == expected
    if isinstance(assigner, TimestampAssigner):
        assert made is assigner


def _keyword_only(value: Any, *, key: str) -> int:
    return 0


@pytest.mark.parametrize(
    "assigner", [lambda: 0, lambda a, b, c: 0, _keyword_only, 5, "ts"],
    ids=stable_repr,
)
def test_assigner_bad_arity(assigner: Any) -> None:
    with pytest.raises(TypeError):
        WatermarkStrategy.no_watermarks().with_timestamp_assigner(assigner)


def test_assigner_arity_is_detected_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = inspect.signature

    def counting(fn: Any) -> inspect.Signature:
        calls.append(fn)
        return real(fn)

    monkeypatch.setattr(eventtime.inspect, "signature", counting)
    made = WatermarkStrategy.no_watermarks().with_timestamp_assigner(lambda v: v)
    assigner = made.create_timestamp_assigner()
    assert assigner is not None
    assert [assigner.extract_timestamp(i, 0) for i in range(100)] == list(range(100))
    assert len(calls) == 1


def test_base_assigner_is_abstract() -> None:
    with pytest.raises(NotImplementedError):
        TimestampAssigner().extract_timestamp(1, 2)


# -- the emitter --------------------------------------------------------------------------

# steps: ("batch", events) | ("batch", events, expected cuts) | ("periodic", now_ms, fired)
#        | ("drain", expected) | ("end", expected) | ("advance", ms)
# A cut (i, events) sends the batch's records before index i, then the events: a generator that
# emits from on_event (punctuated) cuts the batch there; one that overrides on_batch never does.


def _scripted(clock: ManualClock) -> tuple[WatermarkGenerator, dict[str, Any]]:
    return Scripted(), {"interval_ms": 0}


EMITTER_SCRIPTS: dict[str, tuple[Any, list[tuple[Any, ...]]]] = {
    "periodic_interval_from_start": (
        lambda clock: (AscendingTimestampsWatermarks(), {"start_ms": 0}),
        [
            ("periodic", 100, False),
            ("periodic", 199, False),
            ("periodic", 200, True),
            ("periodic", 399, False),
            ("periodic", 400, True),
            ("periodic", 650, True),  # late tick: fixed delay, next due at 850
            ("periodic", 849, False),
            ("periodic", 850, True),
            ("drain", []),  # MIN watermarks are never forwarded
        ],
    ),
    "periodic_armed_by_first_call": (
        lambda clock: (AscendingTimestampsWatermarks(), {"interval_ms": timedelta(seconds=1)}),
        [
            ("periodic", 5000, False),
            ("periodic", 5999, False),
            ("periodic", 6000, True),
            ("periodic", 6999, False),
        ],
    ),
    "periodic_disabled_by_zero_interval": (
        lambda clock: (AscendingTimestampsWatermarks(), {"interval_ms": 0, "start_ms": 0}),
        [("batch", [5]), ("periodic", 0, False), ("periodic", 10**9, False), ("drain", [])],
    ),
    "dedup_strictly_increasing": (
        lambda clock: (BoundedOutOfOrdernessWatermarks(0), {"start_ms": 0}),
        [
            ("batch", [100]),
            ("periodic", 200, True),
            ("drain", [W(99)]),
            ("periodic", 400, True),
            ("drain", []),  # the same watermark again: dropped
            ("batch", [50]),
            ("periodic", 600, True),
            ("drain", []),
            ("batch", [101]),
            ("periodic", 800, True),
            ("drain", [W(100)]),
            ("drain", []),
        ],
    ),
    "punctuated_monotonic_and_cut_after_its_record": (
        _scripted,
        [
            ("batch", [("wm", 5), ("wm", 3), ("wm", 7), ("wm", 6)], [(1, [W(5)]), (3, [W(7)])]),
            ("drain", []),
            ("batch", [("wm", 4), ("wm", 7)], []),  # no increase: no cut
            ("drain", []),
            ("batch", [("wm", 8)], [(1, [W(8)])]),
            ("drain", []),
        ],
    ),
    "status_only_on_change": (
        _scripted,
        [
            ("batch", [("active",)], []),  # starts active
            ("batch", [("idle",), ("idle",)], [(1, [IDLE])]),
            ("batch", [("idle",), ("active",), ("active",)], [(2, [ACTIVE])]),
            ("drain", []),
        ],
    ),
    "watermark_while_idle_marks_active_first": (
        _scripted,
        [
            (
                "batch",
                [("wm", 1), ("idle",), ("wm", 5), ("wm", 6)],
                [(1, [W(1)]), (2, [IDLE]), (3, [ACTIVE, W(5)]), (4, [W(6)])],
            ),
            ("batch", [("idle",), ("wm", 6)], [(1, [IDLE])]),  # not an increase: stays idle
            ("batch", [("wm", 9)], [(1, [ACTIVE, W(9)])]),
            ("drain", []),
        ],
    ),
    "end_of_input": (
        _scripted,
        [
            ("batch", [("wm", 5)], [(1, [W(5)])]),
            ("end", [W(MAX)]),
            ("batch", [("idle",), ("active",), ("wm", 9)], []),  # nothing after the end
            ("drain", []),
            ("end", []),
        ],
    ),
    "end_of_input_while_idle": (
        _scripted,
        [
            ("batch", [("wm", 5), ("idle",)], [(1, [W(5)]), (2, [IDLE])]),
            ("drain", []),
            ("end", [ACTIVE, W(MAX)]),
        ],
    ),
    "batch_level_generator_never_cuts": (
        lambda clock: (BoundedOutOfOrdernessWatermarks(0), {"interval_ms": 0}),
        [("batch", [5, 9, 7], []), ("drain", []), ("end", [W(MAX)])],
    ),
    "idleness_wrapper_follows_a_punctuated_generator": (
        lambda clock: (WatermarksWithIdleness(Scripted(), 100, clock), {"interval_ms": 0}),
        [("batch", [("x",), ("wm", 3), ("x",)], [(2, [W(3)])]), ("drain", [])],
    ),
    "idleness_end_to_end": (
        lambda clock: (
            WatermarkStrategy.for_bounded_out_of_orderness(timedelta(milliseconds=10))
            .with_idleness(timedelta(seconds=1))
            .create_watermark_generator(clock),
            {"start_ms": monotonic_ms(clock)},
        ),
        [
            ("batch", [100, 120]),
            ("advance", 200),
            ("periodic", 200, True),
            ("drain", [W(109)]),
            ("advance", 200),
            ("periodic", 400, True),  # countdown starts at 400
            ("drain", []),
            ("advance", 1000),
            ("periodic", 1400, True),  # 1000 ms: not more than the timeout
            ("drain", []),
            ("advance", 200),
            ("periodic", 1600, True),
            ("drain", [IDLE]),
            ("advance", 200),
            ("periodic", 1800, True),
            ("drain", []),
            ("batch", [130]),
            ("drain", []),  # a record alone does not end idleness (Flink's WatermarksWithIdleness)
            ("advance", 200),
            ("periodic", 2000, True),
            ("drain", [ACTIVE, W(119)]),  # WatermarkToDataOutput: ACTIVE, then the higher watermark
            ("end", [W(MAX)]),
        ],
    ),
}


@pytest.mark.parametrize(("setup", "script"), EMITTER_SCRIPTS.values(), ids=EMITTER_SCRIPTS.keys())
def test_emitter_script(setup: Any, script: list[tuple[Any, ...]]) -> None:
    clock = ManualClock()
    generator, options = setup(clock)
    emitter = WatermarkEmitter(generator, **options)
    for number, step in enumerate(script):
        where = f"step {number}: {step}"
        if step[0] == "batch":
            events = step[1]
            timestamps = [e if isinstance(e, int) else 0 for e in events]
            cuts = emitter.on_batch(events, timestamps)
            assert cuts == (step[2] if len(step) > 2 else []), where
        elif step[0] == "periodic":
            assert emitter.on_periodic(step[1]) is step[2], where
        elif step[0] == "drain":
            assert emitter.drain() == step[1], where
        elif step[0] == "end":
            assert emitter.end_of_input() == step[1], where
        else:
            clock.advance(step[1])


def test_emitter_properties() -> None:
    emitter = WatermarkEmitter(Scripted(), interval_ms=100, start_ms=1000)
    assert (emitter.current_watermark, emitter.status, emitter.next_periodic_ms) == (
        MIN,
        ACTIVE,
        1100,
    )
    emitter.on_batch([("wm", 4), ("idle",)], [0, 0])
    assert (emitter.current_watermark, emitter.status) == (4, IDLE)
    assert emitter.on_periodic(1100)
    assert emitter.next_periodic_ms == 1200
    assert WatermarkEmitter(Scripted(), interval_ms=0, start_ms=0).next_periodic_ms is None
    assert WatermarkEmitter(Scripted()).next_periodic_ms is None  # armed by the first call


def test_emitter_drives_periodic_emit_of_its_generator() -> None:
    generator = Scripted()
    emitter = WatermarkEmitter(generator, start_ms=0)
    for now in range(0, 1001, 100):
        emitter.on_periodic(now)
    assert generator.periodic_calls == 5  # at 200, 400, 600, 800 and 1000


def test_emitter_rejects_negative_interval() -> None:
    with pytest.raises(ValueError):
        WatermarkEmitter(Scripted(), interval_ms=-1)
