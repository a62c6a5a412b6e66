"""A ``TimeoutError`` an async function raises itself is its error, not the operator's timeout.

PyFlink's async operation (flink-python/pyflink/fn_execution/datastream/process/async_function/
operation.py): ``AsyncFunctionRunner.exception_handler_wrapper`` completes an element
exceptionally with whatever ``async_invoke`` raises, so the retry strategy's exception
predicate sees it (``RetryableResultHandler._process_retry``) or the job fails with it; only the
operator's own timer calls ``timeout()`` (``ResultHandler._timer_triggered``). The same for
batches (``async_batch_operation.py``: ``timeout_batch`` only on the batch's timer). Java's
AsyncWaitOperator likewise: a TimeoutException from the user's future is a user exception.

streamflow took any TimeoutError for its deadline: a client's own timeout (``asyncio.wait_for``
around an HTTP call, aiohttp's timeouts) was never retried and went to ``timeout()``, whose
fallback results were emitted in place of a retry or a failure.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamflow.common import Time, Types
from streamflow.datastream import (
    AsyncBatchFunction,
    AsyncDataStream,
    AsyncFunction,
    AsyncRetryStrategy,
    StreamExecutionEnvironment,
)
from streamflow.testing import ListSink

CALLS: dict[Any, int] = {}


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    CALLS.clear()
    yield


class ClientTimesOutOnce(AsyncFunction):
    """The first call of each input fails with its client's timeout; ``timeout()`` has a
    fallback (-1) for the operator's."""

    async def async_invoke(self, value: int) -> list[int]:
        CALLS[value] = CALLS.get(value, 0) + 1
        if CALLS[value] == 1:
            raise TimeoutError(f"the service did not answer for {value}")
        return [value * 10]

    def timeout(self, value: int) -> list[int]:
        return [-1]


class NeverAnswers(AsyncFunction):
    async def async_invoke(self, value: int) -> list[int]:
        await asyncio.Event().wait()
        return [value]

    def timeout(self, value: int) -> list[int]:
        return [-1]


def _run(wait: Any, function: Any, *args: Any) -> list[Any]:
    env = StreamExecutionEnvironment().set_parallelism(1)
    sink = ListSink()
    stream = env.from_collection([1, 2])
    wait(stream, function, *args, output_type=Types.INT()).sink_to(sink)
    env.execute()
    return sink.results


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
def test_a_timeout_error_of_the_function_is_retried(ordered: bool) -> None:
    """RetryableResultHandler._process_retry: the exception predicate decides for it."""
    retry = AsyncRetryStrategy.fixed_delay(3, 10, None, lambda e: isinstance(e, TimeoutError))
    wait = AsyncDataStream.ordered_wait_with_retry if ordered else AsyncDataStream.unordered_wait_with_retry
    out = _run(wait, ClientTimesOutOnce(), Time.seconds(10), retry)
    assert sorted(out) == [10, 20]
    assert CALLS == {1: 2, 2: 2}


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
def test_a_timeout_error_of_the_function_fails_the_job_without_a_retry(ordered: bool) -> None:
    """ResultHandler.complete_exceptionally: the job fails with the function's error; its
    ``timeout()`` fallback is not emitted."""
    wait = AsyncDataStream.ordered_wait if ordered else AsyncDataStream.unordered_wait
    with pytest.raises(TimeoutError, match="the service did not answer for 1"):
        _run(wait, ClientTimesOutOnce(), Time.seconds(10))


def test_the_operator_deadline_still_calls_timeout() -> None:
    """ResultHandler._timer_triggered: the operator's own timeout gives ``timeout()``'s result."""
    assert _run(AsyncDataStream.unordered_wait, NeverAnswers(), Time.milliseconds(100)) == [-1, -1]


class BatchClientTimesOut(AsyncBatchFunction):
    async def async_invoke_batch(self, inputs: list[int]) -> list[int]:
        raise TimeoutError(f"the model server did not answer for {inputs}")

    def timeout_batch(self, inputs: list[int]) -> list[int]:
        return [-1] * len(inputs)


class BatchNeverAnswers(AsyncBatchFunction):
    async def async_invoke_batch(self, inputs: list[int]) -> list[int]:
        await asyncio.Event().wait()
        return inputs

    def timeout_batch(self, inputs: list[int]) -> list[int]:
        return [-1] * len(inputs)


def test_a_timeout_error_of_a_batch_function_fails_the_job() -> None:
    """async_batch_operation.py: ``timeout_batch`` only on the batch's timer; the function's
    own TimeoutError completes the batch exceptionally (the job fails)."""
    with pytest.raises(TimeoutError, match="the model server did not answer"):
        _run(AsyncDataStream.unordered_wait_batch, BatchClientTimesOut(), Time.seconds(10), 2)


def test_the_batch_deadline_still_calls_timeout_batch() -> None:
    out = _run(AsyncDataStream.unordered_wait_batch, BatchNeverAnswers(), Time.milliseconds(100), 2)
    assert out == [-1, -1]


class TupleAndGenerator(AsyncFunction):
    """Results as a tuple (async_invoke) and a generator (timeout), which PyFlink accepts."""

    async def async_invoke(self, value: int) -> Any:
        if value == 2:
            await asyncio.Event().wait()
        return (value, value * 10)

    def timeout(self, value: int) -> Any:
        return (v for v in (value * 100,))


def test_any_iterable_result_is_accepted_as_in_pyflink() -> None:
    """operation.py ResultHandler._complete_internal: ``isinstance(result, Iterable)``; PyFlink's
    own case for the refusal is test_async_function.py#test_non_iterable_result."""
    out = _run(AsyncDataStream.ordered_wait, TupleAndGenerator(), Time.milliseconds(200))
    assert out == [1, 10, 200]


class StringResult(AsyncFunction):
    async def async_invoke(self, value: int) -> Any:
        return "abc"


def test_a_string_result_is_refused() -> None:
    """PyFlink would split it into characters; streamflow refuses it (loudly) as not a list."""
    with pytest.raises(RuntimeError, match="should be of list type"):
        _run(AsyncDataStream.unordered_wait, StringResult(), Time.seconds(10))
