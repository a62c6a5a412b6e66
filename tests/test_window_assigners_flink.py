"""Flink's own tests of time windows and window assigners, ported as tables.

Sources (apache/flink, ``flink-streaming-java/src/test/java/org/apache/flink/streaming/
runtime/operators/windowing/``): ``TimeWindowTest``, ``TumblingEventTimeWindowsTest``,
``TumblingProcessingTimeWindowsTest``, ``SlidingEventTimeWindowsTest``,
``SlidingProcessingTimeWindowsTest``, ``EventTimeSessionWindowsTest``,
``ProcessingTimeSessionWindowsTest``, ``DynamicEventTimeSessionWindowsTest``,
``DynamicProcessingTimeSessionWindowsTest``, ``GlobalWindowsTest``. Each case names its
Java test; ``tests/test_windowing.py`` holds streamflow's own cases (not repeated here).
Flink's ``Time.milliseconds``/``Duration.ofMillis`` are ints here, ``Time.seconds`` a
``timedelta``; ``IllegalArgumentException`` is ``ValueError``. Window staggering
(``testWindowAssignmentWithStagger``) is not ported: streamflow has no ``WindowStagger``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from streamflow.runtime.events import MIN_WATERMARK
from streamflow.types.serializer import GlobalWindowSerializer, TimeWindowSerializer
from streamflow.windowing import (
    EventTimeSessionWindows,
    EventTimeTrigger,
    GlobalWindow,
    GlobalWindows,
    MergingWindowAssigner,
    NeverTrigger,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)
from streamflow.windowing.count import (
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    SessionWindowTimeGapExtractor,
)

TW = TimeWindow
SECONDS = timedelta(seconds=1)


@dataclass
class Clock:
    """Flink's mocked ``WindowAssignerContext``: ``getCurrentProcessingTime`` returns ``now``."""

    now: int = 0

    def get_current_processing_time(self) -> int:
        return self.now


# ============================================================================ TimeWindowTest

WINDOW_STARTS = [
    # [-21, -14), [-14, -7), [-7, 0), [0, 7), [7, 14), [14, 21)...
    *[
        (ts, 0, 7, start)
        for ts, start in [(-8, -14), (-7, -7), (-6, -7), (-1, -7), (1, 0), (6, 0), (7, 7), (8, 7)]
    ],
    # [-11, -4), [-4, 3), [3, 10), [10, 17)...
    *[
        (ts, 3, 7, start)
        for ts, start in [
            (-10, -11),
            (-9, -11),
            (-3, -4),
            (-2, -4),
            (-1, -4),
            (1, -4),
            (2, -4),
            (3, 3),
            (9, 3),
            (10, 10),
        ]
    ],
    # [-16, -9), [-9, -2), [-2, 5), [5, 12), [12, 19)...
    *[
        (ts, -2, 7, start)
        for ts, start in [
            (-12, -16),
            (-7, -9),
            (-4, -9),
            (-3, -9),
            (2, -2),
            (-1, -2),
            (1, -2),
            (-2, -2),
            (3, -2),
            (4, -2),
            (7, 5),
            (12, 12),
        ]
    ],
    # for GMT+08:00
    (1470902048450, -8 * 3600 * 1000, 24 * 3600 * 1000, 1470844800000),
]


@pytest.mark.parametrize(("timestamp", "offset", "size", "start"), WINDOW_STARTS)
def test_get_window_start_with_offset(timestamp: int, offset: int, size: int, start: int) -> None:
    """TimeWindowTest.testGetWindowStartWithOffset (negative timestamps included)."""
    assert TW.get_window_start_with_offset(timestamp, offset, size) == start


@pytest.mark.parametrize(
    ("other", "intersects"),
    [(TW(10, 20), True), (TW(20, 30), True), (TW(21, 30), False), (TW(19, 22), True)],
    ids=["itself", "adjacent", "apart", "overlap by one"],
)
def test_intersects(other: TW, intersects: bool) -> None:
    """TimeWindowTest.testIntersect: symmetric; adjacent windows intersect."""
    window = TW(10, 20)
    assert window.intersects(other) is intersects
    assert other.intersects(window) is intersects


