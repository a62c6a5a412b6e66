"""PyFlink's ``pyflink.datastream.formats.csv``: CSV row (de)serialization schemas.

``CsvRowSerializationSchema.Builder(Types.ROW([...])).build()`` writes a row as one CSV line
(Flink's defaults: field delimiter ``,``, line delimiter ``\\n``, quote character ``"``, no
escape character, ``null`` as an empty field); ``CsvRowDeserializationSchema.Builder(type_info)
.build()`` reads such a line into a ``Row`` of that type, each field parsed by its declared
type (numbers, booleans ``true``/``false``, decimals, ``SQL_DATE``/``SQL_TIME``/``SQL_TIMESTAMP``
in ISO form; an empty field is ``None``). ``set_ignore_parse_errors(True)`` skips a line that
does not parse (logged); otherwise it fails the source. As in Flink (Jackson CSV), a nested row
or an array field is its values joined by the array element delimiter (``;``), and a string is
quoted by Jackson's loose check (any character below the separators' highest, e.g. a space or a
digit with the default ``,``/``"``, or longer than 24 characters), not only when it must be.

The file connector's CSV formats, ``CsvSchema`` (``csv_schema.py``), ``CsvReaderFormat`` and
``CsvBulkWriters`` (``csv_file.py``), are defined beside this module and exported from it.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import logging
from collections.abc import Callable, Sequence
from typing import Any

from streamflow.connectors.serialization import DeserializationSchema, SerializationSchema

from .csv_file import CsvBulkWriters as CsvBulkWriters
from .csv_file import CsvReaderFormat as CsvReaderFormat
from .csv_file import loose_quote
from .csv_schema import CsvSchema as CsvSchema
from .csv_schema import CsvSchemaBuilder as CsvSchemaBuilder

__all__ = [
    "CsvBulkWriters",
    "CsvReaderFormat",
    "CsvRowDeserializationSchema",
    "CsvRowSerializationSchema",
    "CsvSchema",
    "CsvSchemaBuilder",
]

log = logging.getLogger(__name__)


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise ValueError(f"not a boolean: {text!r}")
    return low == "true"


_PARSERS: dict[str, Callable[[str], Any]] = {
    "String": str, "Character": str, "Byte": int, "Short": int, "Integer": int, "Long": int,
    "BigInteger": int, "Float": float, "Double": float, "Boolean": _bool, "BigDecimal": decimal.Decimal,
    "Date": datetime.date.fromisoformat, "Time": datetime.time.fromisoformat,
    "Timestamp": datetime.datetime.fromisoformat,
}  # fmt: skip


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def _field(value: Any, type_info: Any, opts: _Options) -> str:
    """One field as Flink's CSV row format (Jackson CSV) writes it: numbers and booleans raw,
    ``None`` as the null literal, a nested row or an array as its values joined by the array
    element delimiter (then quoted as a string), a string quoted by Jackson's loose check."""
    if value is None:
        return opts.null_literal
    if isinstance(value, (bool, int, float, decimal.Decimal)):
        return _text(value)
    row = callable(getattr(type_info, "get_field_types", None))
    if row or (callable(getattr(type_info, "get_element_type", None)) and isinstance(value, (list, tuple))):
        return _quoted(opts.array_element_delimiter.join(_element(v) for v in value), opts)
    return _quoted(_text(value), opts)


def _element(value: Any) -> str:
    return "" if value is None else _text(value)


def _quoted(text: str, opts: _Options) -> str:
    """Jackson's loose quoting (``csv_file.loose_quote``), as Flink's row format keeps it."""
    return loose_quote(
        text, opts.field_delimiter, opts.quote_character, opts.escape_character, opts.line_delimiter
    )


class _Options:
    def __init__(self, type_info: Any) -> None:
        names = getattr(type_info, "get_field_names", None)
        if not callable(names):
            raise TypeError(f"CSV rows need a row type (Types.ROW / ROW_NAMED), got {type_info!r}")
        self.type_info = type_info
        self.field_delimiter = ","
        self.line_delimiter = "\n"
        self.quote_character: str | None = '"'
        self.escape_character: str | None = None
        self.null_literal = ""
        self.array_element_delimiter = ";"
        self.ignore_parse_errors = False
        self.allow_comments = False

    def dialect(self) -> dict[str, Any]:
        quote = self.quote_character
        return {
            "delimiter": self.field_delimiter,
            "quotechar": quote or '"',
            "quoting": csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE,
            "escapechar": self.escape_character,
            "lineterminator": self.line_delimiter,
        }


def _parser(type_info: Any, delimiter: str) -> Callable[[str], Any]:
    """A field's parser by its declared type; a nested row or an array is its values split on
    the array element delimiter, each parsed by its own type."""
    inner = getattr(type_info, "get_field_types", None)
    if callable(inner):
        parsers = [_parser(t, delimiter) for t in inner()]
        return lambda text: type_info.convert(
            [parse(part) for parse, part in zip(parsers, text.split(delimiter), strict=True)]
        )
    element = getattr(type_info, "get_element_type", None)
    if callable(element):
        parse_element = _parser(element(), delimiter)
        return lambda text: [parse_element(part) for part in text.split(delimiter)] if text else []
    return _PARSERS.get(getattr(type_info, "name", ""), str)


