"""PyFlink's ``pyflink.common.serialization``: re-exports of ``streamflow.connectors.serialization``
and the file sink's ``Encoder``."""

from streamflow.api.pyflink_names import BulkWriterFactory as BulkWriterFactory
from streamflow.api.pyflink_names import RowFieldExtractorSchema as RowFieldExtractorSchema

from ..connectors.file_sink import Encoder as Encoder
from ..connectors.serialization import ByteArraySchema as ByteArraySchema
from ..connectors.serialization import DeserializationSchema as DeserializationSchema
from ..connectors.serialization import JsonRowDeserializationSchema as JsonRowDeserializationSchema
from ..connectors.serialization import JsonRowSerializationSchema as JsonRowSerializationSchema
from ..connectors.serialization import SerializationSchema as SerializationSchema
from ..connectors.serialization import SimpleStringSchema as SimpleStringSchema

__all__ = [
    "BulkWriterFactory",
    "ByteArraySchema",
    "DeserializationSchema",
    "Encoder",
    "JsonRowDeserializationSchema",
    "JsonRowSerializationSchema",
    "RowFieldExtractorSchema",
    "SerializationSchema",
    "SimpleStringSchema",
]
