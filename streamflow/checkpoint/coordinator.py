"""The checkpoint coordinator: a synchronous, I/O-free state machine.

Theory of operation
-------------------
The coordinator decides when checkpoint ``n`` starts and whether it completes.
It never sleeps, sends or writes: the async driver feeds it events and carries
out, in order, the actions each call returns; after every call it sleeps until
``next_poll_deadline()`` (or the next event) and then calls ``poll()``. Time
comes only from the ``Clock`` passed in: ``monotonic()`` for intervals and
timeouts, ``now_ms()`` for the barrier timestamp.

A checkpoint is PENDING from ``TriggerCheckpoint`` until every task it waits for
acknowledged (then ``CompleteCheckpoint``: the driver persists it), then
PERSISTING until ``confirm_completed`` (``NotifyComplete``) or ``persist_failed``
(``AbortCheckpoint``); timeouts, declines and task failures leave a PERSISTING
checkpoint alone, only a newer completed checkpoint subsumes it. Rules,
ported from Flink's ``CheckpointCoordinator``, ``PendingCheckpoint`` and
``CheckpointRequestDecider``:

* Ids increase by one per trigger from ``restored_checkpoint_id + 1`` (1 on a
  fresh start); an aborted id is never reused. PENDING and PERSISTING
  checkpoints both count toward ``max_concurrent``.
* Periodic trigger, from ``poll()`` only: ``interval_ms`` elapsed since the last
  trigger of any kind (since construction before the first), ``min_pause_ms``
  since the last completion or abort, a free slot, a running task, no failed one.
* Manual ``trigger()`` ignores the interval and min pause (Flink: only periodic
  requests honour them). **Decision:** where Flink forces a savepoint past
  ``max_concurrent``, here a manual request waits for a free slot: it starts at
  once if one is free, else it is queued (``TriggerQueued``) and started by the
  call that frees a slot, savepoints ahead of checkpoints, FIFO within a kind
  (Flink's request comparator). Its ``request_id`` is carried by its
  ``TriggerCheckpoint`` so the driver can resolve the caller's future; a queued
  request that can no longer start yields ``TriggerRequestFailed``.
  ``trigger()`` raises ``CheckpointTriggerError`` (nothing changes) when a task
  has failed, all tasks have finished or ``MAX_QUEUED_REQUESTS`` are queued.
* Timeouts are checked in ``poll()``: a checkpoint still missing acks
  ``timeout_ms`` after its trigger is aborted with ``TIMEOUT``.
* Duplicate acks, acks from a task the checkpoint does not wait for and acks for
  an unknown, aborted or completed checkpoint are ignored and return ``[]``
  (Flink's ``TaskAcknowledgeResult.DUPLICATE/UNKNOWN/DISCARDED``). A decline from
  one of the checkpoint's tasks aborts a PENDING checkpoint; others are ignored.
* ``task_failed(t)`` aborts the PENDING checkpoints ``t`` has not acknowledged
  (Flink's ``failUnacknowledgedPendingCheckpointsFor``); those it acked may still
  complete. Nothing new is triggered afterwards (the job fails over and restores
  with a fresh coordinator); queued requests fail.
* ``task_finished(t)``: ``t`` acknowledges no later checkpoint; PENDING ones it
  has not acknowledged abort with ``TASK_FINISHED`` (Flink's
  ``CHECKPOINT_DECLINED_TASK_CLOSING``). ``CompleteCheckpoint.finished_tasks``
  names the tasks finished before the trigger. Once all tasks finished nothing
  is triggered and queued requests fail.
* ``confirm_completed`` of *checkpoint* ``n`` subsumes every older in-flight
  checkpoint (never a savepoint: Flink's ``canBeSubsumed``), then yields
  ``NotifyComplete(n)``. A completed savepoint neither subsumes nor notifies
  (Flink's ``cleanupAfterCompletedCheckpoint``): a failover restores the last
  checkpoint, so a commit at a savepoint would publish output twice.
  ``confirm_completed``/``persist_failed`` for a checkpoint subsumed while
  PERSISTING are ignored.
* Illegal calls raise and change nothing: ``task_failed``/``task_finished`` for
  an unknown or no longer running task, ``confirm_completed``/``persist_failed``
  for a checkpoint that is not PERSISTING, a savepoint without target.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from streamflow.clock import Clock
from streamflow.errors import StreamflowError
from streamflow.runtime.events import CheckpointType

MAX_QUEUED_REQUESTS = 1000


class AbortReason(enum.Enum):
    """Why a checkpoint was aborted (or a trigger refused); Flink's names in comments."""

    TIMEOUT = "timeout"  # CHECKPOINT_EXPIRED
    DECLINED = "declined"  # CHECKPOINT_DECLINED
    TASK_FAILED = "task_failed"  # TASK_FAILURE
    TASK_FINISHED = "task_finished"  # CHECKPOINT_DECLINED_TASK_CLOSING
    SUBSUMED = "subsumed"  # CHECKPOINT_SUBSUMED
    PERSIST_FAILED = "persist_failed"  # FINALIZE_CHECKPOINT_FAILURE
    TOO_MANY_REQUESTS = "too_many_requests"  # TOO_MANY_CHECKPOINT_REQUESTS


