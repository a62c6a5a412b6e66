"""The tumbling event-time fast path against the general window path, and both against Flink.

Scenarios are ported from Flink's ``WindowOperatorTest`` (flink-streaming-java,
``runtime/operators/windowing/WindowOperatorTest.java``): each step is fed to
the operator and the expected output of that step (records sorted between
watermarks, as ``assertOutputEqualsSorted``) is checked, first for Flink's
``SumReducer`` on both paths, then every scenario runs through both paths with
every window function kind and the outputs must be identical. A property test
does the same on random scripts.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from window_harness import FUNCTIONS, LATE, Step, WindowHarness, run_script

import streamflow as sf
from streamflow.runtime.events import MAX_WATERMARK
from streamflow.testing import ListSink, Record, ScriptedSource
from streamflow.windowing import TumblingEventTimeWindows

K1, K2 = "key1", "key2"


def e(key: str, ts: int, value: int = 1) -> Step:
    return ("e", key, value, ts)


def w(ts: int) -> Step:
    return ("w", ts)


SNAP: Step = ("snap",)

_OVERFLOW_TS = MAX_WATERMARK - 1750
_OVERFLOW_MAX = _OVERFLOW_TS - (_OVERFLOW_TS % 1000) + 999

# name -> (window size, allowed lateness, [(step, expected output of the step for SumReducer)])
SCENARIOS: dict[str, tuple[int, int, list[tuple[Step, list]]]] = {
    "testTumblingEventTimeWindows": (
        3000,
        0,
        [
            (e(K2, 3999), []),
            (e(K2, 3000), []),
            (e(K1, 20), []),
            (e(K1, 0), []),
            (e(K1, 999), []),
            (e(K2, 1998), []),
            (e(K2, 1999), []),
            (e(K2, 1000), []),
            (w(999), [("wm", 999)]),
            (w(1999), [("wm", 1999)]),
            (SNAP, []),
            (w(2999), [((K1, 3), 2999), ((K2, 3), 2999), ("wm", 2999)]),
            (w(3999), [("wm", 3999)]),
            (w(4999), [("wm", 4999)]),
            (w(5999), [((K2, 2), 5999), ("wm", 5999)]),
            (w(6999), [("wm", 6999)]),
            (w(7999), [("wm", 7999)]),
        ],
    ),
    "testCleanupTimerWithEmptyReduceStateForTumblingWindows": (
        2000,
        1,
        [
            (e(K2, 1000), []),
            (w(1599), [("wm", 1599)]),
            (w(1999), [((K2, 1), 1999), ("wm", 1999)]),
            (w(2000), [("wm", 2000)]),  # the cleanup timer
            (w(5000), [("wm", 5000)]),
        ],
    ),
    "testDropDueToLatenessTumbling": (
        2000,
        0,
        [
            (e(K2, 1000), []),
            (w(1985), [("wm", 1985)]),
            (e(K2, 1980), []),  # not late: window.max_timestamp() + lateness > watermark
            (w(1999), [((K2, 2), 1999), ("wm", 1999)]),
            (e(K2, 1998), [(LATE, (K2, 1), 1998)]),  # late: to the side output
            (e(K2, 2001), []),
            (w(2999), [("wm", 2999)]),
            (w(3999), [((K2, 1), 3999), ("wm", 3999)]),
        ],
    ),
    # testLateness with the default (accumulating) trigger: a late element within the
    # allowed lateness fires its window again at once, with everything it holds
    "testLatenessAccumulating": (
        2000,
        500,
        [
            (e(K2, 500), []),
            (e(K2, 1300), []),
            (w(2300), [((K2, 2), 1999), ("wm", 2300)]),
            (e(K2, 1997), [((K2, 3), 1999)]),
            (w(6000), [("wm", 6000)]),
            (e(K2, 1998), [(LATE, (K2, 1), 1998)]),
            (w(7000), [("wm", 7000)]),
        ],
    ),
    # issue 8 item 3: a late element (within the lateness) into an already passed window
    # that never had an element fires it once, at once, and not again at the next watermark
    "lateElementIntoEmptyPassedWindow": (
        2000,
        3000,
        [
            (e(K1, 3000), []),
            (w(4000), [((K1, 1), 3999), ("wm", 4000)]),
            (e(K2, 1500), [((K2, 1), 1999)]),
            (w(4500), [("wm", 4500)]),
            (e(K2, 1600), [((K2, 2), 1999)]),
            (w(4999), [("wm", 4999)]),  # cleanup of [0, 2000): 1999 + 3000
            (e(K2, 1700), [(LATE, (K2, 1), 1700)]),
            (w(9000), [("wm", 9000)]),
        ],
    ),
    "lateElementIntoEmptyPassedWindowAcrossRestore": (
        2000,
        3000,
        [
            (w(4000), [("wm", 4000)]),
            (e(K2, 1500), [((K2, 1), 1999)]),
            (SNAP, []),
            (w(4500), [("wm", 4500)]),
            (e(K1, 1600), [((K1, 1), 1999)]),
            (SNAP, []),
            (w(6000), [("wm", 6000)]),
            (e(K1, 1600), [(LATE, (K1, 1), 1600)]),
        ],
    ),
    "lateElementIntoAnotherKeysFiredWindow": (
        2000,
        1000,
        [
            (e(K1, 100), []),
            (w(2100), [((K1, 1), 1999), ("wm", 2100)]),
            (e(K2, 200), [((K2, 1), 1999)]),
            (e(K1, 300), [((K1, 2), 1999)]),
            (w(2500), [("wm", 2500)]),
            (w(3000), [("wm", 3000)]),  # cleanup at 2999
            (e(K2, 400), [(LATE, (K2, 1), 400)]),
        ],
    ),
    "testCleanupTimeOverflow": (
        1000,
        2000,
        [
            (e(K2, _OVERFLOW_TS), []),
            (w(MAX_WATERMARK - 1500), [("wm", MAX_WATERMARK - 1500)]),
            (w(_OVERFLOW_MAX), [((K2, 1), _OVERFLOW_MAX), ("wm", _OVERFLOW_MAX)]),
        ],
    ),
}


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "general"])
@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_flink_window_operator_scenario(name: str, fast: bool) -> None:
    size, lateness, table = SCENARIOS[name]
    harness = WindowHarness(
        TumblingEventTimeWindows.of(size), FUNCTIONS["reduce"], lateness=lateness, fast=fast
    )
    outputs = await run_script(harness, [step for step, _ in table])
    for (step, expected), got in zip(table, outputs, strict=True):
        assert got == expected, f"after {step}"


@pytest.mark.parametrize("kind", list(FUNCTIONS))
@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_fast_path_equals_general_path(name: str, kind: str) -> None:
    size, lateness, table = SCENARIOS[name]
    script = [step for step, _ in table]
    outputs = {}
    for fast in (True, False):
        harness = WindowHarness(
            TumblingEventTimeWindows.of(size), FUNCTIONS[kind], lateness=lateness, fast=fast
        )
        outputs[fast] = await run_script(harness, script)
    assert outputs[True] == outputs[False]


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "general"])
async def test_a_record_after_the_maximum_watermark_is_late_whatever_the_lateness(fast: bool) -> None:
    """Flink's ``cleanupTime`` is ``Long.MAX_VALUE`` when the window's end plus the allowed
    lateness overflows, so once the watermark is ``Long.MAX_VALUE`` every window is late: a
    record for one goes to the late output, the window does not fire again."""
    harness = WindowHarness(
        TumblingEventTimeWindows.of(1000), FUNCTIONS["reduce"], lateness=2000, fast=fast
    )
    script = [e(K2, _OVERFLOW_TS), w(MAX_WATERMARK), e(K2, _OVERFLOW_TS + 1)]
    outputs = await run_script(harness, script)
    assert outputs[1] == [((K2, 1), _OVERFLOW_MAX), ("wm", MAX_WATERMARK)]
    assert [o[0] for o in outputs[2]] == [LATE]


_steps = st.one_of(
    st.tuples(st.just("e"), st.sampled_from([K1, K2, "key3"]), st.integers(1, 9), st.integers(0, 60)),
    st.tuples(st.just("w"), st.integers(-1, 70)),
    st.just(SNAP),
)


def _monotonic(script: list[Any]) -> list[Step]:
    """Watermarks never go back (the valve guarantees it upstream)."""
    out: list[Step] = []
    last = -(2**63)
    for step in script:
        if step[0] == "w":
            if step[1] <= last:
                continue
            last = step[1]
        out.append(step)
    return [*out, ("w", MAX_WATERMARK)]


async def _same_on_both_paths(script: list[Any], size: int, lateness: int, kind: str) -> None:
    steps = _monotonic(script)
    outputs = {}
    for fast in (True, False):
        harness = WindowHarness(
            TumblingEventTimeWindows.of(size), FUNCTIONS[kind], lateness=lateness, fast=fast
        )
        outputs[fast] = await run_script(harness, steps)
    assert outputs[True] == outputs[False], steps


@settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    script=st.lists(_steps, max_size=25),
    size=st.sampled_from([5, 10]),
    lateness=st.sampled_from([0, 3, 20]),
    kind=st.sampled_from(sorted(FUNCTIONS)),
)
async def test_fast_path_equals_general_path_on_random_scripts(
    script: list[Any], size: int, lateness: int, kind: str
) -> None:
    await _same_on_both_paths(script, size, lateness, kind)


_batches = st.one_of(
    st.tuples(
        st.just("b"),
        st.lists(
            st.tuples(st.sampled_from([K1, K2, "key3"]), st.integers(1, 9), st.integers(0, 60)),
            min_size=1,
            max_size=8,
        ),
    ),
    st.tuples(st.just("w"), st.integers(-1, 70)),
    st.just(SNAP),
)


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    script=st.lists(_batches, max_size=12),
    size=st.sampled_from([5, 10]),
    lateness=st.sampled_from([0, 3, 20]),
    kind=st.sampled_from(sorted(FUNCTIONS)),
)
async def test_fast_path_equals_general_path_on_random_batches(
    script: list[Any], size: int, lateness: int, kind: str
) -> None:
    """As above with batches of several records (a task hands a batch to the operator at
    once): the fast path's per-record loop carries a window from one record to the next."""
    await _same_on_both_paths(script, size, lateness, kind)


