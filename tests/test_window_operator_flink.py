"""Flink's ``WindowOperatorTest`` scenarios not ported elsewhere, on streamflow's WindowOperator.

Source: apache/flink, ``flink-streaming-java/src/test/java/org/apache/flink/streaming/
runtime/operators/windowing/WindowOperatorTest.java``. Each scenario names its Java test;
the input, the snapshot/restore point and the expected output are Flink's (records sorted
between watermarks, as ``assertOutputEqualsSorted``). Flink runs most of them once with a
``ReducingState`` (``SumReducer``) and once with a ``ListState`` and an iterable window
function (``RichSumReducer``, ``SessionWindowFunction``); here every scenario runs with each
window function kind streamflow has (reduce, aggregate, process over the elements, and the
incremental ones followed by a process function), which must all give Flink's answer.
Already ported: the tumbling and lateness cases in ``tests/test_window_fast_path.py``, the
trigger and session-lateness cases in ``tests/test_triggers_flink.py``, the evicting ones in
``tests/test_evictors_flink.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from window_harness import LATE, SumAggregate, WindowHarness, run_script

import streamflow as sf
from streamflow.runtime.window_context import WindowFunctions
from streamflow.windowing import (
    EventTimeSessionWindows,
    EventTimeTrigger,
    PurgingTrigger,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)

K1, K2 = "key1", "key2"
SNAP = ("snap",)


def e(key: str, ts: int, value: int = 1) -> tuple:
    return ("e", key, value, ts)


def w(ts: int) -> tuple:
    return ("w", ts)


def _sum_reduce(a: tuple, b: tuple) -> tuple:
    return (a[0], a[1] + b[1])  # Flink's SumReducer


def _sum_elements(key: Any, ctx: Any, elements: Any) -> list:
    """Flink's RichSumReducer (an iterable window function): ``(key, sum of the values)``."""
    return [(key, sum(v for _, v in elements))]


def _sum_of_aggregate(key: Any, ctx: Any, sums: Any) -> list:
    return [(key, sum(sums))]


def _session_elements(key: Any, ctx: Any, elements: Any) -> list:
    """Flink's SessionWindowFunction / SessionProcessWindowFunction: ``(key-sum, start, end)``."""
    window = ctx.window()
    return [(f"{key}-{sum(v for _, v in elements)}", window.start, window.end)]


def _session_of_aggregate(key: Any, ctx: Any, sums: Any) -> list:
    window = ctx.window()
    return [(f"{key}-{sum(sums)}", window.start, window.end)]


def _pass_through_aggregate(key: Any, ctx: Any, sums: Any) -> list:
    return [(key, s) for s in sums]


#: The window function kinds for a ``(key, sum)`` result (Flink's PassThroughWindowFunction
#: over a SumReducer, and RichSumReducer over the list of elements).
SUM_FUNCTIONS: dict[str, Callable[[], WindowFunctions]] = {
    "reduce": lambda: WindowFunctions(reduce=_sum_reduce),
    "process": lambda: WindowFunctions(process=_sum_elements),
    "reduce+process": lambda: WindowFunctions(reduce=_sum_reduce, process=_sum_elements),
    "aggregate+process": lambda: WindowFunctions(aggregate=SumAggregate(), process=_pass_through_aggregate),
}

#: ... for a ``(key-sum, start, end)`` session result (Flink's SessionWindowFunction over the
#: list, ReducedSessionWindowFunction and ReducedProcessSessionWindowFunction over a SumReducer).
SESSION_FUNCTIONS: dict[str, Callable[[], WindowFunctions]] = {
    "process": lambda: WindowFunctions(process=_session_elements),
    "reduce+process": lambda: WindowFunctions(reduce=_sum_reduce, process=_session_elements),
    "aggregate+process": lambda: WindowFunctions(aggregate=SumAggregate(), process=_session_of_aggregate),
}

# WindowOperatorTest#testSlidingEventTimeWindows (the body of testSlidingEventTimeWindowsReduce
# and testSlidingEventTimeWindowsApply): windows of 3 s sliding by 1 s, a snapshot and restore
# after the watermark 2999
_SLIDING_INPUT = [
    (e(K2, 3999), []),
    (e(K2, 3000), []),
    (e(K1, 20), []),
    (e(K1, 0), []),
    (e(K1, 999), []),
    (e(K2, 1998), []),
    (e(K2, 1999), []),
    (e(K2, 1000), []),
]
SLIDING = [
    *_SLIDING_INPUT,
    (w(999), [((K1, 3), 999), ("wm", 999)]),
    (w(1999), [((K1, 3), 1999), ((K2, 3), 1999), ("wm", 1999)]),
    (w(2999), [((K1, 3), 2999), ((K2, 3), 2999), ("wm", 2999)]),
    (SNAP, []),
    (w(3999), [((K2, 5), 3999), ("wm", 3999)]),
    (w(4999), [((K2, 2), 4999), ("wm", 4999)]),
    (w(5999), [((K2, 2), 5999), ("wm", 5999)]),
    (w(6999), [("wm", 6999)]),
    (w(7999), [("wm", 7999)]),
]

