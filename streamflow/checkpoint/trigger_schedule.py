"""When the checkpoint coordinator starts a checkpoint: the periodic timing and the queue
of manual requests (pure, synchronous; Flink's ``CheckpointRequestDecider``).

Theory of operation
-------------------
The :class:`~streamflow.checkpoint.coordinator.CheckpointCoordinator` owns the checkpoints
in flight and whether triggering is blocked (a failed task, all tasks finished, the job
ending); this schedule holds what decides *when* the next one starts:

* Periodic trigger, from the coordinator's ``poll()`` only: ``interval_ms`` elapsed since
  the last trigger of any kind (since construction before the first), ``min_pause_ms``
  since the last *completed* checkpoint (Flink: an abort does not delay the next one),
  a free slot, a running task, no failed one (:meth:`TriggerSchedule.periodic_due_ms`
  is the first of these; the coordinator checks the others); none while a
  stop-with-savepoint is requested (``stopping``: Flink stops its checkpoint scheduler).
* Manual ``trigger()`` ignores the interval and min pause (Flink: only periodic requests
  honour them). **Decision:** where Flink forces a savepoint past ``max_concurrent``, here
  a manual request waits for a free slot: it starts at once if one is free, else it is
  queued (``TriggerQueued``) and started by the call that frees a slot, savepoints ahead
  of checkpoints, FIFO within a kind (Flink's request comparator,
  :meth:`TriggerSchedule.next_request`). Its ``request_id`` is carried by its
  ``TriggerCheckpoint`` so the driver can resolve the caller's future; a queued request
  that can no longer start yields ``TriggerRequestFailed`` (:meth:`TriggerSchedule.fail_queued`).
  ``trigger()`` raises ``CheckpointTriggerError`` (nothing changes) when a task has
  failed, all tasks have finished, the job is ending or ``MAX_QUEUED_REQUESTS`` are queued.

Times are the coordinator's monotonic milliseconds; nothing here reads a clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .actions import Action, CheckpointTriggerError, TriggerQueued, TriggerRequestFailed
from .events import CheckpointType

__all__ = ["TriggerSchedule"]


@dataclass
class TriggerSchedule:
    """The periodic trigger's timing and the manual requests waiting for a free slot."""

    interval_ms: int | None
    min_pause_ms: int
    last_trigger_ms: int  # monotonic ms of the last trigger (of construction before the first)
    last_completed_ms: int | None = None
    stopping: bool = False  # a stop-with-savepoint was requested: no periodic trigger (Flink)
    _next_request_id: int = 1
    _queued_savepoints: deque[TriggerQueued] = field(default_factory=deque)
    _queued_checkpoints: deque[TriggerQueued] = field(default_factory=deque)

    def periodic_due_ms(self) -> int | None:
        """When the next periodic checkpoint is due (interval and min pause), None if none is."""
        if self.interval_ms is None or self.stopping:  # (no periodic one while the job stops)
            return None
        due = self.last_trigger_ms + self.interval_ms
        if self.last_completed_ms is not None:
            due = max(due, self.last_completed_ms + self.min_pause_ms)
        return due

    @property
    def queued(self) -> int:
        """How many manual requests wait for a free slot."""
        return len(self._queued_savepoints) + len(self._queued_checkpoints)

    def new_request_id(self) -> int:
        request_id = self._next_request_id
        self._next_request_id += 1
        return request_id

    def enqueue(self, request: TriggerQueued) -> None:
        if request.kind is CheckpointType.SAVEPOINT:
            self._queued_savepoints.append(request)
        else:
            self._queued_checkpoints.append(request)

    def next_request(self) -> TriggerQueued | None:
        """The queued request to start next (savepoints first, FIFO within a kind), removed."""
        queue = self._queued_savepoints or self._queued_checkpoints
        return queue.popleft() if queue else None

    def fail_queued(self, blocker: CheckpointTriggerError, actions: list[Action]) -> None:
        """Every queued request can no longer start: a ``TriggerRequestFailed`` for each."""
        for queue in (self._queued_savepoints, self._queued_checkpoints):
            while queue:
                rid = queue.popleft().request_id
                actions.append(TriggerRequestFailed(rid, blocker.reason, str(blocker)))
