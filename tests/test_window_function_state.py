"""Keyed state in window functions, as in PyFlink: ``runtime_context.get_state`` in ``open``
and ``context.global_state()`` are scoped to the key of the window that fires;
``context.window_state()`` to the key and the window (cleared by the function's ``clear``),
all checkpointed. Before, ``window_state()``/``global_state()`` did not exist and the
state a ``ProcessWindowFunction`` read while a pane fired was the last key's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_checkpointing import Gate, wait_until

import streamflow as sf
from streamflow.common import Time, Types, WatermarkStrategy
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.functions import AggregateFunction, ProcessWindowFunction, RuntimeContext
from streamflow.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from streamflow.datastream.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from streamflow.testing import ListSink, Record, ScriptedSource

STRATEGY = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])


def _windows(env: StreamExecutionEnvironment, data: list, assigner: Any) -> Any:
    timed = env.from_collection(data).assign_timestamps_and_watermarks(STRATEGY)
    return timed.key_by(lambda e: e[0]).window(assigner)


class CountFirings(ProcessWindowFunction):
    """A per-key count of firings kept in the runtime context's keyed state."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.INT()))

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield key, context.window().start, n


def test_runtime_context_state_is_the_firing_windows_key() -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    data = [("a", 1000), ("b", 2000), ("a", 6000), ("b", 7000), ("a", 11000)]
    out = list(
        _windows(env, data, TumblingEventTimeWindows.of(Time.seconds(5)))
        .process(CountFirings())
        .execute_and_collect()
    )
    assert sorted(out) == [("a", 0, 1), ("a", 5000, 2), ("a", 10000, 3), ("b", 0, 1), ("b", 5000, 2)]


CLEARED: list = []


class Firings(ProcessWindowFunction):
    """Per window: how often it fired (a late element fires it again) and what it saw, with
    every kind of state; per key (global): firings over all windows."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        ws, gs = context.window_state(), context.global_state()
        fired = ws.get_state(ValueStateDescriptor("fired", Types.INT()))
        seen = ws.get_list_state(ListStateDescriptor("seen", Types.INT()))
        marks = ws.get_map_state(MapStateDescriptor("marks", Types.INT(), Types.BOOLEAN()))
        total = ws.get_reducing_state(ReducingStateDescriptor("total", lambda a, b: a + b, Types.INT()))
        avg = ws.get_aggregating_state(AggregatingStateDescriptor("avg", Avg(), Types.PICKLED_BYTE_ARRAY()))
        everywhere = gs.get_state(ValueStateDescriptor("everywhere", Types.INT()))
        fired.update((fired.value() or 0) + 1)
        values = [e[1] for e in elements]
        seen.add_all(values)
        for v in values:
            marks.put(v, True)
            total.add(v)
            avg.add(v)
        everywhere.update((everywhere.value() or 0) + 1)
        yield (
            key,
            context.window().start,
            fired.value(),
            len(seen.get()),
            sorted(marks.keys()),
            total.get(),
            avg.get(),
            everywhere.value(),
        )

    def clear(self, context: Any) -> None:
        ws = context.window_state()
        before = ws.get_state(ValueStateDescriptor("fired", Types.INT())).value()
        ws.get_state(ValueStateDescriptor("fired", Types.INT())).clear()
        ws.get_list_state(ListStateDescriptor("seen", Types.INT())).clear()
        ws.get_map_state(MapStateDescriptor("marks", Types.INT(), Types.BOOLEAN())).clear()
        ws.get_reducing_state(ReducingStateDescriptor("total", lambda a, b: a + b, Types.INT())).clear()
        ws.get_aggregating_state(AggregatingStateDescriptor("avg", Avg(), Types.PICKLED_BYTE_ARRAY())).clear()
        after = ws.get_state(ValueStateDescriptor("fired", Types.INT())).value()
        CLEARED.append(
            (context.window().start, before, after, ws.get_list_state(ListStateDescriptor("seen")).get())
        )


class Avg(AggregateFunction):
    def create_accumulator(self) -> Any:
        return (0, 0)

    def add(self, value: Any, accumulator: Any) -> Any:
        return accumulator[0] + value, accumulator[1] + 1

    def get_result(self, accumulator: Any) -> Any:
        return accumulator[0] / accumulator[1]

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        return acc_a[0] + acc_b[0], acc_a[1] + acc_b[1]


def test_window_state_is_per_window_and_global_state_per_key() -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    env.set_batch_size(1)
    # sliding windows of 10 s every 5 s: each element is in two windows; the second "a" at
    # 4000 is late for nothing (allowed lateness keeps window [0, 10) firing on it again)
    data = [("a", 1000), ("a", 6000), ("b", 2000), ("a", 16000), ("a", 4000)]
    stream = _windows(env, data, SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5)))
    out = sorted(stream.process(Firings()).execute_and_collect())
    a = [r for r in out if r[0] == "a"]
    assert [r[1:6] for r in a] == [
        (-5000, 1, 2, [1000, 4000], 5000),
        (0, 1, 3, [1000, 4000, 6000], 11000),
        (5000, 1, 1, [6000], 6000),
        (10000, 1, 1, [16000], 16000),
        (15000, 1, 1, [16000], 16000),
    ]
    assert sorted(r[7] for r in a) == [1, 2, 3, 4, 5]  # global: firings of all of a's windows
    assert sorted(r[7] for r in out if r[0] == "b") == [1, 2]


def test_window_state_is_cleared_with_the_window_and_kept_until_then() -> None:
    """Allowed lateness: a late element fires window [0, 5000) again; its window state still
    holds the first firing's; once the window is cleaned up, ``clear`` has emptied it."""
    CLEARED.clear()
    source = ScriptedSource(
        [
            Record(("a", 1000), 1000),
            sf.Watermark(6000),  # fires [0, 5000)
            Record(("a", 2000), 2000),  # late, within the allowed lateness: fires it again
            sf.Watermark(16000),  # past 5000 + 10000: [0, 5000) is cleaned up (clear())
            Record(("a", 15500), 15500),  # [15000, 20000)
            sf.Watermark(21000),
        ]
    )
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    sink = ListSink()
    windows = env.from_source(source, None, "scripted").key_by(lambda e: e[0])
    windows.window(TumblingEventTimeWindows.of(Time.seconds(5))).allowed_lateness(10_000).process(
        Firings()
    ).sink_to(sink)
    env.execute()
    # the second firing sees both elements (2 more in "seen") and the first firing's state
    assert [r[1:4] for r in sink.results] == [(0, 1, 1), (0, 2, 3), (15000, 1, 1)]
    assert [r[7] for r in sink.results] == [1, 2, 3]  # global state is kept
    # clear() ran for both windows (the second at the end of input) and emptied their state
    assert CLEARED == [(0, 2, None, []), (15000, 1, None, [])]


