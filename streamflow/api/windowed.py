"""``WindowedStream``: ``keyed.window(assigner)`` then reduce / aggregate / process / apply."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..functions import AggregateFunction, OutputTag, ProcessWindowFunction, ReduceFunction, WindowFunction
from ..runtime.basic_operators import resolve_function
from ..runtime.factory import OperatorFactory
from ..runtime.window_context import window_functions
from ..runtime.window_operator import WindowOperator
from ..windowing.assigners import WindowAssigner
from ..windowing.evictors import Evictor
from ..windowing.triggers import Trigger
from .environment import to_millis
from .typed import converted

if TYPE_CHECKING:
    from .datastream import DataStream, KeyedStream

WindowFunctionLike = ProcessWindowFunction | WindowFunction | Callable[..., Any]


_log = logging.getLogger(__name__)


class WindowedStream:
    def __init__(self, keyed: KeyedStream, assigner: WindowAssigner) -> None:
        if not hasattr(assigner, "assign_windows"):
            raise TypeError(f"window() expects a WindowAssigner, got {assigner!r}")
        self._keyed = keyed
        self._assigner = assigner
        # Flink's WindowOperatorBuilder asks the assigner for its default trigger here, with the env
        self._trigger: Trigger = assigner.get_default_trigger(keyed.get_execution_environment())
        self._evictor: Evictor | None = None
        self._lateness = 0
        self._late_tag: str | None = None

    def trigger(self, trigger: Trigger) -> WindowedStream:
        if self._assigner.merging and not trigger.can_merge():
            raise ValueError(f"{type(trigger).__name__} cannot be used with a merging window assigner")
        self._trigger = trigger
        return self

    def evictor(self, evictor: Evictor) -> WindowedStream:
        self._evictor = evictor
        return self

    def allowed_lateness(self, time_ms: int | datetime.timedelta) -> WindowedStream:
        ms = to_millis(time_ms, "allowed lateness")
        if ms < 0:
            raise ValueError(f"allowed lateness must be >= 0, got {ms}")
        if ms and not self._assigner.is_event_time():
            # as Flink's WindowOperatorBuilder: lateness only means something in event time
            _log.info("allowed lateness (%d ms) ignored: %s is a processing-time assigner",
                      ms, type(self._assigner).__name__)  # fmt: skip
            ms = 0
        self._lateness = ms
        return self

    def get_execution_environment(self) -> Any:
        return self._keyed.get_execution_environment()

    def get_input_type(self) -> Any:
        return self._keyed.get_type()

    def side_output_late_data(self, output_tag: OutputTag) -> WindowedStream:
        self._late_tag = output_tag.tag_id
        return self

    def reduce(
        self,
        reduce_function: ReduceFunction | Callable[[Any, Any], Any],
        window_function: WindowFunctionLike | None = None,
        output_type: Any = None,
    ) -> DataStream:
        resolve_function(reduce_function, "reduce", "reduce()")
        _check_window_function(window_function)
        stream = self._build(
            "Window(Reduce)", reduce_function=reduce_function, window_function=window_function
        )
        # as PyFlink's: without a window function the result has the input's type unless declared
        declared = output_type
        if output_type is None and window_function is None:
            declared = self._keyed._type_info
        return converted(stream, declared, "reduce()")

    def aggregate(
        self,
        aggregate_function: AggregateFunction,
        window_function: WindowFunctionLike | None = None,
        accumulator_type: Any = None,
        output_type: Any = None,
    ) -> DataStream:
        if not isinstance(aggregate_function, AggregateFunction):
            raise TypeError("aggregate() expects an AggregateFunction")
        _check_window_function(window_function)
        stream = self._build(
            "Window(Aggregate)", aggregate_function=aggregate_function, window_function=window_function
        )
        return converted(stream, output_type, "aggregate()")

    def process(
        self, process_window_function: ProcessWindowFunction | Callable[..., Any], output_type: Any = None
    ) -> DataStream:
        """``process(key, context, elements)``; ``context.window()`` is the window."""
        resolve_function(process_window_function, "process", "process()")
        return converted(
            self._build("Window(Process)", window_function=process_window_function), output_type, "process()"
        )

    def apply(
        self, window_function: WindowFunction | Callable[..., Any], output_type: Any = None
    ) -> DataStream:
        """A ``WindowFunction`` (``apply(key, window, inputs)``) or a callable with those arguments."""
        resolve_function(window_function, "apply", "apply()")
        return converted(self._build("Window(Apply)", apply_function=window_function), output_type, "apply()")

    def _build(
        self,
        name: str,
        *,
        reduce_function: Any = None,
        aggregate_function: AggregateFunction | None = None,
        window_function: Any = None,
        apply_function: Any = None,
    ) -> DataStream:
        keyed = self._keyed
        lateness, tag = self._lateness, self._late_tag

        def build(
            key_selector: Callable[[Any], Any],
            assigner: WindowAssigner,
            trigger: Trigger,
            evictor: Evictor | None,
            reduce_fn: Any,
            aggregate_fn: AggregateFunction | None,
            window_fn: Any,
            apply_fn: Any,
        ) -> WindowOperator:
            functions = window_functions(
                reduce_function=reduce_fn,
                aggregate_function=aggregate_fn,
                window_function=window_fn,
                apply_function=apply_fn,
            )
            return WindowOperator(name, key_selector, assigner, trigger, evictor, lateness, tag, functions)

        factory = OperatorFactory(
            name,
            build,
            keyed.key_selector,
            self._assigner,
            self._trigger,
            self._evictor,
            reduce_function,
            aggregate_function,
            window_function,
            apply_function,
        )
        return keyed._keyed(name, factory)


def _check_window_function(fn: Any) -> None:
    if fn is None or callable(fn) or hasattr(fn, "process") or hasattr(fn, "apply"):
        return
    raise TypeError(
        f"window function: expects a ProcessWindowFunction, a WindowFunction or a callable, got {fn!r}"
    )
