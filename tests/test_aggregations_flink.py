"""Flink's rolling aggregation and grouped-reduce tests, end to end through ``KeyedStream``.

Sources (apache/flink, flink-streaming-java):
``src/test/java/org/apache/flink/streaming/api/AggregationFunctionTest.java``
(``groupSumIntegerTest``, ``pojoGroupSumIntegerTest``, ``minMaxByTest``, ``pojoMinMaxByTest``)
and ``src/test/java/org/apache/flink/streaming/api/operators/StreamGroupedReduceOperatorTest.java``
(``testGroupedReduce``, ``testOpenClose``). Flink's Java ``minBy``/``maxBy`` default to
``first = true`` (on a tie the element seen first stays), which is PyFlink's rule too
(``KeyedStream.min_by``: "the operator returns the first one by default",
flink-python/pyflink/datastream/data_stream.py ``_accumulate``); ``sum``/``min``/``max``
keep the other fields of the key's first element. Flink's POJOs by field name are Rows
with named fields and dataclasses here. Every case runs at parallelism 1 and 4 (the key
decides the subtask, so each key's sequence of results is Flink's).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import streamflow as sf
from streamflow.common import Row
from streamflow.functions import ReduceFunction
from streamflow.testing import ListSink, Record, ScriptedSource


def _run(data: list, key: Callable[[Any], Any], op: Callable[[Any], Any], parallelism: int) -> list:
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    return list(op(env.from_collection(data).key_by(key)).execute_and_collect())


def _per_key(results: list, key: Callable[[Any], Any]) -> dict:
    """Each key's results in order (the only order a parallel job defines)."""
    out: dict = defaultdict(list)
    for r in results:
        out[key(r)].append(r)
    return dict(out)


GROUP_INPUT = [(i % 3, i) for i in range(9)]  # AggregationFunctionTest.getInputList


def _expected_group(kind: str) -> list:
    sums: dict[int, int] = defaultdict(int)
    out = []
    for i in range(9):
        sums[i % 3] += i
        out.append((i % 3, {"sum": sums[i % 3], "min": i % 3, "max": i}[kind]))
    return out


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("kind", ["sum", "min", "max"])
def test_group_sum_min_max_on_tuples(kind: str, parallelism: int) -> None:
    """AggregationFunctionTest.groupSumIntegerTest: (i % 3, i) keyed by field 0, aggregated on
    field 1 by position."""
    got = _run(GROUP_INPUT, lambda t: t[0], lambda ks: getattr(ks, kind)(1), parallelism)
    assert _per_key(got, lambda t: t[0]) == _per_key(_expected_group(kind), lambda t: t[0])


@dataclass
class MyPojo:
    f0: int
    f1: int


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("kind", ["sum", "min", "max"])
@pytest.mark.parametrize("shape", ["row", "dataclass", "list"])
def test_pojo_group_sum_min_max_by_field_name(kind: str, shape: str, parallelism: int) -> None:
    """AggregationFunctionTest.pojoGroupSumIntegerTest: the field by name ("f1") on records with
    named fields (a Row of named fields, a dataclass), and by position on lists; the result keeps
    the record's type."""
    make: Callable[[int, int], Any] = {
        "row": lambda a, b: Row(f0=a, f1=b),
        "dataclass": MyPojo,
        "list": lambda a, b: [a, b],
    }[shape]
    field: int | str = 1 if shape == "list" else "f1"
    key = (lambda r: r[0]) if shape == "list" else (lambda r: r.f0)
    data = [make(*t) for t in GROUP_INPUT]
    got = _run(data, key, lambda ks: getattr(ks, kind)(field), parallelism)
    assert all(type(r) is type(data[0]) for r in got)
    expected = [make(*t) for t in _expected_group(kind)]
    assert _per_key(got, key) == _per_key(expected, key)


BY_INPUT = [(0, i % 3, i) for i in range(9)]  # AggregationFunctionTest.getInputByList

# minMaxByTest's "first" expectations (Flink's and PyFlink's default)
MAX_BY_FIRST = [(0, 0, 0), (0, 1, 1)] + [(0, 2, 2)] * 7
MIN_BY_FIRST = [(0, 0, 0)] * 9


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize(("kind", "expected"), [("max_by", MAX_BY_FIRST), ("min_by", MIN_BY_FIRST)])
@pytest.mark.parametrize("shape", ["tuple", "row", "row-by-name", "dataclass"])
def test_min_by_max_by_keep_the_first_of_equal_elements(
    kind: str, expected: list, shape: str, parallelism: int
) -> None:
    """AggregationFunctionTest.minMaxByTest / pojoMinMaxByTest with ``first = true`` (the default):
    among elements with the same extreme value the first one stays, whole (field 2 tells
    which element it is)."""
    make: Callable[[tuple], Any] = {
        "tuple": lambda t: t,
        "row": lambda t: Row(*t),
        "row-by-name": lambda t: Row(f0=t[0], f1=t[1], f2=t[2]),
        "dataclass": lambda t: _Pojo3(*t),
    }[shape]
    field: int | str = "f1" if shape in ("row-by-name", "dataclass") else 1
    data = [make(t) for t in BY_INPUT]
    got = _run(data, lambda r: 0, lambda ks: getattr(ks, kind)(field), parallelism)
    assert got == [make(t) for t in expected]


