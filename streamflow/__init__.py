"""streamflow: stream processing for Python on asyncio, with PyFlink's DataStream API."""

from .api.datastream import DataStream as DataStream
from .api.datastream import DataStreamSink as DataStreamSink
from .api.datastream import KeyedStream as KeyedStream
from .api.environment import StreamExecutionEnvironment as StreamExecutionEnvironment
from .clock import Clock as Clock
from .clock import SystemClock as SystemClock
from .connectors.base import Sink as Sink
from .connectors.base import Source as Source
from .connectors.base import SourceReader as SourceReader
from .connectors.sinks import CollectSink as CollectSink
from .connectors.sinks import PrintSink as PrintSink
from .eventtime import TimestampAssigner as TimestampAssigner
from .eventtime import WatermarkGenerator as WatermarkGenerator
from .eventtime import WatermarkStrategy as WatermarkStrategy
from .functions import AggregateFunction as AggregateFunction
from .functions import FilterFunction as FilterFunction
from .functions import FlatMapFunction as FlatMapFunction
from .functions import Function as Function
from .functions import KeyedProcessFunction as KeyedProcessFunction
from .functions import KeySelector as KeySelector
from .functions import MapFunction as MapFunction
from .functions import OutputTag as OutputTag
from .functions import ProcessFunction as ProcessFunction
from .functions import ProcessWindowFunction as ProcessWindowFunction
from .functions import ReduceFunction as ReduceFunction
from .functions import SinkFunction as SinkFunction
from .functions import TimeDomain as TimeDomain
from .graph import GraphError as GraphError
from .runtime.context import RuntimeContext as RuntimeContext
from .runtime.events import MAX_WATERMARK as MAX_WATERMARK
from .runtime.events import MIN_WATERMARK as MIN_WATERMARK
from .runtime.job import JobClient as JobClient
from .runtime.job import JobExecutionResult as JobExecutionResult
from .runtime.job import JobStatus as JobStatus
from .state.keyed import AggregatingStateDescriptor as AggregatingStateDescriptor
from .state.keyed import ListStateDescriptor as ListStateDescriptor
from .state.keyed import MapStateDescriptor as MapStateDescriptor
from .state.keyed import ReducingStateDescriptor as ReducingStateDescriptor
from .state.keyed import ValueStateDescriptor as ValueStateDescriptor

__version__ = "0.1.0"
