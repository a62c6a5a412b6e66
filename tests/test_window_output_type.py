"""``output_type=`` on windows, connected, broadcast and joined streams converts the records
as ``map(output_type=...)`` does (PyFlink serializes a window function's results with the
declared type: a row type gives ``Row``s), and a declared type that is not one is refused."""

from __future__ import annotations

from typing import Any

import pytest

import streamflow as sf
from streamflow.common import Row, Time, Types, WatermarkStrategy
from streamflow.common.watermark_strategy import TimestampAssigner
from streamflow.datastream.functions import (
    AggregateFunction,
    AllWindowFunction,
    BroadcastProcessFunction,
    CoMapFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    ProcessAllWindowFunction,
    ProcessJoinFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from streamflow.datastream.output_tag import OutputTag
from streamflow.datastream.state import MapStateDescriptor
from streamflow.datastream.window import TumblingEventTimeWindows

DATA = [("a", 1, 1), ("b", 2, 2), ("a", 3, 3), ("b", 4, 12), ("a", 5, 13)]  # (key, value, ts ms)
ROW = Types.ROW([Types.STRING(), Types.INT()])
NAMED = Types.ROW_NAMED(["word", "total"], [Types.STRING(), Types.INT()])


class _Ts(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[2])


def _env() -> tuple[sf.StreamExecutionEnvironment, Any]:
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Ts())
    return env, env.from_collection(DATA).assign_timestamps_and_watermarks(strategy)


def _windows(stream: Any) -> Any:
    return stream.key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(Time.milliseconds(10)))


