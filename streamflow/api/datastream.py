"""``DataStream`` and ``KeyedStream``: PyFlink's DataStream API over the logical graph.

Sinks and collecting (``sink_to``, ``print``, ``execute_and_collect``) and ``DataStreamSink``
are in ``stream_ends.py`` (``DataStreamSink`` is re-exported here).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..functions import (
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    OutputTag,
    ProcessFunction,
    ReduceFunction,
)
from ..graph import Chaining, Edge, GraphError, Partitioning, StreamNode
from ..runtime.async_functions import AsyncUserFunctionOperator
from ..runtime.basic_operators import (
    FilterOperator,
    FlatMapOperator,
    MapOperator,
    UserFunctionOperator,
    is_async,
    resolve_function,
)
from ..runtime.factory import OperatorFactory
from ..runtime.keyed_operators import KeyedFunctionOperator, aggregation
from ..runtime.operator import StreamOperator
from ..runtime.process_operators import KeyedProcessOperator, ProcessOperator
from ..types.row import Row
from .batch import batch_watermarks, is_batch, reduce_operator_class
from .stream_ends import DataStreamSink as DataStreamSink
from .stream_ends import StreamEnds
from .surface import CloseableIterator, DataStreamSurface, KeyedStreamRefusals, OperatorSettingsRefusals
from .typed import side_converted, typed, typed_key_selector, with_output_type

if TYPE_CHECKING:
    from ..eventtime import WatermarkStrategy
    from ..windowing.assigners import WindowAssigner
    from .environment import StreamExecutionEnvironment
    from .windowed import WindowedStream

_log = logging.getLogger(__name__)


class DataStream(DataStreamSurface, StreamEnds):
    """A stream of records; every call appends to the job's logical graph."""

    _type_info: Any = None  # the declared record type (api/typed.py); None: any Python object

    def __init__(self, env: StreamExecutionEnvironment, inputs: list[tuple[StreamNode, str | None]]):
        self._env = env
        self._inputs = inputs

    # -- node properties -----------------------------------------------------
    @property
    def _node(self) -> StreamNode:
        if len(self._inputs) != 1 or self._inputs[0][1] is not None:
            raise GraphError("name/uid/parallelism apply to an operator, not to a union or side output")
        return self._inputs[0][0]

    def name(self, name: str) -> DataStream:
        self._node.name = name
        return self

    def get_name(self) -> str:
        return self._node.name

    def uid(self, uid: str) -> DataStream:
        """A stable id: state in checkpoints is matched to operators by uid."""
        if not uid:
            raise ValueError("uid must be a non-empty string")
        self._node.uid = uid
        return self

    def set_parallelism(self, parallelism: int) -> DataStream:
        if parallelism < 1:
            raise ValueError(f"parallelism must be >= 1, got {parallelism}")
        if parallelism != 1 and not self._node.can_be_parallel():
            # Flink's OperatorValidationUtils.validateParallelism(parallelism, canBeParallel=false)
            raise ValueError(
                f"The parallelism of non parallel operator must be 1: {self._node.name!r} got {parallelism}"
            )
        self._node.parallelism = parallelism
        return self

    def set_max_parallelism(self, max_parallelism: int) -> DataStream:
        # Flink's OperatorValidationUtils.validateMaxParallelism: refused at the call
        if max_parallelism < 1:
            raise ValueError(f"The maximum parallelism must be greater than 0, got {max_parallelism}")
        if max_parallelism > 32768:
            raise ValueError(
                f"The maximum parallelism must be smaller than or equal to 32768, got {max_parallelism}"
            )
        self._node.max_parallelism = max_parallelism
        return self

    def disable_chaining(self) -> DataStream:
        self._node.chaining = Chaining.NEVER
        return self

    def start_new_chain(self) -> DataStream:
        self._node.chaining = Chaining.HEAD
        return self

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._env

    # -- building blocks -----------------------------------------------------
    def _edges(self, partitioning: Partitioning = Partitioning.FORWARD, **kw: Any) -> list[Edge]:
        return [Edge(node, partitioning, tag, **kw) for node, tag in self._inputs]

    def _add(
        self,
        name: str,
        factory: OperatorFactory,
        edges: list[Edge] | None = None,
        *,
        keyed: bool = False,
        is_sink: bool = False,
    ) -> StreamNode:
        return self._env._graph.add(
            name, factory, inputs=edges or self._edges(), keyed=keyed, is_sink=is_sink
        )

    def _one_input(self, name: str, factory: OperatorFactory) -> DataStream:
        return DataStream(self._env, [(self._add(name, factory), None)])

    # -- transformations -----------------------------------------------------
    def map(
        self,
        func: MapFunction | Callable[[Any], Any],
        output_type: Any = None,
        *,
        concurrency: int | None = None,
    ) -> DataStream:
        resolve_function(func, "map", "map()")
        func = with_output_type(func, "map", output_type)
        factory = OperatorFactory("Map", _user_function(MapOperator, "Map", "map", concurrency), func)
        return typed(self._one_input("Map", factory), output_type)

    def flat_map(
        self,
        func: FlatMapFunction | Callable[[Any], Any],
        output_type: Any = None,
        *,
        concurrency: int | None = None,
    ) -> DataStream:
        resolve_function(func, "flat_map", "flat_map()")
        func = with_output_type(func, "flat_map", output_type)
        factory = OperatorFactory(
            "FlatMap", _user_function(FlatMapOperator, "FlatMap", "flat_map", concurrency), func
        )
        return typed(self._one_input("FlatMap", factory), output_type)

    def filter(
        self, func: FilterFunction | Callable[[Any], Any], *, concurrency: int | None = None
    ) -> DataStream:
        resolve_function(func, "filter", "filter()")
        build = _user_function(FilterOperator, "Filter", "filter", concurrency)
        factory = OperatorFactory("Filter", build, func)
        return typed(self._one_input("Filter", factory), self._type_info)

    def process(self, func: ProcessFunction | Callable[..., Any], output_type: Any = None) -> DataStream:
        resolve_function(func, "process_element", "process()")
        func = with_output_type(func, "process", output_type)
        factory = OperatorFactory("Process", lambda f: ProcessOperator("Process", f), func)
        return typed(self._one_input("Process", factory), output_type)

    def assign_timestamps_and_watermarks(self, watermark_strategy: WatermarkStrategy) -> DataStream:
        alignment = getattr(watermark_strategy, "alignment", None)
        if alignment is not None:
            _log.warning(
                "assign_timestamps_and_watermarks(): watermark alignment %r is ignored, as in Flink: "
                "it paces sources, so give the strategy to from_source()",
                alignment[0],
            )
        return self._assign_timestamps(watermark_strategy)

    def _assign_timestamps(self, watermark_strategy: WatermarkStrategy) -> DataStream:
        from ..runtime.timestamps import TimestampsAndWatermarksOperator

        env = self._env
        name = "Timestamps/Watermarks"

        def build(strategy: Any) -> TimestampsAndWatermarksOperator:
            # batch execution: timestamps only, event time jumps to the end (api/batch.py); the
            # interval is the one set when the job runs, as Flink reads it in open()
            strategy = batch_watermarks(strategy) if is_batch(env) else strategy
            return TimestampsAndWatermarksOperator(name, strategy, env.get_auto_watermark_interval())

        stream = self._one_input(name, OperatorFactory(name, build, watermark_strategy))
        # Flink: "match parallelism to input, to have a 1:1 source -> timestamps/watermarks
        # relationship and chain" (DataStream#assignTimestampsAndWatermarks); a union or a
        # partitioned stream has its first input's parallelism, as Flink's transformations do
        stream._node.parallelism_of = self._inputs[0][0]
        return typed(stream, self._type_info)

    def key_by(self, key_selector: KeySelector | Callable[[Any], Any], key_type: Any = None) -> KeyedStream:
        selector = typed_key_selector(resolve_function(key_selector, "get_key", "key_by()"), key_type)
        return typed(KeyedStream(self._env, self._inputs, selector), self._type_info)

    def union(self, *streams: DataStream) -> DataStream:
        inputs = list(self._inputs)
        for s in streams:
            if s._env is not self._env:
                raise GraphError("union() of streams from different environments")
            other = s._type_info
            if self._type_info is not None and other is not None and other != self._type_info:
                # Flink's DataStream.union; an undeclared (pickled) type is not compared
                raise ValueError(f"Cannot union streams of different types: {self._type_info} and {other}")
            inputs.extend(s._inputs)
        return typed(_Union(self._env, inputs, [self, *streams]), self._type_info)

    def connect(self, ds: Any) -> Any:
        """Two streams into one two-input operator (co-map, co-flat-map, co-process); with a
        ``BroadcastStream``, the broadcast state pattern (``api/broadcast.py``)."""
        from .broadcast import BroadcastConnectedStream, BroadcastStream
        from .connected import ConnectedStreams

        if isinstance(ds, BroadcastStream):
            return BroadcastConnectedStream(self, ds)

        if ds._env is not self._env:
            raise GraphError("connect() of streams from different environments")
        return ConnectedStreams(self, ds)

    def _partitioned(self, partitioning: Partitioning, **edge: Any) -> DataStream:
        return _Partitioned(self, partitioning, **edge)

    def rebalance(self) -> DataStream:
        return _Partitioned(self, Partitioning.REBALANCE)

    def broadcast(
        self, broadcast_state_descriptor: Any = None, *other_broadcast_state_descriptors: Any
    ) -> Any:
        """Every record to every subtask of the next operator; with ``MapStateDescriptor``s,
        a ``BroadcastStream`` for the broadcast state pattern (``connect()`` it)."""
        broadcast_state_descriptors = (
            () if broadcast_state_descriptor is None else (broadcast_state_descriptor,)
        ) + other_broadcast_state_descriptors
        if broadcast_state_descriptors:
            from .broadcast import BroadcastStream

            descriptors = broadcast_state_descriptors
            if len(descriptors) == 1 and isinstance(descriptors[0], (list, tuple)):
                descriptors = tuple(descriptors[0])
            return BroadcastStream(self, list(descriptors))
        return _Partitioned(self, Partitioning.BROADCAST)

    def forward(self) -> DataStream:
        return _Partitioned(self, Partitioning.FORWARD)

    def get_side_output(self, output_tag: OutputTag) -> DataStream:
        # the stream takes the tag's type (PyFlink: ``OutputTag(tag_id, type_info)``); one id, one
        # type (Flink's SingleOutputStreamOperator#getSideOutput refuses a second type)
        node, tag_id = self._node, output_tag.tag_id
        side_converted(node, tag_id, output_tag.type_info)  # its records take the tag's type
        requested = node.requested_side_outputs.setdefault(tag_id, output_tag.type_info)
        if requested != output_tag.type_info:
            raise GraphError(
                f"A side output with a matching id ({tag_id!r}) was already requested with a "
                f"different type ({requested} on {node!r}, now {output_tag.type_info}). This is not "
                "allowed, side output ids need to be unique."
            )
        return typed(DataStream(self._env, [(self._node, output_tag.tag_id)]), output_tag.type_info)


