"""The job's checkpoint driver: carries out the CheckpointCoordinator's actions.

Theory of operation
-------------------
One coroutine per running execution (attempt) of a job. Tasks report to it
(acknowledge, decline, finished) through an inbox; it feeds the reports to the
:class:`CheckpointCoordinator` and carries out the actions returned. It decides
nothing itself:

* ``TriggerCheckpoint`` -> mail to every task of the trigger plan: a source
  snapshots and emits barrier n; a task whose inputs all finished gets barrier
  n just before each channel's end of input (stamped aligned/unaligned per the
  config; savepoints aligned);
* ``CompleteCheckpoint`` -> the :class:`CheckpointWriter` (``writer.py``) encodes
  every task's state and writes it to storage, atomically, in a worker thread (a
  write that fails removes its directory), with the shared files the tasks'
  incremental snapshots wrote and referenced (``uploads.py``); then
  ``confirm_completed`` or ``persist_failed``;
* ``NotifyComplete`` -> mail to every task to call ``notify_checkpoint_complete``
  (where sinks commit); ``ReleaseTask`` -> a finished task may end; the request of a
  stop-with-savepoint (``stop_with_savepoint``) resolves only once every task ran it;
* ``AbortCheckpoint`` -> a WARNING with the cause, ``notify_checkpoint_aborted``;
* ``FailJob`` -> raise :class:`CheckpointFailureError`: the job fails (over).

Settling (:meth:`CheckpointDriver.settle`, run by the execution on every end:
finished, cancelled, failed, restarting): the coordinator aborts what is still
PENDING; a write in progress is asked to stop (storage checks between files and
before ``_metadata``), and awaited: either it stopped, and its directory is
gone, or its ``_metadata`` was already durable, and it is a completed
checkpoint (its sinks commit it when the job is restored from it, as after a
crash). Only then does the execution end, so nothing writes behind a
cancelled job or a new attempt.

Without a storage directory checkpoints are kept in memory (the latest
complete one), which is enough for in-process failover.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .. import _faults as faults
from ..clock import Clock
from ..errors import StreamflowError
from .actions import (
    AbortCheckpoint,
    AbortReason,
    Action,
    CheckpointTriggerError,
    CompleteCheckpoint,
    FailJob,
    NotifyComplete,
    ReleaseTask,
    TriggerCheckpoint,
    TriggerQueued,
    TriggerRequestFailed,
)
from .barrier_handler import barrier_alignment
from .config import CheckpointConfig
from .coordinator import CheckpointCoordinator
from .events import CheckpointBarrier, CheckpointType, StopMode
from .storage import FileSystemCheckpointStorage
from .task_checkpointer import CheckpointedTask, TaskCheckpointer
from .uploads import SharedUpload, produce_all
from .writer import CheckpointWriter, task_timings

_log = logging.getLogger(__name__)


class CheckpointStats(Protocol):
    """Where the driver reports each checkpoint's life (``runtime/checkpoint_stats.py``)."""

    def triggered(
        self, checkpoint_id: int, is_savepoint: bool, num_subtasks: int, sync: bool = False
    ) -> None: ...
    def completed(
        self, checkpoint_id: int, *, path: str, state_size: int, async_ms: int,
        tasks: dict[str, dict[str, int]], is_savepoint: bool = False,
    ) -> Any: ...  # fmt: skip
    def failed(self, checkpoint_id: int, cause: str) -> None: ...
    def elapsed_ms(self, checkpoint_id: int) -> int | None: ...


class CheckpointFailureError(StreamflowError, RuntimeError):
    """Checkpoints failed more often in a row than tolerated; the job fails (over)."""


