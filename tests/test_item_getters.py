"""User functions that only index their argument run as operator.itemgetter, and nothing else does."""

from __future__ import annotations

import operator
from typing import Any

import pytest

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
    getter = item_getter(fn)
    assert getter is not None
    assert getter == operator.itemgetter(key) or repr(getter) == repr(operator.itemgetter(key))
    record: Any = {"k": 7} if key == "k" else (10, 11, 12, 13)
    args = (record, 0) if fn.__code__.co_argcount - hasattr(fn, "__self__") == 2 else (record,)
    assert getter(record) == fn(*args)
    short: Any = {} if key == "k" else ()
    for call in (lambda: fn(short, *args[1:]), lambda: getter(short)):
        with pytest.raises((IndexError, KeyError)) as info:
            call()
        assert info.type in (IndexError, KeyError)


@pytest.mark.parametrize("fn", NOT_RECOGNISED, ids=repr)
def test_not_recognised(fn: Any) -> None:
    assert item_getter(fn) is None


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
