"""PyFlink's file-connector CSV formats: ``CsvReaderFormat`` (read) and ``CsvBulkWriters`` (write).

``FileSource.for_record_stream_format(CsvReaderFormat.for_schema(schema), path)`` reads CSV files
into ``Row``s of ``schema.get_type_info()`` (``Types.ROW_NAMED`` of the columns); ``FileSink
.for_bulk_format(path, CsvBulkWriters.for_schema(schema))`` writes rows as CSV lines. The schema
(``csv_schema.py``) gives the dialect and the columns' types, converted as Flink's
``CsvToRowDataConverters``/``RowDataToCsvConverters`` do.

Theory of operation, reading: the file source hands a format one line at a time, each file from
its start or from a checkpointed line (``files.py``). :meth:`CsvReaderFormat._open_file` makes a
decoder per file that knows whether the file's first line (a header, ``set_use_header``) and its
first data row (``set_skip_first_data_row``) are still ahead: a file resumed past line 0 has
read its header (comment lines before a header are not counted). Each line is split by Python's
``csv`` module, not by a parser of our own: it implements the same dialect (separator, quote
character with doubled quotes inside, escape character, or no quoting) with the C speed of the
standard library, and its ``strict`` mode refuses what Jackson refuses (text after a closing
quote, an unclosed quote). A line that does not parse, or a row of another length than the
schema's (Flink: "Row length mismatch"), or a value its type rejects, fails the job as in Flink,
naming the file and line (the source routes it to the ``DEAD_LETTER`` side output when one is
consumed); with :meth:`CsvReaderFormat.with_ignore_parse_errors` (Flink's
``withIgnoreParseErrors``) it is skipped, logged and counted (``skipped_lines``). Lines starting
with ``#`` are skipped with ``set_allow_comments``; a blank line gives no row (Flink's converter
returns none for an empty record).

An escape character keeps the next character as it is, except that ``n``, ``r``, ``t`` and ``0``
after it are a line feed, carriage return, tab and NUL (Jackson's ``CsvDecoder._unescape``): the
pairs are rewritten to escaped control characters before the ``csv`` module reads the line, one
pair at a time from the left (an escaped escape character stays one). Not as Jackson: a quoted
value spanning lines (the source splits lines first: it is a parse error naming the line).

Writing: each row is one line: numbers and booleans as Java prints them, ``None`` as the null
value (empty by default), an array as its elements joined by its separator, and strings (an
array's text too) quoted by Jackson's loose check (:func:`loose_quote`). With ``set_use_header``
the column names, quoted and separated as a row, are the encoder's ``header``, which the file
sink writes once at the start of each part file (Flink makes a ``CsvBulkWriter`` per part file).
"""

from __future__ import annotations

import csv
import logging
import re
from collections.abc import Callable
from typing import Any

from streamflow.connectors.file_sink_policy import BulkEncoder
from streamflow.connectors.files import NO_RECORD, StreamFormat
from streamflow.types.row import _create_row

from .csv_schema import CsvSchema, value_parser, value_text

__all__ = ["CsvBulkWriters", "CsvReaderFormat", "loose_quote"]

log = logging.getLogger(__name__)

_MAX_QUOTE_CHECK = 24  # Jackson's CsvEncoder.MAX_QUOTE_CHECK: a longer string is always quoted
_UNESCAPED = {"0": "\0", "n": "\n", "r": "\r", "t": "\t"}  # Jackson's CsvDecoder._unescape
_LOGGED_PER_FILE = 10  # skipped lines logged one by one per file; then every 1000th


