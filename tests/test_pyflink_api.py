"""PyFlink's surface on streamflow: Row, Types, batch mode, count and dynamic-gap windows."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from streamflow.common import Configuration, Duration, Row, RowKind, Time, Types
from streamflow.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from streamflow.datastream.connectors.number_seq import NumberSequenceSource
from streamflow.datastream.window import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    EventTimeSessionWindows,
)
from streamflow.testing import ListSink


def test_row_semantics_as_pyflink() -> None:
    row = Row(name="Alice", age=11)
    assert (row.name, row["age"], row[0]) == ("Alice", 11, "Alice")
    assert repr(row) == "Row(name='Alice', age=11)" and "name" in row
    assert repr(Row(1, "a")) == "<Row(1, 'a')>"
    person = Row("name", "age")
    assert person("Bob", 3) == Row(name="Bob", age=3)
    assert Row(1) != Row.of_kind(RowKind.DELETE, 1) and str(RowKind.UPDATE_BEFORE) == "-U"
    assert pickle.loads(pickle.dumps(row)) == row == copy.deepcopy(row)
    with pytest.raises(AttributeError):
        row.other = 1


@pytest.mark.parametrize(
    ("type_info", "value", "converted", "text"),
    [
        (Types.ROW([Types.STRING(), Types.INT()]), ("a", 1), Row(f0="a", f1=1), "+I[a, 1]"),
        (Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.LONG()]), ["a", 2], Row(k="a", v=2), "+I[a, 2]"),
        (Types.TUPLE([Types.STRING(), Types.INT()]), ["hi", 4], ("hi", 4), "(hi,4)"),
        (Types.TUPLE([Types.STRING(), Types.ROW([Types.INT()])]), ("x", (1,)), ("x", Row(f0=1)), "(x,+I[1])"),
        (Types.LIST(Types.INT()), (1, 2), [1, 2], "[1, 2]"),
        (Types.MAP(Types.STRING(), Types.BOOLEAN()), {"a": True}, {"a": True}, "{a=true}"),
        (Types.STRING(), None, None, "null"),
        (Types.DOUBLE(), 1.0, 1.0, "1.0"),
        # bytes in a row reach the JVM as a byte[]: Row.toString shows its signed bytes
        (Types.ROW([Types.PICKLED_BYTE_ARRAY()]), (bytearray(b"f\xff"),), Row(f0=bytearray(b"f\xff")),
         "+I[[102, -1]]"),
        (Types.PRIMITIVE_ARRAY(Types.BYTE()), b"\x80\x7f", b"\x80\x7f", "[-128, 127]"),
    ],
)
def test_types_convert_and_print_as_the_jvm(type_info, value, converted, text) -> None:
    assert type_info.convert(value) == converted
    assert type_info.format(type_info.convert(value)) == text


def test_time_and_duration_are_milliseconds() -> None:
    assert Time.seconds(2) == 2000 and Time.minutes(1).to_milliseconds() == 60_000
    assert Duration.of_seconds(3) == 3000 and Duration.of_nanos(1_500_000).nanos == 1_500_000
    config = Configuration().set_integer("a", 3).set_boolean("b", True)
    assert (
        config.get_integer("a", 0) == 3 and config.get_boolean("b", False) and config.to_dict()["b"] == "true"
    )


def _collect(stream) -> list:
    sink = ListSink()
    stream.sink_to(sink)
    stream.get_execution_environment().execute("test")
    return sink.results


def test_declared_row_type_makes_rows() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection(
        [(1, "hi")], type_info=Types.ROW_NAMED(["id", "word"], [Types.INT(), Types.STRING()])
    )
    out = _collect(ds.map(lambda r: (r.word, r.id * 2), output_type=Types.ROW([Types.STRING(), Types.INT()])))
    assert out == [Row(f0="hi", f1=2)] and out[0].f0 == "hi"


def test_print_formats_typed_and_untyped_records(capsys) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([("a", 1)])
    ds.print()
    ds.map(lambda x: x, output_type=Types.TUPLE([Types.STRING(), Types.INT()])).print()
    env.execute()
    assert sorted(capsys.readouterr().out.splitlines()) == ["('a', 1)", "(a,1)"]


@pytest.mark.parametrize("mode", [RuntimeExecutionMode.BATCH, RuntimeExecutionMode.AUTOMATIC])
def test_batch_mode_emits_one_result_per_key(mode) -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    env.set_runtime_mode(mode)
    env.enable_checkpointing(10)  # ignored in batch mode
    words = ["a", "b", "a", "c", "a", "b"]
    out = _collect(env.from_collection(words).map(lambda w: (w, 1)).key_by(lambda p: p[0]).sum(1))
    assert sorted(out) == [("a", 3), ("b", 2), ("c", 1)]


def test_streaming_mode_keeps_rolling_results() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    out = _collect(env.from_collection(["a", "a"]).map(lambda w: (w, 1)).key_by(lambda p: p[0]).sum(1))
    assert out == [("a", 1), ("a", 2)]


def test_batch_mode_has_no_late_data() -> None:
    """Event time jumps to the end: out-of-order records a streaming job drops are counted."""
    from streamflow.common import WatermarkStrategy
    from streamflow.datastream.window import TumblingEventTimeWindows

    def run(mode: RuntimeExecutionMode) -> list:
        env = StreamExecutionEnvironment.get_execution_environment().set_runtime_mode(mode)
        env.set_batch_size(1)
        ds = env.from_collection([("k", 1), ("k", 20_000), ("k", 2)]).assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])
        )
        env.set_auto_watermark_interval(0)
        windowed = ds.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(10)))
        return sorted(_collect(windowed.reduce(lambda a, b: (a[0], a[1] + b[1]))))

    assert run(RuntimeExecutionMode.BATCH) == [("k", 3), ("k", 20_000)]


def test_count_windows_as_pyflink() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    data = [(1, "hi"), (2, "hello"), (3, "hi"), (4, "hello"), (5, "hi"), (6, "hello"), (6, "hello")]
    keyed = env.from_collection(data).key_by(lambda x: x[1])
    tumbling = keyed.count_window(3).apply(lambda k, w, xs: [(k, sum(x[0] for x in xs))])
    sliding = keyed.window(CountSlidingWindowAssigner(2, 1)).apply(
        lambda k, w, xs: [(k, sum(x[0] for x in xs))]
    )
    tumbling_sink, sliding_sink = ListSink(), ListSink()
    tumbling.sink_to(tumbling_sink)
    sliding.sink_to(sliding_sink)
    env.execute()
    assert sorted(tumbling_sink.results) == [("hello", 12), ("hi", 9)]
    assert sorted(sliding_sink.results) == [("hello", 6), ("hello", 10), ("hello", 12), ("hi", 4), ("hi", 8)]
    assert repr(CountTumblingWindowAssigner.of(3)) == "CountTumblingWindowAssigner(3)"


def test_dynamic_gap_sessions() -> None:
    from streamflow.common import WatermarkStrategy

    env = StreamExecutionEnvironment.get_execution_environment()
    data = [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 9), ("hi", 9), ("hi", 15)]
    ds = env.from_collection(data).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])
    )
    windows = ds.key_by(lambda x: x[0]).window(EventTimeSessionWindows.with_dynamic_gap(lambda e: e[1]))
    out = _collect(
        windows.process(lambda k, ctx, xs: [(ctx.window().start, ctx.window().end, len(list(xs)))])
    )
    assert sorted(out) == [(1, 8, 4), (9, 30, 3)]


def test_number_sequence_source_over_parallel_readers() -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(3)
    assert sorted(_collect(env.from_source(NumberSequenceSource(1, 10), None, "seq"))) == list(range(1, 11))


class _Where:
    """Records which subtask saw each value."""

    def __init__(self) -> None:
        from streamflow.datastream.functions import MapFunction

        class Tag(MapFunction):
            def open(self, ctx) -> None:
                self.index = ctx.get_index_of_this_subtask()

            def map(self, value):
                return (self.index, value)

        self.fn = Tag()


@pytest.mark.parametrize("method", ["shuffle", "rescale", "rebalance"])
def test_partitionings_deliver_every_record(method) -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    env.set_batch_size(1)
    ds = getattr(env.from_collection(list(range(40))), method)()
    out = _collect(ds.map(_Where().fn).set_parallelism(4))
    assert sorted(v for _, v in out) == list(range(40))
    assert len({i for i, _ in out}) == 4  # one upstream subtask spreads over all four


def test_rescale_is_pointwise() -> None:
    """Flink's RescalePartitioner: with 2 upstream and 4 downstream subtasks, upstream 0
    feeds downstream 0 and 1 only, upstream 1 feeds 2 and 3."""
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    env.set_batch_size(1)
    src = env.from_source(NumberSequenceSource(0, 39), None, "seq").map(_Where().fn)
    out = _collect(src.rescale().map(_Where().fn).set_parallelism(4))
    assert {(up, down) for down, (up, _) in out} == {(0, 0), (0, 1), (1, 2), (1, 3)}


def test_partition_custom_routes_by_key() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection(list(range(12))).partition_custom(lambda key, n: key % n, lambda x: x % 3)
    out = _collect(ds.map(_Where().fn).set_parallelism(3))
    assert all(i == v % 3 for i, v in out) and len(out) == 12


def test_keyed_stream_refuses_operator_settings() -> None:
    keyed = StreamExecutionEnvironment.get_execution_environment().from_collection([1]).key_by(lambda x: x)
    for method in ("name", "uid", "set_parallelism", "rebalance", "shuffle"):
        with pytest.raises(Exception, match="not supported"):
            getattr(keyed, method)(
                *(["x"] if method in ("name", "uid") else [2] if method == "set_parallelism" else [])
            )


def test_readme_pyflink_quick_start_runs(capsys) -> None:
    """The README's PyFlink program runs and prints what its comment says."""
    import re
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    code = re.search(r"<!-- pyflink-quick-start -->\n```python\n(.*?)```", readme, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    assert sorted(capsys.readouterr().out.split()) == sorted(["(to,2)", "(be,2)", "(or,1)", "(not,1)"])


def test_window_all_and_count_window_all() -> None:
    from streamflow.common import WatermarkStrategy
    from streamflow.datastream.functions import AllWindowFunction, ProcessAllWindowFunction
    from streamflow.datastream.window import TumblingEventTimeWindows

    class CountAll(ProcessAllWindowFunction):
        def process(self, context, elements):
            return [(context.window().start, len(list(elements)))]

    class SumAll(AllWindowFunction):
        def apply(self, window, inputs):
            return [sum(inputs)]

    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(3)
    ds = env.from_collection([1, 2, 3, 11, 12, 25]).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e)
    )
    windows, counts = ListSink(), ListSink()
    ds.window_all(TumblingEventTimeWindows.of(10)).process(CountAll()).sink_to(windows)
    env.from_collection(list(range(1, 8))).count_window_all(3).apply(SumAll()).sink_to(counts)
    env.execute()
    assert sorted(windows.results) == [(0, 3), (10, 2), (20, 1)]
    assert sorted(counts.results) == [6, 15]  # the 7th element never fills its window
    assert json.loads(env.get_execution_plan()) == {"nodes": []}  # execute() cleared the graph


