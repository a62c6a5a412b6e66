"""Counting checkpoint failures against the tolerable number (pure, synchronous).

Ported from Flink's ``CheckpointFailureManager`` (flink-runtime
``org/apache/flink/runtime/checkpoint/CheckpointFailureManager.java``):

* only some reasons count (``actions.COUNTED_REASONS``: expired, declined, the
  checkpoint could not be written); subsumed, task failure or closing and the
  job's end never do;
* a checkpoint counts once, and only if its id is newer than the last
  completed checkpoint (a late failure of an old one is ignored);
* a completed checkpoint newer than the last one resets the count;
* savepoints never count: their failure fails the request instead;
* the job fails when the count exceeds ``tolerable`` (default 0: the first
  counted failure fails the job over).

**Decision:** Flink ignores ``FINALIZE_CHECKPOINT_FAILURE``; here a failed write
(a full disk, a record the codec cannot encode) counts like Flink's
``IO_EXCEPTION``, so a job whose checkpoints cannot be stored fails fast instead
of running on without any.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .actions import COUNTED_REASONS, AbortReason


@dataclass
class CheckpointFailureManager:
    tolerable: int
    consecutive: int = 0
    _counted: set[int] = field(default_factory=set)
    _last_succeeded: int = -1

    def __post_init__(self) -> None:
        t = self.tolerable
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise ValueError(f"tolerable checkpoint failure number must be an int >= 0, got {t!r}")

    def failed(self, checkpoint_id: int, reason: AbortReason, is_savepoint: bool) -> bool:
        """Record a failure; True when the job must fail (the count exceeded ``tolerable``)."""
        if is_savepoint or reason not in COUNTED_REASONS or checkpoint_id <= self._last_succeeded:
            return False
        if checkpoint_id not in self._counted:
            self._counted.add(checkpoint_id)
            self.consecutive += 1
        return self.consecutive > self.tolerable

    def succeeded(self, checkpoint_id: int) -> None:
        if checkpoint_id > self._last_succeeded:
            self._last_succeeded = checkpoint_id
            self.consecutive = 0
            self._counted.clear()
