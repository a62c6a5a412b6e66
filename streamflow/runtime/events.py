"""Control events that travel through channels between records.

Records travel in batches (plain ``list`` objects); everything else that flows
through a channel is one of the frozen dataclasses below. A control event cuts
a batch: a channel never reorders a control event relative to the records
around it. Watermarks and timestamps are epoch milliseconds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..checkpoint.events import AlignmentType as AlignmentType
from ..checkpoint.events import CancelCheckpointMarker as CancelCheckpointMarker
from ..checkpoint.events import CheckpointBarrier as CheckpointBarrier
from ..checkpoint.events import CheckpointType as CheckpointType
from ..checkpoint.events import StopMode as StopMode

MIN_WATERMARK = -(2**63)
MAX_WATERMARK = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Watermark:
    """Event time has reached ``timestamp``: no record with a timestamp <= it should follow."""

    timestamp: int


class WatermarkStatus(enum.Enum):
    ACTIVE = "active"
    IDLE = "idle"


@dataclass(frozen=True, slots=True)
class EndOfInput:
    """The upstream subtask has finished; nothing follows on this channel."""


END_OF_INPUT = EndOfInput()

ControlEvent = Watermark | WatermarkStatus | CheckpointBarrier | CancelCheckpointMarker | EndOfInput