@dataclass(frozen=True, slots=True)
class TriggerCheckpoint:
    """Start checkpoint ``checkpoint_id``: tell the sources to snapshot and emit the barrier."""

    checkpoint_id: int
    timestamp_ms: int
    kind: CheckpointType = CheckpointType.CHECKPOINT
    target: str | None = None
    request_id: int | None = None  # set for manual triggers, None for periodic ones


@dataclass(frozen=True, slots=True)
class CompleteCheckpoint:
    """Every task acknowledged: persist ``states`` then call ``confirm_completed``."""

    checkpoint_id: int
    kind: CheckpointType
    target: str | None
    states: dict[str, object]
    finished_tasks: frozenset[str] = frozenset()  # finished before the trigger: no state


@dataclass(frozen=True, slots=True)
class NotifyComplete:
    """Checkpoint is durable: call ``notify_checkpoint_complete`` on every operator."""

    checkpoint_id: int


@dataclass(frozen=True, slots=True)
class AbortCheckpoint:
    """Checkpoint will never complete: call ``notify_checkpoint_aborted`` downstream."""

    checkpoint_id: int
    reason: AbortReason
    detail: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class TriggerQueued:
    """A manual request waits for a free slot; a ``TriggerCheckpoint`` with its id follows."""

    request_id: int
    kind: CheckpointType
    target: str | None


@dataclass(frozen=True, slots=True)
class TriggerRequestFailed:
    """A queued manual request can no longer start."""

    request_id: int
    reason: AbortReason
    detail: str = field(default="", compare=False)


_Lifecycle = TriggerCheckpoint | CompleteCheckpoint | NotifyComplete | AbortCheckpoint
Action = _Lifecycle | TriggerQueued | TriggerRequestFailed


@dataclass(frozen=True, slots=True)
class CoordinatorStats:
    last_completed_id: int | None
    num_completed: int
    num_aborted: int
    last_duration_ms: int | None  # trigger to confirm_completed, monotonic ms
    in_flight: tuple[int, ...]  # ids triggered, not yet completed or aborted
    num_queued: int  # manual requests waiting for a slot


