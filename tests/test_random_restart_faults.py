"""Seeded faults against the restart strategies other than fixed delay, against cancelling (or
stopping with a savepoint) a job between its attempts, and against BATCH jobs with pipelined
exchanges (``ALL_EXCHANGES_PIPELINED``: no region failover, the whole job restarts).

* the strategies: Flink's ``FailureRateRestartBackoffTimeStrategy`` (the job fails once
  ``max + 1`` failures lie within the interval, its bound included) and
  ``ExponentialDelayRestartBackoffTimeStrategy`` (the delay doubles up to its maximum, resets
  after a smooth run of the threshold plus the current delay, jitter within its factor); the
  seeded job (``test_random_faults``: two sources, a failing keyed map, keyed state, an
  exactly-once FileSink) fails one to three times; ``numRestarts`` and the logged delays are
  the strategy's, and the output is the model's exactly once (or the job fails with
  ``RestartsExhaustedError``, nothing committed twice);
* cancelling: the job fails once and waits a restart delay; it is cancelled during the delay,
  or just as its new attempt restores; it must end CANCELED at once (not after the delay), no
  output after, no task or thread of it left, nothing committed twice (the restored attempt may
  fail in ``open()`` and restart again). A stop-with-savepoint
  during the delay is refused at once (Flink: its tasks are not running) and the job goes on
  to finish exactly once; one as the new attempt restores completes (or is retried), and a
  resume from its savepoint at another parallelism completes the output exactly once;
* pipelined batch: ``test_random_batch_faults``' jobs and user-function / job-end faults with
  pipelined exchanges; every fault is one logged whole-job restart; the output is the model's.

``STREAMFLOW_RANDOM_RESTART_FAULTS=200`` (or ``=200:400``) runs more seeds of each (the suite
runs 4; 0-139 passed when this was written).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import test_random_batch_faults as batch
import test_random_faults as rf
from savepoint_retry import stop_with_savepoint_retrying

import streamflow as sf
from streamflow.checkpoint.restart_strategy import ExponentialDelayRestart, FailureRateRestart
from streamflow.runtime.job import RestartsExhaustedError, SavepointCommitError

_disarm = rf._disarm  # (the autouse fixture clearing the armed faults)
DELAYS = re.compile(r"restart (\d+) in (\d+) ms by the restart strategy")


def _seeds(spec: str) -> range:
    first, _, last = spec.rpartition(":")
    return range(int(first or 0), int(last))


SEEDS = _seeds(os.environ.get("STREAMFLOW_RANDOM_RESTART_FAULTS", "4"))


def test_failure_rate_fails_the_job_at_max_plus_one_failures_within_the_interval_bound_included() -> None:
    """Flink's ``FailureRateRestartBackoffTimeStrategy.canRestart``: with the last ``max + 1``
    failures recorded, a restart needs the oldest more than ``interval`` ago."""
    strategy = FailureRateRestart(2, 1000, 5)
    assert [strategy.next_delay_ms(t) for t in (0, 500)] == [5, 5]
    assert strategy.next_delay_ms(1000) is None  # 0, 500, 1000: three within 1000 ms, bound included
    strategy = FailureRateRestart(2, 1000, 5)
    assert [strategy.next_delay_ms(t) for t in (0, 500, 1001, 1600)] == [5, 5, 5, 5]  # 500: 1100 ms ago
    assert strategy.next_delay_ms(1700) is None  # 1001, 1600, 1700


def test_exponential_delay_doubles_to_its_maximum_and_resets_after_a_smooth_run() -> None:
    """Flink's ``ExponentialDelayRestartBackoffTimeStrategy``: the first failure waits the
    initial backoff; each failure sooner than ``threshold`` after the restart the previous one
    scheduled multiplies it (truncated to ms, capped); a later one resets it. (A failure at or
    before the scheduled restart is merged into it: tests/test_exponential_delay_restart.py.)"""
    s = sf.RestartStrategies.exponential_delay_restart(10, 100, 2.5, 1000, 0.0)
    # each failure 1 ms after the restart the previous one scheduled
    assert [s.next_delay_ms(t) for t in (5000, 5011, 5037, 5100, 5201)] == [10, 25, 62, 100, 100]
    assert s.next_delay_ms(5301 + 999) == 100  # within the threshold: still the maximum
    assert s.next_delay_ms(6400 + 1000) == 10  # a smooth run: reset
    jittered = ExponentialDelayRestart(100, 1000, 2.0, 1000, jitter=0.25)
    assert 75 <= jittered.next_delay_ms(0) <= 125  # type: ignore[operator]
    assert 150 <= jittered.next_delay_ms(126) <= 250  # type: ignore[operator]
    limited = ExponentialDelayRestart(10, 100, 2.0, 1000, attempts=2)
    assert [limited.next_delay_ms(t) for t in (0, 11, 32)] == [10, 20, None]
    with pytest.raises(ValueError, match="multiplier"):
        ExponentialDelayRestart(10, 100, 1.0, 1000)


def test_a_restart_strategy_counts_the_failures_of_its_own_job_only(tmp_path: Path) -> None:
    """Flink creates a ``RestartBackoffTimeStrategy`` per job from its configuration: a second
    job of the same environment (same strategy object) has every restart again."""
    failed: list[int] = []

    def once_per_job(v: int) -> int:
        if v == 5 and len(failed) < runs[0]:
            failed.append(v)
            raise RuntimeError("injected: fails once per job")
        return v

    runs = [0]
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(1, 0))
    for run in (1, 2):
        runs[0] = run
        assert sorted(env.from_collection(list(range(10))).map(once_per_job).execute_and_collect()) == list(
            range(10)
        )
    assert len(failed) == 2


def _strategy(rng: random.Random) -> tuple[str, Any, Any]:
    """A strategy, and a function of the failure count: the delays it logs (None: exhausted)."""
    delay = rng.randrange(0, 20)
    if rng.random() < 0.5:
        most = rng.randrange(1, 4)
        return (
            f"failure-rate {most}",
            sf.RestartStrategies.failure_rate_restart(most, 60_000, delay),
            lambda n: [delay] * n if n <= most else None,
        )
    initial = rng.randrange(1, 10)
    cap = initial * rng.choice((2, 3, 8))

    def delays(n: int) -> list[int]:
        out = [initial]
        while len(out) < n:
            out.append(min(out[-1] * 2, cap))
        return out

    return f"exponential {initial}..{cap}", sf.RestartStrategies.exponential_delay_restart(
        initial, cap, 2.0, 60_000, 0.0
    ), delays  # fmt: skip


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_random_restart_strategy_restarts_as_flinks_and_keeps_exactly_once(
    seed: int, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(seed)
    cfg = rf.draw(seed) | {"seed": seed, "scenario": "failover", "fault": "function", "second": None}
    cfg["times"] = rng.randrange(1, 4)
    name, strategy, delays = _strategy(rng)
    rf._Failing.armed[str(tmp_path)] = cfg["times"]
    client = await rf.job(tmp_path, cfg, cfg["p1"], restarts=1, strategy=strategy).execute_async("faults")
    with caplog.at_level(logging.INFO, logger="streamflow"):
        try:
            await asyncio.wait_for(client.get_job_execution_result(), 60)
            exhausted = False
        except RestartsExhaustedError:
            exhausted = True
    # subtasks failing in one attempt are one failure of the job: one restart
    fired = rf._Failing.fired[str(tmp_path)]
    logged = [int(m.group(2)) for m in DELAYS.finditer(caplog.text)]
    assert 1 <= len(logged) + exhausted <= fired, (name, cfg, logged)
    assert logged == delays(len(logged)), (name, cfg)
    assert client.get_metrics()["job.numRestarts"] == len(logged), (name, cfg)
    out = rf.committed(tmp_path)
    assert not out - rf.expected(), (name, cfg)  # nothing twice, nothing wrong
    if exhausted:
        assert delays(len(logged) + 1) is None, (name, cfg, logged)
        return
    assert out == rf.expected(), (name, cfg)


def _threads() -> set[threading.Thread]:
    """Live threads, but the pools' (the event loop's default executor's, AnyIO's: their idle
    workers stay alive to be reused)."""
    pools = ("asyncio_", "ThreadPoolExecutor", "AnyIO worker thread")
    return {t for t in threading.enumerate() if not t.name.startswith(pools)}


async def _until(predicate: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.002)


@pytest.mark.parametrize("seed", SEEDS)
async def test_cancelling_or_stopping_a_job_between_its_attempts(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    cfg = rf.draw(seed) | {"seed": seed, "scenario": "failover", "fault": "function", "second": None}
    when = rng.choice(("delay", "restore", "stop", "stop restored"))
    delay = 20 if when in ("restore", "stop restored") else 3000  # waiting out the delay would show
    strategy = rng.choice(
        (
            sf.RestartStrategies.fixed_delay_restart(2, delay),
            sf.RestartStrategies.failure_rate_restart(2, 60_000, delay),
            sf.RestartStrategies.exponential_delay_restart(delay, 4 * delay, 2.0, 60_000, 0.0),
        )
    )
    tasks, threads = asyncio.all_tasks(), _threads()
    rf._Failing.armed[str(tmp_path)] = 1
    if when == "restore" and rng.random() < 0.5:  # the restored attempt fails opening: restarts again
        rf._Sum.failing_opens[str(tmp_path)] = 1
    client = await rf.job(tmp_path, cfg, cfg["p1"], restarts=1, strategy=strategy).execute_async("faults")
    await _until(lambda: client.get_job_status().value == "RESTARTING", "the restart delay")
    if when == "stop":  # refused at once; the job restarts and finishes
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="RESTARTING"):
            await asyncio.wait_for(client.stop_with_savepoint(False, str(tmp_path / "sp")), 1)
        assert time.monotonic() - started < 0.5
        await asyncio.wait_for(client.get_job_execution_result(), 60)
        assert rf.committed(tmp_path) == rf.expected(), cfg
        return
    if when == "stop restored":  # as the new attempt restores: a savepoint (retried), then a resume
        await _until(lambda: client.get_job_status().value == "RUNNING", "the restart")
        path = await stop_with_savepoint_retrying(client, tmp_path, rng.random() < 0.3)
        try:
            await asyncio.wait_for(client.get_job_execution_result(), 20)
        except SavepointCommitError:
            pass  # the resume from the savepoint commits the rest
        if path is not None:
            env = rf.job(tmp_path, cfg, cfg["p2"], restarts=0)
            env.configure({"execution.savepoint.path": path})
            await asyncio.wait_for((await env.execute_async("faults")).get_job_execution_result(), 60)
        assert rf.committed(tmp_path) == rf.expected(), (when, cfg, path)
        return
    if when == "delay":
        await asyncio.sleep(rng.uniform(0, 0.3))
    else:  # the new attempt restoring, opening or just running
        await _until(lambda: client.get_job_status().value == "RUNNING", "the restart")
        await asyncio.sleep(rng.choice((0, 0, 0.001, 0.01, 0.03)))
    started = time.monotonic()
    await asyncio.wait_for(client.cancel(), 2)
    assert time.monotonic() - started < 1.5, (when, cfg)
    assert client.get_job_status().value == "CANCELED", (when, cfg)
    result = await asyncio.wait_for(client.get_job_execution_result(), 2)
    assert result.status.value == "CANCELED", (when, cfg)
    out = rf.committed(tmp_path)
    assert not out - rf.expected(), (when, cfg)  # nothing twice
    await asyncio.sleep(0.1)
    assert rf.committed(tmp_path) == out, (when, cfg)  # nothing after
    left = {t for t in asyncio.all_tasks() - tasks if not t.done()}
    assert not left, (when, cfg, left)
    assert _threads() <= threads, (when, cfg, _threads() - threads)


class _CancelsThenFails(sf.KeyedProcessFunction):
    """Fails on record 5 of the first attempt; the restored attempt asks its job to cancel,
    then fails in ``open()`` (a failure racing the cancel)."""

    client: Any = None
    cancel: Any = None

    def open(self, runtime_context: Any) -> None:
        if runtime_context.get_attempt_number() > 0:
            _CancelsThenFails.cancel = asyncio.get_running_loop().create_task(self.client.cancel())
            raise RuntimeError("injected: open() fails as the job is cancelled")

    def process_element(self, value: Any, ctx: Any) -> Any:
        if value == 5:
            raise RuntimeError("injected: the first attempt fails")
        yield value


async def test_a_failure_racing_a_cancel_ends_the_job_canceled(caplog: pytest.LogCaptureFixture) -> None:
    """Found by the seeded cancel test (seed 7): ``cancel()`` raised the restored attempt's
    ``open()`` failure, and the job's result was that failure though its status said CANCELED."""
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(3, 0))
    env.from_collection(list(range(10))).key_by(lambda v: v % 2).process(_CancelsThenFails()).print()
    client = _CancelsThenFails.client = await env.execute_async("racing")
    result = await asyncio.wait_for(client.get_job_execution_result(), 10)
    await asyncio.wait_for(_CancelsThenFails.cancel, 2)  # returns: does not raise the failure
    assert result.status.value == client.get_job_status().value == "CANCELED"
    assert client.restarts == 1
    assert "failed while being cancelled (RuntimeError: injected: open() fails" in caplog.text


