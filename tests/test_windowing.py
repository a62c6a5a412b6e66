"""Windowing: table-driven tests of windows, assigners, merging, triggers and evictors."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from stable_ids import stable_repr  # tests/stable_ids.py

from streamflow.functions import AggregateFunction
from streamflow.runtime.events import MAX_WATERMARK, MIN_WATERMARK
from streamflow.windowing import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountEvictor,
    CountTrigger,
    DictReducingState,
    EventTimeSessionWindows,
    EventTimeTrigger,
    EvictorContext,
    GlobalWindow,
    GlobalWindows,
    MergingWindowAssigner,
    MergingWindowSet,
    NeverTrigger,
    OnMergeContext,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeEvictor,
    TimeWindow,
    Trigger,
    TriggerContext,
    TriggerResult,
    TriggerStateDescriptor,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
    WindowAssignerContext,
    duration_to_millis,
    merge_reducing_state,
)

TW = TimeWindow
CONTINUE, FIRE, PURGE = TriggerResult.CONTINUE, TriggerResult.FIRE, TriggerResult.PURGE
FIRE_AND_PURGE = TriggerResult.FIRE_AND_PURGE


@dataclass
class FakeClock:
    """A WindowAssignerContext / EvictorContext with settable times."""

    now: int = 0
    watermark: int = MIN_WATERMARK

    def get_current_processing_time(self) -> int:
        return self.now

    def get_current_watermark(self) -> int:
        return self.watermark


# ============================================================================ durations

DURATIONS = [
    (5, 5),
    (0, 0),
    (-8, -8),
    (timedelta(seconds=2), 2000),
    (timedelta(hours=-8), -28_800_000),
    (timedelta(microseconds=3000), 3),
]


@pytest.mark.parametrize(("value", "millis"), DURATIONS)
def test_duration_to_millis(value: Any, millis: int) -> None:
    assert duration_to_millis(value) == millis


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (1.5, TypeError),
        ("5", TypeError),
        (True, TypeError),
        (None, TypeError),
        (timedelta(microseconds=1500), ValueError),
    ],
)
def test_duration_to_millis_rejects(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        duration_to_millis(value)


# ============================================================================ TimeWindow


@pytest.mark.parametrize(
    ("a", "b", "intersects", "cover"),
    [
        (TW(0, 5), TW(3, 8), True, TW(0, 8)),
        (TW(0, 5), TW(5, 8), True, TW(0, 8)),  # touching windows intersect (Flink)
        (TW(0, 5), TW(6, 8), False, TW(0, 8)),
        (TW(0, 10), TW(2, 3), True, TW(0, 10)),
        (TW(-10, -5), TW(-5, 0), True, TW(-10, 0)),
    ],
)
def test_time_window_intersects_and_cover(a: TW, b: TW, intersects: bool, cover: TW) -> None:
    assert a.intersects(b) is intersects and b.intersects(a) is intersects
    assert a.cover(b) == cover == b.cover(a)


def test_time_window_value_semantics() -> None:
    assert TW(0, 5).max_timestamp() == 4
    assert TW(0, 5) == TW(0, 5) and hash(TW(0, 5)) == hash(TW(0, 5))
    assert sorted([TW(3, 4), TW(0, 9), TW(0, 2)]) == [TW(0, 2), TW(0, 9), TW(3, 4)]
    assert pickle.loads(pickle.dumps(TW(1, 2))) == TW(1, 2)
    with pytest.raises(AttributeError):
        TW(0, 1).start = 3  # type: ignore[misc]


def test_global_window_is_a_singleton() -> None:
    assert GlobalWindow() is GlobalWindow.get()
    assert pickle.loads(pickle.dumps(GlobalWindow.get())) is GlobalWindow.get()
    assert copy.deepcopy(GlobalWindow.get()) is GlobalWindow.get()
    assert GlobalWindow.get().max_timestamp() == MAX_WATERMARK


@pytest.mark.parametrize(
    ("timestamp", "offset", "size", "start"),
    [
        (0, 0, 5, 0),
        (4, 0, 5, 0),
        (5, 0, 5, 5),
        (-1, 0, 5, -5),
        (-5, 0, 5, -5),
        (-6, 0, 5, -10),
        (-12_345, 0, 1000, -13_000),
        (7, 2, 5, 7),
        (6, 2, 5, 2),
        (1, 2, 5, -3),
        (1, -2, 5, -2),
        (-3, -2, 5, -7),
        (1_700_000_123_456, 0, 60_000, 1_700_000_100_000),
    ],
)
def test_get_window_start_with_offset(timestamp: int, offset: int, size: int, start: int) -> None:
    assert TW.get_window_start_with_offset(timestamp, offset, size) == start
    assert start <= timestamp < start + size
    assert (start - offset) % size == 0


MERGES = {
    "nothing to merge": ([TW(0, 1), TW(2, 3)], []),
    "overlap": ([TW(0, 3), TW(2, 5)], [([TW(0, 3), TW(2, 5)], TW(0, 5))]),
    "touching windows merge": ([TW(3, 5), TW(0, 3)], [([TW(0, 3), TW(3, 5)], TW(0, 5))]),
    "two groups, reported in start order": (
        [TW(10, 13), TW(0, 2), TW(12, 14), TW(1, 3), TW(20, 21)],
        [([TW(0, 2), TW(1, 3)], TW(0, 3)), ([TW(10, 13), TW(12, 14)], TW(10, 14))],
    ),
    "chain through a bridging window": (
        [TW(0, 3), TW(5, 8), TW(3, 5)],
        [([TW(0, 3), TW(3, 5), TW(5, 8)], TW(0, 8))],
    ),
    "identical windows are one window: no merge": ([TW(1, 2), TW(1, 2)], []),
    "a covering window": ([TW(1, 2), TW(0, 10)], [([TW(0, 10), TW(1, 2)], TW(0, 10))]),
    "empty": ([], []),
}


@pytest.mark.parametrize(("windows", "expected"), list(MERGES.values()), ids=list(MERGES))
def test_time_window_merge_windows(windows: list[TW], expected: list[tuple[list[TW], TW]]) -> None:
    calls: list[tuple[list[TW], TW]] = []
    TW.merge_windows(windows, lambda group, result: calls.append((group, result)))
    assert calls == expected


# ============================================================================ assigners

EVENT_ASSIGNMENTS = {
    "tumbling 5s, start": (TumblingEventTimeWindows.of(5000), 0, [TW(0, 5000)]),
    "tumbling 5s, last ms": (TumblingEventTimeWindows.of(5000), 4999, [TW(0, 5000)]),
    "tumbling 5s, next": (TumblingEventTimeWindows.of(5000), 5000, [TW(5000, 10000)]),
    "tumbling negative ts": (TumblingEventTimeWindows.of(5000), -1, [TW(-5000, 0)]),
    "tumbling negative ts on boundary": (TumblingEventTimeWindows.of(5000), -5000, [TW(-5000, 0)]),
    "tumbling offset +100": (TumblingEventTimeWindows.of(5000, 100), 100, [TW(100, 5100)]),
    "tumbling offset +100 below": (TumblingEventTimeWindows.of(5000, 100), 99, [TW(-4900, 100)]),
    "tumbling offset -100": (TumblingEventTimeWindows.of(5000, -100), 4900, [TW(4900, 9900)]),
    "tumbling timedelta day at UTC+8 midnight": (
        TumblingEventTimeWindows.of(timedelta(days=1), timedelta(hours=-8)),
        0,
        [TW(-28_800_000, 57_600_000)],
    ),
    "sliding 5s/1s at 0": (
        SlidingEventTimeWindows.of(5000, 1000),
        0,
        [TW(0, 5000), TW(-1000, 4000), TW(-2000, 3000), TW(-3000, 2000), TW(-4000, 1000)],
    ),
    "sliding 5s/1s at 4999": (
        SlidingEventTimeWindows.of(5000, 1000),
        4999,
        [TW(4000, 9000), TW(3000, 8000), TW(2000, 7000), TW(1000, 6000), TW(0, 5000)],
    ),
    "sliding 5s/1s offset 500": (
        SlidingEventTimeWindows.of(5000, 1000, 500),
        100,
        [TW(-500, 4500), TW(-1500, 3500), TW(-2500, 2500), TW(-3500, 1500), TW(-4500, 500)],
    ),
    "sliding negative ts": (
        SlidingEventTimeWindows.of(10, 5),
        -3,
        [TW(-5, 5), TW(-10, 0)],
    ),
    "sliding with gaps (slide > size), inside": (
        SlidingEventTimeWindows.of(2, 5),
        11,
        [TW(10, 12)],
    ),
    "sliding with gaps (slide > size), in a gap": (SlidingEventTimeWindows.of(2, 5), 13, []),
    "session": (EventTimeSessionWindows.with_gap(3), 7, [TW(7, 10)]),
    "session negative ts": (EventTimeSessionWindows.with_gap(3), -7, [TW(-7, -4)]),
    "global": (GlobalWindows.create(), 7, [GlobalWindow.get()]),
}


@pytest.mark.parametrize(
    ("assigner", "timestamp", "windows"),
    list(EVENT_ASSIGNMENTS.values()),
    ids=list(EVENT_ASSIGNMENTS),
)
def test_event_time_assignment(assigner: WindowAssigner, timestamp: int, windows: list[Any]) -> None:
    assert assigner.assign_windows("element", timestamp, None) == windows
    assert assigner.assign_windows("element", timestamp, FakeClock(now=123_456)) == windows


@pytest.mark.parametrize(
    ("size", "slide", "counts"),
    [(10, 3, {3, 4}), (10, 5, {2}), (10, 10, {1}), (9, 3, {3}), (2, 5, {0, 1}), (5, 1, {5})],
)
def test_sliding_overlap_counts(size: int, slide: int, counts: set[int]) -> None:
    assigner = SlidingEventTimeWindows.of(size, slide)
    seen = set()
    for ts in range(-50, 50):
        windows = assigner.assign_windows(None, ts)
        assert all(w.start <= ts < w.end and w.start % slide == 0 for w in windows)
        seen.add(len(windows))
    assert seen == counts


PROCESSING_ASSIGNMENTS = {
    "tumbling": (TumblingProcessingTimeWindows.of(5000), 7000, [TW(5000, 10000)]),
    "tumbling offset": (TumblingProcessingTimeWindows.of(5000, 100), 100, [TW(100, 5100)]),
    "sliding": (SlidingProcessingTimeWindows.of(10, 5), 12, [TW(10, 20), TW(5, 15)]),
    "session": (ProcessingTimeSessionWindows.with_gap(timedelta(seconds=1)), 5, [TW(5, 1005)]),
}


@pytest.mark.parametrize(
    ("assigner", "now", "windows"),
    list(PROCESSING_ASSIGNMENTS.values()),
    ids=list(PROCESSING_ASSIGNMENTS),
)
def test_processing_time_assignment(assigner: WindowAssigner, now: int, windows: list[TW]) -> None:
    # the element timestamp is ignored, even when missing
    assert assigner.assign_windows("element", 999_999_999, FakeClock(now=now)) == windows
    assert assigner.assign_windows("element", None, FakeClock(now=now)) == windows
    with pytest.raises(ValueError, match="WindowAssignerContext"):
        assigner.assign_windows("element", 0, None)


@pytest.mark.parametrize(
    "assigner",
    [
        TumblingEventTimeWindows.of(10),
        SlidingEventTimeWindows.of(10, 5),
        EventTimeSessionWindows.with_gap(10),
    ],
    ids=stable_repr,
)
@pytest.mark.parametrize("timestamp", [None, MIN_WATERMARK])
def test_event_time_assigners_reject_missing_timestamps(
    assigner: WindowAssigner, timestamp: int | None
) -> None:
    with pytest.raises(ValueError, match="assign_timestamps_and_watermarks"):
        assigner.assign_windows("element", timestamp, None)


@pytest.mark.parametrize(
    ("assigner", "trigger", "event_time", "merging"),
    [
        (TumblingEventTimeWindows.of(1), EventTimeTrigger(), True, False),
        (SlidingEventTimeWindows.of(2, 1), EventTimeTrigger(), True, False),
        (EventTimeSessionWindows.with_gap(1), EventTimeTrigger(), True, True),
        (TumblingProcessingTimeWindows.of(1), ProcessingTimeTrigger(), False, False),
        (SlidingProcessingTimeWindows.of(2, 1), ProcessingTimeTrigger(), False, False),
        (ProcessingTimeSessionWindows.with_gap(1), ProcessingTimeTrigger(), False, True),
        (GlobalWindows.create(), NeverTrigger(), False, False),
    ],
    ids=stable_repr,
)
def test_assigner_properties(
    assigner: WindowAssigner, trigger: Trigger, event_time: bool, merging: bool
) -> None:
    assert assigner.get_default_trigger() == trigger
    assert assigner.get_default_trigger(env=object()) == trigger
    assert assigner.is_event_time() is event_time
    assert assigner.merging is merging
    assert isinstance(assigner, MergingWindowAssigner) is merging


INVALID_ASSIGNERS: dict[str, tuple[Callable[[], object], type[Exception], str]] = {
    "tumbling size 0": (lambda: TumblingEventTimeWindows.of(0), ValueError, "size > 0"),
    "tumbling size < 0": (lambda: TumblingProcessingTimeWindows.of(-5), ValueError, "size > 0"),
    "tumbling |offset| == size": (
        lambda: TumblingEventTimeWindows.of(10, 10),
        ValueError,
        r"abs\(offset\) < size",
    ),
    "tumbling |offset| > size": (
        lambda: TumblingProcessingTimeWindows.of(10, -11),
        ValueError,
        r"abs\(offset\) < size",
    ),
    "sliding size 0": (lambda: SlidingEventTimeWindows.of(0, 1), ValueError, "size > 0"),
    "sliding slide 0": (lambda: SlidingEventTimeWindows.of(10, 0), ValueError, "slide > 0"),
    "sliding slide < 0": (lambda: SlidingProcessingTimeWindows.of(10, -1), ValueError, "slide > 0"),
    "sliding |offset| == slide": (
        lambda: SlidingEventTimeWindows.of(10, 5, 5),
        ValueError,
        r"abs\(offset\) < slide",
    ),
    "session gap 0": (lambda: EventTimeSessionWindows.with_gap(0), ValueError, "0 < size"),
    "session gap < 0": (lambda: ProcessingTimeSessionWindows.with_gap(-1), ValueError, "0 < size"),
    "float size": (lambda: TumblingEventTimeWindows.of(1.5), TypeError, "milliseconds"),
    "sub-ms timedelta": (
        lambda: TumblingEventTimeWindows.of(timedelta(microseconds=10)),
        ValueError,
        "whole number",
    ),
    "constructor validates too": (lambda: TumblingEventTimeWindows(0), ValueError, "size > 0"),
}


@pytest.mark.parametrize(
    ("make", "error", "message"), list(INVALID_ASSIGNERS.values()), ids=list(INVALID_ASSIGNERS)
)
def test_invalid_assigner_arguments(make: Callable[[], object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        make()


def test_assigners_are_values() -> None:
    assert TumblingEventTimeWindows.of(timedelta(seconds=1)) == TumblingEventTimeWindows(1000, 0)
    assert TumblingEventTimeWindows.of(1000) != TumblingProcessingTimeWindows.of(1000)
    assert SlidingEventTimeWindows.of(10, 5) == SlidingEventTimeWindows(10, 5)
    assert GlobalWindows.create() == GlobalWindows.create()
    assert "size=1000" in repr(TumblingEventTimeWindows.of(1000))


@pytest.mark.parametrize(("size", "offset"), [(5, 0), (7, 3), (7, -3), (1000, 999), (1, 0)])
def test_tumbling_fast_path_matches_assign_windows(size: int, offset: int) -> None:
    assigner = TumblingEventTimeWindows.of(size, offset)
    timestamps = [*range(-40, 40), 1_700_000_000_123]
    starts = assigner.window_start_batch(timestamps)
    for ts, start in zip(timestamps, starts, strict=True):
        assert assigner.window_start(ts) == start
        assert assigner.assign_windows(None, ts) == [TW(start, start + size)]


@pytest.mark.parametrize(("size", "slide", "offset"), [(10, 3, 0), (10, 3, 2), (2, 5, -1)])
def test_sliding_fast_path_matches_assign_windows(size: int, slide: int, offset: int) -> None:
    assigner = SlidingEventTimeWindows.of(size, slide, offset)
    for ts in range(-30, 30):
        expected = [TW(s, s + size) for s in assigner.window_starts(ts)]
        assert assigner.assign_windows(None, ts) == expected


# ============================================================================ MergingWindowSet


class NonEagerlyMergingWindowAssigner(MergingWindowAssigner):
    """Flink's MergingWindowSetTest assigner: merges lazily, growing the earliest window by 1."""

    def __init__(self, session_timeout: int) -> None:
        self.session_timeout = session_timeout

    def assign_windows(self, element: Any, timestamp: Any, ctx: Any = None) -> list[TW]:
        return [TW(timestamp, timestamp + self.session_timeout)]

    def get_default_trigger(self, env: object = None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True

    def merge_windows(self, windows: Iterable[TW], callback: Callable[..., None]) -> None:
        windows = list(windows)
        earliest = min(windows, key=lambda w: w.start)
        associated = [w for w in windows if earliest.start <= w.start < earliest.end]
        if len(associated) > 1:
            callback(associated, TW(earliest.start, earliest.end + 1))


# Steps: ("add", window, expected_result, expected_merge_call or None)
#        ("state", window, expected_state_window or None)
#        ("retire", window)
# A merge call is (merge_result, merged_windows, state_window_result, merged_state_windows).
MWS_SCRIPTS: dict[str, tuple[MergingWindowAssigner, list[tuple[Any, ...]]]] = {
    "incremental merging (MergingWindowSetTest)": (
        EventTimeSessionWindows.with_gap(3),
        [
            ("add", TW(0, 4), TW(0, 4), None),
            ("state", TW(0, 4), TW(0, 4)),
            ("add", TW(0, 4), TW(0, 4), None),
            ("add", TW(3, 5), TW(0, 5), (TW(0, 5), [TW(0, 4)], TW(0, 4), [])),
            ("add", TW(4, 6), TW(0, 6), (TW(0, 6), [TW(0, 5)], TW(0, 4), [])),
            ("state", TW(0, 6), TW(0, 4)),
            ("add", TW(1, 4), TW(0, 6), None),
            ("add", TW(0, 4), TW(0, 6), None),
            ("add", TW(3, 5), TW(0, 6), None),
            ("add", TW(4, 6), TW(0, 6), None),
            ("state", TW(0, 6), TW(0, 4)),
            ("add", TW(11, 14), TW(11, 14), None),
            ("state", TW(0, 6), TW(0, 4)),
            ("state", TW(11, 14), TW(11, 14)),
            ("add", TW(10, 13), TW(10, 14), (TW(10, 14), [TW(11, 14)], TW(11, 14), [])),
            ("add", TW(12, 15), TW(10, 15), (TW(10, 15), [TW(10, 14)], TW(11, 14), [])),
            ("add", TW(11, 14), TW(10, 15), None),
            ("state", TW(0, 6), TW(0, 4)),
            ("state", TW(10, 15), TW(11, 14)),
            ("retire", TW(0, 6)),
            ("state", TW(0, 6), None),
            ("state", TW(10, 15), TW(11, 14)),
        ],
    ),
    "late merging (MergingWindowSetTest)": (
        EventTimeSessionWindows.with_gap(3),
        [
            ("add", TW(0, 3), TW(0, 3), None),
            ("add", TW(5, 8), TW(5, 8), None),
            ("add", TW(10, 13), TW(10, 13), None),
            ("state", TW(10, 13), TW(10, 13)),
            (
                "add",
                TW(8, 10),
                TW(5, 13),
                (TW(5, 13), [TW(5, 8), TW(10, 13)], TW(5, 8), [TW(10, 13)]),
            ),
            ("state", TW(0, 3), TW(0, 3)),
            ("add", TW(5, 8), TW(5, 13), None),
            ("add", TW(8, 10), TW(5, 13), None),
            ("add", TW(10, 13), TW(5, 13), None),
            ("state", TW(5, 13), TW(5, 8)),
            (
                "add",
                TW(3, 5),
                TW(0, 13),
                (TW(0, 13), [TW(0, 3), TW(5, 13)], TW(0, 3), [TW(5, 8)]),
            ),
            ("state", TW(0, 13), TW(0, 3)),
        ],
    ),
    "large window covering a single window (MergingWindowSetTest)": (
        EventTimeSessionWindows.with_gap(3),
        [
            ("add", TW(1, 2), TW(1, 2), None),
            ("state", TW(1, 2), TW(1, 2)),
            ("add", TW(0, 3), TW(0, 3), (TW(0, 3), [TW(1, 2)], TW(1, 2), [])),
            ("state", TW(0, 3), TW(1, 2)),
        ],
    ),
    "adding identical windows (MergingWindowSetTest)": (
        EventTimeSessionWindows.with_gap(3),
        [
            ("add", TW(1, 2), TW(1, 2), None),
            ("state", TW(1, 2), TW(1, 2)),
            ("add", TW(1, 2), TW(1, 2), None),
            ("state", TW(1, 2), TW(1, 2)),
        ],
    ),
    "large window covering multiple windows (MergingWindowSetTest)": (
        EventTimeSessionWindows.with_gap(3),
        [
            ("add", TW(1, 3), TW(1, 3), None),
            ("add", TW(5, 8), TW(5, 8), None),
            ("add", TW(10, 13), TW(10, 13), None),
            (
                "add",
                TW(0, 13),
                TW(0, 13),
                (TW(0, 13), [TW(1, 3), TW(5, 8), TW(10, 13)], TW(1, 3), [TW(5, 8), TW(10, 13)]),
            ),
            ("state", TW(0, 13), TW(1, 3)),
        ],
    ),
    "non-eager merging (MergingWindowSetTest)": (
        NonEagerlyMergingWindowAssigner(3000),
        [
            ("add", TW(0, 2), TW(0, 2), None),
            ("add", TW(2, 5), TW(2, 5), None),
            ("add", TW(1, 2), TW(0, 3), (TW(0, 3), [TW(0, 2)], TW(0, 2), [])),
            (
                "add",
                TW(10, 12),
                TW(10, 12),
                (TW(0, 4), [TW(2, 5), TW(0, 3)], TW(2, 5), [TW(0, 2)]),
            ),
            ("state", TW(10, 12), TW(10, 12)),
            ("state", TW(0, 4), TW(2, 5)),
        ],
    ),
    "re-adding a grown window keeps its state window (deviation from Flink)": (
        EventTimeSessionWindows.with_gap(3),
        [
            ("add", TW(1, 2), TW(1, 2), None),
            ("add", TW(0, 3), TW(0, 3), (TW(0, 3), [TW(1, 2)], TW(1, 2), [])),
            ("add", TW(0, 3), TW(0, 3), None),
            ("state", TW(0, 3), TW(1, 2)),
        ],
    ),
}


def _recorder(calls: list[tuple[Any, ...]]) -> Callable[..., None]:
    return lambda *call: calls.append(call)


@pytest.mark.parametrize(("assigner", "steps"), list(MWS_SCRIPTS.values()), ids=list(MWS_SCRIPTS))
def test_merging_window_set(assigner: MergingWindowAssigner, steps: list[tuple[Any, ...]]) -> None:
    window_set: MergingWindowSet[TW] = MergingWindowSet(assigner)
    for index, (op, *args) in enumerate(steps):
        if op == "add":
            window, expected_result, expected_merge = args
            calls: list[tuple[Any, ...]] = []
            result = window_set.add_window(window, _recorder(calls))
            assert result == expected_result, f"step {index}"
            assert calls == ([] if expected_merge is None else [expected_merge]), f"step {index}"
            assert window_set.get_state_window(result) is not None, f"step {index}"
        elif op == "state":
            window, expected_state = args
            assert window_set.get_state_window(window) == expected_state, f"step {index}"
        else:
            window_set.retire_window(*args)


def test_merging_window_set_restore_and_persist() -> None:
    assigner = EventTimeSessionWindows.with_gap(3)
    restored = MergingWindowSet.restore(assigner, [(TW(17, 42), TW(42, 17)), (TW(1, 2), TW(3, 4))])
    assert restored.get_state_window(TW(17, 42)) == TW(42, 17)
    assert restored.get_state_window(TW(1, 2)) == TW(3, 4)
    assert not restored.changed  # testPersistOnlyIfHaveUpdates
    assert len(restored) == 2 and TW(1, 2) in restored

    fresh: MergingWindowSet[TW] = MergingWindowSet(assigner)
    fresh.add_window(TW(1, 2), lambda *_: None)
    fresh.add_window(TW(17, 42), lambda *_: None)
    assert fresh.changed
    assert fresh.persist() == [(TW(1, 2), TW(1, 2)), (TW(17, 42), TW(17, 42))]  # testPersist
    assert not fresh.changed
    again = MergingWindowSet.restore(assigner, pickle.loads(pickle.dumps(fresh.persist())))
    assert list(again) == [TW(1, 2), TW(17, 42)]
    again.retire_window(TW(1, 2))
    assert again.changed


def test_merging_window_set_errors() -> None:
    window_set: MergingWindowSet[TW] = MergingWindowSet(EventTimeSessionWindows.with_gap(3))
    with pytest.raises(ValueError, match="not in in-flight window set"):
        window_set.retire_window(TW(0, 3))
    with pytest.raises(ValueError, match="not a merging window assigner"):
        MergingWindowSet(TumblingEventTimeWindows.of(5))


# ============================================================================ triggers


@dataclass
class FakeTriggerContext:
    """TriggerContext + OnMergeContext over sets and a dict; ``window`` is the current window."""

    watermark: int = MIN_WATERMARK
    now: int = 0
    window: Any = None
    merged_windows: list[Any] = field(default_factory=list)
    event_timers: set[tuple[Any, int]] = field(default_factory=set)
    processing_timers: set[tuple[Any, int]] = field(default_factory=set)
    store: dict[Any, Any] = field(default_factory=dict)

    def get_current_watermark(self) -> int:
        return self.watermark

    def get_current_processing_time(self) -> int:
        return self.now

    def register_event_time_timer(self, time: int) -> None:
        self.event_timers.add((self.window, time))

    def register_processing_time_timer(self, time: int) -> None:
        self.processing_timers.add((self.window, time))

    def delete_event_time_timer(self, time: int) -> None:
        self.event_timers.discard((self.window, time))

    def delete_processing_time_timer(self, time: int) -> None:
        self.processing_timers.discard((self.window, time))

    def get_partitioned_state(self, descriptor: TriggerStateDescriptor) -> DictReducingState:
        return DictReducingState(self.store, (self.window, descriptor.name), descriptor.reduce_function)

    def merge_partitioned_state(self, descriptor: TriggerStateDescriptor) -> None:
        merge_reducing_state(
            self.store,
            [(w, descriptor.name) for w in self.merged_windows],
            (self.window, descriptor.name),
            descriptor.reduce_function,
        )


def test_fake_contexts_satisfy_the_protocols() -> None:
    assert isinstance(FakeTriggerContext(), TriggerContext)
    assert isinstance(FakeTriggerContext(), OnMergeContext)
    assert isinstance(FakeClock(), WindowAssignerContext)
    assert isinstance(FakeClock(), EvictorContext)


@dataclass(frozen=True, slots=True)
class PurgeOnElement(Trigger):
    """A stub returning PURGE, to check PurgingTrigger passes non-fire results through."""

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        return PURGE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return CONTINUE

    def clear(self, window: Any, ctx: Any) -> None:
        pass


W1, W2, W3 = TW(0, 2), TW(2, 4), TW(0, 4)
TEN = TW(0, 20)
G = GlobalWindow.get()

# Steps: ("wm", t) / ("now", t) set times; ("el", ts, window) / ("ev", t, window) /
# ("pt", t, window) -> expected TriggerResult; ("merge", window, [merged]); ("clear", window);
# ("timers", {event (window, t)}, {processing (window, t)}); ("state", window, name, value).
TRIGGER_SCRIPTS: dict[str, tuple[Trigger, list[tuple[Any, ...]]]] = {
    "event time: registers the window end, fires there (EventTimeTriggerTest)": (
        EventTimeTrigger.create(),
        [
            ("el", 0, W1, CONTINUE),
            ("el", 2, W2, CONTINUE),
            ("timers", {(W1, 1), (W2, 3)}, set()),
            ("ev", 1, W1, FIRE),
            ("ev", 2, W2, CONTINUE),
            ("ev", 3, W2, FIRE),
            ("pt", 3, W2, CONTINUE),
            ("clear", W1),
            ("clear", W2),
            ("timers", set(), set()),
        ],
    ),
    "event time: late element fires at once, no timer": (
        EventTimeTrigger.create(),
        [("wm", 1), ("el", 0, W1, FIRE), ("el", 2, W2, CONTINUE), ("timers", {(W2, 3)}, set())],
    ),
    "event time: merge registers the merged end unless the watermark passed it": (
        EventTimeTrigger.create(),
        [
            ("merge", W3, [W1, W2]),
            ("timers", {(W3, 3)}, set()),
            ("wm", 3),
            ("merge", TW(0, 3), [W1]),
            ("timers", {(W3, 3)}, set()),
        ],
    ),
    "processing time: registers the window end, fires on it": (
        ProcessingTimeTrigger.create(),
        [
            ("el", 100, W1, CONTINUE),
            ("timers", set(), {(W1, 1)}),
            ("ev", 1, W1, CONTINUE),
            ("pt", 1, W1, FIRE),
            ("now", 1),
            ("merge", W3, [W1, W2]),
            ("timers", set(), {(W1, 1), (W3, 3)}),
            ("now", 5),
            ("merge", TW(0, 5), [W3]),
            ("timers", set(), {(W1, 1), (W3, 3)}),
            ("clear", W1),
            ("timers", set(), {(W3, 3)}),
        ],
    ),
    "count: fires every n elements, per window (CountTriggerTest)": (
        CountTrigger.of(3),
        [
            ("el", 0, W1, CONTINUE),
            ("el", 0, W1, CONTINUE),
            ("el", 2, W2, CONTINUE),
            ("el", 0, W1, FIRE),
            ("state", W1, "count", None),
            ("el", 0, W1, CONTINUE),
            ("state", W1, "count", 1),
            ("ev", 1, W1, CONTINUE),
            ("pt", 1, W1, CONTINUE),
            ("clear", W1),
            ("state", W1, "count", None),
            ("state", W2, "count", 1),
            ("timers", set(), set()),
        ],
    ),
    "count: merge sums the merged windows' counts": (
        CountTrigger.of(3),
        [
            ("el", 0, W1, CONTINUE),
            ("el", 2, W2, CONTINUE),
            ("merge", W3, [W1, W2]),
            ("state", W3, "count", 2),
            ("state", W1, "count", None),
            ("el", 1, W3, FIRE),
        ],
    ),
    "count on the global window": (
        CountTrigger.of(2),
        [("el", 0, G, CONTINUE), ("el", 0, G, FIRE), ("el", 0, G, CONTINUE)],
    ),
    "purging: FIRE becomes FIRE_AND_PURGE": (
        PurgingTrigger.of(CountTrigger.of(2)),
        [("el", 0, W1, CONTINUE), ("el", 0, W1, FIRE_AND_PURGE), ("el", 0, W1, CONTINUE)],
    ),
    "purging: event-time fire purges, timers and clear pass through": (
        PurgingTrigger.of(EventTimeTrigger.create()),
        [
            ("el", 0, W1, CONTINUE),
            ("timers", {(W1, 1)}, set()),
            ("ev", 1, W1, FIRE_AND_PURGE),
            ("pt", 1, W1, CONTINUE),
            ("merge", W3, [W1, W2]),
            ("timers", {(W1, 1), (W3, 3)}, set()),
            ("clear", W1),
            ("timers", {(W3, 3)}, set()),
        ],
    ),
    "purging: processing-time fire purges": (
        PurgingTrigger.of(ProcessingTimeTrigger.create()),
        [("pt", 1, W1, FIRE_AND_PURGE)],
    ),
    "purging: PURGE passes through": (
        PurgingTrigger.of(PurgeOnElement()),
        [("el", 0, W1, PURGE)],
    ),
    "never": (
        NeverTrigger(),
        [
            ("el", 0, G, CONTINUE),
            ("ev", MAX_WATERMARK, G, CONTINUE),
            ("pt", 5, G, CONTINUE),
            ("clear", G),
            ("timers", set(), set()),
        ],
    ),
    "continuous event time: periodic fires, capped at the window end": (
        ContinuousEventTimeTrigger.of(5),
        [
            ("el", 3, TEN, CONTINUE),
            ("timers", {(TEN, 19), (TEN, 5)}, set()),
            ("state", TEN, "fire-time", 5),
            ("el", 4, TEN, CONTINUE),
            ("ev", 4, TEN, CONTINUE),
            ("ev", 5, TEN, FIRE),
            ("timers", {(TEN, 19), (TEN, 5), (TEN, 10)}, set()),
            ("ev", 10, TEN, FIRE),
            ("ev", 15, TEN, FIRE),
            ("state", TEN, "fire-time", 19),
            ("ev", 19, TEN, FIRE),
            ("pt", 19, TEN, CONTINUE),
            ("clear", TEN),
            ("state", TEN, "fire-time", None),
            ("timers", {(TEN, 5), (TEN, 10), (TEN, 15)}, set()),
        ],
    ),
    "continuous event time: negative timestamps align down": (
        ContinuousEventTimeTrigger.of(timedelta(milliseconds=5)),
        # Python's floor %: start -5, first fire 0 (Java's truncating % would give 5)
        [("el", -3, TW(-20, 20), CONTINUE), ("state", TW(-20, 20), "fire-time", 0)],
    ),
    "continuous event time: late element fires at once": (
        ContinuousEventTimeTrigger.of(5),
        [("wm", 19), ("el", 3, TEN, FIRE), ("timers", set(), set())],
    ),
    "continuous event time: merge keeps the earliest fire time": (
        ContinuousEventTimeTrigger.of(5),
        [
            ("el", 7, TW(7, 17), CONTINUE),
            ("el", 2, TW(2, 12), CONTINUE),
            ("merge", TW(2, 17), [TW(7, 17), TW(2, 12)]),
            ("state", TW(2, 17), "fire-time", 5),
            (
                "timers",
                {(TW(7, 17), 16), (TW(7, 17), 10), (TW(2, 12), 11), (TW(2, 12), 5), (TW(2, 17), 5)},
                set(),
            ),
        ],
    ),
    "continuous processing time: periodic fires": (
        ContinuousProcessingTimeTrigger.of(5),
        [
            ("now", 3),
            ("el", 999, TEN, CONTINUE),
            ("timers", set(), {(TEN, 5)}),
            ("pt", 4, TEN, CONTINUE),
            ("pt", 5, TEN, FIRE),
            ("state", TEN, "fire-time", 10),
            ("ev", 10, TEN, CONTINUE),
            ("pt", 15, TEN, CONTINUE),
            ("merge", TW(0, 30), [TEN]),
            ("state", TW(0, 30), "fire-time", 10),
            ("clear", TW(0, 30)),
            ("timers", set(), {(TEN, 5), (TEN, 10)}),
        ],
    ),
}


@pytest.mark.parametrize(("trigger", "steps"), list(TRIGGER_SCRIPTS.values()), ids=list(TRIGGER_SCRIPTS))
def test_trigger(trigger: Trigger, steps: list[tuple[Any, ...]]) -> None:
    ctx = FakeTriggerContext()
    for index, (op, *args) in enumerate(steps):
        where = f"step {index}: {op}{tuple(args)}"
        if op == "wm":
            ctx.watermark = args[0]
        elif op == "now":
            ctx.now = args[0]
        elif op in ("el", "ev", "pt"):
            time, window, expected = args
            ctx.window = window
            if op == "el":
                got = trigger.on_element("element", time, window, ctx)
            elif op == "ev":
                got = trigger.on_event_time(time, window, ctx)
            else:
                got = trigger.on_processing_time(time, window, ctx)
            assert got is expected, where
        elif op == "merge":
            ctx.window, ctx.merged_windows = args
            assert trigger.can_merge(), where
            trigger.on_merge(args[0], ctx)
        elif op == "clear":
            ctx.window = args[0]
            trigger.clear(args[0], ctx)
        elif op == "timers":
            assert (ctx.event_timers, ctx.processing_timers) == tuple(args), where
        elif op == "state":
            window, name, value = args
            assert ctx.store.get((window, name)) == value, where
        else:  # pragma: no cover - a typo in a table
            raise AssertionError(op)


@pytest.mark.parametrize(
    ("result", "fire", "purge"),
    [
        (CONTINUE, False, False),
        (FIRE, True, False),
        (PURGE, False, True),
        (FIRE_AND_PURGE, True, True),
    ],
)
def test_trigger_result(result: TriggerResult, fire: bool, purge: bool) -> None:
    assert result.is_fire() is fire and result.is_purge() is purge


def test_trigger_merge_support() -> None:
    assert not NeverTrigger().can_merge()
    assert not PurgingTrigger.of(PurgeOnElement()).can_merge()
    assert PurgingTrigger.of(CountTrigger.of(1)).can_merge()
    with pytest.raises(NotImplementedError, match="does not support merging"):
        PurgeOnElement().on_merge(W1, FakeTriggerContext())


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: CountTrigger.of(0), ValueError),
        (lambda: CountTrigger.of(-1), ValueError),
        (lambda: CountTrigger.of(2.0), TypeError),
        (lambda: ContinuousEventTimeTrigger.of(0), ValueError),
        (lambda: ContinuousProcessingTimeTrigger.of(-5), ValueError),
        (lambda: ContinuousEventTimeTrigger.of(1.5), TypeError),
        (lambda: CountEvictor.of(-1), ValueError),
        (lambda: CountEvictor.of(1.0), TypeError),
        (lambda: TimeEvictor.of(-1), ValueError),
        (lambda: TimeEvictor.of("5"), TypeError),
    ],
)
def test_invalid_trigger_and_evictor_arguments(make: Callable[[], object], error: type[Exception]) -> None:
    with pytest.raises(error):
        make()


