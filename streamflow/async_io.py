"""Async I/O as in PyFlink 2.2: ``AsyncDataStream.ordered_wait`` / ``unordered_wait`` (``_with_retry``).

An :class:`AsyncFunction`'s ``async_invoke(value)`` returns a list of outputs.
The operator (:class:`AsyncWaitOperator`) runs up to ``capacity`` invocations
at once in the job's event loop, each bounded by ``timeout`` on the job's clock
(``runtime/async_deadlines.py``; none if <= 0, as in Flink; one for the element,
its retries and backoffs included; then ``async_function.timeout(value)`` gives
the outputs, or raises); a retry strategy re-invokes after its backoff (on the
job's clock too) while its result or exception
predicate asks for it and attempts remain (Flink's ``AsyncWaitOperator`` with
``RetryableResultHandlerDelegator``). Ordered mode emits in input order;
unordered mode in completion order.

Requests stay in flight across batches, watermarks and checkpoint barriers;
a checkpoint stores the inputs of the requests not yet emitted and a restore
re-issues them (``runtime/async_wait.py``: Flink's queue, watermark segments
and snapshot). Rules as in Flink's ``AsyncWaitOperator``,
``AsyncRetryStrategies`` and ``RetryPredicates``.
"""

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from .functions import Function
from .runtime.async_deadlines import Deadlines, backoff
from .runtime.async_wait import AsyncQueueOperator

__all__ = [
    "NO_RETRY_STRATEGY",
    "AsyncBatchFunction",
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncFunctionDescriptor",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "AsyncWaitOperator",
    "ExponentialBackoffDelayRetryStrategy",
    "FixedDelayRetryStrategy",
    "NoRetryStrategy",
    "RetryPredicate",
    "empty_result_predicate",
    "exception_type_predicate",
    "has_exception_predicate",
]

log = logging.getLogger(__name__)


class AsyncFunction(Function):
    async def async_invoke(self, value: Any) -> list[Any]:
        raise NotImplementedError

    def timeout(self, value: Any) -> list[Any]:
        raise TimeoutError(f"Async function call has timed out for input: {value}")


class AsyncBatchFunction(Function):
    """PyFlink's ``AsyncBatchFunction``: ``async_invoke_batch(inputs)`` returns one output
    per input, in their order (``AsyncDataStream.ordered_wait_batch``/``unordered_wait_batch``;
    ``runtime/async_batch.py``)."""

    async def async_invoke_batch(self, inputs: list[Any]) -> list[Any]:
        raise NotImplementedError

    def timeout_batch(self, inputs: list[Any]) -> list[Any]:
        raise TimeoutError(f"Async batch function call has timed out for a batch of {len(inputs)} inputs")


class AsyncRetryPredicate:
    def __class_getitem__(cls, item: Any) -> type:  # generic, as PyFlink's
        return cls

    def result_predicate(self) -> Callable[[list[Any]], bool] | None:
        return None

    def exception_predicate(self) -> Callable[[Exception], bool] | None:
        return None


class AsyncRetryStrategy:
    def __class_getitem__(cls, item: Any) -> type:  # generic, as PyFlink's
        return cls

    def can_retry(self, current_attempts: int) -> bool:
        raise NotImplementedError

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        raise NotImplementedError

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        raise NotImplementedError

    @staticmethod
    def no_restart() -> AsyncRetryStrategy:
        return NO_RETRY_STRATEGY

    @staticmethod
    def fixed_delay(
        max_attempts: int,
        backoff_time_millis: int,
        result_predicate: Callable[[list[Any]], bool] | None = None,
        exception_predicate: Callable[[Exception], bool] | None = None,
    ) -> AsyncRetryStrategy:
        return FixedDelayRetryStrategy(
            max_attempts, backoff_time_millis, result_predicate, exception_predicate
        )

    @staticmethod
    def exponential_backoff(
        max_attempts: int,
        initial_delay: int,
        max_retry_delay: int,
        multiplier: float,
        result_predicate: Callable[[list[Any]], bool] | None = None,
        exception_predicate: Callable[[Exception], bool] | None = None,
    ) -> AsyncRetryStrategy:
        return ExponentialBackoffDelayRetryStrategy(
            max_attempts, initial_delay, max_retry_delay, multiplier, result_predicate, exception_predicate
        )