async def test_file_source_monitor_continuously(tmp_path) -> None:
    """New files are picked up at the next discovery; the source never ends on its own."""
    import asyncio

    from streamflow.datastream.connectors.file_system import FileSource, StreamFormat

    (tmp_path / "a.txt").write_text("1\n2\n")
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path))
        .monitor_continuously(Duration.of_millis(20))
        .build()
    )
    assert not source.bounded
    env = StreamExecutionEnvironment.get_execution_environment()
    seen: list = []
    env.from_source(source, None, "files").add_sink(seen.append)
    client = await env.execute_async("monitor")
    for _ in range(500):
        if len(seen) == 2:
            break
        await asyncio.sleep(0.01)
    (tmp_path / ".b.tmp").write_text("3\n")
    (tmp_path / ".b.tmp").rename(tmp_path / "b.txt")  # appears complete, as the docs ask
    for _ in range(500):
        if len(seen) == 3:
            break
        await asyncio.sleep(0.01)
    await client.cancel()
    assert sorted(seen) == ["1", "2", "3"]
    with pytest.raises(ValueError, match="bounded"):
        bad = StreamExecutionEnvironment.get_execution_environment().set_runtime_mode(
            RuntimeExecutionMode.BATCH
        )
        bad.from_source(source, None, "files").add_sink(seen.append)
        await bad.execute_async()


