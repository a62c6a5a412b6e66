"""Operator lifecycle on every path, error attribution, cancellation, embedding."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

import streamflow as sf
from streamflow.connectors.base import Sink
from streamflow.runtime.operator import StreamOperator, where_raised
from streamflow.runtime.start_gate import StartGate


class Recorder(sf.MapFunction):
    """Records its lifecycle in a shared log; can fail at a chosen step."""

    def __init__(self, name: str, log: list[str], fail_in: str | None = None) -> None:
        self.name, self.log, self.fail_in = name, log, fail_in

    def open(self, runtime_context: sf.RuntimeContext) -> None:
        self.log.append(f"open {self.name}")
        if self.fail_in == "open":
            raise RuntimeError(f"boom in open of {self.name}")

    def map(self, value: int) -> int:
        if self.fail_in == "map" and value == 3:
            raise ValueError(f"boom in map of {self.name}")
        return value

    def close(self) -> None:
        self.log.append(f"close {self.name}")
        if self.fail_in == "close":
            raise RuntimeError(f"boom in close of {self.name}")


def pipeline(log: list[str], fail: dict[str, str], chaining: bool = True) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment()
    if not chaining:
        env.disable_operator_chaining()
    s = env.from_collection(list(range(10)))
    for name in ("a", "b", "c"):
        s = s.map(Recorder(name, log, fail.get(name))).name(name)
    s.add_sink(lambda v: None)
    return env


@pytest.mark.parametrize("chaining", [True, False])
def test_normal_end_opens_and_closes_every_operator(chaining: bool) -> None:
    log: list[str] = []
    pipeline(log, {}, chaining).execute()
    assert sorted(log) == sorted(f"{s} {n}" for s in ("open", "close") for n in "abc")
    if chaining:  # opened tail to head, so consumers are ready first
        assert log[:3] == ["open c", "open b", "open a"]


@pytest.mark.parametrize("chaining", [True, False])
@pytest.mark.parametrize(
    ("step", "operator", "exc_type"),
    [("open", "b", RuntimeError), ("map", "b", ValueError), ("close", "b", RuntimeError)],
)
def test_error_reaches_caller_with_operator_name_and_opened_ones_close(
    chaining: bool, step: str, operator: str, exc_type: type[Exception]
) -> None:
    log: list[str] = []
    env = pipeline(log, {operator: step}, chaining)
    with pytest.raises(exc_type, match=f"boom in {step} of {operator}") as info:
        env.execute()
    assert where_raised(info.value) is not None and f"'{operator}'" in where_raised(info.value)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert f"operator '{operator}'" in notes
    if step == "map":
        assert "while processing record 3" in notes
    opened = {line.split()[1] for line in log if line.startswith("open")}
    closed = {line.split()[1] for line in log if line.startswith("close")}
    assert opened == closed  # close ran for every operator that was opened


class _Unhashable:
    """A key no hashable stand-in fits (lists, dicts and sets get one: test_unhashable_keys.py)."""

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "<unhashable>"


def test_unhashable_key_names_operator_and_shows_record() -> None:
    env = sf.StreamExecutionEnvironment()
    env.from_collection([{"k": [1, 2], "v": 1}]).key_by(lambda r: _Unhashable()).reduce(lambda a, b: a).name(
        "my-reduce"
    ).print()
    with pytest.raises(TypeError, match=r"unhashable key <unhashable>") as info:
        env.execute()
    notes = "\n".join(info.value.__notes__)
    assert "'my-reduce'" in notes and "{'k': [1, 2], 'v': 1}" in notes


def test_unhashable_key_with_parallel_partitioning_names_operator() -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    env.from_collection([[1, 2]]).map(lambda r: r).key_by(lambda r: _Unhashable()).sum(0).name("agg").print()
    with pytest.raises(TypeError, match="no stable hash") as info:
        env.execute()
    assert "'agg'" in "\n".join(info.value.__notes__)


def test_execute_inside_running_loop_is_a_clear_error() -> None:
    async def main() -> None:
        env = sf.StreamExecutionEnvironment()
        env.from_collection([1]).print()
        env.execute()

    with pytest.raises(RuntimeError, match="execute_async"):
        asyncio.run(main())


async def ticking_source():  # an endless async source
    i = 0
    while True:
        yield i
        i += 1
        await asyncio.sleep(0.001)


async def test_execute_async_runs_while_application_keeps_serving_and_cancel_stops_it() -> None:
    log: list[str] = []
    env = sf.StreamExecutionEnvironment()
    seen: list[int] = []
    env.from_async_iterable(ticking_source).map(Recorder("m", log)).add_sink(seen.append)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.002)

    tick_task = asyncio.ensure_future(ticker())
    client = await env.execute_async("embedded")
    async with asyncio.timeout(30):
        while len(seen) < 50:
            await asyncio.sleep(0.01)
    ticks_during = ticks
    assert ticks_during >= 5  # the application kept being served
    assert client.get_job_status() is sf.JobStatus.RUNNING
    await asyncio.wait_for(client.cancel(), 30)
    assert client.get_job_status() is sf.JobStatus.CANCELED
    assert log == ["open m", "close m"]  # cancellation closes operators too
    n = len(seen)
    await asyncio.sleep(0.02)
    assert len(seen) == n  # nothing runs after cancel
    result = await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert result.status is sf.JobStatus.CANCELED
    tick_task.cancel()


async def test_busy_bounded_job_does_not_starve_the_loop() -> None:
    env = sf.StreamExecutionEnvironment()
    total = 0

    def add(v: int) -> None:
        nonlocal total
        total += v

    env.from_collection(lambda: range(300_000)).map(lambda x: x + 1).add_sink(add)
    tick_times: list[float] = []

    # the loop thread's CPU time, not wall time: what the job computed between two turns of the
    # application, not how long a loaded machine left the process off the CPU
    async def ticker() -> None:
        while True:
            tick_times.append(time.thread_time())
            await asyncio.sleep(0)

    t = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    client = await env.execute_async()
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    tick_times.append(time.thread_time())
    t.cancel()
    assert total == sum(range(1, 300_001))
    # the job yields to the loop every few ms: the application never waits long
    assert len(tick_times) >= 3
    assert max(b - a for a, b in itertools.pairwise(tick_times)) < 0.1


async def test_failure_in_one_task_cancels_others_and_all_close() -> None:
    log: list[str] = []
    env = sf.StreamExecutionEnvironment()
    endless = env.from_async_iterable(ticking_source).map(Recorder("endless", log)).name("endless")
    failing = env.from_collection([1, 2, 3, 4]).map(Recorder("bad", log, "map")).name("bad")
    endless.union(failing).map(Recorder("after", log)).name("after").add_sink(lambda v: None)
    client = await env.execute_async()
    with pytest.raises(ValueError, match="boom in map of bad"):
        await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert client.get_job_status() is sf.JobStatus.FAILED
    assert sorted(log) == sorted(f"{s} {n}" for s in ("open", "close") for n in ("endless", "bad", "after"))


async def test_async_collect_streams_and_limit_cancels() -> None:
    env = sf.StreamExecutionEnvironment()
    async with asyncio.timeout(60):
        out = [x async for x in env.from_async_iterable(ticking_source).execute_and_collect_async(limit=20)]
    assert out == list(range(20))


class LifecycleSink(sf.Sink):
    """A sink whose operator records every lifecycle call (and can fail in one)."""

    def __init__(self, log: list[str], fail_in: str | None = None) -> None:
        self.log, self.fail_in = log, fail_in

    def create_operator(self, name: str) -> Any:
        from streamflow.runtime.operator import StreamOperator

        sink = self

        class Op(StreamOperator):
            async def open(self) -> None:
                sink.log.append("open")

            async def process_batch(self, records: list, timestamps: Any) -> None:
                if sink.fail_in == "process":
                    raise RuntimeError("sink failed")

            async def finish(self) -> None:
                sink.log.append("finish")

            async def close(self) -> None:
                sink.log.append("close")

            def dispose(self) -> None:
                sink.log.append("dispose")

        return Op(name)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("normal", ["open", "finish", "close", "dispose"]),
        ("error", ["open", "close", "dispose"]),
        ("cancel", ["open", "close", "dispose"]),
    ],
)
async def test_dispose_runs_on_every_path(path: str, expected: list[str]) -> None:
    log: list[str] = []
    env = sf.StreamExecutionEnvironment()
    source = env.from_async_iterable(ticking_source) if path == "cancel" else env.from_collection([1, 2])
    source.sink_to(LifecycleSink(log, "process" if path == "error" else None))
    client = await env.execute_async()
    if path == "cancel":
        await asyncio.sleep(0.02)
        await asyncio.wait_for(client.cancel(), 30)
    elif path == "error":
        with pytest.raises(RuntimeError, match="sink failed"):
            await asyncio.wait_for(client.get_job_execution_result(), 60)
    else:
        await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert log == expected


class _SlowOpeningSink(Sink):
    """A sink whose subtask 1 takes a while to open (a restored two-phase sink settling what its
    checkpoint left pending): every subtask logs when it opened and every record it receives."""

    def __init__(self, log: list[tuple[str, int]]) -> None:
        self.log = log

    def create_operator(self, name: str) -> StreamOperator:
        log = self.log

        class SlowOpen(StreamOperator):
            async def open(self) -> None:
                await super().open()
                if self.ctx.subtask_index == 1:
                    await asyncio.sleep(0.2)
                log.append(("opened", self.ctx.subtask_index))

            async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
                log.extend(("record", self.ctx.subtask_index) for _ in records)

        return SlowOpen(name)


@pytest.mark.parametrize("chained_source", [True, False])
async def test_no_input_starts_before_every_task_opened(chained_source: bool) -> None:
    """A source starts reading only once every task of the job has opened its operators, so a
    slow-opening sink subtask cannot see records overtaken by its peers' newer ones."""
    log: list[tuple[str, int]] = []
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    s = env.from_collection(list(range(100)))
    if not chained_source:
        s = s.rebalance().map(lambda v: v)
    s.sink_to(_SlowOpeningSink(log))
    client = await env.execute_async("slow open")
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    first_record = next(i for i, entry in enumerate(log) if entry[0] == "record")
    assert sorted(log[:first_record]) == [("opened", 0), ("opened", 1)]
    assert sum(entry[0] == "record" for entry in log) == 100


async def test_start_gate_releases_every_task_when_the_last_opens() -> None:
    gate = StartGate(3)
    first, second = asyncio.ensure_future(gate.opened()), asyncio.ensure_future(gate.opened())
    await asyncio.sleep(0)
    assert not first.done() and not second.done() and not gate.open
    await gate.opened()  # the last one does not wait
    await asyncio.wait_for(asyncio.gather(first, second), 1)
    assert gate.open
    with pytest.raises(RuntimeError, match="more tasks opened than the job has"):
        await gate.opened()
