"""``window_all`` / ``count_window_all``: windows over the whole stream (``AllWindowedStream``).

As in Flink, an all-window operator is not parallel: every record goes to one
subtask (parallelism 1), where it is windowed as a keyed window under one
constant key. ``ProcessAllWindowFunction`` (``process(context, elements)``)
and ``AllWindowFunction`` (``apply(window, inputs)``) run through adapters to
the keyed window functions, keeping their ``open``/``close``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..functions import Function, OutputTag, ProcessWindowFunction, WindowFunction

if TYPE_CHECKING:
    from .datastream import DataStream
    from .windowed import WindowedStream

__all__ = ["AllWindowedStream"]


def _all_key(record: Any) -> int:
    return 0


class _Adapter(Function):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def open(self, runtime_context: Any) -> None:
        if isinstance(self.inner, Function):
            self.inner.open(runtime_context)

    def close(self) -> None:
        if isinstance(self.inner, Function):
            self.inner.close()


class _ProcessAll(_Adapter, ProcessWindowFunction):
    @property
    def clear_target(self) -> Any:
        """Whose ``clear`` this adapter calls (the window operator's fast path checks it)."""
        return self.inner

    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        call = getattr(self.inner, "process", self.inner)
        return call(context, elements)

    def clear(self, context: Any) -> None:
        clear = getattr(self.inner, "clear", None)
        if clear is not None:
            clear(context)


class _ApplyAll(_Adapter, WindowFunction):
    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Iterable[Any]:
        call = getattr(self.inner, "apply", self.inner)
        return call(window, inputs)


class AllWindowedStream:
    def __init__(self, stream: DataStream, window_assigner: Any) -> None:
        from .datastream import KeyedStream
        from .windowed import WindowedStream

        keyed = KeyedStream(stream._env, stream._inputs, _all_key)
        keyed._type_info = stream._type_info
        self._windowed: WindowedStream = WindowedStream(keyed, window_assigner)

    def trigger(self, trigger: Any) -> AllWindowedStream:
        self._windowed.trigger(trigger)
        return self

    def evictor(self, evictor: Any) -> AllWindowedStream:
        self._windowed.evictor(evictor)
        return self

    def allowed_lateness(self, time_ms: int | datetime.timedelta) -> AllWindowedStream:
        self._windowed.allowed_lateness(time_ms)
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> AllWindowedStream:
        self._windowed.side_output_late_data(output_tag)
        return self

    @staticmethod
    def _window_function(fn: Any) -> Any:
        if fn is None:
            return None
        # a ProcessAllWindowFunction has process(context, elements); anything else is applied
        return _ProcessAll(fn) if hasattr(fn, "process") else _ApplyAll(fn)

    def reduce(
        self, reduce_function: Any, window_function: Any = None, output_type: Any = None
    ) -> DataStream:
        stream = self._windowed.reduce(reduce_function, self._window_function(window_function), output_type)
        return stream.force_non_parallel()

    def aggregate(
        self,
        aggregate_function: Any,
        window_function: Any = None,
        accumulator_type: Any = None,
        output_type: Any = None,
    ) -> DataStream:
        stream = self._windowed.aggregate(
            aggregate_function, self._window_function(window_function), accumulator_type, output_type
        )
        return stream.force_non_parallel()

    def process(self, process_window_function: Any, output_type: Any = None) -> DataStream:
        """A ``ProcessAllWindowFunction`` or a callable ``(context, elements)``."""
        return self._windowed.process(_ProcessAll(process_window_function), output_type).force_non_parallel()

    def apply(self, window_function: Callable[..., Any] | Any, output_type: Any = None) -> DataStream:
        """An ``AllWindowFunction`` or a callable ``(window, inputs)``."""
        return self._windowed.apply(_ApplyAll(window_function), output_type).force_non_parallel()