class CheckpointTriggerError(StreamflowError, RuntimeError):
    """A checkpoint or savepoint cannot be triggered now; ``reason`` says why."""

    def __init__(self, reason: AbortReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _TaskState(enum.Enum):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"


@dataclass(slots=True)
class _Checkpoint:
    checkpoint_id: int
    kind: CheckpointType
    target: str | None
    started_ms: int  # monotonic
    tasks: frozenset[str]  # tasks asked to acknowledge
    finished: frozenset[str]  # tasks finished before the trigger
    awaiting: set[str]
    states: dict[str, object] = field(default_factory=dict)
    persisting: bool = False


class CheckpointCoordinator:
    """Triggers checkpoints and collects acknowledgements; see the module docstring."""

    def __init__(
        self,
        tasks: Iterable[str],
        clock: Clock,
        *,
        interval_ms: int | None,
        min_pause_ms: int = 0,
        timeout_ms: int = 600_000,
        max_concurrent: int = 1,
        restored_checkpoint_id: int | None = None,
    ) -> None:
        task_list = list(tasks)
        if not task_list or not all(isinstance(t, str) for t in task_list):
            raise ValueError(f"tasks must be a non-empty collection of str ids, got {task_list!r}")
        if len(set(task_list)) != len(task_list):
            raise ValueError(f"duplicate task ids in {task_list!r}")
        for name, value, ok in (
            ("interval_ms", interval_ms, interval_ms is None or interval_ms > 0),
            ("min_pause_ms", min_pause_ms, min_pause_ms >= 0),
            ("timeout_ms", timeout_ms, timeout_ms > 0),
            ("max_concurrent", max_concurrent, max_concurrent >= 1),
            ("restored_checkpoint_id", restored_checkpoint_id, (restored_checkpoint_id or 0) >= 0),
        ):
            if not ok:
                raise ValueError(f"invalid {name}: {value!r}")
        self._clock = clock
        self._interval_ms = interval_ms
        self._min_pause_ms = min_pause_ms
        self._timeout_ms = timeout_ms
        self._max_concurrent = max_concurrent
        self._tasks = dict.fromkeys(task_list, _TaskState.RUNNING)
        self._next_id = (restored_checkpoint_id or 0) + 1
        self._next_request_id = 1
        self._in_flight: dict[int, _Checkpoint] = {}  # id order == insertion order
        self._subsumed_while_persisting: set[int] = set()
        self._queued_savepoints: deque[TriggerQueued] = deque()
        self._queued_checkpoints: deque[TriggerQueued] = deque()
        self._last_trigger_ms = self._now()
        self._last_end_ms: int | None = None
        self._last_completed_id = restored_checkpoint_id
        self._num_completed = 0
        self._num_aborted = 0
        self._last_duration_ms: int | None = None

    @property
    def stats(self) -> CoordinatorStats:
        queued = len(self._queued_savepoints) + len(self._queued_checkpoints)
        return CoordinatorStats(
            self._last_completed_id, self._num_completed, self._num_aborted,
            self._last_duration_ms, tuple(self._in_flight), queued,
        )  # fmt: skip

    def next_poll_deadline(self) -> int | None:
        """Monotonic ms (``round(clock.monotonic() * 1000)``) at which ``poll()`` has work.

        ``None``: nothing time-driven can happen until another event arrives.
        A deadline in the past means "poll now".
        """
        deadlines = [c.started_ms + self._timeout_ms for c in self._in_flight.values() if not c.persisting]
        if self._interval_ms is not None and self._has_free_slot() and not self._trigger_blocker():
            deadlines.append(self._periodic_due_ms())
        return min(deadlines, default=None)

    def poll(self) -> list[Action]:
        """Time out expired checkpoints, then trigger a periodic checkpoint if one is due."""
        now = self._now()
        actions: list[Action] = []
        for c in list(self._in_flight.values()):
            if not c.persisting and now >= c.started_ms + self._timeout_ms:
                detail = f"no ack within {self._timeout_ms} ms from {', '.join(sorted(c.awaiting))}"
                actions.append(self._abort(c, AbortReason.TIMEOUT, detail))
        self._drain_queue(actions)
        if (
            self._interval_ms is not None
            and self._has_free_slot()
            and not self._trigger_blocker()
            and now >= self._periodic_due_ms()
        ):
            actions.append(self._start(CheckpointType.CHECKPOINT, None, None))
        return actions

    def trigger(
        self, kind: CheckpointType = CheckpointType.CHECKPOINT, target: str | None = None
    ) -> list[Action]:
        """Manually request a checkpoint, or a savepoint to ``target``; see the module rules."""
        if not isinstance(kind, CheckpointType):
            raise TypeError(f"kind must be a CheckpointType, got {kind!r}")
        if kind is CheckpointType.SAVEPOINT and not target:
            raise ValueError("a savepoint needs a target path")
        if kind is CheckpointType.CHECKPOINT and target is not None:
            raise ValueError(f"only savepoints take a target path, got {target!r}")
        blocker = self._trigger_blocker()
        if blocker is not None:
            raise blocker
        queued = len(self._queued_savepoints) + len(self._queued_checkpoints)
        if not self._has_free_slot() and queued >= MAX_QUEUED_REQUESTS:
            raise CheckpointTriggerError(
                AbortReason.TOO_MANY_REQUESTS,
                f"{queued} checkpoint requests are already queued (max {MAX_QUEUED_REQUESTS})",
            )
        request_id = self._next_request_id
        self._next_request_id += 1
        if self._has_free_slot():
            return [self._start(kind, target, request_id)]
        queued_request = TriggerQueued(request_id, kind, target)
        if kind is CheckpointType.SAVEPOINT:
            self._queued_savepoints.append(queued_request)
        else:
            self._queued_checkpoints.append(queued_request)
        return [queued_request]

    def acknowledge(self, checkpoint_id: int, task_id: str, state: object) -> list[Action]:
        """Task ``task_id`` snapshotted ``state`` for the checkpoint; unknown/duplicate: ``[]``."""
        c = self._in_flight.get(checkpoint_id)
        if c is None or c.persisting or task_id not in c.awaiting:
            return []
        c.awaiting.discard(task_id)
        c.states[task_id] = state
        if c.awaiting:
            return []
        c.persisting = True
        return [CompleteCheckpoint(c.checkpoint_id, c.kind, c.target, dict(c.states), c.finished)]

    def decline(self, checkpoint_id: int, task_id: str, reason: str) -> list[Action]:
        """Task ``task_id`` cannot take the checkpoint: abort it (ignored if not pending)."""
        c = self._in_flight.get(checkpoint_id)
        if c is None or c.persisting or task_id not in c.tasks:
            return []
        actions: list[Action] = [self._abort(c, AbortReason.DECLINED, f"declined by {task_id}: {reason}")]
        self._drain_queue(actions)
        return actions

    def task_failed(self, task_id: str) -> list[Action]:
        """Abort what ``task_id`` has not acknowledged; stop triggering; fail queued requests."""
        return self._task_ended(task_id, _TaskState.FAILED, AbortReason.TASK_FAILED, "failed")

    def task_finished(self, task_id: str) -> list[Action]:
        """``task_id`` ended: it acknowledges no later checkpoint; see the module rules."""
        return self._task_ended(
            task_id, _TaskState.FINISHED, AbortReason.TASK_FINISHED, "finished before acking"
        )

    def confirm_completed(self, checkpoint_id: int) -> list[Action]:
        """The driver persisted ``CompleteCheckpoint(checkpoint_id)``: it is complete."""
        if self._ignore_persist_result(checkpoint_id):
            return []
        c = self._in_flight.pop(checkpoint_id)
        now = self._now()
        self._num_completed += 1
        self._last_completed_id = checkpoint_id
        self._last_duration_ms = now - c.started_ms
        self._last_end_ms = now
        actions: list[Action] = []
        if c.kind is CheckpointType.CHECKPOINT:
            for old in list(self._in_flight.values()):
                if old.checkpoint_id < checkpoint_id and old.kind is CheckpointType.CHECKPOINT:
                    if old.persisting:
                        self._subsumed_while_persisting.add(old.checkpoint_id)
                    actions.append(self._abort(old, AbortReason.SUBSUMED, f"subsumed by {checkpoint_id}"))
            actions.append(NotifyComplete(checkpoint_id))
        self._drain_queue(actions)
        return actions

    def persist_failed(self, checkpoint_id: int, reason: str) -> list[Action]:
        """The driver could not persist ``CompleteCheckpoint(checkpoint_id)``: abort it."""
        if self._ignore_persist_result(checkpoint_id):
            return []
        c = self._in_flight[checkpoint_id]
        actions: list[Action] = [self._abort(c, AbortReason.PERSIST_FAILED, reason)]
        self._drain_queue(actions)
        return actions

    def _now(self) -> int:
        return round(self._clock.monotonic() * 1000)

    def _running_tasks(self) -> list[str]:
        return [t for t, s in self._tasks.items() if s is _TaskState.RUNNING]

    def _trigger_blocker(self) -> CheckpointTriggerError | None:
        failed = [t for t, s in self._tasks.items() if s is _TaskState.FAILED]
        if failed:
            msg = f"cannot trigger: task(s) {', '.join(failed)} failed"
            return CheckpointTriggerError(AbortReason.TASK_FAILED, msg)
        if not self._running_tasks():
            msg = "cannot trigger: all tasks have finished"
            return CheckpointTriggerError(AbortReason.TASK_FINISHED, msg)
        return None

    def _has_free_slot(self) -> bool:
        return len(self._in_flight) < self._max_concurrent

    def _periodic_due_ms(self) -> int:
        assert self._interval_ms is not None
        due = self._last_trigger_ms + self._interval_ms
        if self._last_end_ms is not None:
            due = max(due, self._last_end_ms + self._min_pause_ms)
        return due

    def _require_running(self, task_id: str) -> None:
        state = self._tasks.get(task_id)
        if state is None:
            raise ValueError(f"unknown task {task_id!r} (known: {', '.join(self._tasks)})")
        if state is not _TaskState.RUNNING:
            raise ValueError(f"task {task_id!r} is already {state.value}")

    def _task_ended(self, task_id: str, state: _TaskState, reason: AbortReason, what: str) -> list[Action]:
        self._require_running(task_id)
        self._tasks[task_id] = state
        actions: list[Action] = [
            self._abort(c, reason, f"task {task_id} {what}")
            for c in list(self._in_flight.values())
            if not c.persisting and task_id in c.awaiting
        ]
        blocker = self._trigger_blocker()
        if blocker is None:
            self._drain_queue(actions)
        else:
            for queue in (self._queued_savepoints, self._queued_checkpoints):
                while queue:
                    rid = queue.popleft().request_id
                    actions.append(TriggerRequestFailed(rid, blocker.reason, str(blocker)))
        return actions

    def _ignore_persist_result(self, checkpoint_id: int) -> bool:
        if checkpoint_id in self._subsumed_while_persisting:
            self._subsumed_while_persisting.discard(checkpoint_id)
            return True
        c = self._in_flight.get(checkpoint_id)
        if c is None or not c.persisting:
            state = "still awaiting acknowledgements" if c else "not in flight"
            raise ValueError(f"checkpoint {checkpoint_id} is not being persisted ({state})")
        return False

    def _start(self, kind: CheckpointType, target: str | None, request_id: int | None) -> Action:
        now = self._now()
        running = frozenset(self._running_tasks())
        finished = frozenset(t for t, s in self._tasks.items() if s is _TaskState.FINISHED)
        cid = self._next_id
        self._next_id += 1
        self._last_trigger_ms = now
        self._in_flight[cid] = _Checkpoint(cid, kind, target, now, running, finished, set(running))
        return TriggerCheckpoint(cid, self._clock.now_ms(), kind, target, request_id)

    def _abort(self, c: _Checkpoint, reason: AbortReason, detail: str) -> AbortCheckpoint:
        del self._in_flight[c.checkpoint_id]
        self._num_aborted += 1
        self._last_end_ms = self._now()
        return AbortCheckpoint(c.checkpoint_id, reason, detail)

    def _drain_queue(self, actions: list[Action]) -> None:
        while self._has_free_slot() and (self._queued_savepoints or self._queued_checkpoints):
            queue = self._queued_savepoints or self._queued_checkpoints
            r = queue.popleft()
            actions.append(self._start(r.kind, r.target, r.request_id))
