"""CheckpointStatsTracker (Flink's CheckpointStatsTracker): counts, latest, history, summary."""

from __future__ import annotations

import logging

import pytest

from streamflow.runtime.checkpoint_stats import HISTORY_SIZE, CheckpointStatsTracker
from streamflow.runtime.job_metrics import backpressure_level
from streamflow.testing import ManualClock


def test_trigger_complete_fail_and_history(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(1_000)
    t = CheckpointStatsTracker(clock)
    t.triggered(1, False, num_subtasks=2)
    clock.advance(40)
    timings = {"a#0": {"alignment_ms": 7, "sync_ms": 2}, "b#0": {"alignment_ms": 3, "sync_ms": 4}}
    t.completed(1, path="/ck/chk-1", state_size=300, async_ms=5, tasks=timings)
    t.triggered(2, True, num_subtasks=2)
    t.triggered(3, False, num_subtasks=2)
    clock.advance(10)
    with caplog.at_level(logging.WARNING, logger="streamflow.checkpoint"):
        t.failed(3, "declined: declined by a#0: task_failed")
        t.failed(3, "reported twice")  # ignored: a checkpoint fails once
    assert [r.getMessage() for r in caplog.records] == [
        "checkpoint 3 failed: declined: declined by a#0: task_failed"
    ]
    j = t.to_json()
    assert j["counts"] == {"restored": 0, "total": 3, "in_progress": 1, "completed": 1, "failed": 1}
    assert [(h["id"], h["status"], h["checkpoint_type"]) for h in j["history"]] == [
        (3, "FAILED", "CHECKPOINT"), (2, "IN_PROGRESS", "SAVEPOINT"), (1, "COMPLETED", "CHECKPOINT"),
    ]  # fmt: skip
    done = j["latest"]["completed"]
    keys = ("end_to_end_duration", "state_size", "alignment_duration", "sync_duration", "async_duration")
    assert [done[k] for k in keys] == [40, 300, 7, 4, 5]
    assert (done["trigger_timestamp"], done["latest_ack_timestamp"], done["external_path"]) == (
        1000,
        1040,
        "/ck/chk-1",
    )
    assert j["latest"]["failed"]["failure_message"].startswith("declined")
    assert j["latest"]["failed"]["end_to_end_duration"] == 10
    assert j["summary"]["state_size"] == {"min": 300, "max": 300, "avg": 300}


def test_history_is_bounded_and_the_final_checkpoint_needs_no_trigger() -> None:
    t = CheckpointStatsTracker(ManualClock())
    for cid in range(1, HISTORY_SIZE + 6):
        t.triggered(cid, False, 1)
    t.completed(HISTORY_SIZE + 6, path="p", state_size=1, async_ms=0, tasks={})  # a bounded job's last
    history = t.history
    assert len(history) == HISTORY_SIZE
    assert history[0].checkpoint_id == HISTORY_SIZE + 6 and history[0].status == "COMPLETED"
    assert t.num_completed == 1


@pytest.mark.parametrize(
    ("ratio", "level"),
    [(0.0, "ok"), (0.10, "ok"), (0.11, "low"), (0.5, "low"), (0.51, "high"), (1.0, "high")],
)
def test_backpressure_levels_as_flinks_web_ui(ratio: float, level: str) -> None:
    assert backpressure_level(ratio) == level