def loose_quote(text: str, separator: str, quote: str | None, escape: str | None, line_end: str) -> str:
    """Jackson's ``CsvEncoder`` loose quoting, which Flink's formats keep: a string is quoted when
    it is longer than 24 characters or holds a character below the "safe" one (one past the
    highest of the separator, the quote character and the line end's characters) or the escape
    character; in a quoted string the quote and escape characters are doubled."""
    if not quote:
        return text
    safe = max(ord(separator), ord(quote), *(ord(c) for c in line_end)) + 1
    if len(text) <= _MAX_QUOTE_CHECK and not any(ord(c) < safe or c == escape for c in text):
        return text
    text = text.replace(escape, escape + escape) if escape else text
    return quote + text.replace(quote, quote + quote) + quote


class _Decoder:
    """One file's lines as rows of the schema (the module doc)."""

    def __init__(self, fmt: CsvReaderFormat, path: str, line: int) -> None:
        schema = fmt.schema
        self._fmt, self._path, self._line = fmt, path, line
        self._header = schema.option("use_header") and line == 0
        self._skip_data_row = schema.option("skip_first_data_row") and line <= int(
            schema.option("use_header")
        )
        quote = schema.option("quote_char")
        self._dialect = {
            "delimiter": schema.option("column_separator"), "quotechar": quote or '"',
            "quoting": csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE,
            "escapechar": schema.option("escape_char"), "doublequote": True, "strict": True,
        }  # fmt: skip
        escape = schema.option("escape_char")
        self._escapes = None if escape is None else re.compile(re.escape(escape) + "(.)", re.DOTALL)
        self._columns = schema.columns()
        self._names = [c.name for c in self._columns]
        self._null = schema.option("null_value")
        self._parsers = [self._column_parser(schema, c) for c in self._columns]
        self._skipped = 0

    @staticmethod
    def _column_parser(schema: CsvSchema, column: Any) -> Callable[[str], Any]:
        if not column.is_array:
            return value_parser(column.data_type)
        parse, separator = (
            value_parser(column.data_type.params["element_type"]),
            schema.array_separator(column),
        )
        if not separator:
            return lambda text: [parse(text)] if text else []
        return lambda text: [parse(part) for part in text.split(separator)] if text else []

    def __call__(self, raw: bytes) -> Any:
        self._line += 1
        text = raw.decode("utf-8").rstrip("\r\n")
        if self._fmt.schema.option("allow_comments") and text.startswith("#"):
            return NO_RECORD
        if not text:
            return NO_RECORD
        if self._skip_data_row and not self._header:  # Jackson skips the line unparsed
            self._skip_data_row = False
            return NO_RECORD
        try:
            line = text if self._escapes is None else self._escapes.sub(self._unescape, text)
            fields = next(csv.reader([line], **self._dialect))
            if self._header:
                self._header = False
                self._check_header(fields)
                return NO_RECORD
            if len(fields) != len(self._columns):
                raise ValueError(
                    f"Row length mismatch. {len(self._columns)} fields expected but was {len(fields)}."
                )
            values = [None if f == self._null else p(f) for p, f in zip(self._parsers, fields, strict=True)]
        except (ValueError, csv.Error) as exc:
            if isinstance(exc, csv.Error) and "end of data" in str(exc):
                exc = csv.Error(f"{exc} (an unclosed quote: a quoted value spanning lines is not supported)")
            if not self._fmt.ignore_parse_errors:
                raise ValueError(
                    f"CSV {self._path}:{self._line}: cannot parse {text[:100]!r}: {exc}"
                ) from exc
            self._skip(text, exc)
            return NO_RECORD
        return _create_row(self._names, tuple(values))

    def _unescape(self, pair: re.Match[str]) -> str:
        return pair[0][:-1] + _UNESCAPED.get(pair[1], pair[1])

    def _check_header(self, names: list[str]) -> None:
        """Flink/Jackson: with strict headers the header must name the columns in order."""
        if not self._fmt.schema.option("strict_headers"):
            return
        expected = [c.name for c in self._columns]
        for i, column in enumerate(expected):
            if i >= len(names):
                raise ValueError(f'Missing header column #{i + 1}, expecting "{column}"')
            if names[i] != column:
                raise ValueError(
                    f'Mismatched header column #{i + 1}: expected "{column}", actual "{names[i]}"'
                )
        if len(names) > len(expected):
            raise ValueError(f"Extra header {names[len(expected)]}")

    def _skip(self, text: str, exc: Exception) -> None:
        self._skipped += 1
        self._fmt.skipped_lines += 1
        if self._skipped <= _LOGGED_PER_FILE or self._skipped % 1000 == 0:
            log.warning(
                "CsvReaderFormat: skipped line %s:%d (%s; %d skipped in this file, ignore_parse_errors): %r",
                self._path, self._line, exc, self._skipped, text[:100],
            )  # fmt: skip


