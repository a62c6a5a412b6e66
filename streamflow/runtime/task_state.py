"""What a task does with its operator chain's state: snapshots, captures, notices, restores.

Mixed into :class:`~.task.Task`: the methods the checkpoint machinery
(``checkpoint/task_checkpointer.py``, ``runtime/execution.py``) calls on a task
between batches, never inside one. At a barrier, ``prepare_snapshot`` lets every
operator flush (head first), ``capture_state`` has keyed backends that checkpoint
incrementally capture what changed (and operators their own incremental state,
e.g. timers), then ``snapshot_operators`` and ``take_shared_files`` collect the
chain's state by operator uid. A finished task (FLIP-147) leaves keyed state out.
Completion and abort notices go to every operator; an operator's failure is
raised as its own (``StreamOperator.failure``). After a restore,
``_finish_restores`` decodes the restored keyed state and timers a frame at a
time between loop budget pauses, before the operators open. Before all that,
``_start_backends`` opens (and restores) the RocksDB backends in worker threads;
``_close_backends`` closes them so at the task's end.
"""

from __future__ import annotations

from typing import Any

from ..state.rocksdb_lifecycle import close_all, start_all
from ..state.state_errors import StateEncodingError, find_refused, refused_state_value
from .loop_budget import LoopBudget, yield_point
from .operator import StreamOperator
from .processing_time import ProcessingTimeService

__all__ = ["ChainState"]


