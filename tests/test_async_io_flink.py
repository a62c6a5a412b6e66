"""Ports of Flink's async I/O operator and queue tests onto streamflow's public AsyncDataStream API.

Sources (apache/flink):
flink-streaming-java/src/test/java/org/apache/flink/streaming/api/operators/async/AsyncWaitOperatorTest.java,
.../async/queue/OrderedStreamElementQueueTest.java and .../async/queue/UnorderedStreamElementQueueTest.java.
Flink drives the operator through a test harness with ResultFutures it completes by hand; here a
job runs with a scripted source (records, timestamps, watermarks) and an async function whose calls
finish in a chosen order. What tests/test_async_io*.py already cover (order, capacity peak,
retries on exception and on an empty result, the timeout over retries, restore re-issuing
in-flight requests) is not repeated.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamflow.common import Types
from streamflow.datastream import (
    AsyncDataStream,
    AsyncFunction,
    AsyncRetryStrategy,
    StreamExecutionEnvironment,
)
from streamflow.datastream import async_retry_predicates as predicates
from streamflow.datastream.functions import ProcessFunction
from streamflow.runtime.events import Watermark
from streamflow.testing import ListSink, Record, ScriptedSource

RETURNED, LEFT = "returned", "left"
GATE_LIMIT_S = 5.0  # a gate never opened fails the test (the operator broke its rule) in this time


class Gates:
    """Completion order set by hand, as Flink's tests complete each ResultFuture by hand (no
    timing): ``after[v] = (RETURNED, u)`` holds the call for ``v`` until the call for ``u``
    returned; ``(LEFT, u)`` until ``u``'s result left the async operator (the probe downstream
    of it saw ``u * 2``); ``NEVER`` holds it for good (a timeout ends it). Other calls complete
    at once. ``returned`` lists the calls in the order they returned. The copies of a function
    share the instance (``deepcopy`` returns it); its events are made in the job's loop."""

    NEVER = ("never", None)

    def __init__(self, after: dict[int, tuple[str, Any]] | None = None) -> None:
        self.after = after or {}
        self.returned: list[int] = []
        self._events: dict[tuple[str, int], asyncio.Event] = {}

    def __deepcopy__(self, memo: dict) -> Gates:
        return self

    def _event(self, what: str, value: int) -> asyncio.Event:
        return self._events.setdefault((what, value), asyncio.Event())

    async def turn(self, value: int) -> None:
        what, other = self.after.get(value, (None, None))
        if what == "never":
            await asyncio.Event().wait()
        elif what is not None:
            try:
                await asyncio.wait_for(self._event(what, other).wait(), GATE_LIMIT_S)
            except TimeoutError:
                raise AssertionError(
                    f"the call for {value} waited {GATE_LIMIT_S} s for {other} to have {what}"
                ) from None
        self.returned.append(value)
        self._event(RETURNED, value).set()

    def left(self, result: int) -> None:
        self._event(LEFT, result // 2).set()


class Delayed(AsyncFunction):
    """``value * 2`` once its gate opens (Flink's LazyAsyncFunction / MyAsyncFunction)."""

    def __init__(self, gates: Gates | None = None) -> None:
        self.gates = gates or Gates()

    async def async_invoke(self, value: int) -> list[int]:
        await self.gates.turn(value)
        return [value * 2]


def _run(
    wait: Any, script: list, fn: AsyncFunction, timeout: int = 2000, capacity: int = 10, **kw: Any
) -> list:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    sink = ListSink()
    src = env.from_source(ScriptedSource(script), None, "src")
    out = wait(src, fn, timeout, capacity=capacity, output_type=Types.INT(), **kw)
    gates = getattr(fn, "gates", None)
    if gates is not None:  # the probe: a result has left the async operator (Gates, LEFT)
        out = out.map(lambda v: (gates.left(v), v)[1], output_type=Types.INT())
    out.sink_to(sink)
    env.execute()
    return sink.results


def _watermark_probe(wait: Any, script: list, fn: AsyncFunction) -> list:
    """The async step's output with the watermark each record saw downstream of it."""
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    sink = ListSink()
    src = env.from_source(ScriptedSource(script), None, "src")
    wait(src, fn, 10_000, capacity=10, output_type=Types.INT()).process(
        Watched(getattr(fn, "gates", None)), Types.PICKLED_BYTE_ARRAY()
    ).sink_to(sink)
    env.execute()
    return sink.results


class Watched(ProcessFunction):
    """Each result with its timestamp and the watermark it saw; also the probe of ``gates``."""

    def __init__(self, gates: Gates | None = None) -> None:
        self.gates = gates

    def process_element(self, value: Any, ctx: Any) -> Any:
        if self.gates is not None:
            self.gates.left(value)
        yield value, ctx.timestamp(), ctx.timer_service().current_watermark()


EVENT_SCRIPT = [Record(1, 1), Record(2, 2), Watermark(2), Record(3, 3)]


def test_event_time_ordered() -> None:
    """AsyncWaitOperatorTest#testEventTimeOrdered: results in input order, each with its input's
    timestamp, and the watermark after the first two results (1 finishes last)."""
    gates = Gates({1: (RETURNED, 3), 3: (RETURNED, 2)})
    out = _watermark_probe(AsyncDataStream.ordered_wait, EVENT_SCRIPT, Delayed(gates))
    assert gates.returned == [2, 3, 1]
    assert [(v, ts) for v, ts, _ in out] == [(2, 1), (4, 2), (6, 3)]
    assert out[0][2] < 2 and out[1][2] < 2 and out[2][2] == 2


def test_event_time_unordered() -> None:
    """AsyncWaitOperatorTest#testEventTimeUnordered and UnorderedStreamElementQueueTest#
    testCompletionOrder: between two watermarks results leave in completion order, but none
    crosses a watermark: 6 (after watermark 2) finishes first yet leaves after 2 and 4, and 2
    and 4 leave before the watermark."""
    gates = Gates({2: (RETURNED, 3), 1: (LEFT, 2)})  # 1 completes once 2 has left
    out = _watermark_probe(AsyncDataStream.unordered_wait, EVENT_SCRIPT, Delayed(gates))
    assert gates.returned == [3, 2, 1]
    assert [(v, ts) for v, ts, _ in out] == [(4, 2), (2, 1), (6, 3)]
    assert out[0][2] < 2 and out[1][2] < 2 and out[2][2] == 2


def test_processing_time_unordered_completion_order() -> None:
    """AsyncWaitOperatorTest#testProcessingTimeUnordered: without watermarks every result leaves
    as soon as it is complete: each call completes only once the result of the one completed
    before it has left the operator (a result held back would hold every later call: the gate
    fails the test)."""
    gates = Gates({3: (LEFT, 4), 2: (LEFT, 3), 1: (LEFT, 2)})
    out = _run(AsyncDataStream.unordered_wait, [1, 2, 3, 4], Delayed(gates), timeout=10_000)
    assert gates.returned == [4, 3, 2, 1]
    assert out == [8, 6, 4, 2]


def test_ordered_queue_holds_back_later_results() -> None:
    """OrderedStreamElementQueueTest#testCompletionOrder: a complete entry behind an incomplete
    head waits for it."""
    gates = Gates({3: (RETURNED, 4), 2: (RETURNED, 3), 1: (RETURNED, 2)})
    out = _run(AsyncDataStream.ordered_wait, [1, 2, 3, 4], Delayed(gates), timeout=10_000)
    assert gates.returned == [4, 3, 2, 1]
    assert out == [2, 4, 6, 8]


def test_async_timeout_failure() -> None:
    """AsyncWaitOperatorTest#testAsyncTimeoutFailure: the default timeout() fails the job with
    a TimeoutError naming the input ("Async function call has timed out")."""
    with pytest.raises(TimeoutError, match="Async function call has timed out"):
        _run(AsyncDataStream.ordered_wait, [1, 2], Delayed(Gates({2: Gates.NEVER})), timeout=50)


def test_async_timeout_ignore() -> None:
    """AsyncWaitOperatorTest#testAsyncTimeoutIgnore: timeout() completing with no result drops
    the element and the job goes on."""

    class IgnoreTimeout(Delayed):
        def timeout(self, value: int) -> list[int]:
            return []

    out = _run(AsyncDataStream.ordered_wait, [1, 2, 3], IgnoreTimeout(Gates({2: Gates.NEVER})), timeout=50)
    assert out == [2, 6]


def test_timeout_after_complete_is_not_called() -> None:
    """AsyncWaitOperatorTest#testTimeoutCleanup / testTimeoutAfterComplete: a call that completed
    in time has its timer cancelled: timeout() is never called for it, even when the job lasts
    beyond the timeout."""
    called: list[int] = []

    class Recording(Delayed):
        def timeout(self, value: int) -> list[int]:
            called.append(value)
            return [-value]

    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    sink = ListSink()
    src = env.from_source(ScriptedSource([1]), None, "src")
    out = AsyncDataStream.ordered_wait(src, Recording(), 30, capacity=1, output_type=Types.INT())

    async def linger(value: int) -> int:
        await asyncio.sleep(0.1)  # the job outlives the first element's timeout
        return value

    out.map(linger).sink_to(sink)
    env.execute()
    assert sink.results == [2] and called == []


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
def test_user_exception_fails_the_job(ordered: bool) -> None:
    """AsyncWaitOperatorTest#testOrderedWaitUserExceptionHandling / testUnorderedWait...: a call
    that completes exceptionally fails the job with that exception."""

    class Failing(AsyncFunction):
        async def async_invoke(self, value: int) -> list[int]:
            if value == 2:
                raise ValueError(f"user exception for {value}")
            return [value]

    wait = AsyncDataStream.ordered_wait if ordered else AsyncDataStream.unordered_wait
    with pytest.raises(ValueError, match="user exception for 2"):
        _run(wait, [1, 2, 3], Failing())


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
def test_exception_in_timeout_fails_the_job(ordered: bool) -> None:
    """AsyncWaitOperatorTest#testTimeoutExceptionHandling: an exception thrown by timeout()
    fails the job."""

    class BadTimeout(Delayed):
        def timeout(self, value: int) -> list[int]:
            raise KeyError(f"timeout handler broke for {value}")

    wait = AsyncDataStream.ordered_wait if ordered else AsyncDataStream.unordered_wait
    with pytest.raises(KeyError, match="timeout handler broke for 1"):
        _run(wait, [1], BadTimeout(Gates({1: Gates.NEVER})), timeout=50)


def test_capacity_one_serializes_the_calls() -> None:
    """AsyncWaitOperatorTest#testOperatorChainWithProcessingTime's capacity rule (and
    StreamElementQueue#tryPut): with capacity 1 the next call starts only once the previous
    result has left the queue."""
    events: list[str] = []

    class Tracing(AsyncFunction):
        async def async_invoke(self, value: int) -> list[int]:
            events.append(f"start-{value}")
            await asyncio.sleep(0.01)
            events.append(f"end-{value}")
            return [value]

    assert _run(AsyncDataStream.unordered_wait, [1, 2, 3], Tracing(), capacity=1) == [1, 2, 3]
    assert events == ["start-1", "end-1", "start-2", "end-2", "start-3", "end-3"]


def test_retry_gives_up_and_emits_the_last_result() -> None:
    """AsyncWaitOperatorTest#testProcessingTimeWithRetry's OddInputEmptyResultAsyncFunction: odd
    inputs always return an empty result; the retry strategy (two attempts, if result empty)
    retries them and then emits the last (empty) result; even ones pass on the first attempt."""
    calls: dict[int, int] = {}

    class OddInputEmptyResult(AsyncFunction):
        async def async_invoke(self, value: int) -> list[int]:
            calls[value] = calls.get(value, 0) + 1
            return [] if value % 2 else [value * 2]

    strategy = AsyncRetryStrategy.fixed_delay(2, 1, predicates.empty_result_predicate)
    out = _run(
        AsyncDataStream.ordered_wait_with_retry,
        [1, 2, 3, 4],
        OddInputEmptyResult(),
        async_retry_strategy=strategy,
    )
    assert out == [4, 8]
    assert calls == {1: 3, 2: 1, 3: 3, 4: 1}  # the first call and two retries


def test_retry_on_exception_exhausted_fails_the_job() -> None:
    """AsyncWaitOperatorTest#testProcessingTimeWithRetryOnException / RetryPredicates
    HAS_EXCEPTION_PREDICATE: retries exhausted, the last exception fails the job."""
    attempts: list[int] = []

    class AlwaysFails(AsyncFunction):
        async def async_invoke(self, value: int) -> list[int]:
            attempts.append(value)
            raise ConnectionError(f"attempt {len(attempts)}")

    strategy = AsyncRetryStrategy.fixed_delay(2, 1, None, predicates.has_exception_predicate)
    with pytest.raises(ConnectionError, match="attempt 3"):
        _run(AsyncDataStream.unordered_wait_with_retry, [7], AlwaysFails(), async_retry_strategy=strategy)


def test_async_operator_chains_with_its_predecessor() -> None:
    """AsyncWaitOperatorTest#testOperatorChainWithProcessingTime: the async operator chains after a
    map at the same parallelism (Flink's AsyncWaitOperatorFactory, HEAD_WITH_SOURCES / ALWAYS)."""
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    mapped = env.from_collection([1, 2, 3]).map(lambda v: v + 1)
    out = AsyncDataStream.ordered_wait(mapped, Delayed(), 1000, capacity=2)
    sink = ListSink()
    out.sink_to(sink)
    graph = env.get_job_graph()
    assert graph.vertex_of[out._node.id] is graph.vertex_of[mapped._node.id]
    env.execute()
    assert sink.results == [4, 6, 8]


def test_invalid_timeout_and_capacity_are_refused() -> None:
    """AsyncWaitOperator's constructor: capacity must be positive (Preconditions.checkArgument)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ValueError):
        AsyncDataStream.ordered_wait(env.from_collection([1]), Delayed(), 1000, capacity=0)


@pytest.mark.parametrize("timeout", [0, -1])
def test_a_timeout_of_zero_or_less_is_no_timeout(timeout: int) -> None:
    """AsyncWaitOperator#processElement registers the timeout timer only ``if (timeout > 0L)``:
    a call may take as long as it needs (streamflow refused the job with a ValueError)."""

    class Lingering(AsyncFunction):
        async def async_invoke(self, value: int) -> list[int]:
            await asyncio.sleep(0.05)  # longer than a timeout of 0 (or less) would wait: never racy
            return [value * 2]

    assert _run(AsyncDataStream.ordered_wait, [1, 2], Lingering(), timeout=timeout) == [2, 4]