class _Partitioned(DataStream):
    """A stream whose next consumer reads it with an explicit partitioning."""

    def __init__(self, stream: DataStream, partitioning: Partitioning, **edge: Any) -> None:
        super().__init__(stream._env, stream._inputs)
        self._partitioning = partitioning
        self._edge = edge  # key_selector and partitioner of a custom partitioning
        self._type_info = stream._type_info

    def _edges(self, partitioning: Partitioning = Partitioning.FORWARD, **kw: Any) -> list[Edge]:
        return [Edge(n, self._partitioning, t, explicit=True, **self._edge, **kw) for n, t in self._inputs]

    @property
    def _node(self) -> StreamNode:
        # a partitioning makes no operator (PyFlink: the Java DataStream has no name()/uid())
        raise GraphError(
            f"{self._partitioning.value} partitioning makes no operator: set name/uid/parallelism "
            "on the operator before it or on the one after it"
        )


class SourceStream(DataStream):
    """What ``from_source()`` returns: the records come from the last node it appended (the
    watermark strategy's operator, the conversion to the declared type), which in Flink run inside
    the source operator; so the stream's name, uid, parallelism, chaining and side outputs (the
    source's ``DEAD_LETTER``) are the source's, as on PyFlink's source stream."""

    def __init__(self, stream: DataStream, source: StreamNode) -> None:
        super().__init__(stream._env, stream._inputs)
        self._type_info = stream._type_info
        self._source = source

    @property
    def _node(self) -> StreamNode:
        return self._source