class ChainState:
    """The chain's state side of a task (``operators``: head first, set by ``Task``)."""

    name: str
    operators: list[StreamOperator]
    processing_time: ProcessingTimeService
    halted_for: int | None = None  # the stop-with-savepoint this task halted for (no timers)
    last_aborted: int = 0  # the newest checkpoint id whose abort this task was told of
    _restored_state: bool
    budget: LoopBudget

    def snapshot_operators(self, checkpoint_id: int, final: bool = False) -> dict[str, Any]:
        """State by operator uid; stateless operators (None) are left out, as in Flink.
        ``final``: the task finished (FLIP-147): operators with keyed state are left out too
        (a finished subtask never receives a record again; see ``chain_uids``)."""
        states = {op.uid: op.snapshot_state(checkpoint_id) for op in self._snapshotted(final)}
        return {uid: state for uid, state in states.items() if state is not None}

    def refused_state(self, exc: BaseException, codec: Any) -> BaseException:
        """``exc``, raised while a snapshot was encoded, as the heap keyed state value that
        caused it: an error naming the value's state, type and operator, and the fix
        (``state/state_errors.py``); ``exc`` itself if no keyed state value is refused
        (RocksDB backends name the value themselves as they write it)."""
        if isinstance(exc, StateEncodingError):
            return exc
        for op in self.operators:
            backend = _keyed_backend_of(op)
            if backend is None or backend.is_rocksdb:
                continue
            found = find_refused(backend, backend.state_codec or codec)
            if found is not None:
                name, value, cause, pickled = found
                where = f"operator {op.name!r} (uid {op.uid!r})"
                kind = backend._kinds.get(name)
                return op.failure(refused_state_value(name, where, value, cause, pickled, kind))
        return exc

    def _snapshotted(self, final: bool) -> list[StreamOperator]:
        if not final:
            return self.operators
        return [op for op in self.operators if _keyed_backend_of(op) is None]

    def chain_uids(self) -> list[str]:
        """The uids of the chain's operators (a source task's own first): a finished task's
        final state names them as finished."""
        return [op.uid for op in self.operators]

    def take_shared_files(self, checkpoint_id: int, final: bool = False) -> tuple[dict[str, Any], list[str]]:
        """The shared files of the chain's snapshot ``checkpoint_id`` (an operator with its own
        checkpoint files, e.g. on RocksDB, has ``take_shared_files``): new ones and references."""
        shared: dict[str, Any] = {}
        references: list[str] = []
        for op in self._snapshotted(final):
            take = getattr(op, "take_shared_files", None)
            if take is not None:
                new, refs = take(checkpoint_id)
                shared.update(new)
                references.extend(refs)
        return shared, references

    def _keyed_backends(self) -> list[Any]:
        backends = (getattr(getattr(op, "ctx", None), "keyed_backend", None) for op in self.operators)
        return [b for b in backends if b is not None]

    async def capture_state(self, checkpoint_id: int, savepoint: bool, final: bool = False) -> list[Any]:
        """At a barrier, right before ``snapshot_operators``: keyed backends that checkpoint
        incrementally capture what changed; returns their ``SharedUpload``s, which write it
        after the barrier. ``final`` (the task finished): nothing, keyed state is not kept."""
        uploads: list[Any] = []
        if final:
            return uploads
        for backend in self._keyed_backends():
            capture = getattr(backend, "capture", None)
            if capture is None:
                continue
            # a fresh slice first when the last capture piece would not fit in what is left
            await yield_point()
            if (upload := await capture(checkpoint_id, savepoint)) is not None:
                uploads.append(upload)
        for op in self.operators:  # operators' own incremental state (timers: timer_checkpoints.py)
            capture = getattr(op, "capture_shared", None)
            if capture is not None and (upload := await capture(checkpoint_id, savepoint)) is not None:
                uploads.append(upload)
        return uploads

    async def prepare_snapshot(self, checkpoint_id: int) -> None:
        """Every operator's ``prepare_snapshot_pre_barrier``, head first (sinks flush here)."""
        for op in self.operators:
            try:
                await op.prepare_snapshot_pre_barrier(checkpoint_id)
            except Exception as exc:
                raise op.failure(exc) from None

    async def finish_for_savepoint(self, checkpoint_id: int) -> None:
        """The drained savepoint of a stop-with-savepoint: every operator's ``finish``, head
        first, before the snapshot (Flink's ``endInput``/``finish`` before a terminating
        savepoint's barrier): what they flush precedes the barrier and its state is in the
        savepoint; the job ends once the savepoint completed (no record follows)."""
        for op in self.operators:
            try:
                await op.finish()
            except Exception as exc:
                raise op.failure(exc) from None

    async def halt_for_savepoint(self, checkpoint_id: int, drain: bool) -> bool:
        """The savepoint of a stop-with-savepoint: this task runs no processing-time callback
        from its barrier on (a timer or periodic watermark would emit after the barrier), until
        the savepoint is aborted (``notify_checkpoint_aborted``); a source also stops polling
        (``source_task.py``). A barrier read after its savepoint's abort was notified (it
        waited behind data while another task declined) halts nothing: False."""
        if checkpoint_id <= self.last_aborted:
            return False
        self.halted_for = checkpoint_id
        self.processing_time.hold()
        return True

    async def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        for op in self.operators:
            try:
                result = op.notify_checkpoint_complete(checkpoint_id)
                if result is not None:
                    await result
            except Exception as exc:
                raise op.failure(exc) from None

    async def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.last_aborted = max(self.last_aborted, checkpoint_id)
        if self.halted_for == checkpoint_id:  # a stop-with-savepoint failed: the job continues
            self.halted_for = None
            self.processing_time.release()
        for op in self.operators:
            try:
                op.notify_checkpoint_aborted(checkpoint_id)
            except Exception as exc:
                raise op.failure(exc) from None

    async def _start_backends(self) -> None:
        """Open the keyed backends that open off the loop (RocksDB: open and restore in worker
        threads, all of the task's at once: ``state/rocksdb_lifecycle.py``), not holding the
        job's loop budget meanwhile; before anything reads them."""
        backends = [b for b in self._keyed_backends() if getattr(b, "start_pending", False)]
        # then operators' restores that read files in worker threads (RocksDB state onto the heap)
        hooks = [h for h in (getattr(op, "start_restore", None) for op in self.operators) if h is not None]
        if not backends and not hooks:
            return
        self.budget.task_waits()
        try:
            await start_all(backends)
            for hook in hooks:
                await hook()
        finally:
            self.budget.task_wakes()

    async def _close_backends(self) -> None:
        """Close the keyed backends that close off the loop (RocksDB), at the task's end."""
        await close_all(self._keyed_backends())

    async def _finish_restores(self) -> None:
        """Decode the keyed state restored for this task's operators (read at build time), a
        frame at a time between loop budget pauses (``state/deferred_restore.py``)."""
        for backend in self._keyed_backends():
            if getattr(backend, "restore_pending", False):
                await backend.finish_restore()
                self._restored_state = True
        for op in self.operators:  # restored timers (TimerOperator.finish_restore)
            finish = getattr(op, "finish_restore", None)
            if finish is not None:
                await finish()


def _keyed_backend_of(op: StreamOperator) -> Any:
    return getattr(getattr(op, "ctx", None), "keyed_backend", None)