# WindowOperatorTest#testTumblingEventTimeWindows as testTumblingEventTimeWindowsApply runs it
# (the reduce variant is in test_window_fast_path.py)
TUMBLING = [
    *_SLIDING_INPUT,
    (w(999), [("wm", 999)]),
    (w(1999), [("wm", 1999)]),
    (SNAP, []),
    (w(2999), [((K1, 3), 2999), ((K2, 3), 2999), ("wm", 2999)]),
    (w(3999), [("wm", 3999)]),
    (w(4999), [("wm", 4999)]),
    (w(5999), [((K2, 2), 5999), ("wm", 5999)]),
    (w(6999), [("wm", 6999)]),
    (w(7999), [("wm", 7999)]),
]

# WindowOperatorTest#testSessionWindows / testSessionWindowsWithProcessFunction: gap 3 s, a
# snapshot after the first elements of both keys
SESSIONS = [
    (e(K2, 0, 1), []),
    (e(K2, 1000, 2), []),
    (e(K2, 2500, 3), []),
    (e(K1, 10, 1), []),
    (e(K1, 1000, 2), []),
    (SNAP, []),
    (e(K1, 2500, 3), []),
    (e(K2, 5501, 4), []),
    (e(K2, 6000, 5), []),
    (e(K2, 6000, 5), []),
    (e(K2, 6050, 6), []),
    (
        w(12000),
        [
            (("key1-6", 10, 5500), 5499),
            (("key2-20", 5501, 9050), 9049),
            (("key2-6", 0, 5500), 5499),
            ("wm", 12000),
        ],
    ),
    (e(K2, 15000, 10), []),
    (e(K2, 15000, 20), []),
    (w(17999), [(("key2-30", 15000, 18000), 17999), ("wm", 17999)]),
]

# WindowOperatorTest#testReduceSessionWindows / testReduceSessionWindowsWithProcessFunction: the
# snapshot comes after key2's first three elements, key1 starts after the restore
REDUCE_SESSIONS = [
    (e(K2, 0, 1), []),
    (e(K2, 1000, 2), []),
    (e(K2, 2500, 3), []),
    (SNAP, []),
    (e(K1, 10, 1), []),
    (e(K1, 1000, 2), []),
    (e(K1, 2500, 3), []),
    *SESSIONS[7:],
]


def _sorted(expected: list) -> list:
    """Records between two watermarks in the harness's order (sorted by repr)."""
    out: list = []
    run: list = []
    for ev in expected:
        if ev[0] == "wm":
            out += [*sorted(run, key=repr), ev]
            run = []
        else:
            run.append(ev)
    return out + sorted(run, key=repr)


async def _check(harness: WindowHarness, table: list) -> None:
    outputs = await run_script(harness, [step for step, _ in table])
    for (step, expected), got in zip(table, outputs, strict=True):
        assert got == _sorted(expected), step


@pytest.mark.parametrize("kind", list(SUM_FUNCTIONS))
async def test_sliding_event_time_windows(kind: str) -> None:
    """WindowOperatorTest.testSlidingEventTimeWindowsReduce / testSlidingEventTimeWindowsApply:
    every window of an element fires once at its end, across a snapshot and restore."""
    harness = WindowHarness(SlidingEventTimeWindows.of(3000, 1000), SUM_FUNCTIONS[kind])
    await _check(harness, SLIDING)


@pytest.mark.parametrize("kind", list(SUM_FUNCTIONS))
async def test_tumbling_event_time_windows(kind: str) -> None:
    """WindowOperatorTest.testTumblingEventTimeWindowsReduce / testTumblingEventTimeWindowsApply."""
    harness = WindowHarness(TumblingEventTimeWindows.of(3000), SUM_FUNCTIONS[kind])
    await _check(harness, TUMBLING)


@pytest.mark.parametrize("kind", list(SESSION_FUNCTIONS))
async def test_session_windows(kind: str) -> None:
    """WindowOperatorTest.testSessionWindows / testSessionWindowsWithProcessFunction: sessions
    merge across a snapshot and restore; two elements at the same timestamp both count."""
    harness = WindowHarness(EventTimeSessionWindows.with_gap(3000), SESSION_FUNCTIONS[kind])
    await _check(harness, SESSIONS)


