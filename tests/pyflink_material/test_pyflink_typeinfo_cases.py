"""The cases of Apache Flink's ``pyflink/common/tests/test_typeinfo.py`` (apache/flink
``063c4cc``, the newest stored version) on streamflow.

``test_from_java_type`` round-trips each type through the JVM (``get_java_type_info`` then
``_from_java_type``) and expects an equal type back. streamflow has no JVM; the port checks
the same property where a type leaves the program: each type survives ``pickle`` (how a
type travels to the Spark engine's workers and into a savepoint) and ``deepcopy`` equal, with
an equal hash. Left out: ``test_internal_type_info`` (a Java ``InternalTypeInfo`` built
through the gateway, the bridge of the JVM's ``CsvReaderFormat``).
"""

from __future__ import annotations

import copy
import pickle

import pytest

from streamflow.common import Row
from streamflow.common.typeinfo import RowTypeInfo, TupleTypeInfo, Types


def test_row_type() -> None:
    assert RowTypeInfo([Types.STRING(), Types.STRING()]).get_field_names() == ["f0", "f1"]
    assert RowTypeInfo([Types.STRING(), Types.STRING()], ["a", "b"]).get_field_names() == ["a", "b"]
    assert (
        RowTypeInfo([Types.STRING(), Types.STRING()], ["a", "b"])
        == RowTypeInfo([Types.STRING(), Types.STRING()], ["a", "b"])
    ) is True
    assert (
        RowTypeInfo([Types.STRING(), Types.STRING()], ["a", "b"])
        == RowTypeInfo([Types.STRING(), Types.INT()], ["a", "b"])
    ) is False
    named = RowTypeInfo([Types.STRING(), Types.STRING()], ["a", "b"])
    assert str(named) == "RowTypeInfo(a: String, b: String)"
    assert Types.ROW([Types.STRING(), Types.STRING()]) == RowTypeInfo([Types.STRING(), Types.STRING()])
    assert Types.ROW_NAMED(["a", "b"], [Types.STRING(), Types.STRING()]).get_field_names() == ["a", "b"]
    assert Types.ROW_NAMED(["a", "b"], [Types.STRING(), Types.STRING()]).get_field_types() == [
        Types.STRING(),
        Types.STRING(),
    ]


def test_tuple_type() -> None:
    assert TupleTypeInfo([Types.STRING(), Types.INT()]) == TupleTypeInfo([Types.STRING(), Types.INT()])
    assert str(TupleTypeInfo([Types.STRING(), Types.INT()])) == "TupleTypeInfo(String, Integer)"
    assert TupleTypeInfo([Types.STRING(), Types.INT()]) != TupleTypeInfo([Types.STRING(), Types.BOOLEAN()])
    assert Types.TUPLE([Types.STRING(), Types.INT()]) == TupleTypeInfo([Types.STRING(), Types.INT()])
    assert Types.TUPLE([Types.STRING(), Types.INT()]).get_field_types() == [Types.STRING(), Types.INT()]


_FROM_JAVA_TYPE = {
    "INT": Types.INT,
    "SHORT": Types.SHORT,
    "LONG": Types.LONG,
    "FLOAT": Types.FLOAT,
    "DOUBLE": Types.DOUBLE,
    "CHAR": Types.CHAR,
    "BYTE": Types.BYTE,
    "BIG_INT": Types.BIG_INT,
    "BIG_DEC": Types.BIG_DEC,
    "SQL_DATE": Types.SQL_DATE,
    "SQL_TIME": Types.SQL_TIME,
    "SQL_TIMESTAMP": Types.SQL_TIMESTAMP,
    "ROW": lambda: Types.ROW([Types.INT(), Types.STRING()]),
    "TUPLE": lambda: Types.TUPLE([Types.CHAR(), Types.INT()]),
    "PRIMITIVE_ARRAY": lambda: Types.PRIMITIVE_ARRAY(Types.INT()),
    "OBJECT_ARRAY": lambda: Types.OBJECT_ARRAY(Types.SQL_DATE()),
    "PICKLED_BYTE_ARRAY": Types.PICKLED_BYTE_ARRAY,
    "MAP": lambda: Types.MAP(Types.INT(), Types.STRING()),
    "LIST": lambda: Types.LIST(Types.INT()),
}


@pytest.mark.parametrize("name", list(_FROM_JAVA_TYPE))
def test_from_java_type(name: str) -> None:
    type_info = _FROM_JAVA_TYPE[name]()
    for carried in (pickle.loads(pickle.dumps(type_info)), copy.deepcopy(type_info)):
        assert carried == type_info
        assert hash(carried) == hash(type_info)
        assert str(carried) == str(type_info)


def test_doubles_print_as_java_does() -> None:
    """Extra: a DOUBLE or FLOAT prints as Java's ``toString`` (what PyFlink's test sink and
    ``print()`` show): plain in [10^-3, 10^7), else ``d.dddE<n>``; ``1e7`` and ``0.0001``
    printed as ``10000000.0`` and ``0.0001`` before."""
    double = Types.DOUBLE()
    assert [double.format(v) for v in (1.2, 100.0, 0.001, 9999999.0, -0.0)] == [
        "1.2",
        "100.0",
        "0.001",
        "9999999.0",
        "-0.0",
    ]
    assert [double.format(v) for v in (1e7, 12345678.9, 0.0001, -1e-5, 1e20)] == [
        "1.0E7",
        "1.23456789E7",
        "1.0E-4",
        "-1.0E-5",
        "1.0E20",
    ]
    assert Types.ROW([Types.DOUBLE(), Types.FLOAT()]).format(Row(0.0001, 1e8)) == "+I[1.0E-4, 1.0E8]"
