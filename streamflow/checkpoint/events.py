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

    @property
    def is_savepoint(self) -> bool:
        return self.checkpoint_type is CheckpointType.SAVEPOINT

    def as_unaligned(self) -> CheckpointBarrier:
        return CheckpointBarrier(
            self.checkpoint_id, self.timestamp, self.checkpoint_type, AlignmentType.UNALIGNED
        )


@dataclass(frozen=True, slots=True)
class CancelCheckpointMarker:
    """Checkpoint ``checkpoint_id`` was declined upstream: abort it."""

    checkpoint_id: int