def test_merge_reducing_state_skips_empty_sources_and_the_target() -> None:
    store = {"a": 1, "b": 5, "t": 10}
    merge_reducing_state(store, ["a", "missing", "t", "b"], "t", min)
    assert store == {"t": 1}
    empty: dict[str, int] = {}
    merge_reducing_state(empty, ["x"], "t", min)
    assert empty == {}


# ============================================================================ evictors

E = [(1, "a"), (2, "b"), (4, "c"), (5, "d")]

EVICTIONS = {
    "count keeps the last n, before": (CountEvictor.of(2), E, [(4, "c"), (5, "d")], E),
    "count keeps the last n, after": (CountEvictor.of(2, do_evict_after=True), E, E, E[2:]),
    "count under the limit": (CountEvictor.of(10), E, E, E),
    "count zero evicts all": (CountEvictor.of(0), E, [], E),
    "count on empty": (CountEvictor.of(1), [], [], []),
    "time keeps the last window_size ms": (TimeEvictor.of(3), E, [(4, "c"), (5, "d")], E),
    "time, after": (TimeEvictor.of(3, do_evict_after=True), E, E, [(4, "c"), (5, "d")]),
    "time uses the max timestamp, not the last": (
        TimeEvictor.of(timedelta(milliseconds=2)),
        [(9, "x"), (1, "y"), (8, "z"), (7, "w")],
        [(9, "x"), (8, "z")],
        None,
    ),
    "time zero evicts everything (ts <= max - 0)": (TimeEvictor.of(0), E, [], E),
    "time one keeps only the max timestamp": (TimeEvictor.of(1), E, [(5, "d")], E),
    "time: first element without timestamp disables eviction": (
        TimeEvictor.of(1),
        [(None, "a"), (1, "b"), (5, "c")],
        [(None, "a"), (1, "b"), (5, "c")],
        None,
    ),
    "time on empty": (TimeEvictor.of(1), [], [], []),
}


