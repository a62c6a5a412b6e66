"""The per-batch fast paths for declared types give exactly what the general paths give."""

from __future__ import annotations

import decimal
import enum
import io

import pytest
from stable_ids import stable_repr  # tests/stable_ids.py

from streamflow import StreamExecutionEnvironment
from streamflow.api.typed import convert_collection
from streamflow.common import Row, Types
from streamflow.types.fast_paths import batch_converter, formatter, print_lines


class MyInt(int):
    def __str__(self) -> str:
        return "my"


class MyStr(str):
    pass


class Color(enum.IntEnum):
    RED = 1


ODD_VALUES = [
    None, True, False, 0, -5, 2**70, 1.5, float("nan"), "x", "", MyInt(3), MyStr("s"), Color.RED,
    decimal.Decimal("1.50"), b"b", [1, 2], (1, 2), ("a", 1, 2), ("a", True, 2), ("a", 1, None),
    ["a", 1, 2], ("a", 1, 2, 3), Row("a", 1, 2), {"k": 1}, ("a", 1.0, 2), (MyStr("a"), 1, 2),
]

TYPES = [
    Types.STRING(), Types.CHAR(), Types.INT(), Types.LONG(), Types.BYTE(), Types.SHORT(), Types.BIG_INT(),
    Types.BOOLEAN(), Types.FLOAT(), Types.DOUBLE(), Types.BIG_DEC(), Types.PICKLED_BYTE_ARRAY(),
    Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()]),
    Types.TUPLE([Types.STRING(), Types.FLOAT(), Types.LONG()]),
    Types.TUPLE([Types.STRING(), Types.DOUBLE(), Types.LONG()]),
    Types.TUPLE([Types.STRING(), Types.BOOLEAN(), Types.LONG()]),
    Types.TUPLE([Types.STRING(), Types.TUPLE([Types.INT(), Types.INT()])]),
    Types.ROW([Types.STRING(), Types.INT(), Types.LONG()]),
    Types.LIST(Types.INT()),
]


@pytest.mark.parametrize("type_info", TYPES, ids=stable_repr)
def test_formatter_matches_format(type_info: object) -> None:
    fmt = formatter(type_info, type_info.format)  # type: ignore[attr-defined]
    for value in ODD_VALUES:
        try:
            expected = type_info.format(value)  # type: ignore[attr-defined]
        except Exception as exc:  # the fast path must fail the same way
            with pytest.raises(type(exc)):
                fmt(value)
            continue
        assert fmt(value) == expected, (type_info, value)


def test_formatter_is_generated_for_plain_tuples_only() -> None:
    plain = Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])
    assert formatter(plain, plain.format) is not plain.format
    with_float = Types.TUPLE([Types.STRING(), Types.FLOAT()])
    assert formatter(with_float, with_float.format) == with_float.format
    assert formatter(plain, plain.format)(("k1", 5, 123)) == "(k1,5,123)"


@pytest.mark.parametrize("type_info", TYPES, ids=stable_repr)
def test_batch_converter_matches_convert(type_info: object) -> None:
    convert_batch = batch_converter(type_info)
    if convert_batch is None:
        assert not type_info.converts()  # type: ignore[attr-defined]
        return
    batches = [
        [("a", 1, 2), ("b", 3, 4)],
        [("a", 1, 2), ["b", 3, 4]],  # a list among tuples: converted record by record
        [],
        [("a", 1, 2)] * 3 + [("a", 1.25, 2)],
        [("a", (1, 2)), ("b", [3, 4])],
        [[1, 2], [3]],
        [("a", 1.5, 2), ("b", 2.0, 3)],  # doubles that are floats: the batch itself
        [("a", 1.5, 2), ("b", 2, 3), ("c", True, 4)],  # an int for a double: a float
        [1.5, 2.5],
        [1.5, 2, None],
    ]
    for batch in batches:
        try:
            expected = [type_info.convert(v) for v in batch]  # type: ignore[attr-defined]
        except Exception as exc:
            with pytest.raises(type(exc)):
                convert_batch(batch)
            continue
        got = convert_batch(batch)
        assert got == expected
        assert [type(v) for v in got] == [type(v) for v in expected]


def test_tuple_convert_returns_a_record_of_the_type_itself() -> None:
    t = Types.TUPLE([Types.STRING(), Types.INT()])
    record = ("a", 1)
    assert t.convert(record) is record
    assert t.convert(["a", 1]) == ("a", 1)
    with pytest.raises(ValueError):
        t.convert(("a", 1, 2))
    f = Types.TUPLE([Types.STRING(), Types.FLOAT()])
    assert f.convert(("a", 0.1)) == ("a", 0.10000000149011612)  # a Java float


def test_convert_collection_converts_iterables_by_slices() -> None:
    t = Types.TUPLE([Types.STRING(), Types.INT()])
    data = [("a", i) if i % 7 else ["a", i] for i in range(2000)]
    expected = [("a", i) for i in range(2000)]
    assert list(convert_collection(iter(data), t)()) == expected
    assert list(convert_collection(lambda: iter(data), t)()) == expected
    assert list(convert_collection(lambda: iter(data), t)()) == expected  # re-invoked on restore
    assert convert_collection(data, t) == expected
    assert convert_collection(tuple(data), t) == expected


def test_print_lines() -> None:
    assert print_lines(str, "", []) == ""
    assert print_lines(str, "", [1, 2]) == "1\n2\n"
    assert print_lines(str, "p> ", [1, 2]) == "p> 1\np> 2\n"


def test_typed_print_of_a_job(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    env = StreamExecutionEnvironment()
    data = [("a", 1, 2), ("b", True, None), ("c", 2**70, -1)]
    # a callable collection: a list would be narrowed as PyFlink's JVM does (2**70 -> 0)
    type_info = Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])
    env.from_collection(lambda: data, type_info=type_info).print()
    env.execute()
    assert out.getvalue() == "(a,1,2)\n(b,true,null)\n(c,1180591620717411303424,-1)\n"


def test_execute_and_collect_iterates_and_closes() -> None:
    env = StreamExecutionEnvironment()
    results = env.from_collection(list(range(10))).execute_and_collect()
    assert next(results) == 0
    it = iter(results)
    assert next(it) == 1
    assert results.next() == 2
    assert [v for v in results] == list(range(3, 10))
    with env.from_collection(list(range(5))).execute_and_collect() as more:
        it = iter(more)
        assert next(it) == 0
    assert list(it) == []  # closed: every iterator over the results ends
    limited = env.from_collection(list(range(5))).execute_and_collect(limit=2)
    assert list(limited) == [0, 1]


def test_doubles_that_are_floats_are_their_own_conversion() -> None:
    """A batch whose DOUBLE values (alone or as tuple fields) are all floats is returned as it
    is; an int among them makes the batch convert (to a float, as PyFlink's serializer)."""
    doubles, pairs = Types.DOUBLE(), Types.TUPLE([Types.STRING(), Types.DOUBLE()])
    floats, tuples = [1.5, 2.0], [("a", 1.5), ("b", 2.0)]
    assert batch_converter(doubles)(floats) is floats  # type: ignore[misc]
    assert batch_converter(pairs)(tuples) is tuples  # type: ignore[misc]
    assert batch_converter(pairs)([("a", 1)]) == [("a", 1.0)]  # type: ignore[misc]
