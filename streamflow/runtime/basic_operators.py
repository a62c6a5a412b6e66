"""Stateless operators: map, flat_map, filter, process, sink.

Each does its work per batch with one pass over the records (``map`` and
``filter`` run the loop in C); the only per-record cost is the user's function
call. A ``map`` or ``filter`` function that is one expression over its argument
(``lambda e: e[1] * 2``) is not called at all: its expression runs inlined in a
generated comprehension (``runtime/inline_batch.py``). When a function raises,
the record it was given is found from the list iterator's position and named in
the error. A user function is a plain
callable, a :class:`~streamflow.functions.Function` subclass (``open`` and
``close`` are called), or a coroutine function (at most ``concurrency`` calls in
flight, results in record order: ``runtime/bounded.py``, the machinery of
``AsyncDataStream.ordered_wait`` too).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from itertools import compress
from typing import Any

from ..functions import Function
from .bounded import run_bounded
from .inline_batch import batch_filter, batch_map
from .item_getters import failed_record
from .operator import StreamOperator

DEFAULT_ASYNC_CONCURRENCY = 100


def resolve_function(fn: Any, method: str, what: str) -> Callable[..., Any]:
    """The callable behind a user function: ``fn.<method>`` for Function objects."""
    if isinstance(fn, Function) or (not callable(fn) and hasattr(fn, method)):
        bound = getattr(fn, method, None)
        if bound is None:
            raise TypeError(f"{what}: {type(fn).__name__} has no method {method}()")
        return bound
    if callable(fn):
        return fn
    raise TypeError(f"{what} expects a callable or an object with {method}(), got {fn!r}")


def is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async __call__ on an object
    )


class UserFunctionOperator(StreamOperator):
    """An operator wrapping one user function with its lifecycle."""

    method = ""

    def __init__(self, name: str, function: Any, concurrency: int | None = None) -> None:
        super().__init__(name)
        self.functions = (function,)
        self.call = resolve_function(function, self.method, name)
        self.is_async = is_async(self.call)
        self.concurrency = concurrency or DEFAULT_ASYNC_CONCURRENCY

    async def apply(self, records: list, call: Callable[..., Any], is_async: bool) -> list:
        """``[call(record) for record in records]``, awaited in order when ``call`` is async;
        an error names this operator and the record."""
        if not is_async:
            it = iter(records)
            try:
                return list(map(call, it))  # the loop in C: bytecode only in the call
            except Exception as exc:
                record = failed_record(records, it)  # a local named record: found even when None
                raise self.failure(exc, record) from None
        try:
            return await run_bounded(call, records, self.concurrency)
        except BaseExceptionGroup as group:
            raise self.failure(_first_error(group)) from None
        except Exception as exc:
            raise self.failure(exc) from None

    def run_inlined(self, run: Callable[[Iterator[Any]], list], records: list) -> list:
        """``run(iter(records))``, a generated comprehension (``runtime/inline_batch.py``); an
        error names this operator and the record, found from the iterator's position."""
        it = iter(records)
        try:
            return run(it)
        except Exception as exc:
            record = failed_record(records, it)  # a local named record: found even when None
            raise self.failure(exc, record) from None


def _first_error(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


class MapOperator(UserFunctionOperator):
    method = "map"

    def __init__(self, name: str, function: Any, concurrency: int | None = None) -> None:
        super().__init__(name, function, concurrency)
        # a function that is one expression over its argument runs inlined in a comprehension
        self.inlined = None if self.is_async else batch_map(self.call)  # (runtime/inline_batch.py)

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if self.inlined is not None:
            await self.output.push(self.run_inlined(self.inlined, records), timestamps)
            return
        await self.output.push(await self.apply(records, self.call, self.is_async), timestamps)


class FilterOperator(UserFunctionOperator):
    method = "filter"

    def __init__(self, name: str, function: Any, concurrency: int | None = None) -> None:
        super().__init__(name, function, concurrency)
        # the predicate inlined (runtime/inline_batch.py): the kept records, and its values
        self.inlined_filter = None if self.is_async else batch_filter(self.call)
        self.inlined = None if self.inlined_filter is None else batch_map(self.call)

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if timestamps is None and not self.is_async:
            if self.inlined_filter is not None:
                out = self.run_inlined(self.inlined_filter, records)
            else:
                it = iter(records)
                try:
                    out = list(filter(self.call, it))  # the loop in C
                except Exception as exc:
                    record = failed_record(records, it)  # a local named record: found even when None
                    raise self.failure(exc, record) from None
            if out:
                await self.output.push(out, None)
            return
        if self.inlined is not None:
            keep = self.run_inlined(self.inlined, records)
        else:
            keep = await self.apply(records, self.call, self.is_async)
        out = list(compress(records, keep))
        if out:
            await self.output.push(out, None if timestamps is None else list(compress(timestamps, keep)))


class FlatMapOperator(UserFunctionOperator):
    method = "flat_map"

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        await self._flat_map(records, timestamps, self.call, self.is_async)

    async def _flat_map(
        self, records: list, timestamps: list[int] | None, call: Callable[..., Any], is_async: bool
    ) -> None:
        results: list[Iterable[Any] | None] = await self.apply(records, call, is_async)
        try:
            out, out_ts = expand(results, timestamps)
        except Exception as exc:  # a generator that fails while it is being drained
            raise self.failure(exc) from None
        if out:
            await self.output.push(out, out_ts)


def expand(
    results: list[Iterable[Any] | None], timestamps: list[int] | None
) -> tuple[list, list[int] | None]:
    """Flatten flat_map results; each output keeps its input record's timestamp."""
    out: list = []
    if timestamps is None:
        for result in results:
            if result is not None:
                out.extend(result)
        return out, None
    out_ts: list[int] = []
    for result, ts in zip(results, timestamps, strict=True):
        if result is not None:
            n = len(out)
            out.extend(result)
            out_ts.extend([ts] * (len(out) - n))
    return out, out_ts


class SinkOperator(UserFunctionOperator):
    """Writes to a :class:`~streamflow.functions.SinkFunction` or a callable per record."""

    method = "invoke"

    def __init__(self, name: str, function: Any) -> None:
        super().__init__(name, function)
        write_batch = getattr(function, "write_batch", None)
        self.write_batch: Callable[[list], Any] | None = write_batch

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        try:
            if self.write_batch is not None:
                result = self.write_batch(records)
                if result is not None and inspect.isawaitable(result):  # None: no isinstance chain
                    await result
            elif self.is_async:
                await self.apply(records, self.call, True)
            else:
                call = self.call
                for record in records:
                    call(record)
        except BaseExceptionGroup as group:
            raise self.failure(_first_error(group)) from None
        except Exception as exc:
            raise self.failure(exc) from None
