"""Flink's ``EvictingWindowOperatorTest``, ported on streamflow's WindowOperator.

Source: apache/flink, ``flink-streaming-java/src/test/java/org/apache/flink/streaming/
runtime/operators/windowing/EvictingWindowOperatorTest.java``. Each test names its Java
test; the input, trigger, evictor and expected output are Flink's. The window function is
Flink's ``RichSumReducer`` (emits ``(key, sum of the values)``), or its ``SumReducer`` as a
reduce function for ``testCountTrigger``. A global window's results carry
``Long.MAX_VALUE`` (``GlobalWindow.max_timestamp()``). ``testTimeEvictorNoTimestamp`` is in
``tests/test_windowing.py``. The evictors' own rules are table-tested there too; the
``DeltaEvictor`` rule (Flink's ``DeltaEvictor.java``) is tested here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from window_harness import WindowHarness, run_script

from streamflow.runtime.events import MAX_WATERMARK
from streamflow.runtime.window_context import WindowFunctions
from streamflow.windowing import (
    CountEvictor,
    CountTrigger,
    DeltaEvictor,
    DeltaFunction,
    EventTimeTrigger,
    Evictor,
    GlobalWindows,
    TimeEvictor,
    TumblingEventTimeWindows,
)

MAX = MAX_WATERMARK  # Flink's Long.MAX_VALUE: the timestamp of a global window's results


def _rich_sum(key: Any, ctx: Any, elements: Any) -> list:
    """Flink's RichSumReducer: ``(key, sum of f1)``."""
    return [(key, sum(value for _, value in elements))]


def _sum_reducer(a: tuple, b: tuple) -> tuple:
    """Flink's SumReducer."""
    return (a[0], a[1] + b[1])


RICH_SUM: Callable[[], WindowFunctions] = lambda: WindowFunctions(process=_rich_sum)  # noqa: E731
SUM_REDUCE: Callable[[], WindowFunctions] = lambda: WindowFunctions(reduce=_sum_reducer)  # noqa: E731


class NewMinusOld(DeltaFunction):
    """The test's DeltaFunction: ``newDataPoint.f1 - oldDataPoint.f1``."""

    def get_delta(self, old_data_point: Any, new_data_point: Any) -> float:
        return new_data_point[1] - old_data_point[1]


def _e(key: str, value: int, ts: int) -> tuple:
    return ("e", key, value, ts)


# the input shared by most of Flink's global-window cases: phase 1, then phase 2
ONES_1 = [
    _e("key2", 1, 3000), _e("key2", 1, 3999),
    _e("key1", 1, 20), _e("key1", 1, 0), _e("key1", 1, 999),
    _e("key2", 1, 1998), _e("key2", 1, 1999), _e("key2", 1, 1000),
]  # fmt: skip
ONES_2 = [_e("key1", 1, 10999), _e("key2", 1, 1000)]
DELTA_1 = [
    _e("key2", 1, 3000), _e("key2", 4, 3999),
    _e("key1", 1, 20), _e("key1", 1, 0), _e("key1", 5, 999),
    _e("key2", 5, 1998), _e("key2", 6, 1999), _e("key2", 1, 1000),
]  # fmt: skip