@pytest.mark.parametrize("lateness", [0, 10])
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "general"])
async def test_a_late_record_in_a_batch_does_not_fire_the_window_of_the_next_record(
    fast: bool, lateness: int
) -> None:
    """A batch holds a record of an open window, a record too late for its window, then
    another record of the open window. The fast path's per-record loop kept the late
    window's end for the third record (it reuses the window of the record before), took
    the open window for a passed one and fired it at once, partly filled; as fired, it
    did not fire at the watermark: key k's result was lost."""
    harness = WindowHarness(
        TumblingEventTimeWindows.of(100), FUNCTIONS["reduce"], lateness=lateness, fast=fast
    )
    outputs = await run_script(
        harness,
        [
            ("e", "k", 1, 150),
            w(120 + lateness),  # [0, 100) is past its cleanup time, [100, 200) open
            ("b", [("a", 1, 160), ("b", 1, 50), ("a", 1, 170)]),
            w(199 + lateness),
        ],
    )
    assert outputs == [
        [],
        [("wm", 120 + lateness)],
        [(LATE, ("b", 1), 50)],
        [(("a", 2), 199), (("k", 1), 199), ("wm", 199 + lateness)],
    ]


def test_late_element_into_an_empty_passed_window_fires_once_end_to_end() -> None:
    """Issue 8 item 3 through the public API: the late firing is not repeated by the next watermark."""
    source = ScriptedSource(
        [
            Record(("k1", 1), 3000),
            sf.Watermark(4000),  # [0, 2000) passed without an element
            Record(("k2", 1), 1500),  # late, within the allowed lateness: fires [0, 2000) at once
            sf.Watermark(4500),
            sf.Watermark(4600),
        ]
    )
    env = sf.StreamExecutionEnvironment()
    sink = ListSink()
    (
        env.from_source(source, None, "scripted")
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(2000))
        .allowed_lateness(3000)
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(sink)
    )
    env.execute()
    assert sorted(sink.results) == [("k1", 1), ("k2", 1)]


