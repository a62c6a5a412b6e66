"""Flink's ``AsyncBatchWaitOperator``: an :class:`AsyncBatchFunction` called on batches of inputs.

PyFlink's ``AsyncDataStream.ordered_wait_batch``/``unordered_wait_batch`` (for model inference
and other services with a batch API) gather inputs into a batch and call
``async_invoke_batch(inputs)`` once for it; the i-th output of the returned list belongs to
the i-th input (an input without one has no output, outputs beyond the inputs are dropped,
as PyFlink's ``BatchResultDistributor`` drops them, with a warning here, once per operator:
Java's ``AsyncBatchWaitOperator`` would emit them, tests/test_async_batch_flink.py).

Each input takes its place in ``async_wait.py``'s queue at once, as an element of
``AsyncDataStream.ordered_wait`` does, so ordering, watermarks, capacity and checkpoints are
the queue's (a checkpoint stores the inputs not yet emitted, whether their batch was called or
not; a restore re-issues them, in new batches). What is added is when a batch is called:

* when it holds ``batch_size`` inputs;
* ``batch_timeout`` after its first input (a processing-time timer; none when the timeout is
  ``None`` or 0);
* whenever the operator waits for a result: the queue is full (capacity) or the input ended.
  A partial batch then cannot grow, and waiting for it would never end.

A batch runs under ``timeout`` from its call, on the job's clock (``async_deadlines.py``); on
expiry ``timeout_batch(inputs)`` gives the outputs (by default it raises ``TimeoutError``); a
``TimeoutError`` the function raises
itself fails the job as any error does (PyFlink's ``exception_handler_wrapper``). A result
that is ``None`` or not a list, or an exception, fails the job with PyFlink's messages.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from .async_deadlines import Deadlines
from .async_wait import AsyncQueueOperator

__all__ = ["AsyncBatchWaitOperator"]

log = logging.getLogger(__name__)


class _Batch:
    __slots__ = ("future", "values")

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.future: asyncio.Future[list[Any]] | None = None


class AsyncBatchWaitOperator(AsyncQueueOperator):
    def __init__(
        self,
        name: str,
        function: Any,
        timeout_ms: int,
        batch_size: int,
        batch_timeout_ms: int | None,
        capacity: int,
        ordered: bool,
    ) -> None:
        super().__init__(name, capacity, ordered)
        self.functions = (function,)
        self.function, self.timeout_ms = function, timeout_ms
        self._deadlines: Deadlines | None = None  # the call timeouts, on the job's clock
        self.batch_size, self.batch_timeout_ms = batch_size, batch_timeout_ms
        self._batch = _Batch()
        self._calls: set[asyncio.Task[None]] = set()
        self._warned_extra = False

    def setup(self, ctx: Any, output: Any) -> None:
        super().setup(ctx, output)
        self._deadlines = Deadlines(ctx.clock, self.timeout_ms)  # (a timeout > 0: async_io.py)

    # -- gathering ---------------------------------------------------------
    def invoke(self, value: Any) -> Coroutine[Any, Any, list[Any]]:
        batch = self._batch
        batch.future = batch.future or asyncio.get_running_loop().create_future()
        index = len(batch.values)
        batch.values.append(value)
        if len(batch.values) >= self.batch_size:
            self._call()
        elif index == 0 and self.batch_timeout_ms:
            service = self.ctx.processing_time
            due = service.current_processing_time() + self.batch_timeout_ms
            service.register(due, self._timeout_mail(batch))
        return self._output_of(batch.future, index)

    def _timeout_mail(self, batch: _Batch) -> Callable[[int], Coroutine[Any, Any, None]]:
        async def fire(_ts: int) -> None:
            if self._batch is batch and batch.values:
                self._call()

        return fire

    async def _wait_progress(self, busy: Callable[[], bool]) -> None:
        if self._batch.values:  # a partial batch cannot grow while the operator waits
            self._call()
        await super()._wait_progress(busy)

    @staticmethod
    async def _output_of(future: asyncio.Future[list[Any]], index: int) -> list[Any]:
        outputs = await future
        return [outputs[index]] if index < len(outputs) else []

    # -- calling -----------------------------------------------------------
    def _call(self) -> None:
        batch, self._batch = self._batch, _Batch()
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    async def _run(self, batch: _Batch) -> None:
        future = batch.future
        assert future is not None
        try:
            deadlines = self._deadlines
            assert deadlines is not None
            # on expiry timeout_batch gives the outputs; the function's own TimeoutError is its error
            function = self.function
            result = await deadlines.run(function.async_invoke_batch, batch.values, function.timeout_batch)
            outputs = self._checked(result)
            if len(outputs) > len(batch.values) and not self._warned_extra:
                self._warned_extra = True
                log.warning(
                    "%s: %s returned %d outputs for a batch of %d inputs: the outputs beyond the "
                    "inputs are dropped, as PyFlink drops them (one output per input, in order)",
                    self.name, type(self.function).__name__, len(outputs), len(batch.values),
                )
        except Exception as exc:  # the inputs' requests fail with it: the job fails (queue)
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(outputs)

    def _checked(self, result: Any) -> list[Any]:
        name = type(self.function).__name__
        if result is None:
            raise RuntimeError(
                "The result of AsyncBatchFunction cannot be none, please check the method "
                f"'async_invoke_batch' and 'timeout_batch' of class '{name}'."
            )
        if not isinstance(result, (list, tuple)):
            raise RuntimeError(
                "The result of AsyncBatchFunction should be of list type, please check the method "
                f"'async_invoke_batch' and 'timeout_batch' of class '{name}' (returned "
                f"{type(result).__name__})."
            )
        return list(result)

    async def close(self) -> None:
        for task in list(self._calls):
            task.cancel()
        await super().close()