class _Sum(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield key, sum(e[1] for e in elements)


class _Apply(WindowFunction):
    def apply(self, key: Any, window: Any, inputs: Any) -> Any:
        yield [key, sum(e[1] for e in inputs)]  # a list: the declared row type converts it


class _Agg(AggregateFunction):
    def create_accumulator(self) -> Any:
        return ["", 0]

    def add(self, value: Any, accumulator: Any) -> Any:
        return [value[0], accumulator[1] + value[1]]

    def get_result(self, accumulator: Any) -> Any:
        return tuple(accumulator)

    def merge(self, a: Any, b: Any) -> Any:
        return [a[0] or b[0], a[1] + b[1]]


EXPECTED = [("a", 4), ("a", 5), ("b", 2), ("b", 4)]


def _run(build: Any) -> list:
    env, stream = _env()
    out: list = []
    build(stream).add_sink(out.append)
    env.execute("typed windows")
    return out


def _rows(out: list, names: list[str] | None = None) -> list:
    assert out and all(type(r) is Row for r in out), out
    if names is not None:
        assert all(list(r.as_dict()) == names for r in out)
    return sorted((r[0], r[1]) for r in out)


@pytest.mark.parametrize(
    "build",
    [
        lambda s: _windows(s).process(_Sum(), output_type=ROW),
        lambda s: _windows(s).apply(_Apply(), output_type=ROW),
        lambda s: _windows(s).aggregate(_Agg(), output_type=ROW),
        lambda s: _windows(s).aggregate(_Agg(), accumulator_type=Types.PICKLED_BYTE_ARRAY(), output_type=ROW),
        lambda s: _windows(s.map(lambda r: (r[0], r[1]))).reduce(
            lambda a, b: (a[0], a[1] + b[1]), output_type=ROW
        ),
        lambda s: _windows(s.map(lambda r: (r[0], r[1]))).reduce(
            lambda a, b: (a[0], a[1] + b[1]), window_function=_Sum(), output_type=ROW
        ),
        lambda s: _windows(s).process(_Sum(), output_type=[Types.STRING(), Types.INT()]),  # PyFlink: a list
    ],
    ids=["process", "apply", "aggregate", "aggregate-acc-type", "reduce", "reduce+process", "list-type"],
)
def test_keyed_window_results_become_rows(build: Any) -> None:
    assert _rows(_run(build)) == EXPECTED


def test_named_rows_and_the_print_format(capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(lambda s: _windows(s).process(_Sum(), output_type=NAMED))
    assert _rows(out, ["word", "total"]) == EXPECTED
    assert Row(word="a", total=4) in out
    env, stream = _env()
    _windows(stream).process(_Sum(), output_type=NAMED).print()
    env.execute("print")
    printed = sorted(line.split("> ", 1)[1] for line in capsys.readouterr().out.splitlines())  # "N> ": p=2
    assert printed == ["+I[a, 4]", "+I[a, 5]", "+I[b, 2]", "+I[b, 4]"]


def test_a_reduce_without_window_function_keeps_the_input_type() -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Ts())
    out: list = []
    typed = env.from_collection(DATA, type_info=Types.ROW([Types.STRING(), Types.INT(), Types.INT()]))
    _windows(typed.assign_timestamps_and_watermarks(strategy)).reduce(
        lambda a, b: (a[0], a[1] + b[1], b[2])  # a tuple: the input's row type makes it a Row
    ).add_sink(out.append)
    env.execute("reduce")
    assert all(type(r) is Row for r in out) and sorted((r[0], r[1]) for r in out) == EXPECTED


def test_all_windows_convert_too() -> None:
    class All(ProcessAllWindowFunction):
        def process(self, context: Any, elements: Any) -> Any:
            yield "all", sum(e[1] for e in elements)

    class AllApply(AllWindowFunction):
        def apply(self, window: Any, inputs: Any) -> Any:
            yield "all", sum(e[1] for e in inputs)

    window = TumblingEventTimeWindows.of(Time.milliseconds(10))
    expected = [("all", 6), ("all", 9)]
    assert _rows(_run(lambda s: s.window_all(window).process(All(), output_type=ROW))) == expected
    assert _rows(_run(lambda s: s.window_all(window).apply(AllApply(), output_type=ROW))) == expected
    reduced = _run(
        lambda s: s.map(lambda r: (r[0], r[1])).window_all(window).reduce(
            lambda a, b: (a[0], a[1] + b[1]), output_type=ROW
        )
    )
    # the reduce keeps its first record's word: which comes first depends on the rebalance at p=2
    assert [total for _word, total in _rows(reduced)] == [6, 9]


def test_side_outputs_of_a_typed_window_keep_their_type() -> None:
    tag = OutputTag("sums", Types.PICKLED_BYTE_ARRAY())

    class Both(ProcessWindowFunction):
        def process(self, key: Any, context: Any, elements: Any) -> Any:
            total = sum(e[1] for e in elements)
            yield key, total
            yield tag, {"key": key, "total": total}

    env, stream = _env()
    main: list = []
    side: list = []
    result = _windows(stream).process(Both(), output_type=ROW)
    result.add_sink(main.append)
    result.get_side_output(tag).add_sink(side.append)
    env.execute("side")
    assert _rows(main) == EXPECTED
    assert sorted((d["key"], d["total"]) for d in side) == EXPECTED


def test_connected_broadcast_and_joined_streams_convert() -> None:
    class CoMap(CoMapFunction):
        def map1(self, value: Any) -> Any:
            return value[0], value[1]

        def map2(self, value: Any) -> Any:
            return value[0], -value[1]

    class Bc(BroadcastProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield value[0], value[1]

        def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
            return ()

    class Join(ProcessJoinFunction):
        def process_element(self, left: Any, right: Any, ctx: Any) -> Any:
            yield left[0], left[1] * 10 + right[1]

    descriptor = MapStateDescriptor("rules", Types.STRING(), Types.STRING())
    for build in (
        lambda s: s.connect(s).map(CoMap(), output_type=ROW),
        lambda s: s.key_by(lambda r: r[0]).connect(s.key_by(lambda r: r[0])).map(CoMap(), output_type=ROW),
        lambda s: s.connect(s.map(lambda r: "x").broadcast(descriptor)).process(Bc(), output_type=ROW),
        lambda s: s.key_by(lambda r: r[0])
        .interval_join(s.key_by(lambda r: r[0]))
        .between(0, 0)
        .process(Join(), output_type=ROW),
        lambda s: s.join(s)
        .where(lambda r: r[0])
        .equal_to(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
        .apply(lambda a, b: (a[0], a[1] + b[1]), output_type=ROW),
    ):
        assert len(_rows(_run(build))) >= len(DATA)


def test_keyed_process_and_map_still_convert() -> None:
    class P(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield value[0], value[1]

    assert len(_rows(_run(lambda s: s.key_by(lambda r: r[0]).process(P(), output_type=ROW)))) == 5
    assert len(_rows(_run(lambda s: s.map(lambda r: [r[0], r[1]], output_type=ROW)))) == 5


@pytest.mark.parametrize("bad", ["ROW", int, [Types.INT(), "x"]])
def test_a_declared_type_that_is_not_one_is_refused(bad: Any) -> None:
    _, stream = _env()
    with pytest.raises(TypeError, match="expected a TypeInformation"):
        _windows(stream).process(_Sum(), output_type=bad)
    with pytest.raises(TypeError, match="expected a TypeInformation"):
        stream.map(lambda r: r, output_type=bad)


def test_a_result_the_declared_type_cannot_hold_fails_the_operator() -> None:
    env, stream = _env()
    _windows(stream).process(_Sum(), output_type=Types.ROW([Types.STRING()])).add_sink(lambda r: None)
    with pytest.raises(ValueError, match="cannot hold") as info:
        env.execute("wrong arity")
    assert "Window(Process)" in "".join(getattr(info.value, "__notes__", [])) + str(info.value)


def test_a_declared_key_type_converts_the_key() -> None:
    class Key(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield ctx.get_current_key()

    class CoKey(KeyedCoProcessFunction):
        def process_element1(self, value: Any, ctx: Any) -> Any:
            yield ctx.get_current_key()

        def process_element2(self, value: Any, ctx: Any) -> Any:
            yield ctx.get_current_key()

    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    out: list = []
    source = env.from_collection(DATA)
    keyed = source.key_by(lambda r: (r[0], r[1] % 2), key_type=Types.ROW([Types.STRING(), Types.INT()]))
    keyed.process(Key()).add_sink(out.append)
    one = Types.ROW([Types.STRING()])
    source.connect(source).key_by(lambda r: [r[0]], lambda r: [r[0]], key_type=one).process(CoKey()).add_sink(
        out.append
    )
    env.execute("key types")
    assert all(type(k) is Row for k in out), out
    assert sorted(tuple(k) for k in out if len(k) == 2) == sorted((r[0], r[1] % 2) for r in DATA)
    assert sorted(tuple(k) for k in out if len(k) == 1) == sorted((r[0],) for r in DATA + DATA)

    def word(r: Any) -> Any:
        return r[0]

    assert source.key_by(word, key_type=Types.STRING()).get_key_selector() is word  # converts nothing
    with pytest.raises(TypeError, match=r"key_by\(key_type=...\): expected a TypeInformation"):
        source.key_by(word, key_type="STRING")


def test_an_integer_declared_double_or_float_becomes_a_float(capsys: pytest.CaptureFixture[str]) -> None:
    """PyFlink's DOUBLE and FLOAT serializers (``DoubleCoderImpl``/``FloatCoderImpl``,
    flink-python/pyflink/fn_execution/coder_impl_fast.pyx: ``write_double(double v)``) take a
    Python int and hand on a float, so ``map(lambda x: x * 2, output_type=Types.DOUBLE())``
    over ints prints ``4.0`` (Java's ``Double.toString``) and the next function gets ``4.0``;
    the int went through unchanged (printed ``4``), in fields of a tuple too, and in value state
    declared DOUBLE. Floats keep their value (a FLOAT one rounded to 32 bits, as before). An int
    declared BOOLEAN comes back a bool (``write_byte``, read as ``not not b``): prints ``true``."""
    from streamflow.datastream.state import ValueStateDescriptor

    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    ints = env.from_collection([1, 2], type_info=Types.INT())
    ints.map(lambda x: x * 2, output_type=Types.DOUBLE()).print()
    ints.map(lambda x: (x, x * 2), output_type=Types.TUPLE([Types.INT(), Types.DOUBLE()])).print()
    ints.map(lambda x: x, output_type=Types.FLOAT()).print()
    ints.map(lambda x: x - 1, output_type=Types.BOOLEAN()).print()  # BooleanCoderImpl: not not b
    env.execute()
    lines = capsys.readouterr().out.split()
    assert sorted(lines) == sorted(["2.0", "4.0", "(1,2.0)", "(2,4.0)", "1.0", "2.0", "false", "true"])

    class Keep(KeyedProcessFunction):
        def open(self, ctx: Any) -> None:
            self.last = ctx.get_state(ValueStateDescriptor("last", Types.DOUBLE()))

        def process_element(self, value: Any, ctx: Any) -> Any:
            previous = self.last.value()
            self.last.update(value)
            yield previous

    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    got = (
        env.from_collection([1, 2, 0.5])
        .map(lambda x: x, output_type=Types.DOUBLE())
        .map(lambda x: (x, type(x).__name__))
        .execute_and_collect()
    )
    assert list(got) == [(1.0, "float"), (2.0, "float"), (0.5, "float")]
    states = env.from_collection([3, 4]).key_by(lambda x: 0).process(Keep()).execute_and_collect()
    assert [(v, type(v).__name__) for v in states] == [(None, "NoneType"), (3.0, "float")]


def test_list_and_map_state_store_their_declared_types() -> None:
    """PyFlink serializes a list state's elements and a map state's keys and values with the
    descriptor's types (pyflink/fn_execution/state_impl.py, the element/key/value coders), as it
    does a value state's value: a ``Types.ROW`` element comes back a ``Row``, a ``Types.DOUBLE()``
    one a float, and a map key is looked up as its declared type. Only value state converted;
    list and map state handed back the tuples and ints as added."""
    from streamflow.datastream.state import ListStateDescriptor

    row = Types.ROW([Types.STRING(), Types.INT()])

    class Keep(KeyedProcessFunction):
        def open(self, ctx: Any) -> None:
            self.rows = ctx.get_list_state(ListStateDescriptor("rows", row))
            self.doubles = ctx.get_list_state(ListStateDescriptor("doubles", Types.DOUBLE()))
            self.by_row = ctx.get_map_state(MapStateDescriptor("by_row", row, Types.DOUBLE()))

        def process_element(self, value: Any, ctx: Any) -> Any:
            self.rows.add(("a", value))
            self.doubles.update([value, value + 1])
            self.by_row.put(("k", value), value)
            [(key, total)] = self.by_row.items()
            self.by_row.remove(("k", value))
            yield (
                [(r.f0, r.f1) for r in self.rows.get()],
                [(d, type(d).__name__) for d in self.doubles.get()],
                (key.f0, key.f1, total, type(total).__name__),
                self.by_row.is_empty(),
            )

    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    got = env.from_collection([1, 2]).key_by(lambda x: 0).process(Keep()).execute_and_collect()
    assert list(got) == [
        ([("a", 1)], [(1.0, "float"), (2.0, "float")], ("k", 1, 1.0, "float"), True),
        ([("a", 1), ("a", 2)], [(2.0, "float"), (3.0, "float")], ("k", 2, 2.0, "float"), True),
    ]


def test_broadcast_state_stores_its_declared_types() -> None:
    """PyFlink's broadcast state holds its keys and values with the MapStateDescriptor's types
    (the embedded runtime's ``BroadcastStateImpl`` converts them to and from the JVM's: pyflink/
    fn_execution/embedded/state_impl.py): a ``Types.ROW`` value put as a tuple is read back a
    ``Row`` on both sides, a ``Types.DOUBLE()`` key put as an int is found as 1 or 1.0. They were
    handed back as put."""
    from streamflow.state.broadcast import BroadcastStateStore

    row = Types.ROW([Types.STRING(), Types.INT()])
    rules = MapStateDescriptor("rules", Types.DOUBLE(), row)
    store = BroadcastStateStore(["rules"])
    store.writable(rules).put(1, ("rule", 1))
    read = store.read_only(rules)
    assert read.get(1).f0 == "rule" and type(read.get(1.0)).__name__ == "Row" and read.contains(1)
    assert [type(k).__name__ for k in read] == ["float"]

    class Enrich(BroadcastProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            rule = ctx.get_broadcast_state(rules).get(value)
            if rule is not None:  # (the broadcast element may come second)
                yield ("main", rule.f0, type(rule).__name__)

        def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
            state = ctx.get_broadcast_state(rules)
            state.put(value, ("rule", value))
            yield ("broadcast", state.get(value).f0, type(state.get(float(value))).__name__)

    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    broadcast = env.from_collection([1]).broadcast(rules)
    main = env.from_collection([1] * 50).map(lambda x: x)
    got = list(main.connect(broadcast).process(Enrich()).execute_and_collect())
    assert ("broadcast", "rule", "Row") in got
    assert set(got) <= {("broadcast", "rule", "Row"), ("main", "rule", "Row")}


def test_reducing_and_aggregating_state_store_their_declared_types() -> None:
    """As for value, list and map state: PyFlink stores a reducing state's value and an
    aggregating state's accumulator serialized with the descriptor's type, so a
    ``Types.DOUBLE()`` reducing state over ints gives floats and a ``Types.ROW`` accumulator
    comes back a ``Row`` (``acc.f0``). They were kept as the functions returned them."""
    from streamflow.datastream.state import AggregatingStateDescriptor, ReducingStateDescriptor

    class Count(AggregateFunction):
        def create_accumulator(self) -> Any:
            return ("count", 0)

        def add(self, value: Any, accumulator: Any) -> Any:
            return (accumulator.f0, accumulator.f1 + 1)  # a Row, as PyFlink hands it back

        def get_result(self, accumulator: Any) -> Any:
            return (type(accumulator).__name__, accumulator.f1)

        def merge(self, acc_a: Any, acc_b: Any) -> Any:
            return (acc_a.f0, acc_a.f1 + acc_b.f1)

    class Both(KeyedProcessFunction):
        def open(self, ctx: Any) -> None:
            total = ReducingStateDescriptor("t", lambda a, b: a + b, Types.DOUBLE())
            self.total = ctx.get_reducing_state(total)
            row = Types.ROW([Types.STRING(), Types.INT()])
            self.count = ctx.get_aggregating_state(AggregatingStateDescriptor("c", Count(), row))

        def process_element(self, value: Any, ctx: Any) -> Any:
            self.total.add(value)
            self.count.add(value)
            yield (self.total.get(), type(self.total.get()).__name__, self.count.get())

    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    got = env.from_collection([1, 2]).key_by(lambda x: 0).process(Both()).execute_and_collect()
    assert list(got) == [(1.0, "float", ("Row", 1)), (3.0, "float", ("Row", 2))]