def test_cache_computes_a_bounded_stream_once() -> None:
    computed: list = []

    def expensive(x):
        computed.append(x)
        return x * 10

    env = StreamExecutionEnvironment.get_execution_environment().set_runtime_mode(RuntimeExecutionMode.BATCH)
    cached = env.from_collection([1, 2, 3]).map(expensive).cache()
    first, second = ListSink(), ListSink()
    cached.sink_to(first)
    env.execute("first")
    cached.map(lambda x: x + 1).sink_to(second)
    env.execute("second")
    assert sorted(first.results) == [10, 20, 30] and sorted(second.results) == [11, 21, 31]
    assert sorted(computed) == [1, 2, 3]  # the second job read the cache
    cached.invalidate()
    third = ListSink()
    cached.sink_to(third)
    env.execute("third")
    assert sorted(third.results) == [10, 20, 30] and len(computed) == 6  # recomputed once more
    with pytest.raises(Exception, match="not supported"):
        env.from_collection([1]).key_by(lambda x: x).cache()


def test_cache_refuses_a_stream_of_an_unbounded_source_behind_operators() -> None:
    from streamflow.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource

    kafka = (
        KafkaSource.builder().set_bootstrap_servers("localhost:9092").set_topics("t")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest()).set_value_only_deserializer(bytes).build()
    )
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ValueError, match="source 'kafka' is unbounded"):  # the check saw only the map
        env.from_source(kafka, None, "kafka").map(lambda x: x).cache()


