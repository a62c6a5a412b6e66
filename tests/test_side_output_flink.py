"""Ports of Flink's side-output integration tests onto streamflow's public DataStream API.

Source (apache/flink):
flink-tests/src/test/java/org/apache/flink/test/streaming/runtime/SideOutputITCase.java.
Flink's ``ctx.output(tag, value)`` is PyFlink's (and streamflow's) ``yield tag, value``; Flink's
``TestListResultSink.getSortedResult()`` is ``sorted(ListSink().results)``.
"""

from __future__ import annotations

from typing import Any

import pytest

from streamflow.common import Types, WatermarkStrategy
from streamflow.datastream import OutputTag, StreamExecutionEnvironment
from streamflow.datastream.functions import (
    CoProcessFunction,
    KeyedProcessFunction,
    ProcessAllWindowFunction,
    ProcessFunction,
    ProcessWindowFunction,
)
from streamflow.datastream.window import SlidingEventTimeWindows, TumblingEventTimeWindows
from streamflow.eventtime import WatermarkGenerator
from streamflow.graph import GraphError
from streamflow.runtime.events import Watermark
from streamflow.testing import ListSink, Record, ScriptedSource

ELEMENTS = [1, 2, 5, 3, 4]
SIDE = ["sideout-1", "sideout-2", "sideout-3", "sideout-4", "sideout-5"]


def _env(parallelism: int = 3) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment().set_parallelism(parallelism)


class _Split(ProcessFunction):
    """Flink's anonymous ProcessFunction: the value to the main output, ``sideout-v`` to each tag."""

    def __init__(self, *tags: OutputTag, extra: Any = None) -> None:
        self.tags, self.extra = tags, extra

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value
        for tag in self.tags:
            yield tag, f"sideout-{value}"
        if self.extra is not None:
            yield self.extra, 13


def _punctuated(env: StreamExecutionEnvironment, parallelism: int | None = None) -> Any:
    """Flink's TestWatermarkAssigner: timestamp = the element, a watermark after each element."""
    stream = env.from_collection(ELEMENTS, type_info=Types.INT())
    if parallelism is not None:
        stream = stream.set_parallelism(parallelism)

    class Punctuated(WatermarkGenerator):
        def on_event(self, event: Any, ts: int, output: Any) -> None:
            output.emit_watermark(Watermark(ts))

        def on_periodic_emit(self, output: Any) -> None:
            pass

    strategy = WatermarkStrategy.for_generator(Punctuated).with_timestamp_assigner(lambda e, ts: e)
    return stream.assign_timestamps_and_watermarks(strategy)


def test_side_output_with_multiple_consumers() -> None:
    """SideOutputITCase#testSideOutputWithMultipleConsumers (and ...WithObjectReuse)."""
    env, tag = _env(), OutputTag("side", Types.STRING())
    side1, side2, main = ListSink(), ListSink(), ListSink()
    stream = env.from_collection(ELEMENTS, type_info=Types.INT()).process(_Split(tag), Types.INT())
    stream.get_side_output(tag).sink_to(side1)
    stream.get_side_output(tag).sink_to(side2)
    stream.sink_to(main)
    env.execute()
    assert sorted(side1.results) == SIDE and sorted(side2.results) == SIDE
    assert sorted(main.results) == [1, 2, 3, 4, 5]


def test_different_side_output_types() -> None:
    """SideOutputITCase#testDifferentSideOutputTypes."""
    env = _env()
    tag1, tag2 = OutputTag("string", Types.STRING()), OutputTag("int", Types.INT())
    side1, side2, main = ListSink(), ListSink(), ListSink()
    stream = env.from_collection(ELEMENTS, type_info=Types.INT()).process(
        _Split(tag1, extra=tag2), Types.INT()
    )
    stream.get_side_output(tag1).sink_to(side1)
    stream.get_side_output(tag2).sink_to(side2)
    stream.sink_to(main)
    env.execute()
    assert sorted(side1.results) == SIDE
    assert side2.results == [13] * 5
    assert sorted(main.results) == [1, 2, 3, 4, 5]


def test_side_output_name_clash() -> None:
    """SideOutputITCase#testSideOutputNameClash: the same tag id with another type is refused when
    the second side output is requested (Flink: UnsupportedOperationException "A side output with
    a matching id was already requested with a different type")."""
    env = _env()
    tag1, tag2 = OutputTag("side", Types.STRING()), OutputTag("side", Types.INT())
    stream = env.from_collection(ELEMENTS, type_info=Types.INT()).process(
        _Split(tag1, extra=tag2), Types.INT()
    )
    stream.get_side_output(tag1).sink_to(ListSink())
    with pytest.raises(GraphError, match="different type"):
        stream.get_side_output(tag2)


