"""PyFlink's ``pyflink.common.serialization``: re-exports of ``streamflow.connectors.serialization``
and the file sink's ``Encoder``."""

from ..connectors.file_sink import Encoder as Encoder
from ..connectors.serialization import ByteArraySchema as ByteArraySchema
from ..connectors.serialization import DeserializationSchema as DeserializationSchema
from ..connectors.serialization import JsonRowDeserializationSchema as JsonRowDeserializationSchema
from ..connectors.serialization import JsonRowSerializationSchema as JsonRowSerializationSchema
from ..connectors.serialization import SerializationSchema as SerializationSchema
from ..connectors.serialization import SimpleStringSchema as SimpleStringSchema

__all__ = [
    "ByteArraySchema",
    "DeserializationSchema",
    "Encoder",
    "JsonRowDeserializationSchema",
    "JsonRowSerializationSchema",
    "SerializationSchema",
    "SimpleStringSchema",
]
