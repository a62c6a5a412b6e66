"""PyFlink's ``pyflink.datastream.functions``: re-exports of ``streamflow.functions``."""

from streamflow.api.joins import CoGroupFunction as CoGroupFunction
from streamflow.api.joins import FlatJoinFunction as FlatJoinFunction
from streamflow.api.joins import JoinFunction as JoinFunction
from streamflow.api.joins import ProcessJoinFunction as ProcessJoinFunction
from streamflow.async_io import AsyncBatchFunction as AsyncBatchFunction
from streamflow.async_io import AsyncFunction as AsyncFunction
from streamflow.async_io import AsyncFunctionDescriptor as AsyncFunctionDescriptor
from streamflow.async_io import AsyncRetryPredicate as AsyncRetryPredicate
from streamflow.async_io import AsyncRetryStrategy as AsyncRetryStrategy
from streamflow.functions import AggregateFunction as AggregateFunction
from streamflow.functions import AllWindowFunction as AllWindowFunction
from streamflow.functions import BaseBroadcastProcessFunction as BaseBroadcastProcessFunction
from streamflow.functions import BroadcastProcessFunction as BroadcastProcessFunction
from streamflow.functions import CoFlatMapFunction as CoFlatMapFunction
from streamflow.functions import CoMapFunction as CoMapFunction
from streamflow.functions import CoProcessFunction as CoProcessFunction
from streamflow.functions import FilterFunction as FilterFunction
from streamflow.functions import FlatMapFunction as FlatMapFunction
from streamflow.functions import Function as Function
from streamflow.functions import KeyedBroadcastProcessFunction as KeyedBroadcastProcessFunction
from streamflow.functions import KeyedCoProcessFunction as KeyedCoProcessFunction
from streamflow.functions import KeyedProcessFunction as KeyedProcessFunction
from streamflow.functions import KeySelector as KeySelector
from streamflow.functions import MapFunction as MapFunction
from streamflow.functions import Partitioner as Partitioner
from streamflow.functions import ProcessAllWindowFunction as ProcessAllWindowFunction
from streamflow.functions import ProcessFunction as ProcessFunction
from streamflow.functions import ProcessWindowFunction as ProcessWindowFunction
from streamflow.functions import ReduceFunction as ReduceFunction
from streamflow.functions import SinkFunction as SinkFunction
from streamflow.functions import SourceFunction as SourceFunction
from streamflow.functions import WindowFunction as WindowFunction
from streamflow.runtime.context import RuntimeContext as RuntimeContext
from streamflow.runtime.timers import TimerService as TimerService

__all__ = [
    "AggregateFunction",
    "AllWindowFunction",
    "AsyncBatchFunction",
    "AsyncFunction",
    "AsyncFunctionDescriptor",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "CoFlatMapFunction",
    "CoGroupFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "FilterFunction",
    "FlatJoinFunction",
    "FlatMapFunction",
    "Function",
    "JoinFunction",
    "KeySelector",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "MapFunction",
    "Partitioner",
    "ProcessAllWindowFunction",
    "ProcessFunction",
    "ProcessJoinFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "RuntimeContext",
    "SinkFunction",
    "SourceFunction",
    "TimerService",
    "WindowFunction",
]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
