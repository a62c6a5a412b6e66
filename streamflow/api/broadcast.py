"""The broadcast state pattern's API: ``stream.broadcast(descriptor)`` and ``connect()``.

``rules.broadcast(MapStateDescriptor(...))`` makes a :class:`BroadcastStream`;
``events.connect(rules_broadcast)`` (or ``keyed_events.connect(...)``) makes a
:class:`BroadcastConnectedStream` whose ``process`` takes a
``BroadcastProcessFunction`` (or ``KeyedBroadcastProcessFunction``). The
operators are in ``runtime/broadcast_operators.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..graph import Edge, GraphError, Partitioning
from ..runtime.basic_operators import resolve_function
from ..runtime.broadcast_operators import BroadcastProcessOperator, KeyedBroadcastProcessOperator
from ..runtime.factory import OperatorFactory
from .typed import converted

if TYPE_CHECKING:
    from .datastream import DataStream

__all__ = ["BroadcastConnectedStream", "BroadcastStream"]


class BroadcastStream:
    """A stream that reaches every parallel subtask of the operator it is connected to,
    with the broadcast states its descriptors name."""

    def __init__(self, stream: DataStream, descriptors: list[Any]) -> None:
        if not descriptors:
            raise ValueError("broadcast state needs at least one MapStateDescriptor")
        for d in descriptors:
            if getattr(d, "kind", None) != "map":
                raise TypeError(f"broadcast state is map state: expected MapStateDescriptor, got {d!r}")
        self.stream = stream
        self.descriptors = list(descriptors)


class BroadcastConnectedStream:
    """``non_broadcast.connect(broadcast_stream)``: process with a broadcast process function."""

    def __init__(self, stream: DataStream, broadcast_stream: BroadcastStream) -> None:
        if broadcast_stream.stream._env is not stream._env:
            raise GraphError("connect() of streams from different environments")
        self.stream = stream
        self.broadcast_stream = broadcast_stream

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        from .datastream import DataStream, KeyedStream

        resolve_function(func, "process_element", "connect(broadcast).process()")
        resolve_function(func, "process_broadcast_element", "connect(broadcast).process()")
        env, descriptors = self.stream._env, self.broadcast_stream.descriptors
        key_selector = self.stream.key_selector if isinstance(self.stream, KeyedStream) else None
        keyed = key_selector is not None
        edges = self.stream._edges()  # its own partitioning (a keyed stream's hash, rebalance(), ...)
        edges += [
            Edge(node, Partitioning.BROADCAST, tag, explicit=True, input_index=1)
            for node, tag in self.broadcast_stream.stream._inputs
        ]
        if keyed:
            name = "KeyedBroadcastProcess"
            factory = OperatorFactory(
                name,
                lambda f, ks: KeyedBroadcastProcessOperator(name, ks, f, descriptors),
                func,
                key_selector,
            )
        else:
            name = "BroadcastProcess"
            factory = OperatorFactory(name, lambda f: BroadcastProcessOperator(name, f, descriptors), func)
        node = env._graph.add(name, factory, inputs=edges, keyed=keyed, rescalable=True)
        if not keyed:  # (a keyed one sorts its regular input, which waits for every input's end)
            node.batch_reads_first = 1  # Flink's BatchCoBroadcastWithNonKeyedOperator: broadcast first
        return converted(DataStream(env, [(node, None)]), output_type, "connect(broadcast).process()")
