"""User functions that only index their argument run as operator.itemgetter, and nothing else does."""

from __future__ import annotations

import operator
from typing import Any

import pytest
from stable_ids import stable_repr  # tests/stable_ids.py

from streamflow import StreamExecutionEnvironment
from streamflow.common import Types, WatermarkStrategy
from streamflow.common.watermark_strategy import TimestampAssigner
from streamflow.datastream import ReduceFunction, RuntimeContext
from streamflow.datastream.state import ValueStateDescriptor
from streamflow.runtime.item_getters import item_getter

OFFSET = 1


class ByThird(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return value[2]


class Documented:
    def get_key(self, value: Any) -> Any:
        """The key."""
        return value["k"]


def _closure() -> Any:
    i = 1
    return lambda e: e[i]


RECOGNISED = [
    (lambda e: e[0], 0),
    (lambda e: e[-1], -1),
    (lambda e: e["k"], "k"),
    (lambda value, ts: value[3], 3),
    (ByThird().extract_timestamp, 2),
    (Documented().get_key, "k"),
]

NOT_RECOGNISED = [
    lambda e: e[0] + 1,
    lambda e: e[OFFSET],
    _closure(),
    lambda e, k=0: e[k],
    lambda ts, value: value[0],  # the record is the first argument, not the second
    lambda e: e[0][1],
    lambda e: e[1.5],
    lambda e: e[(0, 1)],
    lambda e: e.k,
    lambda e: e,
    lambda *e: e[0],
    lambda e: (yield e[0]),
    str,
    operator.itemgetter(0),
    Documented,
]


@pytest.mark.parametrize(("fn", "key"), RECOGNISED)
def test_recognised(fn: Any, key: Any) -> None:
    given = fn.__code__.co_argcount - hasattr(fn, "__self__")
    getter = item_getter(fn, given)
    assert getter is not None
    assert getter == operator.itemgetter(key) or repr(getter) == repr(operator.itemgetter(key))
    record: Any = {"k": 7} if key == "k" else (10, 11, 12, 13)
    args = (record, 0) if given == 2 else (record,)
    assert getter(record) == fn(*args)
    short: Any = {} if key == "k" else ()
    for call in (lambda: fn(short, *args[1:]), lambda: getter(short)):
        with pytest.raises((IndexError, KeyError)) as info:
            call()
        assert info.type in (IndexError, KeyError)


@pytest.mark.parametrize("fn", NOT_RECOGNISED, ids=stable_repr)
def test_not_recognised(fn: Any) -> None:
    assert item_getter(fn) is None
    assert item_getter(fn, 2) is None


class CountingSum(ReduceFunction):
    """A reduce function with keyed state: needs the current key set for each record."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.calls = runtime_context.get_state(ValueStateDescriptor("calls", Types.INT()))

    def reduce(self, a: Any, b: Any) -> Any:
        n = (self.calls.value() or 0) + 1
        self.calls.update(n)
        return (a[0], a[1] + b[1], n)


@pytest.mark.parametrize("parallelism", [1, 4])
def test_keyed_jobs_with_recognised_functions(parallelism: int) -> None:
    data = [(f"k{i % 7}", i, i * 10) for i in range(3000)]
    env = StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    ds = env.from_collection(data).key_by(lambda e: e[0]).reduce(CountingSum())
    last = {r[0]: r for r in ds.execute_and_collect()}
    for k in range(7):
        values = [i for i in range(3000) if i % 7 == k]
        assert last[f"k{k}"] == (f"k{k}", sum(values), len(values) - 1)

    env = StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    plain = env.from_collection(data).key_by(lambda e: e[0]).reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
    out = list(plain.execute_and_collect())
    assert len(out) == 3000
    assert {r[0]: r[1] for r in out if r[2] >= 2930} == {f"k{k}": sum(range(k, 3000, 7)) for k in range(7)}


def test_timestamp_assigner_method_as_getter() -> None:
    from streamflow.datastream import ProcessWindowFunction
    from streamflow.datastream.window import TumblingEventTimeWindows

    class Sum(ProcessWindowFunction):
        def process(self, key: Any, context: Any, elements: Any) -> Any:
            return [(key, context.window().end, sum(e[1] for e in elements))]

    data = [(f"k{i % 3}", i, i * 7) for i in range(1000)]
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(ByThird())
    ds = (
        env.from_collection(data)
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(1000))
        .process(Sum())
    )
    got = sorted(ds.execute_and_collect())
    expected: dict[tuple[str, int], int] = {}
    for k, v, ts in data:
        end = (ts // 1000 + 1) * 1000
        expected[(k, end)] = expected.get((k, end), 0) + v
    assert got == sorted((k, end, s) for (k, end), s in expected.items())


def test_argument_count_must_match_the_call() -> None:
    # a selector needing two arguments fails when called with one: never replaced
    two, defaults = (lambda a, b: a[0]), (lambda e, extra=0: e[0])
    assert item_getter(two) is None
    assert item_getter(two, 2) is not None
    assert item_getter(defaults) is None  # defaults: left alone
    assert item_getter(ByThird().extract_timestamp, 1) is None
    assert item_getter(ByThird().extract_timestamp, 2) is not None


def _keyed_sums(selector: Any, parallelism: int = 1) -> dict[Any, int]:
    env = StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    data = [(i % 3, i % 5, i) for i in range(300)]
    ds = env.from_collection(data).key_by(selector).map(lambda e: (selector(e), e[2])).key_by(
        lambda e: e[0]
    ).reduce(lambda a, b: (a[0], a[1] + b[1]))
    return {k: s for k, s in ds.execute_and_collect()}


def _expected(field: int) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for i in range(300):
        k = (i % 3, i % 5, i)[field]
        out[k] = out.get(k, 0) + i
    return out


@pytest.mark.parametrize("parallelism", [1, 2])
def test_look_alike_selectors_behave_as_written(parallelism: int, monkeypatch: pytest.MonkeyPatch) -> None:
    i = 0
    closing = lambda e: e[i]  # noqa: E731 - a closure read when called, not when defined
    i = 1
    assert _keyed_sums(closing, parallelism) == _expected(1)
    assert _keyed_sums(lambda e, k=1: e[k], parallelism) == _expected(1)
    monkeypatch.setattr(__import__(__name__), "OFFSET", 0)
    assert _keyed_sums(lambda e: e[OFFSET], parallelism) == _expected(0)
    assert _keyed_sums(lambda e: e[1], parallelism) == _expected(1)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_two_argument_selector_still_fails(parallelism: int) -> None:
    env = StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    ds = env.from_collection([(1, 2)]).key_by(lambda a, b: a[0]).reduce(lambda a, b: a)
    with pytest.raises(TypeError, match="argument"):
        list(ds.execute_and_collect())


def _job(kind: str, parallelism: int, data: list) -> Any:
    from streamflow.datastream.window import TumblingEventTimeWindows

    env = StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    ds = env.from_collection(data)
    if kind == "timestamps":
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e: e[1])
        return ds.assign_timestamps_and_watermarks(strategy)
    if kind == "window":
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: 5)
        keyed = ds.assign_timestamps_and_watermarks(strategy).key_by(lambda e: e[0])
        return keyed.window(TumblingEventTimeWindows.of(1000)).reduce(lambda a, b: a)
    keyed = ds.key_by(lambda e: e[0])
    if kind == "reduce":
        return keyed.reduce(lambda a, b: (a[0], a[1] + b[1]))
    return keyed.process(lambda value, ctx: [value])


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("kind", ["reduce", "process", "window", "timestamps"])
def test_a_record_that_cannot_be_indexed_is_named(kind: str, parallelism: int) -> None:
    data: list[Any] = [("a", 1), ("b", 2), 12345, ("c", 3)]
    with pytest.raises(TypeError, match="not subscriptable") as info:
        list(_job(kind, parallelism, data).execute_and_collect())
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "while processing record 12345" in notes, notes


def test_lambdas_defined_inside_functions() -> None:
    def build() -> Any:
        return lambda e: e[0]

    getter = item_getter(build())
    assert getter is not None and getter((5, 6)) == 5
