"""The file-connector cases of Apache Flink's ``pyflink/datastream/formats/tests/test_csv.py``
(apache/flink ``0167870``) on streamflow: ``FileSourceCsvReaderFormatTests`` (9 cases; Flink runs
them in its process and thread Python modes, streamflow has one) and
``FileSinkCsvBulkWriterTests`` (5 cases), with Flink's inputs, schemas and expected rows/lines.

The schemas are built with ``DataTypes`` from ``streamflow.table`` (PyFlink: ``pyflink.table``).
``_read_csv_file`` globs ``dir/**/*`` recursively: Flink's bulk sink writes into an hourly bucket
directory (its default assigner), streamflow's into the base path (logged, file_options.py).
Extra tests (not Flink's) follow the ports: malformed lines, ``with_ignore_parse_errors``,
strict headers that do not match, null values, a refused ``pyflink.table`` name, a reader
restored mid-file, what the bulk sink refuses, ``set_skip_first_data_row``, Jackson's escape sequences.
"""

from __future__ import annotations

import glob
import logging
import os
from typing import Any

import pytest
from pyflink_harness import DataStreamTestSinkFunction, make_env

from streamflow.common import Types, WatermarkStrategy
from streamflow.datastream import MapFunction
from streamflow.datastream.connectors.file_system import FileSink, FileSource
from streamflow.datastream.formats.csv import CsvBulkWriters, CsvReaderFormat, CsvSchema
from streamflow.errors import NotSupportedError
from streamflow.table import DataTypes


class PassThroughMapFunction(MapFunction):
    def map(self, value: Any) -> Any:
        return value


def _create_csv_primitive_column_schema_and_lines() -> tuple[CsvSchema, list[str]]:
    schema = (
        CsvSchema.builder()
        .add_number_column("tinyint", DataTypes.TINYINT())
        .add_number_column("smallint", DataTypes.SMALLINT())
        .add_number_column("int", DataTypes.INT())
        .add_number_column("bigint", DataTypes.BIGINT())
        .add_number_column("float", DataTypes.FLOAT())
        .add_number_column("double", DataTypes.DOUBLE())
        .add_number_column("decimal", DataTypes.DECIMAL(2, 0))
        .add_boolean_column("boolean")
        .add_string_column("string")
        .build()
    )
    lines = ["127,-32767,2147483647,-9223372036854775808,3e38,2e-308,1.5,true,string\n"]
    return schema, lines


def _check_csv_primitive_column_results(results: list[Any]) -> None:
    row = results[0]
    assert row["tinyint"] == 127
    assert row["smallint"] == -32767
    assert row["int"] == 2147483647
    assert row["bigint"] == -9223372036854775808
    assert row["float"] == pytest.approx(3e38, abs=1e31)
    assert row["double"] == pytest.approx(2e-308, abs=2e-301)
    assert row["decimal"] == pytest.approx(2, abs=1e-7)  # assertAlmostEqual: 7 places
    assert row["boolean"] is True
    assert row["string"] == "string"


def _create_csv_array_column_schema_and_lines() -> tuple[CsvSchema, list[str]]:
    schema = (
        CsvSchema.builder()
        .add_array_column("number_array", separator=";", element_type=DataTypes.INT())
        .add_array_column("boolean_array", separator=":", element_type=DataTypes.BOOLEAN())
        .add_array_column("string_array", separator=",", element_type=DataTypes.STRING())
        .set_column_separator("|")
        .disable_quote_char()
        .build()
    )
    return schema, ["1;2;3|true:false|a,b,c\n"]


def _check_csv_array_column_results(results: list[Any]) -> None:
    row = results[0]
    assert list(row["number_array"]) == [1, 2, 3]
    assert list(row["boolean_array"]) == [True, False]
    assert list(row["string_array"]) == ["a", "b", "c"]


def _create_csv_allow_comments_schema_and_lines() -> tuple[CsvSchema, list[str]]:
    schema = CsvSchema.builder().add_string_column("string").set_allow_comments().build()
    return schema, ["a\n", "# this is comment\n", "b\n"]


