"""What a job logs through the standard logging module: start and end, checkpoints at DEBUG,
failures and restarts at WARNING with their cause, fields for structured formatters."""

from __future__ import annotations

import logging
import time

import pytest

import streamflow as sf


class FailOnce(sf.MapFunction):
    failed = False

    def map(self, value: int) -> int:
        if value == 300 and not FailOnce.failed:
            FailOnce.failed = True
            raise RuntimeError("boom at 300")
        time.sleep(0.0002)
        return value


def test_start_checkpoints_failure_restart_and_end_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    FailOnce.failed = False
    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(10)
    env.set_batch_size(10)
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(2, 0))
    env.from_collection(list(range(600))).uid("n").map(FailOnce()).uid("m").add_sink(lambda v: None)
    with caplog.at_level(logging.DEBUG, logger="streamflow"):
        result = env.execute("logged")
    assert result.status is sf.JobStatus.FINISHED
    records = [(r.name, r.levelno, r.getMessage(), r) for r in caplog.records]

    def find(level: int, text: str) -> logging.LogRecord:
        hits = [r for _, lvl, msg, r in records if lvl == level and text in msg]
        assert hits, f"no {logging.getLevelName(level)} record with {text!r}: {[m for *_, m, _ in records]}"
        return hits[0]

    started = find(logging.INFO, "job 'logged' (")
    assert started.job_name == "logged" and len(started.job_id) == 32  # type: ignore[attr-defined]
    task_failed = find(logging.WARNING, "failed: RuntimeError('boom at 300')")
    assert task_failed.name == "streamflow.task" and "Map" in task_failed.getMessage()
    restart = find(logging.WARNING, "restart 1")
    assert "RuntimeError: boom at 300" in restart.getMessage() and restart.exc_info is not None
    assert restart.restarts == 1  # type: ignore[attr-defined]
    done = find(logging.DEBUG, "complete:")
    assert done.name == "streamflow.checkpoint" and "bytes in" in done.getMessage()
    find(logging.INFO, "job 'logged' finished")
    assert not [msg for name, lvl, msg, _ in records if lvl >= logging.ERROR]
