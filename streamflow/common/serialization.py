"""PyFlink's ``pyflink.common.serialization``: re-exports of ``streamflow.connectors.serialization``
and the file sink's ``Encoder``.

The JSON and CSV row schemas lived here until PyFlink 1.16 moved them to
``pyflink.datastream.formats.json`` / ``.csv``; as PyFlink before 2.0, this module still gives
them (the formats modules' own classes, not copies), so ``from pyflink.common.serialization
import CsvRowSerializationSchema`` keeps working.
"""

from streamflow.api.pyflink_names import BulkWriterFactory as BulkWriterFactory
from streamflow.api.pyflink_names import RowFieldExtractorSchema as RowFieldExtractorSchema

from ..connectors.file_sink import Encoder as Encoder
from ..connectors.serialization import ByteArraySchema as ByteArraySchema
from ..connectors.serialization import DeserializationSchema as DeserializationSchema
from ..connectors.serialization import JsonRowDeserializationSchema as JsonRowDeserializationSchema
from ..connectors.serialization import JsonRowSerializationSchema as JsonRowSerializationSchema
from ..connectors.serialization import SerializationSchema as SerializationSchema
from ..connectors.serialization import SimpleStringSchema as SimpleStringSchema
from ..datastream.formats.csv import CsvRowDeserializationSchema as CsvRowDeserializationSchema
from ..datastream.formats.csv import CsvRowSerializationSchema as CsvRowSerializationSchema

__all__ = [
    "BulkWriterFactory",
    "ByteArraySchema",
    "CsvRowDeserializationSchema",
    "CsvRowSerializationSchema",
    "DeserializationSchema",
    "Encoder",
    "JsonRowDeserializationSchema",
    "JsonRowSerializationSchema",
    "RowFieldExtractorSchema",
    "SerializationSchema",
    "SimpleStringSchema",
]
