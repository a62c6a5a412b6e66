"""The last of PyFlink's exported names: small interfaces, and clear refusals.

Every public name PyFlink 2.3 exports from the mirrored modules exists in streamflow
(``tests/test_pyflink_names.py``). Most are the real implementations. This module
holds the rest:

* interfaces a program subclasses or checks with ``isinstance``:
  :class:`KafkaTopicSelector`, :class:`RowFieldExtractorSchema`, :class:`Metric`
  (the base of the metric types user functions get), :class:`ExecutionConfig` (what
  ``env.get_config()`` returns is one);
* **refusals** (:func:`unsupported`): a class that exists, so an import succeeds and a
  program that only mentions the name still runs, but whose construction, and any
  attribute of the class (``FileCompactStrategy.builder()``), raises
  :class:`NotSupportedError` naming what is not supported, why, and what to use instead.
  Nothing is a silent stub.
"""

from __future__ import annotations

import abc
from typing import Any, NoReturn

from ..connectors.serialization import SerializationSchema
from ..errors import NotSupportedError
from .execution_config import ExecutionConfig as ExecutionConfig

__all__ = [
    "ExecutionConfig",
    "KafkaTopicSelector",
    "Metric",
    "NotSupportedError",
    "OperatorStateStore",
    "RowFieldExtractorSchema",
    "unsupported",
]


class _Refusing(type):
    """Metaclass of a refused name: constructing it, or reading any public attribute of the class
    (a static factory such as ``builder()``), raises :class:`NotSupportedError`."""

    _reason: str
    _qualified: str

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotSupportedError(f"{cls._qualified} is not supported by streamflow: {cls._reason}")

    def __getattr__(cls, name: str) -> NoReturn:
        if name.startswith("_"):
            raise AttributeError(name)
        raise NotSupportedError(f"{name} of {cls._qualified} is not supported by streamflow: {cls._reason}")


def unsupported(module: str, name: str, reason: str) -> type:
    """A class named ``name`` (as PyFlink's ``module.name``) that refuses to be used, with ``reason``."""
    return _Refusing(
        name,
        (),
        {
            "_reason": reason,
            "_qualified": f"{name} (PyFlink's {module})",
            "__module__": module,
            "__doc__": f"Not supported by streamflow: {reason}",
        },
    )


# ---------------------------------------------------------------- interfaces


class KafkaTopicSelector(abc.ABC):
    """PyFlink's topic selector for ``KafkaRecordSerializationSchema.builder().set_topic_selector``:
    ``apply(record) -> topic``. Instances are callable, as the sink calls its selector."""

    @abc.abstractmethod
    def apply(self, data: Any) -> str: ...

    def __call__(self, data: Any) -> str:
        return self.apply(data)


class RowFieldExtractorSchema(SerializationSchema):
    """Serializes one field of a ``Row`` (or tuple), which must be ``bytes``, as PyFlink's
    ``RowFieldExtractorSchema(field_index)`` (e.g. a Kafka key taken from a row). As Flink's
    (Java ``RowFieldExtractorSchema``): a ``None`` row or field is written as ``b""``, an index
    past the row's arity or a negative index is refused with Flink's message, and two schemas
    are equal (and hash alike) when they extract the same field."""

    def __init__(self, field_index: int) -> None:
        if field_index < 0:
            raise ValueError(f"Field index must be non-negative, got: {field_index}")
        self.field_index = field_index

    def serialize(self, value: Any) -> bytes:
        if value is None:
            return b""
        if self.field_index >= len(value):
            raise ValueError(f"Cannot access field {self.field_index} in Row with arity {len(value)}")
        field = value[self.field_index]
        if field is None:
            return b""
        if not isinstance(field, (bytes, bytearray)):
            raise TypeError(
                f"Field at index {self.field_index} must be of type bytes, but was "
                f"{type(field).__name__} (in {value!r:.100})"
            )
        return bytes(field)

    def serialize_batch(self, values: Any) -> list[bytes]:
        return [self.serialize(v) for v in values]

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.field_index == self.field_index

    def __hash__(self) -> int:
        return self.field_index

    def __repr__(self) -> str:
        return f"RowFieldExtractorSchema({self.field_index})"


