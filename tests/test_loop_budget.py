"""The job lets the caller's event loop run after each slice of its loop budget (issue 12 item 4).

No wall-clock timing: :class:`TickingClock` advances 1 ms each time anybody reads it, so a
slice of the budget is a known number of clock reads (about two per batch here), and the
heartbeat, a coroutine in the same loop that wakes on every loop iteration, counts how many
records the job got through between two of its turns: that is how long the job held the loop.
"""

from __future__ import annotations

import asyncio
import datetime

import pytest

import streamflow as sf
from streamflow.clock import SystemClock
from streamflow.runtime.loop_budget import GAP_ITERATIONS, LoopBudget, bind, parse_loop_budget, yield_point

BATCH = 100
N = 200_000


class TickingClock(SystemClock):
    """Real timers; a monotonic clock that moves 1 ms per reading."""

    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        self.t += 0.001
        return self.t


class Count(sf.SinkFunction):
    seen = 0

    def write_batch(self, values: list) -> None:
        Count.seen += len(values)


async def _held(env: sf.StreamExecutionEnvironment) -> tuple[int, dict]:
    """Run the job beside a heartbeat; the most records processed between two heartbeat turns."""
    Count.seen = 0
    client = await env.execute_async("held")
    done = asyncio.ensure_future(client.get_job_execution_result())
    worst, last = 0, 0
    while not done.done():
        await asyncio.sleep(0)
        worst, last = max(worst, Count.seen - last), Count.seen
    result = await done
    assert Count.seen == N
    return worst, result.metrics


def _env(budget: float | None) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment(clock=TickingClock()).set_batch_size(BATCH)
    env.set_loop_budget(budget)
    return env


async def test_a_long_job_lets_the_loop_run_every_slice() -> None:
    env = _env(10)
    env.from_collection(range(N)).map(lambda i: i + 1).filter(lambda i: i >= 0).add_sink(Count())
    worst, metrics = await _held(env)
    # 10 ms of budget = 10 clock readings, about 3 per batch (source loop and two operator
    # outputs): a few batches per slice; far from the 2,000 batches of the whole input
    assert worst <= 6 * BATCH, worst
    assert metrics["job.numLoopYields"] >= N // BATCH // 6


async def test_without_a_budget_the_job_holds_the_loop_throughout() -> None:
    """The heartbeat above can tell: with no budget it sees the whole input at once."""
    env = _env(None)
    env.from_collection(range(N)).map(lambda i: i + 1).add_sink(Count())
    worst, metrics = await _held(env)
    assert worst == N
    assert metrics["job.numLoopYields"] == 0


async def test_the_budget_is_shared_by_the_tasks_of_a_job() -> None:
    """Four tasks (a source, two keyed subtasks, a sink) hold the loop no longer than one."""
    env = _env(10)
    (
        env.from_collection(range(N))
        .key_by(lambda i: i % 7)
        .map(lambda i: i)
        .set_parallelism(2)
        .disable_chaining()
        .add_sink(Count())
        .set_parallelism(1)
    )
    worst, _ = await _held(env)
    # per-task budgets would let each busy task spend a slice per iteration; shared, the job
    # spends one slice (plus one batch per task that was already scheduled in that iteration)
    assert worst <= 10 * BATCH, worst


async def test_a_pause_gives_the_loop_gap_iterations() -> None:
    loop_turns = 0
    stop = False

    async def count_turns() -> None:
        nonlocal loop_turns
        while not stop:
            loop_turns += 1
            await asyncio.sleep(0)

    counter = asyncio.ensure_future(count_turns())
    await asyncio.sleep(0)
    budget = LoopBudget(10, TickingClock())
    before = loop_turns
    await budget.pause()
    stop = True
    await counter
    assert loop_turns - before >= GAP_ITERATIONS
    assert budget.slices == budget.waits == 1


class SetClock(SystemClock):
    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t


async def test_a_piece_that_would_overrun_the_slice_pauses_first() -> None:
    """Pieces of 4 ms in a 10 ms budget: after the second (8 ms in), a third would end at 12
    ms, so the task pauses before it (it used to start it and hold the loop 12-16 ms)."""
    clock = SetClock()
    budget = LoopBudget(10, clock)

    async def step() -> list[int]:
        bind(budget)
        slices = []
        for _ in range(4):
            clock.t += 0.004
            await yield_point()
            slices.append(budget.slices)
        return slices

    assert await asyncio.ensure_future(step()) == [0, 1, 1, 2]


