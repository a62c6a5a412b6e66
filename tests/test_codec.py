"""Round trips and refusals of the checkpoint value codec."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import fractions
import math
import subprocess
import sys
import uuid
import zoneinfo
from typing import Any, NamedTuple

import msgpack
import pytest
from child_env import child_env
from hypothesis import given, settings
from hypothesis import strategies as st

from streamflow.state import legacy_json
from streamflow.state.codec import Codec, MsgpackCodec, PickleCodec, decode, encode


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
    if t is decimal.Decimal:
        return ("Decimal", str(x))
    if t in (datetime.datetime, datetime.time):
        return (t.__name__, repr(x), x.fold, repr(x.tzinfo))
    return (t.__name__, x)


def assert_round_trip(value: Any) -> bytes:
    data = encode(value)
    assert isinstance(data, bytes)
    assert canon(decode(data)) == canon(value)
    return data


class Color(enum.IntEnum):
    RED = 1


class Shape(enum.Enum):
    SQUARE = "sq"
    CIRCLE = "ci"


@dataclasses.dataclass(frozen=True)
class Reading:
    sensor: str
    at: datetime.datetime
    value: decimal.Decimal
    tags: tuple = ()


@dataclasses.dataclass
class Evolving:
    a: int
    b: list = dataclasses.field(default_factory=list)


class Pair(NamedTuple):
    left: Any
    right: Any


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
    ("naive_datetime", datetime.datetime(2024, 2, 29, 23, 59, 58, 999_999)),
    ("utc_datetime", datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)),
    (
        "offset_datetime",
        datetime.datetime(2024, 1, 1, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=-7))),
    ),
    (
        "named_offset",
        datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(minutes=90), "X")),
    ),
    (
        "zoneinfo_fold",
        datetime.datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=zoneinfo.ZoneInfo("Europe/Berlin")),
    ),
    ("date", datetime.date(1, 1, 1)),
    ("time", datetime.time(23, 59, 59, 1)),
    ("aware_time", datetime.time(1, tzinfo=datetime.UTC)),
    ("timedelta", datetime.timedelta(days=-3, seconds=7, microseconds=11)),
    ("decimal", decimal.Decimal("-12.3400")),
    ("decimal_nan", decimal.Decimal("sNaN")),
    ("decimal_inf", decimal.Decimal("-Infinity")),
    ("uuid", uuid.UUID("12345678-1234-5678-1234-567812345678")),
    ("int_enum", Color.RED),
    ("enum", Shape.CIRCLE),
    ("enum_keys", {Shape.SQUARE: 1, (Shape.CIRCLE, 2): 3}),
    ("dataclass", Reading("s1", datetime.datetime(2024, 1, 1), decimal.Decimal("1.5"), (1, "a"))),
    ("dataclass_key", {Reading("s", datetime.datetime(2024, 1, 1), decimal.Decimal(0)): [1]}),
    ("namedtuple", Pair((1, 2), [Pair(None, b"x")])),
    ("namedtuple_key", {Pair(1, 2): {3}}),
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
    ("str_dict", {"a": 1, "b": [2.5]}),
    ("int_keys", {1: "a", -2: None}),
    ("nested_lists", [[1, 2], ["a"], []]),
]


@pytest.mark.parametrize("value", [c[1] for c in PASSTHROUGH], ids=[c[0] for c in PASSTHROUGH])
def test_msgpack_native_values_are_plain_msgpack(value: Any) -> None:
    assert encode(value) == msgpack.packb(value, use_bin_type=True)
    assert_round_trip(value)


M = msgpack.ExtType


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ((1, 2), [M(1, b""), 1, 2]),
        ({1}, [M(2, b""), 1]),
        (frozenset({1}), [M(3, b""), 1]),
        (2**64, [M(4, b""), b"\x01" + b"\x00" * 8]),
        (datetime.date(1, 1, 2), [M(6, b""), 2]),
        (decimal.Decimal("1.50"), [M(9, b""), "1.50"]),
        (Shape.SQUARE, [M(11, b""), "test_codec:Shape", "SQUARE"]),
        (Pair(1, 2), [M(13, b""), "test_codec:Pair", 1, 2]),
        ([(1,), "a"], [[M(1, b""), 1], "a"]),
    ],
)
def test_wire_format(value: Any, wire: Any) -> None:
    assert msgpack.unpackb(encode(value), strict_map_key=False) == wire


def make_local_types() -> tuple[Any, Any]:
    @dataclasses.dataclass
    class Local:
        x: int

    class LocalEnum(enum.Enum):
        A = 1

    return Local(1), LocalEnum.A


REFUSED: list[tuple[str, Any, str, str]] = [
    # (id, value, type named in the message, location named in the message)
    ("object", object(), "object", "value"),
    ("str_subclass", MyStr("a"), "test_codec.MyStr", "value"),
    ("float_subclass", [MyFloat(1.0)], "test_codec.MyFloat", "value[0]"),
    ("ordered_dict", collections.OrderedDict(a=1), "collections.OrderedDict", "value"),
    ("complex", 1j, "complex", "value"),
    ("fraction", fractions.Fraction(1, 3), "fractions.Fraction", "value"),
    ("nested_in_dict", {"a": [1, Point(1)]}, "test_codec.Point", "value['a'][1]"),
    ("dict_key", {(1, MyStr("k")): 1}, "test_codec.MyStr", "value key (1, 'k')[1]"),
    ("set_element", {1, Color.RED, MyStr("b")}, "test_codec.MyStr", "element"),
    ("tuple_element", (1, (2, range(3))), "range", "value[1][1]"),
    ("dataclass_field", [Reading("s", Point(1), decimal.Decimal(1))], "test_codec.Point", "value[0].at"),
    ("local_dataclass", {"k": make_local_types()[0]}, "Local", "value['k']"),
    ("local_enum", [make_local_types()[1]], "LocalEnum", "value[0]"),
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


def test_bytearray_and_memoryview_come_back_as_bytes() -> None:
    """msgpack's C packer writes them as binary before any hook sees them (documented)."""
    assert decode(encode([bytearray(b"x"), memoryview(b"y")])) == [b"x", b"y"]


