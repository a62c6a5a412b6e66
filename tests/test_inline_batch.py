"""``map``/``filter`` functions that are one expression over their argument run inlined in a
generated comprehension (runtime/inline_batch.py): the same records, timestamps and errors as
the function called per record, at parallelism 1 and 4; anything else is called as before."""

from __future__ import annotations

from typing import Any

import pytest

import streamflow as sf
from streamflow.functions import FilterFunction, MapFunction
from streamflow.runtime.basic_operators import FilterOperator, MapOperator
from streamflow.runtime.inline_batch import batch_filter, batch_map, expression_of

OFFSET = 3


def test_recognised_shapes() -> None:
    assert expression_of(lambda e: e[1] * 2) == "(r[1] * 2)"
    assert expression_of(lambda v: v % 3 != 0) == "((r % 3) != 0)"
    assert expression_of(lambda v: v is not None) == "(r is not None)"
    assert expression_of(lambda v: "x" not in v) == "('x' not in r)"
    assert expression_of(lambda v: not v[0]) == "(not r[0])"
    assert expression_of(lambda v: (-v, ~v)) == "((-r), (~r))"
    assert expression_of(lambda e: (e["k"], e["n"] - -1)) == "(r['k'], (r['n'] - (-1)))"


def _outside(e: Any) -> Any:  # a global name: left alone
    return e + OFFSET


@pytest.mark.parametrize(
    "fn",
    [
        lambda e: len(e),  # a call
        lambda e: e + OFFSET,  # a global
        lambda e: e.x,  # an attribute
        lambda e: e if e else 0,  # a conditional
        lambda e: 0 < e < 5,  # a comparison chain (jumps)
        lambda e: e and e[0],  # a short circuit (jumps)
        lambda e: e * 1.5,  # a float constant
        lambda e: [e],  # a list
        lambda e, d=1: e + d,  # two arguments
        _outside,
        abs,  # not a Python function
    ],
)
def test_other_functions_are_left_alone(fn: Any) -> None:
    assert expression_of(fn) is None
    assert batch_map(fn) is None and batch_filter(fn) is None


def test_closures_and_function_objects_are_called() -> None:
    step = 2

    class Double(MapFunction):
        def map(self, value: Any) -> Any:
            return value * 2

    assert MapOperator("m", lambda e: e * step).inlined is None
    assert MapOperator("m", Double()).inlined is None
    op = MapOperator("m", lambda e: e[1] * 2)
    assert op.inlined is not None
    assert "inlined" in op.inlined.__code__.co_filename  # a traceback says what runs there
    assert FilterOperator("f", lambda v: v % 3 != 0).inlined_filter is not None


class _Called(MapFunction, FilterFunction):  # the general path: the function is called per record
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def map(self, value: Any) -> Any:
        return self.fn(value)

    def filter(self, value: Any) -> bool:
        return self.fn(value)


DATA = [(f"k{i % 7}", i % 97, (i // 10) * 10 + i % 10, "" if i % 5 else "x") for i in range(20_000)]
DOUBLE = lambda e: (e[0], e[1] * 2, e[2], e[3])  # noqa: E731
KEEP = lambda e: e[1] % 3 != 0  # noqa: E731
TEXT = lambda e: e[3]  # noqa: E731  # a str: its truth value is what filter tests


def _job(parallelism: int, wrap: Any, timestamps: bool) -> list:
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    ds = env.from_collection(DATA)
    if timestamps:  # the filter's path that keeps each record's timestamp
        strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
            lambda e, _ts: e[2]
        )
        ds = ds.assign_timestamps_and_watermarks(strategy)
    ds = ds.map(wrap(DOUBLE)).filter(wrap(KEEP)).filter(wrap(TEXT))
    if timestamps:  # windows see the timestamps the filters kept
        from streamflow.windowing import TumblingEventTimeWindows

        ds = ds.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(1000)).reduce(
            lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2]), a[3])
        )
    return sorted(ds.execute_and_collect())


@pytest.mark.parametrize("timestamps", [False, True])
@pytest.mark.parametrize("parallelism", [1, 4])
def test_jobs_give_the_answers_of_the_called_functions(parallelism: int, timestamps: bool) -> None:
    inlined = _job(parallelism, lambda fn: fn, timestamps)
    assert inlined == _job(parallelism, _Called, timestamps)
    assert inlined  # the filters kept something
    if not timestamps:
        assert inlined == sorted(DOUBLE(e) for e in DATA if KEEP(DOUBLE(e)) and e[3])


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("method", ["map", "filter"])
def test_an_error_names_the_operator_and_the_record(method: str, parallelism: int) -> None:
    data = [(i, 1 if i != 1234 else 0) for i in range(3000)]
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    stream = env.from_collection(data)
    stream = stream.map(lambda e: e[0] // e[1]) if method == "map" else stream.filter(lambda e: e[0] // e[1])
    with pytest.raises(ZeroDivisionError) as info:
        list(stream.execute_and_collect())
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "while processing record (1234, 0)" in notes, notes
    assert ("Map" if method == "map" else "Filter") in notes
