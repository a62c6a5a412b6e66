"""Async I/O on the Spark engine (``streamflow/spark/harness.py``): ``AsyncDataStream``'s
ordered and unordered waits, with timeouts, a retry strategy and a capacity, an async batch
function and an ``async def`` map give the asyncio engine's answers: ordered ones in the same
order, unordered ones as the same multiset, at parallelism 1 and 2."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
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


class Probe(Lookup):
    """Lookup's answers, each but a timeout's with how many calls of this instance were in flight
    when it started (1 when requests run one at a time)."""

    async def async_invoke(self, value: Any) -> list[Any]:
        overlap = self.running + 1
        return [(*r, overlap) for r in await super().async_invoke(value)]


class Retried(AsyncFunction):
    """Fails the first attempt at every value whose second field is divisible by 5 (the retry
    strategy retries it); answers ``(value, calls in flight when it started)``."""

    def open(self, runtime_context: Any) -> None:
        self.running = 0
        self.attempts: Counter = Counter()

    async def async_invoke(self, value: Any) -> list[Any]:
        self.running += 1
        overlap = self.running
        try:
            await asyncio.sleep(0)
        finally:
            self.running -= 1
        self.attempts[value] += 1
        if value[1] % 5 == 0 and self.attempts[value] < 2:
            raise ConnectionError(f"flaky at {value}")
        return [(value, overlap)]


async def tagged(value: Any) -> Any:
    for _ in range(value[2] % 3):
        await asyncio.sleep(0)
    return ("mapped", *value)


def async_job(engine: str) -> dict[str, list]:
    env = _env(engine).set_parallelism(1)
    sinks = {name: ListSink() for name in ("ordered", "unordered", "retried", "batched", "async_def",
                                            "unordered_p2", "after_a_shuffle", "after_a_reduce")}
    data = env.from_collection(events(400))
    AsyncDataStream.ordered_wait(data, Lookup(), TIMEOUT_MS, capacity=8).sink_to(sinks["ordered"])
    AsyncDataStream.unordered_wait(data, Lookup(), TIMEOUT_MS, capacity=8).sink_to(sinks["unordered"])
    retry = AsyncRetryStrategy.fixed_delay(3, 1, exception_predicate=lambda e: isinstance(e, ConnectionError))
    AsyncDataStream.ordered_wait_with_retry(data, Flaky(), 0, retry, capacity=16).sink_to(sinks["retried"])
    AsyncDataStream.ordered_wait_batch(data, Doubler(), 1000, 7).sink_to(sinks["batched"])
    data.map(tagged).sink_to(sinks["async_def"])
    unordered = AsyncDataStream.unordered_wait(data.rebalance(), Lookup(), TIMEOUT_MS, capacity=4)
    unordered.set_parallelism(2).sink_to(sinks["unordered_p2"])
    # rows that reach the stage after a shuffle (not in input order) are fed one at a time to the
    # operators around it, many at once to it (its requests run concurrently: Probe counts them)
    shuffled = data.key_by(lambda e: e[0])
    AsyncDataStream.ordered_wait(shuffled, Probe(), TIMEOUT_MS, capacity=8).sink_to(sinks["after_a_shuffle"])
    # (on Spark a key_by into a non-keyed operator is no shuffle; a keyed stage's output is: its
    # rows reach the async stages in no input order.) A chain after a keyed reduce: filter ->
    # ordered wait with timeouts -> ordered wait with retries -> map, fused in one stage (abs():
    # a call, so the filter is not translated to a Spark expression and runs in the stage)
    sums = (shuffled.reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
            .filter(lambda r: abs(r[1]) % 3 != 0))
    probed = AsyncDataStream.ordered_wait(sums, Probe(), TIMEOUT_MS, capacity=8)
    retried = AsyncDataStream.ordered_wait_with_retry(probed, Retried(), 5000, retry, capacity=8)
    retried.map(lambda r: ("chain", *r)).sink_to(sinks["after_a_reduce"])
    env.execute(f"async i/o on {engine}")
    return {name: sink.results for name, sink in sinks.items()}


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, list]]:
    return {engine: async_job(engine) for engine in ("asyncio", "spark")}


def _answer(r: Any) -> Any:
    """A Probe's answer without its overlap count (the run's)."""
    return r if r[0] == "timeout" else r[:-1]


def _chain_answer(r: Any) -> Any:
    """An after_a_reduce row ``("chain", probe answer, overlap)`` without the overlap counts."""
    return r[0], _answer(r[1])


def test_async_io_same_on_both_engines(runs: dict[str, dict[str, list]]) -> None:
    expected, actual = runs["asyncio"], runs["spark"]
    timeouts = sum(e[1] % 47 == 0 for e in events(400))
    assert sum(r[0] == "timeout" for r in expected["ordered"]) == timeouts > 0
    assert {r[2] for r in expected["retried"]} == {1, 3}
    assert any(r[1][0] == "timeout" for r in expected["after_a_reduce"])
    assert any(r[1][1] % 5 == 0 for r in expected["after_a_reduce"])  # (retried)
    assert len(expected["after_a_shuffle"]) == 400 and len(expected["after_a_reduce"]) > 200
    for name in ("ordered", "retried", "batched", "async_def"):  # input order on both
        assert actual[name] == expected[name], name
    assert list(map(_answer, actual["after_a_shuffle"])) == list(map(_answer, expected["after_a_shuffle"]))
    chain = "after_a_reduce"
    assert list(map(_chain_answer, actual[chain])) == list(map(_chain_answer, expected[chain]))
    for name in ("unordered", "unordered_p2"):
        assert Counter(map(repr, actual[name])) == Counter(map(repr, expected[name])), name


def test_async_io_after_a_shuffle_runs_requests_concurrently(runs: dict[str, dict[str, list]]) -> None:
    """Rows reaching an async stage after a keyed reduce (a real shuffle on Spark) come in no
    input order; each of the two async stages of the fused chain after it runs a partition's
    requests concurrently up to the capacity (before, one at a time: every call saw one in
    flight); so does the stage after a key_by (no shuffle on Spark: it always did). The answers,
    in the asyncio engine's order: test_async_io_same_on_both_engines."""
    for engine, results in runs.items():
        overlaps = {
            "after_a_shuffle": [r[-1] for r in results["after_a_shuffle"] if r[0] != "timeout"],
            "probe after a reduce": [r[1][-1] for r in results["after_a_reduce"] if r[1][0] != "timeout"],
            "retried after a reduce": [r[2] for r in results["after_a_reduce"]],
        }
        for name, counts in overlaps.items():
            assert max(counts) >= 5, f"{engine} {name}: requests ran one at a time ({Counter(counts)})"