class CheckpointDriver:
    def __init__(
        self,
        job_name: str,
        tasks: Sequence[tuple[str, CheckpointedTask]],
        clock: Clock,
        config: CheckpointConfig,
        storage: FileSystemCheckpointStorage | None,
        restored_checkpoint_id: int | None,
        first_checkpoint_id: int = 1,
        stats: CheckpointStats | None = None,
    ) -> None:
        self.job_name = job_name
        self.config = config
        self.storage = storage
        self.clock = clock
        self.enabled = config.is_checkpointing_enabled()
        self.tasks: dict[str, CheckpointedTask] = {}
        id_of: dict[int, str] = {}
        for task_id, task in tasks:
            self.tasks[task_id] = task
            id_of[id(task)] = task_id
            task.checkpointer = TaskCheckpointer(task, task_id, self)
        upstream = {
            task_id: {id_of[id(ch.writer)] for ch in task.gate.channels if ch.writer is not None}
            for task_id, task in self.tasks.items()
            if not task.is_source
        }
        self.coordinator = CheckpointCoordinator(
            list(self.tasks),
            clock,
            interval_ms=config.interval_ms,
            min_pause_ms=config.min_pause_ms,
            timeout_ms=config.timeout_ms,
            max_concurrent=config.max_concurrent,
            restored_checkpoint_id=restored_checkpoint_id,
            first_checkpoint_id=first_checkpoint_id,
            upstream=upstream,
            tolerable_failures=config.tolerable_failures,
            final_checkpoint=self.enabled,
        )
        self.stats = stats  # history for the REST API and metrics
        self.writer = CheckpointWriter(
            job_name,
            config,
            storage,
            lambda t: self.tasks[t].parallelism,
            lambda t: self.tasks[t].max_parallelism,
        )
        self.num_completed = 0
        self.durations_ms: deque[int] = deque(maxlen=256)  # the latest checkpoints' durations
        self._inbox: deque[Callable[[], list[Action]]] = deque()
        self._ended: str | None = None  # why the driver reads no more events
        self._unstarted: set[asyncio.Future[str]] = set()  # requests posted, not yet read
        self._wake: asyncio.Future[None] | None = None
        self._releases: dict[str, asyncio.Future[None]] = {}  # finished task -> released
        self._released: set[str] = set()  # tasks whose operators are closed: no more mail
        self._requests: dict[int, asyncio.Future[str]] = {}
        self._stops: dict[int, str] = {}  # stop-with-savepoint checkpoint -> its path once written
        self.stop_savepoint: str | None = None  # written, its side effects being committed
        self._request_of_checkpoint: dict[int, int] = {}
        self._settled = False
        self._end_cause: BaseException | None = None
        self._uploads: set[asyncio.Task[None]] = set()  # incremental snapshots being written
        self._task_uploads: dict[str, set[asyncio.Task[None]]] = {}  # the same, by task

    # -- reports from tasks (synchronous; handled by the driver loop) --------
    def _post(self, event: Callable[[], list[Action]]) -> None:
        self._inbox.append(event)
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def acknowledge(self, checkpoint_id: int, task_id: str, state: dict[str, Any]) -> None:
        self._post(lambda: self.coordinator.acknowledge(checkpoint_id, task_id, state))

    def upload_then_acknowledge(
        self, checkpoint_id: int, task_id: str, state: dict[str, Any], uploads: list[SharedUpload]
    ) -> None:
        """Acknowledge once the uploads produced their shared files (the task goes on meanwhile);
        a failure declines the checkpoint, logged with its cause."""
        task = asyncio.get_running_loop().create_task(self._upload(checkpoint_id, task_id, state, uploads))
        self._uploads.add(task)
        task.add_done_callback(self._uploads.discard)
        by_task = self._task_uploads.setdefault(task_id, set())
        by_task.add(task)
        task.add_done_callback(by_task.discard)

    async def acknowledgements_posted(self, task_id: str) -> None:
        """Return once every acknowledgement (or decline) of ``task_id``'s snapshots so far is in
        the coordinator's inbox: those waiting for their uploads are posted when written."""
        pending = self._task_uploads.get(task_id)
        while pending:
            await asyncio.wait(set(pending))

    async def _upload(
        self, checkpoint_id: int, task_id: str, state: dict[str, Any], uploads: list[SharedUpload]
    ) -> None:
        try:
            shared, references = await produce_all(uploads)
            state["shared"] = {**(state.get("shared") or {}), **shared}
            state["refs"] = sorted({*(state.get("refs") or ()), *references})
        except Exception as exc:
            _log.warning(
                "checkpoint %d: task %s could not write its incremental state: %s: %s",
                checkpoint_id, task_id, type(exc).__name__, exc, exc_info=exc,
            )  # fmt: skip
            self.decline(checkpoint_id, task_id, f"incremental state not written: {exc!r}", counts=True)
            return
        self.acknowledge(checkpoint_id, task_id, state)

    def decline(self, checkpoint_id: int, task_id: str, reason: str, counts: bool) -> None:
        self._post(lambda: self.coordinator.decline(checkpoint_id, task_id, reason, counts=counts))

    def encode(self, obj: Any) -> bytes:
        return self.config.codec.encode(obj)

    def final_snapshot_id(self, task_id: str, last_snapshot_id: int) -> int:
        """The label of ``task_id``'s final snapshot. Its acknowledgements must all be posted
        (``acknowledgements_posted``): the inbox delivers them before ``task_finished``. The
        coordinator may not have read the newest one yet and still name that checkpoint, so the
        label comes after ``last_snapshot_id``; every checkpoint that holds the final state then
        has an id at or above the label, and its completion commits what the label names."""
        return max(self.coordinator.final_snapshot_id(task_id), last_snapshot_id + 1)

    def task_finished(self, task_id: str, final_state: dict[str, Any]) -> asyncio.Future[None]:
        """Called by a task after ``finish()``; the future resolves once a checkpoint holding
        its final state has completed (the task keeps serving its mail meanwhile)."""
        released: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._releases[task_id] = released
        self._post(lambda: self.coordinator.task_finished(task_id, final_state))
        return released

    async def request(self, kind: CheckpointType, target: str | None, stop: StopMode | None = None) -> str:
        """A manual checkpoint or savepoint; resolves to its path once complete. With ``stop``:
        the synchronous savepoint of a stop-with-savepoint, resolved once every task has run its
        completion notification (its sinks committed): the job may end then."""
        if self._ended is not None:
            raise CheckpointTriggerError(AbortReason.JOB_ENDED, f"cannot trigger: {self._ended}")
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._unstarted.add(fut)

        def start() -> list[Action]:
            self._unstarted.discard(fut)
            if fut.done():  # failed by _end: the job ended first
                return []
            try:
                actions = self.coordinator.trigger(kind, target, stop)
            except Exception as exc:
                fut.set_exception(exc)
                return []
            for a in actions:
                rid = getattr(a, "request_id", None)
                if rid is not None:
                    self._requests[rid] = fut
            return actions

        self._post(start)
        return await fut

    # -- the loop ------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            actions: list[Action] = []
            while self._inbox:
                actions.extend(self._inbox.popleft()())
            actions.extend(self.coordinator.poll())
            for action in actions:
                await self._carry_out(action)
            if self._inbox:
                continue
            if len(self._released) == len(self.tasks) and not self.coordinator.stats.in_flight:
                self._end("the job's tasks have all finished")
                return
            self._wake = loop.create_future()
            deadline = self.coordinator.next_poll_deadline()
            handle = None
            if deadline is not None:
                delay_ms = deadline - round(self.clock.monotonic() * 1000)
                handle = self.clock.call_at_ms(self.clock.now_ms() + max(delay_ms, 0), self._wake_up)
            try:
                await self._wake
            finally:
                if handle is not None:
                    handle.cancel()

    def refuse_requests(self, why: str) -> None:
        """No checkpoint will run (the driver is not run: a batch job with blocking exchanges,
        ``runtime/regions.py``): every request fails at once, naming ``why``."""
        self._end(why)

    def _end(self, why: str) -> None:
        """No event is read any more: a request made from now on, or still unread, fails."""
        if self._ended is None:
            self._ended = why
        for fut in self._unstarted:
            if not fut.done():
                fut.set_exception(CheckpointTriggerError(AbortReason.JOB_ENDED, f"cannot trigger: {why}"))
        self._unstarted.clear()

    def _wake_up(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _carry_out(self, action: Action) -> None:
        if isinstance(action, TriggerCheckpoint):
            self._trigger(action)
        elif isinstance(action, CompleteCheckpoint):
            await self._complete(action)
        elif isinstance(action, NotifyComplete):
            if faults.ARMED:
                faults.point("notify", action.checkpoint_id)
            cid = action.checkpoint_id
            notified = [task for task_id, task in self.tasks.items() if task_id not in self._released]
            if cid in self._stops:
                self._notify_stop(cid, notified)
            else:
                for task in notified:
                    task.post(functools.partial(task.notify_checkpoint_complete, cid))
        elif isinstance(action, ReleaseTask):
            self._released.add(action.task_id)
            released = self._releases.get(action.task_id)
            if released is not None:
                self.tasks[action.task_id].post(functools.partial(_release, released))
        elif isinstance(action, AbortCheckpoint):
            self._aborted(action)
            for task_id, task in self.tasks.items():
                if task_id not in self._released:
                    task.post(functools.partial(task.notify_checkpoint_aborted, action.checkpoint_id))
        elif isinstance(action, TriggerRequestFailed):
            fut = self._requests.pop(action.request_id, None)
            if fut is not None and not fut.done():
                fut.set_exception(
                    RuntimeError(f"checkpoint request failed: {action.detail or action.reason.value}")
                )
        elif isinstance(action, FailJob):
            raise CheckpointFailureError(action.detail)
        elif isinstance(action, TriggerQueued):
            pass  # a manual request waits for a free slot; request() registered its future

        else:  # pragma: no cover - the coordinator's action set is closed
            raise TypeError(f"unknown coordinator action {action!r}")

    def _trigger(self, action: TriggerCheckpoint) -> None:
        if faults.ARMED:
            faults.point("trigger", action.checkpoint_id)
        if action.request_id is not None:  # a manual checkpoint or savepoint: someone waits
            self._request_of_checkpoint[action.checkpoint_id] = action.request_id
        if action.stop is not None:
            self._stops[action.checkpoint_id] = ""
        alignment = barrier_alignment(
            action.kind, unaligned=self.config.unaligned, aligned_timeout_ms=self.config.aligned_timeout_ms
        )
        barrier = CheckpointBarrier(
            action.checkpoint_id, action.timestamp_ms, action.kind, alignment, action.stop
        )
        if self.stats is not None:
            running = sum(1 for t in self.tasks.values() if not t.finished)
            is_savepoint = action.kind is CheckpointType.SAVEPOINT
            self.stats.triggered(action.checkpoint_id, is_savepoint, running, sync=action.stop is not None)
        for task_id in sorted(action.tasks):
            cp = self.tasks[task_id].checkpointer
            assert cp is not None
            self.tasks[task_id].post(functools.partial(cp.trigger, barrier))

    def _aborted(self, action: AbortCheckpoint) -> None:
        """Report an aborted checkpoint with its cause (the stats tracker logs it at WARNING:
        one line per failed checkpoint); fail the request waiting for it."""
        cid, reason = action.checkpoint_id, action.reason
        self._stops.pop(cid, None)
        cause = f"{reason.value}: {action.detail}".rstrip(": ")
        if reason not in (AbortReason.JOB_ENDED, AbortReason.SUBSUMED):
            cause += (
                f" ({action.failures} consecutive failure(s), {self.config.tolerable_failures} tolerated)"
            )
        if self.stats is not None:
            self.stats.failed(cid, cause)
        else:
            _log.warning("checkpoint %d of job %r failed: %s", cid, self.job_name, cause)
        rid = self._request_of_checkpoint.pop(cid, None)
        fut = self._requests.pop(rid, None) if rid is not None else None
        if fut is not None and not fut.done():
            error = RuntimeError(f"checkpoint {cid} aborted ({reason.value}): {action.detail}")
            error.__cause__ = self._end_cause if reason is AbortReason.JOB_ENDED else None
            fut.set_exception(error)

    async def _complete(self, action: CompleteCheckpoint) -> None:
        cid = action.checkpoint_id
        started = self.clock.monotonic()
        try:
            if faults.ARMED:
                faults.point("persist", cid)
            duration_ms = self.stats.elapsed_ms(cid) if self.stats is not None else None
            path = await self.writer.write(cid, action.states, action.target, duration_ms)
        except asyncio.CancelledError:
            raise  # the job ends: settle() takes over the write
        except Exception as exc:
            _log.debug("writing checkpoint %d failed", cid, exc_info=exc)
            for a in self.coordinator.persist_failed(cid, f"{type(exc).__name__}: {exc}"):
                await self._carry_out(a)
            return
        if faults.ARMED:
            faults.point("complete", cid)
        if self.stats is not None:
            self.stats.completed(
                cid, path=path, state_size=self.writer.persisted_bytes,
                async_ms=round((self.clock.monotonic() - started) * 1000),
                tasks={t: task_timings(s) for t, s in action.states.items()},
                is_savepoint=action.kind is CheckpointType.SAVEPOINT,
            )  # fmt: skip
        await self._completed(cid, path, action.kind)

    async def _completed(self, cid: int, path: str, kind: CheckpointType) -> None:
        if cid in self._stops:
            self._stops[cid] = path  # the request resolves once every task was notified
        else:
            self._resolve(cid, path)
        self.num_completed += 1
        actions = self.coordinator.confirm_completed(cid)
        stats = self.coordinator.stats
        if stats.last_duration_ms is not None and kind is CheckpointType.CHECKPOINT:
            self.durations_ms.append(stats.last_duration_ms)
        for a in actions:
            await self._carry_out(a)

    def _resolve(self, cid: int, path: str) -> None:
        rid = self._request_of_checkpoint.pop(cid, None)
        fut = self._requests.pop(rid, None) if rid is not None else None
        if fut is not None and not fut.done():
            fut.set_result(path)

    def _notify_stop(self, cid: int, tasks: list[CheckpointedTask]) -> None:
        """The savepoint of a stop-with-savepoint completed: notify every task (its sinks
        commit), then resolve the request with the savepoint's path."""
        path = self.stop_savepoint = self._stops.pop(cid)
        remaining = [len(tasks)]

        async def notify(task: CheckpointedTask) -> None:
            await task.notify_checkpoint_complete(cid)
            remaining[0] -= 1
            if remaining[0] == 0:
                self._resolve(cid, path)

        if not tasks:
            self._resolve(cid, path)
        for task in tasks:
            task.post(functools.partial(notify, task))

    # -- the job's end -------------------------------------------------------
    async def settle(self, detail: str, cause: BaseException | None) -> None:
        """Settle every in-flight checkpoint before the job (attempt) ends; see the module doc.
        Tasks are stopped by now: nothing is notified, only logged and counted."""
        if self._settled:
            return
        self._settled = True
        self._end_cause = cause
        self._end(f"the job is ending: {detail}")
        for upload in list(self._uploads):  # their checkpoints are aborted below
            upload.cancel()
        actions = self.coordinator.job_ending(detail)
        for cid, outcome in await self.writer.stop_all():
            if isinstance(outcome, Exception):
                _log.info(
                    "checkpoint %d of job %r stopped as the job %s: %s", cid, self.job_name, detail, outcome
                )
                actions += self.coordinator.persist_failed(cid, f"the job {detail} while it was written")
                continue
            _log.info(
                "checkpoint %d of job %r completed (%s) as the job %s; its sinks commit it when "
                "the job is restored from it", cid, self.job_name, outcome, detail,
            )  # fmt: skip
            rid = self._request_of_checkpoint.pop(cid, None)
            req = self._requests.pop(rid, None) if rid is not None else None
            if req is not None and not req.done():
                req.set_result(str(outcome))
            self.num_completed += 1
            if self.stats is not None:
                self.stats.completed(
                    cid, path=str(outcome), state_size=self.writer.persisted_bytes, async_ms=0, tasks={}
                )
            actions += self.coordinator.confirm_completed(cid)
        for cid in self.coordinator.stats.in_flight:  # cancelled before its write started
            actions += self.coordinator.persist_failed(cid, f"the job {detail} before it was written")
        for a in actions:
            if isinstance(a, AbortCheckpoint):
                self._aborted(a)
        self.fail_requests(cause)

    def fail_requests(self, cause: BaseException | None) -> None:
        """The job ended: outstanding checkpoint and savepoint requests fail (naming the cause)."""
        for fut in self._requests.values():
            if not fut.done():
                what = "failed" if cause is not None else "ended"
                error = RuntimeError(f"the job {what} before the checkpoint completed: {cause!r}")
                error.__cause__ = cause
                fut.set_exception(error)
        self._requests.clear()


async def _release(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
