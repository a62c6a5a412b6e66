"""Async I/O on the Spark engine (``streamflow/spark/harness.py``): ``AsyncDataStream``'s
ordered and unordered waits, with timeouts, a retry strategy and a capacity, an async batch
function and an ``async def`` map give the asyncio engine's answers: ordered ones in the same
order, unordered ones as the same multiset, at parallelism 1 and 2."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from test_spark import _env, events

from streamflow.async_io import AsyncBatchFunction
from streamflow.datastream import AsyncDataStream, AsyncFunction, AsyncRetryStrategy
from streamflow.testing import ListSink

TIMEOUT_MS = 200  # (a wide margin: a loaded machine must not time out the quick requests)


class Lookup(AsyncFunction):
    """Completion order differs from input order; every 47th value outlives the timeout."""

    def open(self, runtime_context: Any) -> None:
        self.running = self.peak = 0

    async def async_invoke(self, value: Any) -> list[Any]:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            for _ in range(9 - value[2] % 10):  # later records of a batch finish first
                await asyncio.sleep(0)
            if value[1] % 47 == 0:
                await asyncio.sleep(3 * TIMEOUT_MS / 1000)
        finally:
            self.running -= 1
        return [(value[0], value[1] * 2)]

    def timeout(self, value: Any) -> list[Any]:
        return [("timeout", value[1], value[2])]


class Flaky(AsyncFunction):
    """Fails its first two attempts at every odd value: the retry strategy retries them."""

    def open(self, runtime_context: Any) -> None:
        self.attempts: Counter = Counter()

    async def async_invoke(self, value: Any) -> list[Any]:
        self.attempts[value] += 1
        if value[1] % 2 and self.attempts[value] < 3:
            raise ConnectionError(f"flaky at {value}")
        return [(value[0], value[2], self.attempts[value])]


class Doubler(AsyncBatchFunction):
    async def async_invoke_batch(self, inputs: list[Any]) -> list[Any]:
        await asyncio.sleep(0.001)
        return [(v[0], v[1] * 2, len(inputs) > 0) for v in inputs]


async def tagged(value: Any) -> Any:
    for _ in range(value[2] % 3):
        await asyncio.sleep(0)
    return ("mapped", *value)


def async_job(engine: str) -> dict[str, list]:
    env = _env(engine).set_parallelism(1)
    sinks = {name: ListSink() for name in ("ordered", "unordered", "retried", "batched", "async_def",
                                            "unordered_p2", "after_a_shuffle")}
    data = env.from_collection(events(400))
    AsyncDataStream.ordered_wait(data, Lookup(), TIMEOUT_MS, capacity=8).sink_to(sinks["ordered"])
    AsyncDataStream.unordered_wait(data, Lookup(), TIMEOUT_MS, capacity=8).sink_to(sinks["unordered"])
    retry = AsyncRetryStrategy.fixed_delay(3, 1, exception_predicate=lambda e: isinstance(e, ConnectionError))
    AsyncDataStream.ordered_wait_with_retry(data, Flaky(), 0, retry, capacity=16).sink_to(sinks["retried"])
    AsyncDataStream.ordered_wait_batch(data, Doubler(), 1000, 7).sink_to(sinks["batched"])
    data.map(tagged).sink_to(sinks["async_def"])
    unordered = AsyncDataStream.unordered_wait(data.rebalance(), Lookup(), TIMEOUT_MS, capacity=4)
    unordered.set_parallelism(2).sink_to(sinks["unordered_p2"])
    # rows that reach the stage after a shuffle (not in input order) are fed one at a time
    shuffled = data.key_by(lambda e: e[0])
    AsyncDataStream.ordered_wait(shuffled, Lookup(), TIMEOUT_MS, capacity=8).sink_to(sinks["after_a_shuffle"])
    env.execute(f"async i/o on {engine}")
    return {name: sink.results for name, sink in sinks.items()}


def test_async_io_same_on_both_engines() -> None:
    expected, actual = async_job("asyncio"), async_job("spark")
    timeouts = sum(e[1] % 47 == 0 for e in events(400))
    assert sum(r[0] == "timeout" for r in expected["ordered"]) == timeouts > 0
    assert {r[2] for r in expected["retried"]} == {1, 3}
    for name in ("ordered", "retried", "batched", "async_def", "after_a_shuffle"):  # input order on both
        assert actual[name] == expected[name], name
    for name in ("unordered", "unordered_p2"):
        assert Counter(map(repr, actual[name])) == Counter(map(repr, expected[name])), name
