"""The cases of Apache Flink's ``pyflink/datastream/formats/tests/test_json.py``,
``formats/tests/test_csv.py`` and ``connectors/tests/test_seq_source.py`` on streamflow.

Versions ported: the newest stored ones (apache/flink ``c5ed2b7`` test_json, ``0167870``
test_csv, ``47a02f6`` test_seq_source). Flink's cases open the Java (de)serialization schema
behind the Python object (``._j_serialization_schema.serialize(j_row)``) and compare Java
``Row``s; the ports call streamflow's schema and compare ``Row``s, the same inputs and the
same expected bytes. ``test_seq_source`` reads the Java source's private ``from``/``to``
fields; the port reads the built source's bounds and runs it.

The file-connector CSV cases (``FileSourceCsvReaderFormatTests``, ``FileSinkCsvBulkWriterTests``)
are in ``test_pyflink_csv_file_cases.py``.
"""

from __future__ import annotations

from streamflow.common import Row, Types
from streamflow.datastream.connectors.number_seq import NumberSequenceSource
from streamflow.datastream.formats.csv import CsvRowDeserializationSchema, CsvRowSerializationSchema
from streamflow.datastream.formats.json import JsonRowDeserializationSchema, JsonRowSerializationSchema

# ---- test_json.py: JsonSerializationSchemaTests ----


def test_json_row_serialization_deserialization_schema() -> None:
    jsons = [
        '{"svt":"2020-02-24T12:58:09.209+0800"}',
        '{"svt":"2020-02-24T12:58:09.209+0800", '
        '"ops":{"id":"281708d0-4092-4c21-9233-931950b6eccf"},"ids":[1, 2, 3]}',
        '{"svt":"2020-02-24T12:58:09.209+0800"}',
    ]
    expected_jsons = [
        '{"svt":"2020-02-24T12:58:09.209+0800","ops":null,"ids":null}',
        '{"svt":"2020-02-24T12:58:09.209+0800",'
        '"ops":{"id":"281708d0-4092-4c21-9233-931950b6eccf"},'
        '"ids":[1,2,3]}',
        '{"svt":"2020-02-24T12:58:09.209+0800","ops":null,"ids":null}',
    ]
    row_schema = Types.ROW_NAMED(
        ["svt", "ops", "ids"],
        [Types.STRING(), Types.ROW_NAMED(["id"], [Types.STRING()]), Types.PRIMITIVE_ARRAY(Types.INT())],
    )
    json_row_serialization_schema = JsonRowSerializationSchema.builder().with_type_info(row_schema).build()
    json_row_deserialization_schema = JsonRowDeserializationSchema.builder().type_info(row_schema).build()
    for i in range(len(jsons)):
        j_row = json_row_deserialization_schema.deserialize(bytes(jsons[i], encoding="utf-8"))
        result = str(json_row_serialization_schema.serialize(j_row), encoding="utf-8")
        assert expected_jsons[i] == result


# ---- test_csv.py: JsonSerializationSchemaTests (sic, Flink's class name) ----


def _fields(row: object) -> object:
    return tuple(_fields(v) for v in row) if isinstance(row, Row) else row  # type: ignore[attr-defined]


def test_csv_row_serialization_schema() -> None:
    j_row = [None, None, None]
    j_row[0] = "BEGIN"
    j_row[2] = "END"

    def field_assertion(field_info: object, csv_value: str, value: object, field_delimiter: str) -> None:
        row_info = Types.ROW([Types.STRING(), field_info, Types.STRING()])
        expected_csv = "BEGIN" + field_delimiter + csv_value + field_delimiter + "END\n"
        j_row[1] = value

        csv_row_serialization_schema = (
            CsvRowSerializationSchema.Builder(row_info)
            .set_escape_character("*")
            .set_quote_character("'")
            .set_array_element_delimiter(":")
            .set_field_delimiter(";")
            .build()
        )
        csv_row_deserialization_schema = (
            CsvRowDeserializationSchema.Builder(row_info)
            .set_escape_character("*")
            .set_quote_character("'")
            .set_array_element_delimiter(":")
            .set_field_delimiter(";")
            .build()
        )
        serialized_bytes = csv_row_serialization_schema.serialize(Row(*j_row))
        assert expected_csv == str(serialized_bytes, encoding="utf-8")

        j_deserialized_row = csv_row_deserialization_schema.deserialize(expected_csv.encode("utf-8"))
        assert _fields(Row(*j_row)) == _fields(j_deserialized_row)  # Java's Row.equals: by position

    field_assertion(Types.STRING(), "'123''4**'", "123'4*", ";")
    field_assertion(Types.STRING(), "'a;b''c'", "a;b'c", ";")
    field_assertion(Types.INT(), "12", 12, ";")

    test_j_row = Row("1", "hello")
    field_assertion(Types.ROW([Types.STRING(), Types.STRING()]), "'1:hello'", test_j_row, ";")
    test_j_row = Row("1", "hello world")
    field_assertion(Types.ROW([Types.STRING(), Types.STRING()]), "'1:hello world'", test_j_row, ";")
    field_assertion(Types.STRING(), "null", "null", ";")


# ---- test_seq_source.py: SequenceSourceTests ----


def test_seq_source() -> None:
    seq_source = NumberSequenceSource(1, 10)
    # Flink reads the Java source's private fields ``from`` and ``to``
    assert seq_source.start == 1
    assert seq_source.end == 10


# ---- extra tests (not Flink's) ----


def test_seq_source_emits_its_inclusive_range() -> None:
    """What test_seq_source's fields mean: the source emits ``from`` to ``to`` inclusive."""
    from streamflow.common import WatermarkStrategy
    from streamflow.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    ds = env.from_source(NumberSequenceSource(1, 10), WatermarkStrategy.no_watermarks(), "seq")
    with ds.execute_and_collect() as results:
        assert sorted(results) == list(range(1, 11))