@pytest.mark.parametrize(
    ("evictor", "elements", "after_before", "after_after"),
    list(EVICTIONS.values()),
    ids=list(EVICTIONS),
)
def test_evictor(
    evictor: CountEvictor | TimeEvictor,
    elements: list[tuple[int | None, Any]],
    after_before: list[tuple[int | None, Any]],
    after_after: list[tuple[int | None, Any]] | None,
) -> None:
    ctx = FakeClock()
    pane = list(elements)
    evictor.evict_before(pane, len(pane), W1, ctx)
    assert pane == after_before
    if after_after is not None:
        pane = list(elements)
        evictor.evict_after(pane, len(pane), W1, ctx)
        assert pane == after_after


def test_evictor_edits_in_place() -> None:
    pane = list(E)
    alias = pane
    CountEvictor.of(1).evict_before(pane, len(pane), W1, FakeClock())
    TimeEvictor.of(1).evict_before(pane, len(pane), W1, FakeClock())
    assert alias is pane and pane == [(5, "d")]


async def test_a_time_evictor_keeps_the_records_without_a_timestamp() -> None:
    """Flink's EvictingWindowOperatorTest.testTimeEvictorNoTimestamp, with processing time
    passing between the records: records that carry no timestamp are not evicted by a
    TimeEvictor. The window operator gave them the processing time of their arrival as
    their timestamp, so the evictor dropped those older than its window size."""
    from window_harness import WindowHarness

    from streamflow.runtime.window_context import WindowFunctions
    from streamflow.windowing import CountTrigger, GlobalWindows

    harness = WindowHarness(
        GlobalWindows.create(),
        lambda: WindowFunctions(process=lambda key, ctx, elements: [(key, sum(v for _, v in elements))]),
        trigger=CountTrigger.of(2),
        evictor=TimeEvictor.of(2000, True),
    )
    op = harness.op
    await op.open()
    for key in ["key2", "key2", "key1", "key1", "key1", "key2", "key2", "key2", "key1", "key2"]:
        harness.clock.advance(5000)
        await op.process_batch([(key, 1)], None)
    await op.close()
    assert [event[0] for event in harness.main.events] == [
        ("key2", 2),
        ("key1", 2),
        ("key2", 4),
        ("key1", 4),
        ("key2", 6),
    ]