class FiringsOfThisWindow(ProcessWindowFunction):
    """Counts its window's firings in window state."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        n = context.window_state().get_state(ValueStateDescriptor("n", Types.INT()))
        n.update((n.value() or 0) + 1)
        yield key, n.value(), sum(v for _, v in elements)


@pytest.mark.parametrize("windows", ["global", "count"])
async def test_window_state_of_global_and_count_windows_survives_a_snapshot(windows: str) -> None:
    """Window state is a map state keyed by the window: a global or a count window is not a
    value the state codec encodes, so the first checkpoint of a job using window_state()
    with GlobalWindows or count windows failed (a time window is a named tuple, it did not)."""
    from window_harness import WindowHarness, run_script

    from streamflow.runtime.window_context import window_functions
    from streamflow.windowing import CountTrigger, GlobalWindows
    from streamflow.windowing.count import CountTumblingWindowAssigner

    assigner: Any = GlobalWindows.create() if windows == "global" else CountTumblingWindowAssigner.of(2)
    trigger = CountTrigger.of(2) if windows == "global" else None
    harness = WindowHarness(
        assigner, lambda: window_functions(window_function=FiringsOfThisWindow()), trigger=trigger
    )
    steps = [("e", "a", 1, 0), ("e", "a", 2, 0), ("snap",), ("e", "a", 3, 0), ("e", "a", 4, 0), ("snap",)]
    outputs = await run_script(harness, steps)
    fired = [event[0] for out in outputs for event in out]
    # the global window fires twice and counts both firings; each count window fires once
    assert fired == [("a", 1, 3), ("a", 2, 10) if windows == "global" else ("a", 1, 7)]


def test_per_window_state_is_refused_with_merging_windows() -> None:
    class Uses(ProcessWindowFunction):
        def process(self, key: Any, context: Any, elements: Any) -> Any:
            context.window_state().get_state(ValueStateDescriptor("x", Types.INT()))
            yield key

    env = StreamExecutionEnvironment.get_execution_environment()
    stream = _windows(env, [("a", 1)], EventTimeSessionWindows.with_gap(Time.seconds(1))).process(Uses())
    with pytest.raises(Exception, match="Per-window state is not allowed when using merging windows"):
        list(stream.execute_and_collect())


class TtlList(ProcessWindowFunction):
    """Adds each element to its window's list state with a TTL of one second."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        d = ListStateDescriptor("x", Types.INT())
        d.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(1)).build())
        state = context.window_state().get_list_state(d)
        *_, (_, value) = elements
        state.add(value)
        yield key, state.get()