def _check_csv_allow_comments_results(results: list[Any]) -> None:
    assert results[0]["string"] == "a"
    assert results[1]["string"] == "b"


def _create_csv_use_header_schema_and_lines() -> tuple[CsvSchema, list[str]]:
    schema = (
        CsvSchema.builder().add_string_column("string").add_number_column("number").set_use_header().build()
    )
    return schema, ["h1,h2\n", "string,123\n"]


def _check_csv_use_header_results(results: list[Any]) -> None:
    row = results[0]
    assert row["string"] == "string"
    assert row["number"] == 123


def _create_csv_strict_headers_schema_and_lines() -> tuple[CsvSchema, list[str]]:
    schema = (
        CsvSchema.builder()
        .add_string_column("string")
        .add_number_column("number")
        .set_use_header()
        .set_strict_headers()
        .build()
    )
    return schema, ["string,number\n", "string,123\n"]


def _check_csv_strict_headers_results(results: list[Any]) -> None:
    row = results[0]
    assert row["string"] == "string"
    assert row["number"] == 123


def _create_csv_default_quote_char_schema_and_lines() -> tuple[CsvSchema, list[str]]:
    schema = (
        CsvSchema.builder()
        .add_string_column("string")
        .add_string_column("string2")
        .set_column_separator("|")
        .build()
    )
    return schema, ['"string"|"string2"\n']


def _check_csv_default_quote_char_results(results: list[Any]) -> None:
    assert results[0]["string"] == "string"


def _create_csv_customize_quote_char_schema_lines() -> tuple[CsvSchema, list[str]]:
    schema = (
        CsvSchema.builder()
        .add_string_column("string")
        .add_string_column("string2")
        .set_column_separator("|")
        .set_quote_char("`")
        .build()
    )
    return schema, ["`string`|`string2`\n"]


def _check_csv_customize_quote_char_results(results: list[Any]) -> None:
    assert results[0]["string"] == "string"


def _create_csv_set_escape_char_schema_and_lines() -> tuple[CsvSchema, list[str]]:
    schema = (
        CsvSchema.builder()
        .add_string_column("string")
        .add_string_column("string2")
        .set_column_separator(",")
        .set_escape_char("\\")
        .build()
    )
    return schema, ['string\\,,\\"string2\\"\n']


def _check_csv_set_escape_char_results(results: list[Any]) -> None:
    row = results[0]
    assert row["string"] == "string,"
    assert row["string2"] == '"string2"'


# ---- FileSourceCsvReaderFormatTests ----


def _run_source_job(tmp_path: Any, schema: CsvSchema, lines: list[str], name: str) -> list[Any]:
    """Flink's ``_build_csv_job`` and ``env.execute``: the file through a pass-through map."""
    csv_file_name = str(tmp_path / "input.csv")
    with open(csv_file_name, "w") as f:
        for line in lines:
            f.write(line)
    env = make_env()
    test_sink = DataStreamTestSinkFunction()
    source = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(schema), csv_file_name).build()
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "csv-source")
    ds.map(PassThroughMapFunction(), output_type=Types.PICKLED_BYTE_ARRAY()).add_sink(test_sink)
    env.execute(name)
    return test_sink.get_results(True, False)


def test_csv_primitive_column(tmp_path: Any) -> None:
    schema, lines = _create_csv_primitive_column_schema_and_lines()
    _check_csv_primitive_column_results(_run_source_job(tmp_path, schema, lines, "test_csv_primitive_column"))


def test_csv_add_columns_from(tmp_path: Any) -> None:
    original_schema, lines = _create_csv_primitive_column_schema_and_lines()
    schema = CsvSchema.builder().add_columns_from(original_schema).build()
    _check_csv_primitive_column_results(_run_source_job(tmp_path, schema, lines, "test_csv_schema_copy"))