class _MeanAggregate(AggregateFunction):
    """An aggregate whose accumulator is (sum, count): its merge adds the two pairs."""

    def create_accumulator(self) -> tuple[int, int]:
        return 0, 0

    def add(self, value: Any, acc: tuple[int, int]) -> tuple[int, int]:
        return acc[0] + value[1], acc[1] + 1

    def get_result(self, acc: tuple[int, int]) -> float:
        return acc[0] / acc[1]

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return a[0] + b[0], a[1] + b[1]


@pytest.mark.parametrize("kind", ["reduce", "aggregate", "process"])
async def test_merging_session_windows_with_an_evictor_merge_their_element_lists(kind: str) -> None:
    """With an evictor a window keeps its (timestamp, element) list, also for reduce and
    aggregate (they run when it fires). Two sessions merged by a third element merged those
    lists with the user's reduce function or the aggregate's merge: reduce got two lists
    (IndexError), an aggregate merge that adds pairs built a wrong pane. Flink's evicting
    window operator keeps a ListState, which merges by appending."""
    from window_harness import WindowHarness, run_script

    from streamflow.runtime.window_context import WindowFunctions

    functions = {
        "reduce": lambda: WindowFunctions(reduce=lambda a, b: (a[0], a[1] + b[1])),
        "aggregate": lambda: WindowFunctions(aggregate=_MeanAggregate()),
        "process": lambda: WindowFunctions(process=lambda k, ctx, els: [(k, sum(v for _, v in els))]),
    }[kind]
    harness = WindowHarness(EventTimeSessionWindows.with_gap(60), functions, evictor=CountEvictor.of(10))
    steps = [("e", "k", 1, 0), ("e", "k", 2, 100), ("e", "k", 4, 50), ("w", 1000)]
    outputs = await run_script(harness, steps)
    expected = {"reduce": ("k", 7), "aggregate": 7 / 3, "process": ("k", 7)}[kind]
    assert outputs[-1] == [(expected, 159), ("wm", 1000)]  # one session [0, 160)