class OperatorStateStore(abc.ABC):
    """PyFlink's interface for operator state: only broadcast state, ``get_broadcast_state``
    (a broadcast function's context gives it, ``ctx.get_broadcast_state(descriptor)``)."""

    @abc.abstractmethod
    def get_broadcast_state(self, state_descriptor: Any) -> Any: ...


class Metric(abc.ABC):  # noqa: B024 - a marker base, as PyFlink's
    """The base of the metric types (``Counter``, ``Gauge``, ``Meter``, ``Distribution``) a
    function registers on ``get_metrics_group()``; for ``isinstance`` checks."""

    @classmethod
    def __subclasshook__(cls, subclass: type) -> bool:
        return subclass.__module__ == "streamflow.runtime.metrics" and subclass.__name__ in _METRIC_TYPES


_METRIC_TYPES = {"Counter", "Gauge", "Meter", "Distribution"}


# ---------------------------------------------------------------- refusals

_NO_JVM = "it wraps an object of Flink's JVM, and streamflow runs without a JVM"
_FILES = (
    "streamflow's FileSink writes rows with an Encoder (bulk: only CsvBulkWriters.for_schema) and its "
    "FileSource reads files with a StreamFormat (CsvReaderFormat for CSV)"
)

AssignerWithPeriodicWatermarksWrapper = unsupported(
    "pyflink.common.watermark_strategy",
    "AssignerWithPeriodicWatermarksWrapper",
    f"{_NO_JVM} (Flink's legacy AssignerWithPeriodicWatermarks); use WatermarkStrategy"
    ".for_bounded_out_of_orderness(...).with_timestamp_assigner(...)",
)
CompletableFuture = unsupported(
    "pyflink.common",
    "CompletableFuture",
    f"{_NO_JVM} (a Java future); streamflow's JobClient methods are coroutines, e.g. "
    "await client.get_job_execution_result()",
)
JobID = unsupported(
    "pyflink.common", "JobID", f"{_NO_JVM}; streamflow's JobClient.get_job_id() returns the job's id as a str"
)
BulkWriterFactory = unsupported(
    "pyflink.common.serialization",
    "BulkWriterFactory",
    f"bulk formats (Parquet, ORC, Avro writers) need Flink's Java format jars; {_FILES}",
)
FlinkKafkaConsumer = unsupported(
    "pyflink.datastream.connectors.kafka",
    "FlinkKafkaConsumer",
    "the legacy Kafka consumer is a JVM connector; use KafkaSource.builder() "
    "(native, PyFlink's builder methods)",
)
FlinkKafkaProducer = unsupported(
    "pyflink.datastream.connectors.kafka",
    "FlinkKafkaProducer",
    "the legacy Kafka producer is a JVM connector; use KafkaSink.builder() "
    "(native, PyFlink's builder methods)",
)
Semantic = unsupported(
    "pyflink.datastream.connectors.kafka",
    "Semantic",
    "the delivery semantic of the legacy FlinkKafkaProducer; use KafkaSink.builder()"
    ".set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE / AT_LEAST_ONCE / NONE)",
)
CustomStateBackend = unsupported(
    "pyflink.datastream",
    "CustomStateBackend",
    f"{_NO_JVM} (a Java StateBackend); use HashMapStateBackend() or EmbeddedRocksDBStateBackend()",
)
StreamTransformer = unsupported(
    "pyflink.datastream.connectors.base",
    "StreamTransformer",
    f"{_NO_JVM} (a connector's pre-processing of a Java DataStream); streamflow's sinks are Python operators",
)
SupportsPreprocessing = unsupported(
    "pyflink.datastream.connectors.base",
    "SupportsPreprocessing",
    f"{_NO_JVM} (a connector's pre-processing of a Java DataStream); streamflow's sinks are Python operators",
)
# (BucketAssigner, FileEnumeratorProvider, FileSplitAssignerProvider are real: connectors/file_options.py;
# FileCompactStrategy, FileCompactor: connectors/file_compaction.py)
_FILE_NAMES = {
    "BulkFormat": "bulk formats for FileSource (Parquet, ORC, Avro readers need Flink's Java format jars)",
}
FILE_SYSTEM_REFUSALS = {
    name: unsupported(
        "pyflink.datastream.connectors.file_system", name, f"{what} is not implemented; {_FILES}"
    )
    for name, what in _FILE_NAMES.items()
}
