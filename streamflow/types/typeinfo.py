"""Type information with PyFlink's names (``Types.INT()``, ``Types.ROW_NAMED(...)``, ...).

Where PyFlink needs type information to cross into the JVM, streamflow keeps
Python objects throughout; a declared type still matters in three places,
and only there:

* **Records become what the type says.** A stream declared with a row type
  (``output_type=Types.ROW(...)`` or ``type_info=`` on a source) carries
  :class:`~streamflow.types.row.Row` records (named ``f0, f1, ...`` unless
  ``ROW_NAMED`` gave names), a tuple type carries tuples, lists and maps are
  converted element-wise: :meth:`TypeInformation.convert`. This is what a
  PyFlink user sees after the JVM round trip (``Row(f0=1, f1='hi')``).
* **Printing follows the JVM's ``toString``** for typed streams, as PyFlink's
  ``print()`` does (``(hi,1)`` for a tuple, ``+I[a, 1]`` for a row, ``null``
  for None); untyped (pickled) records print as ``str(record)``:
  :meth:`TypeInformation.format`.
* **Checkpoint codecs**: a descriptor's type info names the codec of its state.

Rules ported from ``flink-python/pyflink/common/typeinfo.py`` (apache-flink 2.3.0);
the Java ``toString`` rules of :meth:`TypeInformation.format` are in ``java_text.py``.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from .java_text import F32, java_float, java_string
from .row import Row

__all__ = [
    "BasicArrayTypeInfo",
    "BasicTypeInfo",
    "ListTypeInfo",
    "MapTypeInfo",
    "ObjectArrayTypeInfo",
    "PickledBytesTypeInfo",
    "PrimitiveArrayTypeInfo",
    "RowTypeInfo",
    "SqlTimeTypeInfo",
    "TupleTypeInfo",
    "TypeInformation",
    "Types",
    "java_string",
]


class TypeInformation:
    """The type of a stream's records, a state's values or a key."""

    def need_conversion(self) -> bool:
        return False

    def converts(self) -> bool:
        """Whether :meth:`convert` changes values (so records or state must pass through it)."""
        return self.need_conversion()

    def convert(self, value: Any) -> Any:
        """``value`` as a record of this type (identity for basic types)."""
        return value

    def to_internal_type(self, obj: Any) -> Any:
        return obj

    def from_internal_type(self, obj: Any) -> Any:
        return obj

    def format(self, value: Any) -> str:
        """The text the JVM's ``toString`` gives for ``value`` of this type."""
        return java_string(value)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        return type(self).__name__


#: The floating-point types: PyFlink's serializers make a float of an int given for them
#: (``write_float``/``write_double`` take a C float/double), as ``convert`` does; its BOOLEAN
#: serializer writes an int as a byte and reads it back as a bool (``convert`` too).
_FLOATING = frozenset({"Float", "Double"})


class BasicTypeInfo(TypeInformation):
    def __init__(self, name: str, python_type: type | tuple[type, ...] | None = None) -> None:
        self.name = name
        self.python_type = python_type

    def converts(self) -> bool:
        return self.name in _FLOATING or self.name == "Boolean"

    def format(self, value: Any) -> str:
        if self.name == "Float" and isinstance(value, float):
            return java_float(value)
        return java_string(value)

    def convert(self, value: Any) -> Any:
        if self.name not in _FLOATING:
            if type(value) is int and self.name == "Boolean":  # write_byte(v), read as `not not b`
                return value != 0
            return value
        if type(value) is not float and isinstance(value, int):  # PyFlink's coder: write_double(v)
            value = float(value)
        if self.name == "Float" and isinstance(value, float):  # a Java float: 32 bits
            return F32.unpack(F32.pack(value))[0]
        return value

    def __repr__(self) -> str:
        return "Char" if self.name == "Character" else self.name  # PyFlink's names

    @staticmethod
    def STRING_TYPE_INFO() -> TypeInformation:
        return Types.STRING()

    @staticmethod
    def BOOLEAN_TYPE_INFO() -> TypeInformation:
        return Types.BOOLEAN()

    @staticmethod
    def BYTE_TYPE_INFO() -> TypeInformation:
        return Types.BYTE()

    @staticmethod
    def SHORT_TYPE_INFO() -> TypeInformation:
        return Types.SHORT()

    @staticmethod
    def INT_TYPE_INFO() -> TypeInformation:
        return Types.INT()

    @staticmethod
    def LONG_TYPE_INFO() -> TypeInformation:
        return Types.LONG()

    @staticmethod
    def FLOAT_TYPE_INFO() -> TypeInformation:
        return Types.FLOAT()

    @staticmethod
    def DOUBLE_TYPE_INFO() -> TypeInformation:
        return Types.DOUBLE()

    @staticmethod
    def CHAR_TYPE_INFO() -> TypeInformation:
        return Types.CHAR()

    @staticmethod
    def BIG_INT_TYPE_INFO() -> TypeInformation:
        return Types.BIG_INT()

    @staticmethod
    def BIG_DEC_TYPE_INFO() -> TypeInformation:
        return Types.BIG_DEC()

    @staticmethod
    def INSTANT_TYPE_INFO() -> TypeInformation:
        return Types.INSTANT()


