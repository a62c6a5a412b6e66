"""PyFlink's ``CsvSchema`` and ``CsvSchemaBuilder``: the columns and dialect of a CSV file.

A schema is what Flink's file-connector CSV formats (``CsvReaderFormat``, ``CsvBulkWriters``,
``csv_file.py``) read and write: Jackson's ``CsvSchema`` (its columns and their separators,
quote, escape, null value, header and comment settings) plus the Table type of each column, the
``DataTypes`` PyFlink's builder records beside it (``add_number_column('id', DataTypes.INT())``).
:meth:`CsvSchema.get_type_info` is the record type, ``Types.ROW_NAMED`` of the columns' types as
Flink's ``LegacyTypeInfoDataTypeConverter`` gives them (``streamflow.table.types``).

Values are converted as Flink's ``CsvToRowDataConverters`` (reading) and
``RowDataToCsvConverters`` (writing) do, Java's parse and print rules kept:

* ``TINYINT``/``SMALLINT``/``INT``/``BIGINT``: ``Byte.parseByte``... of the trimmed text (an
  optional sign and decimal digits, in the type's range); ``FLOAT``/``DOUBLE``: ``Float.parseFloat``
  / ``Double.parseDouble`` (a ``FLOAT`` is rounded to 32 bits), written as Java's
  ``Float.toString``/``Double.toString`` (``3.0E38``); ``DECIMAL(p, s)``: ``new BigDecimal(text)``
  rounded half-up to ``s`` digits, ``None`` when it then has more than ``p`` digits (Flink's
  ``DecimalData.fromBigDecimal``); ``BOOLEAN``: ``Boolean.parseBoolean`` (``true`` in any case,
  anything else is ``False``); ``STRING``: the text as it is (no trimming);
* an array column is its text split on the column's separator (else the schema's), each element
  converted by the element type, a list; an empty field is an empty list;
* a field equal to the schema's null value (``set_null_value``; none by default) is ``None``.
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Callable
from typing import Any

from streamflow.table.types import DataType, DataTypes
from streamflow.types.java_text import F32, java_float, java_string

__all__ = ["CsvSchema", "CsvSchemaBuilder"]

_INT_RANGES = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_FLOAT = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")


def _java_int(bits: int) -> Callable[[str], int]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def parse(text: str) -> int:
        s = text.strip()
        if not _JAVA_INT.fullmatch(s) or not low <= int(s) <= high:
            raise ValueError(f"not a {bits}-bit integer: {text!r}")
        return int(s)

    return parse


def _java_double(text: str) -> float:
    s = text.strip()
    if not _JAVA_FLOAT.fullmatch(s):
        raise ValueError(f"not a number: {text!r}")
    return float(s.rstrip("fFdD").replace("Infinity", "inf"))


def _java_float32(text: str) -> float:
    value = _java_double(text)
    try:
        return float(F32.unpack(F32.pack(value))[0])
    except OverflowError:  # beyond the largest float: Java's parseFloat gives Infinity
        return math.copysign(math.inf, value)


def _decimal(precision: int, scale: int) -> Callable[[str], decimal.Decimal | None]:
    quantum = decimal.Decimal(1).scaleb(-scale)

    def parse(text: str) -> decimal.Decimal | None:
        try:
            value = decimal.Decimal(text)
        except decimal.InvalidOperation:
            raise ValueError(f"not a decimal: {text!r}") from None
        if not value.is_finite() or text != text.strip():
            raise ValueError(f"not a decimal: {text!r}")
        with decimal.localcontext() as ctx:
            ctx.prec = 1000
            rounded = value.quantize(quantum, rounding=decimal.ROUND_HALF_UP)
        return None if len(rounded.as_tuple().digits) > precision and rounded != 0 else rounded

    return parse


def _boolean(text: str) -> bool:
    return text.strip().lower() == "true"  # Java's Boolean.parseBoolean


def value_parser(data_type: DataType) -> Callable[[str], Any]:
    """The parser of a field's text for ``data_type`` (Flink's ``CsvToRowDataConverters``)."""
    name = data_type.name
    if name in _INT_RANGES:
        return _java_int(_INT_RANGES[name])
    if name == "FLOAT":
        return _java_float32
    if name == "DOUBLE":
        return _java_double
    if name == "DECIMAL":
        return _decimal(data_type.params["precision"], data_type.params["scale"])
    if name == "BOOLEAN":
        return _boolean
    if name == "STRING":
        return str
    raise TypeError(f"CsvSchema: columns of type {data_type!r} are not supported here")


def value_text(value: Any, data_type: DataType) -> str:
    """A non-null value as Flink's ``RowDataToCsvConverters`` and Jackson print it."""
    if data_type.name == "FLOAT":
        return java_float(float(value))
    if data_type.name == "DOUBLE":
        return java_string(float(value))
    return java_string(value)


class _Column:
    def __init__(self, name: str, data_type: DataType, array_separator: str | None = None) -> None:
        self.name, self.data_type, self.array_separator = name, data_type, array_separator

    @property
    def is_array(self) -> bool:
        return self.data_type.name == "ARRAY"


