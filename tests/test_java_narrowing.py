"""from_collection(list, type_info) narrows integers as PyFlink's JVM does (types/java_narrowing.py)."""

from __future__ import annotations

import pytest

from streamflow.common.typeinfo import Types
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.types.java_narrowing import narrower


@pytest.mark.parametrize(
    ("type_info", "value", "narrowed"),
    [
        (Types.BYTE(), 200, -56),
        (Types.SHORT(), 43878, -21658),
        (Types.INT(), 9147483648, 557549056),
        (Types.INT(), -2147483648, -2147483648),
        (Types.LONG(), 2**63, -(2**63)),
        (Types.TUPLE([Types.STRING(), Types.SHORT()]), ("a", 32768), ("a", -32768)),
        (Types.LIST(Types.BYTE()), [127, 128], [127, -128]),
        (Types.INT(), True, True),  # a bool is not narrowed
    ],
)
def test_narrower_wraps_as_java(type_info, value, narrowed) -> None:
    narrow = narrower(type_info)
    assert narrow is not None and narrow(value) == narrowed


def test_types_without_integers_have_no_narrower() -> None:
    assert narrower(Types.STRING()) is None
    assert narrower(Types.ROW([Types.STRING(), Types.DOUBLE()])) is None


def test_from_collection_list_is_narrowed() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    rows = [(1, 43878), (2, 5)]
    ds = env.from_collection(rows, type_info=Types.ROW([Types.INT(), Types.SHORT()]))
    with ds.execute_and_collect() as results:
        assert sorted(tuple(r) for r in results) == [(1, -21658), (2, 5)]
    in_range = ("a", 1)
    assert narrower(Types.TUPLE([Types.STRING(), Types.INT()]))(in_range) is in_range  # not copied