class _PyFlinkCountTrigger(Trigger):
    """A custom trigger written for PyFlink: its state is declared with PyFlink's keyed-state
    descriptors (reducing, value or list), as in PyFlink's own CountTrigger."""

    def __init__(self, count: int, kind: str) -> None:
        from streamflow.datastream.state import (
            ListStateDescriptor,
            ReducingStateDescriptor,
            ValueStateDescriptor,
        )

        self.count, self.kind = count, kind
        self.descriptor: Any = {
            "reducing": ReducingStateDescriptor("count", lambda a, b: a + b),
            "value": ValueStateDescriptor("count"),
            "list": ListStateDescriptor("count"),
        }[kind]

    def _count(self, state: Any) -> int:
        if self.kind == "reducing":
            state.add(1)
            return int(state.get())
        if self.kind == "value":
            state.update((state.value() or 0) + 1)
            return int(state.value())
        state.add(1)
        return len(state.get())

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        state = ctx.get_partitioned_state(self.descriptor)
        if self._count(state) >= self.count:
            state.clear()
            return TriggerResult.FIRE_AND_PURGE
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Any) -> None:
        ctx.merge_partitioned_state(self.descriptor)

    def clear(self, window: Any, ctx: Any) -> None:
        ctx.get_partitioned_state(self.descriptor).clear()


