"""Flink's ``AsyncBatchWaitOperatorTest`` and ``OrderedAsyncBatchWaitOperatorTest``, ported
through the public API (``AsyncDataStream.unordered_wait_batch`` / ``ordered_wait_batch``):
flink-streaming-java/src/test/java/org/apache/flink/streaming/api/operators/async/
AsyncBatchWaitOperatorTest.java and OrderedAsyncBatchWaitOperatorTest.java.

Flink's OneInputStreamOperatorTestHarness becomes a running job over a fed
:class:`ScriptedSource` with a :class:`ManualClock` as processing time (``setProcessingTime``
moves it), ``endInput`` ends the source and waits for the job. Flink's batch functions complete
a ResultFuture; here ``async_invoke_batch`` returns the list (awaiting an ``asyncio.Event`` where
Flink's test completes a CompletableFuture by hand). The batch sizes a function saw are kept in
``CALLS`` (module level, so every copy of a function shares it).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from waiting import wait_until

from streamflow.common import Time, Types
from streamflow.datastream import AsyncBatchFunction, AsyncDataStream, StreamExecutionEnvironment
from streamflow.testing import ListSink, ManualClock, Record, ScriptedSource

CALLS: list[int] = []
GATES: list[asyncio.Event] = []


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    CALLS.clear()
    GATES.clear()
    yield


class Harness:
    """OneInputStreamOperatorTestHarness around an async batch operator, as a running job."""

    def __init__(
        self,
        function: AsyncBatchFunction,
        batch_size: int,
        batch_timeout: int | None = None,
        ordered: bool = False,
    ) -> None:
        self.source = ScriptedSource([], end=False)
        self.clock = ManualClock()
        self.env = StreamExecutionEnvironment(clock=self.clock).set_parallelism(1)
        self.sink = ListSink()
        wait = AsyncDataStream.ordered_wait_batch if ordered else AsyncDataStream.unordered_wait_batch
        stream = self.env.from_source(self.source, None, "in")
        timeout = None if batch_timeout is None else Time.milliseconds(batch_timeout)
        out = wait(stream, function, Time.seconds(30), batch_size, timeout, output_type=Types.INT())
        out.sink_to(self.sink)
        self.client: Any = None

    async def open(self) -> Harness:
        self.client = await self.env.execute_async("async-batch")
        await self.settle()
        return self

    async def settle(self) -> None:
        for _ in range(200):
            await asyncio.sleep(0)

    async def element(self, value: int, timestamp: int) -> None:
        self.source.push(Record(value, timestamp))
        await self.settle()

    async def processing_time(self, ms: int) -> None:
        self.clock.set(ms)
        await self.settle()

    async def end_input(self) -> list[Any]:
        self.source.finish()
        await asyncio.wait_for(self.client.get_job_execution_result(), 30)
        return self.sink.results


class Doubling(AsyncBatchFunction):
    async def async_invoke_batch(self, inputs: list[int]) -> list[int]:
        CALLS.append(len(inputs))
        return [i * 2 for i in inputs]


class Identity(AsyncBatchFunction):
    async def async_invoke_batch(self, inputs: list[int]) -> list[int]:
        CALLS.append(len(inputs))
        return list(inputs)


class BatchSum(AsyncBatchFunction):
    """One output per batch: the sum of its inputs (Flink's aggregation-style function)."""

    async def async_invoke_batch(self, inputs: list[int]) -> list[int]:
        CALLS.append(len(inputs))
        return [sum(inputs)]


class EachTwice(AsyncBatchFunction):
    """More outputs than inputs: every input twice, the batch's results as one list."""

    async def async_invoke_batch(self, inputs: list[int]) -> list[int]:
        CALLS.append(len(inputs))
        return [i for i in inputs for _ in range(2)]


class Failing(AsyncBatchFunction):
    async def async_invoke_batch(self, inputs: list[int]) -> list[int]:
        raise ValueError("expected test exception")


class Gated(AsyncBatchFunction):
    """Each batch waits for its own gate (Flink's batchFutures completed by the test)."""

    async def async_invoke_batch(self, inputs: list[int]) -> list[int]:
        gate = asyncio.Event()
        GATES.append(gate)
        await gate.wait()
        return list(inputs)


async def feed(h: Harness, values: list[int]) -> None:
    for v in values:
        await h.element(v, v)


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
async def test_batch_size_trigger(ordered: bool) -> None:
    """AsyncBatchWaitOperatorTest#testBatchSizeTrigger: five inputs with a batch size of 3 make
    two calls, of 3 and (at the end of input) 2."""
    h = await Harness(Doubling(), 3, ordered=ordered).open()
    await feed(h, [1, 2, 3])
    assert CALLS == [3]
    await feed(h, [4, 5])
    assert CALLS == [3]
    await h.end_input()
    assert CALLS == [3, 2]


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
async def test_correct_result_emission(ordered: bool) -> None:
    """AsyncBatchWaitOperatorTest#testCorrectResultEmission / OrderedAsyncBatchWaitOperatorTest#
    testOrderingWithSynchronousCompletion: every output is emitted (in input order if ordered)."""
    h = await Harness(Doubling(), 3, ordered=ordered).open()
    await feed(h, [1, 2, 3, 4, 5])
    out = await h.end_input()
    assert (out if ordered else sorted(out)) == [2, 4, 6, 8, 10]


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
async def test_exception_propagation(ordered: bool) -> None:
    """AsyncBatchWaitOperatorTest#testExceptionPropagation: a failing batch fails the job with
    the function's exception."""
    h = await Harness(Failing(), 2, ordered=ordered).open()
    await feed(h, [1, 2])
    with pytest.raises(Exception) as info:
        await h.end_input()
    assert "expected test exception" in repr(info.value) + repr(info.value.__cause__)


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
async def test_empty_input(ordered: bool) -> None:
    """AsyncBatchWaitOperatorTest#testEmptyInput: no input, no call, no output."""
    h = await Harness(Doubling(), 3, ordered=ordered).open()
    assert await h.end_input() == []
    assert CALLS == []


async def test_variable_output_size() -> None:
    """AsyncBatchWaitOperatorTest#testVariableOutputSize: a batch function may return fewer
    outputs than inputs; all of them are emitted (batches [1,2,3] and [4,5] give 6 and 9)."""
    h = await Harness(BatchSum(), 3).open()
    await feed(h, [1, 2, 3, 4, 5])
    assert sorted(await h.end_input()) == [6, 9]


async def test_variable_output_size_with_ordering() -> None:
    """OrderedAsyncBatchWaitOperatorTest#testVariableOutputSizeWithOrdering: [1,2] -> 3 and
    [3,4] -> 7, in batch order."""
    h = await Harness(BatchSum(), 2, ordered=True).open()
    await feed(h, [1, 2, 3, 4])
    assert await h.end_input() == [3, 7]


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
async def test_outputs_beyond_the_inputs_are_dropped_with_a_warning(
    ordered: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A divergence between Flink's two runtimes, decided for PyFlink's: Java's
    AsyncBatchWaitOperator (BatchResultHandler#processResults) emits every result of a batch,
    PyFlink's Python operation (async_batch_operation.py, BatchResultDistributor#complete) gives
    the i-th output to the i-th input and drops the rest. A PyFlink function runs on the
    latter, so streamflow drops them too, and says so once (it said nothing)."""
    h = await Harness(EachTwice(), 2, ordered=ordered).open()
    await feed(h, [1, 2, 3])
    out = await h.end_input()
    assert (out if ordered else sorted(out)) == [1, 1, 3]  # [1, 1, 2, 2] for [1, 2], [3, 3] for [3]
    warnings = [r.getMessage() for r in caplog.records if "beyond the inputs" in r.getMessage()]
    assert len(warnings) == 1 and "4 outputs for a batch of 2 inputs" in warnings[0]


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
async def test_single_element_batch(ordered: bool) -> None:
    """AsyncBatchWaitOperatorTest#testSingleElementBatch / OrderedAsyncBatchWaitOperatorTest#
    testSingleElementBatchOrdering: a batch size of 1 calls once per input; ordered output
    keeps the input order [3, 1, 2]."""
    h = await Harness(Identity(), 1, ordered=ordered).open()
    await feed(h, [3, 1, 2])
    out = await h.end_input()
    assert CALLS == [1, 1, 1]
    assert (out if ordered else sorted(out)) == ([3, 1, 2] if ordered else [1, 2, 3])


async def test_strict_ordering_guarantee() -> None:
    """OrderedAsyncBatchWaitOperatorTest#testStrictOrderingGuarantee: batch [3,4] completes
    before batch [1,2]; the output is still [1, 2, 3, 4]."""
    h = await Harness(Gated(), 2, ordered=True).open()
    await feed(h, [1, 2, 3, 4])
    await wait_until(lambda: len(GATES) == 2)
    GATES[1].set()
    await h.settle()
    assert h.sink.results == []
    GATES[0].set()
    assert await h.end_input() == [1, 2, 3, 4]


async def test_timeout_flush() -> None:
    """AsyncBatchWaitOperatorTest#testTimeoutFlush: one input with a batch size of 10 and a
    batch timeout of 50 ms is called alone once processing time passes the timeout."""
    h = await Harness(Identity(), 10, 50).open()
    await h.processing_time(0)
    await h.element(1, 1)
    assert CALLS == []
    await h.processing_time(51)
    assert CALLS == [1]
    assert await h.end_input() == [1]


async def test_size_beats_timeout() -> None:
    """AsyncBatchWaitOperatorTest#testSizeBeatsTimeout: a full batch is called at once; its
    timer finds nothing to call later."""
    h = await Harness(Identity(), 2, 3_600_000).open()
    await feed(h, [1, 2])
    assert CALLS == [2]
    await h.processing_time(3_600_001)
    assert CALLS == [2]
    await h.end_input()


async def test_timer_reset_after_flush() -> None:
    """AsyncBatchWaitOperatorTest#testTimerResetAfterFlush: the second batch's timer counts
    from its own first input (200 + 100)."""
    h = await Harness(Identity(), 10, 100).open()
    await h.element(1, 1)
    await h.processing_time(101)
    assert CALLS == [1]
    await h.processing_time(200)
    await feed(h, [2, 3])
    assert CALLS == [1]
    await h.processing_time(301)
    assert CALLS == [1, 2]
    await h.end_input()


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
async def test_mixed_size_and_timeout_triggers(ordered: bool) -> None:
    """AsyncBatchWaitOperatorTest#testMixedSizeAndTimeoutTriggers / OrderedAsyncBatchWait
    OperatorTest#testBatchAndTimeoutTriggerWithOrdering: size, timeout, size: calls of 3, 1, 3,
    and (ordered) the output in input order."""
    h = await Harness(Identity(), 3, 100, ordered=ordered).open()
    await feed(h, [1, 2, 3])
    assert CALLS == [3]
    await h.processing_time(200)
    await h.element(4, 4)
    assert CALLS == [3]
    await h.processing_time(301)
    assert CALLS == [3, 1]
    await h.processing_time(400)
    await feed(h, [5, 6, 7])
    assert CALLS == [3, 1, 3]
    out = await h.end_input()
    assert (out if ordered else sorted(out)) == [1, 2, 3, 4, 5, 6, 7]


async def test_timeout_disabled() -> None:
    """AsyncBatchWaitOperatorTest#testTimeoutDisabled: a batch timeout of 0 sets no timer; the
    partial batch is called at the end of input only."""
    h = await Harness(Identity(), 10, 0).open()
    await h.element(1, 1)
    await h.processing_time(1_000_000)
    assert CALLS == []
    await h.end_input()
    assert CALLS == [1]