# name: (functions, assigner, trigger, evictor, [(input, expected output of that phase)])
CASES: dict[str, tuple[Callable[[], WindowFunctions], Any, Any, Evictor, list[tuple[list, list]]]] = {
    "testCountEvictorEvictAfter": (
        RICH_SUM,
        GlobalWindows.create(),
        CountTrigger.of(2),
        CountEvictor.of(4, True),
        [
            (ONES_1, [(("key2", 2), MAX), (("key2", 4), MAX), (("key1", 2), MAX)]),
            (ONES_2, [(("key1", 4), MAX), (("key2", 6), MAX)]),
            ([_e("key2", 1, 1000), _e("key2", 1, 1000)], [(("key2", 6), MAX)]),
        ],
    ),
    "testTimeEvictorEvictAfter": (
        RICH_SUM,
        GlobalWindows.create(),
        CountTrigger.of(2),
        TimeEvictor.of(2000, True),
        [
            (
                [
                    _e("key2", 1, 1000),
                    _e("key2", 1, 4000),
                    _e("key1", 1, 20),
                    _e("key1", 1, 0),
                    _e("key1", 1, 999),
                    _e("key2", 1, 3500),
                    _e("key2", 1, 2001),
                    _e("key2", 1, 1001),
                ],
                [(("key2", 2), MAX), (("key1", 2), MAX), (("key2", 3), MAX)],
            ),
            ([_e("key1", 1, 10999), _e("key2", 1, 1002)], [(("key1", 4), MAX), (("key2", 5), MAX)]),
        ],
    ),
    "testTimeEvictorEvictBefore": (
        RICH_SUM,
        TumblingEventTimeWindows.of(4000),
        CountTrigger.of(2),
        TimeEvictor.of(2000),
        [
            (
                [
                    _e("key2", 1, 1000),
                    _e("key2", 1, 3999),
                    _e("key1", 1, 20),
                    _e("key1", 1, 0),
                    _e("key1", 1, 999),
                    _e("key1", 1, 5999),
                    _e("key2", 1, 3500),
                    _e("key2", 1, 2001),
                    _e("key2", 1, 1001),
                ],
                [(("key2", 1), 3999), (("key1", 2), 3999), (("key2", 3), 3999)],
            ),
            ([_e("key1", 1, 6500), _e("key2", 1, 1002)], [(("key1", 2), 7999), (("key2", 3), 3999)]),
        ],
    ),
    "testDeltaEvictorEvictBefore": (
        RICH_SUM,
        GlobalWindows.create(),
        CountTrigger.of(2),
        DeltaEvictor.of(2, NewMinusOld(), False),
        [
            (DELTA_1, [(("key2", 4), MAX), (("key2", 11), MAX), (("key1", 2), MAX)]),
            ([_e("key1", 3, 10999), _e("key2", 10, 1000)], [(("key1", 8), MAX), (("key2", 10), MAX)]),
        ],
    ),
    "testDeltaEvictorEvictAfter": (
        RICH_SUM,
        GlobalWindows.create(),
        CountTrigger.of(2),
        DeltaEvictor.of(2, NewMinusOld(), True),
        [
            (DELTA_1, [(("key2", 5), MAX), (("key2", 15), MAX), (("key1", 2), MAX)]),
            ([_e("key1", 9, 10999), _e("key2", 10, 1000)], [(("key1", 16), MAX), (("key2", 22), MAX)]),
        ],
    ),
    "testCountTrigger": (
        SUM_REDUCE,
        GlobalWindows.create(),
        CountTrigger.of(2),
        CountEvictor.of(4),
        [
            (ONES_1, [(("key2", 2), MAX), (("key2", 4), MAX), (("key1", 2), MAX)]),
            (ONES_2, [(("key1", 4), MAX), (("key2", 4), MAX)]),
        ],
    ),
    "testCountTriggerWithApply": (
        RICH_SUM,
        GlobalWindows.create(),
        CountTrigger.of(2),
        CountEvictor.of(4),
        [
            (ONES_1, [(("key2", 2), MAX), (("key2", 4), MAX), (("key1", 2), MAX)]),
            (ONES_2, [(("key1", 4), MAX), (("key2", 4), MAX)]),
        ],
    ),
}


def _records(steps: list[list[tuple]]) -> list[tuple]:
    return sorted((event for step in steps for event in step if event[0] != "wm"), key=repr)


@pytest.mark.parametrize("name", list(CASES))
async def test_evicting_window_operator(name: str) -> None:
    """The EvictingWindowOperatorTest case ``name``: after each phase of input, the results
    so far are Flink's (compared sorted, as ``assertOutputEqualsSorted``)."""
    functions, assigner, trigger, evictor, phases = CASES[name]
    harness = WindowHarness(assigner, functions, trigger=trigger, evictor=evictor)
    await harness.op.open()
    expected: list[tuple] = []
    seen: list[list[tuple]] = []
    for inputs, phase_expected in phases:
        seen.extend([await harness.step(step) for step in inputs])
        expected.extend(phase_expected)
        assert _records(seen) == sorted(expected, key=repr), name
    await harness.op.close()


async def test_tumbling_window_with_apply() -> None:
    """EvictingWindowOperatorTest.testTumblingWindowWithApply: an event-time tumbling window
    with a CountEvictor(4) before its function: six elements of key1 in [0, 4000) sum to 4."""
    harness = WindowHarness(
        TumblingEventTimeWindows.of(4000),
        RICH_SUM,
        trigger=EventTimeTrigger.create(),
        evictor=CountEvictor.of(4),
    )
    script = [
        _e("key1", 1, 10), _e("key1", 1, 100), ("w", 1999),
        _e("key1", 1, 1997), _e("key1", 1, 1998),
        _e("key1", 1, 2310), _e("key1", 1, 2310),  # not late but more than 4
        _e("key2", 1, 2310), _e("key2", 1, 2310),
        ("w", 3999),  # now is the evictor
    ]  # fmt: skip
    out = [event for step in await run_script(harness, script) for event in step]
    assert out == [("wm", 1999), (("key1", 4), 3999), (("key2", 2), 3999), ("wm", 3999)]