class CsvSchema:
    """The columns and dialect of a CSV file (Jackson's ``CsvSchema``), built by :meth:`builder`."""

    def __init__(self, columns: list[_Column], options: dict[str, Any]) -> None:
        self._columns = list(columns)
        self._options = dict(options)
        self._row_type = DataTypes.ROW([DataTypes.FIELD(c.name, c.data_type) for c in self._columns])

    @staticmethod
    def builder() -> CsvSchemaBuilder:
        return CsvSchemaBuilder()

    def get_type_info(self) -> Any:
        """The record type: ``Types.ROW_NAMED`` of the columns and their types."""
        return self._row_type.type_info()

    def option(self, name: str) -> Any:
        return self._options[name]

    def columns(self) -> list[_Column]:
        return list(self._columns)

    def array_separator(self, column: _Column) -> str:
        return column.array_separator or self._options["array_element_separator"]

    def size(self) -> int:
        return len(self._columns)

    def __len__(self) -> int:
        return self.size()

    def __str__(self) -> str:
        cols = ", ".join(f"{c.name} {c.data_type!r}" for c in self._columns)
        opts = ", ".join(f"{k}={v!r}" for k, v in sorted(self._options.items()))
        return f"CsvSchema([{cols}], {opts})"

    __repr__ = __str__


_DEFAULTS: dict[str, Any] = {
    "column_separator": ",", "quote_char": '"', "escape_char": None, "line_separator": "\n",
    "null_value": None, "array_element_separator": ";", "use_header": False, "strict_headers": False,
    "skip_first_data_row": False, "allow_comments": False, "any_property_name": None,
}  # fmt: skip


def _one_char(what: str, char: str) -> str:
    if not isinstance(char, str) or len(char) != 1:
        raise ValueError(f"{what} must be a single char, got {char!r}")
    return char


class CsvSchemaBuilder:
    """PyFlink's ``CsvSchema.builder()``: columns in file order, then the dialect."""

    def __init__(self) -> None:
        self._columns: list[_Column] = []
        self._options = dict(_DEFAULTS)

    def build(self) -> CsvSchema:
        return CsvSchema(self._columns, self._options)

    def add_array_column(
        self, name: str, separator: str = ";", element_type: DataType | None = None
    ) -> CsvSchemaBuilder:
        element = DataTypes.STRING() if element_type is None else element_type
        value_parser(element)  # refuses an element type it cannot read, here rather than at run time
        self._columns.append(_Column(name, DataTypes.ARRAY(element), separator))
        return self

    def add_boolean_column(self, name: str) -> CsvSchemaBuilder:
        self._columns.append(_Column(name, DataTypes.BOOLEAN()))
        return self

    def add_number_column(self, name: str, number_type: DataType | None = None) -> CsvSchemaBuilder:
        number_type = DataTypes.BIGINT() if number_type is None else number_type
        if not isinstance(number_type, DataType) or not number_type.is_numeric:
            raise TypeError(f"add_number_column({name!r}): a numeric DataType is needed, got {number_type!r}")
        self._columns.append(_Column(name, number_type))
        return self

    def add_string_column(self, name: str) -> CsvSchemaBuilder:
        self._columns.append(_Column(name, DataTypes.STRING()))
        return self

    def add_columns_from(self, schema: CsvSchema) -> CsvSchemaBuilder:
        self._columns.extend(schema.columns())
        return self

    def clear_columns(self) -> CsvSchemaBuilder:
        self._columns.clear()
        return self

    def _set(self, key: str, value: Any) -> CsvSchemaBuilder:
        self._options[key] = value
        return self

    def set_allow_comments(self, allow: bool = True) -> CsvSchemaBuilder:
        """Lines starting with ``#`` are comments (skipped when reading)."""
        return self._set("allow_comments", allow)

    def set_any_property_name(self, name: str) -> CsvSchemaBuilder:
        """Jackson's name for extra columns; Flink's row converter still refuses a row with more
        columns than the schema ("Row length mismatch"), and so does streamflow."""
        return self._set("any_property_name", name)

    def disable_array_element_separator(self) -> CsvSchemaBuilder:
        return self._set("array_element_separator", "")

    def remove_array_element_separator(self, index: int) -> CsvSchemaBuilder:
        self._columns[index].array_separator = ""
        return self

    def set_array_element_separator(self, separator: str) -> CsvSchemaBuilder:
        return self._set("array_element_separator", separator)

    def set_column_separator(self, char: str) -> CsvSchemaBuilder:
        return self._set("column_separator", _one_char("Column separator", char))

    def disable_escape_char(self) -> CsvSchemaBuilder:
        return self._set("escape_char", None)

    def set_escape_char(self, char: str) -> CsvSchemaBuilder:
        return self._set("escape_char", _one_char("Escape char", char))

    def set_line_separator(self, separator: str) -> CsvSchemaBuilder:
        """The line end written (default ``\\n``); reading ends lines at ``\\n``, ``\\r``, ``\\r\\n``."""
        return self._set("line_separator", separator)

    def set_null_value(self, null_value: str) -> CsvSchemaBuilder:
        """The text of a null field (PyFlink's method returns ``None``; this one the builder)."""
        return self._set("null_value", null_value)

    def disable_quote_char(self) -> CsvSchemaBuilder:
        return self._set("quote_char", None)

    def set_quote_char(self, char: str) -> CsvSchemaBuilder:
        return self._set("quote_char", _one_char("Quote char", char))

    def set_skip_first_data_row(self, skip: bool = True) -> CsvSchemaBuilder:
        return self._set("skip_first_data_row", skip)

    def set_strict_headers(self, strict: bool = True) -> CsvSchemaBuilder:
        """The header's names must be the columns' names, in order (with ``set_use_header``)."""
        return self._set("strict_headers", strict)

    def set_use_header(self, use: bool = True) -> CsvSchemaBuilder:
        """A file's first line is a header (skipped; checked with ``set_strict_headers``)."""
        return self._set("use_header", use)

    def size(self) -> int:
        return len(self._columns)

    def __len__(self) -> int:
        return self.size()