def test_unsupported_time_zone_is_refused() -> None:
    class Odd(datetime.tzinfo):
        def utcoffset(self, dt: Any) -> datetime.timedelta:
            return datetime.timedelta(0)

    with pytest.raises(TypeError, match="time zone"):
        encode(datetime.datetime(2024, 1, 1, tzinfo=Odd()))


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
    for _ in range(400):
        value = (value,)
    assert decode(encode(value)) == value
    for _ in range(3000):
        value = (value,)
    with pytest.raises(ValueError):
        encode(value)


def ext(code: int) -> bytes:
    return b"\xc7\x00" + bytes([code])  # a zero-length extension value: a marker


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",  # never used in MessagePack
        b"\x93\x01",  # truncated array
        b"\x91" + ext(99),  # unknown marker
        b"\xd4\x01\x00",  # marker with a payload
        b"\x92" + ext(11) + b"\xa1x",  # Enum without a member name
        b"\x93" + ext(11) + b"\xa9os:system\xa1x",  # not an Enum
        b"\x93" + ext(11) + b"\xb2antigravity:Thing\xa1x",  # a module never imported
        b"\x93" + ext(11) + b"\xafbuiltins:object\xa1x",
        b"\x94" + ext(12) + b"\xb0test_codec:Point\x90\x90",  # not a dataclass
        b"\x94" + ext(12) + b"\xb2test_codec:Reading\x91\xa1z\x91\x01",  # no such field
        b"\x94" + ext(12) + b"\xb2test_codec:Reading\x90\x90",  # fields without default missing
        b"\x93" + ext(13) + b"\xafte" + b"st_codec:Pair\x01",  # too few namedtuple fields
        b"\x81\x91\x01\x02",  # a list as a map key
    ],
)
def test_malformed_or_crafted_data_raises_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode(data)


