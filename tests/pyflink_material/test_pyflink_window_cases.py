"""The cases of Apache Flink's ``flink-python/pyflink/datastream/tests/test_window.py``, on streamflow.

Ported from the newest version of the file available to us (apache/flink commit
``fdc34bb7bf1d2d057679733a5064237b991c976b``: 20 cases of ``WindowTests`` plus
``EmbeddedWindowTests.test_chained_window``; the apache-flink 2.3.0 wheel and sdist ship no
tests). Each test is one case of Flink's file: the same input, the same API calls (with
``streamflow`` where the original imports ``pyflink``) and the same expected output,
collected by the harness's stand-in for PyFlink's JVM test sink. Flink runs
``WindowTests`` twice, with ``python.execution-mode`` ``process`` (``ProcessWindowTests``)
and ``thread`` (``EmbeddedWindowTests``); so do these (the ``mode`` parameter: streamflow
accepts the option and runs functions in its own interpreter either way). Flink's test
base (``PyFlinkStreamingTestCase``) runs with parallelism 2. Where a case reaches into the
JVM (``test_side_output_late_data``: the JVM's per-element watermark generator and bundle
size), the port uses streamflow's own equivalent and says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from pyflink_harness import DataStreamTestSinkFunction, assert_equals_sorted, make_env

from streamflow.common import Configuration
from streamflow.common.time import Time
from streamflow.common.typeinfo import Types
from streamflow.common.watermark_strategy import TimestampAssigner, WatermarkStrategy
from streamflow.datastream.functions import (
    AggregateFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from streamflow.datastream.output_tag import OutputTag
from streamflow.datastream.window import (
    CountSlidingWindowAssigner,
    CountTrigger,
    CountWindow,
    EventTimeSessionWindows,
    EventTimeTrigger,
    GlobalWindows,
    PurgingTrigger,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
)
from streamflow.eventtime import Watermark, WatermarkGenerator, WatermarkOutput

HI = [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 5), ("hi", 8), ("hi", 9), ("hi", 15)]
AB = [("a", 1), ("a", 2), ("b", 3), ("a", 6), ("b", 8), ("b", 9), ("a", 15)]
STRING_INT = Types.TUPLE([Types.STRING(), Types.INT()])
COUNTS = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.INT()])


@pytest.fixture(params=["process", "thread"])
def env(request: pytest.FixtureRequest) -> Any:
    """ProcessWindowTests / EmbeddedWindowTests: the same cases in both python execution modes."""
    env = make_env()
    # (Flink: get_j_env_configuration(...).setString("python.execution-mode", ...))
    env.configure({"python.execution-mode": request.param})
    return env


@pytest.fixture
def sink() -> DataStreamTestSinkFunction:
    return DataStreamTestSinkFunction()


def _timed(env: Any, data: list) -> Any:
    watermark_strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        SecondColumnTimestampAssigner()
    )
    return env.from_collection(data, type_info=STRING_INT).assign_timestamps_and_watermarks(
        watermark_strategy
    )


def test_event_time_tumbling_window(env, sink) -> None:
    _timed(env, HI).key_by(lambda x: x[0], key_type=Types.STRING()).window(
        TumblingEventTimeWindows.of(Time.milliseconds(5))
    ).process(CountWindowProcessFunction(), COUNTS).add_sink(sink)
    env.execute("test_event_time_tumbling_window")
    assert_equals_sorted(["(hi,0,5,4)", "(hi,5,10,3)", "(hi,15,20,1)"], sink.get_results())


def test_count_tumbling_window(env, sink) -> None:
    data_stream = env.from_collection(
        [(1, "hi"), (2, "hello"), (3, "hi"), (4, "hello"), (5, "hi"), (6, "hello"), (6, "hello")],
        type_info=Types.TUPLE([Types.INT(), Types.STRING()]),
    )
    data_stream.key_by(lambda x: x[1], key_type=Types.STRING()).count_window(3).apply(
        SumWindowFunction(), Types.TUPLE([Types.STRING(), Types.INT()])
    ).add_sink(sink)
    env.execute("test_count_tumbling_window")
    assert_equals_sorted(["(hi,9)", "(hello,12)"], sink.get_results())


def test_event_time_sliding_window(env, sink) -> None:
    _timed(env, HI).key_by(lambda x: x[0], key_type=Types.STRING()).window(
        SlidingEventTimeWindows.of(Time.milliseconds(5), Time.milliseconds(2))
    ).process(CountWindowProcessFunction(), COUNTS).add_sink(sink)
    env.execute("test_event_time_sliding_window")
    expected = [
        "(hi,-2,3,2)", "(hi,0,5,4)", "(hi,2,7,4)", "(hi,4,9,3)", "(hi,6,11,2)",
        "(hi,8,13,2)", "(hi,12,17,1)", "(hi,14,19,1)",
    ]  # fmt: skip
    assert_equals_sorted(expected, sink.get_results())


def test_count_sliding_window(env, sink) -> None:
    data_stream = env.from_collection(
        [(1, "hi"), (2, "hello"), (3, "hi"), (4, "hello"), (5, "hi"), (6, "hello")],
        type_info=Types.TUPLE([Types.INT(), Types.STRING()]),
    )
    data_stream.key_by(lambda x: x[1], key_type=Types.STRING()).window(
        CountSlidingWindowAssigner(2, 1)
    ).apply(SumWindowFunction(), Types.TUPLE([Types.STRING(), Types.INT()])).add_sink(sink)
    env.execute("test_count_sliding_window")
    assert_equals_sorted(["(hello,6)", "(hi,8)", "(hi,4)", "(hello,10)"], sink.get_results())


def test_event_time_session_window(env, sink) -> None:
    data = [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 8), ("hi", 9), ("hi", 15)]
    _timed(env, data).key_by(lambda x: x[0], key_type=Types.STRING()).window(
        EventTimeSessionWindows.with_gap(Time.milliseconds(5))
    ).process(CountWindowProcessFunction(), COUNTS).add_sink(sink)
    env.execute("test_event_time_session_window")
    assert_equals_sorted(["(hi,1,14,6)", "(hi,15,20,1)"], sink.get_results())


def test_event_time_dynamic_gap_session_window(env, sink) -> None:
    env.set_parallelism(1)
    data = [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 9), ("hi", 9), ("hi", 15)]
    _timed(env, data).key_by(lambda x: x[0], key_type=Types.STRING()).window(
        EventTimeSessionWindows.with_dynamic_gap(MySessionWindowTimeGapExtractor())
    ).process(CountWindowProcessFunction(), COUNTS).add_sink(sink)
    env.execute("test_event_time_dynamic_gap_session_window")
    assert_equals_sorted(["(hi,1,8,4)", "(hi,9,30,3)"], sink.get_results())


def test_window_reduce_passthrough(env, sink) -> None:
    _timed(env, AB).key_by(lambda x: x[0], key_type=Types.STRING()).window(
        EventTimeSessionWindows.with_gap(Time.milliseconds(2))
    ).reduce(lambda a, b: (b[0], a[1] + b[1]), output_type=STRING_INT).add_sink(sink)
    env.execute("test_window_reduce_passthrough")
    assert_equals_sorted(["(a,3)", "(a,6)", "(a,15)", "(b,3)", "(b,17)"], sink.get_results())


def test_window_reduce_process(env, sink) -> None:
    class MyProcessFunction(ProcessWindowFunction):
        def process(
            self, key, context: ProcessWindowFunction.Context, elements: Iterable[tuple[str, int]]
        ) -> Iterable[str]:
            yield f"current window start at {context.window().start}, reduce result {next(iter(elements))}"

    _timed(env, AB).key_by(lambda x: x[0], key_type=Types.STRING()).window(
        EventTimeSessionWindows.with_gap(Time.milliseconds(2))
    ).reduce(
        lambda a, b: (b[0], a[1] + b[1]), window_function=MyProcessFunction(), output_type=Types.STRING()
    ).add_sink(sink)
    env.execute("test_window_reduce_process")
    expected = [
        "current window start at 1, reduce result ('a', 3)",
        "current window start at 15, reduce result ('a', 15)",
        "current window start at 3, reduce result ('b', 3)",
        "current window start at 6, reduce result ('a', 6)",
        "current window start at 8, reduce result ('b', 17)",
    ]
    assert_equals_sorted(expected, sink.get_results())


class ParityAggregateFunction(AggregateFunction):
    """``MyAggregateFunction`` of the passthrough cases: even minus odd values."""

    def create_accumulator(self) -> tuple[str, dict[int, int]]:
        return "", {0: 0, 1: 0}

    def add(
        self, value: tuple[str, int], accumulator: tuple[str, dict[int, int]]
    ) -> tuple[str, dict[int, int]]:
        number_map = accumulator[1]
        number_map[value[1] % 2] += 1
        return value[0], number_map

    def get_result(self, accumulator: tuple[str, dict[int, int]]) -> tuple[str, int]:
        number_map = accumulator[1]
        return accumulator[0], number_map[0] - number_map[1]

    def merge(
        self, acc_a: tuple[str, dict[int, int]], acc_b: tuple[str, dict[int, int]]
    ) -> tuple[str, dict[int, int]]:
        number_map_a = acc_a[1]
        number_map_b = acc_b[1]
        new_number_map = {0: number_map_a[0] + number_map_b[0], 1: number_map_a[1] + number_map_b[1]}
        return acc_a[0], new_number_map


class SumAggregateFunction(AggregateFunction):
    """``MyAggregateFunction`` of the accumulator-type cases: the sum, and the last key."""

    def create_accumulator(self) -> tuple[int, str]:
        return 0, ""

    def add(self, value: tuple[str, int], accumulator: tuple[int, str]) -> tuple[int, str]:
        return value[1] + accumulator[0], value[0]

    def get_result(self, accumulator: tuple[str, int]):
        return accumulator[1], accumulator[0]

    def merge(self, acc_a: tuple[int, str], acc_b: tuple[int, str]):
        return acc_a[0] + acc_b[0], acc_a[1]


def test_window_aggregate_passthrough(env, sink) -> None:
    _timed(env, AB).key_by(lambda x: x[0], key_type=Types.STRING()).window(
        EventTimeSessionWindows.with_gap(Time.milliseconds(2))
    ).aggregate(ParityAggregateFunction(), output_type=STRING_INT).add_sink(sink)
    env.execute("test_window_aggregate_passthrough")
    assert_equals_sorted(["(a,-1)", "(a,0)", "(a,1)", "(b,-1)", "(b,0)"], sink.get_results())


def test_window_aggregate_accumulator_type(env, sink) -> None:
    _timed(env, AB).key_by(lambda x: x[0], key_type=Types.STRING()).window(
        EventTimeSessionWindows.with_gap(Time.milliseconds(2))
    ).aggregate(
        SumAggregateFunction(),
        accumulator_type=Types.TUPLE([Types.INT(), Types.STRING()]),
        output_type=STRING_INT,
    ).add_sink(sink)
    env.execute("test_window_aggregate_accumulator_type")
    assert_equals_sorted(["(a,15)", "(a,3)", "(a,6)", "(b,17)", "(b,3)"], sink.get_results())


def test_window_aggregate_process(env, sink) -> None:
    class MyProcessWindowFunction(ProcessWindowFunction):
        def process(
            self, key: str, context: ProcessWindowFunction.Context, elements: Iterable[tuple[str, int]]
        ) -> Iterable[str]:
            agg_result = next(iter(elements))
            yield f"key {agg_result[0]} timestamp sum {agg_result[1]}"

    _timed(env, AB).key_by(lambda x: x[0], key_type=Types.STRING()).window(
        EventTimeSessionWindows.with_gap(Time.milliseconds(2))
    ).aggregate(
        SumAggregateFunction(),
        window_function=MyProcessWindowFunction(),
        accumulator_type=Types.TUPLE([Types.INT(), Types.STRING()]),
        output_type=Types.STRING(),
    ).add_sink(sink)
    env.execute("test_window_aggregate_process")
    expected = [
        "key a timestamp sum 15",
        "key a timestamp sum 3",
        "key a timestamp sum 6",
        "key b timestamp sum 17",
        "key b timestamp sum 3",
    ]
    assert_equals_sorted(expected, sink.get_results())


def test_session_window_late_merge(env, sink) -> None:
    _timed(env, [("hi", 0), ("hi", 8), ("hi", 4)]).key_by(lambda x: x[0], key_type=Types.STRING()).window(
        EventTimeSessionWindows.with_gap(Time.milliseconds(5))
    ).process(CountWindowProcessFunction(), COUNTS).add_sink(sink)
    env.execute("test_session_window_late_merge")
    assert_equals_sorted(["(hi,0,13,3)"], sink.get_results())


def test_event_time_session_window_with_purging_trigger(env, sink) -> None:
    data = [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 8), ("hi", 9), ("hi", 15)]
    _timed(env, data).key_by(lambda x: x[0], key_type=Types.STRING()).window(
        EventTimeSessionWindows.with_gap(Time.milliseconds(3))
    ).trigger(PurgingTrigger.of(EventTimeTrigger.create())).process(
        CountWindowProcessFunction(), COUNTS
    ).add_sink(sink)
    env.execute("test_event_time_session_window_with_purging_trigger")
    assert_equals_sorted(["(hi,1,7,4)", "(hi,8,12,2)", "(hi,15,18,1)"], sink.get_results())


def test_global_window_with_purging_trigger(env, sink) -> None:
    env.set_parallelism(1)

    class MyProcessFunction(ProcessWindowFunction):
        def process(
            self, key, context: ProcessWindowFunction.Context, elements: Iterable[tuple[str, int]]
        ) -> Iterable[tuple]:
            return [(key, len([e for e in elements]))]

    _timed(env, [("hi", 1)] * 7).key_by(lambda x: x[0], key_type=Types.STRING()).window(
        GlobalWindows.create()
    ).trigger(PurgingTrigger.of(CountTrigger.of(2))).process(MyProcessFunction(), STRING_INT).add_sink(sink)
    env.execute("test_global_window_with_purging_trigger")
    assert_equals_sorted(["(hi,2)", "(hi,2)", "(hi,2)"], sink.get_results())


def test_event_time_tumbling_window_all(env, sink) -> None:
    data = [("hi", 1), ("hello", 2), ("hi", 3), ("hello", 4), ("hello", 5), ("hi", 8), ("hi", 9), ("hi", 15)]
    _timed(env, data).window_all(TumblingEventTimeWindows.of(Time.milliseconds(5))).process(
        CountAllWindowProcessFunction(), Types.TUPLE([Types.LONG(), Types.LONG(), Types.INT()])
    ).add_sink(sink)
    env.execute("test_event_time_tumbling_window_all")
    assert_equals_sorted(["(0,5,4)", "(15,20,1)", "(5,10,3)"], sink.get_results())


def test_window_all_reduce(env, sink) -> None:
    env.set_parallelism(1)
    _timed(env, AB).window_all(EventTimeSessionWindows.with_gap(Time.milliseconds(2))).reduce(
        lambda a, b: (a[0], a[1] + b[1]), output_type=STRING_INT
    ).add_sink(sink)
    env.execute("test_window_all_reduce")
    assert_equals_sorted(["(a,15)", "(a,6)", "(a,23)"], sink.get_results())


def test_window_all_reduce_process(env, sink) -> None:
    env.set_parallelism(1)

    class MyProcessFunction(ProcessAllWindowFunction):
        def process(
            self, context: ProcessAllWindowFunction.Context, elements: Iterable[tuple[str, int]]
        ) -> Iterable[str]:
            yield f"current window start at {context.window().start}, reduce result {next(iter(elements))}"

    _timed(env, AB).window_all(EventTimeSessionWindows.with_gap(Time.milliseconds(2))).reduce(
        lambda a, b: (a[0], a[1] + b[1]), window_function=MyProcessFunction(), output_type=Types.STRING()
    ).add_sink(sink)
    env.execute("test_window_all_reduce_process")
    expected = [
        "current window start at 1, reduce result ('a', 6)",
        "current window start at 6, reduce result ('a', 23)",
        "current window start at 15, reduce result ('a', 15)",
    ]
    assert_equals_sorted(expected, sink.get_results())


def test_window_all_aggregate(env, sink) -> None:
    env.set_parallelism(1)
    _timed(env, AB).window_all(EventTimeSessionWindows.with_gap(Time.milliseconds(2))).aggregate(
        ParityAggregateFunction(), output_type=STRING_INT
    ).add_sink(sink)
    env.execute("test_window_all_aggregate")
    assert_equals_sorted(["(a,-1)", "(b,-1)", "(b,1)"], sink.get_results())


def test_window_all_aggregate_process(env, sink) -> None:
    env.set_parallelism(1)

    class MyProcessWindowFunction(ProcessAllWindowFunction):
        def process(
            self, context: ProcessAllWindowFunction.Context, elements: Iterable[tuple[str, int]]
        ) -> Iterable[str]:
            agg_result = next(iter(elements))
            yield f"key {agg_result[0]} timestamp sum {agg_result[1]}"

    _timed(env, AB).window_all(EventTimeSessionWindows.with_gap(Time.milliseconds(2))).aggregate(
        SumAggregateFunction(),
        window_function=MyProcessWindowFunction(),
        accumulator_type=Types.TUPLE([Types.INT(), Types.STRING()]),
        output_type=Types.STRING(),
    ).add_sink(sink)
    env.execute("test_window_all_aggregate_process")
    expected = ["key b timestamp sum 6", "key b timestamp sum 23", "key a timestamp sum 15"]
    assert_equals_sorted(expected, sink.get_results())


class PerElementWatermarkGenerator(WatermarkGenerator):
    """(The case uses the JVM's ``PerElementWatermarkGenerator``: a watermark per record.)"""

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        output.emit_watermark(Watermark(event_timestamp))


def test_side_output_late_data(env) -> None:
    env.set_parallelism(1)
    config = Configuration()  # (Flink: the JVM environment's configuration)
    config.set_integer("python.fn-execution.bundle.size", 1)
    env.configure(config)
    watermark_strategy = WatermarkStrategy.for_generator(
        PerElementWatermarkGenerator
    ).with_timestamp_assigner(SecondColumnTimestampAssigner())

    tag = OutputTag("late-data", type_info=Types.ROW([Types.STRING(), Types.INT()]))
    ds1 = env.from_collection(
        [("a", 0), ("a", 8), ("a", 4), ("a", 6)], type_info=Types.ROW([Types.STRING(), Types.INT()])
    )
    ds2 = (
        ds1.assign_timestamps_and_watermarks(watermark_strategy)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(5)))
        .allowed_lateness(0)
        .side_output_late_data(tag)
        .process(CountWindowProcessFunction(), COUNTS)
    )
    main_sink = DataStreamTestSinkFunction()
    ds2.add_sink(main_sink)
    side_sink = DataStreamTestSinkFunction()
    ds2.get_side_output(tag).add_sink(side_sink)

    env.execute("test_side_output_late_data")
    assert_equals_sorted(["(a,0,5,1)", "(a,5,10,2)"], main_sink.get_results())
    assert_equals_sorted(["+I[a, 4]"], side_sink.get_results())


