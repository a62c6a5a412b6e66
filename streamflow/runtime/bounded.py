"""Bounded concurrency for async user code within one batch: the async methods of
``CoMapFunction``/``CoFlatMapFunction`` (``two_input_operators.py``, ``basic_operators.py``).
``async def`` map/filter/flat_map functions run on ``AsyncDataStream``'s
``AsyncWaitOperator`` queue instead (``async_functions.py``), which keeps requests in
flight across batches and checkpoints (``async_wait.py``).

:func:`run_bounded` starts ``call(value)`` for every value of a batch with at most
``capacity`` calls in flight at once (a new one starts as soon as one finishes, as in
Flink's ``AsyncWaitOperator`` queue of ``capacity``), and returns when all have finished:
results in input order, and, for unordered emission, ``on_result(index, result)`` as each
completes. Every call of a batch finishes before the operator returns from the batch, so a
watermark or checkpoint barrier (which travel between batches) never overtakes a pending
call. The first failure cancels the others and is raised in an ``ExceptionGroup`` (the
callers name the operator and the record).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

__all__ = ["run_bounded"]


async def run_bounded(
    call: Callable[[Any], Coroutine[Any, Any, Any]],
    values: Sequence[Any],
    capacity: int,
    on_result: Callable[[int, Any], None] | None = None,
) -> list[Any]:
    if len(values) <= capacity and on_result is None:  # all at once: no semaphore needed
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call(v)) for v in values]
        return [t.result() for t in tasks]
    semaphore = asyncio.Semaphore(capacity)

    async def one(i: int, value: Any) -> Any:
        async with semaphore:
            result = await call(value)
        if on_result is not None:
            on_result(i, result)
        return result

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(one(i, v)) for i, v in enumerate(values)]
    return [t.result() for t in tasks]