class CsvRowSerializationSchema(SerializationSchema):
    """A row (or tuple) of the declared row type as one CSV line."""

    def __init__(self, options: _Options) -> None:
        self._options = options

    def get_produced_type(self) -> Any:
        return self._options.type_info

    def serialize(self, value: Any) -> bytes:
        opts = self._options
        types = opts.type_info.get_field_types()
        fields = [_field(v, t, opts) for v, t in zip(value, types, strict=True)]
        return (opts.field_delimiter.join(fields) + opts.line_delimiter).encode("utf-8")

    class Builder:
        """PyFlink's ``CsvRowSerializationSchema.Builder(type_info)``."""

        def __init__(self, type_info: Any) -> None:
            self._options = _Options(type_info)

        def set_field_delimiter(self, c: str) -> CsvRowSerializationSchema.Builder:
            self._options.field_delimiter = c
            return self

        def set_line_delimiter(self, delimiter: str) -> CsvRowSerializationSchema.Builder:
            self._options.line_delimiter = delimiter
            return self

        def set_array_element_delimiter(self, delimiter: str) -> CsvRowSerializationSchema.Builder:
            self._options.array_element_delimiter = delimiter
            return self

        def disable_quote_character(self) -> CsvRowSerializationSchema.Builder:
            self._options.quote_character = None
            return self

        def set_quote_character(self, c: str) -> CsvRowSerializationSchema.Builder:
            self._options.quote_character = c
            return self

        def set_escape_character(self, c: str) -> CsvRowSerializationSchema.Builder:
            self._options.escape_character = c
            return self

        def set_null_literal(self, s: str) -> CsvRowSerializationSchema.Builder:
            self._options.null_literal = s
            return self

        def build(self) -> CsvRowSerializationSchema:
            return CsvRowSerializationSchema(self._options)


class CsvRowDeserializationSchema(DeserializationSchema):
    """One CSV line as a ``Row`` of the declared row type."""

    def __init__(self, options: _Options) -> None:
        self._options = options
        types = options.type_info.get_field_types()
        self._parsers = [_parser(t, options.array_element_delimiter) for t in types]

    def get_produced_type(self) -> Any:
        return self._options.type_info

    def deserialize(self, message: bytes) -> Any:
        opts = self._options
        text = message.decode("utf-8").rstrip("\r\n")
        if opts.allow_comments and text.startswith("#"):
            return None
        try:
            fields = next(csv.reader([text], **opts.dialect()))
            if len(fields) != len(self._parsers):
                raise ValueError(f"{len(fields)} fields for a row of {len(self._parsers)}")
            values = [
                None if f == opts.null_literal else parse(f)
                for parse, f in zip(self._parsers, fields, strict=True)
            ]
        except (ValueError, decimal.InvalidOperation, csv.Error, StopIteration) as exc:
            if not opts.ignore_parse_errors:
                raise ValueError(f"CSV row: cannot parse {text[:100]!r}: {exc}") from exc
            log.warning("CSV row: skipped a line that does not parse (%s): %r", exc, text[:100])
            return None
        return opts.type_info.convert(values)

    def deserialize_batch(self, messages: Sequence[bytes]) -> list[Any]:
        return [r for r in map(self.deserialize, messages) if r is not None]

    class Builder:
        """PyFlink's ``CsvRowDeserializationSchema.Builder(type_info)``."""

        def __init__(self, type_info: Any) -> None:
            self._options = _Options(type_info)

        def set_field_delimiter(self, delimiter: str) -> CsvRowDeserializationSchema.Builder:
            self._options.field_delimiter = delimiter
            return self

        def set_allow_comments(self, allow_comments: bool) -> CsvRowDeserializationSchema.Builder:
            self._options.allow_comments = allow_comments
            return self

        def set_array_element_delimiter(self, delimiter: str) -> CsvRowDeserializationSchema.Builder:
            self._options.array_element_delimiter = delimiter
            return self

        def set_quote_character(self, c: str) -> CsvRowDeserializationSchema.Builder:
            self._options.quote_character = c
            return self

        def set_escape_character(self, c: str) -> CsvRowDeserializationSchema.Builder:
            self._options.escape_character = c
            return self

        def set_null_literal(self, null_literal: str) -> CsvRowDeserializationSchema.Builder:
            self._options.null_literal = null_literal
            return self

        def set_ignore_parse_errors(self, ignore_parse_errors: bool) -> CsvRowDeserializationSchema.Builder:
            self._options.ignore_parse_errors = ignore_parse_errors
            return self

        def build(self) -> CsvRowDeserializationSchema:
            return CsvRowDeserializationSchema(self._options)


# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports  # noqa: E402

__getattr__ = _reexports(__name__)