def _count_fires(key: Any, ctx: Any, elements: Any) -> list:
    """Counts this key's firings in its global state (keyed state of the key that fires)."""
    from streamflow.state.keyed import ValueStateDescriptor

    fires = ctx.global_state().get_state(ValueStateDescriptor("fires", None))
    fires.update((fires.value() or 0) + 1)
    return [(key, fires.value(), sum(v for _, v in elements))]


@pytest.mark.parametrize("fast", [True, False])
async def test_a_late_firing_reads_the_keyed_state_of_its_own_key(fast: bool) -> None:
    """Two late elements of two keys in one batch fire their passed window at once: each
    firing's keyed state is its own key's (the fast path left the key of the batch's last
    element set, so key a counted b's firings)."""
    from streamflow.runtime.events import Watermark
    from streamflow.runtime.window_context import WindowFunctions

    functions = lambda: WindowFunctions(process=_count_fires)  # noqa: E731
    harness = WindowHarness(TumblingEventTimeWindows.of(1000), functions, lateness=5000, fast=fast)
    op = harness.op
    await op.open()
    await op.process_batch([("a", 1), ("b", 2)], [10, 20])
    await op.process_watermark(Watermark(2000))  # fires [0, 1000) for a and b
    await op.process_batch([("b", 3), ("a", 4)], [30, 40])  # late, within the lateness: fire again
    await op.close()
    fired = [event for event in harness.main.events if event[0] != "wm"]
    assert fired == [(("a", 1, 1), 999), (("b", 1, 2), 999), (("b", 2, 5), 999), (("a", 2, 5), 999)]


