"""Flink's AsyncWaitOperatorTest restore cases, ported through the public API: a savepoint taken
with calls in flight, and a job restored from it with another function, capacity or
parallelism (flink-streaming-java/src/test/java/org/apache/flink/streaming/api/operators/async/
AsyncWaitOperatorTest.java).

Flink's harnesses become jobs over a fed :class:`ScriptedSource`; ``LazyAsyncFunction`` (calls
that complete only when the test says so) is :class:`Lazy`, whose calls never complete in the
first job. A restored source skips what the first job consumed, so the second job's script
repeats it first (``Job(consumed=...)``). The records reach a ``ProcessFunction`` that records
each with its timestamp and the watermark it saw, at parallelism 1, as the harness's output.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

import streamflow as sf
from streamflow.common import Time, Types
from streamflow.datastream import (
    AsyncDataStream,
    AsyncFunction,
    AsyncRetryStrategy,
    StreamExecutionEnvironment,
)
from streamflow.datastream.functions import ProcessFunction
from streamflow.runtime.events import MIN_WATERMARK
from streamflow.testing import ListSink, Record, ScriptedSource

STARTED: list[Any] = []
ATTEMPTS: dict[Any, int] = {}


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    STARTED.clear()
    ATTEMPTS.clear()
    yield


class Lazy(AsyncFunction):
    """Flink's LazyAsyncFunction whose latch is never counted down: the calls stay in flight."""

    async def async_invoke(self, value: int) -> list[int]:
        STARTED.append(value)
        await asyncio.Event().wait()
        return [value]


class Doubling(AsyncFunction):
    """Flink's MyAsyncFunction: ``value * 2``."""

    async def async_invoke(self, value: int) -> list[int]:
        await asyncio.sleep(0.001 * (value % 3))  # complete out of order
        return [value * 2]


class NeverCompletes(AsyncFunction):
    """Calls that never complete; ``timeout`` gives ``value * 3`` (IgnoreTimeoutLazyAsyncFunction)."""

    async def async_invoke(self, value: int) -> list[int]:
        await asyncio.Event().wait()
        return [value]

    def timeout(self, value: int) -> list[int]:
        return [value * 3]


class FailsOnce(AsyncFunction):
    """The first call of each input raises a retryable error, the second doubles it."""

    async def async_invoke(self, value: int) -> list[int]:
        ATTEMPTS[value] = ATTEMPTS.get(value, 0) + 1
        if ATTEMPTS[value] == 1:
            raise ConnectionError(f"transient failure for {value}")
        return [value * 2]


