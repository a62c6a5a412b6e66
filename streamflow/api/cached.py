"""``DataStream.cache()``: a bounded stream computed once and reused by later jobs.

As Flink's ``CachedDataStream`` (batch mode, FLIP-205): the first job that runs
after ``cache()`` computes the stream and keeps its records; jobs built after
it read the cached records instead of recomputing the stream's operators
(``invalidate()`` drops the cache). streamflow keeps the records in the
client process (a collect sink), so a cache lives as long as the
``CachedDataStream`` object and holds the records in memory.
"""

from __future__ import annotations

from typing import Any

from ..connectors.collection import CollectionSource
from ..connectors.sinks import CollectSink
from ..graph import GraphError, StreamNode
from ..runtime.operator import StreamOperator
from .datastream import DataStream
from .surface import OperatorSettingsRefusals

__all__ = ["CachedDataStream"]


class _CacheSink(CollectSink):
    """Collects the cached records; knows whether a job has run it."""

    def __init__(self) -> None:
        super().__init__()
        self.used = False

    def create_operator(self, name: str) -> StreamOperator:
        self.used = True
        return super().create_operator(name)


class CachedDataStream(OperatorSettingsRefusals, DataStream):
    def __init__(self, stream: DataStream) -> None:
        unbounded = [n.name for n in _upstream_sources(stream) if not getattr(n.source, "bounded", True)]
        if unbounded:
            raise ValueError(f"cache() needs a bounded stream: source {unbounded[0]!r} is unbounded")
        self._original = list(stream._inputs)
        self._cache_node: StreamNode | None = None
        super().__init__(stream._env, self._original)
        self._type_info = stream._type_info
        self._sink = _CacheSink()
        stream.sink_to(self._sink).name("Cache")

    @property
    def _inputs(self) -> list[tuple[StreamNode, str | None]]:
        if not self._sink.used:  # not computed yet: read the stream itself
            return self._original
        graph = self._env._graph
        if self._cache_node is None or self._cache_node not in graph.nodes:
            source = CollectionSource(list(self._sink.results))
            self._cache_node = graph.add("Cached", None, source=source)
        return [(self._cache_node, None)]

    @_inputs.setter
    def _inputs(self, value: list[tuple[StreamNode, str | None]]) -> None:
        self._original = value

    def invalidate(self) -> None:
        """Drop the cached records: the next job recomputes the stream (and caches it again)."""
        self._sink = _CacheSink()
        DataStream(self._env, self._original).sink_to(self._sink).name("Cache")
        self._cache_node = None

    def get_cached_records(self) -> list[Any]:
        return list(self._sink.results)

    # -- operator settings are refused, as PyFlink's CachedDataStream refuses them --------
    def _refuse(self, what: str) -> GraphError:
        return GraphError(
            f"{what} CachedDataStream is not supported: it reads the cached records of the "
            "stream it caches; set it on that stream's operator before cache()"
        )


def _upstream_sources(stream: DataStream) -> list[StreamNode]:
    """The sources ``stream`` reads from, through every operator before it."""
    found: dict[int, StreamNode] = {}
    stack, seen = [node for node, _tag in stream._inputs], set()
    while stack:
        node = stack.pop()
        if node.id in seen:
            continue
        seen.add(node.id)
        if node.source is not None:
            found[node.id] = node
        stack.extend(edge.upstream for edge in node.inputs)
    return [found[i] for i in sorted(found)]