@pytest.mark.parametrize("kind", ["reducing", "list", "value"])
async def test_a_pyflink_trigger_keeps_state_declared_with_keyed_state_descriptors(kind: str) -> None:
    """WindowOperatorTest.testSessionWindowsWithCountTrigger with a trigger written as for
    PyFlink: get_partitioned_state(ReducingStateDescriptor | ListStateDescriptor |
    ValueStateDescriptor) gives that state for the key and window; merging merges reducing
    and list state and refuses value state, as Flink does. It failed with AttributeError
    ('reduce_function'): only streamflow's TriggerStateDescriptor was accepted."""
    from window_harness import FUNCTIONS, WindowHarness, run_script

    harness = WindowHarness(
        EventTimeSessionWindows.with_gap(3000), FUNCTIONS["process"], trigger=_PyFlinkCountTrigger(4, kind)
    )
    k1, k2 = "key1", "key2"
    before = [("e", k2, 1, 0), ("e", k2, 2, 1000), ("e", k2, 3, 2500), ("e", k2, 4, 3500)]
    before += [("e", k1, 1, 10), ("e", k1, 2, 1000), ("snap",), ("e", k1, 3, 2500)]
    before += [("e", k1, 1, 6000), ("e", k1, 2, 6500), ("e", k1, 3, 7000)]
    merge = [("e", k1, 10, 4500)]  # merges key1's two sessions: count 6, fires
    if kind == "value":
        with pytest.raises(ValueError, match="does not refer to a mergeable state"):
            await run_script(harness, before + merge)
        return
    outputs = await run_script(harness, before + merge)
    fired = [event for out in outputs for event in out]
    assert fired == [((k2, 10, 0, 6500), 6499), ((k1, 22, 10, 10000), 9999)]


