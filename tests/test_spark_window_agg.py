"""Window functions recognised as Spark aggregates (streamflow.spark.window_agg), without
Spark: which reduce and process functions become ``groupBy(window, key).agg(...)``, the ranges
their outputs carry, and what takes the ``collect_list`` path instead. The same jobs run on
Spark against the asyncio engine in tests/test_spark.py (w3, w3_process)."""

from __future__ import annotations

from typing import Any

from streamflow import AggregateFunction, ProcessWindowFunction, StreamExecutionEnvironment, WatermarkStrategy
from streamflow.runtime.window_operator import WindowOperator
from streamflow.spark.native import Expr, Field, Layout
from streamflow.spark.window_agg import WindowAgg, recognise_window
from streamflow.testing import ListSink
from streamflow.windowing import SlidingEventTimeWindows, TumblingEventTimeWindows

EVENTS = Layout((Field("c0", "str"), Field("c1", "int", 0, 96), Field("c2", "int", 0, 10**6)), True, 1000)
KEY = Expr(("col", "key"), "str")
TUMBLING = TumblingEventTimeWindows.of(10_000)


def window_op(build: Any) -> WindowOperator:
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(200).with_timestamp_assigner(lambda e, t: e[2])
    stream = env.from_collection([("k", 1, 2)]).assign_timestamps_and_watermarks(strategy)
    build(stream.key_by(lambda e: e[0])).sink_to(ListSink())
    (node,) = [n for n in env.get_job_graph().nodes if n.keyed]
    assert node.operator_factory is not None
    op = node.operator_factory.create(0)
    assert isinstance(op, WindowOperator)
    return op


def recognised(build: Any, layout: Layout = EVENTS) -> WindowAgg | None:
    return recognise_window(window_op(build), layout, KEY, (0, 10**6), "test")


class SumPerWindow(ProcessWindowFunction):  # the benchmark's W3
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return [(key, context.window().end, sum(e[1] for e in elements))]


class ReadsSelf(ProcessWindowFunction):
    def __init__(self) -> None:
        self.factor = 2

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return [(key, sum(e[1] * self.factor for e in elements))]


class Opens(ProcessWindowFunction):
    def open(self, ctx: Any) -> None:
        self.opened = True

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return [(key, len(elements))]


class Count(AggregateFunction):
    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, acc: int) -> int:
        return acc + 1

    def get_result(self, acc: int) -> int:
        return acc

    def merge(self, a: int, b: int) -> int:
        return a + b


def test_a_sum_per_window_is_a_spark_sum() -> None:
    agg = recognised(lambda k: k.window(TUMBLING).process(SumPerWindow()))
    assert agg is not None
    assert [(kind, e.tree) for kind, e in agg.aggregates] == [("sum", ("col", "c1"))]
    assert [e.tree for e in agg.outputs] == [("col", "key"), ("col", "end"), ("col", "a0")]
    key, end, total = agg.layout(1000).fields
    assert (key.kind, end.kind, total.kind) == ("str", "int", "int")
    assert (total.lo, total.hi) == (0, 96 * 1000)  # at most every record in one window
    assert end.lo <= 10_000 and end.hi >= 10**6 + 1  # every window end of timestamps in [0, 10**6]


def test_reduces_field_by_field() -> None:
    agg = recognised(lambda k: k.window(TUMBLING).reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2]))))
    assert agg is not None and [kind for kind, _e in agg.aggregates] == ["first", "sum", "max"]
    agg = recognised(lambda k: k.window(TUMBLING).reduce(lambda a, b: (b[0], min(b[1], a[1]), b[2])))
    assert agg is not None and [kind for kind, _e in agg.aggregates] == ["last", "min", "last"]
    scalar = Layout((Field("c0", "int", -5, 5),), False, 10)
    agg = recognised(lambda k: k.window(TUMBLING).reduce(lambda a, b: a + b), scalar)
    assert agg is not None and not agg.is_tuple and (agg.outputs[0].lo, agg.outputs[0].hi) == (-50, 50)


