"""``ConnectedStreams``: ``a.connect(b)`` feeds two streams into one two-input operator."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..functions import CoFlatMapFunction, CoMapFunction, CoProcessFunction, KeySelector
from ..graph import Edge, Partitioning
from ..runtime.basic_operators import resolve_function
from ..runtime.factory import OperatorFactory
from ..runtime.two_input_operators import (
    CoFlatMapOperator,
    CoMapOperator,
    CoProcessOperator,
    KeyedCoProcessOperator,
)
from .co_keyed import KeyedCoFlatMapAdapter, KeyedCoMapAdapter
from .typed import converted, typed_key_selector

if TYPE_CHECKING:
    from .datastream import DataStream


class ConnectedStreams:
    """Both inputs keep their own types; a keyed pair shares keyed state and timers."""

    def __init__(
        self,
        first: DataStream,
        second: DataStream,
        keys: tuple[Callable[[Any], Any], Callable[[Any], Any]] | None = None,
    ) -> None:
        from .datastream import KeyedStream

        self.first, self.second = first, second
        if keys is None and isinstance(first, KeyedStream) and isinstance(second, KeyedStream):
            keys = (first.key_selector, second.key_selector)
        self.keys = keys
        # exactly one keyed input: Flink's ConnectedStreams#doTransform still sets that input's
        # state key selector, so a batch job sorts it (runtime/half_sorted_input.py)
        self.half_keys: tuple[Any, Any] | None = None
        if keys is None and isinstance(first, KeyedStream) != isinstance(second, KeyedStream):
            self.half_keys = tuple(  # type: ignore[assignment]
                s.key_selector if isinstance(s, KeyedStream) else None for s in (first, second)
            )

    def key_by(
        self,
        key_selector1: KeySelector | Callable[[Any], Any],
        key_selector2: KeySelector | Callable[[Any], Any],
        key_type: Any = None,
    ) -> ConnectedStreams:
        """Partition both inputs by key (the keys of the two inputs must match in type)."""
        return ConnectedStreams(
            self.first,
            self.second,
            (
                typed_key_selector(resolve_function(key_selector1, "get_key", "key_by()"), key_type),
                typed_key_selector(resolve_function(key_selector2, "get_key", "key_by()"), key_type),
            ),
        )

    def _edges(self) -> list[Edge]:
        """Keyed: both inputs hashed by their keys. Otherwise each input keeps its own
        partitioning (``b.broadcast()``, ``b.rebalance()``, a keyed stream's hash), as Flink's
        connect() does; a plain stream is forwarded."""
        edges = []
        for index, stream in enumerate((self.first, self.second)):
            if self.keys is None:
                edges.extend(stream._edges(Partitioning.FORWARD, input_index=index))
                continue
            key = self.keys[index]
            edges.extend(Edge(node, Partitioning.HASH, tag, key_selector=key, input_index=index)
                         for node, tag in stream._inputs)
        return edges

    def _build(self, name: str, factory: OperatorFactory, keyed: bool = False) -> DataStream:
        from .datastream import DataStream

        half_keys = None if keyed else self.half_keys
        node = self.first._env._graph.add(
            name, factory, inputs=self._edges(), keyed=keyed, half_keys=half_keys
        )
        return DataStream(self.first._env, [(node, None)])

    def map(self, func: CoMapFunction, output_type: Any = None) -> DataStream:
        resolve_function(func, "map1", "connect().map()")
        if self.keys is not None:  # keyed: the function may use keyed state (api/co_keyed.py)
            return self.process(KeyedCoMapAdapter(func), output_type)
        stream = self._build("CoMap", OperatorFactory("CoMap", lambda f: CoMapOperator("CoMap", f), func))
        return converted(stream, output_type, "connect().map()")

    def flat_map(self, func: CoFlatMapFunction, output_type: Any = None) -> DataStream:
        resolve_function(func, "flat_map1", "connect().flat_map()")
        if self.keys is not None:
            return self.process(KeyedCoFlatMapAdapter(func), output_type)
        stream = self._build(
            "CoFlatMap", OperatorFactory("CoFlatMap", lambda f: CoFlatMapOperator("CoFlatMap", f), func)
        )
        return converted(stream, output_type, "connect().flat_map()")

    def process(self, func: CoProcessFunction, output_type: Any = None) -> DataStream:
        """A ``CoProcessFunction``; on keyed connected streams a ``KeyedCoProcessFunction``
        with keyed state shared by both inputs and per-key timers."""
        resolve_function(func, "process_element1", "connect().process()")
        if self.keys is None:
            stream = self._build(
                "CoProcess", OperatorFactory("CoProcess", lambda f: CoProcessOperator("CoProcess", f), func)
            )
            return converted(stream, output_type, "connect().process()")
        return self._keyed_process(func, output_type, KeyedCoProcessOperator, "connect().process()")

    def _keyed_process(self, func: Any, output_type: Any, operator: type[KeyedCoProcessOperator],
                       where: str) -> DataStream:
        """``func`` run by ``operator`` (a ``KeyedCoProcessOperator``) on the keyed streams."""
        assert self.keys is not None
        k1, k2 = self.keys
        factory = OperatorFactory(
            "KeyedCoProcess", lambda f, ks1, ks2: operator("KeyedCoProcess", ks1, ks2, f), func, k1, k2
        )
        stream = self._build("KeyedCoProcess", factory, keyed=True)
        return converted(stream, output_type, where)
