"""Where a stream ends: ``sink_to``/``add_sink``, ``print``, collecting, and ``DataStreamSink``.

:class:`StreamEnds` is mixed into ``DataStream`` (``datastream.py``): a sink is one
more node of the logical graph (``is_sink``), made of a ``Sink`` (which builds a fresh
operator per subtask) or a ``SinkFunction``/callable (copied per subtask). ``print``
writes each record as PyFlink prints it for the stream's declared type.
``execute_and_collect`` starts the job and iterates over the stream's records
(``collect.py``); ``execute_and_collect_async`` runs the job in the caller's event
loop and yields them through a ``QueueSink``. :class:`DataStreamSink` is what a sink
call returns: the sink node's settings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from ..connectors.base import Sink
from ..connectors.queue_sink import QueueSink
from ..functions import SinkFunction
from ..graph import Chaining, Edge, StreamNode
from ..runtime.basic_operators import SinkOperator, resolve_function
from ..runtime.factory import OperatorFactory
from .collect import execute_and_collect
from .surface import CloseableIterator, checked_uid_hash
from .typed import TypedPrintSink, configure_input_type

if TYPE_CHECKING:
    from .environment import StreamExecutionEnvironment

__all__ = ["DataStreamSink", "StreamEnds"]


class StreamEnds:
    """Mixed into ``DataStream``: its sinks and collecting (built on its ``_add``)."""

    _env: StreamExecutionEnvironment
    _type_info: Any

    if TYPE_CHECKING:

        def _add(
            self,
            name: str,
            factory: OperatorFactory,
            edges: list[Edge] | None = None,
            *,
            keyed: bool = False,
            is_sink: bool = False,
        ) -> StreamNode: ...

    def sink_to(self, sink: Sink | SinkFunction | Callable[[Any], Any]) -> DataStreamSink:
        configure_input_type(sink, self._type_info, self._env)
        if isinstance(sink, Sink):
            # a Sink describes the sink and makes a fresh operator per subtask: it is not copied
            factory: OperatorFactory = OperatorFactory("Sink", lambda: sink.create_operator("Sink"))
            node = self._add("Sink", factory, is_sink=True)
            node.has_committer = sink.has_committer
            return DataStreamSink(node)
        resolve_function(sink, "invoke", "sink_to()")
        if isinstance(sink, SinkFunction) and (type(sink).invoke, type(sink).write_batch) == (
            SinkFunction.invoke,
            SinkFunction.write_batch,
        ):
            raise TypeError(
                f"sink_to(): {type(sink).__name__} is a SinkFunction that overrides neither "
                "invoke(value) nor write_batch(values): nothing would be written"
            )
        factory = OperatorFactory("Sink", lambda f: SinkOperator("Sink", f), sink)
        return DataStreamSink(self._add("Sink", factory, is_sink=True))

    def add_sink(self, sink_func: Sink | SinkFunction | Callable[[Any], Any]) -> DataStreamSink:
        """PyFlink's name (and keyword) for :meth:`sink_to`."""
        return self.sink_to(sink_func)

    def print(self, sink_identifier: str | None = None) -> DataStreamSink:
        """Each record on a line, as PyFlink prints it for the stream's declared type."""
        return self.sink_to(TypedPrintSink(sink_identifier, self._type_info)).name("Print")

    def execute_and_collect(
        self, job_execution_name: str = "collect", limit: int | None = None
    ) -> CloseableIterator | list[Any]:
        """Start the job and iterate over this stream's records as it runs (also a context
        manager; closing it early cancels the job): see ``api/collect.py``. With a ``limit``,
        as PyFlink, the first ``limit`` records as a list (the job is stopped then)."""
        return execute_and_collect(self, job_execution_name, limit)  # type: ignore[arg-type]  # a DataStream

    async def execute_and_collect_async(
        self, job_name: str = "collect", limit: int | None = None, capacity: int = 4096
    ) -> AsyncIterator[Any]:
        """Run the job in this event loop and yield its records as they arrive;
        leaving the loop early (or ``limit``) cancels the job."""
        sink = QueueSink(capacity)
        node = self.sink_to(sink).set_parallelism(1)._node  # Flink's collect sink: one subtask
        try:
            client = await self._env.execute_async(job_name)
        finally:
            self._env._graph.remove(node)  # when execute failed before it cleared the graph
        seen = 0
        try:
            async for record in sink.drain(client):
                yield record
                seen += 1
                if limit is not None and seen >= limit:
                    break
        finally:
            await client.cancel()
        await client.get_job_execution_result()


class DataStreamSink:
    def __init__(self, node: StreamNode) -> None:
        self._node = node

    def name(self, name: str) -> DataStreamSink:
        self._node.name = name
        return self

    def uid(self, uid: str) -> DataStreamSink:
        self._node.uid = uid
        return self

    def set_parallelism(self, parallelism: int) -> DataStreamSink:
        self._node.parallelism = parallelism
        return self

    def disable_chaining(self) -> DataStreamSink:
        self._node.chaining = Chaining.NEVER
        return self

    def set_uid_hash(self, uid_hash: str) -> DataStreamSink:
        return self.uid(checked_uid_hash(uid_hash))

    def set_description(self, description: str) -> DataStreamSink:
        self._node.description = description
        return self

    def slot_sharing_group(self, slot_sharing_group: Any) -> DataStreamSink:
        """Recorded (the plan shows it), as an operator's: one streamflow process is one slot."""
        group = slot_sharing_group
        self._node.slot_sharing_group = str(group.get_name() if hasattr(group, "get_name") else group)
        return self