class SqlTimeTypeInfo(BasicTypeInfo):
    def __repr__(self) -> str:
        return f"{self.name}TypeInfo"  # PyFlink's: DateTypeInfo, TimeTypeInfo, TimestampTypeInfo

    @staticmethod
    def DATE() -> SqlTimeTypeInfo:
        return SqlTimeTypeInfo("Date", datetime.date)

    @staticmethod
    def TIME() -> SqlTimeTypeInfo:
        return SqlTimeTypeInfo("Time", datetime.time)

    @staticmethod
    def TIMESTAMP() -> SqlTimeTypeInfo:
        return SqlTimeTypeInfo("Timestamp", datetime.datetime)


class PickledBytesTypeInfo(TypeInformation):
    """Any Python object (PyFlink pickles it; streamflow keeps it as is)."""

    def __repr__(self) -> str:
        return "PickledByteArrayTypeInfo"  # PyFlink's

    def format(self, value: Any) -> str:
        return value if isinstance(value, str) else str(value)

    @staticmethod
    def PICKLED_BYTE_ARRAY_TYPE_INFO() -> PickledBytesTypeInfo:
        return PickledBytesTypeInfo()


def _field_text(field_type: TypeInformation, value: Any) -> str:
    """A field's text in the JVM's ``Row``/``Tuple.toString``: bytes declared
    ``PICKLED_BYTE_ARRAY`` reach the JVM as a ``byte[]`` (Pyrolite unpickles them so), printed
    as its signed bytes; a top-level pickled stream prints Python's ``str`` (PyFlink's print())."""
    if isinstance(field_type, PickledBytesTypeInfo) and isinstance(value, (bytes, bytearray)):
        return java_string(value)
    return field_type.format(value)


class _Composite(TypeInformation):
    def need_conversion(self) -> bool:
        return True


class RowTypeInfo(_Composite):
    """Rows with field types and names (``f0, f1, ...`` unless given)."""

    def __init__(self, field_types: list[TypeInformation], field_names: list[str] | None = None) -> None:
        self._field_types = list(field_types)
        if field_names is not None and len(field_names) != len(field_types):
            raise ValueError(f"{len(field_names)} field names for {len(field_types)} field types")
        self._field_names = list(field_names) if field_names else [f"f{i}" for i in range(len(field_types))]
        self._named = bool(field_names)  # PyFlink's repr shows the names only when given

    def get_field_names(self) -> list[str]:
        return list(self._field_names)

    def get_field_index(self, field_name: str) -> int:
        return self._field_names.index(field_name) if field_name in self._field_names else -1

    def get_field_types(self) -> list[TypeInformation]:
        return list(self._field_types)

    def get_field_type(self, index: int) -> TypeInformation:
        return self._field_types[index]

    def get_arity(self) -> int:
        return len(self._field_types)

    def convert(self, value: Any) -> Any:
        if value is None:
            return None
        values = [value.get(n) for n in self._field_names] if isinstance(value, dict) else list(value)
        if len(values) != len(self._field_types):
            raise ValueError(
                f"a row of {len(self._field_types)} fields {self._field_names} cannot hold {value!r}"
            )
        row = Row(*(t.convert(v) for t, v in zip(self._field_types, values, strict=True)))
        row.set_field_names(self._field_names)
        if isinstance(value, Row):
            row.set_row_kind(value.get_row_kind())
        return row

    def format(self, value: Any) -> str:
        if not isinstance(value, Row):
            return java_string(value)
        fields = ", ".join(_field_text(t, v) for t, v in zip(self._field_types, value, strict=False))
        return f"{value.get_row_kind()}[{fields}]"

    def __repr__(self) -> str:
        if not self._named:
            return "RowTypeInfo({})".format(", ".join(repr(t) for t in self._field_types))
        fields = ", ".join(f"{n}: {t!r}" for n, t in zip(self._field_names, self._field_types, strict=True))
        return f"RowTypeInfo({fields})"


class TupleTypeInfo(_Composite):
    def __init__(self, field_types: list[TypeInformation]) -> None:
        self._field_types = list(field_types)
        # a tuple of the declared arity converts to itself (see fast_paths.py)
        self._plain_fields = not any(t.converts() for t in self._field_types)

    def get_field_types(self) -> list[TypeInformation]:
        return list(self._field_types)

    def get_arity(self) -> int:
        return len(self._field_types)

    def convert(self, value: Any) -> Any:
        if self._plain_fields and type(value) is tuple and len(value) == len(self._field_types):
            return value  # already a record of this type (fast_paths.py)
        if value is None:
            return None
        values = list(value)
        if len(values) != len(self._field_types):
            raise ValueError(f"a tuple of {len(self._field_types)} fields cannot hold {value!r}")
        return tuple(t.convert(v) for t, v in zip(self._field_types, values, strict=True))

    def format(self, value: Any) -> str:
        if not isinstance(value, (tuple, list, Row)):
            return java_string(value)
        return "(" + ",".join(_field_text(t, v) for t, v in zip(self._field_types, value, strict=False)) + ")"

    def __repr__(self) -> str:
        return "TupleTypeInfo({})".format(", ".join(repr(t) for t in self._field_types))