# ============================================================================ tumbling / sliding

ASSIGNMENTS: dict[str, tuple[WindowAssigner, int, list[TW]]] = {}


def _cases(test: str, assigner: WindowAssigner, table: list[tuple[int, list[TW]]]) -> None:
    for index, (ts, windows) in enumerate(table):
        ASSIGNMENTS[f"{test} #{index} {type(assigner).__name__} at {ts}"] = (assigner, ts, windows)


def _sliding(*starts: int, size: int = 5000) -> list[TW]:
    return [TW(s, s + size) for s in starts]


for tumbling in (TumblingEventTimeWindows, TumblingProcessingTimeWindows):
    # Tumbling{Event,Processing}TimeWindowsTest
    _cases(
        "testWindowAssignment",
        tumbling.of(5000),
        [(0, [TW(0, 5000)]), (4999, [TW(0, 5000)]), (5000, [TW(5000, 10000)])],
    )
    _cases(
        "testWindowAssignmentWithGlobalOffset"
        if tumbling is TumblingEventTimeWindows
        else "testWindowAssignmentWithOffset",
        tumbling.of(5000, 100),
        [(100, [TW(100, 5100)]), (5099, [TW(100, 5100)]), (5100, [TW(5100, 10100)])],
    )
    _cases(
        "testWindowAssignmentWithNegativeGlobalOffset"
        if tumbling is TumblingEventTimeWindows
        else "testWindowAssignmentWithNegativeOffset",
        tumbling.of(5000, -100),
        [(0, [TW(-100, 4900)]), (4899, [TW(-100, 4900)]), (4900, [TW(4900, 9900)])],
    )
    _cases(
        "testTimeUnits",
        tumbling.of(5 * SECONDS, SECONDS),
        [(1000, [TW(1000, 6000)]), (5999, [TW(1000, 6000)]), (6000, [TW(6000, 11000)])],
    )

for sliding in (SlidingEventTimeWindows, SlidingProcessingTimeWindows):
    # Sliding{Event,Processing}TimeWindowsTest (Flink: containsInAnyOrder)
    _cases(
        "testWindowAssignment",
        sliding.of(5000, 1000),
        [
            (0, _sliding(-4000, -3000, -2000, -1000, 0)),
            (4999, _sliding(0, 1000, 2000, 3000, 4000)),
            (5000, _sliding(1000, 2000, 3000, 4000, 5000)),
        ],
    )
    _cases(
        "testWindowAssignmentWithOffset",
        sliding.of(5000, 1000, 100),
        [
            (100, _sliding(-3900, -2900, -1900, -900, 100)),
            (5099, _sliding(100, 1100, 2100, 3100, 4100)),
            (5100, _sliding(1100, 2100, 3100, 4100, 5100)),
        ],
    )
    _cases(
        "testWindowAssignmentWithNegativeOffset",
        sliding.of(5000, 1000, -100),
        [
            (0, _sliding(-4100, -3100, -2100, -1100, -100)),
            (4899, _sliding(-100, 900, 1900, 2900, 3900)),
            (4900, _sliding(900, 1900, 2900, 3900, 4900)),
        ],
    )
    _cases(
        "testTimeUnits",
        sliding.of(5 * SECONDS, SECONDS, 500),
        [
            (100, _sliding(-4500, -3500, -2500, -1500, -500)),
            (5499, _sliding(500, 1500, 2500, 3500, 4500)),
            (5100, _sliding(500, 1500, 2500, 3500, 4500)),
        ],
    )

for session in (EventTimeSessionWindows, ProcessingTimeSessionWindows):
    # {EventTime,ProcessingTime}SessionWindowsTest.testWindowAssignment / testTimeUnits
    for gap in (5000, 5 * SECONDS):
        _cases(
            "testWindowAssignment" if gap == 5000 else "testTimeUnits",
            session.with_gap(gap),
            [(0, [TW(0, 5000)]), (4999, [TW(4999, 9999)]), (5000, [TW(5000, 10000)])],
        )