@pytest.mark.parametrize("kind", list(SESSION_FUNCTIONS))
async def test_reduce_session_windows(kind: str) -> None:
    """WindowOperatorTest.testReduceSessionWindows / testReduceSessionWindowsWithProcessFunction:
    the merged session's reduced state survives a snapshot taken before the other key starts."""
    harness = WindowHarness(EventTimeSessionWindows.with_gap(3000), SESSION_FUNCTIONS[kind])
    await _check(harness, REDUCE_SESSIONS)


@pytest.mark.parametrize("kind", list(SUM_FUNCTIONS))
async def test_side_output_due_to_lateness_sliding(kind: str) -> None:
    """WindowOperatorTest.testSideOutputDueToLatenessSliding: windows of 3 s sliding by 1 s,
    lateness 0. An element at 2400 after the watermark 3000 is dropped from its window ending
    at 2999 but kept in the later two, so it is not late; an element all of whose windows
    have passed goes to the side output."""
    harness = WindowHarness(SlidingEventTimeWindows.of(3000, 1000), SUM_FUNCTIONS[kind])
    table = [
        (e(K2, 1000), []),
        (w(1999), [((K2, 1), 1999), ("wm", 1999)]),
        (e(K2, 2000), []),
        (w(3000), [((K2, 2), 2999), ("wm", 3000)]),
        (e(K1, 3001), []),
        (e(K2, 2400), []),
        (e(K2, 2400), []),
        (e(K1, 3001), []),
        (e(K2, 3900), []),
        (
            w(6000),
            [
                ((K2, 5), 3999),
                ((K1, 2), 3999),
                ((K2, 4), 4999),
                ((K1, 2), 4999),
                ((K2, 1), 5999),
                ((K1, 2), 5999),
                ("wm", 6000),
            ],
        ),
        (e(K1, 3001), [(LATE, (K1, 1), 3001)]),
        (w(25000), [("wm", 25000)]),
    ]
    await _check(harness, table)


@pytest.mark.parametrize("kind", list(SUM_FUNCTIONS))
async def test_side_output_due_to_lateness_tumbling(kind: str) -> None:
    """WindowOperatorTest.testSideOutputDueToLatenessTumbling: windows of 2 s, lateness 0; the
    late element goes to the side output with its own timestamp."""
    harness = WindowHarness(TumblingEventTimeWindows.of(2000), SUM_FUNCTIONS[kind])
    table = [
        (e(K2, 1000), []),
        (w(1985), [("wm", 1985)]),
        (e(K2, 1980), []),
        (w(1999), [((K2, 2), 1999), ("wm", 1999)]),
        (e(K2, 1998), [(LATE, (K2, 1), 1998)]),
        (e(K2, 2001), []),
        (w(2999), [("wm", 2999)]),
        (w(3999), [((K2, 1), 3999), ("wm", 3999)]),
    ]
    await _check(harness, table)


@pytest.mark.parametrize("kind", list(SUM_FUNCTIONS))
async def test_lateness_with_a_purging_trigger(kind: str) -> None:
    """WindowOperatorTest.testLateness: windows of 2 s, allowed lateness 500, a
    PurgingTrigger(EventTimeTrigger): an element within the lateness fires its window again
    with that element alone (the first firing purged the rest); one past the window's end +
    lateness goes to the side output."""
    harness = WindowHarness(
        TumblingEventTimeWindows.of(2000),
        SUM_FUNCTIONS[kind],
        lateness=500,
        trigger=PurgingTrigger.of(EventTimeTrigger.create()),
    )
    table = [
        (e(K2, 500), []),
        (w(1500), [("wm", 1500)]),
        (e(K2, 1300), []),
        (w(2300), [((K2, 2), 1999), ("wm", 2300)]),
        (e(K2, 1997), [((K2, 1), 1999)]),
        (w(6000), [("wm", 6000)]),
        (e(K2, 1998), [(LATE, (K2, 1), 1998)]),
        (w(7000), [("wm", 7000)]),
    ]
    await _check(harness, table)


class _InPlaceSum(sf.ReduceFunction):
    """A reduce function changing its first argument in place and returning it (PyFlink's own
    ``_accumulate`` idiom for Row and list records)."""

    def reduce(self, a: list, b: list) -> list:
        a[1] += b[1]
        return a


def _in_place_job(assigner: Any, data: list, lateness: int = 0, evict: bool = False) -> list:
    from streamflow.windowing import CountEvictor, CountTrigger

    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, t: r[2])
    windowed = (
        env.from_collection(data)
        .set_parallelism(1)
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda r: r[0])
        .window(assigner)
    )
    if evict:
        windowed = windowed.trigger(CountTrigger.of(1)).evictor(CountEvictor.of(3))
    return [
        tuple(r[:2]) for r in windowed.allowed_lateness(lateness).reduce(_InPlaceSum()).execute_and_collect()
    ]


