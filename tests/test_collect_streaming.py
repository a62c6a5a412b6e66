"""execute_and_collect() runs the job while the caller iterates, and stops it when closed."""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import time
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.common import Row
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


def test_limit_returns_a_list_as_pyflink() -> None:
    """PyFlink's ``DataStream.execute_and_collect(limit=n)`` (flink-python/pyflink/datastream/
    data_stream.py) returns a ``list`` of the first n records, not an iterator: a PyFlink program
    indexes it, takes its ``len`` or compares it with a list. Returned as a CloseableIterator,
    ``results == [...]`` was silently False. It still closes as a context manager (a no-op)."""
    env = sf.StreamExecutionEnvironment()
    data = ["pyflink", "datastream", "execute", "collect"]
    results = env.from_collection(data).execute_and_collect(limit=3)
    assert isinstance(results, list)
    assert results == ["pyflink", "datastream", "execute"]
    assert len(results) == 3 and results[0] == "pyflink"
    keyed = env.from_collection([("a", 1), ("b", 2)]).key_by(lambda r: r[0]).execute_and_collect(limit=1)
    assert keyed == [Row(f0="a", f1=("a", 1))]
    with env.from_collection([1, 2]).execute_and_collect(limit=5) as everything:
        assert everything == [1, 2]


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


# -- several subtasks writing into the collect sink (its channel's one wake-up slot) --------
@pytest.mark.timeout(120)
@pytest.mark.parametrize("capacity", [1, 8])
def test_several_writers_and_a_slow_reader_never_hang(capacity: int) -> None:
    """Four sink subtasks write into one small channel while the reader takes a record at a
    time: two writers waiting for room at once lost a wake-up before the writers took turns."""

    async def main() -> list[Any]:
        env = sf.StreamExecutionEnvironment()
        env.set_parallelism(4)
        data = [(f"k{i % 13}", i) for i in range(5_000)]
        ds = env.from_collection(data).key_by(lambda e: e[0]).sum(1)
        out = []
        async for record in ds.execute_and_collect_async(capacity=capacity):
            out.append(record)
            await asyncio.sleep(0)
        return out

    out = asyncio.run(asyncio.wait_for(main(), 90))
    assert len(out) == 5_000
    assert {k: v for k, v in out} == {f"k{k}": sum(range(k, 5_000, 13)) for k in range(13)}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("parallelism", [1, 4])
def test_every_way_of_stopping_ends_the_job(parallelism: int) -> None:
    def job() -> Any:
        env = sf.StreamExecutionEnvironment()
        env.set_parallelism(parallelism)
        return env.from_collection(lambda: itertools.count()).key_by(lambda v: v % 7).map(lambda v: v)

    closed = []
    for _ in range(3):  # repeated: a lost wake-up showed only sometimes
        assert len(list(job().execute_and_collect(limit=20_000))) == 20_000
        with job().execute_and_collect() as results:
            assert len(list(itertools.islice(results, 30_000))) == 30_000
        results = job().execute_and_collect()
        next(results)
        results.close()
        closed.append(list(results))
    assert closed == [[], [], []]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_failure_in_a_subtask_is_raised_while_others_still_write(parallelism: int) -> None:
    def boom(v: int) -> int:
        if v == 50_000:
            raise ValueError("boom at 50000")
        return v

    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    ds = env.from_collection(lambda: itertools.count()).key_by(lambda v: v % 5).map(boom)
    with pytest.raises(ValueError, match="boom at 50000"):
        for _ in ds.execute_and_collect():
            pass


class FailOnce(MapFunction):
    """Slow enough that checkpoints complete during the run; fails once, at record ``at``."""

    failed: set[str] = set()

    def __init__(self, key: str, at: int) -> None:
        self.key, self.at = key, at

    def map(self, value: int) -> int:
        if value % 64 == 0:
            time.sleep(0.001)
        if value == self.at and self.key not in FailOnce.failed:
            FailOnce.failed.add(self.key)
            raise RuntimeError("injected failure")
        return value


def failing_job(tmp_path: Path, parallelism: int, checkpointing: bool) -> tuple[Any, Any]:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    if checkpointing:
        env.enable_checkpointing(20)
        env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(3, 0))
    stream = env.from_collection(list(range(20_000))).rebalance().map(FailOnce(f"{tmp_path}", 15_000))
    return env, stream