for global_ts in (0, 4999, 5000):
    ASSIGNMENTS[f"GlobalWindowsTest.testWindowAssignment at {global_ts}"] = (
        GlobalWindows.create(),
        global_ts,
        [GlobalWindow.get()],  # type: ignore[list-item]
    )


@pytest.mark.parametrize(("assigner", "time", "windows"), list(ASSIGNMENTS.values()), ids=list(ASSIGNMENTS))
def test_window_assignment(assigner: WindowAssigner, time: int, windows: list[TW]) -> None:
    """The testWindowAssignment* / testTimeUnits cases of Flink's assigner tests: an event-time
    assigner reads the element's timestamp; a processing-time one the context's time (Flink
    passes ``Long.MIN_VALUE`` as the element's timestamp there)."""
    if assigner.is_event_time() or isinstance(assigner, GlobalWindows):
        got = assigner.assign_windows("String", time, Clock(now=123_456))
    else:
        got = assigner.assign_windows("String", MIN_WATERMARK, Clock(now=time))
    assert sorted(got, key=repr) == sorted(windows, key=repr)
    assert len(set(got)) == len(got)


# ============================================================================ invalid parameters

INVALID: dict[str, tuple[Callable[[], object], str]] = {}
for tumbling in (TumblingEventTimeWindows, TumblingProcessingTimeWindows):
    # Tumbling{Event,Processing}TimeWindowsTest.testInvalidParameters
    name = tumbling.__name__
    INVALID[f"{name}.of(-1s)"] = (lambda t=tumbling: t.of(-SECONDS), "abs(offset) < size")
    INVALID[f"{name}.of(10s, 20s)"] = (
        lambda t=tumbling: t.of(10 * SECONDS, 20 * SECONDS),
        "abs(offset) < size",
    )
    INVALID[f"{name}.of(10s, -11s)"] = (
        lambda t=tumbling: t.of(10 * SECONDS, -11 * SECONDS),
        "abs(offset) < size",
    )
for sliding in (SlidingEventTimeWindows, SlidingProcessingTimeWindows):
    # Sliding{Event,Processing}TimeWindowsTest.testInvalidParameters
    name = sliding.__name__
    message = "abs(offset) < slide and size > 0"
    INVALID[f"{name}.of(-2s, 1s)"] = (lambda s=sliding: s.of(-2 * SECONDS, SECONDS), message)
    INVALID[f"{name}.of(2s, -1s)"] = (lambda s=sliding: s.of(2 * SECONDS, -SECONDS), message)
    INVALID[f"{name}.of(-20s, 10s, -1s)"] = (
        lambda s=sliding: s.of(-20 * SECONDS, 10 * SECONDS, -SECONDS),
        message,
    )
    INVALID[f"{name}.of(20s, 10s, -11s)"] = (
        lambda s=sliding: s.of(20 * SECONDS, 10 * SECONDS, -11 * SECONDS),
        message,
    )
    INVALID[f"{name}.of(20s, 10s, 11s)"] = (
        lambda s=sliding: s.of(20 * SECONDS, 10 * SECONDS, 11 * SECONDS),
        message,
    )
for session in (EventTimeSessionWindows, ProcessingTimeSessionWindows):
    # {EventTime,ProcessingTime}SessionWindowsTest.testInvalidParameters
    INVALID[f"{session.__name__}.with_gap(-1s)"] = (lambda s=session: s.with_gap(-SECONDS), "0 < size")
    INVALID[f"{session.__name__}.with_gap(0s)"] = (lambda s=session: s.with_gap(0 * SECONDS), "0 < size")