def test_csv_array_column(tmp_path: Any) -> None:
    schema, lines = _create_csv_array_column_schema_and_lines()
    _check_csv_array_column_results(_run_source_job(tmp_path, schema, lines, "test_csv_array_column"))


def test_csv_allow_comments(tmp_path: Any) -> None:
    schema, lines = _create_csv_allow_comments_schema_and_lines()
    _check_csv_allow_comments_results(_run_source_job(tmp_path, schema, lines, "test_csv_allow_comments"))


def test_csv_use_header(tmp_path: Any) -> None:
    schema, lines = _create_csv_use_header_schema_and_lines()
    _check_csv_use_header_results(_run_source_job(tmp_path, schema, lines, "test_csv_use_header"))


def test_csv_strict_headers(tmp_path: Any) -> None:
    schema, lines = _create_csv_strict_headers_schema_and_lines()
    _check_csv_strict_headers_results(_run_source_job(tmp_path, schema, lines, "test_csv_strict_headers"))


def test_csv_default_quote_char(tmp_path: Any) -> None:
    schema, lines = _create_csv_default_quote_char_schema_and_lines()
    _check_csv_default_quote_char_results(
        _run_source_job(tmp_path, schema, lines, "test_csv_default_quote_char")
    )


def test_csv_customize_quote_char(tmp_path: Any) -> None:
    schema, lines = _create_csv_customize_quote_char_schema_lines()
    results = _run_source_job(tmp_path, schema, lines, "test_csv_customize_quote_char")
    _check_csv_customize_quote_char_results(results)


def test_csv_use_escape_char(tmp_path: Any) -> None:
    schema, lines = _create_csv_set_escape_char_schema_and_lines()
    _check_csv_set_escape_char_results(_run_source_job(tmp_path, schema, lines, "test_csv_use_escape_char"))


# ---- FileSinkCsvBulkWriterTests ----


def _run_sink_job(tmp_path: Any, schema: CsvSchema, lines: list[str], name: str) -> list[str]:
    """Flink's ``_build_csv_job`` (source -> bulk CSV sink, parallelism 1) and ``_read_csv_file``."""
    csv_file_name, csv_dir_name = str(tmp_path / "input.csv"), str(tmp_path / "out")
    with open(csv_file_name, "w") as f:
        for line in lines:
            f.write(line)
    env = make_env()
    env.set_parallelism(1)
    source = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(schema), csv_file_name).build()
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "csv-source")
    ds.sink_to(FileSink.for_bulk_format(csv_dir_name, CsvBulkWriters.for_schema(schema)).build())
    env.execute(name)
    results: list[str] = []
    for file in glob.glob(os.path.join(csv_dir_name, "**/*"), recursive=True):
        if os.path.isfile(file):
            with open(file) as f:
                results.extend(f.readlines())
    return results


def test_csv_primitive_column_write(tmp_path: Any) -> None:
    schema, lines = _create_csv_primitive_column_schema_and_lines()
    results = _run_sink_job(tmp_path, schema, lines, "test_csv_primitive_column_write")
    assert len(results) == 1
    assert results[0] == "127,-32767,2147483647,-9223372036854775808,3.0E38,2.0E-308,2,true,string\n"


def test_csv_array_column_write(tmp_path: Any) -> None:
    schema, lines = _create_csv_array_column_schema_and_lines()
    results = _run_sink_job(tmp_path, schema, lines, "test_csv_array_column_write")
    assert len(results) == 1
    assert results == lines


def test_csv_default_quote_char_write(tmp_path: Any) -> None:
    schema, lines = _create_csv_default_quote_char_schema_and_lines()
    results = _run_sink_job(tmp_path, schema, lines, "test_csv_default_quote_char_write")
    assert len(results) == 1
    assert results == lines


def test_csv_customize_quote_char_write(tmp_path: Any) -> None:
    schema, lines = _create_csv_customize_quote_char_schema_lines()
    results = _run_sink_job(tmp_path, schema, lines, "test_csv_customize_quote_char_write")
    assert len(results) == 1
    assert results == lines