@pytest.mark.parametrize("assigner", [GlobalWindows.create(), TumblingEventTimeWindows.of(1000)])
async def test_a_window_an_evictor_emptied_does_not_fire_again_without_elements(assigner: Any) -> None:
    """CountEvictor.of(0, do_evict_after=True) keeps nothing once the window fired. Flink's
    evicting operator clears the window's ListState and re-adds what is kept: nothing, so a
    later firing (the continuous trigger's next interval, the window's end) finds no
    contents and emits nothing. The emptied list stayed, and every firing emitted (k, 0)."""
    from window_harness import WindowHarness, run_script

    from streamflow.runtime.window_context import WindowFunctions

    harness = WindowHarness(
        assigner,
        lambda: WindowFunctions(process=lambda k, ctx, els: [(k, sum(v for _, v in els))]),
        trigger=ContinuousEventTimeTrigger.of(100),
        evictor=CountEvictor.of(0, True),
    )
    steps = [("e", "k", 1, 10), ("e", "k", 2, 20), ("w", 100), ("w", 200), ("e", "k", 4, 250)]
    steps += [("w", 300), ("w", 400), ("w", 1000)]
    outputs = await run_script(harness, steps)
    fired = [event[0] for out in outputs for event in out if event[0] != "wm"]
    assert fired == [("k", 3), ("k", 4)]