def test_decoding_never_imports_a_module() -> None:
    """A class path in a crafted checkpoint cannot make the decoder import (run) a module."""
    code = (
        "import sys, msgpack\n"
        "from streamflow.state.codec import decode\n"
        "data = msgpack.packb([msgpack.ExtType(11, b''), 'this_is_antigravity:X', 'A'])\n"
        "data = msgpack.packb([msgpack.ExtType(11, b''), 'antigravity:X', 'A'])\n"
        "try:\n    decode(data)\nexcept ValueError as e:\n    print('refused', e)\n"
        "print('antigravity' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, env=child_env()
    ).stdout
    assert "refused" in out and "not imported" in out
    assert out.strip().endswith("False")


POST_INIT_CALLS: list[int] = []


@dataclasses.dataclass(frozen=True)
class Hooked:
    x: int

    def __post_init__(self) -> None:
        POST_INIT_CALLS.append(self.x)


def test_dataclasses_are_rebuilt_field_wise_without_init() -> None:
    expected = Hooked(5)
    data = encode(expected)
    assert POST_INIT_CALLS == [5]
    back = decode(data)
    assert POST_INIT_CALLS == [5]  # decoding ran no user code
    assert back == expected and type(back) is Hooked
    value = Evolving(3, [1])
    back = decode(encode(value))
    assert back == value and type(back) is Evolving
    # a field added since the checkpoint takes its default; a removed one is an error
    data = msgpack.packb([msgpack.ExtType(12, b""), "test_codec:Evolving", ["a"], [7]])
    assert decode(data) == Evolving(7, [])


def test_allowed_types_restrict_decoding() -> None:
    strict = MsgpackCodec(allowed_types=[Shape])
    data = encode([Shape.SQUARE, Color.RED])
    with pytest.raises(ValueError, match="allowed_types"):
        strict.decode(data)
    assert strict.decode(encode([Shape.SQUARE])) == [Shape.SQUARE]
    assert MsgpackCodec().decode(data) == [Shape.SQUARE, Color.RED]


def test_legacy_json_entries_still_decode() -> None:
    old = b'{"m":[{"t":[1,"a"]},{"s":[{"f":[2]}]},3,{"b":"aGk="},{"i":"10000000000000000"},{"x":"nan"}]}'
    back = legacy_json.decode(old)
    assert isinstance(back, dict)
    assert back[(1, "a")] == {frozenset({2})}
    assert back[3] == b"hi"
    assert math.isnan(back[2**64])  # type: ignore[index]


def test_codec_objects() -> None:
    assert isinstance(MsgpackCodec(), Codec)
    assert isinstance(PickleCodec(), Codec)
    assert MsgpackCodec().name == "msgpack" and PickleCodec().name == "pickle"
    value = {(1, 2): {3}}
    assert MsgpackCodec().decode(MsgpackCodec().encode(value)) == value
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
    | st.binary(max_size=8)
    | st.datetimes(timezones=st.none() | st.just(datetime.UTC))
    | st.dates()
    | st.decimals(allow_nan=False)
    | st.uuids()
    | st.sampled_from(Shape),
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


@settings(max_examples=150, deadline=None)  # new examples each run (not derandomized): 400 took 12 s
@given(_values)
def test_hypothesis_round_trip(value: Any) -> None:
    assert_round_trip(value)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(), max_size=20))
def test_hypothesis_floats_with_nan_and_inf(value: list[float]) -> None:
    assert_round_trip(value)


def test_streamflow_rows_round_trip_with_names_and_kind() -> None:
    from streamflow.common import Row, RowKind

    named = Row(name="a", n=(1, 2))
    named.set_row_kind(RowKind.DELETE)
    positional = Row(1, decimal.Decimal("2.5"), None)
    back = decode(encode([named, positional]))
    assert isinstance(back, list)
    assert back == [named, positional] and all(type(r) is Row for r in back)
    assert back[0].get_row_kind() is RowKind.DELETE
    assert back[0].as_dict() == {"name": "a", "n": (1, 2)}