class RetryPredicate(AsyncRetryPredicate):
    def __init__(
        self, result: Callable[[list[Any]], bool] | None, exception: Callable[[Exception], bool] | None
    ):
        self._result, self._exception = result, exception

    def result_predicate(self) -> Callable[[list[Any]], bool] | None:
        return self._result

    def exception_predicate(self) -> Callable[[Exception], bool] | None:
        return self._exception


class NoRetryStrategy(AsyncRetryStrategy):
    def can_retry(self, current_attempts: int) -> bool:
        return False

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return -1

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return RetryPredicate(None, None)


class FixedDelayRetryStrategy(AsyncRetryStrategy):
    def __init__(
        self,
        max_attempts: int,
        backoff_time_millis: int,
        result_predicate: Callable[[list[Any]], bool] | None = None,
        exception_predicate: Callable[[Exception], bool] | None = None,
    ) -> None:
        _check(max_attempts > 0, "max_attempts should be greater than zero.")
        _check(backoff_time_millis > 0, "backoff_time_millis should be greater than zero.")
        self._max_attempts, self._backoff = max_attempts, int(backoff_time_millis)
        self._predicate = RetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return self._backoff

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return self._predicate


class ExponentialBackoffDelayRetryStrategy(AsyncRetryStrategy):
    def __init__(
        self,
        max_attempts: int,
        initial_delay: int,
        max_retry_delay: int,
        multiplier: float,
        result_predicate: Callable[[list[Any]], bool] | None = None,
        exception_predicate: Callable[[Exception], bool] | None = None,
    ) -> None:
        _check(max_attempts > 0, "max_attempts should be greater than zero.")
        _check(initial_delay > 0, "initial_delay should be greater than zero.")
        _check(max_retry_delay > 0, "max_retry_delay should be greater than zero.")
        _check(multiplier > 0, "multiplier should be greater than zero.")
        self._max_attempts, self._initial, self._max_delay = (
            max_attempts,
            int(initial_delay),
            int(max_retry_delay),
        )
        self._multiplier = multiplier
        self._predicate = RetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        """PyFlink's delays: ``initial``, then each the previous one times ``multiplier``,
        truncated to an int and capped at ``max_retry_delay``. Computed from the attempt number
        alone (PyFlink keeps the last delay in the strategy, shared by every request in flight;
        for one request the values are the same, concurrent requests do not disturb each other's)."""
        delay = self._initial
        for _ in range(max(0, current_attempts - 1)):
            delay = int(min(delay * self._multiplier, self._max_delay))
            if delay == self._max_delay:
                break
        return delay

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return self._predicate


NO_RETRY_STRATEGY = NoRetryStrategy()


def _check(condition: bool, message: str) -> None:
    """PyFlink asserts its strategies' arguments (``AssertionError`` with these messages)."""
    if not condition:
        raise AssertionError(message)


def empty_result_predicate(result: list[Any]) -> bool:
    return result is None or len(result) == 0


def has_exception_predicate(error: Exception) -> bool:
    return error is not None


def exception_type_predicate(error: Exception, expected_error_type: type) -> bool:
    return isinstance(error, expected_error_type)


class AsyncFunctionDescriptor:
    class OutputMode(enum.Enum):
        ORDERED = 0
        UNORDERED = 1

    def __init__(
        self,
        async_function: AsyncFunction,
        timeout: int,
        capacity: int,
        async_retry_strategy: AsyncRetryStrategy,
        output_mode: AsyncFunctionDescriptor.OutputMode,
    ):
        self.async_function, self.timeout, self.capacity = async_function, int(timeout), capacity
        self.async_retry_strategy, self.output_mode = async_retry_strategy, output_mode


