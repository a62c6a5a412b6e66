"""PyFlink's ``pyflink.datastream.connectors`` mirror.

PyFlink also sets the connector classes on this package "for backward
compatibility" (its ``_install()``), so ``from pyflink.datastream.connectors
import StreamingFileSink`` works; the ones streamflow has resolve here, lazily
(importing this package does not import the Kafka client).
"""

from importlib import import_module
from typing import Any

from streamflow.connectors.base import Sink as Sink
from streamflow.connectors.base import Source as Source
from streamflow.connectors.kafka_common import DeliveryGuarantee as DeliveryGuarantee

__all__ = ["DeliveryGuarantee", "Sink", "Source"]

_INSTALLED = {  # PyFlink's _install(), apart from the JVM-only connectors (below)
    "NumberSequenceSource": "number_seq",
    "KafkaSource": "kafka",
    "FlinkKafkaConsumer": "kafka",
    "FlinkKafkaProducer": "kafka",
    "Semantic": "kafka",
    "BucketAssigner": "file_system",
    "FileEnumeratorProvider": "file_system",
    "FileSplitAssignerProvider": "file_system",
    "FileSink": "file_system",
    "FileSource": "file_system",
    "FileSourceBuilder": "file_system",
    "OutputFileConfig": "file_system",
    "RollingPolicy": "file_system",
    "StreamFormat": "file_system",
    "StreamingFileSink": "file_system",
}


#: the rest of PyFlink's _install(): connectors that exist only as Java code
_JVM_ONLY = {
    **dict.fromkeys(("JdbcSink", "JdbcConnectionOptions", "JdbcExecutionOptions"), "jdbc"),
    **dict.fromkeys(("PulsarSource", "PulsarSourceBuilder", "StartCursor", "StopCursor"), "pulsar"),
    **dict.fromkeys(("RMQSource", "RMQSink", "RMQConnectionConfig"), "rabbitmq"),
    **dict.fromkeys(
        (
            "DynamicKafkaSource",
            "DynamicKafkaSourceBuilder",
            "KafkaMetadataService",
            "KafkaRecordDeserializationSchema",
            "KafkaStreamSetSubscriber",
            "KafkaStreamSubscriber",
            "StreamPatternSubscriber",
            "SingleClusterTopicMetadataService",
        ),
        "dynamic_kafka",
    ),
}


def __getattr__(name: str) -> Any:
    module = _INSTALLED.get(name)
    if module is None:
        connector = _JVM_ONLY.get(name)
        if connector is not None:
            raise AttributeError(
                f"module {__name__!r} has no attribute {name!r}: PyFlink's {connector} connector "
                "is Java code (a JVM connector jar); streamflow has no native counterpart"
            )
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