@pytest.mark.parametrize(("make", "message"), list(INVALID.values()), ids=list(INVALID))
def test_invalid_parameters(make: Callable[[], object], message: str) -> None:
    """testInvalidParameters of Flink's assigner tests: the same conditions, and the message
    names Flink's rule (a ValueError for Flink's IllegalArgumentException)."""
    with pytest.raises(ValueError) as raised:
        make()
    assert message in str(raised.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: TumblingEventTimeWindows.of(10 * SECONDS, -9 * SECONDS),
        lambda: TumblingProcessingTimeWindows.of(10 * SECONDS, 9 * SECONDS),
        lambda: SlidingEventTimeWindows.of(10 * SECONDS, 5 * SECONDS, -4 * SECONDS),
        lambda: SlidingProcessingTimeWindows.of(2 * SECONDS, 5 * SECONDS, 4 * SECONDS),
    ],
)
def test_offsets_just_inside_the_bounds_are_accepted(make: Callable[[], WindowAssigner]) -> None:
    """The boundary of Flink's ``Math.abs(offset) >= size`` / ``>= slide`` check (Tumbling*
    ``of(size, offset)``, Sliding* ``of(size, slide, offset)``): |offset| one unit below is fine,
    and each window still holds the timestamp it was assigned for."""
    assigner = make()
    for ts in (-12_345, -1, 0, 1, 98_765):
        now_ctx = Clock(now=ts)
        for window in assigner.assign_windows("e", ts, now_ctx):
            assert window.start <= ts < window.end


# ============================================================================ session merging


def _merges(assigner: Any, windows: list[TW]) -> list[tuple[set[TW], TW]]:
    calls: list[tuple[set[TW], TW]] = []
    assigner.merge_windows(windows, lambda group, result: calls.append((set(group), result)))
    return calls


SESSION_ASSIGNERS = {
    "EventTimeSessionWindowsTest": EventTimeSessionWindows.with_gap(5000),
    "ProcessingTimeSessionWindowsTest": ProcessingTimeSessionWindows.with_gap(5000),
    "DynamicEventTimeSessionWindowsTest": DynamicEventTimeSessionWindows.with_dynamic_gap(lambda e: 5000),
    "DynamicProcessingTimeSessionWindowsTest": DynamicProcessingTimeSessionWindows.with_dynamic_gap(
        lambda e: 5000
    ),
}

MERGE_CASES = {
    "testMergeSinglePointWindow": ([TW(0, 0)], []),
    "testMergeSingleWindow": ([TW(0, 1)], []),
    "testMergeConsecutiveWindows": (
        [TW(0, 1), TW(1, 2), TW(2, 3), TW(4, 5), TW(5, 6)],
        [({TW(0, 1), TW(1, 2), TW(2, 3)}, TW(0, 3)), ({TW(4, 5), TW(5, 6)}, TW(4, 6))],
    ),
    "testMergeCoveringWindow": (
        [TW(1, 1), TW(0, 2), TW(4, 7), TW(5, 6)],
        [({TW(1, 1), TW(0, 2)}, TW(0, 2)), ({TW(5, 6), TW(4, 7)}, TW(4, 7))],
    ),
}


@pytest.mark.parametrize("test", list(SESSION_ASSIGNERS))
@pytest.mark.parametrize("case", list(MERGE_CASES))
def test_merge_windows(test: str, case: str) -> None:
    """The testMerge* cases of Flink's (dynamic) session window tests: the callback runs once
    per group of more than one window, with the group (any order) and its cover."""
    windows, expected = MERGE_CASES[case]
    assert _merges(SESSION_ASSIGNERS[test], windows) == expected


class GapByElement(SessionWindowTimeGapExtractor):
    """Flink's mocked ``SessionWindowTimeGapExtractor``: "gap5000" -> 5000, ..."""

    def extract(self, element: Any) -> int:
        return int(element.removeprefix("gap"))


@pytest.mark.parametrize(
    ("assigner", "time_of"),
    [
        (DynamicEventTimeSessionWindows.with_dynamic_gap(GapByElement()), "timestamp"),
        (DynamicProcessingTimeSessionWindows.with_dynamic_gap(GapByElement()), "now"),
    ],
    ids=["DynamicEventTimeSessionWindowsTest", "DynamicProcessingTimeSessionWindowsTest"],
)
def test_dynamic_gap_window_assignment(assigner: Any, time_of: str) -> None:
    """Dynamic{EventTime,ProcessingTime}SessionWindowsTest.testWindowAssignment: each
    element's gap comes from the extractor."""
    for element, time, window in [
        ("gap5000", 0, TW(0, 5000)),
        ("gap4000", 4999, TW(4999, 8999)),
        ("gap9000", 5000, TW(5000, 14000)),
    ]:
        if time_of == "timestamp":
            assert assigner.assign_windows(element, time, Clock(now=777)) == [window]
        else:
            assert assigner.assign_windows(element, MIN_WATERMARK, Clock(now=time)) == [window]