def test_process_function_side_output() -> None:
    """SideOutputITCase#testProcessFunctionSideOutput."""
    env, tag = _env(), OutputTag("side", Types.STRING())
    side, main = ListSink(), ListSink()
    stream = env.from_collection(ELEMENTS, type_info=Types.INT()).process(_Split(tag), Types.INT())
    stream.get_side_output(tag).sink_to(side)
    stream.sink_to(main)
    env.execute()
    assert sorted(side.results) == SIDE and sorted(main.results) == [1, 2, 3, 4, 5]


def test_keyed_process_function_side_output() -> None:
    """SideOutputITCase#testKeyedProcessFunctionSideOutput."""

    class KeyedSplit(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield value
            yield tag, f"sideout-{value}"

    env, tag = _env(), OutputTag("side", Types.STRING())
    side, main = ListSink(), ListSink()
    stream = (
        env.from_collection(ELEMENTS, type_info=Types.INT())
        .key_by(lambda v: v)
        .process(KeyedSplit(), Types.INT())
    )
    stream.get_side_output(tag).sink_to(side)
    stream.sink_to(main)
    env.execute()
    assert sorted(side.results) == SIDE and sorted(main.results) == [1, 2, 3, 4, 5]


def test_co_process_function_side_output() -> None:
    """SideOutputITCase#testCoProcessFunctionSideOutput (newer Flink): both inputs emit to the tag."""

    class CoSplit(CoProcessFunction):
        def process_element1(self, value: Any, ctx: Any) -> Any:
            yield value
            yield tag, f"sideout1-{value}"

        def process_element2(self, value: Any, ctx: Any) -> Any:
            yield value
            yield tag, f"sideout2-{value}"

    env, tag = _env(), OutputTag("side", Types.STRING())
    side, main = ListSink(), ListSink()
    ints = env.from_collection(ELEMENTS, type_info=Types.INT())
    stream = ints.connect(env.from_collection([6], type_info=Types.INT())).process(CoSplit(), Types.INT())
    stream.get_side_output(tag).sink_to(side)
    stream.sink_to(main)
    env.execute()
    assert sorted(side.results) == [f"sideout1-{v}" for v in (1, 2, 3, 4, 5)] + ["sideout2-6"]
    assert sorted(main.results) == [1, 2, 3, 4, 5, 6]


def test_process_function_side_output_with_wrong_tag() -> None:
    """SideOutputITCase#testProcessFunctionSideOutputWithWrongTag: nothing reaches an unused tag."""
    env = _env()
    emitted, requested = OutputTag("other-side", Types.STRING()), OutputTag("side", Types.STRING())
    side = ListSink()
    stream = env.from_collection(ELEMENTS, type_info=Types.INT()).process(_Split(emitted), Types.INT())
    stream.get_side_output(requested).sink_to(side)
    env.execute()
    assert side.results == []


def test_watermark_forwarding() -> None:
    """SideOutputITCase#testWatermarkForwarding: every side output carries the operator's
    watermarks (a process function after each output records the watermark it sees)."""

    class Reify(ProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield value, ctx.timer_service().current_watermark()

    tag1, tag2 = OutputTag("side", Types.STRING()), OutputTag("other-side", Types.STRING())
    env = _env(1)
    script = [
        Record(1, 0),
        Watermark(0),
        Record(2, 1),
        Record(5, 2),
        Watermark(2),
        Record(3, 3),
        Record(4, 4),
    ]
    stream = env.from_source(ScriptedSource(script), None, "src").process(_Split(tag1, tag2), Types.INT())
    side1, side2, main = ListSink(), ListSink(), ListSink()
    stream.get_side_output(tag1).process(Reify()).sink_to(side1)
    stream.get_side_output(tag2).process(Reify()).sink_to(side2)
    stream.map(str, Types.STRING()).process(Reify()).sink_to(main)
    env.execute()
    for sink, prefix in ((side1, "sideout-"), (side2, "sideout-"), (main, "")):
        seen = {value: wm for value, wm in sink.results}
        assert seen[f"{prefix}2"] == 0 and seen[f"{prefix}5"] == 0
        assert seen[f"{prefix}3"] == 2 and seen[f"{prefix}4"] == 2


def test_all_window_late_arriving_events() -> None:
    """SideOutputITCase#testAllWindowLateArrivingEvents: 3 and 4 arrive after watermark 5."""
    env, late = _env(1), OutputTag("late", Types.INT())
    sink = ListSink()
    window = (
        _punctuated(env)
        .window_all(SlidingEventTimeWindows.of(1, 1))
        .side_output_late_data(late)
        .apply(lambda window, values: list(values), Types.INT())
    )
    window.get_side_output(late).flat_map(lambda v: [f"late-{v}"], Types.STRING()).sink_to(sink)
    env.execute()
    assert sorted(sink.results) == ["late-3", "late-4"]


def test_keyed_window_late_arriving_events() -> None:
    """SideOutputITCase#testKeyedWindowLateArrivingEvents: with 2 ms allowed lateness only 3 is late
    (watermark 5 > window [3, 4)'s max 3 + 2 - ... : Flink drops a window when max_ts + lateness <= wm)."""
    env, late = _env(1), OutputTag("late", Types.INT())
    main, late_sink = ListSink(), ListSink()
    window = (
        _punctuated(env)
        .key_by(lambda v: v)
        .window(SlidingEventTimeWindows.of(1, 1))
        .allowed_lateness(2)
        .side_output_late_data(late)
        .apply(lambda key, w, values: [f"{key}-{v}" for v in values], Types.STRING())
    )
    window.sink_to(main)
    window.get_side_output(late).sink_to(late_sink)
    env.execute()
    assert sorted(main.results) == ["1-1", "2-2", "4-4", "5-5"]
    assert late_sink.results == [3]


def test_process_window_function_side_output() -> None:
    """SideOutputITCase#testProcessdWindowFunctionSideOutput."""

    class Fn(ProcessWindowFunction):
        def process(self, key: Any, context: Any, elements: Any) -> Any:
            yield key
            yield tag, f"sideout-{key}"

    env, tag = _env(), OutputTag("side", Types.STRING())
    main, side = ListSink(), ListSink()
    window = (
        _punctuated(env, 1)
        .key_by(lambda v: v)
        .window(TumblingEventTimeWindows.of(1))
        .process(Fn(), Types.INT())
    )
    window.get_side_output(tag).sink_to(side)
    window.sink_to(main)
    env.execute()
    assert sorted(side.results) == ["sideout-1", "sideout-2", "sideout-5"]
    assert sorted(main.results) == [1, 2, 5]


def test_process_all_window_function_side_output() -> None:
    """SideOutputITCase#testProcessdAllWindowFunctionSideOutput."""

    class Fn(ProcessAllWindowFunction):
        def process(self, context: Any, elements: Any) -> Any:
            for e in elements:
                yield e
                yield tag, f"sideout-{e}"

    env, tag = _env(1), OutputTag("side", Types.STRING())
    main, side = ListSink(), ListSink()
    window = _punctuated(env).window_all(TumblingEventTimeWindows.of(1)).process(Fn(), Types.INT())
    window.get_side_output(tag).sink_to(side)
    window.sink_to(main)
    env.execute()
    assert sorted(side.results) == ["sideout-1", "sideout-2", "sideout-5"]
    assert sorted(main.results) == [1, 2, 5]


def test_side_output_of_a_side_output_is_refused() -> None:
    """Flink's getSideOutput returns a plain DataStream (a SideOutputTransformation), which has no
    getSideOutput: asking a side output for another side output is refused, not silently answered
    with the producing operator's other tag."""
    env, tag, other = _env(), OutputTag("side", Types.STRING()), OutputTag("other", Types.STRING())
    side = (
        env.from_collection(ELEMENTS, type_info=Types.INT())
        .process(_Split(tag, other), Types.INT())
        .get_side_output(tag)
    )
    with pytest.raises(GraphError, match="side output"):
        side.get_side_output(other)


def test_side_output_of_a_union_is_refused() -> None:
    """Flink: only a SingleOutputStreamOperator has getSideOutput; a union is no operator."""
    env, tag = _env(), OutputTag("side", Types.STRING())
    a = env.from_collection(ELEMENTS, type_info=Types.INT())
    with pytest.raises(GraphError):
        a.union(env.from_collection([6], type_info=Types.INT())).get_side_output(tag)


def test_timestamp_assigner_takes_its_inputs_parallelism() -> None:
    """Flink's DataStream#assignTimestampsAndWatermarks ("match parallelism to input, to have a 1:1
    source -> timestamps/watermarks relationship and chain"), which SideOutputITCase's window tests
    rely on: after a non-parallel from_collection the assigner runs at 1 and sees every element in
    order (3 and 4 are then late); at the environment's 3 the elements would be spread round robin
    and the combined watermark would make nothing late."""
    env = _env(3)
    assigned = _punctuated(env)
    assigned.sink_to(ListSink())
    node = assigned._node
    graph = env.get_job_graph()
    assert graph.parallelism[node.id] == 1
    mapped = assigned.rebalance().map(str).set_parallelism(2)
    again = mapped.assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps())
    again.sink_to(ListSink())
    assert env.get_job_graph().parallelism[again._node.id] == 2


def test_side_output_of_a_keyed_stream_is_refused() -> None:
    """Flink: KeyedStream is a DataStream, not a SingleOutputStreamOperator, so it has no
    getSideOutput (PyFlink's call fails in the JVM); streamflow served the side output of the
    operator before key_by()."""
    env, tag = _env(), OutputTag("side", Types.STRING())
    split = env.from_collection(ELEMENTS, type_info=Types.INT()).process(_Split(tag), Types.INT())
    with pytest.raises(GraphError, match="get_side_output on a KeyedStream"):
        split.key_by(lambda v: v).get_side_output(tag)


class _Stamp(ProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value, ctx.timestamp()


def test_side_output_records_keep_the_element_timestamp() -> None:
    """Flink's ProcessOperator.ContextImpl#output emits with the current element's timestamp, and
    WindowOperator#sideOutput emits a late element with its own timestamp."""
    env, tag, late = _env(1), OutputTag("side", Types.STRING()), OutputTag("late", Types.INT())
    side, late_sink = ListSink(), ListSink()
    stream = _punctuated(env).process(_Split(tag), Types.INT())
    stream.get_side_output(tag).process(_Stamp()).sink_to(side)
    window = (
        stream.key_by(lambda v: v % 2)
        .window(TumblingEventTimeWindows.of(1))
        .side_output_late_data(late)
        .reduce(lambda a, b: a + b)
    )
    window.get_side_output(late).process(_Stamp()).sink_to(late_sink)
    env.execute()
    assert sorted(side.results) == [(f"sideout-{v}", v) for v in (1, 2, 3, 4, 5)]
    assert sorted(late_sink.results) == [(3, 3), (4, 4)]


def test_timer_side_output() -> None:
    """KeyedProcessFunction's OnTimerContext#output (Flink's KeyedProcessOperator): a timer emits
    to a side output, with the timer's timestamp."""

    class Timed(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service().register_event_time_timer(value + 10)
            return []

        def on_timer(self, timestamp: int, ctx: Any) -> Any:
            yield tag, f"timer-{ctx.get_current_key()}"

    env, tag, side = _env(1), OutputTag("timers", Types.STRING()), ListSink()
    stream = _punctuated(env).key_by(lambda v: v).process(Timed(), Types.INT())
    stream.get_side_output(tag).process(_Stamp()).sink_to(side)
    env.execute()
    assert sorted(side.results) == [(f"timer-{v}", v + 10) for v in (1, 2, 3, 4, 5)]


def test_session_window_late_data_side_output() -> None:
    """WindowOperator#processElement for merging windows: an element is late when its merged
    window's max timestamp + allowed lateness <= the watermark (isWindowLate(actualWindow))."""
    from streamflow.datastream.window import EventTimeSessionWindows

    env, late, main, late_sink = _env(1), OutputTag("late", Types.INT()), ListSink(), ListSink()
    window = (
        _punctuated(env)
        .key_by(lambda v: 0)
        .window(EventTimeSessionWindows.with_gap(1))
        .side_output_late_data(late)
        .reduce(lambda a, b: a + b, output_type=Types.INT())
    )
    window.sink_to(main)
    window.get_side_output(late).sink_to(late_sink)
    env.execute()
    # each watermark equals its element's timestamp, so 1's session [1, 2) fires (and is purged)
    # at watermark 1 before 2 arrives, 2's at 2, 5's at the end; 3's session [3, 4) and 4's [4, 5)
    # end before watermark 5: late
    assert sorted(main.results) == [1, 2, 5] and sorted(late_sink.results) == [3, 4]


def test_union_of_main_and_side_output_at_another_parallelism() -> None:
    """SideOutputITCase's consumers read a side output like any stream: it unions with the main
    output of the same operator, and a consumer at another parallelism gets every record."""
    env, tag = _env(2), OutputTag("side", Types.STRING())
    union, rescaled = ListSink(), ListSink()
    stream = env.from_collection(ELEMENTS, type_info=Types.INT()).process(_Split(tag), Types.INT())
    stream.map(str, Types.STRING()).union(stream.get_side_output(tag)).sink_to(union)
    stream.get_side_output(tag).map(str.upper, Types.STRING()).set_parallelism(3).sink_to(rescaled)
    env.execute()
    assert sorted(union.results) == sorted(["1", "2", "3", "4", "5", *SIDE])
    assert sorted(rescaled.results) == [s.upper() for s in SIDE]
