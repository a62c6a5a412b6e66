"""Checkpoint control events: barriers, cancel markers and their kinds.

They live in ``checkpoint/`` so the checkpoint package never imports the
runtime; ``runtime/events.py`` re-exports them beside the other control events.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class CheckpointType(enum.Enum):
    CHECKPOINT = "checkpoint"
    SAVEPOINT = "savepoint"


class StopMode(enum.Enum):
    """The synchronous savepoint of a stop-with-savepoint (Flink's ``SavepointType.suspend`` and
    ``.terminate``, FLIP-34): the sources emit nothing after its barrier. ``TERMINATE``
    (``advance_to_end_of_event_time``, ``--drain``): the sources first emit the maximum
    watermark, so every event-time timer and window fires before the barrier."""

    SUSPEND = "suspend"
    TERMINATE = "terminate"


class AlignmentType(enum.Enum):
    ALIGNED = "aligned"
    UNALIGNED = "unaligned"
    # aligned, but may switch to unaligned after the alignment timeout
    ALTERNATING = "alternating"


@dataclass(frozen=True, slots=True)
class CheckpointBarrier:
    checkpoint_id: int
    timestamp: int
    checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT
    alignment: AlignmentType = AlignmentType.ALIGNED
    stop: StopMode | None = None  # the savepoint of a stop-with-savepoint (synchronous)

    @property
    def is_savepoint(self) -> bool:
        return self.checkpoint_type is CheckpointType.SAVEPOINT

    def as_unaligned(self) -> CheckpointBarrier:
        return CheckpointBarrier(
            self.checkpoint_id, self.timestamp, self.checkpoint_type, AlignmentType.UNALIGNED, self.stop
        )


@dataclass(frozen=True, slots=True)
class CancelCheckpointMarker:
    """Checkpoint ``checkpoint_id`` was declined upstream: abort it."""

    checkpoint_id: int