class AsyncWaitOperator(AsyncQueueOperator):
    """Flink's ``AsyncWaitOperator``: the queue, emission and checkpointing of the requests
    are ``runtime/async_wait.py``'s; this class runs one request (timeout, retries)."""
    def __init__(
        self,
        name: str,
        function: AsyncFunction,
        timeout_ms: int,
        capacity: int,
        retry: AsyncRetryStrategy,
        ordered: bool,
    ) -> None:
        super().__init__(name, capacity, ordered)
        self.functions = (function,)
        # Flink's AsyncWaitOperator#processElement registers a timeout only if it is > 0
        self.function, self.timeout_ms = function, timeout_ms
        self.retry = retry
        self._deadlines: Deadlines | None = None

    def setup(self, ctx: Any, output: Any) -> None:
        super().setup(ctx, output)
        # timeouts and backoffs on the job's clock, as Flink's on its processing-time service
        if self.timeout_ms > 0:
            self._deadlines = Deadlines(ctx.clock, self.timeout_ms)

    def _timed_out(self, value: Any) -> list[Any]:
        return self._checked(self.function.timeout(value), "timeout")

    async def _attempts(self, value: Any) -> list[Any]:
        predicate = self.retry.get_retry_predicate()
        on_result, on_error = predicate.result_predicate(), predicate.exception_predicate()
        attempt = 1
        while True:
            try:
                result = await self.function.async_invoke(value)
            except Exception as exc:  # (the deadline cancels: CancelledError is no Exception)
                if on_error is not None and on_error(exc) and self.retry.can_retry(attempt):
                    log.info("%s: retrying %r after %s (attempt %d)", self.name, value, exc, attempt)
                else:
                    raise
            else:
                result = self._checked(result, "async_invoke")
                if not (on_result is not None and on_result(result) and self.retry.can_retry(attempt)):
                    return result
            await backoff(self.ctx.clock, self.retry.get_backoff_time_millis(attempt))
            attempt += 1

    def _checked(self, result: Any, method: str) -> list[Any]:
        """PyFlink's rule: the outputs of ``async_invoke``/``timeout`` are a collection (``[]``
        for none): ``ResultHandler._complete_internal`` takes any ``Iterable`` (a tuple, a
        generator) and refuses the rest. A ``str`` or ``bytes``, which PyFlink would split into
        its characters, is refused as not a list (a loud difference, not a silent one)."""
        if type(result) is not list and isinstance(result, Iterable) and not isinstance(result, (str, bytes)):
            result = list(result)
        if result is None:
            raise RuntimeError(
                f"The result of AsyncFunction cannot be none, please use empty list instead "
                f"(returned by {type(self.function).__name__}.{method})"
            )
        if not isinstance(result, list):
            raise RuntimeError(
                f"The result of AsyncFunction should be of list type, please check the methods "
                f"'async_invoke' and 'timeout' of class '{type(self.function).__name__}' ({method} "
                f"returned {type(result).__name__})"
            )
        return result

    def invoke(self, value: Any) -> Coroutine[Any, Any, list[Any]]:
        # one timeout for the element, retries and backoffs included (Flink registers the
        # timeout once per element; one expiring during a backoff cancels the retry). Only
        # this deadline calls ``timeout()``: a TimeoutError the function raises itself (its
        # client's own timeout) is an error like any other, retried by the strategy's
        # exception predicate or failing the job, as PyFlink's exception_handler_wrapper
        # completes the element exceptionally with it
        deadlines = self._deadlines
        if deadlines is None:
            return self._attempts(value)
        return deadlines.run(self._attempts, value, self._timed_out)


