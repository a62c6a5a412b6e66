"""Recognising user functions as Spark expressions (streamflow.spark.native), without Spark:
what is recognised, the proofs it needs (64-bit ranges, floor semantics), what is refused.
The same functions run on Spark against the asyncio engine in tests/test_spark.py."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import pytest

from streamflow.spark.native import (
    Field,
    Layout,
    NotRecognised,
    Typer,
    compile_function,
    merge_layouts,
    recognise,
)

EVENT = Layout((Field("c0", "str"), Field("c1", "int", 0, 96), Field("c2", "int", 0, 10**6)), True)
SCALAR = Layout((Field("c0", "int", -50, 50),), False)


def trees(fn: Any, layout: Layout = EVENT) -> list[tuple]:
    result = compile_function(fn, layout)
    return [e.tree for e in result.exprs]


def test_the_workloads_functions_are_recognised() -> None:
    assert trees(lambda e: e[1] * 2) == [("mul", ("col", "c1"), ("lit", 2))]
    assert trees(lambda v: v % 3 != 0, SCALAR) == [("cmp", "!=", ("pmod", ("col", "c0"), 3), ("lit", 0))]
    assert trees(lambda e: e[0]) == [("col", "c0")]


def test_ranges_follow_the_arithmetic() -> None:
    (e,) = compile_function(lambda e: e[1] * 2 - 10, EVENT).exprs
    assert (e.kind, e.lo, e.hi) == ("int", -10, 182)
    (e,) = compile_function(lambda v: v // 7, SCALAR).exprs
    assert (e.lo, e.hi) == (-50 // 7, 50 // 7)  # floor division, as Python
    (e,) = compile_function(lambda v: v % 7, SCALAR).exprs
    assert (e.lo, e.hi) == (0, 6)  # Python's modulo by a positive int is never negative
    (e,) = compile_function(lambda v: -v, SCALAR).exprs
    assert (e.lo, e.hi) == (-50, 50)


def test_a_tuple_built_of_fields_and_the_identity() -> None:
    result = compile_function(lambda e: (e[0], e[2] - e[1], e[1] > 3), EVENT)
    assert result.is_tuple
    assert [f.kind for f in result.layout(EVENT).fields] == ["str", "int", "bool"]
    assert compile_function(lambda e: e, EVENT).identity


def test_what_could_overflow_64_bits_is_refused() -> None:
    fits = Layout((Field("c0", "int", -(2**62), 2**62 - 1),), False)
    assert recognise(lambda v: v + v, fits, "t") is not None  # [-2**63, 2**63 - 2]
    big = Layout((Field("c0", "int", -(2**62), 2**62),), False)
    assert recognise(lambda v: v + v, big, "t") is None  # 2**63 is one too many
    assert recognise(lambda v: v * 2 + 1, big, "t") is None
    assert recognise(lambda v: v * v, big, "t") is None
    assert recognise(lambda v: v * 4, big, "t") is None
    wide = Layout((Field("c0", "int", 0, 2**60),), False)
    assert recognise(lambda v: v // 3, wide, "t") is None  # not exact in doubles
    assert recognise(lambda v: v % 3, wide, "t") is not None


@pytest.mark.parametrize(
    "fn",
    [
        lambda e: e[1] / 2,  # true division: floats
        lambda e: e[1] % e[2],  # modulo by a column (could be 0 or negative)
        lambda e: e[1] // -3,  # negative divisor
        lambda e: e[1] % 0,
        lambda e: e[0] + e[0],  # str concatenation
        lambda e: e[0] == 1,  # mixed kinds
        lambda e: e[3],  # out of range
        lambda e: len(e),  # a call
        lambda e: e[0].upper(),  # an attribute
        lambda e: e[1] if e[1] else 0,  # a jump
        lambda e: e[1] * 2.0,  # a float constant
        lambda e: e[1] ** 2,
        lambda e: e[1] + True,  # bool arithmetic
    ],
)
def test_refused_forms(fn: Any) -> None:
    assert recognise(fn, EVENT, "t") is None


def test_globals_and_closures_are_refused() -> None:
    factor = 3
    assert recognise(lambda e: e[1] * factor, EVENT, "t") is None
    assert recognise(_uses_a_global, EVENT, "t") is None


SCALE = 2


def _uses_a_global(e: Any) -> int:
    return e[1] * SCALE


class _Assigner:
    def __init__(self) -> None:
        self.field = 2

    def pure(self, value: Any, record_timestamp: int) -> int:
        return value[2]

    def reads_self(self, value: Any, record_timestamp: int) -> int:
        return value[self.field]

    def reads_the_timestamp(self, value: Any, record_timestamp: int) -> int:
        return record_timestamp


def test_methods_are_recognised_only_when_they_read_nothing_but_the_value() -> None:
    a = _Assigner()
    assert recognise(a.pure, EVENT, "t", 1, 2) is not None
    assert recognise(a.reads_self, EVENT, "t", 1, 2) is None
    assert recognise(a.reads_the_timestamp, EVENT, "t", 1, 2) is None
    assert recognise(lambda e, t: e[2], EVENT, "t", 0, 2) is not None
    assert recognise(lambda e, t: e[2], EVENT, "t", 0, 1) is None  # called with one argument


def test_typer_types_plain_tuples_and_scalars_only() -> None:
    t = Typer()
    assert t.columns([("a", 1, True), ("b", -5, False)]) == [["a", "b"], [1, -5], [True, False]]
    layout = t.layout()
    assert layout is not None and [(f.kind, f.lo, f.hi) for f in layout.fields] == [
        ("str", 0, 0), ("int", -5, 1), ("bool", 0, 0)]
    assert t.columns([("c", True, True)]) is None and t.failed  # a bool where ints were
    assert t.layout() is None and t.layout(ignore_failure=True) is not None

    Point = namedtuple("Point", "x y")
    for records in ([Point(1, 2)], [("a", 1.5)], [("a", None)], [{"k": 1}], [("a", 2**64)], [()]):
        typer = Typer()
        assert typer.columns(records) is None and typer.failed, records
    s = Typer()
    assert s.columns([1, 2, 3]) == [[1, 2, 3]] and s.layout() == Layout((Field("c0", "int", 0, 3),), False)
    s.columns([1, "x"])
    assert s.failed


def test_union_layouts_merge_ranges_of_the_same_shape() -> None:
    a = Layout((Field("c0", "str"), Field("c1", "int", 0, 5)), True)
    b = Layout((Field("c0", "str"), Field("c1", "int", -3, 2)), True)
    assert merge_layouts([a, b]) == Layout((Field("c0", "str"), Field("c1", "int", -3, 5)), True)
    assert merge_layouts([a, SCALAR]) is None
    assert merge_layouts([a, None]) is None


def test_compile_function_raises_not_recognised() -> None:
    with pytest.raises(NotRecognised):
        compile_function(lambda e: e[1] / 2, EVENT)


def test_rolling_reduces_are_recognised_field_by_field() -> None:
    from streamflow.runtime.keyed_operators import ReduceOperator, aggregation
    from streamflow.spark.rolling import recognise_rolling

    def op(fn: Any) -> ReduceOperator:
        return ReduceOperator("r", lambda e: e[0], fn)

    counted = Layout(EVENT.fields, True, 1000)
    parts, out = recognise_rolling(op(lambda a, b: (a[0], a[1] + b[1], b[2])), counted, "t") or ((), None)
    assert parts == ("first", "sum", "last")
    assert out is not None and (out.fields[1].lo, out.fields[1].hi) == (0, 96 * 1000)
    parts, _out = recognise_rolling(op(aggregation("sum", 1)), counted, "t") or ((), None)
    assert parts == ("first", "sum", "first")  # PyFlink's sum keeps the first record's other fields
    assert recognise_rolling(op(aggregation("sum", 0)), counted, "t") is None  # a str field
    assert recognise_rolling(op(aggregation("max", 1)), counted, "t") is None
    assert recognise_rolling(op(lambda a, b: (a[0], max(a[1], b[1]), b[2])), counted, "t") is None
    assert recognise_rolling(op(lambda a, b: (a[0], a[1] + b[2], b[2])), counted, "t") is None
    assert recognise_rolling(op(lambda a, b: (a[0], a[1] + b[1], b[2])), EVENT, "t") is None  # count unknown
    huge = Layout((Field("c0", "str"), Field("c1", "int", 0, 2**40)), True, 2**30)
    assert recognise_rolling(op(aggregation("sum", 1)), huge, "t") is None  # 2**70 could overflow
