"""The rest of PyFlink's ``DataStream`` surface, mixed into ``DataStream`` and ``KeyedStream``.

Partitionings (``shuffle``, ``rescale``, ``partition_custom``) are real: the
writer at the end of a chain routes each record as Flink's Shuffle-, Rescale-
and CustomPartitionerWrapper do (``runtime/writer.py``). ``project`` is a map
named ``Projection``. ``force_non_parallel`` pins parallelism 1.
``slot_sharing_group``, ``set_description`` and ``set_buffer_timeout`` are
recorded on the operator and shown in ``get_execution_plan()``: one streamflow
process is one slot, and batches are flushed when a source pauses, so they do
not change how the job runs. ``KeyedStream`` refuses what PyFlink's refuses
(operator settings and re-partitioning of a key_by), with PyFlink's messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..configuration import MemorySize
from ..graph import GraphError, Partitioning
from ..runtime.basic_operators import resolve_function
from ..types.typeinfo import TupleTypeInfo

_HEX = frozenset("0123456789abcdefABCDEF")


def checked_uid_hash(uid_hash: str) -> str:
    """Flink's Transformation.setUidHash: the user's node hash is 32 hex characters."""
    if not (isinstance(uid_hash, str) and len(uid_hash) == 32 and set(uid_hash) <= _HEX):
        raise ValueError(
            f"Node hash must be a 32 character String that describes a hex code. Found: {uid_hash}"
        )
    return uid_hash

if TYPE_CHECKING:
    from .datastream import DataStream

__all__ = [
    "CloseableIterator",
    "DataStreamSurface",
    "KeyedStreamRefusals",
    "OperatorSettingsRefusals",
    "SlotSharingGroup",
]


class SlotSharingGroup:
    """A named slot sharing group (its resources are recorded; one process is one slot here)."""

    def __init__(self, name: str, resources: dict[str, Any] | None = None) -> None:
        self._name = name
        self._resources = dict(resources or {})

    def get_name(self) -> str:
        return self._name

    def get_cpu_cores(self) -> float | None:
        return self._resources.get("cpu_cores")

    def get_task_heap_memory(self) -> MemorySize | None:
        return self._resources.get("task_heap_memory")

    def get_task_off_heap_memory(self) -> MemorySize | None:
        return self._resources.get("task_off_heap_memory")

    def get_managed_memory(self) -> MemorySize | None:
        return self._resources.get("managed_memory")

    def get_external_resources(self) -> dict[str, float]:
        return dict(self._resources.get("external", {}))

    @staticmethod
    def builder(name: str) -> SlotSharingGroup.Builder:
        return SlotSharingGroup.Builder(name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SlotSharingGroup) and (other._name, other._resources) == (
            self._name,
            self._resources,
        )

    def __hash__(self) -> int:
        return hash(self._name)

    def __repr__(self) -> str:
        return f"SlotSharingGroup({self._name!r})"

    class Builder:
        def __init__(self, name: str) -> None:
            self._name = name
            self._resources: dict[str, Any] = {}

        def _set(self, key: str, value: Any) -> SlotSharingGroup.Builder:
            self._resources[key] = value
            return self

        def set_cpu_cores(self, cpu_cores: float) -> SlotSharingGroup.Builder:
            if not cpu_cores > 0:
                raise ValueError("The cpu cores should be positive.")
            return self._set("cpu_cores", cpu_cores)

        def set_task_heap_memory(self, task_heap_memory: Any) -> SlotSharingGroup.Builder:
            if not task_heap_memory.get_bytes() > 0:
                raise ValueError("The task heap memory should be positive.")
            return self._set("task_heap_memory", task_heap_memory)

        def set_task_heap_memory_mb(self, mb: int) -> SlotSharingGroup.Builder:
            if not mb > 0:
                raise ValueError("The task heap memory should be positive.")
            return self._set("task_heap_memory", MemorySize.of_mebi_bytes(mb))

        def set_task_off_heap_memory(self, memory: Any) -> SlotSharingGroup.Builder:
            return self._set("task_off_heap_memory", memory)

        def set_task_off_heap_memory_mb(self, mb: int) -> SlotSharingGroup.Builder:
            return self._set("task_off_heap_memory", MemorySize.of_mebi_bytes(mb))

        def set_managed_memory(self, memory: Any) -> SlotSharingGroup.Builder:
            return self._set("managed_memory", memory)

        def set_managed_memory_mb(self, mb: int) -> SlotSharingGroup.Builder:
            return self._set("managed_memory", MemorySize.of_mebi_bytes(mb))

        def set_external_resource(self, name: str, value: float) -> SlotSharingGroup.Builder:
            self._resources.setdefault("external", {})[name] = value
            return self

        def build(self) -> SlotSharingGroup:
            """As Flink's builder: resources need the CPU cores and the task heap memory (the
            off-heap and managed memory then default to zero); a group without any has none."""
            resources = dict(self._resources)
            if "cpu_cores" in resources and "task_heap_memory" in resources:
                resources.setdefault("task_off_heap_memory", MemorySize(0))
                resources.setdefault("managed_memory", MemorySize(0))
            elif resources:
                raise ValueError(
                    "The cpu cores and task heap memory are required when specifying the resource "
                    "of a slot sharing group. You need to explicitly configure them with positive value."
                )
            return SlotSharingGroup(self._name, resources)


class CollectedList(list[Any]):
    """``execute_and_collect(limit=n)``'s result: the first n records as a ``list``, as
    PyFlink returns them (indexable, sized, equal to a list); ``close()`` and the context
    manager are kept for programs written against the iterator (the job has already ended)."""

    def close(self) -> None:
        """Nothing to release: the job was stopped when the limit was reached."""

    def __enter__(self) -> CollectedList:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CloseableIterator:
    """``execute_and_collect()``'s result: an iterator that is also a context manager.

    ``iter()`` hands out the underlying iterator itself, so a ``for`` loop over the results
    runs at C speed instead of calling ``__next__`` here per record; ``next()`` on this
    object shares its position. ``close()`` stops the job if it still runs (see
    ``api/collect.py``) and ends every iterator over the results."""

    def __init__(self, records: Iterator[Any], on_close: Callable[[], None]) -> None:
        self._it = records
        self._on_close = on_close

    def __iter__(self) -> Iterator[Any]:
        return self._it

    def __next__(self) -> Any:
        return next(self._it)

    def next(self) -> Any:
        return next(self._it)

    def close(self) -> None:
        self._on_close()

    def __enter__(self) -> CloseableIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DataStreamSurface:
    """Mixed into ``DataStream``: methods built on its ``_partitioned`` / ``map`` / node."""

    def shuffle(self) -> DataStream:
        return self._partitioned(Partitioning.SHUFFLE)  # type: ignore[attr-defined]

    def rescale(self) -> DataStream:
        return self._partitioned(Partitioning.RESCALE)  # type: ignore[attr-defined]

    def partition_custom(self, partitioner: Any, key_selector: Any) -> DataStream:
        """Route each record to ``partitioner.partition(key, num_partitions)``'s channel."""
        part = resolve_function(partitioner, "partition", "partition_custom()")
        keys = resolve_function(key_selector, "get_key", "partition_custom()")
        return self._partitioned(  # type: ignore[attr-defined]
            Partitioning.CUSTOM, key_selector=keys, partitioner=part
        )

    def project(self, *field_indexes: int) -> DataStream:
        """The given fields of each tuple record, as a tuple (Flink's ``Projection``)."""
        if not field_indexes:
            raise ValueError("project() needs at least one field index")
        idx = tuple(field_indexes)
        source_type = self._type_info  # type: ignore[attr-defined]
        if not isinstance(source_type, TupleTypeInfo):  # as PyFlink (Flink's Projection needs tuples)
            raise GraphError(
                "Only Tuple DataStreams can be projected: declare the stream's type as "
                f"Types.TUPLE([...]) (output_type=/type_info=), got {self.get_type()!r}"
            )
        types = source_type.get_field_types()
        out_type = TupleTypeInfo([types[i] for i in idx])
        stream = self.map(lambda r: tuple(r[i] for i in idx), output_type=out_type)  # type: ignore[attr-defined]
        return stream.name("Projection")

    def force_non_parallel(self) -> DataStream:
        self._node.parallelism = 1  # type: ignore[attr-defined]
        self._node.max_parallelism = 1  # type: ignore[attr-defined]
        self._node.non_parallel = True  # type: ignore[attr-defined]
        return self  # type: ignore[return-value]

    def set_description(self, description: str) -> DataStream:
        self._node.description = description  # type: ignore[attr-defined]
        return self  # type: ignore[return-value]

    def slot_sharing_group(self, slot_sharing_group: str | SlotSharingGroup) -> DataStream:
        group = slot_sharing_group
        name = group.get_name() if isinstance(group, SlotSharingGroup) else group
        self._node.slot_sharing_group = str(name)  # type: ignore[attr-defined]
        return self  # type: ignore[return-value]

    def set_buffer_timeout(self, timeout_millis: int) -> DataStream:
        """Accepted: a batch leaves its chain when the source pauses, whatever the timeout."""
        return self  # type: ignore[return-value]

    def set_uid_hash(self, uid_hash: str) -> DataStream:
        return self.uid(checked_uid_hash(uid_hash))  # type: ignore[attr-defined]

    def get_type(self) -> Any:
        from ..types.typeinfo import Types

        return self._type_info or Types.PICKLED_BYTE_ARRAY()  # type: ignore[attr-defined]

    def window_all(self, window_assigner: Any) -> Any:
        """Windows over the whole stream, in one non-parallel operator (``api/all_windowed.py``)."""
        from .all_windowed import AllWindowedStream

        return AllWindowedStream(self, window_assigner)  # type: ignore[arg-type]

    def count_window_all(self, size: int, slide: int = 0) -> Any:
        from ..windowing.count import CountSlidingWindowAssigner, CountTumblingWindowAssigner

        assigner = CountSlidingWindowAssigner(size, slide) if slide else CountTumblingWindowAssigner(size)
        return self.window_all(assigner)

    def join(self, other: Any) -> Any:
        """A window join (Flink Java's ``JoinedStreams``; ``api/joins.py``)."""
        from .joins import JoinedStreams

        return JoinedStreams(self, other)  # type: ignore[arg-type]

    def co_group(self, other: Any) -> Any:
        """A window co-group (Flink Java's ``CoGroupedStreams``; ``api/joins.py``)."""
        from .joins import CoGroupedStreams

        return CoGroupedStreams(self, other)  # type: ignore[arg-type]

    def interval_join(self, other: Any) -> Any:
        """``keyed_a.interval_join(keyed_b).between(lower, upper).process(fn)`` (``api/joins.py``)."""
        from .datastream import KeyedStream
        from .joins import IntervalJoin

        if not isinstance(self, KeyedStream) or not isinstance(other, KeyedStream):
            raise TypeError("interval_join() joins two keyed streams: key_by() both first")
        return IntervalJoin(self, other)

    def cache(self) -> Any:
        """Compute this bounded stream once; later jobs read the cached records (``api/cached.py``)."""
        from .cached import CachedDataStream

        return CachedDataStream(self)  # type: ignore[arg-type]

    def get_execution_config(self) -> Any:
        return self._env.get_config()  # type: ignore[attr-defined]


