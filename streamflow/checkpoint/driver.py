"""The job's checkpoint driver: runs the CheckpointCoordinator and talks to tasks and storage.

Theory of operation
-------------------
One coroutine per running execution. Tasks report to it (acknowledge,
decline, finished) through an inbox; it feeds the reports to the
:class:`CheckpointCoordinator` and carries out the actions returned:

* ``TriggerCheckpoint`` -> mail to every running source task: snapshot, emit
  barrier n (stamped aligned/unaligned per the config; savepoints aligned);
* ``CompleteCheckpoint`` -> persist every task's state (plus the final state
  of tasks that finished before) to storage, atomically, off the event loop;
  then ``confirm_completed`` -> ``NotifyComplete`` -> mail to every task to
  call ``notify_checkpoint_complete`` (where sinks commit);
* ``AbortCheckpoint`` -> mail ``notify_checkpoint_aborted``.

A task that finishes hands over its final state and waits (still serving
its mail) until a checkpoint that holds that state has completed: its
sinks commit only then (Flink's final checkpoint, FLIP-147). When every task
has finished, the driver completes one last checkpoint itself, with no
barriers needed since nothing is in flight.

Without a storage directory checkpoints are kept in memory (the latest
complete one), which is enough for in-process failover.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _faults as faults
from ..runtime.events import CheckpointBarrier, CheckpointType
from ..runtime.task import InputTask, SourceTask
from .barrier_handler import barrier_alignment
from .config import CheckpointConfig
from .coordinator import (
    AbortCheckpoint,
    CheckpointCoordinator,
    CompleteCheckpoint,
    NotifyComplete,
    TriggerCheckpoint,
    TriggerRequestFailed,
)
from .restore import encode_entry
from .storage import FileSystemCheckpointStorage

if TYPE_CHECKING:
    from ..runtime.job import Execution
    from ..runtime.task import Task


class CheckpointDriver:
    def __init__(
        self,
        execution: Execution,
        config: CheckpointConfig,
        storage: FileSystemCheckpointStorage | None,
        restored_checkpoint_id: int | None,
    ) -> None:
        self.execution = execution
        self.config = config
        self.storage = storage
        self.clock = execution.clock
        self.enabled = config.is_checkpointing_enabled()
        self.tasks: dict[str, Task] = {}
        for t in execution.tasks:
            cp = t.checkpointer
            assert cp is not None
            cp.driver = self
            if isinstance(t, InputTask):
                cp.attach_handler(len(t.gate.channels))
            self.tasks[cp.task_id] = t
        self.coordinator = CheckpointCoordinator(
            list(self.tasks),
            self.clock,
            interval_ms=config.interval_ms,
            min_pause_ms=config.min_pause_ms,
            timeout_ms=config.timeout_ms,
            max_concurrent=config.max_concurrent,
            restored_checkpoint_id=restored_checkpoint_id,
        )
        self.last_id = restored_checkpoint_id or 0
        self.latest_in_memory: tuple[int, dict[str, bytes]] | None = None
        self._inbox: deque[Callable[[], list[Any]]] = deque()
        self._wake: asyncio.Future[None] | None = None
        self._final_states: dict[str, Any] = {}
        self._finished: set[str] = set()
        self._released: set[str] = set()  # finished tasks whose final state is committed
        self._waiting_final: dict[str, asyncio.Future[None]] = {}  # task id -> released
        self._included: dict[int, set[str]] = {}  # checkpoint id -> finished tasks it holds
        self._requests: dict[int, asyncio.Future[str]] = {}
        self._request_of_checkpoint: dict[int, int] = {}
        self.completed: list[int] = []
        self.durations_ms: list[int] = []
        self.stats = execution.checkpoint_stats  # history for the REST API and metrics
        self._persisted_bytes = 0

    # -- reports from tasks (synchronous; handled by the driver loop) --------
    def _post(self, event: Callable[[], list[Any]]) -> None:
        self._inbox.append(event)
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def acknowledge(self, checkpoint_id: int, task_id: str, state: dict[str, Any]) -> None:
        self._post(lambda: self.coordinator.acknowledge(checkpoint_id, task_id, state))

    def decline(self, checkpoint_id: int, task_id: str, reason: str) -> None:
        self._post(lambda: self.coordinator.decline(checkpoint_id, task_id, reason))

    def encode(self, obj: Any) -> bytes:
        return self.config.codec.encode(obj)

    def task_finished(self, task_id: str, final_state: dict[str, Any]) -> asyncio.Future[None]:
        """Called by a task after ``finish()``; the future resolves once a checkpoint holding
        its final state has completed (the task keeps serving its mail meanwhile)."""
        released: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._finished.add(task_id)
        if self.enabled:
            self._final_states[task_id] = final_state
            self._waiting_final[task_id] = released
        else:
            released.set_result(None)
        self._post(lambda: self.coordinator.task_finished(task_id))
        return released

    async def request(self, kind: CheckpointType, target: str | None) -> str:
        """A manual checkpoint or savepoint; resolves to its path once complete."""
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def start() -> list[Any]:
            try:
                actions = self.coordinator.trigger(kind, target)
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
            actions: list[Any] = []
            while self._inbox:
                actions.extend(self._inbox.popleft()())
            actions.extend(self.coordinator.poll())
            for action in actions:
                await self._carry_out(action)
            if self._inbox:
                continue
            if self._finished == set(self.tasks):
                if self.enabled:
                    await self._final_checkpoint()
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

    def _wake_up(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def fail_requests(self, cause: BaseException | None) -> None:
        """The job ended: outstanding checkpoint and savepoint requests fail (naming the cause)."""
        for fut in self._requests.values():
            if not fut.done():
                what = "failed" if cause is not None else "ended"
                error = RuntimeError(f"the job {what} before the checkpoint completed: {cause!r}")
                error.__cause__ = cause
                fut.set_exception(error)
        self._requests.clear()

    async def _carry_out(self, action: Any) -> None:
        kind = type(action)
        if kind is TriggerCheckpoint:
            self.last_id = max(self.last_id, action.checkpoint_id)
            self.stats.triggered(
                action.checkpoint_id, action.kind is CheckpointType.SAVEPOINT,
                sum(1 for t in self.tasks.values() if not t.finished),
            )  # fmt: skip
            if action.request_id is not None:  # a manual checkpoint or savepoint: someone waits
                self._request_of_checkpoint[action.checkpoint_id] = action.request_id
            barrier = CheckpointBarrier(
                action.checkpoint_id,
                action.timestamp_ms,
                action.kind,
                barrier_alignment(
                    action.kind,
                    unaligned=self.config.unaligned,
                    aligned_timeout_ms=self.config.aligned_timeout_ms,
                ),
            )
            for task in self.tasks.values():
                cp = task.checkpointer
                if task.finished or cp is None:
                    continue
                if isinstance(task, SourceTask):
                    task.post(partial(cp.trigger, barrier))
                elif isinstance(task, InputTask) and all(
                    ch.writer is not None and ch.writer.finished for ch in task.gate.channels
                ):
                    # every upstream finished (FLIP-147): the barrier goes in right before each
                    # channel's end of input, after the data still queued
                    for ch in task.gate.channels:
                        ch.put_before_end(barrier)
        elif kind is CompleteCheckpoint:
            await self._complete(action)
        elif kind is NotifyComplete:
            self._notify(action.checkpoint_id, complete=True)
        elif kind is AbortCheckpoint:
            self.stats.failed(action.checkpoint_id, f"{action.reason.value}: {action.detail}".rstrip(": "))
            self._notify(action.checkpoint_id, complete=False)
            rid = self._request_of_checkpoint.pop(action.checkpoint_id, None)
            fut = self._requests.pop(rid, None) if rid is not None else None
            if fut is not None and not fut.done():
                fut.set_exception(
                    RuntimeError(f"checkpoint {action.checkpoint_id} aborted: {action.reason.value}")
                )
        elif kind is TriggerRequestFailed:
            fut = self._requests.pop(action.request_id, None)
            if fut is not None and not fut.done():
                fut.set_exception(RuntimeError(f"checkpoint request failed: {action.reason.value}"))

    async def _complete(self, action: CompleteCheckpoint) -> None:
        cid = action.checkpoint_id
        states = dict(action.states)
        finished = set(self._final_states) - set(states)
        for task_id in finished:
            states[task_id] = self._final_states[task_id]
        started = self.clock.monotonic()
        try:
            path = await self._persist(cid, states, action.target)
        except Exception as exc:
            for a in self.coordinator.persist_failed(cid, repr(exc)):
                await self._carry_out(a)
            return
        if faults.ARMED:
            faults.point("complete", cid)
        self._included[cid] = finished
        rid = self._request_of_checkpoint.pop(cid, None)
        fut = self._requests.pop(rid, None) if rid is not None else None
        if fut is not None and not fut.done():
            fut.set_result(path)
        self.completed.append(cid)
        self.stats.completed(
            cid, path=path, state_size=self._persisted_bytes,
            async_ms=round((self.clock.monotonic() - started) * 1000),
            tasks={t: _timings(s) for t, s in action.states.items()},  # type: ignore[arg-type]
            is_savepoint=action.kind is CheckpointType.SAVEPOINT,
        )  # fmt: skip
        for a in self.coordinator.confirm_completed(cid):
            await self._carry_out(a)
        stats = self.coordinator.stats
        if stats.last_duration_ms is not None and action.kind is CheckpointType.CHECKPOINT:
            self.durations_ms.append(stats.last_duration_ms)

    async def _persist(self, cid: int, states: dict[str, Any], target: str | None) -> str:
        entries = {
            f"task-{i}": encode_entry(
                self.config.codec, task_id, states[task_id], self.tasks[task_id].parallelism
            )
            for i, task_id in enumerate(sorted(states))
        }
        job = self.execution.job_name
        self._persisted_bytes = sum(len(e) for e in entries.values())
        timings = {t: _timings(s) for t, s in states.items()}
        stats = {
            "duration_ms": self.stats.elapsed_ms(cid),  # trigger to the last acknowledgement
            "alignment_ms_max": max((t.get("alignment_ms", 0) for t in timings.values()), default=0),
            "sync_ms_max": max((t.get("sync_ms", 0) for t in timings.values()), default=0),
            "tasks": timings,
        }
        if target is not None:
            storage = self.storage or FileSystemCheckpointStorage(Path(target).parent)
            path = await asyncio.to_thread(
                storage.write_checkpoint, cid, job, entries, savepoint_path=target, stats=stats
            )
            return str(path)
        if self.storage is None:
            self.latest_in_memory = (cid, entries)
            return f"memory:chk-{cid}"
        path = await asyncio.to_thread(self.storage.write_checkpoint, cid, job, entries, stats=stats)
        return str(path)

    def _notify(self, checkpoint_id: int, complete: bool) -> None:
        for task_id, task in self.tasks.items():
            if task_id in self._released:
                continue
            if complete:
                task.post(partial(task.notify_checkpoint_complete, checkpoint_id))
                if task_id in self._included.get(checkpoint_id, ()):
                    released = self._waiting_final.pop(task_id, None)
                    if released is not None:
                        self._released.add(task_id)
                        task.post(partial(_release, released))
            else:
                task.post(partial(task.notify_checkpoint_aborted, checkpoint_id))

    async def _final_checkpoint(self) -> None:
        """Every task finished: complete one last checkpoint holding all final states."""
        cid = self.last_id + 1
        self.last_id = cid
        started = self.clock.monotonic()
        path = await self._persist(cid, dict(self._final_states), None)
        self.completed.append(cid)
        self.stats.completed(
            cid, path=path, state_size=self._persisted_bytes,
            async_ms=round((self.clock.monotonic() - started) * 1000), tasks={},
        )  # fmt: skip
        for task_id, task in self.tasks.items():
            if task_id not in self._released:  # released tasks have closed their operators
                await task.notify_checkpoint_complete(cid)
        for released in self._waiting_final.values():
            if not released.done():
                released.set_result(None)
        self._waiting_final.clear()


def _timings(state: dict[str, Any]) -> dict[str, int]:
    """A task's checkpoint timings, carried next to its state in the acknowledgement."""
    return {k: int(state[k]) for k in ("alignment_ms", "sync_ms") if k in state}


async def _release(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