@dataclass
class _Pojo3:
    f0: int
    f1: int
    f2: int


@pytest.mark.parametrize("parallelism", [1, 4])
def test_min_max_keep_the_first_elements_other_fields(parallelism: int) -> None:
    """``min``/``max`` (not ``_by``): only the aggregated field changes, the others stay the key's
    first element's (Flink's ComparableAggregator with byAggregate = false; PyFlink's
    ``_accumulate`` MIN/MAX)."""
    got_min = _run(BY_INPUT, lambda r: 0, lambda ks: ks.min(1), parallelism)
    got_max = _run(BY_INPUT, lambda r: 0, lambda ks: ks.max(1), parallelism)
    assert got_min == [(0, 0, 0)] * 9
    assert got_max == [(0, 0, 0), (0, 1, 0)] + [(0, 2, 0)] * 7


class _TimestampOf(sf.ProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield (value, ctx.timestamp())


@pytest.mark.parametrize("parallelism", [1, 4])
def test_grouped_reduce_keeps_each_elements_timestamp(parallelism: int) -> None:
    """StreamGroupedReduceOperatorTest.testGroupedReduce: integers keyed by themselves, summed;
    each result carries the timestamp of the element that produced it and the watermark passes
    through in order."""
    source = ScriptedSource(
        [Record(1, 1), Record(1, 2), sf.Watermark(2), Record(2, 3), Record(2, 4), Record(3, 5)]
    )
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    sink = ListSink()
    (
        env.from_source(source, None, "scripted")
        .key_by(lambda v: v)
        .reduce(lambda a, b: a + b)
        .process(_TimestampOf())
        .sink_to(sink)
    )
    env.execute()
    assert sorted(sink.results, key=lambda r: r[1]) == [(1, 1), (2, 2), (2, 3), (4, 4), (3, 5)]


class _OpenCloseReduce(ReduceFunction):
    """StreamGroupedReduceOperatorTest.TestOpenCloseReduceFunction."""

    events: list[str] = []

    def open(self, runtime_context: Any) -> None:
        assert "close" not in self.events, "close called before open"
        self.events.append("open")

    def close(self) -> None:
        assert "open" in self.events, "open was not called before close"
        self.events.append("close")

    def reduce(self, a: int, b: int) -> int:
        assert "open" in self.events, "open was not called before reduce"
        return a + b


def test_grouped_reduce_open_close() -> None:
    """StreamGroupedReduceOperatorTest.testOpenClose: a rich reduce function is opened before
    its first reduce and closed at the end; the operator emits."""
    _OpenCloseReduce.events = []
    env = sf.StreamExecutionEnvironment()
    got = list(
        env.from_collection([1, 2, 1]).key_by(lambda v: 0).reduce(_OpenCloseReduce()).execute_and_collect()
    )
    assert got == [1, 3, 4]
    assert _OpenCloseReduce.events == ["open", "close"]


class _InPlaceSum(ReduceFunction):
    """Changes its first argument in place and returns it: the idiom of PyFlink's own
    ``KeyedStream._accumulate`` for Row and list records (``v1[pos] = ...; return v1``)."""

    def reduce(self, a: Any, b: Any) -> Any:
        a[1] += b[1]
        return a


class _InPlaceCollect(ReduceFunction):
    """Extends the list inside its first argument and returns it."""

    def reduce(self, a: tuple, b: tuple) -> tuple:
        a[1].extend(b[1])
        return a


@pytest.mark.parametrize("mode", ["streaming", "batch"])
@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("shape", ["list", "row", "nested"])
def test_a_reduce_changing_its_first_argument_in_place(
    shape: str, parallelism: int, backend: str, mode: str
) -> None:
    """StreamGroupedReduceOperatorTest.testGroupedReduce's rule (each element's result goes
    out as it is then) with a reduce function that changes its first argument in place and
    returns it. In Flink and PyFlink the results already emitted and the records received are
    serialized copies, so they never change afterwards: the running sums are 1, 3, 6, and the
    collection the job read is left as it was. streamflow kept the emitted record as the
    key's value and emitted it again after changing it: 6, 6, 6, and the input's first
    record changed."""
    make: Any = {
        "list": lambda k, v: [k, v],
        "row": lambda k, v: Row(k, v),
        "nested": lambda k, v: (k, [v]),
    }[shape]
    data = [make("a", 1), make("a", 2), make("b", 5), make("a", 3)]
    before = repr(data)
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    if backend == "rocksdb":
        env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    if mode == "batch":
        from streamflow.datastream import RuntimeExecutionMode

        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    function = _InPlaceCollect() if shape == "nested" else _InPlaceSum()
    got = [
        tuple(r)
        for r in env.from_collection(data).key_by(lambda r: r[0]).reduce(function).execute_and_collect()
    ]
    if shape == "nested":
        running = [("a", [1]), ("a", [1, 2]), ("a", [1, 2, 3]), ("b", [5])]
        final = [("a", [1, 2, 3]), ("b", [5])]
    else:
        running = [("a", 1), ("a", 3), ("a", 6), ("b", 5)]
        final = [("a", 6), ("b", 5)]
    assert sorted(got) == (final if mode == "batch" else running)
    assert repr(data) == before
