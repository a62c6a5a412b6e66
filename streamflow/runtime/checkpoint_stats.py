"""Checkpoint history and counts for the REST API and metrics (Flink's CheckpointStatsTracker).

The job's checkpoint driver reports each checkpoint's trigger, completion
(with its size, durations, alignment and path) and failure (with its cause);
this plain class keeps the counts, the latest of each kind and a bounded
history, newest first, as Flink's ``/jobs/<id>/checkpoints`` shows them. It
outlives an execution attempt: the job's one tracker sees every attempt's
checkpoints.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any

from ..clock import Clock

_log = logging.getLogger("streamflow.checkpoint")
HISTORY_SIZE = 20


@dataclass
class CheckpointRecord:
    checkpoint_id: int
    is_savepoint: bool
    trigger_timestamp: int  # wall ms
    status: str = "IN_PROGRESS"  # IN_PROGRESS, COMPLETED, FAILED
    latest_ack_timestamp: int | None = None
    end_to_end_duration: int | None = None  # ms
    state_size: int = 0  # bytes written
    alignment_duration: int = 0  # ms, the largest of the subtasks'
    sync_duration: int = 0  # ms, the largest of the subtasks' synchronous snapshots
    async_duration: int = 0  # ms, persisting to storage
    num_subtasks: int = 0
    num_acknowledged_subtasks: int = 0
    external_path: str | None = None
    failure_message: str | None = None
    tasks: dict[str, dict[str, int]] = field(default_factory=dict)  # task id -> timings
    sync: bool = False  # the synchronous savepoint of a stop-with-savepoint

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["id"] = d.pop("checkpoint_id")
        # Flink's RestAPICheckpointType: a stop-with-savepoint's savepoint is SYNC_SAVEPOINT
        kind = "SAVEPOINT" if self.is_savepoint else "CHECKPOINT"
        d["checkpoint_type"] = f"SYNC_{kind}" if d.pop("sync") else kind
        return d


class CheckpointStatsTracker:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._history: OrderedDict[int, CheckpointRecord] = OrderedDict()
        self._start_mono: dict[int, float] = {}
        self.num_completed = 0
        self.num_failed = 0
        self.latest_completed: CheckpointRecord | None = None
        self.latest_savepoint: CheckpointRecord | None = None
        self.latest_failed: CheckpointRecord | None = None
        self.restored_checkpoint_id: int | None = None

    # -- reports from the driver -------------------------------------------
    def triggered(
        self, checkpoint_id: int, is_savepoint: bool, num_subtasks: int, sync: bool = False
    ) -> None:
        record = CheckpointRecord(
            checkpoint_id, is_savepoint, self._clock.now_ms(), num_subtasks=num_subtasks, sync=sync
        )
        self._history[checkpoint_id] = record
        self._start_mono[checkpoint_id] = self._clock.monotonic()
        self._trim()
        _log.debug(
            "checkpoint %d triggered (%s)", checkpoint_id, "savepoint" if is_savepoint else "checkpoint"
        )

    def completed(
        self,
        checkpoint_id: int,
        *,
        path: str,
        state_size: int,
        async_ms: int,
        tasks: dict[str, dict[str, int]],
        is_savepoint: bool = False,
    ) -> CheckpointRecord:
        record = self._history.get(checkpoint_id)
        if record is None:  # the final checkpoint of a bounded job is not triggered through barriers
            record = CheckpointRecord(checkpoint_id, is_savepoint, self._clock.now_ms())
            self._history[checkpoint_id] = record
            self._start_mono[checkpoint_id] = self._clock.monotonic()
            self._trim()
        record.status = "COMPLETED"
        record.latest_ack_timestamp = self._clock.now_ms()
        record.end_to_end_duration = round((self._clock.monotonic() - self._start_mono[checkpoint_id]) * 1000)
        record.state_size = state_size
        record.async_duration = async_ms
        record.tasks = tasks
        record.num_acknowledged_subtasks = len(tasks)
        record.num_subtasks = max(record.num_subtasks, len(tasks))
        record.alignment_duration = max((t.get("alignment_ms", 0) for t in tasks.values()), default=0)
        record.sync_duration = max((t.get("sync_ms", 0) for t in tasks.values()), default=0)
        record.external_path = path
        self.num_completed += 1
        if record.is_savepoint:
            self.latest_savepoint = record
        else:
            self.latest_completed = record
        _log.debug(
            "checkpoint %d complete: %d bytes in %d ms (alignment %d ms, sync %d ms, async %d ms) at %s",
            checkpoint_id, state_size, record.end_to_end_duration, record.alignment_duration,
            record.sync_duration, async_ms, path,
        )  # fmt: skip
        return record

    def failed(self, checkpoint_id: int, cause: str) -> None:
        record = self._history.get(checkpoint_id)
        if record is None:
            record = CheckpointRecord(checkpoint_id, False, self._clock.now_ms())
            self._history[checkpoint_id] = record
        if record.status == "FAILED":
            return
        record.status = "FAILED"
        record.failure_message = cause
        start = self._start_mono.get(checkpoint_id)
        if start is not None:
            record.end_to_end_duration = round((self._clock.monotonic() - start) * 1000)
        self.num_failed += 1
        self.latest_failed = record
        _log.warning("checkpoint %d failed: %s", checkpoint_id, cause)

    def _trim(self) -> None:
        while len(self._history) > HISTORY_SIZE:
            old, _ = self._history.popitem(last=False)
            self._start_mono.pop(old, None)

    def elapsed_ms(self, checkpoint_id: int) -> int | None:
        start = self._start_mono.get(checkpoint_id)
        return None if start is None else round((self._clock.monotonic() - start) * 1000)

    # -- reading -----------------------------------------------------------
    @property
    def history(self) -> list[CheckpointRecord]:
        """Newest first."""
        return list(reversed(self._history.values()))

    @property
    def num_in_progress(self) -> int:
        return sum(1 for r in self._history.values() if r.status == "IN_PROGRESS")

    def to_json(self) -> dict[str, Any]:
        """Flink's ``/jobs/<id>/checkpoints`` shape."""
        done = [r for r in self._history.values() if r.status == "COMPLETED"]

        def summary(values: list[int]) -> dict[str, float]:
            if not values:
                return {"min": 0, "max": 0, "avg": 0}
            return {"min": min(values), "max": max(values), "avg": sum(values) / len(values)}

        return {
            "counts": {
                "restored": 0 if self.restored_checkpoint_id is None else 1,
                "total": self.num_completed + self.num_failed + self.num_in_progress,
                "in_progress": self.num_in_progress,
                "completed": self.num_completed,
                "failed": self.num_failed,
            },
            "summary": {
                "state_size": summary([r.state_size for r in done]),
                "end_to_end_duration": summary([r.end_to_end_duration or 0 for r in done]),
                "alignment_duration": summary([r.alignment_duration for r in done]),
            },
            "latest": {
                "completed": self.latest_completed and self.latest_completed.to_json(),
                "savepoint": self.latest_savepoint and self.latest_savepoint.to_json(),
                "failed": self.latest_failed and self.latest_failed.to_json(),
                "restored": None
                if self.restored_checkpoint_id is None
                else {"id": self.restored_checkpoint_id},
            },
            "history": [r.to_json() for r in self.history],
        }