def test_configuration_key_and_parsing() -> None:
    env = sf.StreamExecutionEnvironment({"execution.loop-budget": "5 ms"})
    assert env.get_loop_budget() == 5.0
    assert parse_loop_budget("0.5 s") == 500.0
    assert parse_loop_budget(datetime.timedelta(milliseconds=20)) == 20.0
    assert parse_loop_budget("none") is None
    assert sf.StreamExecutionEnvironment().get_loop_budget() == 10.0
    for bad in ("-1 ms", "0", "ten ms", "5 hours"):
        with pytest.raises(ValueError):
            parse_loop_budget(bad)


class Boom(sf.SinkFunction):
    def write_batch(self, values: list) -> None:
        raise RuntimeError("boom")


def _keyed_job(env: sf.StreamExecutionEnvironment, source: sf.DataStream, sink: sf.SinkFunction) -> None:
    keyed = source.key_by(lambda i: i % 7).map(lambda i: i).set_parallelism(2).disable_chaining()
    keyed.add_sink(sink).set_parallelism(1)


async def test_running_counts_only_tasks_that_work() -> None:
    """``LoopBudget.running`` (tasks of the job not waiting) goes back to 0 whenever the whole
    job waits for input, and after the job ends, finished, failed or cancelled: the last task
    to wait collects the young garbage (``collect_young_when_idle``) only when it reads 0, and a
    later slice starts when it goes from 0 to 1."""
    env = sf.StreamExecutionEnvironment()
    _keyed_job(env, env.from_collection(range(5_000)), Count())
    client = await env.execute_async("finished")
    budget = client.execution.loop_budget
    await client.get_job_execution_result()
    assert budget.running == 0

    env = sf.StreamExecutionEnvironment()
    _keyed_job(env, env.from_collection(range(5_000)), Boom())
    client = await env.execute_async("failed")
    budget = client.execution.loop_budget
    with pytest.raises(Exception, match="boom"):
        await client.get_job_execution_result()
    assert budget.running == 0

    gate = asyncio.Event()

    async def waits_midway() -> object:
        for i in range(1_000):
            yield i
        await gate.wait()  # the whole job waits for input here
        for i in range(1_000):
            yield i

    env = sf.StreamExecutionEnvironment()
    _keyed_job(env, env.from_async_iterable(waits_midway), Count())
    client = await env.execute_async("idle, then cancelled")
    budget = client.execution.loop_budget
    for _ in range(200):  # until the first 1,000 records are through and every task waits
        await asyncio.sleep(0.005)
        if budget.running == 0:
            break
    assert budget.running == 0
    gate.set()
    await asyncio.sleep(0)
    await client.cancel()
    try:
        await client.get_job_execution_result()
    except BaseException:
        pass  # how a cancelled job reports does not matter here
    assert budget.running == 0


async def test_the_chores_of_a_pause_count_against_the_next_slice() -> None:
    """Chores run at a pause, before the loop's free iterations: the job's work, so the next
    slice is shorter by what they took (the loop is held budget, not budget plus chores)."""
    clock = SetClock()
    budget = LoopBudget(10, clock)

    def chore() -> None:
        clock.t += 0.003

    budget.chores.append(chore)
    clock.t = 0.010
    await budget.pause()
    assert budget.deadline == pytest.approx(clock.t + 0.010 - 0.003)
    budget.chores.append(lambda: setattr(clock, "t", clock.t + 0.020))  # never more than half
    clock.t = budget.deadline
    await budget.pause()
    assert budget.deadline == pytest.approx(clock.t + 0.005)


async def test_the_first_piece_of_a_long_step_expects_the_task_s_last_piece() -> None:
    """A long step (a checkpoint capture) calls yield_point before its first piece; with no
    piece just measured (other work ran since), it expects one as long as the last piece this
    task measured: with 3 ms of the slice left and 4 ms pieces, it pauses first (it used to
    start the piece and overrun the slice by up to a piece)."""
    clock = SetClock()
    budget = LoopBudget(10, clock)

    async def steps() -> list[int]:
        bind(budget)
        await yield_point()  # the first step begins
        clock.t += 0.004
        await yield_point()  # one 4 ms piece measured
        slices = [budget.slices]
        clock.t += 0.050  # other work (batches, pauses) since this task's last piece
        budget.deadline = clock.t + 0.003
        await yield_point()  # the next step begins with 3 ms left
        slices.append(budget.slices)
        return slices

    before, after = await asyncio.ensure_future(steps())
    assert after == before + 1