PIPELINED_KINDS = ("producer", "keyed", "consumer", "job_end", "publish")


@pytest.mark.parametrize("seed", SEEDS)
def test_random_faults_in_a_pipelined_batch_job_restart_it_whole(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(seed)
    cfg = batch.draw(seed)
    cfg["kinds"] = [rng.choice(PIPELINED_KINDS) for _ in cfg["kinds"]]
    calls = {"consumer": 11, "job_end": 3, "publish": 3}
    cfg["at"] = [rng.randrange(1, calls.get(k, 200)) for k in cfg["kinds"]]
    batch.arm(cfg, monkeypatch)
    restarts = len(cfg["kinds"]) - (1 if cfg["exhaust"] else 0)
    env, stream = batch.build(cfg, tmp_path, restarts)
    env.configure({"execution.batch-shuffle-mode": "ALL_EXCHANGES_PIPELINED"})
    with caplog.at_level(logging.INFO, logger="streamflow"):
        try:
            got = Counter(stream.execute_and_collect()) if stream is not None else None
            if stream is None:
                env.execute("pipelined faults")
                got = batch.output(cfg, tmp_path, None)
            exhausted = False
        except RestartsExhaustedError:
            exhausted = True
    logged = [r.getMessage() for r in caplog.records if DELAYS.search(r.getMessage())]
    assert not any("only its pipelined region" in m for m in logged), logged  # whole-job restarts
    assert len(logged) <= restarts and len(logged) <= len(batch.Plan.fired), (cfg, batch.Plan.fired, logged)
    if exhausted:
        assert len(batch.Plan.fired) > restarts, (cfg, batch.Plan.fired)
        return
    assert got == batch.model(cfg["shape"]), (cfg, batch.Plan.fired)