def test_an_async_map_with_a_declared_output_type_converts_the_awaited_result() -> None:
    import asyncio

    from streamflow.common import Row, Types
    from streamflow.datastream import MapFunction, StreamExecutionEnvironment

    class Lookup(MapFunction):
        async def map(self, value: int) -> tuple[int, str]:
            await asyncio.sleep(0)
            return value, f"v{value}"

    async def plain(value: int) -> tuple[int, str]:
        return value, "x"

    env = StreamExecutionEnvironment.get_execution_environment()
    row = Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()])
    ds = env.from_collection([1, 2])
    with ds.map(Lookup(), output_type=row).execute_and_collect() as results:
        assert sorted(results, key=lambda r: r.id) == [Row(id=1, name="v1"), Row(id=2, name="v2")]
    with ds.map(plain, output_type=row).execute_and_collect() as results:
        assert sorted(r.name for r in results) == ["x", "x"]


def test_execution_plan_shows_what_runs() -> None:
    """A forward edge between different parallelisms runs as REBALANCE (Flink's graph says so
    too); a sink's type is Flink's "Sink: name"; a non-parallel source's parallelism is 1."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    ds = env.from_collection([1, 2]).map(lambda x: x).set_parallelism(3).map(lambda x: x)
    ds.print().name("out").set_parallelism(4)
    nodes = json.loads(env.get_execution_plan())["nodes"]
    assert [n["parallelism"] for n in nodes] == [1, 3, 2, 4]
    assert [[p["ship_strategy"] for p in n.get("predecessors", [])] for n in nodes] == [
        [], ["REBALANCE"], ["REBALANCE"], ["REBALANCE"]
    ]
    assert nodes[-1]["type"] == "Sink: out"


def test_the_minimum_surface_is_importable_from_streamflow() -> None:
    """DESIGN.md's minimum surface, window assigners and CountTrigger included, from the package
    itself (the PyFlink mirror modules re-export the same objects)."""
    import streamflow as sf
    from streamflow.datastream import window

    names = ["StreamExecutionEnvironment", "WatermarkStrategy", "TumblingEventTimeWindows",
             "SlidingEventTimeWindows", "EventTimeSessionWindows", "TumblingProcessingTimeWindows",
             "SlidingProcessingTimeWindows", "ProcessingTimeSessionWindows", "GlobalWindows", "CountTrigger",
             "ValueStateDescriptor", "ListStateDescriptor", "MapStateDescriptor", "ReducingStateDescriptor",
             "OutputTag", "FileSink", "FileSource", "Encoder", "KeyedProcessFunction", "MapFunction"]
    missing = [n for n in names if not hasattr(sf, n)]
    assert missing == []
    assert sf.TumblingEventTimeWindows is window.TumblingEventTimeWindows
    assert sf.CountTrigger is window.CountTrigger
