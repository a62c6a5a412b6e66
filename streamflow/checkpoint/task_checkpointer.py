"""A task's side of checkpointing: the thin async driver of its BarrierHandler.

Theory of operation
-------------------
A source task is triggered by the job's :class:`CheckpointDriver` (as mail, so
between two batches): it snapshots its reader position and its chained
operators, forwards barrier n on every output channel and acknowledges. The
barrier of a stop-with-savepoint first halts the source (``halt_for_savepoint``:
it emits nothing more, and with drain the maximum watermark first); with drain
every task finishes its operators (``finish_for_savepoint``) before it
snapshots, as Flink's tasks do before a terminating savepoint's barrier.

Any other task feeds the barriers, cancel markers and ends of input of its
channels to a :class:`BarrierHandler` and carries out the actions it returns:

* ``PauseChannel`` / ``ResumeChannels`` pause the input gate's channels;
* ``SnapshotState`` snapshots the chained operators (encoded at once, so later
  records cannot leak in; keyed backends that checkpoint incrementally capture
  what changed first, and write it after the barrier: ``uploads.py``, the
  acknowledgement waiting for them) and forwards the barrier: behind the queued output
  when aligned; when unaligned, at the head of every output channel, copying
  the records it overtook as *output channel state*;
* ``PersistInput`` / ``StopPersisting`` record, as *input channel state*, the
  batches that arrive on a channel before its barrier n (they are processed
  too: they come after the snapshot point of their upstream's barrier);
* ``CheckpointDone`` acknowledges; ``AbortCheckpoint`` drops the partial
  snapshot, forwards a cancel marker and declines;
* ``StartAlignmentTimer`` asks the clock to post ``on_alignment_timer``.

The acknowledged state of a task is one entry: its operators' states by uid,
and its channel state. Restore replays the output channel state first, then
the input channel state, then new input (see ``restore.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from .. import _faults as faults
from ..clock import Clock
from ..state.state_errors import REFUSALS
from .barrier_handler import (
    AbortCheckpoint,
    BarrierHandler,
    CheckpointDone,
    PauseChannel,
    PersistInput,
    ResumeChannels,
    SnapshotState,
    StartAlignmentTimer,
    StopPersisting,
    TimeoutBase,
)
from .barrier_tracker import BarrierTracker
from .channel_types import pickle_channels
from .config import CheckpointingMode
from .events import CancelCheckpointMarker, CheckpointBarrier, StopMode
from .restore import encode_channel_state
from .uploads import SharedUpload, produce_all

if TYPE_CHECKING:
    from .driver import CheckpointDriver


_log = logging.getLogger(__name__)

class CheckpointedTask(Protocol):
    """What checkpointing needs of a runtime task (``runtime/task.py``), so this package never
    imports the runtime. ``gate`` (an ``InputGate``) only exists on tasks with inputs."""

    name: str
    is_source: bool
    finished: bool
    finished_on_restore: bool
    parallelism: int
    max_parallelism: int | None  # of its job vertex: the number of key groups (None: unknown)
    clock: Clock
    writers: list[Any]
    gate: Any
    checkpointer: TaskCheckpointer | None
    operators: list[Any]  # the chain, head first (names for errors about in-flight records)
    channel_layout: dict[str, list[Any]]  # what its channels join (runtime/channel_restore.py)

    def post(self, mail: Callable[[], Awaitable[None]]) -> None: ...
    def snapshot_operators(self, checkpoint_id: int, final: bool = False) -> dict[str, Any]: ...
    def take_shared_files(
        self, checkpoint_id: int, final: bool = False
    ) -> tuple[dict[str, Any], list[str]]: ...
    async def capture_state(
        self, checkpoint_id: int, savepoint: bool, final: bool = False
    ) -> list[SharedUpload]: ...
    def chain_uids(self) -> list[str]: ...
    def refused_state(self, exc: BaseException, codec: Any) -> BaseException: ...
    async def prepare_snapshot(self, checkpoint_id: int) -> None: ...
    async def halt_for_savepoint(self, checkpoint_id: int, drain: bool) -> bool: ...
    async def finish_for_savepoint(self, checkpoint_id: int) -> None: ...
    async def notify_checkpoint_complete(self, checkpoint_id: int) -> None: ...
    async def notify_checkpoint_aborted(self, checkpoint_id: int) -> None: ...


class TaskCheckpointer:
    def __init__(self, task: CheckpointedTask, task_id: str, driver: CheckpointDriver) -> None:
        self.task = task
        self.task_id = task_id
        self.driver = driver
        self.handler: BarrierHandler | BarrierTracker | None = None
        self.persisting: dict[int, list] = {}  # channel -> batches recorded for the pending checkpoint
        self._pending: dict[int, dict[str, Any]] = {}
        self.last_sync_ms = 0  # the last synchronous snapshot's duration (a metric)
        self._last_snapshot_id = 0  # the newest checkpoint this task snapshotted for
        if not task.is_source:
            self._attach_handler(len(task.gate.channels))

    def _attach_handler(self, num_channels: int) -> None:
        cfg = self.driver.config
        if cfg.mode is CheckpointingMode.AT_LEAST_ONCE:
            # Flink's CheckpointBarrierTracker: barriers are counted, channels are never blocked,
            # so records behind an early barrier may be replayed after a restore
            self.handler = BarrierTracker(num_channels, self.task.clock)
            return
        self.handler = BarrierHandler(
            num_channels,
            self.task.clock,
            unaligned=cfg.unaligned,
            aligned_timeout_ms=cfg.aligned_timeout_ms if cfg.unaligned else None,
            # as Flink's aligned checkpoint timeout: counted from the checkpoint's start, so a
            # barrier that waited in a backpressured queue switches to unaligned on arrival
            timeout_base=TimeoutBase.CHECKPOINT_START,
        )

    @property
    def last_alignment_ms(self) -> int:
        return (self.handler.last_alignment_duration_ms or 0) if self.handler else 0

    # -- snapshots -----------------------------------------------------------
    async def snapshot_operators(
        self, checkpoint_id: int, savepoint: bool, final: bool = False
    ) -> tuple[bytes, list[SharedUpload]]:
        """Every chained operator's state (and the source position) by uid, encoded now, and
        the uploads of the keyed backends that captured what changed (incremental).
        ``final``: the finished task's final state, without keyed state (FLIP-147)."""
        started = self.task.clock.monotonic()
        self._last_snapshot_id = max(self._last_snapshot_id, checkpoint_id)
        try:
            uploads = await self.task.capture_state(checkpoint_id, savepoint, final)
            encoded = self.driver.encode(self.task.snapshot_operators(checkpoint_id, final))
        except REFUSALS as exc:  # a keyed state value the codec refuses: named (state_errors.py)
            named = self.task.refused_state(exc, self.driver.config.codec)
            if named is exc:
                raise
            raise named from exc
        self.last_sync_ms = round((self.task.clock.monotonic() - started) * 1000)
        return encoded, uploads

    def _acknowledge(self, checkpoint_id: int, state: dict[str, Any], uploads: list[SharedUpload]) -> None:
        if uploads:
            self.driver.upload_then_acknowledge(checkpoint_id, self.task_id, state, uploads)
        else:
            self.driver.acknowledge(checkpoint_id, self.task_id, state)

    def _shared(self, checkpoint_id: int, state: dict[str, Any], final: bool = False) -> dict[str, Any]:
        """Add the snapshot's shared files (``{name: Path | bytes}``, stored with the checkpoint)
        and the names of earlier checkpoints' shared files it needs (``refs``)."""
        shared, references = self.task.take_shared_files(checkpoint_id, final)
        if shared:
            state["shared"] = shared
        if references:
            state["refs"] = references
        return state

    def _encode_records(self, channels: dict, operators: list) -> Any:
        """In-flight records, encoded now by the job's records codec: a record it refuses fails
        the task with an error naming the record's type and the operator it was in flight to/from."""
        if not channels:
            return {}
        name = repr(operators[0].name) if operators else repr(self.task.name)
        return encode_channel_state(self.driver.config.get_records_codec(), name, channels)

    def _encode_channel_state(self, state: dict[str, Any]) -> None:
        """Encode ``state["in"]``/``["out"]`` in place (and name their channels under
        ``"layout"``): the records of streams declared
        ``Types.PICKLED_BYTE_ARRAY()`` pickled first (listed under ``"pickled"``), then all
        with the job's records codec (``channel_types.py``)."""
        inp, out, listing = state["in"], state["out"], None
        if inp or out:
            state["layout"] = self.task.channel_layout  # a restore at another parallelism needs it
            inp, out, listing = pickle_channels(
                inp, out, getattr(self.task, "input_types", ()), getattr(self.task, "writer_types", ())
            )
        if listing:
            state["pickled"] = listing
        state["in"] = self._encode_records(inp, self.task.operators[:1])
        state["out"] = self._encode_records(out, self.task.operators[-1:])

    async def _forward(self, barrier: CheckpointBarrier, unaligned: bool) -> dict[int, dict[int, list]]:
        out: dict[int, dict[int, list]] = {}
        for w, writer in enumerate(self.task.writers):
            if not unaligned:
                await writer.broadcast_event(barrier)
                continue
            for c, channel in enumerate(writer.channels):
                overtaken = channel.put_priority(barrier)
                if overtaken:
                    out.setdefault(w, {})[c] = overtaken
        return out

    # -- sources -------------------------------------------------------------
    async def trigger(self, barrier: CheckpointBarrier) -> None:
        """Mail from the driver (the task is in the coordinator's trigger plan).

        A source snapshots, forwards the barrier and acknowledges. A task whose upstream
        tasks all finished (FLIP-147) gets the barrier just before each channel's end of
        input, after the data still queued, and handles it as if it had arrived there; a
        channel whose end was already read counts as delivered. A task that finished
        meanwhile acknowledges with its final state instead (``finish_checkpointing``), and so
        does a task deployed finished (it never snapshots a running state)."""
        if self.task.finished or self.task.finished_on_restore:
            return
        if not self.task.is_source:
            for ch in self.task.gate.channels:
                ch.put_before_end(barrier)
            self.task.gate.wake()
            return
        if barrier.stop is not None:  # a stop-with-savepoint: nothing is emitted after the barrier
            drain = barrier.stop is StopMode.TERMINATE
            if await self.task.halt_for_savepoint(barrier.checkpoint_id, drain) and drain:
                await self.task.finish_for_savepoint(barrier.checkpoint_id)
        await self.task.prepare_snapshot(barrier.checkpoint_id)
        ops, uploads = await self.snapshot_operators(barrier.checkpoint_id, barrier.is_savepoint)
        unaligned = barrier.alignment.value == "unaligned" and not barrier.is_savepoint
        out = await self._forward(barrier, unaligned)
        if faults.ARMED:
            faults.point("snapshot", barrier.checkpoint_id)
        state = {"ops": ops, "in": {}, "out": out, "sync_ms": self.last_sync_ms, "alignment_ms": 0}
        self._encode_channel_state(state)
        self._acknowledge(barrier.checkpoint_id, self._shared(barrier.checkpoint_id, state), uploads)

    async def finish_checkpointing(self) -> Any:
        """The task finished: hand its final state over (FLIP-147); returns a future that
        resolves once a completed checkpoint holds it, so its sinks have committed. The final
        state holds the operators' non-keyed state (sources' positions, sinks' pending commits)
        and names the chain's uids as finished; keyed state is left out: every input of a
        finished subtask has ended, so no record reaches its keys again, and a restore deploys
        it finished (``restore.py``)."""
        final: dict[str, Any] = {}
        if self.driver.enabled:
            self._decline_unfinished_snapshots()
            # its snapshots' acknowledgements reach the coordinator before its final state: a
            # checkpoint this task snapshotted for holds that snapshot (consistent with the barrier
            # it forwarded), never the final state, which holds records sent after that barrier
            await self.driver.acknowledgements_posted(self.task_id)
            label = self.driver.final_snapshot_id(self.task_id, self._last_snapshot_id)
            # FLIP-147: the checkpoints holding this state mark the chain's operators finished
            # and hold no keyed state of theirs; a restore deploys this subtask finished
            ops, uploads = await self.snapshot_operators(label, False, final=True)
            if faults.ARMED:  # the final state is a snapshot too (a sink pre-committed its last epoch)
                faults.point("snapshot", label)
            final = self._shared(label, {"ops": ops, "in": {}, "out": {}}, final=True)
            final["finished"] = self.task.chain_uids()
            if uploads:  # nothing changes any more: written now, referenced by later checkpoints
                shared, references = await produce_all(uploads)
                final["shared"] = {**(final.get("shared") or {}), **shared}
                final["refs"] = sorted({*(final.get("refs") or ()), *references})
        else:
            # no periodic checkpoints: nothing waits to be committed (a sink committed in its
            # finish()), but a savepoint taken later must still name the chain finished, or its
            # restore would run a finished source again and duplicate its records (FLIP-147)
            final = {"ops": self.driver.encode({}), "in": {}, "out": {}, "finished": self.task.chain_uids()}
        return self.driver.task_finished(self.task_id, final)

    def _decline_unfinished_snapshots(self) -> None:
        """A snapshot taken at a barrier whose alignment never completed (every channel ended
        first) cannot be acknowledged: its checkpoint is declined, logged with the cause."""
        for cid in sorted(self._pending):
            _log.warning(
                "task %s finished before checkpoint %d's alignment completed: declining it",
                self.task_id, cid,
            )  # fmt: skip
            self.driver.decline(cid, self.task_id, "task finished during alignment", counts=False)
        self._pending.clear()
        self.persisting = {}

    # -- input tasks ---------------------------------------------------------
    async def on_event(self, channel: int, event: Any) -> None:
        assert self.handler is not None
        if type(event) is CheckpointBarrier:
            await self._run(self.handler.on_barrier(channel, event))
        elif type(event) is CancelCheckpointMarker:
            await self._run(self.handler.on_cancel_marker(channel, event))
        else:
            raise TypeError(f"task {self.task.name!r}: unexpected event {event!r} on channel {channel}")

    async def on_end_of_input(self, channel: int) -> None:
        if self.handler is not None:
            await self._run(self.handler.on_end_of_input(channel))

    async def on_alignment_timer(self) -> None:
        if self.handler is not None and not self.task.finished:
            await self._run(self.handler.on_alignment_timer())

    def record_input(self, channel: int, item: tuple) -> None:
        recorded = self.persisting.get(channel)
        if recorded is not None:
            recorded.append(item)

    async def _run(self, actions: list[Any]) -> None:
        task = self.task
        for action in actions:
            kind = type(action)
            if kind is PauseChannel:
                task.gate.pause(action.channel)
                if faults.ARMED and self.handler is not None:
                    faults.point("alignment", self.handler.pending_checkpoint_id or 0)
            elif kind is ResumeChannels:
                task.gate.resume_all()
            elif kind is SnapshotState:
                cid = action.barrier.checkpoint_id
                if action.barrier.stop is not None:  # a stop-with-savepoint: nothing after it
                    drain = action.barrier.stop is StopMode.TERMINATE
                    if await task.halt_for_savepoint(cid, drain) and drain:  # finish, then snapshot
                        await task.finish_for_savepoint(cid)
                await task.prepare_snapshot(cid)
                ops, uploads = await self.snapshot_operators(cid, action.barrier.is_savepoint)
                out = await self._forward(action.barrier, action.unaligned)
                self._pending[cid] = self._shared(cid, {
                    "ops": ops, "in": {}, "out": out,
                    "sync_ms": self.last_sync_ms, "uploads": uploads,
                })  # fmt: skip
                if faults.ARMED:
                    faults.point("snapshot", cid)
            elif kind is PersistInput:
                self.persisting = {ch: [] for ch in action.channels}
            elif kind is StopPersisting:
                recorded = self.persisting.pop(action.channel, [])
                if recorded and action.checkpoint_id in self._pending:
                    self._pending[action.checkpoint_id]["in"][action.channel] = recorded
            elif kind is CheckpointDone:
                self.persisting = {}
                state = self._pending.pop(action.checkpoint_id, None)
                if state is not None:
                    uploads = state.pop("uploads")
                    state["alignment_ms"] = self.last_alignment_ms
                    self._encode_channel_state(state)
                    self._acknowledge(action.checkpoint_id, state, uploads)
            elif kind is AbortCheckpoint:
                self.persisting = {}
                # a pending older checkpoint is dropped with it (Flink's abortInternal)
                for cid in [c for c in self._pending if c <= action.checkpoint_id]:
                    del self._pending[cid]
                for writer in task.writers:
                    await writer.broadcast_event(CancelCheckpointMarker(action.checkpoint_id))
                # a newer barrier or an upstream's cancel marker only echoes another cause,
                # which is counted where it happened (Flink does not count these declines)
                self.driver.decline(action.checkpoint_id, self.task_id, action.reason.value, counts=False)
            elif kind is StartAlignmentTimer:
                task.clock.call_at_ms(action.deadline_ms, lambda: task.post(self.on_alignment_timer))
            else:  # pragma: no cover - the handler's action set is closed
                raise TypeError(f"unknown barrier handler action {action!r}")
