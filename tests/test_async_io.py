"""Async I/O (PyFlink 2.2's AsyncDataStream): order, capacity, timeout, retries, watermarks."""

from __future__ import annotations

import asyncio
import functools

import pytest

from streamflow.common import Time, Types, WatermarkStrategy
from streamflow.datastream import (
    AsyncDataStream,
    AsyncFunction,
    AsyncRetryStrategy,
    StreamExecutionEnvironment,
    async_retry_predicates,
)
from streamflow.datastream.window import TumblingEventTimeWindows
from streamflow.testing import ListSink


class Slow(AsyncFunction):
    """Later records finish first (by loop iterations: no timing); 13 never completes (its
    timeout gives ``-13``); tracks the peak number of concurrent calls."""

    def __init__(self) -> None:
        self.running = self.peak = 0
        self.failed: set = set()

    async def async_invoke(self, value):
        self.running += 1
        self.peak = max(self.peak, self.running)
        for _ in range(10 - value % 10):
            await asyncio.sleep(0)
        self.running -= 1
        if value == 13:
            await asyncio.Event().wait()  # never set: only the timeout ends this call
        return [value * 10]

    def timeout(self, value):
        return [-value]


def _run(wait, *, capacity: int = 4, **kw) -> tuple[list, Slow]:
    env = StreamExecutionEnvironment.get_execution_environment()
    fn, sink = Slow(), ListSink()
    # the other calls take a few loop iterations: a timeout 10x their old sleeps' sum never races them
    wait(env.from_collection(list(range(20))), fn, Time.milliseconds(500), capacity=capacity, **kw).sink_to(
        sink
    )
    env.execute()
    return sink.results, fn


def test_ordered_wait_keeps_input_order_with_bounded_capacity_and_timeouts() -> None:
    out, fn = _run(AsyncDataStream.ordered_wait, output_type=Types.INT())
    assert out == [-v if v == 13 else v * 10 for v in range(20)]
    assert fn.peak == 4  # at most `capacity` requests in flight


def test_unordered_wait_emits_in_completion_order() -> None:
    out, _ = _run(AsyncDataStream.unordered_wait, capacity=20)
    assert sorted(out) == sorted(-v if v == 13 else v * 10 for v in range(20))
    assert out != sorted(out)  # the quick ones (high value % 10) came first


def test_retry_on_exception_then_give_up() -> None:
    class Flaky(AsyncFunction):
        calls: dict = {}

        async def async_invoke(self, value):
            n = Flaky.calls[value] = Flaky.calls.get(value, 0) + 1
            if value == "always" or n < 3:
                raise ConnectionError(f"{value} attempt {n}")
            return [(value, n)]

    strategy = AsyncRetryStrategy.fixed_delay(
        3,
        1,
        None,
        functools.partial(
            async_retry_predicates.exception_type_predicate, expected_error_type=ConnectionError
        ),
    )
    env = StreamExecutionEnvironment.get_execution_environment()
    sink = ListSink()
    AsyncDataStream.ordered_wait_with_retry(env.from_collection(["a"]), Flaky(), 1000, strategy).sink_to(sink)
    env.execute()
    assert sink.results == [("a", 3)]  # two failures retried, the third attempt succeeded

    env = StreamExecutionEnvironment.get_execution_environment()
    AsyncDataStream.unordered_wait_with_retry(
        env.from_collection(["always"]), Flaky(), 1000, strategy
    ).sink_to(ListSink())
    with pytest.raises(ConnectionError, match="always attempt 4"):  # 1 call + 3 retries, then the error
        env.execute()


