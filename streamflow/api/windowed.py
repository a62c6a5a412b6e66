"""``WindowedStream``: ``keyed.window(assigner)`` then reduce / aggregate / process."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..functions import AggregateFunction, OutputTag, ProcessWindowFunction, ReduceFunction
from ..runtime.basic_operators import resolve_function
from ..runtime.window_operator import WindowFunctions, WindowOperator
from .environment import to_millis

if TYPE_CHECKING:
    from ..windowing.assigners import WindowAssigner
    from ..windowing.evictors import Evictor
    from ..windowing.triggers import Trigger
    from .datastream import DataStream, KeyedStream


class WindowedStream:
    def __init__(self, keyed: KeyedStream, assigner: WindowAssigner) -> None:
        if not hasattr(assigner, "assign_windows"):
            raise TypeError(f"window() expects a WindowAssigner, got {assigner!r}")
        self._keyed = keyed
        self._assigner = assigner
        self._trigger: Trigger | None = None
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
            raise ValueError("allowed lateness applies to event-time windows only")
        self._lateness = ms
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> WindowedStream:
        self._late_tag = output_tag.tag_id
        return self

    def reduce(
        self,
        reduce_function: ReduceFunction | Callable[[Any, Any], Any],
        window_function: ProcessWindowFunction | Callable[..., Any] | None = None,
    ) -> DataStream:
        fn = resolve_function(reduce_function, "reduce", "reduce()")
        return self._build("Window(Reduce)", WindowFunctions(reduce=fn, **_process(window_function)))

    def aggregate(
        self,
        aggregate_function: AggregateFunction,
        window_function: ProcessWindowFunction | Callable[..., Any] | None = None,
    ) -> DataStream:
        if not isinstance(aggregate_function, AggregateFunction):
            raise TypeError("aggregate() expects an AggregateFunction")
        return self._build(
            "Window(Aggregate)", WindowFunctions(aggregate=aggregate_function, **_process(window_function))
        )

    def process(self, process_window_function: ProcessWindowFunction | Callable[..., Any]) -> DataStream:
        return self._build("Window(Process)", WindowFunctions(**_process(process_window_function)))

    def apply(self, window_function: Callable[..., Any]) -> DataStream:
        """``fn(key, window, elements) -> iterable`` (Flink's WindowFunction)."""
        return self.process(lambda key, ctx, elements: window_function(key, ctx.window, elements))

    def _build(self, name: str, functions: WindowFunctions) -> DataStream:
        keyed, assigner = self._keyed, self._assigner
        trigger, evictor, lateness, tag = self._trigger, self._evictor, self._lateness, self._late_tag
        return keyed._keyed(
            name,
            lambda s: WindowOperator(
                name, keyed.key_selector, assigner, trigger, evictor, lateness, tag, functions
            ),
        )


def _process(fn: Any) -> dict[str, Any]:
    if fn is None:
        return {}
    call = resolve_function(fn, "process", "window function")
    return {"process": call, "process_function": fn if isinstance(fn, ProcessWindowFunction) else None}