class AsyncDataStream:
    @staticmethod
    def _wait(
        data_stream: Any,
        async_function: AsyncFunction,
        timeout: int,
        retry: AsyncRetryStrategy,
        capacity: int,
        output_type: Any,
        ordered: bool,
    ) -> Any:
        from .api.typed import typed
        from .runtime.factory import OperatorFactory

        if not isinstance(async_function, AsyncFunction):
            raise TypeError(f"AsyncDataStream expects an AsyncFunction, got {async_function!r}")
        if capacity <= 0:  # (a timeout <= 0 is none: Flink's AsyncWaitOperator registers none)
            raise ValueError(f"capacity must be positive, got {capacity!r}")
        name = "AsyncWaitOperator"
        factory = OperatorFactory(
            name, lambda f: AsyncWaitOperator(name, f, int(timeout), capacity, retry, ordered), async_function
        )
        return typed(data_stream._one_input(name, factory), output_type)

    @staticmethod
    def _wait_batch(
        data_stream: Any,
        function: AsyncBatchFunction,
        timeout: Any,
        batch_size: int,
        batch_timeout: Any,
        capacity: int,
        output_type: Any,
        ordered: bool,
    ) -> Any:
        """PyFlink's ``_validate_batch`` checks, then ``runtime/async_batch.py``'s operator."""
        from .api.typed import typed
        from .runtime.async_batch import AsyncBatchWaitOperator
        from .runtime.factory import OperatorFactory

        if not inspect.iscoroutinefunction(getattr(function, "async_invoke_batch", None)):
            raise TypeError(
                f"Method 'async_invoke_batch' of class '{type(function)}' should be declared as 'async def'."
            )
        if batch_size <= 0:
            raise ValueError(f"Batch size must be positive, got: {batch_size}")
        if timeout is None or int(timeout) <= 0:
            raise ValueError("Timeout must be positive for async batch operations.")
        if batch_timeout is not None and int(batch_timeout) < 0:
            raise ValueError(f"Batch timeout cannot be negative, got: {int(batch_timeout)} ms")
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity!r}")
        name = "async batch wait operator" + (" (ordered)" if ordered else "")
        flush_ms = None if batch_timeout is None else int(batch_timeout)
        factory = OperatorFactory(
            name,
            lambda f: AsyncBatchWaitOperator(
                name, f, int(timeout), batch_size, flush_ms, capacity, ordered
            ),
            function,
        )
        return typed(data_stream._one_input(name, factory), output_type)

    @staticmethod
    def ordered_wait_batch(
        data_stream: Any,
        async_batch_function: AsyncBatchFunction,
        timeout: Any,
        batch_size: int,
        batch_timeout: Any = None,
        capacity: int = 100,
        output_type: Any = None,
    ) -> Any:
        return AsyncDataStream._wait_batch(
            data_stream, async_batch_function, timeout, batch_size, batch_timeout, capacity, output_type, True
        )

    @staticmethod
    def unordered_wait_batch(
        data_stream: Any,
        async_batch_function: AsyncBatchFunction,
        timeout: Any,
        batch_size: int,
        batch_timeout: Any = None,
        capacity: int = 100,
        output_type: Any = None,
    ) -> Any:
        return AsyncDataStream._wait_batch(
            data_stream, async_batch_function, timeout, batch_size, batch_timeout, capacity, output_type,
            False,
        )

    @staticmethod
    def ordered_wait(
        data_stream: Any,
        async_function: AsyncFunction,
        timeout: int,
        capacity: int = 100,
        output_type: Any = None,
    ) -> Any:
        return AsyncDataStream._wait(
            data_stream,
            async_function,
            timeout,
            NO_RETRY_STRATEGY,
            capacity,
            output_type,
            True,
        )

    @staticmethod
    def unordered_wait(
        data_stream: Any,
        async_function: AsyncFunction,
        timeout: int,
        capacity: int = 100,
        output_type: Any = None,
    ) -> Any:
        return AsyncDataStream._wait(
            data_stream,
            async_function,
            timeout,
            NO_RETRY_STRATEGY,
            capacity,
            output_type,
            False,
        )

    @staticmethod
    def ordered_wait_with_retry(
        data_stream: Any,
        async_function: AsyncFunction,
        timeout: int,
        async_retry_strategy: AsyncRetryStrategy,
        capacity: int = 100,
        output_type: Any = None,
    ) -> Any:
        return AsyncDataStream._wait(
            data_stream, async_function, timeout, async_retry_strategy, capacity, output_type, True
        )

    @staticmethod
    def unordered_wait_with_retry(
        data_stream: Any,
        async_function: AsyncFunction,
        timeout: int,
        async_retry_strategy: AsyncRetryStrategy,
        capacity: int = 100,
        output_type: Any = None,
    ) -> Any:
        return AsyncDataStream._wait(
            data_stream, async_function, timeout, async_retry_strategy, capacity, output_type, False
        )
