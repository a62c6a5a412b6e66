"""Async I/O timeouts and retry backoffs run on the job's clock (processing time), as Flink's
``AsyncWaitOperator`` registers them on its processing-time service: flink-streaming-java/src/
test/java/org/apache/flink/streaming/api/operators/async/AsyncWaitOperatorTest.java
(testTimeoutCleanup / testProcessingTimeWithTimeoutFunction*: the harness's
``setProcessingTime`` times the element out) and AsyncBatchWaitOperatorTest (the batch call's
timeout). Each job runs with a :class:`ManualClock`: a timeout of 10 s (of the job's clock) fires
when the clock passes it, at once in wall time, and not before, however long the test waits.
"""

from __future__ import annotations

import asyncio
from typing import Any

from streamflow.common import Time, Types
from streamflow.datastream import (
    AsyncBatchFunction,
    AsyncDataStream,
    AsyncFunction,
    AsyncRetryStrategy,
    StreamExecutionEnvironment,
)
from streamflow.datastream import async_retry_predicates as predicates
from streamflow.runtime.async_deadlines import Deadlines
from streamflow.testing import ListSink, ManualClock, Record, ScriptedSource

TIMEOUT_MS = 10_000

CALLS: list[int] = []


class Never(AsyncFunction):
    """Never answers (a hung service); its timeout gives ``-value``."""

    async def async_invoke(self, value: int) -> list[int]:
        await asyncio.Event().wait()
        return []

    def timeout(self, value: int) -> list[int]:
        return [-value]


class NeverBatch(AsyncBatchFunction):
    async def async_invoke_batch(self, inputs: list[int]) -> list[int]:
        await asyncio.Event().wait()
        return []

    def timeout_batch(self, inputs: list[int]) -> list[int]:
        return [-i for i in inputs]


class EmptyThenAnswer(AsyncFunction):
    """An empty result on the first call of a value (retried by the strategy), then ``value``."""

    async def async_invoke(self, value: int) -> list[int]:
        CALLS.append(value)
        return [] if CALLS.count(value) == 1 else [value]


async def _settle() -> None:
    for _ in range(200):
        await asyncio.sleep(0)


async def _job(build: Any) -> tuple[ManualClock, ScriptedSource, ListSink, Any]:
    clock = ManualClock()
    env = StreamExecutionEnvironment(clock=clock).set_parallelism(1)
    source = ScriptedSource([], end=False)
    sink = ListSink()
    build(env.from_source(source, None, "in")).sink_to(sink)
    client = await env.execute_async("async-clock")
    await _settle()
    return clock, source, sink, client


async def _finish(source: ScriptedSource, client: Any) -> None:
    source.finish()
    await asyncio.wait_for(client.get_job_execution_result(), 30)


async def test_element_timeout_fires_on_the_jobs_clock() -> None:
    """The element's timeout fires when the job's clock reaches it (Flink: the harness's
    processing time), not before, and not by the event loop's time."""
    clock, source, sink, client = await _job(
        lambda s: AsyncDataStream.ordered_wait(s, Never(), Time.milliseconds(TIMEOUT_MS), 10, Types.INT())
    )
    source.push(Record(1, 5))
    await _settle()
    clock.set(TIMEOUT_MS - 1)
    await asyncio.sleep(0.05)
    assert sink.results == []
    source.push(Record(2, 6))  # started at TIMEOUT_MS - 1: times out a millisecond later
    await _settle()
    clock.set(TIMEOUT_MS)
    await _settle()
    assert sink.results == [-1]
    clock.set(2 * TIMEOUT_MS - 1)
    await _settle()
    assert sink.results == [-1, -2]
    await _finish(source, client)


