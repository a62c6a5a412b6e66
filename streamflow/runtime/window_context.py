"""What a window's user code sees: the functions a window applies and its context.

:class:`WindowContext` is at once PyFlink's ``ProcessWindowFunction.Context``
(``window()``, ``current_watermark()``), the trigger's ``TriggerContext``
(timers and per-window trigger state, bound to one key and window) and the
``EvictorContext``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..functions import AggregateFunction, ProcessWindowFunction, WindowFunction
from ..windowing.context import TriggerStateDescriptor, merge_reducing_state
from ..windowing.trigger_state import merge_function, partitioned_state

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
        user_functions: tuple[Any, ...] = (),
    ) -> None:
        self.reduce = reduce
        self.aggregate = aggregate
        self.process = process  # process(key, context, elements) -> iterable
        self.process_function = process_function  # for clear()
        self.user_functions = user_functions  # every user object, for open/close
        self.incremental = reduce is not None or aggregate is not None


def window_functions(
    *,
    reduce_function: Any = None,
    aggregate_function: AggregateFunction | None = None,
    window_function: Any = None,
    apply_function: Any = None,
) -> WindowFunctions:
    """Resolve the user's window functions (a subtask's own copies) into :class:`WindowFunctions`.

    ``window_function`` is a ``ProcessWindowFunction`` (``process(key, context, elements)``),
    a ``WindowFunction`` (``apply(key, window, inputs)``) or a callable taking
    ``(key, context, elements)``; ``apply_function`` (``WindowedStream.apply``) is a
    ``WindowFunction`` or a callable taking ``(key, window, inputs)``.
    """
    from .basic_operators import resolve_function

    reduce = None if reduce_function is None else resolve_function(reduce_function, "reduce", "reduce()")
    process: Callable[..., Any] | None = None
    process_function = None
    if window_function is not None:
        if isinstance(window_function, WindowFunction) or (
            not isinstance(window_function, ProcessWindowFunction)
            and not callable(window_function)
            and hasattr(window_function, "apply")
        ):
            apply_function, window_function = window_function, None
        else:
            process = resolve_function(window_function, "process", "window function")
            if isinstance(window_function, ProcessWindowFunction):
                process_function = window_function
    if apply_function is not None:
        apply = resolve_function(apply_function, "apply", "apply()")

        def process(key: Any, context: WindowContext, elements: Any) -> Any:
            return apply(key, context.window(), elements)

    user = tuple(
        f for f in (reduce_function, aggregate_function, window_function, apply_function) if f is not None
    )
    return WindowFunctions(
        reduce=reduce,
        aggregate=aggregate_function,
        process=process,
        process_function=process_function,
        user_functions=user,
    )


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

    def window_state(self) -> Any:
        """Keyed state of this key and window (``runtime/window_state.py``)."""
        from .window_state import PerWindowStateStore

        return PerWindowStateStore(self._op, self._window)

    def global_state(self) -> Any:
        """Keyed state of this key, shared by its windows (``runtime/window_state.py``)."""
        from .window_state import global_state_store

        return global_state_store(self._op)

    # TriggerContext (PyFlink's names)
    def get_metric_group(self) -> Any:
        return self._op.ctx.metrics

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

    def get_partitioned_state(self, descriptor: TriggerStateDescriptor) -> Any:
        """A ``TriggerStateDescriptor``'s reducing state, or the state a PyFlink keyed-state
        descriptor declares (``windowing/trigger_state.py``), for this key and window."""
        return partitioned_state(self._trigger_store(), (self._window, descriptor.name), descriptor)

    def merge_partitioned_state(self, descriptor: TriggerStateDescriptor) -> None:
        merge_reducing_state(
            self._trigger_store(),
            [(w, descriptor.name) for w in self._merged],
            (self._window, descriptor.name),
            merge_function(descriptor),
        )
