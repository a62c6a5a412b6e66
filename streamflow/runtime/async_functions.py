"""``async def`` map, filter and flat_map functions on Flink's ``AsyncWaitOperator`` queue.

An ``async def`` function given to ``map``/``filter``/``flat_map`` (a streamflow extension:
PyFlink's own are synchronous) runs as ``AsyncDataStream.ordered_wait`` runs an
``AsyncFunction``: on the same operator (``async_wait.py``'s :class:`AsyncQueueOperator`),
with ``concurrency`` as the queue's capacity. Requests stay in flight across batches,
watermarks and checkpoint barriers, results leave in input order, watermarks keep their
place, and a checkpoint stores the inputs of the requests not yet emitted (a restore
re-issues them). What differs from an ``AsyncFunction`` is only how one call becomes a list
of outputs (:meth:`AsyncUserFunctionOperator.invoke`): a map's result, a filter's input when
the result is true, a flat_map's results; there is no timeout and no retry.
"""

from __future__ import annotations

from typing import Any

from .async_wait import AsyncQueueOperator
from .basic_operators import DEFAULT_ASYNC_CONCURRENCY, resolve_function

__all__ = ["AsyncUserFunctionOperator"]


class AsyncUserFunctionOperator(AsyncQueueOperator):
    """An ``async def`` map (``method="map"``), filter or flat_map, ordered."""

    def __init__(self, name: str, function: Any, method: str, concurrency: int | None = None) -> None:
        super().__init__(name, concurrency or DEFAULT_ASYNC_CONCURRENCY, ordered=True)
        self.functions = (function,)
        self.call = resolve_function(function, method, name)
        self.method = method

    async def invoke(self, value: Any) -> list[Any]:
        result = await self.call(value)
        if self.method == "map":
            return [result]
        if self.method == "filter":
            return [value] if result else []
        return [] if result is None else list(result)
