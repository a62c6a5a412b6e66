"""User function interfaces, with PyFlink's names.

Every operator accepts either a plain callable, an instance of the matching
class below (``open``/``close`` are called around processing), or, for
``map``/``flat_map``/``filter``, an ``async def`` (awaited in record order with
bounded concurrency, like Flink's ordered async I/O).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runtime.context import RuntimeContext
    from .windowing.windows import TimeWindow


class Function:
    """Base of all user functions: optional lifecycle hooks.

    ``open`` and ``close`` may also be ``async def`` (the operator awaits them).
    """

    def open(self, runtime_context: RuntimeContext) -> Awaitable[None] | None:
        pass

    def close(self) -> Awaitable[None] | None:
        pass


class MapFunction(Function):
    def map(self, value: Any) -> Any:
        raise NotImplementedError


class FlatMapFunction(Function):
    def flat_map(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError


class FilterFunction(Function):
    def filter(self, value: Any) -> bool:
        raise NotImplementedError


class KeySelector(Function):
    def get_key(self, value: Any) -> Any:
        raise NotImplementedError


class ReduceFunction(Function):
    def reduce(self, value1: Any, value2: Any) -> Any:
        raise NotImplementedError


class AggregateFunction(Function):
    """Incremental aggregation: accumulator in, result out (PyFlink's names)."""

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def add(self, value: Any, accumulator: Any) -> Any:
        raise NotImplementedError

    def get_result(self, accumulator: Any) -> Any:
        raise NotImplementedError

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement merge()")


class SinkFunction(Function):
    """A sink written record by record; override ``invoke`` or ``write_batch``."""

    def invoke(self, value: Any) -> None:
        raise NotImplementedError

    def write_batch(self, values: list[Any]) -> None:
        invoke = self.invoke
        for v in values:
            invoke(v)


class ProcessFunction(Function):
    """``process_element`` returns or yields outputs; ``yield tag, value`` for a side output."""

    class Context:
        def timestamp(self) -> int:
            raise NotImplementedError

        def timer_service(self) -> Any:
            raise NotImplementedError

    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Iterable[Any] | None:
        raise NotImplementedError


class KeyedProcessFunction(Function):
    """Per-key processing with state and timers (``ctx.timer_service()``)."""

    class Context:
        def timestamp(self) -> int:
            raise NotImplementedError

        def timer_service(self) -> Any:
            raise NotImplementedError

        def get_current_key(self) -> Any:
            raise NotImplementedError

    class OnTimerContext(Context):
        def time_domain(self) -> Any:
            raise NotImplementedError

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterable[Any] | None:
        return None


class ProcessWindowFunction(Function):
    """Called with all elements of a window when it fires (``context.window()``)."""

    class Context:
        def window(self) -> TimeWindow:
            raise NotImplementedError

        def current_watermark(self) -> int:
            raise NotImplementedError

        def current_processing_time(self) -> int:
            raise NotImplementedError

        def window_state(self) -> Any:
            """Keyed state scoped to this key and window (``KeyedStateStore``)."""
            raise NotImplementedError

        def global_state(self) -> Any:
            """Keyed state scoped to this key, shared by its windows (``KeyedStateStore``)."""
            raise NotImplementedError

    def process(
        self, key: Any, context: ProcessWindowFunction.Context, elements: Iterable[Any]
    ) -> Iterable[Any]:
        raise NotImplementedError

    def clear(self, context: ProcessWindowFunction.Context) -> None:
        pass


class WindowFunction(Function):
    """Called with all elements of a window when it fires: ``apply(key, window, inputs)``
    (PyFlink's ``WindowFunction``; ``window`` is the window itself, not a context)."""

    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError


class OutputTag:
    """Names a side output: ``yield tag, value`` in a process function emits to it."""

    def __init__(self, tag_id: str, type_info: Any = None) -> None:
        if not tag_id or not isinstance(tag_id, str):
            raise ValueError(f"an OutputTag needs a non-empty string id, got {tag_id!r}")
        self.tag_id = tag_id
        self.type_info = type_info

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self) -> int:
        return hash(self.tag_id)

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r})"


class TimeDomain(enum.IntEnum):
    """What fired a timer: ``ctx.time_domain()`` in ``on_timer`` (an enum, as PyFlink's)."""

    EVENT_TIME = 0
    PROCESSING_TIME = 1


class CoMapFunction(Function):
    """``connect(...).map()``: one method per input."""

    def map1(self, value: Any) -> Any:
        raise NotImplementedError

    def map2(self, value: Any) -> Any:
        raise NotImplementedError


