"""Window join, co-group and interval join (Flink Java's semantics, snake_case names)."""

from __future__ import annotations

import asyncio
from typing import Any

import streamflow as sf
from streamflow.common import WatermarkStrategy
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.functions import ProcessFunction
from streamflow.datastream.window import TumblingEventTimeWindows
from streamflow.testing import ListSink, Record, ScriptedSource


def _timed(env, data):
    return env.from_collection(data).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])
    )


ORDERS = [("alice", 1, "o1"), ("bob", 2, "o2"), ("alice", 12, "o3"), ("carol", 15, "o4")]
PAYMENTS = [("alice", 3, "p1"), ("alice", 5, "p2"), ("bob", 14, "p3"), ("carol", 16, "p4")]


def test_window_join_pairs_per_key_and_window() -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    sink = ListSink()
    _timed(env, ORDERS).join(_timed(env, PAYMENTS)).where(lambda o: o[0]).equal_to(lambda p: p[0]).window(
        TumblingEventTimeWindows.of(10)
    ).apply(lambda o, p: (o[2], p[2])).sink_to(sink)
    env.execute()
    # bob's order (window 0) and payment (window 10) never meet: an inner join per window
    assert sorted(sink.results) == [("o1", "p1"), ("o1", "p2"), ("o4", "p4")]


def test_co_group_sees_both_sides_even_when_one_is_empty() -> None:
    class Count:
        def co_group(self, orders, payments):
            orders, payments = list(orders), list(payments)
            key = (orders or payments)[0][0]
            return [(key, len(orders), len(payments))]

    env = StreamExecutionEnvironment.get_execution_environment()
    sink = ListSink()
    _timed(env, ORDERS).co_group(_timed(env, PAYMENTS)).where(lambda o: o[0]).equal_to(lambda p: p[0]).window(
        TumblingEventTimeWindows.of(10)
    ).apply(Count()).sink_to(sink)
    env.execute()
    assert sorted(sink.results) == [
        ("alice", 1, 0),
        ("alice", 1, 2),
        ("bob", 0, 1),
        ("bob", 1, 0),
        ("carol", 1, 1),
    ]


def test_interval_join_bounds_and_timestamps() -> None:
    """IntervalJoinOperatorTest's rule: left at t joins right in [t + lower, t + upper]."""
    from streamflow.api.joins import ProcessJoinFunction

    class Pair(ProcessJoinFunction):
        def process_element(self, left, right, ctx):
            yield left[2], right[2], ctx.get_timestamp()

    def run(lower_exclusive: bool) -> list:
        env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
        sink = ListSink()
        payments = [("bob", 1, "p0"), *PAYMENTS]  # exactly on the lower bound of o2 (2 - 1)
        joined = (
            _timed(env, ORDERS)
            .key_by(lambda o: o[0])
            .interval_join(_timed(env, payments).key_by(lambda p: p[0]))
            .between(-1, 4)
        )
        if lower_exclusive:
            joined = joined.lower_bound_exclusive()
        joined.process(Pair()).sink_to(sink)
        env.execute()
        return sorted(sink.results)

    # alice: o1@1 with p1@3, p2@5 (in [0, 5]); o3@12 with nothing; bob: o2@2 with p0@1 only
    # when the lower bound is inclusive;
    # carol: o4@15 with p4@16 (in [14, 19])
    assert run(False) == [("o1", "p1", 3), ("o1", "p2", 5), ("o2", "p0", 2), ("o4", "p4", 16)]
    assert run(True) == [("o1", "p1", 3), ("o1", "p2", 5), ("o4", "p4", 16)]


async def _interval_join(lower: int, upper: int, steps: list) -> tuple[list, Any]:
    """Runs Flink's IntervalJoinOperator port on one key: ``("L", ts)`` / ``("R", ts)`` elements,
    ``("W", ts)`` watermarks; returns the results as ``((left ts, right ts), record ts)``."""
    from window_harness import MAX_PARALLELISM, Recorder

    from streamflow.api.joins import _IntervalJoinFunction, _IntervalJoinOperator
    from streamflow.runtime.context import OperatorContext
    from streamflow.runtime.events import Watermark
    from streamflow.runtime.metrics import MetricGroup
    from streamflow.runtime.operator import Output
    from streamflow.runtime.processing_time import ProcessingTimeService
    from streamflow.state.keyed import KeyedStateBackend
    from streamflow.testing import ManualClock

    fn = _IntervalJoinFunction(lambda left, right, ctx: [(left[1], right[1])], lower, upper)
    op = _IntervalJoinOperator("join", lambda e: e[0], lambda e: e[0], fn)
    clock = ManualClock(0)
    ctx = OperatorContext(
        uid="join",
        name="join",
        task_name="join",
        subtask_index=0,
        parallelism=1,
        max_parallelism=MAX_PARALLELISM,
        clock=clock,
        metrics=MetricGroup("join[0]", {}),
        processing_time=ProcessingTimeService(clock, lambda: None),
        keyed_backend=KeyedStateBackend(MAX_PARALLELISM),
    )
    out = Recorder()
    op.setup(ctx, Output([out], {}))
    op.initialize_state(None)
    await op.open()
    for side, ts in steps:
        if side == "W":
            await op.process_watermark(Watermark(ts))
        elif side == "L":
            await op.process_batch([("k", ts)], [ts])
        else:
            await op.process_batch2([("k", ts)], [ts])
    op.backend.current_key = "k"
    buffered = (sorted(fn.left.keys()), sorted(fn.right.keys()))
    await op.close()
    return [event for event in out.events if event[0] != "wm"], buffered