def test_csv_use_escape_char_write(tmp_path: Any) -> None:
    schema, lines = _create_csv_set_escape_char_schema_and_lines()
    results = _run_sink_job(tmp_path, schema, lines, "test_csv_use_escape_char_write")
    assert len(results) == 1
    assert results == ['"string,","""string2"""\n']


# ---- extra tests (not Flink's) ----


def test_a_malformed_line_fails_the_job_naming_file_and_line(tmp_path: Any) -> None:
    """Flink's CsvReaderFormat (ignoreParseErrors false) fails on a row that does not convert."""
    schema = CsvSchema.builder().add_string_column("s").add_number_column("n", DataTypes.INT()).build()
    with pytest.raises(Exception, match=r"input\.csv:2.*not a 32-bit integer"):
        _run_source_job(tmp_path, schema, ["a,1\n", "b,x\n", "c,3\n"], "malformed")


def test_a_row_of_another_length_is_flinks_row_length_mismatch(tmp_path: Any) -> None:
    schema = CsvSchema.builder().add_string_column("s").add_number_column("n").build()
    with pytest.raises(Exception, match=r"input\.csv:1.*Row length mismatch. 2 fields expected but was 3"):
        _run_source_job(tmp_path, schema, ["a,1,2\n"], "length")


def test_ignore_parse_errors_skips_logs_and_counts(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Flink's ``withIgnoreParseErrors()``: bad lines are skipped; here also logged and counted."""
    schema = CsvSchema.builder().add_string_column("s").add_number_column("n", DataTypes.INT()).build()
    path = tmp_path / "input.csv"
    path.write_text('a,1\nb,x\n"c,3\nd,4\n')
    env = make_env(parallelism=1)
    fmt = CsvReaderFormat.for_schema(schema).with_ignore_parse_errors()
    ds = env.from_source(FileSource.for_record_stream_format(fmt, str(path)).build(),
                         WatermarkStrategy.no_watermarks(), "csv")  # fmt: skip
    with caplog.at_level(logging.WARNING), ds.execute_and_collect() as results:
        rows = [(r["s"], r["n"]) for r in results]
    assert rows == [("a", 1), ("d", 4)]
    skipped = [r.getMessage() for r in caplog.records if "skipped line" in r.getMessage()]
    assert len(skipped) == 2 and "input.csv:2" in skipped[0] and "unclosed quote" in skipped[1]


def test_strict_headers_refuse_another_header(tmp_path: Any) -> None:
    schema = (
        CsvSchema.builder().add_string_column("string").add_number_column("number")
        .set_use_header().set_strict_headers().build()
    )  # fmt: skip
    with pytest.raises(Exception, match='Mismatched header column #2: expected "number", actual "n"'):
        _run_source_job(tmp_path, schema, ["string,n\n", "a,1\n"], "strict")


def test_null_value_and_type_info(tmp_path: Any) -> None:
    schema = (
        CsvSchema.builder().add_string_column("s").add_number_column("d", DataTypes.DECIMAL(3, 1))
        .add_array_column("a", element_type=DataTypes.BIGINT()).set_null_value("null").build()
    )  # fmt: skip
    assert str(schema.get_type_info()) == str(
        Types.ROW_NAMED(["s", "d", "a"], [Types.STRING(), Types.BIG_DEC(), Types.OBJECT_ARRAY(Types.LONG())])
    )  # LegacyTypeInfoDataTypeConverter: ARRAY(BIGINT()) is a Long[], ObjectArrayTypeInfo
    rows = _run_source_job(tmp_path, schema, ["null,1.25,\n", "x,null,7;8\n", "y,123.4,1\n"], "nulls")
    assert sorted(((r["s"], r["d"], r["a"]) for r in rows), key=str) == sorted(
        [(None, __import__("decimal").Decimal("1.3"), []), ("x", None, [7, 8]), ("y", None, [1])], key=str
    )  # 123.4 has 4 digits: more than DECIMAL(3, 1) holds, None as Flink's DecimalData.fromBigDecimal


def test_the_table_api_beyond_data_types_is_refused() -> None:
    with pytest.raises(NotSupportedError, match="no Table API"):
        from streamflow.table import TableEnvironment  # noqa: F401
    with pytest.raises(NotSupportedError, match=r"DataTypes\.DATE is not supported"):
        DataTypes.DATE()


def test_a_reader_restored_mid_file_keeps_reading_rows_not_the_header(tmp_path: Any) -> None:
    """The per-file decoder starts at the checkpointed line: the header is not re-read as a
    row (nor checked again), the rows after the position come once."""
    import asyncio

    from streamflow.connectors.files import END

    schema = CsvSchema.builder().add_string_column("s").add_number_column("n").set_use_header().build()
    path = tmp_path / "input.csv"
    path.write_text("s,n\na,1\nb,2\nc,3\n")
    source = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(schema), str(path)).build()
    assert str(source.get_produced_type()) == str(schema.get_type_info())
    reader = source.create_reader(0, 1)
    asyncio.run(reader.start(lambda: None))
    first = reader.poll_batch(2)  # the header and a,1
    position = reader.snapshot_position()
    again = source.create_reader(0, 1)
    again.restore_positions([position])
    asyncio.run(again.start(lambda: None))
    rest: list[Any] = []
    while (batch := again.poll_batch(10)) is not END:
        rest += batch  # type: ignore[operator]
    assert [(r["s"], r["n"]) for r in first + rest] == [("a", 1), ("b", 2), ("c", 3)]  # type: ignore[operator]