def test_chained_window(sink) -> None:
    """EmbeddedWindowTests only (python.execution-mode thread)."""
    env = make_env()
    env.configure({"python.execution-mode": "thread"})

    class MyTimestampAssigner(TimestampAssigner):
        def extract_timestamp(self, value: tuple, record_timestamp: int) -> int:
            return value[0]

    ds = env.from_collection(
        [
            (1676461680000, "a1", "b1", 1),
            (1676461680000, "a1", "b1", 1),
            (1676461680000, "a2", "b2", 1),
            (1676461680000, "a1", "b2", 1),
            (1676461740000, "a1", "b1", 1),
            (1676461740000, "a2", "b2", 1),
        ]
    ).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(MyTimestampAssigner())
    )
    ds.key_by(lambda x: (x[0], x[1], x[2])).window(TumblingEventTimeWindows.of(Time.minutes(1))).reduce(
        lambda x, y: (x[0], x[1], x[2], x[3] + y[3]),
        output_type=Types.TUPLE([Types.LONG(), Types.STRING(), Types.STRING(), Types.INT()]),
    ).map(
        lambda x: (x[0], x[1], x[3]), output_type=Types.TUPLE([Types.LONG(), Types.STRING(), Types.INT()])
    ).add_sink(sink)
    env.execute("test_chained_window")
    expected = [
        "(1676461680000,a1,1)",
        "(1676461680000,a1,2)",
        "(1676461680000,a2,1)",
        "(1676461740000,a1,1)",
        "(1676461740000,a2,1)",
    ]
    assert_equals_sorted(expected, sink.get_results())


class SecondColumnTimestampAssigner(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return int(value[1])


class MySessionWindowTimeGapExtractor(SessionWindowTimeGapExtractor):
    def extract(self, element: tuple) -> int:
        return element[1]


class SumWindowFunction(WindowFunction[tuple, tuple, str, CountWindow]):
    def apply(self, key: str, window: CountWindow, inputs: Iterable[tuple]):
        result = 0
        for i in inputs:
            result += i[0]
        return [(key, result)]


class CountWindowProcessFunction(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
    def process(
        self, key: str, context: ProcessWindowFunction.Context[TimeWindow], elements: Iterable[tuple]
    ) -> Iterable[tuple]:
        return [(key, context.window().start, context.window().end, len([e for e in elements]))]


class CountAllWindowProcessFunction(ProcessAllWindowFunction[tuple, tuple, TimeWindow]):
    def process(
        self, context: ProcessAllWindowFunction.Context, elements: Iterable[tuple]
    ) -> Iterable[tuple]:
        return [(context.window().start, context.window().end, len([e for e in elements]))]