def test_a_reduce_changing_its_first_argument_in_place_in_sliding_windows() -> None:
    """WindowOperatorTest's sliding windows (testSlidingEventTimeWindowsReduce) with a reduce
    function that changes its first argument in place: an element belongs to several windows,
    and in Flink each window's ReducingState holds its own serialized copy, so the windows
    [-5, 5), [0, 10), [5, 15), [10, 20) sum to 3, 7, 12, 8. streamflow put the same element
    object into every window's pane and each window's reduce changed the others' (9, 9, ...),
    and the collection read was changed too."""
    from streamflow.windowing import SlidingEventTimeWindows

    data = [["a", 1, 1], ["a", 2, 2], ["a", 4, 6], ["a", 8, 12]]
    got = _in_place_job(SlidingEventTimeWindows.of(10, 5), data)
    assert sorted(got) == [("a", 3), ("a", 7), ("a", 8), ("a", 12)]
    assert data == [["a", 1, 1], ["a", 2, 2], ["a", 4, 6], ["a", 8, 12]]


def test_a_reduce_changing_its_first_argument_in_place_with_a_late_firing() -> None:
    """WindowOperatorTest.testLateness's accumulating case with such a function: the firing at
    the window's end emits 3; a late element within the allowed lateness fires the window
    again with 6; the first result, already emitted, stays 3 (Flink emits a serialized copy)."""
    from streamflow.testing import ListSink, Record, ScriptedSource
    from streamflow.windowing import TumblingEventTimeWindows

    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    sink = ListSink()
    script = [Record(["a", 1], 1), Record(["a", 2], 2), sf.Watermark(20), Record(["a", 3], 3)]
    (
        env.from_source(ScriptedSource(script), None, "script")
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(10))
        .allowed_lateness(100)
        .reduce(_InPlaceSum())
        .sink_to(sink)
    )
    env.execute()
    assert [tuple(r) for r in sink.results] == [("a", 3), ("a", 6)]


def test_a_reduce_changing_its_first_argument_in_place_with_an_evictor() -> None:
    """EvictingWindowOperatorTest's count evictor (CountTrigger(1) + CountEvictor(3) over a
    global window) with such a function: each firing folds the last three elements, which
    stay as they came (Flink's evicting window state holds serialized elements), so the sums
    are 1, 3, 6, 9, 12, 15; folding the stored first element in place made them 1, 3, 8, ..."""
    from streamflow.windowing import GlobalWindows

    data = [["a", v, v] for v in range(1, 7)]
    got = _in_place_job(GlobalWindows.create(), data, evict=True)
    assert got == [("a", 1), ("a", 3), ("a", 6), ("a", 9), ("a", 12), ("a", 15)]


class _CollectingAggregate(sf.AggregateFunction):
    """Collects the values in a list accumulator and returns the accumulator itself."""

    def create_accumulator(self) -> list:
        return []

    def add(self, value: Any, accumulator: list) -> list:
        accumulator.append(value[1])
        return accumulator

    def get_result(self, accumulator: list) -> list:
        return accumulator

    def merge(self, a: list, b: list) -> list:
        return a + b


@pytest.mark.parametrize("assigner", ["tumbling", "sliding"])
def test_an_aggregate_result_that_is_its_accumulator_with_a_late_firing(assigner: str) -> None:
    """WindowOperatorTest.testLateness's accumulating case with an AggregateFunction whose
    ``get_result`` returns its accumulator: the firing at the window's end emits [1, 2]; a late
    element within the allowed lateness fires again with [1, 2, 3]; the first result, already
    emitted, stays [1, 2] (Flink emits a serialized copy; its AggregatingState keeps the
    accumulator)."""
    from streamflow.testing import ListSink, Record, ScriptedSource

    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    sink = ListSink()
    script = [Record(("a", 1), 1), Record(("a", 2), 2), sf.Watermark(20), Record(("a", 3), 3)]
    windows = (
        TumblingEventTimeWindows.of(10) if assigner == "tumbling" else SlidingEventTimeWindows.of(10, 10)
    )
    (
        env.from_source(ScriptedSource(script), None, "script")
        .key_by(lambda r: r[0])
        .window(windows)
        .allowed_lateness(100)
        .aggregate(_CollectingAggregate())
        .sink_to(sink)
    )
    env.execute()
    assert sink.results == [[1, 2], [1, 2, 3]]