@pytest.mark.parametrize("parallelism", [1, 4])
def test_collect_is_exactly_once_across_a_failover_with_checkpointing(
    tmp_path: Path, parallelism: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Records reach the consumer only once a checkpoint covering them completed: the failover
    replays the rest, and nothing repeats (before, ~4,000 records came twice)."""
    _env, stream = failing_job(tmp_path, parallelism, checkpointing=True)
    with caplog.at_level(logging.INFO, logger="streamflow"), stream.execute_and_collect() as results:
        out = list(results)
    assert sorted(out) == list(range(20_000))
    assert "injected failure" in caplog.text  # (the failover happened, and was logged)
    assert "held records of later checkpoints dropped" in caplog.text


async def test_collect_async_is_exactly_once_across_a_failover(tmp_path: Path) -> None:
    _env, stream = failing_job(tmp_path, 2, checkpointing=True)
    out = [r async for r in stream.execute_and_collect_async()]
    assert sorted(out) == list(range(20_000))


def test_records_wait_for_the_checkpoint_that_covers_them(tmp_path: Path) -> None:
    """An unbounded job: nothing is collected before the first checkpoint completes."""
    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    started = time.monotonic()
    with env.from_collection(lambda: itertools.count()).execute_and_collect() as results:
        first = next(results)
    assert first == 0
    assert time.monotonic() - started >= 0.3  # (behaviour, not speed: the checkpoint interval)


def test_collect_without_checkpointing_repeats_after_a_restart_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _env, stream = failing_job(tmp_path, 1, checkpointing=False)
    with caplog.at_level(logging.WARNING, logger="streamflow"), stream.execute_and_collect() as results:
        out = list(results)
    assert set(out) == set(range(20_000)) and len(out) > 20_000  # at-least-once
    assert "records already collected repeat (at-least-once)" in caplog.text


@pytest.mark.parametrize("parallelism", [1, 4])
def test_many_steps_collect_what_a_collect_sink_gets(parallelism: int) -> None:
    """A keyed running sum over many collect steps (more records than a step and the collect
    channel hold) gives, per key, the same sequence of outputs as the job written to a
    CollectSink (the general sink path), at parallelism 1 and 4."""
    from streamflow.api.collect import CHANNEL_RECORDS, STEP_RECORDS
    from streamflow.common import Types
    from streamflow.connectors.sinks import CollectSink

    n = 10 * (STEP_RECORDS + CHANNEL_RECORDS) + 7
    events = [(f"k{i % 37}", i % 97, i) for i in range(n)]
    event_type = Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])

    def job(env: Any) -> Any:
        env.set_parallelism(parallelism)
        ds = env.from_collection(events, type_info=event_type)
        return ds.key_by(lambda e: e[0]).reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))

    def per_key(records: Any) -> dict[str, list[tuple[str, int, int]]]:
        out: dict[str, list[tuple[str, int, int]]] = {}
        for r in records:
            out.setdefault(r[0], []).append(r)
        return out

    env = sf.StreamExecutionEnvironment()
    with job(env).execute_and_collect() as results:
        collected = list(results)
    sink = CollectSink()
    env = sf.StreamExecutionEnvironment()
    job(env).sink_to(sink)
    env.execute()
    assert len(collected) == n
    assert per_key(collected) == per_key(sink.results)


def test_the_job_never_runs_ahead_of_the_caller_by_more_than_the_channel() -> None:
    """A step hands the caller what the collect channel holds and the job resumes only at the
    next step: the records made but not yet iterated are at most the channel's capacity and
    the one batch its writer waits to put (the sink once drained the channel inside the loop,
    and the job refilled it before the loop stopped: twice as many)."""
    from streamflow.api.collect import CHANNEL_RECORDS

    env = sf.StreamExecutionEnvironment()
    env.set_batch_size(100)
    ahead = 0
    with env.from_collection(lambda: range(30_000)).map(Counting()).execute_and_collect() as results:
        for i, value in enumerate(results):
            assert value == i
            ahead = max(ahead, Counting.seen - i)
    assert ahead <= CHANNEL_RECORDS + 100
    assert ahead >= CHANNEL_RECORDS // 2  # the check sees steps of a channel's worth


def test_close_inside_the_loop_ends_it_and_leaves_shared_lists_whole() -> None:
    """The caller iterates the collect channel's own record lists (no copy); ``close()`` inside
    the loop ends the iteration at once, without emptying a list that another consumer of the
    same stream was handed too (here a sink that keeps the lists it gets)."""
    from streamflow.functions import SinkFunction

    class KeepLists(SinkFunction):
        lists: list[list[Any]] = []

        def write_batch(self, values: list) -> None:
            type(self).lists.append(values)

    KeepLists.lists = []
    env = sf.StreamExecutionEnvironment()
    env.set_batch_size(100)
    ds = env.from_collection(lambda: range(100_000)).map(lambda v: v + 1)
    ds.add_sink(KeepLists())
    seen = []
    results = ds.execute_and_collect()
    for value in results:
        seen.append(value)
        if len(seen) == 150:  # inside the second batch of the first step
            results.close()
    assert seen == list(range(1, 151))  # nothing after close(), not even the rest of the batch
    assert list(results) == []
    kept = KeepLists.lists
    assert kept and all(len(lst) == 100 for lst in kept)  # the shared lists are whole
    assert [v for lst in kept for v in lst] == list(range(1, 100 * len(kept) + 1))
