"""Round trips and refusals of the checkpoint value codec."""

from __future__ import annotations

import collections
import datetime
import decimal
import enum
import fractions
import math
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamflow.state.codec import Codec, JsonCodec, PickleCodec, decode, encode


def canon(x: Any) -> Any:
    """A fully typed, order-aware description of ``x`` (floats by repr, so NaN == NaN)."""
    t = type(x)
    if t is float:
        return ("float", repr(x))
    if t in (list, tuple):
        return (t.__name__, tuple(canon(e) for e in x))
    if t is dict:
        return ("dict", tuple((canon(k), canon(v)) for k, v in x.items()))
    if t in (set, frozenset):
        return (t.__name__, tuple(sorted((canon(e) for e in x), key=repr)))
    return (t.__name__, x)


def assert_round_trip(value: Any) -> bytes:
    data = encode(value)
    assert isinstance(data, bytes)
    assert canon(decode(data)) == canon(value)
    return data


class Color(enum.IntEnum):
    RED = 1


class MyStr(str):
    pass


class MyFloat(float):
    pass


class Point:
    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and other.x == self.x

    __hash__ = None  # type: ignore[assignment]


ROUND_TRIPS: list[tuple[str, Any]] = [
    ("none", None),
    ("true", True),
    ("false", False),
    ("zero", 0),
    ("int", -17),
    ("int64_min", -(2**63)),
    ("uint64_max", 2**64 - 1),
    ("int_just_below_int64", -(2**63) - 1),
    ("int_just_above_uint64", 2**64),
    ("huge_int", 7**5000),  # beyond Python's 4300-digit str limit
    ("huge_negative_int", -(3**9000)),
    ("float", 0.1),
    ("float_integral", 2.0),
    ("negative_zero", -0.0),
    ("float_tiny", 5e-324),
    ("float_max", 1.7976931348623157e308),
    ("nan", math.nan),
    ("inf", math.inf),
    ("minus_inf", -math.inf),
    ("str", "héllo wörld ✓ 𝄞"),
    ("empty_str", ""),
    ("str_like_tag", '{"t": [1]}'),
    ("bytes", b"\x00\xffabc"),
    ("empty_bytes", b""),
    ("tuple", (1, "a", None)),
    ("empty_tuple", ()),
    ("one_tuple", (1,)),
    ("list", [1, 2.5, "x", True, None]),
    ("empty_list", []),
    ("list_of_tuples", [(1, 2), (3, 4)]),
    ("str_dict", {"a": 1, "b": [2]}),
    ("empty_dict", {}),
    ("dict_with_tag_like_keys", {"t": 1, "d": {"m": 2}, "": 3}),
    ("int_keys", {1: "a", 2: "b"}),
    ("tuple_keys", {(1, "x"): [1], (2, "y"): [2]}),
    ("mixed_keys", {"a": 1, 2: "b", None: 3, True: 4, 1.5: 5, b"k": 6, frozenset({1}): 7}),
    ("bool_and_int_values_keep_types", [True, 1, 1.0, False, 0, 0.0]),
    ("set", {1, "a", (2, 3)}),
    ("empty_set", set()),
    ("frozenset", frozenset({1, 2.5, "z"})),
    ("set_of_frozensets", {frozenset({1}), frozenset()}),
    ("nested", {"k": [({1: {2, 3}}, b"x", (None, [frozenset({(1, 2)})]))]}),
    ("dict_order_kept", {3: "c", 1: "a", 2: "b"}),
    ("nan_in_list", [1.0, math.nan, math.inf]),
    ("big_int_in_list", [1, 2**70, 3]),
    ("floats_overflowing_sum", [1e308, 1e308]),
    ("list_of_dicts", [{"a": 1}, {2: 3}]),
    ("nested_lists_deep", [[[[[[[[1]]]]]]]]),
]


@pytest.mark.parametrize("value", [c[1] for c in ROUND_TRIPS], ids=[c[0] for c in ROUND_TRIPS])
def test_round_trip(value: Any) -> None:
    assert_round_trip(value)


PASSTHROUGH: list[tuple[str, Any]] = [
    ("str", "abc"),
    ("int", 42),
    ("float", 1.5),
    ("none", None),
    ("bool", True),
    ("list_of_scalars", [1, "a", 2.5, None, False]),
    ("list_of_ints", list(range(1000))),
    ("list_of_strs", [str(i) for i in range(1000)]),
    ("list_of_floats", [i / 7 for i in range(1000)]),
    ("nested_lists", [[1, 2], ["a"], []]),
]