class CoFlatMapFunction(Function):
    def flat_map1(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError

    def flat_map2(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError


class CoProcessFunction(Function):
    """Two inputs, one function; ``yield tag, value`` for a side output."""

    class Context:
        def timestamp(self) -> int:
            raise NotImplementedError

        def timer_service(self) -> Any:
            raise NotImplementedError

    def process_element1(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_element2(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        raise NotImplementedError


class KeyedCoProcessFunction(CoProcessFunction):
    """Two keyed inputs sharing keyed state and timers (``ctx.timer_service()``)."""

    class Context(CoProcessFunction.Context):
        def get_current_key(self) -> Any:
            raise NotImplementedError

    class OnTimerContext(Context):
        def time_domain(self) -> Any:
            raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any] | None:
        return None


class AllWindowFunction(Function):
    """``window_all(...).apply()``: ``apply(window, inputs)`` over all elements of a window."""

    def apply(self, window: Any, inputs: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError


class ProcessAllWindowFunction(Function):
    """``window_all(...).process()``: ``process(context, elements)``; ``context.window()``."""

    class Context:
        def window(self) -> Any:
            raise NotImplementedError

        def current_watermark(self) -> int:
            raise NotImplementedError

        def current_processing_time(self) -> int:
            raise NotImplementedError

        def window_state(self) -> Any:
            """Keyed state scoped to this key and window (``KeyedStateStore``)."""
            raise NotImplementedError

        def global_state(self) -> Any:
            """Keyed state scoped to this key, shared by its windows (``KeyedStateStore``)."""
            raise NotImplementedError

    def process(self, context: ProcessAllWindowFunction.Context, elements: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError

    def clear(self, context: ProcessAllWindowFunction.Context) -> None:
        pass


class Partitioner(Function):
    """``partition_custom``: the index of the channel (``0 <= i < num_partitions``) for a key."""

    def partition(self, key: Any, num_partitions: int) -> int:
        raise NotImplementedError


class SourceFunction(Function):
    """PyFlink's legacy source interface. Sources are :class:`~streamflow.connectors.base.Source`
    objects here (``from_source``); ``add_source`` accepts those."""


class BaseBroadcastProcessFunction(Function):
    """The broadcast state pattern's functions (``connect(stream.broadcast(descriptor))``)."""

    class BaseContext:
        def timestamp(self) -> int:
            raise NotImplementedError

        def current_processing_time(self) -> int:
            raise NotImplementedError

        def current_watermark(self) -> int:
            raise NotImplementedError

    class Context(BaseContext):
        def get_broadcast_state(self, state_descriptor: Any) -> Any:
            raise NotImplementedError

    class ReadOnlyContext(BaseContext):
        def get_broadcast_state(self, state_descriptor: Any) -> Any:
            raise NotImplementedError


class BroadcastProcessFunction(BaseBroadcastProcessFunction):
    """``process_element`` reads the broadcast state; ``process_broadcast_element`` writes it."""

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_broadcast_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        raise NotImplementedError


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction):
    """The keyed side has keyed state and timers; the broadcast side may
    ``ctx.apply_to_keyed_state(descriptor, fn)`` over every key's state."""

    class Context(BaseBroadcastProcessFunction.Context):
        def apply_to_keyed_state(self, state_descriptor: Any, function: Any) -> None:
            raise NotImplementedError

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext):
        def timer_service(self) -> Any:
            raise NotImplementedError

        def get_current_key(self) -> Any:
            raise NotImplementedError

    class OnTimerContext(ReadOnlyContext):
        def time_domain(self) -> Any:
            raise NotImplementedError

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_broadcast_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any] | None:
        return None


def _generic(cls: type) -> None:
    """``ProcessWindowFunction[IN, OUT, KEY, W]`` and ``.Context[...]`` as PyFlink's generics."""
    cls.__class_getitem__ = classmethod(lambda c, item: c)  # type: ignore[attr-defined]


for _cls in (Function, ProcessFunction.Context, KeyedProcessFunction.Context,
             KeyedProcessFunction.OnTimerContext, ProcessWindowFunction.Context,
             ProcessAllWindowFunction.Context, BaseBroadcastProcessFunction.Context,
             BaseBroadcastProcessFunction.ReadOnlyContext, KeyedBroadcastProcessFunction.Context,
             KeyedBroadcastProcessFunction.ReadOnlyContext, KeyedBroadcastProcessFunction.OnTimerContext,
             CoProcessFunction.Context, KeyedCoProcessFunction.Context,
             KeyedCoProcessFunction.OnTimerContext):
    _generic(_cls)
