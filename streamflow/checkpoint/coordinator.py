"""The checkpoint coordinator: a synchronous, I/O-free state machine.

Theory of operation
-------------------
The coordinator decides everything about a checkpoint's life: when ``n``
starts and at which tasks, whether it completes, when it fails and whether the
job must fail with it, what a finished task contributes, and how the job's end
settles what is in flight. It never sleeps, sends or writes: the async driver
feeds it events and carries out, in order, the actions each call returns (see
``actions.py``); after every call it sleeps until ``next_poll_deadline()`` (or
the next event) and then calls ``poll()``. Time comes only from the ``Clock``
passed in: ``monotonic()`` for intervals and timeouts, ``now_ms()`` for the
barrier timestamp.

A checkpoint is PENDING from ``TriggerCheckpoint`` until every task it waits for
acknowledged (then ``CompleteCheckpoint``: the driver persists it), then
PERSISTING until ``confirm_completed`` (``NotifyComplete``) or ``persist_failed``
(``AbortCheckpoint``); timeouts, declines and task failures leave a PERSISTING
checkpoint alone, only a newer completed checkpoint subsumes it. Rules,
ported from Flink's ``CheckpointCoordinator``, ``PendingCheckpoint``,
``CheckpointRequestDecider``, ``DefaultCheckpointPlanCalculator`` and
``CheckpointFailureManager``:

* Ids increase by one per trigger from ``max(restored_checkpoint_id + 1,
  first_checkpoint_id)`` (1 on a fresh start); an aborted id is never reused,
  and a new attempt of the job starts above every id the old one used
  (``next_checkpoint_id``). PENDING and PERSISTING checkpoints both count
  toward ``max_concurrent``.
* Trigger plan: ``TriggerCheckpoint.tasks`` names the running tasks none of
  whose upstream tasks (``upstream``) still runs: the sources, and tasks whose
  inputs all finished (they get the barrier behind their remaining input).
* When a checkpoint starts (periodic ones from ``poll()``, after the interval
  and min pause; manual ones from ``trigger()``, at once or queued until a slot
  is free) follows the rules of :class:`TriggerSchedule` (``trigger_schedule.py``).
* Timeouts are checked in ``poll()``: a checkpoint still missing acks
  ``timeout_ms`` after its trigger is aborted with ``TIMEOUT``.
* Duplicate acks, acks from a task the checkpoint does not wait for and acks for
  an unknown, aborted or completed checkpoint are ignored and return ``[]``
  (Flink's ``TaskAcknowledgeResult.DUPLICATE/UNKNOWN/DISCARDED``). A decline from
  one of the checkpoint's tasks aborts a PENDING checkpoint; others are ignored.
* Failures (``failure_manager.py``): every abort carries the count of
  consecutive counted failures; once it exceeds ``tolerable_failures``
  (default 0) a ``FailJob`` follows the abort and nothing is triggered any more.
* ``task_failed(t)`` aborts the PENDING checkpoints ``t`` has not acknowledged
  (Flink's ``failUnacknowledgedPendingCheckpointsFor``); those it acked may still
  complete. Nothing new is triggered afterwards (the job fails over and restores
  with a fresh coordinator); queued requests fail.
* ``task_finished(t, final_state)`` (FLIP-147): ``t`` acknowledges, with its
  final state, every PENDING checkpoint still waiting for it, and every later
  checkpoint holds that state too. Its operators snapshot that state under the
  id ``final_snapshot_id(t)``: the oldest checkpoint that can hold it. Once a
  checkpoint holding it completed, ``ReleaseTask(t)`` follows its
  ``NotifyComplete``: the task may end. When every task finished and nothing
  is in flight, the coordinator completes one last checkpoint itself
  (``CompleteCheckpoint`` without a trigger: nothing is in flight). With
  ``final_checkpoint=False`` (checkpointing disabled) a finishing task aborts
  what waits for it (``TASK_FINISHED``) and is released at once; a savepoint
  triggered later still holds its final state, marking it finished.
* ``confirm_completed`` of *checkpoint* ``n`` subsumes every older in-flight
  checkpoint (never a savepoint: Flink's ``canBeSubsumed``), then yields
  ``NotifyComplete(n)``. A completed savepoint neither subsumes nor notifies
  (Flink's ``cleanupAfterCompletedCheckpoint``): a failover restores the last
  checkpoint, so a commit at a savepoint would publish output twice.
  ``confirm_completed``/``persist_failed`` for a checkpoint subsumed while
  PERSISTING are ignored.
* A stop-with-savepoint's synchronous savepoint (``trigger(..., stop=...)``, FLIP-34) notifies
  (its sinks commit; no output follows its barrier). Its request stops periodic checkpoints, its
  abort restarts them (Flink's ``stopCheckpointScheduler``, ``StopWithSavepointTerminationHandlerImpl``).
* ``job_ending(detail)``: the job ends (cancel, failure, failover): PENDING
  checkpoints abort with ``JOB_ENDED`` (never counted), queued requests fail,
  nothing is triggered again; PERSISTING ones stay until the driver reports how
  their write ended (``confirm_completed`` or ``persist_failed``), so the job's
  end waits until ``stats.in_flight`` is empty.
* Illegal calls raise and change nothing: ``task_failed``/``task_finished`` for
  an unknown or no longer running task, ``confirm_completed``/``persist_failed``
  for a checkpoint that is not PERSISTING, a savepoint without target.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from streamflow.checkpoint.events import CheckpointType, StopMode
from streamflow.clock import Clock

from .actions import (
    AbortCheckpoint,
    AbortReason,
    Action,
    CheckpointTriggerError,
    CompleteCheckpoint,
    CoordinatorStats,
    FailJob,
    NotifyComplete,
    ReleaseTask,
    TriggerCheckpoint,
    TriggerQueued,
    TriggerRequestFailed,
)
from .failure_manager import CheckpointFailureManager
from .trigger_schedule import TriggerSchedule

__all__ = [
    "MAX_QUEUED_REQUESTS",
    "AbortCheckpoint",
    "AbortReason",
    "Action",
    "CheckpointCoordinator",
    "CheckpointTriggerError",
    "CompleteCheckpoint",
    "CoordinatorStats",
    "FailJob",
    "NotifyComplete",
    "ReleaseTask",
    "TriggerCheckpoint",
    "TriggerQueued",
    "TriggerRequestFailed",
]

MAX_QUEUED_REQUESTS = 1000


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
    awaiting: set[str]
    states: dict[str, object] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)  # tasks whose final state it holds
    persisting: bool = False
    stop: StopMode | None = None  # the synchronous savepoint of a stop-with-savepoint


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
        first_checkpoint_id: int = 1,
        upstream: Mapping[str, Iterable[str]] | None = None,
        tolerable_failures: int = 0,
        final_checkpoint: bool = True,
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
            ("first_checkpoint_id", first_checkpoint_id, first_checkpoint_id >= 1),
        ):
            if not ok:
                raise ValueError(f"invalid {name}: {value!r}")
        self._upstream = {t: frozenset((upstream or {}).get(t, ())) for t in task_list}
        unknown = set().union(*self._upstream.values()) - set(task_list)
        if unknown:
            raise ValueError(f"upstream names unknown tasks {sorted(unknown)!r}")
        self._clock = clock
        self._timeout_ms = timeout_ms
        self._max_concurrent = max_concurrent
        self._final_checkpoint = final_checkpoint
        self._failures = CheckpointFailureManager(tolerable_failures)
        self._tasks = dict.fromkeys(task_list, _TaskState.RUNNING)
        self._final_states: dict[str, object] = {}  # finished task -> its final state
        self._unreleased: set[str] = set()  # finished tasks whose final state is not committed
        self._next_id = max((restored_checkpoint_id or 0) + 1, first_checkpoint_id)
        self._in_flight: dict[int, _Checkpoint] = {}  # id order == insertion order
        self._subsumed_while_persisting: set[int] = set()
        self._schedule = TriggerSchedule(interval_ms, min_pause_ms, self._now())
        self._last_completed_id = restored_checkpoint_id
        self._num_completed = 0
        self._num_aborted = 0
        self._last_duration_ms: int | None = None
        self._stopped: tuple[AbortReason, str] | None = None  # job failing or ending: why

    # ------------------------------------------------------------------ queries

    @property
    def stats(self) -> CoordinatorStats:
        queued = self._schedule.queued
        return CoordinatorStats(
            self._last_completed_id, self._num_completed, self._num_aborted,
            self._last_duration_ms, tuple(self._in_flight), queued, self._failures.consecutive,
        )  # fmt: skip

    @property
    def next_checkpoint_id(self) -> int:
        """The id the next checkpoint gets: a new attempt of the job starts at or above it."""
        return self._next_id

    def final_snapshot_id(self, task_id: str) -> int:
        """The id under which ``task_id`` snapshots its final state: the oldest checkpoint that
        can hold it (a PENDING one still waiting for it, else the next one)."""
        waiting = [c.checkpoint_id for c in self._in_flight.values() if task_id in c.awaiting]
        return min(waiting, default=self._next_id)

    def next_poll_deadline(self) -> int | None:
        """Monotonic ms (``round(clock.monotonic() * 1000)``) at which ``poll()`` has work.

        ``None``: nothing time-driven can happen until another event arrives.
        A deadline in the past means "poll now".
        """
        deadlines = [c.started_ms + self._timeout_ms for c in self._in_flight.values() if not c.persisting]
        due = self._schedule.periodic_due_ms()
        if due is not None and self._has_free_slot() and not self._trigger_blocker():
            deadlines.append(due)
        return min(deadlines, default=None)

    # ------------------------------------------------------------------ events

    def poll(self) -> list[Action]:
        """Time out expired checkpoints, then trigger a periodic checkpoint if one is due."""
        now = self._now()
        actions: list[Action] = []
        for c in list(self._in_flight.values()):
            if not c.persisting and now >= c.started_ms + self._timeout_ms:
                detail = f"no ack within {self._timeout_ms} ms from {', '.join(sorted(c.awaiting))}"
                self._abort(c, AbortReason.TIMEOUT, detail, actions)
        self._drain_queue(actions)
        due = self._schedule.periodic_due_ms()
        if due is not None and self._has_free_slot() and not self._trigger_blocker() and now >= due:
            actions.append(self._start(CheckpointType.CHECKPOINT, None, None))
        return actions

    def trigger(
        self, kind: CheckpointType = CheckpointType.CHECKPOINT, target: str | None = None,
        stop: StopMode | None = None,
    ) -> list[Action]:
        """Manually request a checkpoint, or a savepoint to ``target`` (with ``stop``: the
        synchronous savepoint of a stop-with-savepoint); see the module rules."""
        if not isinstance(kind, CheckpointType):
            raise TypeError(f"kind must be a CheckpointType, got {kind!r}")
        if stop is not None and kind is not CheckpointType.SAVEPOINT:
            raise ValueError(f"only a savepoint stops the job, got {kind!r} with {stop!r}")
        if kind is CheckpointType.SAVEPOINT and not target:
            raise ValueError("a savepoint needs a target path")
        if kind is CheckpointType.CHECKPOINT and target is not None:
            raise ValueError(f"only savepoints take a target path, got {target!r}")
        blocker = self._trigger_blocker()
        if blocker is not None:
            raise blocker
        queued = self._schedule.queued
        if not self._has_free_slot() and queued >= MAX_QUEUED_REQUESTS:
            raise CheckpointTriggerError(
                AbortReason.TOO_MANY_REQUESTS,
                f"{queued} checkpoint requests are already queued (max {MAX_QUEUED_REQUESTS})",
            )
        request_id = self._schedule.new_request_id()
        self._schedule.stopping = self._schedule.stopping or stop is not None
        if self._has_free_slot():
            return [self._start(kind, target, request_id, stop)]
        queued_request = TriggerQueued(request_id, kind, target, stop)
        self._schedule.enqueue(queued_request)
        return [queued_request]

    def acknowledge(self, checkpoint_id: int, task_id: str, state: object) -> list[Action]:
        """Task ``task_id`` snapshotted ``state`` for the checkpoint; unknown/duplicate: ``[]``."""
        c = self._in_flight.get(checkpoint_id)
        if c is None or c.persisting or task_id not in c.awaiting:
            return []
        return self._ack(c, task_id, state)

    def decline(self, checkpoint_id: int, task_id: str, reason: str, *, counts: bool = True) -> list[Action]:
        """Task ``task_id`` cannot take the checkpoint: abort it (ignored if not pending).

        ``counts=False`` for declines that only echo another cause (a newer barrier, an
        upstream's cancel marker: Flink's ``CHECKPOINT_DECLINED_SUBSUMED`` and
        ``..._ON_CANCELLATION_BARRIER``), which do not count as failures."""
        c = self._in_flight.get(checkpoint_id)
        if c is None or c.persisting or task_id not in c.tasks:
            return []
        actions: list[Action] = []
        self._abort(c, AbortReason.DECLINED, f"declined by {task_id}: {reason}", actions, counts=counts)
        self._drain_queue(actions)
        return actions

    def task_failed(self, task_id: str) -> list[Action]:
        """Abort what ``task_id`` has not acknowledged; stop triggering; fail queued requests."""
        self._require_running(task_id)
        self._tasks[task_id] = _TaskState.FAILED
        actions: list[Action] = []
        for c in list(self._in_flight.values()):
            if not c.persisting and task_id in c.awaiting:
                self._abort(c, AbortReason.TASK_FAILED, f"task {task_id} failed", actions)
        self._after_task_change(actions)
        return actions

    def task_finished(self, task_id: str, final_state: object = None) -> list[Action]:
        """``task_id`` ended with ``final_state``; see the module rules (FLIP-147)."""
        self._require_running(task_id)
        self._tasks[task_id] = _TaskState.FINISHED
        actions: list[Action] = []
        if not self._final_checkpoint:
            self._final_states[task_id] = final_state  # a later savepoint holds it (FLIP-147)
            for c in list(self._in_flight.values()):
                if not c.persisting and task_id in c.awaiting:
                    self._abort(
                        c, AbortReason.TASK_FINISHED, f"task {task_id} finished before acking", actions
                    )
            actions.append(ReleaseTask(task_id))
        else:
            self._final_states[task_id] = final_state
            self._unreleased.add(task_id)
            for c in list(self._in_flight.values()):
                if not c.persisting and task_id in c.awaiting:
                    c.finished.add(task_id)
                    actions.extend(self._ack(c, task_id, final_state))
        self._after_task_change(actions)
        return actions

    def confirm_completed(self, checkpoint_id: int) -> list[Action]:
        """The driver persisted ``CompleteCheckpoint(checkpoint_id)``: it is complete."""
        if self._ignore_persist_result(checkpoint_id):
            return []
        c = self._in_flight.pop(checkpoint_id)
        now = self._now()
        self._num_completed += 1
        self._last_completed_id = checkpoint_id
        self._last_duration_ms = now - c.started_ms
        actions: list[Action] = []
        if c.kind is CheckpointType.CHECKPOINT:
            self._schedule.last_completed_ms = now
            self._failures.succeeded(checkpoint_id)
            for old in list(self._in_flight.values()):
                if old.checkpoint_id < checkpoint_id and old.kind is CheckpointType.CHECKPOINT:
                    if old.persisting:
                        self._subsumed_while_persisting.add(old.checkpoint_id)
                    self._abort(old, AbortReason.SUBSUMED, f"subsumed by {checkpoint_id}", actions)
        if c.kind is CheckpointType.CHECKPOINT or c.stop is not None:
            actions.append(NotifyComplete(checkpoint_id))
            for task_id in sorted(c.finished & self._unreleased):
                self._unreleased.discard(task_id)
                actions.append(ReleaseTask(task_id))
        self._drain_queue(actions)
        self._maybe_final_checkpoint(actions)
        return actions

    def persist_failed(self, checkpoint_id: int, reason: str) -> list[Action]:
        """The driver could not persist ``CompleteCheckpoint(checkpoint_id)``: abort it."""
        if self._ignore_persist_result(checkpoint_id):
            return []
        actions: list[Action] = []
        self._abort(self._in_flight[checkpoint_id], AbortReason.PERSIST_FAILED, reason, actions)
        self._drain_queue(actions)
        self._maybe_final_checkpoint(actions)
        return actions

    def job_ending(self, detail: str) -> list[Action]:
        """The job ends (cancel, failure, failover): abort what is PENDING, fail queued requests,
        trigger nothing again; PERSISTING checkpoints wait for their write's outcome."""
        actions: list[Action] = []
        if self._stopped is None or self._stopped[0] is not AbortReason.JOB_ENDED:
            self._stopped = (AbortReason.JOB_ENDED, f"cannot trigger: the job {detail}")
        for c in list(self._in_flight.values()):
            if not c.persisting:
                self._abort(c, AbortReason.JOB_ENDED, f"the job {detail}", actions)
        self._schedule.fail_queued(CheckpointTriggerError(*self._stopped), actions)
        return actions

    # ------------------------------------------------------------------ internals

    def _now(self) -> int:
        return round(self._clock.monotonic() * 1000)

    def _running_tasks(self) -> list[str]:
        return [t for t, s in self._tasks.items() if s is _TaskState.RUNNING]

    def _trigger_blocker(self) -> CheckpointTriggerError | None:
        if self._stopped is not None:
            return CheckpointTriggerError(*self._stopped)
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

    def _require_running(self, task_id: str) -> None:
        state = self._tasks.get(task_id)
        if state is None:
            raise ValueError(f"unknown task {task_id!r} (known: {', '.join(self._tasks)})")
        if state is not _TaskState.RUNNING:
            raise ValueError(f"task {task_id!r} is already {state.value}")

    def _after_task_change(self, actions: list[Action]) -> None:
        blocker = self._trigger_blocker()
        if blocker is None:
            self._drain_queue(actions)
        else:
            self._schedule.fail_queued(blocker, actions)
        self._maybe_final_checkpoint(actions)

    def _ignore_persist_result(self, checkpoint_id: int) -> bool:
        if checkpoint_id in self._subsumed_while_persisting:
            self._subsumed_while_persisting.discard(checkpoint_id)
            return True
        c = self._in_flight.get(checkpoint_id)
        if c is None or not c.persisting:
            state = "still awaiting acknowledgements" if c else "not in flight"
            raise ValueError(f"checkpoint {checkpoint_id} is not being persisted ({state})")
        return False

    def _start(
        self, kind: CheckpointType, target: str | None, request_id: int | None, stop: StopMode | None = None
    ) -> Action:
        now = self._now()
        running = frozenset(self._running_tasks())
        plan = frozenset(t for t in running if not (self._upstream[t] & running))
        cid = self._next_id
        self._next_id += 1
        self._schedule.last_trigger_ms = now
        c = _Checkpoint(cid, kind, target, now, running, set(running), stop=stop)
        for task_id, state in self._final_states.items():  # finished before the trigger
            c.states[task_id] = state
            c.finished.add(task_id)
        self._in_flight[cid] = c
        return TriggerCheckpoint(cid, self._clock.now_ms(), kind, target, request_id, plan, stop)

    def _ack(self, c: _Checkpoint, task_id: str, state: object) -> list[Action]:
        c.awaiting.discard(task_id)
        c.states[task_id] = state
        if c.awaiting:
            return []
        c.persisting = True
        return [CompleteCheckpoint(c.checkpoint_id, c.kind, c.target, dict(c.states), frozenset(c.finished))]

    def _abort(
        self, c: _Checkpoint, reason: AbortReason, detail: str, actions: list[Action], counts: bool = True
    ) -> None:
        del self._in_flight[c.checkpoint_id]
        self._num_aborted += 1
        self._schedule.stopping = self._schedule.stopping and c.stop is None
        fail = counts and self._failures.failed(c.checkpoint_id, reason, c.kind is CheckpointType.SAVEPOINT)
        actions.append(AbortCheckpoint(c.checkpoint_id, reason, detail, self._failures.consecutive))
        if fail and self._stopped is None:
            tolerable = self._failures.tolerable
            msg = (
                f"checkpoint {c.checkpoint_id} failed ({reason.value}: {detail}); "
                f"{self._failures.consecutive} consecutive checkpoint failure(s) exceed the tolerable "
                f"number {tolerable} (CheckpointConfig.set_tolerable_checkpoint_failure_number)"
            )
            self._stopped = (reason, f"cannot trigger: {msg}")
            actions.append(FailJob(msg))
            self._schedule.fail_queued(CheckpointTriggerError(*self._stopped), actions)

    def _drain_queue(self, actions: list[Action]) -> None:
        if self._trigger_blocker() is not None:
            return
        while self._has_free_slot() and (r := self._schedule.next_request()) is not None:
            actions.append(self._start(r.kind, r.target, r.request_id, r.stop))

    def _maybe_final_checkpoint(self, actions: list[Action]) -> None:
        """Every task finished, nothing in flight, final states not all committed: complete
        one last checkpoint holding them (no barriers: nothing is in flight any more)."""
        if (
            not self._final_checkpoint
            or self._in_flight
            or not self._unreleased
            or self._running_tasks()
            or self._stopped is not None
            or any(s is _TaskState.FAILED for s in self._tasks.values())
        ):
            return
        cid = self._next_id
        self._next_id += 1
        c = _Checkpoint(cid, CheckpointType.CHECKPOINT, None, self._now(), frozenset(), set())
        c.states.update(self._final_states)
        c.finished.update(self._final_states)
        c.persisting = True
        self._in_flight[cid] = c
        actions.append(CompleteCheckpoint(cid, c.kind, None, dict(c.states), frozenset(c.finished)))
