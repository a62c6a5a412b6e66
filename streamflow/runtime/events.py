"""Control events that travel through channels between records.

Records travel in batches (plain ``list`` objects); everything else that flows
through a channel is one of the frozen dataclasses below. A control event cuts
a batch: a channel never reorders a control event relative to the records
around it. Watermarks and timestamps are epoch milliseconds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

MIN_WATERMARK = -(2**63)
MAX_WATERMARK = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Watermark:
    """Event time has reached ``timestamp``: no record with a timestamp <= it should follow."""

    timestamp: int


class WatermarkStatus(enum.Enum):
    ACTIVE = "active"
    IDLE = "idle"


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


@dataclass(frozen=True, slots=True)
class EndOfInput:
    """The upstream subtask has finished; nothing follows on this channel."""


END_OF_INPUT = EndOfInput()

ControlEvent = Watermark | WatermarkStatus | CheckpointBarrier | CancelCheckpointMarker | EndOfInput