async def test_an_interval_join_result_carries_the_larger_timestamp() -> None:
    """The left element arrives after the right one, with the smaller timestamp: the result's
    record timestamp is the right's (Flink: collector.setAbsoluteTimestamp(max)), not the
    arriving element's (before: 98, so a window downstream put it in the wrong window)."""
    results, _ = await _interval_join(2, 10, [("R", 100), ("L", 98)])
    assert results == [((98, 100), 100)]


async def test_an_interval_join_with_a_negative_upper_bound_keeps_left_elements_until_their_time() -> None:
    """Flink's cleanup time of a left element is ``ts + upper`` only if ``upper > 0``, else
    ``ts``: a right element at the watermark (not late) still joins it. It was dropped at
    ``ts + upper``, before that right element came."""
    results, _ = await _interval_join(-10, -2, [("R", 98), ("L", 100), ("W", 98), ("R", 98)])
    assert results == [((100, 98), 100), ((100, 98), 100)]


async def test_an_interval_join_with_asymmetric_bounds_cleans_up_both_sides() -> None:
    """A right element's cleanup timer was registered with the shadowed relative bound
    (``ts + upper`` instead of ``ts - lower``): with bounds that are not symmetric its timer
    removed another instant, so right elements stayed in state for ever."""
    steps = [("L", 100), ("R", 101), ("R", 100), ("L", 103), ("R", 110), ("W", 200)]
    results, buffered = await _interval_join(-1, 4, steps)
    assert sorted(results) == [((100, 100), 100), ((100, 101), 101)]
    assert buffered == ([], [])


def test_a_window_join_flattens_what_a_flat_join_function_yields() -> None:
    """Flink's JoinedStreams.apply(FlatJoinFunction) collects every result join() emits; the
    window join emitted the generator object that join() returned, as one record."""
    from streamflow.datastream.functions import FlatJoinFunction

    class Both(FlatJoinFunction):
        def join(self, first: Any, second: Any) -> Any:
            yield first[2], second[2]
            yield second[2], first[2]

    env = StreamExecutionEnvironment.get_execution_environment()
    sink = ListSink()
    _timed(env, ORDERS).join(_timed(env, PAYMENTS)).where(lambda o: o[0]).equal_to(lambda p: p[0]).window(
        TumblingEventTimeWindows.of(10)
    ).apply(Both()).sink_to(sink)
    env.execute()
    assert sorted(sink.results) == sorted(
        [("o1", "p1"), ("p1", "o1"), ("o1", "p2"), ("p2", "o1"), ("o4", "p4"), ("p4", "o4")]
    )


async def _interval_join_run(lower: int, upper: int, first: Any, watermark: int, second: Any) -> list:
    """``first`` (side, name, ts) is buffered, both inputs reach ``watermark``, then ``second``
    arrives exactly at the watermark (not late); returns the joined (left, right, timestamp)."""

    class Stamp(ProcessFunction):
        def process_element(self, value, ctx):
            yield (*value, ctx.timestamp())

    sources = {"L": ScriptedSource([], end=False), "R": ScriptedSource([], end=False)}
    env = sf.StreamExecutionEnvironment()
    sink = ListSink()
    left = env.from_source(sources["L"], None, "left").key_by(lambda e: e[0])
    right = env.from_source(sources["R"], None, "right").key_by(lambda e: e[0])
    left.interval_join(right).between(lower, upper).process(lambda a, b, ctx: [(a[1], b[1])]).process(
        Stamp()
    ).sink_to(sink)
    client = await env.execute_async()
    for step in (first, watermark, second):
        if isinstance(step, int):
            for source in sources.values():
                source.push(sf.Watermark(step))
        else:
            sources[step[0]].push(Record(("k", step[1]), step[2]))
        for _ in range(200):
            await asyncio.sleep(0)
    for source in sources.values():
        source.finish()
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    return sink.results


