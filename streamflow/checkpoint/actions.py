"""What the :class:`CheckpointCoordinator` tells its driver to do, and why checkpoints fail.

Every action is a frozen dataclass; the driver carries them out in order and
decides nothing itself (see ``coordinator.py`` for the rules that produce them).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..errors import StreamflowError
from .events import CheckpointType, StopMode


class AbortReason(enum.Enum):
    """Why a checkpoint was aborted (or a trigger refused); Flink's names in comments."""

    TIMEOUT = "timeout"  # CHECKPOINT_EXPIRED
    DECLINED = "declined"  # CHECKPOINT_DECLINED
    TASK_FAILED = "task_failed"  # TASK_FAILURE
    TASK_FINISHED = "task_finished"  # CHECKPOINT_DECLINED_TASK_CLOSING
    SUBSUMED = "subsumed"  # CHECKPOINT_SUBSUMED
    PERSIST_FAILED = "persist_failed"  # IO_EXCEPTION (writing the checkpoint failed)
    TOO_MANY_REQUESTS = "too_many_requests"  # TOO_MANY_CHECKPOINT_REQUESTS
    JOB_ENDED = "job_ended"  # CHECKPOINT_COORDINATOR_SHUTDOWN (cancel, failover, failure)


# Flink's CheckpointFailureManager.checkFailureCounter: only these count against the
# tolerable failure number; subsumed, task failure/closing and shutdown do not.
COUNTED_REASONS = frozenset({AbortReason.TIMEOUT, AbortReason.DECLINED, AbortReason.PERSIST_FAILED})


@dataclass(frozen=True, slots=True)
class TriggerCheckpoint:
    """Start checkpoint ``checkpoint_id``: tell ``tasks`` to snapshot and emit the barrier.

    ``tasks`` is the trigger plan (Flink's ``DefaultCheckpointPlanCalculator``): the running
    tasks none of whose upstream tasks is still running, i.e. the sources and the tasks whose
    inputs all finished (these get the barrier before each channel's end of input).
    """

    checkpoint_id: int
    timestamp_ms: int
    kind: CheckpointType = CheckpointType.CHECKPOINT
    target: str | None = None
    request_id: int | None = None  # set for manual triggers, None for periodic ones
    tasks: frozenset[str] = field(default=frozenset(), compare=False)
    stop: StopMode | None = None  # a stop-with-savepoint's synchronous savepoint


@dataclass(frozen=True, slots=True)
class CompleteCheckpoint:
    """Every task acknowledged: persist ``states`` then call ``confirm_completed``.

    ``states`` holds every task's state; for the tasks in ``finished_tasks`` it is the
    final state they handed over when they finished (FLIP-147).
    """

    checkpoint_id: int
    kind: CheckpointType
    target: str | None
    states: dict[str, object]
    finished_tasks: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class NotifyComplete:
    """Checkpoint is durable: call ``notify_checkpoint_complete`` on every operator."""

    checkpoint_id: int


@dataclass(frozen=True, slots=True)
class AbortCheckpoint:
    """Checkpoint will never complete: log it, call ``notify_checkpoint_aborted`` downstream."""

    checkpoint_id: int
    reason: AbortReason
    detail: str = field(default="", compare=False)
    failures: int = field(default=0, compare=False)  # consecutive counted failures, this one included


@dataclass(frozen=True, slots=True)
class TriggerQueued:
    """A manual request waits for a free slot; a ``TriggerCheckpoint`` with its id follows."""

    request_id: int
    kind: CheckpointType
    target: str | None
    stop: StopMode | None = None


@dataclass(frozen=True, slots=True)
class TriggerRequestFailed:
    """A queued manual request can no longer start."""

    request_id: int
    reason: AbortReason
    detail: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class ReleaseTask:
    """A finished task's final state is in a completed checkpoint: it may end now."""

    task_id: str


@dataclass(frozen=True, slots=True)
class FailJob:
    """More consecutive checkpoint failures than tolerated: fail the job (it may fail over)."""

    detail: str = field(compare=False)


Action = (
    TriggerCheckpoint
    | CompleteCheckpoint
    | NotifyComplete
    | AbortCheckpoint
    | TriggerQueued
    | TriggerRequestFailed
    | ReleaseTask
    | FailJob
)


@dataclass(frozen=True, slots=True)
class CoordinatorStats:
    last_completed_id: int | None
    num_completed: int
    num_aborted: int
    last_duration_ms: int | None  # trigger to confirm_completed, monotonic ms
    in_flight: tuple[int, ...]  # ids triggered, not yet completed or aborted
    num_queued: int  # manual requests waiting for a slot
    consecutive_failures: int = 0  # counted failures since the last completed checkpoint


class CheckpointTriggerError(StreamflowError, RuntimeError):
    """A checkpoint or savepoint cannot be triggered now; ``reason`` says why."""

    def __init__(self, reason: AbortReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