# ============================================================================ DeltaEvictor rule

PANE = [(1, ("k", 1)), (2, ("k", 4)), (3, ("k", 5)), (4, ("k", 6)), (5, ("k", 5))]


@pytest.mark.parametrize(
    ("evictor", "before", "after"),
    [
        # delta to the last (5): 4, 1, 0, -1, 0 -> only the first is >= 2
        (DeltaEvictor.of(2, NewMinusOld()), PANE[1:], PANE),
        (DeltaEvictor.of(2, NewMinusOld(), True), PANE, PANE[1:]),
        (DeltaEvictor.of(0, lambda old, new: new[1] - old[1]), [(4, ("k", 6))], PANE),
        (DeltaEvictor.of(100.5, NewMinusOld()), PANE, PANE),
    ],
    ids=["before", "after", "callable, threshold 0 keeps only negative deltas", "nothing over"],
)
def test_delta_evictor(evictor: DeltaEvictor, before: list, after: list) -> None:
    """Flink's DeltaEvictor.evict: drop each element whose ``getDelta(element, last) >=
    threshold``, in place, before or after the function as ``doEvictAfter`` says."""
    pane = list(PANE)
    evictor.evict_before(pane, len(pane), None, None)  # type: ignore[arg-type]
    assert pane == before
    pane = list(PANE)
    evictor.evict_after(pane, len(pane), None, None)  # type: ignore[arg-type]
    assert pane == after
    empty: list = []
    evictor.evict_before(empty, 0, None, None)  # type: ignore[arg-type]
    evictor.evict_after(empty, 0, None, None)  # type: ignore[arg-type]
    assert empty == []


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: DeltaEvictor.of("2", NewMinusOld()), TypeError),
        (lambda: DeltaEvictor.of(2, object()), TypeError),
    ],
)
def test_delta_evictor_invalid_arguments(make: Callable[[], object], error: type[Exception]) -> None:
    """A DeltaEvictor needs a numeric threshold and a DeltaFunction (or a callable)."""
    with pytest.raises(error):
        make()


def test_delta_evictor_through_the_datastream_api() -> None:
    """EvictingWindowOperatorTest.testDeltaEvictorEvictBefore's input through
    ``key_by().window(GlobalWindows).trigger(CountTrigger.of(2)).evictor(DeltaEvictor)``: the
    same results as on the operator (the evicted elements are gone from later firings)."""
    import streamflow as sf

    env = sf.StreamExecutionEnvironment()
    steps = [*DELTA_1, _e("key1", 3, 10999), _e("key2", 10, 1000)]
    stream = env.from_collection([(key, value) for _, key, value, _ in steps])
    sums = (
        stream.key_by(lambda e: e[0])
        .window(GlobalWindows.create())
        .trigger(CountTrigger.of(2))
        .evictor(DeltaEvictor.of(2, NewMinusOld()))
        .reduce(_sum_reducer)
    )
    assert sorted(sums.execute_and_collect()) == [
        ("key1", 2),
        ("key1", 8),
        ("key2", 4),
        ("key2", 10),
        ("key2", 11),
    ]


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
def test_time_evictor_refuses_an_element_without_a_timestamp_behind_one_with(after: bool) -> None:
    """Flink's TimeEvictor evicts only when the pane's first element has a timestamp, and then
    reads every element's: ``TimestampedValue.getTimestamp()`` of one without throws
    IllegalStateException (TimeEvictor.getMaxTimestamp). The job fails with Flink's message
    instead of keeping the element."""
    pane: list = [(1000, ("k", 1)), (None, ("k", 2)), (3000, ("k", 3))]
    evictor = TimeEvictor.of(1000, after)
    evict = evictor.evict_after if after else evictor.evict_before
    with pytest.raises(RuntimeError, match="Record has no timestamp"):
        evict(pane, len(pane), None, None)  # type: ignore[arg-type]
    untimed: list = [(None, ("k", 1)), (3000, ("k", 3))]
    evict(untimed, len(untimed), None, None)  # type: ignore[arg-type]
    assert untimed == [(None, ("k", 1)), (3000, ("k", 3))]  # the first has none: nothing evicted