@pytest.mark.parametrize(
    "assigner",
    [
        DynamicEventTimeSessionWindows.with_dynamic_gap(lambda e: -1),
        DynamicProcessingTimeSessionWindows.with_dynamic_gap(lambda e: -1),
        EventTimeSessionWindows.with_dynamic_gap(lambda e: 0),
    ],
    ids=["DynamicEventTimeSessionWindowsTest", "DynamicProcessingTimeSessionWindowsTest", "gap 0"],
)
def test_dynamic_gap_invalid_parameters(assigner: Any) -> None:
    """Dynamic*SessionWindowsTest.testInvalidParameters: an extracted gap <= 0 fails the
    assignment with "0 < gap"."""
    with pytest.raises(ValueError, match="0 < gap"):
        assigner.assign_windows([object()], 1, Clock(now=1))


# ============================================================================ properties

PROPERTIES = [
    (
        "TumblingEventTimeWindowsTest",
        TumblingEventTimeWindows.of(5 * SECONDS, 100),
        True,
        EventTimeTrigger,
        TimeWindowSerializer,
    ),
    (
        "TumblingProcessingTimeWindowsTest",
        TumblingProcessingTimeWindows.of(5 * SECONDS, 100),
        False,
        ProcessingTimeTrigger,
        TimeWindowSerializer,
    ),
    (
        "SlidingEventTimeWindowsTest",
        SlidingEventTimeWindows.of(5 * SECONDS, 100),
        True,
        EventTimeTrigger,
        TimeWindowSerializer,
    ),
    (
        "SlidingProcessingTimeWindowsTest",
        SlidingProcessingTimeWindows.of(5 * SECONDS, 100),
        False,
        ProcessingTimeTrigger,
        TimeWindowSerializer,
    ),
    (
        "EventTimeSessionWindowsTest",
        EventTimeSessionWindows.with_gap(5 * SECONDS),
        True,
        EventTimeTrigger,
        TimeWindowSerializer,
    ),
    (
        "ProcessingTimeSessionWindowsTest",
        ProcessingTimeSessionWindows.with_gap(5 * SECONDS),
        False,
        ProcessingTimeTrigger,
        TimeWindowSerializer,
    ),
    (
        "DynamicEventTimeSessionWindowsTest",
        DynamicEventTimeSessionWindows.with_dynamic_gap(lambda e: 5000),
        True,
        EventTimeTrigger,
        TimeWindowSerializer,
    ),
    (
        "DynamicProcessingTimeSessionWindowsTest",
        DynamicProcessingTimeSessionWindows.with_dynamic_gap(lambda e: 5000),
        False,
        ProcessingTimeTrigger,
        TimeWindowSerializer,
    ),
    ("GlobalWindowsTest", GlobalWindows.create(), False, NeverTrigger, GlobalWindowSerializer),
]


@pytest.mark.parametrize(
    ("assigner", "event_time", "trigger", "serializer"),
    [p[1:] for p in PROPERTIES],
    ids=[p[0] for p in PROPERTIES],
)
def test_properties(assigner: WindowAssigner, event_time: bool, trigger: type, serializer: type) -> None:
    """testProperties of Flink's assigner tests: event time or not, the window serializer,
    the default trigger (also when given an environment)."""
    assert assigner.is_event_time() is event_time
    assert isinstance(assigner.get_window_serializer(), serializer)
    assert isinstance(assigner.get_default_trigger(), trigger)
    assert isinstance(assigner.get_default_trigger(object()), trigger)