def test_bulk_sink_refuses_a_row_encoder_and_a_size_rolling_policy(tmp_path: Any) -> None:
    from streamflow.common.serialization import Encoder
    from streamflow.datastream.connectors.file_system import RollingPolicy

    with pytest.raises(TypeError, match="bulk writer factory"):
        FileSink.for_bulk_format(str(tmp_path), Encoder.simple_string_encoder())  # type: ignore[arg-type]
    schema, _ = _create_csv_array_column_schema_and_lines()
    builder = FileSink.for_bulk_format(str(tmp_path), CsvBulkWriters.for_schema(schema))
    with pytest.raises(TypeError, match="on checkpoints only"):
        builder.with_rolling_policy(RollingPolicy.default_rolling_policy())


def test_skip_first_data_row_skips_the_line_after_the_header_unparsed(tmp_path: Any) -> None:
    """Jackson's ``setSkipFirstDataRow``: the first line after the header (if any) is skipped
    without being parsed (here a units line of another length)."""
    schema = (
        CsvSchema.builder().add_string_column("s").add_number_column("n")
        .set_use_header().set_skip_first_data_row().build()
    )  # fmt: skip
    rows = _run_source_job(tmp_path, schema, ["s,n\n", "text,count,extra\n", "a,1\n"], "skip")
    assert [(r["s"], r["n"]) for r in rows] == [("a", 1)]
    no_header = CsvSchema.builder().add_string_column("s").set_skip_first_data_row().build()
    assert [r["s"] for r in _run_source_job(tmp_path, no_header, ["x\n", "y\n"], "skip2")] == ["y"]


def test_escape_sequences_are_jacksons(tmp_path: Any) -> None:
    """Jackson's ``CsvDecoder._unescape``: after the escape character ``n``/``r``/``t``/``0`` are
    control characters, any other character itself; an escaped escape character is one."""
    schema = CsvSchema.builder().add_string_column("a").add_string_column("b").set_escape_char("\\").build()
    rows = _run_source_job(tmp_path, schema, ['x\\ny,"p\\tq"\n', "\\\\n,\\q\\,\n"], "escapes")
    assert sorted((r["a"], r["b"]) for r in rows) == sorted([("x\ny", "p\tq"), ("\\n", "q,")])
