"""PyFlink's ``pyflink.datastream`` mirror: thin re-exports of streamflow's implementations."""

from streamflow.api.broadcast import BroadcastConnectedStream as BroadcastConnectedStream
from streamflow.api.broadcast import BroadcastStream as BroadcastStream
from streamflow.api.connected import ConnectedStreams as ConnectedStreams
from streamflow.api.datastream import DataStream as DataStream
from streamflow.api.datastream import DataStreamSink as DataStreamSink
from streamflow.api.datastream import KeyedStream as KeyedStream
from streamflow.api.environment import StreamExecutionEnvironment as StreamExecutionEnvironment
from streamflow.api.pyflink_names import CustomStateBackend as CustomStateBackend
from streamflow.api.surface import SlotSharingGroup as SlotSharingGroup
from streamflow.api.windowed import WindowedStream as WindowedStream
from streamflow.async_io import AsyncBatchFunction as AsyncBatchFunction
from streamflow.async_io import AsyncDataStream as AsyncDataStream
from streamflow.async_io import AsyncFunction as AsyncFunction
from streamflow.async_io import AsyncRetryPredicate as AsyncRetryPredicate
from streamflow.async_io import AsyncRetryStrategy as AsyncRetryStrategy
from streamflow.checkpoint.config import CheckpointConfig as CheckpointConfig
from streamflow.checkpoint.config import CheckpointingMode as CheckpointingMode
from streamflow.checkpoint.storages import CheckpointStorage as CheckpointStorage
from streamflow.checkpoint.storages import CustomCheckpointStorage as CustomCheckpointStorage
from streamflow.checkpoint.storages import (
    ExternalizedCheckpointRetention as ExternalizedCheckpointCleanup,  # PyFlink 1.x's name
)
from streamflow.checkpoint.storages import ExternalizedCheckpointRetention as ExternalizedCheckpointRetention
from streamflow.checkpoint.storages import FileSystemCheckpointStorage as FileSystemCheckpointStorage
from streamflow.checkpoint.storages import JobManagerCheckpointStorage as JobManagerCheckpointStorage
from streamflow.configuration import MemorySize as MemorySize
from streamflow.execution_mode import RuntimeExecutionMode as RuntimeExecutionMode
from streamflow.execution_mode import TimeCharacteristic as TimeCharacteristic
from streamflow.functions import AggregateFunction as AggregateFunction
from streamflow.functions import AllWindowFunction as AllWindowFunction
from streamflow.functions import BroadcastProcessFunction as BroadcastProcessFunction
from streamflow.functions import CoFlatMapFunction as CoFlatMapFunction
from streamflow.functions import CoMapFunction as CoMapFunction
from streamflow.functions import CoProcessFunction as CoProcessFunction
from streamflow.functions import FilterFunction as FilterFunction
from streamflow.functions import FlatMapFunction as FlatMapFunction
from streamflow.functions import KeyedBroadcastProcessFunction as KeyedBroadcastProcessFunction
from streamflow.functions import KeyedCoProcessFunction as KeyedCoProcessFunction
from streamflow.functions import KeyedProcessFunction as KeyedProcessFunction
from streamflow.functions import KeySelector as KeySelector
from streamflow.functions import MapFunction as MapFunction
from streamflow.functions import OutputTag as OutputTag
from streamflow.functions import Partitioner as Partitioner
from streamflow.functions import ProcessAllWindowFunction as ProcessAllWindowFunction
from streamflow.functions import ProcessFunction as ProcessFunction
from streamflow.functions import ProcessWindowFunction as ProcessWindowFunction
from streamflow.functions import ReduceFunction as ReduceFunction
from streamflow.functions import SinkFunction as SinkFunction
from streamflow.functions import SourceFunction as SourceFunction
from streamflow.functions import TimeDomain as TimeDomain
from streamflow.functions import WindowFunction as WindowFunction
from streamflow.runtime.context import RuntimeContext as RuntimeContext
from streamflow.runtime.timers import TimerService as TimerService
from streamflow.state.backends import EmbeddedRocksDBStateBackend as EmbeddedRocksDBStateBackend
from streamflow.state.backends import HashMapStateBackend as HashMapStateBackend
from streamflow.state.backends import PredefinedOptions as PredefinedOptions
from streamflow.state.backends import StateBackend as StateBackend
from streamflow.state.ttl import StateTtlConfig as StateTtlConfig
from streamflow.windowing.assigners import MergingWindowAssigner as MergingWindowAssigner
from streamflow.windowing.assigners import WindowAssigner as WindowAssigner
from streamflow.windowing.count import CountWindow as CountWindow
from streamflow.windowing.triggers import Trigger as Trigger
from streamflow.windowing.triggers import TriggerResult as TriggerResult
from streamflow.windowing.windows import GlobalWindow as GlobalWindow
from streamflow.windowing.windows import TimeWindow as TimeWindow
from streamflow.windowing.windows import Window as Window

__all__ = [
    "AggregateFunction",
    "AllWindowFunction",
    "AsyncBatchFunction",
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "BroadcastConnectedStream",
    "BroadcastProcessFunction",
    "BroadcastStream",
    "CheckpointConfig",
    "CheckpointStorage",
    "CheckpointingMode",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "ConnectedStreams",
    "CountWindow",
    "CustomCheckpointStorage",
    "CustomStateBackend",
    "DataStream",
    "DataStreamSink",
    "EmbeddedRocksDBStateBackend",
    "ExternalizedCheckpointCleanup",
    "ExternalizedCheckpointRetention",
    "FileSystemCheckpointStorage",
    "FilterFunction",
    "FlatMapFunction",
    "GlobalWindow",
    "HashMapStateBackend",
    "JobManagerCheckpointStorage",
    "KeySelector",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStream",
    "MapFunction",
    "MemorySize",
    "MergingWindowAssigner",
    "OutputTag",
    "Partitioner",
    "PredefinedOptions",
    "ProcessAllWindowFunction",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "SinkFunction",
    "SlotSharingGroup",
    "SourceFunction",
    "StateBackend",
    "StateTtlConfig",
    "StreamExecutionEnvironment",
    "TimeCharacteristic",
    "TimeDomain",
    "TimeWindow",
    "TimerService",
    "Trigger",
    "TriggerResult",
    "Window",
    "WindowAssigner",
    "WindowFunction",
    "WindowedStream",
]
