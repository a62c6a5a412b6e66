"""What a window's user code sees: the functions a window applies and its context.

:class:`WindowContext` is at once PyFlink's ``ProcessWindowFunction.Context``
(``window()``, ``current_watermark()``), the trigger's ``TriggerContext``
(timers and per-window trigger state, bound to one key and window) and the
``EvictorContext``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..functions import AggregateFunction
from ..windowing.context import DictReducingState, TriggerStateDescriptor, merge_reducing_state

if TYPE_CHECKING:
    from .window_operator import WindowOperator


class WindowFunctions:
    """How a window accumulates and what it emits; exactly one of the three modes."""

    def __init__(
        self,
        *,
        reduce: Callable[[Any, Any], Any] | None = None,
        aggregate: AggregateFunction | None = None,
        process: Callable[..., Any] | None = None,
        process_function: Any = None,
    ) -> None:
        self.reduce = reduce
        self.aggregate = aggregate
        self.process = process  # process(key, context, elements) -> iterable
        self.process_function = process_function  # for open/close/clear
        self.incremental = reduce is not None or aggregate is not None


class WindowContext:
    """``ProcessWindowFunction.Context`` and the trigger's context, for one (key, window)."""

    __slots__ = ("_merged", "_op", "_window", "key")

    def __init__(self, op: WindowOperator, key: Any, window: Any) -> None:
        self._op, self.key, self._window = op, key, window
        self._merged: list[Any] = []

    def window(self) -> Any:
        return self._window

    # ProcessWindowFunction.Context
    def current_watermark(self) -> int:
        return self._op.current_watermark

    def current_processing_time(self) -> int:
        return self._op.ctx.clock.now_ms()

    # TriggerContext (PyFlink's names)
    def get_current_watermark(self) -> int:
        return self._op.current_watermark

    def get_current_processing_time(self) -> int:
        return self._op.ctx.clock.now_ms()

    def register_event_time_timer(self, time: int) -> None:
        self._op.timers.register_event_time_timer(self.key, self._window, time)

    def register_processing_time_timer(self, time: int) -> None:
        self._op.register_processing_timer(self.key, self._window, time)

    def delete_event_time_timer(self, time: int) -> None:
        self._op.timers.delete_event_time_timer(self.key, self._window, time)

    def delete_processing_time_timer(self, time: int) -> None:
        self._op.timers.delete_processing_time_timer(self.key, self._window, time)

    def _trigger_store(self) -> dict:
        return self._op.trigger_state.setdefault(self.key, {})

    def get_partitioned_state(self, descriptor: TriggerStateDescriptor) -> DictReducingState:
        return DictReducingState(
            self._trigger_store(), (self._window, descriptor.name), descriptor.reduce_function
        )

    def merge_partitioned_state(self, descriptor: TriggerStateDescriptor) -> None:
        merge_reducing_state(
            self._trigger_store(),
            [(w, descriptor.name) for w in self._merged],
            (self._window, descriptor.name),
            descriptor.reduce_function,
        )