@pytest.mark.parametrize("value", [c[1] for c in PASSTHROUGH], ids=[c[0] for c in PASSTHROUGH])
def test_json_native_values_pass_through_untagged(value: Any) -> None:
    assert encode(value) == orjson.dumps(value)
    assert_round_trip(value)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ((1, 2), b'{"t":[1,2]}'),
        ({"a": 1}, b'{"d":{"a":1}}'),
        ({1: "a"}, b'{"m":[1,"a"]}'),
        ({1}, b'{"s":[1]}'),
        (frozenset({1}), b'{"f":[1]}'),
        (b"hi", b'{"b":"aGk="}'),
        (2**64, b'{"i":"10000000000000000"}'),
        (math.nan, b'{"x":"nan"}'),
        ([(1,), "a"], b'[{"t":[1]},"a"]'),
    ],
)
def test_wire_format(value: Any, encoded: bytes) -> None:
    assert encode(value) == encoded


REFUSED: list[tuple[str, Any, str, str]] = [
    # (id, value, type named in the message, location named in the message)
    ("object", object(), "object", "value"),
    ("int_enum", Color.RED, "test_codec.Color", "value"),
    ("str_subclass", MyStr("a"), "test_codec.MyStr", "value"),
    ("float_subclass", [MyFloat(1.0)], "test_codec.MyFloat", "value[0]"),
    ("ordered_dict", collections.OrderedDict(a=1), "collections.OrderedDict", "value"),
    ("bytearray", bytearray(b"x"), "bytearray", "value"),
    ("memoryview", memoryview(b"x"), "memoryview", "value"),
    ("complex", 1j, "complex", "value"),
    ("decimal", decimal.Decimal("1.5"), "decimal.Decimal", "value"),
    ("fraction", fractions.Fraction(1, 3), "fractions.Fraction", "value"),
    ("datetime", datetime.datetime(2024, 1, 1), "datetime.datetime", "value"),
    ("nested_in_dict", {"a": [1, Point(1)]}, "test_codec.Point", "value['a'][1]"),
    ("dict_key", {(1, Color.RED): 1}, "test_codec.Color", "value key (1, <Color.RED: 1>)[1]"),
    ("set_element", {1, Color.RED.name, datetime.date(2024, 1, 1)}, "datetime.date", "element"),
    ("tuple_element", (1, (2, range(3))), "range", "value[1][1]"),
    ("function", len, "builtin_function_or_method", "value"),
]


@pytest.mark.parametrize(
    ("value", "type_name", "where"),
    [c[1:] for c in REFUSED],
    ids=[c[0] for c in REFUSED],
)
def test_unsupported_types_are_refused_clearly(value: Any, type_name: str, where: str) -> None:
    with pytest.raises(TypeError) as info:
        encode(value)
    message = str(info.value)
    assert type_name in message
    assert where in message
    assert "PickleCodec" in message


def test_cycles_are_refused() -> None:
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="cyclic"):
        encode(cyclic)
    d: dict[str, Any] = {}
    d["self"] = [d, object()]
    with pytest.raises((ValueError, TypeError)):
        encode(d)


def test_lone_surrogates_are_refused() -> None:
    with pytest.raises(ValueError, match="surrogates"):
        encode(["\ud800"])


def test_too_deep_is_refused() -> None:
    value: Any = 1
    for _ in range(300):
        value = (value,)
    with pytest.raises(ValueError):
        encode(value)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{not json",
        b'{"t": [1], "d": {}}',
        b'{"q": 1}',
        b'{"m": [1, 2, 3]}',
        b'{"m": [[1], 2]}',
        b'{"s": [[1]]}',
        b'{"d": [1]}',
        b'{"b": 5}',
        b'{"i": "xyz"}',
        b'{"x": "not a float"}',
        b'[1, {"t": 5}]',
    ],
)
def test_malformed_data_raises_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode(data)


def test_codec_objects() -> None:
    assert isinstance(JsonCodec(), Codec)
    assert isinstance(PickleCodec(), Codec)
    assert JsonCodec().name == "json" and PickleCodec().name == "pickle"
    value = {(1, 2): {3}}
    assert JsonCodec().decode(JsonCodec().encode(value)) == value
    p = PickleCodec()
    obj = {"point": Point(3), "when": datetime.date(2024, 2, 29), "c": Color.RED}
    back = p.decode(p.encode(obj))
    assert back == obj and type(back["c"]) is Color


def test_decode_returns_fresh_objects() -> None:
    data = encode({"a": [1, 2]})
    first = decode(data)
    first["a"].append(3)  # type: ignore[index]
    assert decode(data) == {"a": [1, 2]}


def test_large_values_round_trip() -> None:
    value = {
        "ints": list(range(100_000)),
        "pairs": {(i, str(i)): [i, i * 0.5] for i in range(20_000)},
        "blob": bytes(range(256)) * 1000,
    }
    assert decode(encode(value)) == value


# ---------------------------------------------------------------- property-based

_hashable = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=4).map(tuple) | st.frozensets(inner, max_size=4),
    max_leaves=10,
)
_values = st.recursive(
    _hashable,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        | st.dictionaries(_hashable, inner, max_size=4)
        | st.sets(_hashable, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(_values)
def test_hypothesis_round_trip(value: Any) -> None:
    assert_round_trip(value)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(), max_size=20))
def test_hypothesis_floats_with_nan_and_inf(value: list[float]) -> None:
    assert_round_trip(value)