def _refuse(what: str) -> Callable[..., Any]:
    def refused(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise GraphError(f"{what} on a KeyedStream is not supported (as in PyFlink): apply it to an operator")

    refused.__name__ = what
    return refused


class KeyedStreamRefusals:
    """What PyFlink's ``KeyedStream`` refuses: operator settings and re-partitioning."""


for _name in (
    # PyFlink's KeyedStream refuses these too; the operator settings are refused by KeyedStream itself
    "shuffle",
    "rescale",
    "rebalance",
    "forward",
    "broadcast",
    "partition_custom",
    "set_description",
    "cache",
    # Flink: only a SingleOutputStreamOperator has getSideOutput; a KeyedStream is no operator
    # (it would otherwise answer with the side output of the operator before key_by)
    "get_side_output",
):
    setattr(KeyedStreamRefusals, _name, _refuse(_name))


class OperatorSettingsRefusals:
    """Operator settings of a stream that makes no operator of its own (a ``KeyedStream``, a
    ``CachedDataStream``), refused as PyFlink refuses them; ``_refuse`` words the error."""

    def _refuse(self, what: str) -> GraphError:
        raise NotImplementedError

    def set_parallelism(self, parallelism: int) -> DataStream:
        raise self._refuse("Set parallelism for")

    def name(self, name: str) -> DataStream:
        raise self._refuse("Set name for")

    def get_name(self) -> str:
        raise self._refuse("Get name of")

    def uid(self, uid: str) -> DataStream:
        raise self._refuse("Set uid for")

    def set_uid_hash(self, uid_hash: str) -> DataStream:
        raise self._refuse("Set uid hash for")

    def set_max_parallelism(self, max_parallelism: int) -> DataStream:
        raise self._refuse("Set max parallelism for")

    def force_non_parallel(self) -> DataStream:
        raise self._refuse("Set force non-parallel for")

    def set_buffer_timeout(self, timeout_millis: int) -> DataStream:
        raise self._refuse("Set buffer timeout for")

    def start_new_chain(self) -> DataStream:
        raise self._refuse("Start new chain for")

    def disable_chaining(self) -> DataStream:
        raise self._refuse("Disable chaining for")

    def slot_sharing_group(self, slot_sharing_group: Any) -> DataStream:
        raise self._refuse("Setting slot sharing group for")
