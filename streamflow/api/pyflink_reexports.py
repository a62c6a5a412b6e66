"""Names PyFlink's modules import from each other, importable from streamflow's mirrors too.

A program may import a name from a PyFlink module that only imports it itself (``from
pyflink.datastream.connectors.kafka import DeliveryGuarantee``, as Flink's own Kafka example
does). Each mirror module resolves such names lazily (PEP 562 ``__getattr__``) from the
streamflow module that exports them; the table is extracted from the apache-flink 2.3.0 wheel
(``scripts/extract_pyflink_names.py --imported``) and checked by ``tests/test_pyflink_names.py``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["IMPORTED", "reexports"]

IMPORTED: dict[str, dict[str, str]] = {
    "streamflow.common.job_client": {
        "CompletableFuture": "streamflow.common",
        "JobExecutionResult": "streamflow.common",
        "JobID": "streamflow.common",
        "JobStatus": "streamflow.common",
    },
    "streamflow.common.job_execution_result": {
        "JobID": "streamflow.common",
    },
    "streamflow.common.watermark_strategy": {
        "Duration": "streamflow.common",
    },
    "streamflow.datastream.async_data_stream": {
        "AsyncFunction": "streamflow.datastream",
        "AsyncFunctionDescriptor": "streamflow.datastream.functions",
        "AsyncRetryStrategy": "streamflow.datastream",
        "DataStream": "streamflow.datastream",
        "Time": "streamflow.common",
        "TypeInformation": "streamflow.common",
    },
    "streamflow.datastream.async_retry_strategies": {
        "AsyncRetryPredicate": "streamflow.datastream",
        "AsyncRetryStrategy": "streamflow.datastream",
    },
    "streamflow.datastream.checkpoint_config": {
        "CheckpointingMode": "streamflow.datastream",
        "Duration": "streamflow.common",
        "ExternalizedCheckpointRetention": "streamflow.datastream",
    },
    "streamflow.datastream.connectors.file_system": {
        "BulkWriterFactory": "streamflow.common.serialization",
        "Duration": "streamflow.common",
        "Encoder": "streamflow.common",
        "Sink": "streamflow.datastream.connectors",
        "SinkFunction": "streamflow.datastream",
        "Source": "streamflow.datastream.connectors",
        "StreamTransformer": "streamflow.datastream.connectors.base",
        "SupportsPreprocessing": "streamflow.datastream.connectors.base",
    },
    "streamflow.datastream.connectors.kafka": {
        "DeliveryGuarantee": "streamflow.datastream.connectors",
        "DeserializationSchema": "streamflow.common",
        "Row": "streamflow.common",
        "SerializationSchema": "streamflow.common",
        "Sink": "streamflow.datastream.connectors",
        "SinkFunction": "streamflow.datastream",
        "Source": "streamflow.datastream.connectors",
        "SourceFunction": "streamflow.datastream",
        "StreamTransformer": "streamflow.datastream.connectors.base",
        "SupportsPreprocessing": "streamflow.datastream.connectors.base",
        "TypeInformation": "streamflow.common",
        "Types": "streamflow.common",
    },
    "streamflow.datastream.connectors.number_seq": {
        "Source": "streamflow.datastream.connectors",
    },
    "streamflow.datastream.data_stream": {
        "AggregateFunction": "streamflow.datastream",
        "AggregatingStateDescriptor": "streamflow.datastream.state",
        "AllWindowFunction": "streamflow.datastream.functions",
        "AsyncFunctionDescriptor": "streamflow.datastream.functions",
        "BroadcastProcessFunction": "streamflow.datastream",
        "CoFlatMapFunction": "streamflow.datastream",
        "CoMapFunction": "streamflow.datastream",
        "CoProcessFunction": "streamflow.datastream",
        "CountSlidingWindowAssigner": "streamflow.datastream.window",
        "CountTumblingWindowAssigner": "streamflow.datastream.window",
        "CountWindowSerializer": "streamflow.datastream.window",
        "ExecutionConfig": "streamflow.common",
        "FilterFunction": "streamflow.datastream",
        "FlatMapFunction": "streamflow.datastream",
        "GlobalWindowSerializer": "streamflow.datastream.window",
        "KeySelector": "streamflow.datastream",
        "KeyedBroadcastProcessFunction": "streamflow.datastream",
        "KeyedCoProcessFunction": "streamflow.datastream",
        "KeyedProcessFunction": "streamflow.datastream",
        "ListStateDescriptor": "streamflow.datastream.state",
        "MapFunction": "streamflow.datastream",
        "MapStateDescriptor": "streamflow.datastream.state",
        "MergingWindowAssigner": "streamflow.datastream",
        "OutputTag": "streamflow.datastream",
        "Partitioner": "streamflow.datastream",
        "ProcessAllWindowFunction": "streamflow.datastream.functions",
        "ProcessFunction": "streamflow.datastream",
        "ProcessWindowFunction": "streamflow.datastream",
        "ReduceFunction": "streamflow.datastream",
        "ReducingState": "streamflow.datastream.state",
        "ReducingStateDescriptor": "streamflow.datastream.state",
        "Row": "streamflow.common",
        "RuntimeContext": "streamflow.datastream",
        "Sink": "streamflow.datastream.connectors",
        "SinkFunction": "streamflow.datastream",
        "SlotSharingGroup": "streamflow.datastream",
        "TimeWindowSerializer": "streamflow.datastream.window",
        "TimestampAssigner": "streamflow.common.watermark_strategy",
        "Trigger": "streamflow.datastream",
        "TypeInformation": "streamflow.common",
        "Types": "streamflow.common",
        "WatermarkStrategy": "streamflow.common",
        "WindowAssigner": "streamflow.datastream",
        "WindowFunction": "streamflow.datastream",
    },
    "streamflow.datastream.formats.csv": {
        "BulkWriterFactory": "streamflow.common.serialization",
        "DeserializationSchema": "streamflow.common",
        "SerializationSchema": "streamflow.common",
        "StreamFormat": "streamflow.datastream.connectors.file_system",
        "TypeInformation": "streamflow.common",
    },
    "streamflow.datastream.formats.json": {
        "DeserializationSchema": "streamflow.common",
        "SerializationSchema": "streamflow.common",
        "TypeInformation": "streamflow.common",
    },
    "streamflow.datastream.functions": {
        "AggregatingState": "streamflow.datastream.state",
        "AggregatingStateDescriptor": "streamflow.datastream.state",
        "BroadcastState": "streamflow.datastream.state",
        "ListState": "streamflow.datastream.state",
        "ListStateDescriptor": "streamflow.datastream.state",
        "MapState": "streamflow.datastream.state",
        "MapStateDescriptor": "streamflow.datastream.state",
        "MetricGroup": "streamflow.metrics",
        "ReadOnlyBroadcastState": "streamflow.datastream.state",
        "ReducingState": "streamflow.datastream.state",
        "ReducingStateDescriptor": "streamflow.datastream.state",
        "TimeDomain": "streamflow.datastream",
        "ValueState": "streamflow.datastream.state",
        "ValueStateDescriptor": "streamflow.datastream.state",
    },
    "streamflow.datastream.output_tag": {
        "TypeInformation": "streamflow.common",
        "Types": "streamflow.common",
    },
    "streamflow.datastream.state": {
        "Duration": "streamflow.common",
        "Time": "streamflow.common",
        "TypeInformation": "streamflow.common",
        "Types": "streamflow.common",
    },
    "streamflow.datastream.stream_execution_environment": {
        "CheckpointConfig": "streamflow.datastream",
        "CheckpointingMode": "streamflow.datastream",
        "Configuration": "streamflow.common",
        "DataStream": "streamflow.datastream",
        "ExecutionConfig": "streamflow.common",
        "JobClient": "streamflow.common",
        "JobExecutionResult": "streamflow.common",
        "RuntimeExecutionMode": "streamflow.datastream",
        "SlotSharingGroup": "streamflow.datastream",
        "Source": "streamflow.datastream.connectors",
        "SourceFunction": "streamflow.datastream",
        "TypeInformation": "streamflow.common",
        "Types": "streamflow.common",
        "WatermarkStrategy": "streamflow.common",
    },
    "streamflow.datastream.window": {
        "MetricGroup": "streamflow.metrics",
        "OutputTag": "streamflow.datastream",
        "ReduceFunction": "streamflow.datastream",
        "ReducingState": "streamflow.datastream.state",
        "ReducingStateDescriptor": "streamflow.datastream.state",
        "RuntimeContext": "streamflow.datastream",
        "Time": "streamflow.common",
        "TypeSerializer": "streamflow.common",
        "Types": "streamflow.common",
        "ValueStateDescriptor": "streamflow.datastream.state",
    },
}


def reexports(module: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of mirror ``module``: its table's names, else ``AttributeError``."""
    table = IMPORTED.get(module, {})

    def __getattr__(name: str) -> Any:
        home = table.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    return __getattr__