def test_retry_on_empty_result() -> None:
    class EventuallyFound(AsyncFunction):
        n = 0

        async def async_invoke(self, value):
            EventuallyFound.n += 1
            return [] if EventuallyFound.n < 3 else [value]

    strategy = AsyncRetryStrategy.exponential_backoff(
        5, 1, 4, 2.0, async_retry_predicates.empty_result_predicate
    )
    env = StreamExecutionEnvironment.get_execution_environment()
    sink = ListSink()
    AsyncDataStream.ordered_wait_with_retry(
        env.from_collection(["x"]), EventuallyFound(), 1000, strategy
    ).sink_to(sink)
    env.execute()
    assert sink.results == ["x"] and EventuallyFound.n == 3


def test_watermarks_keep_their_place() -> None:
    """Records and their timestamps pass the async step before the watermark that follows them,
    so no record becomes late behind it: each 10 ms window holds all ten of its records."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_batch_size(3)
    env.set_auto_watermark_interval(0)
    ds = env.from_collection(list(range(30))).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e)
    )
    sink = ListSink()
    AsyncDataStream.unordered_wait(ds, Slow(), 1000, capacity=10).map(lambda v: ("k", v)).key_by(
        lambda p: p[0]
    ).window(TumblingEventTimeWindows.of(10)).process(
        lambda key, ctx, elements: [len(list(elements))]
    ).sink_to(sink)
    env.execute()
    assert sink.results == [10, 10, 10]


def test_async_map_shares_the_async_wait_operator() -> None:
    """``async def`` map functions run on AsyncWaitOperator's queue (``runtime/async_functions.py``):
    requests stay in flight across batches (one record a batch here), results leave in input
    order, and the capacity (``concurrency``) counts the results held back behind a slow head,
    as Flink's ordered queue does."""
    import asyncio

    from streamflow.datastream import StreamExecutionEnvironment

    events: list[tuple[str, int]] = []
    started: dict[int, asyncio.Event] = {}  # made in the job's loop; the function's copies share it

    def start(x: int) -> asyncio.Event:
        return started.setdefault(x, asyncio.Event())

    async def call(x: int) -> int:
        events.append(("start", x))
        start(x).set()
        if x == 0:  # 0 completes once 2 has started (no timing): a gate, not a sleep
            try:
                await asyncio.wait_for(start(2).wait(), 5)
            except TimeoutError:
                raise AssertionError("2 was not called while 0 was in flight") from None
        await asyncio.sleep(0)
        events.append(("end", x))
        return x

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.set_batch_size(1)
    with env.from_collection(list(range(6))).map(call, concurrency=3).execute_and_collect() as results:
        assert list(results) == list(range(6))  # input order
    assert events.index(("start", 2)) < events.index(("end", 0))  # in flight across batches
    assert events.index(("start", 3)) > events.index(("end", 0))  # 1 and 2 wait behind 0's place


def test_the_timeout_covers_the_retries() -> None:
    """PyFlink's RetryableResultHandler (and Flink's AsyncWaitOperator) register one timeout
    per element: a timeout during a retry's backoff cancels the retry and calls timeout().
    Every attempt had a timeout of its own before, so the retry ran and succeeded."""

    class FailsFirstTime(AsyncFunction):
        calls = 0

        async def async_invoke(self, value):
            FailsFirstTime.calls += 1
            if FailsFirstTime.calls == 1:
                raise ConnectionError("first attempt")
            return ["retried"]

        def timeout(self, value):
            return ["timed out"]

    # the first attempt fails at once; the retry would start after 5 s, long after the 0.5 s
    # timeout (no race between the two: ten times apart, both timers of one loop)
    strategy = AsyncRetryStrategy.fixed_delay(
        3,
        5_000,
        None,
        functools.partial(
            async_retry_predicates.exception_type_predicate, expected_error_type=ConnectionError
        ),
    )
    env = StreamExecutionEnvironment.get_execution_environment()
    sink = ListSink()
    source = env.from_collection(["a"])
    AsyncDataStream.ordered_wait_with_retry(source, FailsFirstTime(), 500, strategy).sink_to(sink)
    env.execute()
    assert sink.results == ["timed out"] and FailsFirstTime.calls == 1