async def test_window_list_state_with_a_ttl_keeps_its_timestamps_through_a_snapshot() -> None:
    """Per-window list state with a TTL (was refused) is stored as (value, timestamp) elements
    in the window's entry: after a snapshot and restore through the codec the element written
    at 0 still expires at 1000 and the one written at 500 does not."""
    from window_harness import WindowHarness

    from streamflow.runtime.window_context import window_functions
    from streamflow.windowing import CountTrigger, GlobalWindows

    functions = lambda: window_functions(window_function=TtlList())  # noqa: E731
    harness = WindowHarness(GlobalWindows.create(), functions, trigger=CountTrigger.of(1))
    await harness.op.open()
    out = []
    script: list[tuple[int, Any]] = [(0, ("e", "a", 1, 0)), (500, ("e", "a", 2, 0)), (500, ("snap",))]
    for at, step in [*script, (1200, ("e", "a", 3, 0))]:
        harness.clock.set(at)
        out += [event[0] for event in await harness.step(step)]
    await harness.op.close()
    assert out == [("a", [1]), ("a", [1, 2]), ("a", [2, 3])]


class RunningTotal(ProcessWindowFunction):
    """Global state: a running total per key across windows; window state: this window's sum."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        mine = sum(e[2] for e in elements)
        total = context.global_state().get_state(ValueStateDescriptor("total", Types.LONG()))
        total.update((total.value() or 0) + mine)
        here = context.window_state().get_state(ValueStateDescriptor("here", Types.LONG()))
        here.update((here.value() or 0) + mine)
        yield key, context.window().start, here.value(), total.value()


DATA = [(f"k{i % 3}", i * 10, 1) for i in range(60)]  # (key, timestamp ms, value)


async def test_window_and_global_state_survive_a_savepoint_at_another_parallelism(tmp_path: Path) -> None:
    gate = Gate(DATA, 35)  # the savepoint in the middle of window [300, 400)

    def build(env: sf.StreamExecutionEnvironment, source: sf.DataStream, out: list) -> None:
        timed = source.uid("src").assign_timestamps_and_watermarks(STRATEGY).uid("wm").set_parallelism(1)
        windows = timed.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.milliseconds(100)))
        windows.process(RunningTotal()).uid("totals").add_sink(out.append)

    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    out1: list = []
    build(env, env.from_async_iterable(gate.__aiter__), out1)
    client = await env.execute_async("totals")
    await wait_until(lambda: len(out1) == 9)  # windows 0, 100, 200 of the three keys
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()

    env2 = sf.StreamExecutionEnvironment().set_parallelism(3)
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    build(env2, env2.from_collection(DATA), out2)
    await (await env2.execute_async("totals")).get_job_execution_result()
    got = sorted(out1 + out2)
    expected = []
    for key in ("k0", "k1", "k2"):
        total = 0
        for start in range(0, 600, 100):
            n = sum(1 for k, ts, _ in DATA if k == key and start <= ts < start + 100)
            total += n
            expected.append((key, start, n, total))
    assert got == sorted(expected)


def test_a_process_all_window_function_has_window_and_global_state_and_is_cleared() -> None:
    from streamflow.datastream.functions import ProcessAllWindowFunction

    cleared: list = []

    class All(ProcessAllWindowFunction):
        def process(self, context: Any, elements: Any) -> Any:
            n = context.global_state().get_state(ValueStateDescriptor("n", Types.INT()))
            n.update((n.value() or 0) + 1)
            here = context.window_state().get_list_state(ListStateDescriptor("here", Types.INT()))
            here.add_all(e[1] for e in elements)
            yield context.window().start, n.value(), here.get()

        def clear(self, context: Any) -> None:
            here = context.window_state().get_list_state(ListStateDescriptor("here", Types.INT()))
            cleared.append((context.window().start, here.get()))
            here.clear()

    env = StreamExecutionEnvironment.get_execution_environment()
    timed = env.from_collection([("a", 1000), ("b", 2000), ("a", 6000)]).assign_timestamps_and_watermarks(
        STRATEGY
    )
    out = list(
        timed.window_all(TumblingEventTimeWindows.of(Time.seconds(5))).process(All()).execute_and_collect()
    )
    assert out == [(0, 1, [1000, 2000]), (5000, 2, [6000])]
    assert cleared == [(0, [1000, 2000]), (5000, [6000])]
