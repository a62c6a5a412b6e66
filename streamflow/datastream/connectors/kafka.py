"""PyFlink's ``pyflink.datastream.connectors.kafka``: re-exports of ``streamflow.connectors.kafka_*``."""

from streamflow.api.pyflink_names import FlinkKafkaConsumer as FlinkKafkaConsumer
from streamflow.api.pyflink_names import FlinkKafkaProducer as FlinkKafkaProducer
from streamflow.api.pyflink_names import KafkaTopicSelector as KafkaTopicSelector
from streamflow.api.pyflink_names import Semantic as Semantic

from ...connectors.kafka_common import KafkaDeadLetter as KafkaDeadLetter
from ...connectors.kafka_common import KafkaOffsetResetStrategy as KafkaOffsetResetStrategy
from ...connectors.kafka_common import KafkaOffsetsInitializer as KafkaOffsetsInitializer
from ...connectors.kafka_common import KafkaRecordDeserializationSchema as KafkaRecordDeserializationSchema
from ...connectors.kafka_common import KafkaTopicPartition as KafkaTopicPartition
from ...connectors.kafka_record_serialization import (
    KafkaRecordSerializationSchemaBuilder as KafkaRecordSerializationSchemaBuilder,
)
from ...connectors.kafka_sink import KafkaRecordSerializationSchema as KafkaRecordSerializationSchema
from ...connectors.kafka_sink import KafkaSink as KafkaSink
from ...connectors.kafka_sink import KafkaSinkBuilder as KafkaSinkBuilder
from ...connectors.kafka_source import KafkaSource as KafkaSource
from ...connectors.kafka_source import KafkaSourceBuilder as KafkaSourceBuilder

__all__ = [
    "FlinkKafkaConsumer",
    "FlinkKafkaProducer",
    "KafkaDeadLetter",
    "KafkaOffsetResetStrategy",
    "KafkaOffsetsInitializer",
    "KafkaRecordDeserializationSchema",
    "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder",
    "KafkaSink",
    "KafkaSinkBuilder",
    "KafkaSource",
    "KafkaSourceBuilder",
    "KafkaTopicPartition",
    "KafkaTopicSelector",
    "Semantic",
]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