@pytest.mark.parametrize("session", [EventTimeSessionWindows, ProcessingTimeSessionWindows])
def test_dynamic_gap_properties(session: Any) -> None:
    """{EventTime,ProcessingTime}SessionWindowsTest.testDynamicGapProperties: ``withDynamicGap``
    gives the dynamic assigner of the same time domain."""
    assigner = session.with_dynamic_gap(GapByElement())
    assert assigner is not None
    assert assigner.is_event_time() is (session is EventTimeSessionWindows)
    assert assigner.merging


# ======================================================== point sessions (WindowOperatorTest)


@dataclass(frozen=True)
class PointSessionWindows(MergingWindowAssigner):
    """WindowOperatorTest.PointSessionWindows: sessions, except that an element whose value
    is 33 gets the point window ``[ts, ts)``."""

    gap: int

    def assign_windows(self, element: Any, timestamp: int | None, ctx: Any = None) -> list[TW]:
        assert timestamp is not None
        if element[1] == 33:
            return [TW(timestamp, timestamp)]
        return [TW(timestamp, timestamp + self.gap)]

    def merge_windows(self, windows: Any, callback: Any) -> None:
        TW.merge_windows(windows, callback)

    def get_default_trigger(self, env: object = None) -> Any:
        return EventTimeTrigger.create()

    def get_window_serializer(self) -> Any:
        return TimeWindowSerializer()

    def is_event_time(self) -> bool:
        return True


def _session_function(key: Any, ctx: Any, elements: Any) -> list:
    """WindowOperatorTest.SessionWindowFunction: ``(key-sum, start, end)``."""
    window = ctx.window()
    return [(f"{key}-{sum(v for _, v in elements)}", window.start, window.end)]


async def test_point_sessions() -> None:
    """WindowOperatorTest.testPointSessions: point windows ``[ts, ts)`` merge into the sessions
    that hold them (``intersects`` counts touching), across a snapshot and restore."""
    from window_harness import WindowHarness, run_script

    from streamflow.runtime.window_context import WindowFunctions

    harness = WindowHarness(PointSessionWindows(3000), lambda: WindowFunctions(process=_session_function))
    script = [
        ("e", "key2", 1, 0), ("e", "key2", 33, 1000),
        ("snap",),
        ("e", "key2", 33, 2500),
        ("e", "key1", 1, 10), ("e", "key1", 2, 1000), ("e", "key1", 33, 2500),
        ("w", 12000),
    ]  # fmt: skip
    out = [event for step in await run_script(harness, script) for event in step]
    assert out == [(("key1-36", 10, 4000), 3999), (("key2-67", 0, 3000), 2999), ("wm", 12000)]


# ==================================================== dynamic sessions on the operator (WindowOperatorTest)


def _gap(element: Any) -> int:
    """WindowOperatorTest's mocked extractor: key1 3000; key2 1000 for value 10, else 2000."""
    key, value = element
    if key == "key1":
        return 3000
    if key == "key2":
        return 1000 if value == 10 else 2000
    return 0


DYNAMIC_INPUT = [
    # different gaps for different keys
    [("key1", 3, 10), ("key2", 4, 5000), ("key2", 5, 6000)],
    # a gap giving an end before the current timeout: the furthest timeout is respected
    [("key2", 1, 9000), ("key2", 2, 10000), ("key2", 10, 10500)],
    # a gap giving an end after the current timeout
    [("key2", 10, 13000), ("key2", 10, 13500), ("key2", 1, 14000)],
]
DYNAMIC_RANGES = [8999, 12999, 16999]  # the watermark / processing time after each phase
DYNAMIC_OUTPUT = [
    [(("key1-3", 10, 3010), 3009), (("key2-9", 5000, 8000), 7999)],
    [(("key2-13", 9000, 12000), 11999)],
    [(("key2-21", 13000, 16000), 15999)],
]