async def test_interval_join_result_carries_the_larger_timestamp() -> None:
    """IntervalJoinOperator: a pair's timestamp is max(left, right), also when the element
    arriving last is the earlier one (it was the arriving element's before)."""
    assert await _interval_join_run(-5, 5, ("L", "l", 5), 0, ("R", "r", 3)) == [("l", "r", 5)]
    assert await _interval_join_run(-5, 5, ("R", "r", 5), 0, ("L", "l", 3)) == [("l", "r", 5)]


async def test_interval_join_cleanup_times_follow_flink_for_one_sided_bounds() -> None:
    """Flink's cleanup time of an element at t is t + upper (right: t - lower) when that is
    after t, else t itself; an element of the other side at the watermark (not late) still
    joins a buffered one whose cleanup time has not passed, and misses one whose has."""
    # between(-5, -1): the left at 10 stays until the watermark reaches 10 -> the right at 9 joins
    assert await _interval_join_run(-5, -1, ("L", "l", 10), 9, ("R", "r", 9)) == [("l", "r", 10)]
    # between(1, 5): the right at 10 stays until 10 -> the left at 9 joins
    assert await _interval_join_run(1, 5, ("R", "r", 10), 9, ("L", "l", 9)) == [("l", "r", 10)]
    # between(-1, 4): the right at 10 is cleaned at 11 (it was never cleaned: its timer
    # removed the entry at 13) -> the left at 11 arriving at watermark 11 no longer joins it
    assert await _interval_join_run(-1, 4, ("R", "r", 10), 11, ("L", "l", 11)) == []
    # between(-5, 5): the left at 0 is cleaned at 5 -> the right at 5 misses it (as in Flink)
    assert await _interval_join_run(-5, 5, ("L", "l", 0), 5, ("R", "r", 5)) == []


async def test_interval_join_sends_late_elements_to_each_sides_late_data_output() -> None:
    """Flink's ``sideOutputLeftLateData``/``sideOutputRightLateData``: an element behind the
    watermark joins nothing and goes to its side's late-data output with its timestamp (without
    a tag it is dropped); elements at the watermark still join."""

    class Stamp(ProcessFunction):
        def process_element(self, value, ctx):
            yield (*value, ctx.timestamp())

    async def run(parallelism: int, with_tags: bool) -> tuple[list, list, list]:
        sources = {"L": ScriptedSource([], end=False), "R": ScriptedSource([], end=False)}
        env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
        left_late, right_late = sf.OutputTag("left-late"), sf.OutputTag("right-late")
        sinks = ListSink(), ListSink(), ListSink()
        left = env.from_source(sources["L"], None, "left").set_parallelism(1).key_by(lambda e: e[0])
        right = env.from_source(sources["R"], None, "right").set_parallelism(1).key_by(lambda e: e[0])
        joined = left.interval_join(right).between(-2, 2)
        if with_tags:
            joined = joined.side_output_left_late_data(left_late).side_output_right_late_data(right_late)
        result = joined.process(lambda a, b, ctx: [(a[1], b[1])])
        result.process(Stamp()).sink_to(sinks[0])
        result.get_side_output(left_late).process(Stamp()).sink_to(sinks[1])
        result.get_side_output(right_late).process(Stamp()).sink_to(sinks[2])
        client = await env.execute_async()
        steps = [("L", "k", "l10", 10), ("R", "k", "r10", 10), 10]
        steps += [("L", "k", "l4", 4), ("R", "k", "r9", 9), ("R", "j", "r10b", 10), ("L", "j", "l3", 3)]
        for step in steps:
            if isinstance(step, int):
                for source in sources.values():
                    source.push(sf.Watermark(step))
            else:
                sources[step[0]].push(Record((step[1], step[2]), step[3]))
            for _ in range(200):
                await asyncio.sleep(0)
        for source in sources.values():
            source.finish()
        await asyncio.wait_for(client.get_job_execution_result(), 60)
        return sorted(sinks[0].results), sorted(sinks[1].results), sorted(sinks[2].results)

    joined = [("l10", "r10", 10)]  # r10b, at the watermark, is not late but has no partner
    for parallelism in (1, 4):
        assert await run(parallelism, True) == (joined, [("j", "l3", 3), ("k", "l4", 4)], [("k", "r9", 9)])
        assert await run(parallelism, False) == (joined, [], [])