class _Union(DataStream):
    """``a.union(b, ...)``: each input keeps its own partitioning (a keyed input stays key-hashed)."""

    def __init__(
        self,
        env: StreamExecutionEnvironment,
        inputs: list[tuple[StreamNode, str | None]],
        streams: list[DataStream],
    ) -> None:
        super().__init__(env, inputs)
        self._streams = streams

    def _edges(self, partitioning: Partitioning = Partitioning.FORWARD, **kw: Any) -> list[Edge]:
        return [edge for stream in self._streams for edge in stream._edges(partitioning, **kw)]


def _user_function(
    sync: type[UserFunctionOperator], name: str, method: str, concurrency: int | None
) -> Callable[[Any], StreamOperator]:
    """The operator of one subtask's copy of a map/filter/flat_map function: an ``async def``
    one runs on the AsyncWaitOperator's queue (``runtime/async_functions.py``)."""

    def build(function: Any) -> StreamOperator:
        if is_async(resolve_function(function, method, name)):
            return AsyncUserFunctionOperator(name, function, method, concurrency)
        return sync(name, function, concurrency)

    return build


class KeyedStream(KeyedStreamRefusals, OperatorSettingsRefusals, DataStream):
    """A stream partitioned by key: state and timers are scoped to the current key."""

    class AccumulateType(enum.Enum):
        """PyFlink's names of the rolling aggregations (``min``, ``max``, ``min_by``, ...)."""

        MIN = 1
        MAX = 2
        MIN_BY = 3
        MAX_BY = 4
        SUM = 5

    def __init__(
        self,
        env: StreamExecutionEnvironment,
        inputs: list[tuple[StreamNode, str | None]],
        key_selector: Callable[[Any], Any],
    ) -> None:
        super().__init__(env, inputs)
        self.key_selector = key_selector

    def _edges(self, partitioning: Partitioning = Partitioning.FORWARD, **kw: Any) -> list[Edge]:
        return [Edge(n, Partitioning.HASH, t, key_selector=self.key_selector, **kw) for n, t in self._inputs]

    def _keyed(self, name: str, factory: OperatorFactory) -> DataStream:
        # keyed reduce/aggregations keep the input's type; process() and windows re-type their result
        return typed(DataStream(self._env, [(self._add(name, factory, keyed=True), None)]), self._type_info)

    def get_key_selector(self) -> Callable[[Any], Any]:
        return self.key_selector

    def execute_and_collect(
        self, job_execution_name: str = "collect", limit: int | None = None
    ) -> CloseableIterator | list[Any]:
        """As PyFlink's: a keyed stream's records come as ``Row(f0=key, f1=record)``."""
        key_of = self.key_selector
        return (
            DataStream(self._env, self._inputs)
            .map(lambda v: Row(f0=key_of(v), f1=v))
            .set_parallelism(1)  # chained to the collect sink (one subtask, as Flink's)
            .execute_and_collect(job_execution_name, limit)
        )

    # -- key_by() makes no operator: operator settings are refused, as PyFlink does --------
    def _refuse(self, what: str) -> GraphError:
        return GraphError(
            f"{what} KeyedStream is not supported. key_by() only partitions the stream and makes no "
            "operator: set it on the operator before key_by() or on the one after it"
        )

    def _keyed_function(self, method: str, func: Any) -> DataStream | None:
        """A Function object on a keyed stream may use keyed state: run it keyed."""
        if not isinstance(func, Function):
            return None
        resolve_function(func, method, f"{method}()")
        name = {"map": "Map", "flat_map": "FlatMap", "filter": "Filter"}[method]
        return self._keyed(
            name,
            OperatorFactory(
                name, lambda ks, f: KeyedFunctionOperator(name, ks, f, method), self.key_selector, func
            ),
        )

    def map(
        self,
        func: MapFunction | Callable[[Any], Any],
        output_type: Any = None,
        *,
        concurrency: int | None = None,
    ) -> DataStream:
        keyed = typed(self._keyed_function("map", with_output_type(func, "map", output_type)), output_type)
        return keyed if keyed is not None else super().map(func, output_type, concurrency=concurrency)

    def flat_map(
        self,
        func: FlatMapFunction | Callable[[Any], Any],
        output_type: Any = None,
        *,
        concurrency: int | None = None,
    ) -> DataStream:
        keyed = typed(
            self._keyed_function("flat_map", with_output_type(func, "flat_map", output_type)), output_type
        )
        return keyed if keyed is not None else super().flat_map(func, output_type, concurrency=concurrency)

    def filter(
        self, func: FilterFunction | Callable[[Any], Any], *, concurrency: int | None = None
    ) -> DataStream:
        keyed = self._keyed_function("filter", func)
        return keyed if keyed is not None else super().filter(func, concurrency=concurrency)

    def reduce(self, func: ReduceFunction | Callable[[Any, Any], Any]) -> DataStream:
        resolve_function(func, "reduce", "reduce()")
        name, env = "Keyed Reduce", self._env
        return self._keyed(
            name,
            OperatorFactory(
                name, lambda ks, f: reduce_operator_class(env)(name, ks, f), self.key_selector, func
            ),
        )

    def sum(self, position_to_sum: int | str = 0) -> DataStream:
        return self._aggregate("sum", position_to_sum)

    def min(self, position_to_min: int | str = 0) -> DataStream:
        return self._aggregate("min", position_to_min)

    def max(self, position_to_max: int | str = 0) -> DataStream:
        return self._aggregate("max", position_to_max)

    def min_by(self, position_to_min_by: int | str = 0) -> DataStream:
        return self._aggregate("min_by", position_to_min_by)

    def max_by(self, position_to_max_by: int | str = 0) -> DataStream:
        return self._aggregate("max_by", position_to_max_by)

    def _aggregate(self, kind: str, field: int | str) -> DataStream:
        name, env = f"Keyed {kind.title()}({field!r})", self._env
        return self._keyed(
            name,
            OperatorFactory(
                name,
                lambda ks: reduce_operator_class(env)(name, ks, aggregation(kind, field)),
                self.key_selector,
            ),
        )

    def process(
        self, func: KeyedProcessFunction | ProcessFunction | Callable[..., Any], output_type: Any = None
    ) -> DataStream:
        resolve_function(func, "process_element", "process()")
        func = with_output_type(func, "process", output_type)
        name = "KeyedProcess"
        stream = self._keyed(
            name,
            OperatorFactory(name, lambda ks, f: KeyedProcessOperator(name, ks, f), self.key_selector, func),
        )
        return typed(stream, output_type)

    def window(self, window_assigner: WindowAssigner) -> WindowedStream:
        from .windowed import WindowedStream

        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> WindowedStream:
        """PyFlink's count windows: ``CountTumblingWindowAssigner`` (or sliding when ``slide``)."""
        from ..windowing.count import CountSlidingWindowAssigner, CountTumblingWindowAssigner

        if slide:
            return self.window(CountSlidingWindowAssigner(size, slide))
        return self.window(CountTumblingWindowAssigner(size))