@pytest.mark.parametrize("domain", ["event", "processing"])
async def test_dynamic_session_windows_on_the_operator(domain: str) -> None:
    """WindowOperatorTest.testDynamicEventTimeSessionWindows / testDynamicProcessingTimeSessionWindows:
    each element's gap comes from the extractor; sessions merge to the furthest end."""
    from window_harness import WindowHarness

    from streamflow.runtime.events import Watermark
    from streamflow.runtime.window_context import WindowFunctions

    assigner = (
        DynamicEventTimeSessionWindows.with_dynamic_gap(_gap)
        if domain == "event"
        else DynamicProcessingTimeSessionWindows.with_dynamic_gap(_gap)
    )
    harness = WindowHarness(assigner, lambda: WindowFunctions(process=_session_function))
    op = harness.op
    await op.open()
    for phase, until, expected in zip(DYNAMIC_INPUT, DYNAMIC_RANGES, DYNAMIC_OUTPUT, strict=True):
        before = len(harness.main.events)
        for key, value, ts in phase:
            if domain == "event":
                await op.process_batch([(key, value)], [ts])
            else:
                harness.clock.set(ts)
                await op.ctx.processing_time.run_due()
                await op.process_batch([(key, value)], None)
        if domain == "event":
            await op.process_watermark(Watermark(until))
        else:
            harness.clock.set(until)
            await op.ctx.processing_time.run_due()
        got = [e for e in harness.main.events[before:] if e[0] != "wm"]
        assert sorted(got, key=repr) == sorted(expected, key=repr)
    await op.close()


# =============================================== processing-time windows on the operator (WindowOperatorTest)

K1, K2 = "key1", "key2"
PROCESSING_CASES: dict[str, tuple[Any, list[tuple[Any, ...]]]] = {
    # step: ("now", t, [expected (record, timestamp) once time is t]) or ("e", key)
    "testProcessingTimeTumblingWindows": (
        TumblingProcessingTimeWindows.of(3 * SECONDS),
        [
            ("now", 3, []), ("e", K2), ("e", K2), ("e", K2), ("e", K1), ("e", K1),
            ("now", 5000, [((K2, 3), 2999), ((K1, 2), 2999)]),
            ("e", K1), ("e", K1), ("e", K1),
            ("now", 7000, [((K1, 3), 5999)]),
        ],
    ),
    "testProcessingTimeSlidingWindows": (
        SlidingProcessingTimeWindows.of(3 * SECONDS, SECONDS),
        [
            ("now", 3, []), ("e", K2),
            ("now", 1000, [((K2, 1), 999)]),
            ("e", K2), ("e", K2),
            ("now", 2000, [((K2, 3), 1999)]),
            ("e", K1), ("e", K1),
            ("now", 3000, [((K2, 3), 2999), ((K1, 2), 2999)]),
            ("e", K1), ("e", K1), ("e", K1),
            ("now", 7000, [((K2, 2), 3999), ((K1, 5), 3999), ((K1, 5), 4999), ((K1, 3), 5999)]),
        ],
    ),
    "testProcessingTimeSessionWindows": (
        ProcessingTimeSessionWindows.with_gap(3 * SECONDS),
        [
            ("now", 3, []), ("e", K2),
            ("now", 1000, []), ("e", K2),
            ("now", 5000, [((K2, 2), 3999)]),
            ("e", K2), ("e", K2), ("e", K1), ("e", K1), ("e", K1),
            ("now", 10000, [((K2, 2), 7999), ((K1, 3), 7999)]),
        ],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(PROCESSING_CASES))
async def test_processing_time_windows_on_the_operator(name: str) -> None:
    """WindowOperatorTest.testProcessingTime{Tumbling,Sliding,Session}Windows: a sum per key and
    window; element timestamps are ignored; each window fires when processing time passes its
    end, with its max timestamp."""
    from window_harness import FUNCTIONS, WindowHarness

    assigner, steps = PROCESSING_CASES[name]
    harness = WindowHarness(assigner, FUNCTIONS["reduce"])
    op = harness.op
    await op.open()
    for step in steps:
        if step[0] == "e":
            await op.process_batch([(step[1], 1)], None)
            continue
        before = len(harness.main.events)
        harness.clock.set(step[1])
        await op.ctx.processing_time.run_due()
        got = [e for e in harness.main.events[before:] if e[0] != "wm"]
        assert sorted(got, key=repr) == sorted(step[2], key=repr), step
    await op.close()
