"""execute_and_collect() runs the job while the caller iterates, and stops it when closed."""

from __future__ import annotations

import asyncio
import gc
import itertools
from typing import Any

import pytest

import streamflow as sf
from streamflow.datastream import MapFunction


class Counting(MapFunction):
    """Counts the records it saw and whether it was closed."""

    seen = 0
    closed = 0

    def open(self, runtime_context: Any) -> None:
        type(self).seen = 0

    def map(self, value: Any) -> Any:
        type(self).seen += 1
        return value

    def close(self) -> None:
        type(self).closed += 1


def test_results_stream_while_the_job_runs() -> None:
    env = sf.StreamExecutionEnvironment()
    results = env.from_collection(lambda: range(1_000_000)).map(Counting()).execute_and_collect()
    assert next(results) == 0
    assert Counting.seen < 20_000  # not run to the end before the first record came back
    closed = Counting.closed
    results.close()
    assert Counting.closed == closed + 1  # cancelled: the function was closed
    assert list(results) == []
    results.close()  # idempotent


@pytest.mark.parametrize("parallelism", [1, 4])
def test_everything_arrives_and_the_job_is_finished(parallelism: int) -> None:
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    closed = Counting.closed
    data = [(f"k{i % 13}", i) for i in range(20_000)]
    out = list(env.from_collection(data).key_by(lambda e: e[0]).sum(1).map(Counting()).execute_and_collect())
    assert Counting.closed == closed + parallelism  # finished and closed before iteration ended
    assert len(out) == len(data)
    last = {k: v for k, v in out}
    assert last == {f"k{k}": sum(range(k, 20_000, 13)) for k in range(13)}


def test_an_unbounded_job_stops_when_the_loop_is_left() -> None:
    env = sf.StreamExecutionEnvironment()
    closed = Counting.closed
    with env.from_collection(lambda: itertools.count()).map(Counting()).execute_and_collect() as results:
        for i, value in enumerate(results):
            assert value == i
            if i == 5000:
                break
    assert Counting.closed == closed + 1


def test_limit_returns_the_first_records_and_stops_the_job() -> None:
    env = sf.StreamExecutionEnvironment()
    closed = Counting.closed
    results = env.from_collection(lambda: itertools.count()).map(Counting()).execute_and_collect(limit=7)
    assert Counting.closed == closed + 1
    assert list(results) == list(range(7))


def test_a_failure_is_raised_from_the_iteration() -> None:
    env = sf.StreamExecutionEnvironment()

    def boom(v: int) -> int:
        if v == 3000:
            raise ValueError("boom at 3000")
        return v

    got: list[int] = []
    with pytest.raises(ValueError, match="boom at 3000"):
        for v in env.from_collection(lambda: range(10_000)).map(boom).execute_and_collect():
            got.append(v)
    assert got == list(range(len(got))) and len(got) < 3000


def test_never_iterated_or_dropped_iterators_stop_their_job() -> None:
    env = sf.StreamExecutionEnvironment()
    closed = Counting.closed
    env.from_collection(lambda: itertools.count()).map(Counting()).execute_and_collect().close()
    assert Counting.closed == closed + 1
    results = env.from_collection(lambda: itertools.count()).map(Counting()).execute_and_collect()
    next(results)
    del results
    gc.collect()
    assert Counting.closed == closed + 2


def test_refused_inside_a_running_loop() -> None:
    env = sf.StreamExecutionEnvironment()
    ds = env.from_collection([1, 2])

    async def main() -> None:
        with pytest.raises(RuntimeError, match="execute_and_collect_async"):
            ds.execute_and_collect()

    asyncio.run(main())