def test_process_functions_of_aggregates_and_the_window() -> None:
    def stats(key: Any, ctx: Any, els: Any) -> Any:
        return [(key, ctx.window().start, ctx.window().max_timestamp(), len(els),
                 min([e[2] for e in els]), max(e[1] * 2 - 1 for e in els), sum(e[1] for e in els) // 3)]

    agg = recognised(lambda k: k.window(SlidingEventTimeWindows.of(1000, 500)).process(stats))
    assert agg is not None
    assert [kind for kind, _e in agg.aggregates] == ["count", "min", "max", "sum"]
    assert agg.outputs[2].tree == ("sub", ("col", "end"), ("lit", 1))
    assert (agg.outputs[3].lo, agg.outputs[3].hi) == (1, 1000)
    assert (agg.outputs[5].lo, agg.outputs[5].hi) == (-1, 191)


def test_what_is_not_recognised_takes_the_collect_list_path() -> None:
    window = lambda k: k.window(TUMBLING)  # noqa: E731
    refused = [
        lambda k: window(k).process(ReadsSelf()),  # reads self
        lambda k: window(k).process(Opens()),  # has open(): its lifecycle would be lost
        lambda k: window(k).process(lambda key, ctx, els: [(key, sorted(e[1] for e in els))]),
        lambda k: window(k).process(lambda key, ctx, els: [sum(e[1] for e in els if e[1] > 2)]),
        lambda k: window(k).process(lambda key, ctx, els: [(key, sum(e[0] for e in els))]),  # str sum
        lambda k: window(k).process(lambda key, ctx, els: [(key, 1), (key, 2)]),  # two outputs
        lambda k: window(k).process(lambda key, ctx, els: [(key, ctx.current_watermark())]),
        lambda k: window(k).reduce(lambda a, b: (a[0], a[1] * b[1], b[2])),
        lambda k: window(k).reduce(lambda a, b: (a[0], a[1] + b[2], b[2])),
        lambda k: window(k).reduce(lambda a, b: (a[0], a[1] + b[1], b[2]), SumPerWindow()),
        lambda k: window(k).aggregate(Count()),
        lambda k: window(k).apply(lambda key, w, els: [len(els)]),
    ]
    for n, build in enumerate(refused):
        assert recognised(build) is None, n


def test_shadowed_builtins_and_unbounded_sums_are_refused() -> None:
    namespace: dict[str, Any] = {"sum": lambda xs: 0}
    exec("def shadowed(key, ctx, els):\n    return [sum(e[1] for e in els)]", namespace)
    assert recognised(lambda k: k.window(TUMBLING).process(namespace["shadowed"])) is None
    uncounted = Layout(EVENTS.fields, True, 0)  # the record count is unknown: a sum has no bound
    assert recognised(lambda k: k.window(TUMBLING).process(SumPerWindow()), uncounted) is None
    huge = Layout((Field("c0", "str"), Field("c1", "int", 0, 2**40), Field("c2", "int", 0, 9)), True, 2**30)
    assert recognised(lambda k: k.window(TUMBLING).process(SumPerWindow()), huge) is None
    op = window_op(lambda k: k.window(TUMBLING).process(SumPerWindow()))
    unknown_ts = recognise_window(op, EVENTS, KEY, None, "test")
    assert unknown_ts is None


def test_declared_double_float_and_boolean_outputs_are_casts() -> None:
    """An output_type that converts the results (PyFlink's serializers make a float of an int
    declared DOUBLE/FLOAT, a bool of an int declared BOOLEAN) casts the aggregate columns; other
    converting types (rows, nested tuples) keep the Python path. Both engines' results are
    compared in tests/test_spark.py (window_cast_types, window_double)."""
    from streamflow.common import Types

    def stats(key: Any, ctx: Any, els: Any) -> Any:
        return [(key, sum(e[1] for e in els), sum(e[1] for e in els), len(els), ctx.window().end, key)]

    def typed(*fields: Any) -> Any:
        output_type = Types.TUPLE(list(fields))
        op = window_op(lambda k: k.window(TUMBLING).process(stats, output_type=output_type))
        return recognise_window(op, EVENTS, KEY, (0, 10**6), "test", output_type)

    s, d, f, b, long_ = Types.STRING(), Types.DOUBLE(), Types.FLOAT(), Types.BOOLEAN(), Types.LONG()
    agg = typed(s, d, f, b, long_, d)  # (a str declared DOUBLE stays a str, as its conversion)
    assert agg is not None and agg.casts == (None, "double", "float", "boolean", None, None)
    assert [f.kind for f in agg.layout(1000).fields] == ["str", "float", "float", "bool", "int", "str"]
    assert typed(s, d, f, Types.ROW([long_]), long_, s) is None  # a row field
    assert typed(s, d, f, b, long_) is None  # not the results' arity
    scalar = Layout((Field("c0", "int", -5, 5),), False, 10)
    op = window_op(lambda k: k.window(TUMBLING).reduce(lambda a, b: a + b, output_type=d))
    agg = recognise_window(op, scalar, KEY, (0, 10**6), "test", d)
    assert agg is not None and agg.casts == ("double",)
    op = window_op(lambda k: k.window(TUMBLING).reduce(lambda a, b: a + b, output_type=Types.ROW([d])))
    assert recognise_window(op, scalar, KEY, (0, 10**6), "test", Types.ROW([d])) is None