class _Rec(list):
    """A record the test can hold a weak reference to (``e[0]`` is its key)."""


async def test_a_pane_dropped_at_its_firing_releases_each_keys_elements_as_it_fires() -> None:
    """Without allowed lateness a pane is dropped right after it fired: each key's elements
    leave the pane as its function runs (freed while the function has just read them), not in
    a second pass over the whole pane. By the time the next key fires, nothing but the caller
    holds the elements of the keys fired before it; the output is unchanged."""
    import weakref

    from streamflow.runtime.events import Watermark
    from streamflow.runtime.window_context import WindowFunctions

    fired: list[list[weakref.ref]] = []
    alive_at_call: list[int] = []

    def process(key: Any, ctx: Any, elements: Any) -> list:
        alive_at_call.append(sum(r() is not None for refs in fired for r in refs))
        fired.append([weakref.ref(r) for r in elements])
        return [(key, sum(r[1] for r in elements))]

    harness = WindowHarness(
        TumblingEventTimeWindows.of(1000), lambda: WindowFunctions(process=process), fast=True
    )
    op = harness.op
    await op.open()
    records = [_Rec([f"k{i % 5}", i]) for i in range(50)]
    await op.process_batch(records, [i * 10 for i in range(50)])
    del records
    await op.process_watermark(Watermark(999))
    await op.close()
    assert [ev[0] for ev in harness.main.events if ev[0] != "wm"] == [
        (f"k{k}", sum(range(k, 50, 5))) for k in range(5)
    ]
    assert alive_at_call == [0, 0, 0, 0, 0]  # the previous keys' elements were gone already
    assert not op.panes


@pytest.mark.parametrize("kind", ["reduce", "process"])
async def test_a_job_without_checkpoints_forgets_the_tables_of_the_panes_it_dropped(kind: str) -> None:
    """An emptied pane table (a dict keeps its size when emptied) used to stay in the keyed
    backend until a checkpoint completed: a job without checkpoints kept one per window it
    ever closed. Now it is forgotten when it is dropped, when no checkpoint may name it."""
    from streamflow.runtime.events import Watermark
    from streamflow.runtime.window_panes import PREFIX

    harness = WindowHarness(TumblingEventTimeWindows.of(100), FUNCTIONS[kind], fast=True)
    op = harness.op
    await op.open()
    for window in range(30):
        await op.process_batch([(f"k{i}", 1) for i in range(20)], [window * 100 + i for i in range(20)])
        await op.process_watermark(Watermark(window * 100 + 99))
    assert op._pane_tables.backend.table_names(PREFIX) == []
    await op.process_batch([("k0", 1)], [3_000])  # a window still open keeps its table
    assert op._pane_tables.backend.table_names(PREFIX) == ["window-pane:3000:3100"]
    await op.close()
    assert len([ev for ev in harness.main.events if ev[0] != "wm"]) == 30 * 20


class _SumPerWindow(sf.ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return [(key, context.window().end, sum(e[1] for e in elements))]


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("lateness", [0, 150])
def test_tumbling_process_window_job_answers_exactly(parallelism: int, lateness: int) -> None:
    """The canonical W3 shape (bounded out-of-orderness, key_by, tumbling event-time windows,
    a ProcessWindowFunction) over many windows and keys, with and without allowed lateness,
    at parallelism 1 and 4, against the same sums computed directly."""
    n = 20_000
    perm = [(j * 37) % 100 for j in range(100)]
    events = [(f"k{i % 50}", i % 97, (i // 100) * 100 + perm[i % 100]) for i in range(n)]
    expected: dict[tuple[str, int], int] = {}
    for k, v, ts in events:
        end = (ts // 1000 + 1) * 1000
        expected[(k, end)] = expected.get((k, end), 0) + v
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    env.set_auto_watermark_interval(1)
    sink = ListSink()
    strategy = sf.WatermarkStrategy.for_bounded_out_of_orderness(200).with_timestamp_assigner(lambda e: e[2])
    (
        env.from_collection(events)
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(1000))
        .allowed_lateness(lateness)
        .process(_SumPerWindow())
        .sink_to(sink)
    )
    env.execute()
    got = {(k, end): s for k, end, s in sink.results}
    assert len(sink.results) == len(expected)
    assert got == expected
