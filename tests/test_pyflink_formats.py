"""PyFlink's JSON and CSV row formats (``streamflow.datastream.formats``): rows of the declared
type both ways, Flink's defaults and options, parse errors failing or skipped with a log line,
and the source's stream typed by its deserializer (``from_source`` without ``type_info``)."""

from __future__ import annotations

import datetime
import decimal

import pytest

from streamflow.common import Row, Types
from streamflow.datastream.formats.csv import (
    CsvReaderFormat,
    CsvRowDeserializationSchema,
    CsvRowSerializationSchema,
)
from streamflow.datastream.formats.json import JsonRowDeserializationSchema, JsonRowSerializationSchema

ROW = Types.ROW([Types.INT(), Types.STRING()])


def test_json_rows_round_trip_by_the_row_types_field_names() -> None:
    named = Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()])
    ser = JsonRowSerializationSchema.Builder().with_type_info(named).build()
    de = JsonRowDeserializationSchema.Builder().type_info(named).build()
    data = ser.serialize(Row(1, "hi"))
    assert data == b'{"id":1,"name":"hi"}'
    assert ser.serialize((2, "x")) == b'{"id":2,"name":"x"}'
    row = de.deserialize(data)
    assert type(row) is Row and row == Row(id=1, name="hi") and row.name == "hi"
    assert de.deserialize(b'{"id":3}') == Row(id=3, name=None)  # a missing field is null
    assert de.get_produced_type() is named
    strict = JsonRowDeserializationSchema.builder().type_info(named).fail_on_missing_field().build()
    with pytest.raises(ValueError, match="missing"):
        strict.deserialize(b'{"id":3}')
    with pytest.raises(ValueError):  # orjson.JSONDecodeError
        de.deserialize(b"{not json")
    lenient = JsonRowDeserializationSchema.builder().type_info(named).ignore_parse_errors().build()
    assert lenient.deserialize_batch([b"{bad", b'{"id":4,"name":"y"}']) == [Row(id=4, name="y")]


def test_csv_rows_round_trip_with_flinks_defaults_and_options() -> None:
    types = Types.ROW(
        [Types.INT(), Types.STRING(), Types.BOOLEAN(), Types.DOUBLE(), Types.BIG_DEC(), Types.SQL_DATE()]
    )
    ser = CsvRowSerializationSchema.Builder(types).build()
    de = CsvRowDeserializationSchema.Builder(types).build()
    value = Row(1, "hi, there", True, 2.5, decimal.Decimal("1.10"), datetime.date(2024, 1, 7))
    data = ser.serialize(value)
    assert data == b'1,"hi, there",true,2.5,1.10,2024-01-07\n'
    assert tuple(de.deserialize(data)) == tuple(value) and type(de.deserialize(data)) is Row
    assert tuple(de.deserialize(b"2,,false,,,\n")) == (2, None, False, None, None, None)
    piped = CsvRowSerializationSchema.Builder(ROW).set_field_delimiter("|").set_null_literal("NULL").build()
    assert piped.serialize(Row(1, None)) == b"1|NULL\n"
    piped_in = CsvRowDeserializationSchema.Builder(ROW).set_field_delimiter("|").set_null_literal("NULL")
    piped_in = piped_in.build()
    assert tuple(piped_in.deserialize(b"1|NULL")) == (1, None)
    with pytest.raises(ValueError, match="cannot parse"):
        de.deserialize(b"x,y\n")
    lenient = CsvRowDeserializationSchema.Builder(ROW).set_ignore_parse_errors(True).build()
    assert [tuple(r) for r in lenient.deserialize_batch([b"x,y", b"3,z"])] == [(3, "z")]
    # the file format (test_pyflink_csv_file_cases.py) wants a CsvSchema
    with pytest.raises(TypeError, match="a CsvSchema is needed"):
        CsvReaderFormat.for_schema(None)


def test_a_kafka_source_types_its_stream_by_its_deserializer() -> None:
    from streamflow.datastream import StreamExecutionEnvironment
    from streamflow.datastream.connectors.kafka import KafkaSource

    source = (
        KafkaSource.builder()
        .set_bootstrap_servers("host:1")
        .set_topics("t")
        .set_value_only_deserializer(JsonRowDeserializationSchema.Builder().type_info(ROW).build())
        .build()
    )
    assert source.get_produced_type() is ROW
    stream = StreamExecutionEnvironment.get_execution_environment().from_source(source, None, "kafka")
    assert stream.get_type() is ROW  # print() writes +I[1, hi], as PyFlink's