class _ArrayTypeInfo(_Composite):
    kind = "Array"

    def __init__(self, element_type: TypeInformation) -> None:
        self._element_type = element_type

    def get_element_type(self) -> TypeInformation:
        return self._element_type

    def convert(self, value: Any) -> Any:
        if value is None:
            return None
        return [self._element_type.convert(v) for v in value]

    def format(self, value: Any) -> str:
        if value is None:
            return "null"
        if isinstance(value, (bytes, bytearray)):  # a Java byte[]: signed bytes
            return java_string(value)
        return "[" + ", ".join(self._element_type.format(v) for v in value) + "]"

    def __repr__(self) -> str:
        return f"{type(self).__name__}<{self._element_type!r}>"  # PyFlink's


class PrimitiveArrayTypeInfo(_ArrayTypeInfo):
    def convert(self, value: Any) -> Any:
        # PRIMITIVE_ARRAY(BYTE()) is Java's byte[], which PyFlink hands to Python as bytes
        if getattr(self._element_type, "name", None) == "Byte" and value is not None:
            return bytes(value)
        return super().convert(value)


class BasicArrayTypeInfo(_ArrayTypeInfo):
    pass


class ObjectArrayTypeInfo(_ArrayTypeInfo):
    pass


class ListTypeInfo(_ArrayTypeInfo):
    pass


class MapTypeInfo(_Composite):
    def __init__(self, key_type_info: TypeInformation, value_type_info: TypeInformation) -> None:
        self._key_type_info = key_type_info
        self._value_type_info = value_type_info

    def convert(self, value: Any) -> Any:
        if value is None:
            return None
        kt, vt = self._key_type_info, self._value_type_info
        return {kt.convert(k): vt.convert(v) for k, v in dict(value).items()}

    def format(self, value: Any) -> str:
        if value is None:
            return "null"
        kt, vt = self._key_type_info, self._value_type_info
        return "{" + ", ".join(f"{kt.format(k)}={vt.format(v)}" for k, v in value.items()) + "}"

    def __repr__(self) -> str:
        return f"MapTypeInfo<{self._key_type_info!r}, {self._value_type_info!r}>"  # PyFlink's


def _basic(name: str, python_type: type | tuple[type, ...] | None = None) -> BasicTypeInfo:
    return BasicTypeInfo(name, python_type)


class Types:
    """PyFlink's ``Types``: factories of type information."""

    @staticmethod
    def STRING() -> TypeInformation:
        return _basic("String", str)

    @staticmethod
    def BYTE() -> TypeInformation:
        return _basic("Byte", int)

    @staticmethod
    def BOOLEAN() -> TypeInformation:
        return _basic("Boolean", bool)

    @staticmethod
    def SHORT() -> TypeInformation:
        return _basic("Short", int)

    @staticmethod
    def INT() -> TypeInformation:
        return _basic("Integer", int)

    @staticmethod
    def LONG() -> TypeInformation:
        return _basic("Long", int)

    @staticmethod
    def FLOAT() -> TypeInformation:
        return _basic("Float", float)

    @staticmethod
    def DOUBLE() -> TypeInformation:
        return _basic("Double", float)

    @staticmethod
    def CHAR() -> TypeInformation:
        return _basic("Character", str)

    @staticmethod
    def BIG_INT() -> TypeInformation:
        return _basic("BigInteger", int)

    @staticmethod
    def BIG_DEC() -> TypeInformation:
        return _basic("BigDecimal", decimal.Decimal)

    @staticmethod
    def INSTANT() -> TypeInformation:
        return _basic("Instant")

    @staticmethod
    def SQL_DATE() -> TypeInformation:
        return SqlTimeTypeInfo.DATE()

    @staticmethod
    def SQL_TIME() -> TypeInformation:
        return SqlTimeTypeInfo.TIME()

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:
        return SqlTimeTypeInfo.TIMESTAMP()

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:
        return PickledBytesTypeInfo()

    @staticmethod
    def ROW(field_types: list[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(field_names: list[str], field_types: list[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def TUPLE(field_types: list[TypeInformation]) -> TupleTypeInfo:
        return TupleTypeInfo(field_types)

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return PrimitiveArrayTypeInfo(element_type)

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return BasicArrayTypeInfo(element_type)

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return ObjectArrayTypeInfo(element_type)

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> TypeInformation:
        return MapTypeInfo(key_type_info, value_type_info)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> TypeInformation:
        return ListTypeInfo(element_type_info)