class Stamped(ProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        ts = ctx.timestamp()
        yield value, (None if ts == MIN_WATERMARK else ts), ctx.timer_service().current_watermark()


class Job:
    def __init__(
        self,
        function: AsyncFunction,
        *,
        ordered: bool = True,
        capacity: int = 10,
        parallelism: int = 1,
        timeout_ms: int = 30_000,
        retry: AsyncRetryStrategy | None = None,
        savepoint: str | None = None,
        consumed: tuple = (),
    ) -> None:
        self.source = ScriptedSource(list(consumed), end=False)
        self.env = StreamExecutionEnvironment().set_parallelism(parallelism)
        if savepoint is not None:
            self.env.configure({"execution.savepoint.path": savepoint})
        stream = self.env.from_source(self.source, None, "in").uid("in").set_parallelism(1)
        if parallelism > 1:
            stream = stream.rebalance()
        timeout = Time.milliseconds(timeout_ms)
        if retry is not None:
            with_retry = AsyncDataStream.ordered_wait_with_retry
            if not ordered:
                with_retry = AsyncDataStream.unordered_wait_with_retry
            out = with_retry(stream, function, timeout, retry, capacity, output_type=Types.INT())
        else:
            wait = AsyncDataStream.ordered_wait if ordered else AsyncDataStream.unordered_wait
            out = wait(stream, function, timeout, capacity, output_type=Types.INT())
        self.sink = ListSink()
        out.uid("async").process(Stamped()).set_parallelism(1).sink_to(self.sink).set_parallelism(1)
        self.client: Any = None

    async def start(self) -> Job:
        self.client = await self.env.execute_async("async-restore")
        return self

    async def savepoint_and_cancel(self, tmp_path: Path) -> str:
        path = await self.client.trigger_savepoint(str(tmp_path / "sp"))
        await self.client.cancel()
        return str(path)

    async def end(self) -> list[Any]:
        self.source.finish()
        await asyncio.wait_for(self.client.get_job_execution_result(), 30)
        return self.sink.results


async def in_flight(tmp_path: Path, script: list[Any], calls: int, **kw: Any) -> str:
    """A first job with ``Lazy`` calls: the script, then a savepoint with ``calls`` in flight."""
    job = await Job(Lazy(), **kw).start()
    job.source.push(*script)
    # the records' watermarks are queued too: the source emitted them before the savepoint's barrier
    await wait_until(lambda: len(STARTED) == calls and job.source.all_read())
    path = await job.savepoint_and_cancel(tmp_path)
    assert job.sink.results == []
    return path


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
async def test_state_snapshot_and_restore(tmp_path: Path, ordered: bool) -> None:
    """AsyncWaitOperatorTest#testStateSnapshotAndRestore: four calls in flight in the
    savepoint; the restored operator (another function, capacity 6) re-issues them before the
    new input, keeps their timestamps, and a checkpoint while it processes loses nothing."""
    first = [Record(i, i) for i in (1, 2, 3, 4)]
    # capacity 4, not Flink's 3: a fourth input into a full queue would hold the savepoint's
    # barrier back until a call completes (docs/pyflink.md, async I/O), and these never do
    path = await in_flight(tmp_path, first, 4, ordered=ordered, capacity=4)
    job = await Job(Doubling(), ordered=ordered, capacity=6, savepoint=path, consumed=tuple(first)).start()
    job.source.push(Record(5, 5), Record(6, 6), Record(7, 7))
    await job.client.trigger_checkpoint()  # while processing stream elements
    job.source.push(Record(8, 8))
    out = await job.end()
    expected = [(2 * i, i, MIN_WATERMARK) for i in range(1, 9)]
    assert (out if ordered else sorted(out)) == expected


@pytest.mark.parametrize("restored_capacity", [10, 3])
async def test_restart_with_full_queue(tmp_path: Path, restored_capacity: int) -> None:
    """AsyncWaitOperatorTest#testRestartWithFullQueue (FLINK-7949): a savepoint of a full queue
    (capacity 10, ten calls in flight) restores and completes every element, in order, also
    into a smaller queue."""
    first = [Record(i, 0) for i in range(10)]
    path = await in_flight(tmp_path, first, 10, capacity=10)
    job = Job(Doubling(), capacity=restored_capacity, savepoint=path, consumed=tuple(first))
    out = await (await job.start()).end()
    assert [v for v, _, _ in out] == [2 * i for i in range(10)]


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
async def test_watermarks_stay_behind_the_restored_calls(tmp_path: Path, ordered: bool) -> None:
    """AsyncWaitOperatorTest#testEventTimeOrdered / testWaterMarkUnordered across a restore: a
    watermark queued behind a call in flight is restored in its place, emitted after that
    call's result and before the result of the call behind it."""
    first = [Record(1, 1), sf.Watermark(1), Record(2, 2)]
    path = await in_flight(tmp_path, first, 2, ordered=ordered)
    job = await Job(Doubling(), ordered=ordered, savepoint=path, consumed=tuple(first)).start()
    job.source.push(sf.Watermark(2), Record(3, 3))
    out = await job.end()
    assert out[0] == (2, 1, MIN_WATERMARK)  # before the watermark, in both modes
    assert out[1] == (4, 2, 1)  # the restored watermark passed between them
    assert out[2][:2] == (6, 3)


@pytest.mark.parametrize(("old", "new"), [(2, 1), (1, 3), (2, 4)])
@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
async def test_calls_in_flight_rescale(tmp_path: Path, ordered: bool, old: int, new: int) -> None:
    """The operator's state (its queues) restored at another parallelism: every call in flight
    is re-issued exactly once, by one of the new subtasks."""
    first = [Record(i, i) for i in range(1, 9)]
    path = await in_flight(tmp_path, first, 8, ordered=ordered, parallelism=old)
    job = Job(Doubling(), ordered=ordered, parallelism=new, savepoint=path, consumed=tuple(first))
    await job.start()
    job.source.push(Record(9, 9))
    out = await job.end()
    assert sorted((v, ts) for v, ts, _ in out) == [(2 * i, i) for i in range(1, 10)]


async def test_a_restored_call_gets_a_fresh_timeout(tmp_path: Path) -> None:
    """AsyncWaitOperatorTest#testAsyncTimeoutIgnore across a restore: the restored call is
    issued again with a timeout counted from the restore (Flink registers the timeout when the
    restored element is processed again); its ``timeout`` result is emitted."""
    first = [Record(7, 7)]
    path = await in_flight(tmp_path, first, 1)
    job = Job(NeverCompletes(), timeout_ms=200, savepoint=path, consumed=tuple(first))
    out = await (await job.start()).end()
    assert out == [(21, 7, MIN_WATERMARK)]


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
async def test_a_restored_call_is_retried(tmp_path: Path, ordered: bool) -> None:
    """AsyncWaitOperatorTest#testProcessingTimeWithRetryOnException across a restore: a
    restored call is retried by the restored job's strategy (its attempts counted afresh)."""
    retry = AsyncRetryStrategy.fixed_delay(2, 10, None, lambda e: isinstance(e, ConnectionError))
    first = [Record(1, 1), Record(2, 2)]
    path = await in_flight(tmp_path, first, 2, ordered=ordered)
    job = Job(FailsOnce(), ordered=ordered, retry=retry, savepoint=path, consumed=tuple(first))
    out = await (await job.start()).end()
    assert sorted(out) == [(2, 1, MIN_WATERMARK), (4, 2, MIN_WATERMARK)]
    assert ATTEMPTS == {1: 2, 2: 2}