async def test_batch_call_timeout_fires_on_the_jobs_clock() -> None:
    """AsyncBatchWaitOperator: a batch call's timeout is the job's clock's too."""
    clock, source, sink, client = await _job(
        lambda s: AsyncDataStream.unordered_wait_batch(
            s, NeverBatch(), Time.milliseconds(TIMEOUT_MS), 2, None, output_type=Types.INT()
        )
    )
    source.push(Record(1, 5))
    source.push(Record(2, 6))
    await _settle()
    clock.set(TIMEOUT_MS - 1)
    await asyncio.sleep(0.05)
    assert sink.results == []
    clock.set(TIMEOUT_MS)
    await _settle()
    assert sorted(sink.results) == [-2, -1]
    await _finish(source, client)


async def test_retry_backoff_waits_for_the_jobs_clock() -> None:
    """A retry waits for its backoff on the job's clock (Flink's RetryableResultHandlerDelegator
    registers a processing-time timer), then runs."""
    CALLS.clear()
    strategy = AsyncRetryStrategy.fixed_delay(2, 1_000, predicates.empty_result_predicate)
    clock, source, sink, client = await _job(
        lambda s: AsyncDataStream.ordered_wait_with_retry(
            s, EmptyThenAnswer(), Time.milliseconds(TIMEOUT_MS), strategy, 10, Types.INT()
        )
    )
    source.push(Record(7, 5))
    await _settle()
    await asyncio.sleep(0.05)
    assert CALLS == [7] and sink.results == []
    clock.set(1_000)
    await _settle()
    assert CALLS == [7, 7] and sink.results == [7]
    await _finish(source, client)


def _late(arg: Any) -> tuple[str, Any]:
    return "late", arg


async def _now(arg: Any) -> Any:
    return arg


async def _never(arg: Any) -> Any:
    await asyncio.Event().wait()


async def test_requests_of_one_millisecond_share_one_alarm() -> None:
    """The hot path: requests started in the same millisecond share one clock alarm; the alarm
    of a group that emptied and is no longer current is cancelled; a request started in one
    millisecond and still running when the next one starts keeps its group's alarm (a batch's
    requests started before a later one's: the Spark engine feeds them so)."""
    clock = ManualClock()
    deadlines = Deadlines(clock, 100)
    results = await asyncio.gather(*(deadlines.run(_now, i, _late) for i in range(3)))
    assert results == [0, 1, 2]
    assert len(clock._scheduled) == 1
    hung = asyncio.ensure_future(deadlines.run(_never, "x", _late))
    await _settle()
    clock.set(1)  # the first group (empty) is cancelled once a request starts a new one
    quick = asyncio.ensure_future(deadlines.run(_never, "x", _late))
    await _settle()
    assert sum(not h.cancelled for _, _, h in clock._scheduled) == 2  # ms 0 (hung) and ms 1
    clock.set(100)
    assert await hung == ("late", "x") and not quick.done()
    clock.set(101)
    assert await quick == ("late", "x")
    clock.set(200)
    assert await deadlines.run(_now, "quick", _late) == "quick"
    clock.set(201)
    assert await deadlines.run(_now, "next", _late) == "next"
    live = sorted(at for at, _, h in clock._scheduled if not h.cancelled)
    assert live == [301]  # ms 200's alarm cancelled: its group emptied and is not current


class EmptyTimeoutNegative(EmptyThenAnswer):
    def timeout(self, value: int) -> list[int]:
        return [-value]


async def test_timeout_during_a_backoff_cancels_the_retry() -> None:
    """One timeout per element, its backoffs included (Flink's AsyncWaitOperator: the timeout
    timer completes the element and the pending retry timer is cancelled): a timeout reached
    while a retry waits for its backoff times the element out; the retry never runs."""
    CALLS.clear()
    strategy = AsyncRetryStrategy.fixed_delay(2, 5_000, predicates.empty_result_predicate)
    clock, source, sink, client = await _job(
        lambda s: AsyncDataStream.ordered_wait_with_retry(
            s, EmptyTimeoutNegative(), Time.milliseconds(3_000), strategy, 10, Types.INT()
        )
    )
    source.push(Record(7, 5))
    await _settle()
    clock.set(3_000)
    await _settle()
    assert sink.results == [-7]
    clock.set(5_000)
    await _settle()
    assert CALLS == [7]
    await _finish(source, client)