class CsvReaderFormat(StreamFormat):
    """PyFlink's ``CsvReaderFormat``: a ``StreamFormat`` reading CSV files as rows of a schema."""

    def __init__(self, schema: CsvSchema, ignore_parse_errors: bool = False) -> None:
        if not isinstance(schema, CsvSchema):
            raise TypeError(f"CsvReaderFormat.for_schema: a CsvSchema is needed, got {schema!r}")
        super().__init__(self._refuse_line, f"csv({schema})", self._open_file)
        self.schema = schema
        self.ignore_parse_errors = ignore_parse_errors
        self.skipped_lines = 0  # lines skipped by ignore_parse_errors (in this process)

    @staticmethod
    def for_schema(schema: CsvSchema) -> CsvReaderFormat:
        return CsvReaderFormat(schema)

    def with_ignore_parse_errors(self) -> CsvReaderFormat:
        """Flink's ``CsvReaderFormat.withIgnoreParseErrors()``: skip (log, count) malformed lines."""
        return CsvReaderFormat(self.schema, True)

    def get_produced_type(self) -> Any:
        return self.schema.get_type_info()

    def _open_file(self, path: str, line: int) -> Callable[[bytes], Any]:
        return _Decoder(self, path, line)

    @staticmethod
    def _refuse_line(line: bytes) -> Any:
        raise TypeError(
            "CsvReaderFormat decodes a file's lines in order (a decoder per file), not one line alone"
        )


class CsvBulkWriters:
    """PyFlink's ``CsvBulkWriters``: the writer factory for ``FileSink.for_bulk_format``."""

    @staticmethod
    def for_schema(schema: CsvSchema) -> BulkEncoder:
        if not isinstance(schema, CsvSchema):
            raise TypeError(f"CsvBulkWriters.for_schema: a CsvSchema is needed, got {schema!r}")
        sep, quote, esc = (
            schema.option("column_separator"),
            schema.option("quote_char"),
            schema.option("escape_char"),
        )
        end, null = schema.option("line_separator"), schema.option("null_value") or ""
        columns = schema.columns()

        def field(value: Any, column: Any) -> str:
            if value is None:
                return null
            data_type = column.data_type
            if column.is_array:
                element = data_type.params["element_type"]
                parts = (null if v is None else value_text(v, element) for v in value)
                return loose_quote(schema.array_separator(column).join(parts), sep, quote, esc, end)
            if data_type.name == "STRING":
                return loose_quote(str(value), sep, quote, esc, end)
            return value_text(value, data_type)

        def encode(records: list) -> bytes:
            lines = []
            for row in records:
                if len(row) != len(columns):
                    raise ValueError(
                        f"CsvBulkWriters: a row of {len(row)} fields for a schema of {len(columns)}: {row!r}"
                    )
                lines.append(sep.join(field(v, c) for v, c in zip(row, columns, strict=True)) + end)
            return "".join(lines).encode("utf-8")

        header = b""
        if schema.option("use_header"):  # Jackson's CsvGenerator: the column names, as a row
            names = (loose_quote(c.name, sep, quote, esc, end) for c in columns)
            header = (sep.join(names) + end).encode("utf-8")
        return BulkEncoder(encode, f"csv_bulk({schema})", header=header)
