"""The collect sink: streams a job's records to one consumer in the same process
(``execute_and_collect``, ``execute_and_collect_async``), exactly once with checkpointing.

Theory of operation
-------------------
Every subtask writes into one bounded channel that the consumer reads (``take``/``drain``),
so a slow consumer backpressures the job. The subtasks take turns (``lock``): a channel has
one writer's wake-up slot, and with two writers waiting for room at once the first one's
wake-up was lost.

*With periodic checkpoints* the consumer sees a record only once a checkpoint covering it has
completed (Flink's ``CheckpointedCollectResultBuffer`` does the same): a failover replays what
came after the checkpoint it restores, and a record handed out before the failure would come
again. Per subtask:

* records accumulate in the current *epoch*; ``snapshot_state(n)`` moves the epoch to the
  sink's ``held[subtask][n]`` (on the :class:`QueueSink` object, which outlives the job's
  restarts in this process) and stores only ``n`` in the checkpoint;
* ``notify_checkpoint_complete(n)`` hands every held epoch up to ``n`` to the consumer, in
  checkpoint order; an aborted checkpoint's epoch waits for the next completed one;
* on a restart, ``open`` releases the held epochs up to the restored checkpoint ``m`` (they
  precede it: the restore does not replay them; their notification may have been lost) and
  drops the later ones and the unfinished epoch (the restore replays them). A restore from a
  checkpoint older than what was already handed out (the newest was damaged) cannot take
  records back: logged as a warning naming the checkpoints whose records may repeat;
* ``finish`` (end of input) only marks the end: the final checkpoint (FLIP-147) releases the
  last epoch, and the subtask's end of input follows it. A subtask deployed finished after a
  restore releases what it held and ends at once.

The held records live in memory only, never in checkpoint files (the consumer is in this
process; records need no codec). A job restored in another process from a savepoint starts
with nothing held.

*Without periodic checkpoints* records go to the consumer at once; a restart replays the
job from its sources and the records already handed out repeat (at-least-once), logged as a
warning when the subtask restarts.

*In a batch job whose restart strategy may restart it* (no checkpoints there) a subtask holds
the records of its attempt, and the job hands them to the consumer, then the subtask's end,
once every task has finished (``OperatorContext.job_end``): Flink's collect iterator makes a
batch job's results visible only as the job ends and discards a restarted sink's earlier
results (``CollectResultIterator``, ``UncheckpointedCollectResultBuffer.sinkRestarted``). The
records of a failed attempt, held by its discarded operator, never reach the consumer, whether
only its pipelined region restarts (``runtime/regions.py``, which drops a failed attempt's
job-end actions) or, with ``ALL_EXCHANGES_PIPELINED``, the whole job (a new execution, new
job-end actions): exactly once. The held records are kept as a blocking result is
(``runtime/blocking_result.py``: in the job's ``streamflow.blocking-results.memory``, spilled to
a temporary file beyond it), and dropped when a failed attempt's operator closes.

The consumer's view ends when every subtask (``parallelism``, counted by subtask index, so a
restarted subtask's end counts once) has ended, or the job has finished or failed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..runtime.channel import Channel, InputGate
from ..runtime.operator import StreamOperator
from .base import Sink

if TYPE_CHECKING:
    from ..runtime.job import JobClient

__all__ = ["QueueSink"]

log = logging.getLogger(__name__)


class _Ended:
    """A subtask's end of input in the consumer's channel."""

    __slots__ = ("subtask",)

    def __init__(self, subtask: int) -> None:
        self.subtask = subtask


class QueueSink(Sink):
    """Streams records to one async consumer through a bounded channel (module docstring)."""

    def __init__(self, capacity: int = 4096) -> None:
        self._channel = Channel(capacity, "collect")
        self._gate = InputGate([self._channel])
        self.lock = asyncio.Lock()
        self.parallelism: int | None = None  # set when a subtask opens
        self.held: dict[int, dict[int, list[Any]]] = {}  # subtask -> checkpoint id -> records
        self.released: dict[int, int] = {}  # subtask -> newest checkpoint id handed out
        self.started: set[int] = set()  # subtasks opened at least once (restarts are logged)
        self._ended: set[int] = set()  # subtasks whose end take() has seen
        self._watching = False  # wait_ready() wakes up when the job ends
        self._blocked = False  # a writer waits for room in the channel

    def create_operator(self, name: str) -> StreamOperator:
        return _QueueSinkOperator(name, self)

    async def put(self, item: Any) -> None:
        async with self.lock:
            channel = self._channel
            size = channel.size
            if size and size + (len(item[0]) if type(item) is tuple else 1) > channel.capacity:
                # this put waits for room (the channel's rule; it has no byte budget): a
                # consumer waiting for a full step (``wait_ready``) takes what is queued now
                self._blocked = True
                self._gate.wake()
            try:
                await channel.put(item)
            finally:
                self._blocked = False

    def _open(self) -> bool:
        return self.parallelism is None or len(self._ended) < self.parallelism

    def _ended_item(self, item: Any) -> None:
        self._ended.add(item.subtask)

    async def wait_ready(self, client: JobClient, at_least: int, linger_s: float = 0.01) -> None:
        """Return once the queued records make a step for :meth:`take_ready_lists`: ``at_least`` of
        them, or a writer waits for room, or the job has ended, or ``linger_s`` has passed since
        records were first seen queued. Takes nothing: while the consumer is not running the
        loop, the job cannot run ahead of what the channel holds."""
        job = client._task
        channel = self._channel
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        timer: asyncio.TimerHandle | None = None
        try:
            while not (channel.size >= at_least or self._blocked or job.done()):
                if channel.size and timer is None:
                    deadline = loop.time() + linger_s
                    timer = loop.call_at(deadline, self._gate.wake)
                elif deadline is not None and loop.time() >= deadline:
                    return
                self._watch(job)
                await self._gate.wait_notified()
        finally:
            if timer is not None:
                timer.cancel()

    def take_ready_lists(self, client: JobClient) -> list[list[Any]] | None:
        """What is queued now: the queued record lists themselves, in order, not joined (never
        modified here: the caller only reads them); taking them makes room (the writers resume
        when the loop runs again). ``None`` once every writer has ended and nothing is left.
        Raises the job's error once the records before it were taken."""
        lists: list[list[Any]] = []
        poll = self._gate.poll
        while self._open():
            polled = poll()
            if polled is None:
                break
            item = polled[1]
            if type(item) is tuple:
                if item[0]:
                    lists.append(item[0])
            else:
                self._ended_item(item)
        if lists:
            return lists
        if not self._open():
            return None
        job = client._task
        if job.done():
            job.result()  # raises the job's error
            return None
        return lists

    async def drain(self, client: JobClient) -> AsyncIterator[Any]:
        job = client._task
        while self._open():
            polled = self._gate.poll()
            if polled is None:
                if job.done():
                    job.result()  # raises the job's error
                    return
                self._watch(job)
                await self._gate.wait()
                continue
            item = polled[1]
            if type(item) is tuple:
                for record in item[0]:
                    yield record
            else:
                self._ended_item(item)

    def _watch(self, job: asyncio.Future[Any]) -> None:
        if not self._watching:
            self._watching = True
            job.add_done_callback(lambda _t: self._gate.wake())


class _QueueSinkOperator(StreamOperator):
    """One subtask's writer (module docstring)."""

    def __init__(self, name: str, sink: QueueSink) -> None:
        super().__init__(name)
        self.sink = sink
        self._epoch: list[Any] = []
        self._finished = False  # finish() ran: the end follows the last release
        self._end_sent = False
        self._restored: dict[str, Any] | None = None
        self._exactly_once = False
        self._hold: Any = None  # a batch job's attempt: a BlockingResult (module doc)
        self._held_to_job_end = False  # finished: the job's end hands the held records out
        self._handed_out = 0  # of the held batches, by the job's end (_hand_out)

    def initialize_state(self, restored: Any | None) -> None:
        restored = getattr(restored, "own", restored)
        self._restored = dict(restored) if isinstance(restored, dict) else None

    async def open(self) -> None:
        await super().open()
        sink, me = self.sink, self.ctx.subtask_index
        sink.parallelism = self.ctx.parallelism
        self._exactly_once = self.ctx.checkpointing
        restarted = me in sink.started
        sink.started.add(me)
        if self.ctx.batch and self.ctx.restarts and not self._exactly_once:
            new_buffer = self.ctx.new_buffer
            self._hold = new_buffer(f"{self.name}[{me}] held") if new_buffer is not None else _ListBuffer()
            if restarted:
                log.info(
                    "%s[%d]: restarted; the records of its failed attempt were held, never collected: "
                    "they are dropped", self.name, me,
                )  # fmt: skip
            return
        if not self._exactly_once:
            if restarted:
                log.warning(
                    "%s[%d]: restarted without periodic checkpoints: the job replays from its "
                    "sources and records already collected repeat (at-least-once); enable "
                    "checkpointing for exactly-once collect",
                    self.name,
                    me,
                )
            return
        restored = self._restored
        upto = int(restored["checkpoint"]) if restored is not None else None
        held = sink.held.pop(me, {})
        dropped = sum(len(records) for cid, records in held.items() if upto is None or cid > upto)
        if restarted:
            log.info(
                "%s[%d]: restored from %s: %d held records of later checkpoints dropped (the restore "
                "replays them)",
                self.name,
                me,
                f"checkpoint {upto}" if upto is not None else "no checkpoint",
                dropped,
            )
        released = sink.released.get(me)
        if released is not None and (upto is None or upto < released):
            log.warning(
                "%s[%d]: restored from %s, older than checkpoint %d whose records were already "
                "collected: records of the checkpoints in between may repeat",
                self.name,
                me,
                f"checkpoint {upto}" if upto is not None else "no checkpoint",
                released,
            )
        if upto is not None:
            sink.held[me] = {cid: records for cid, records in held.items() if cid <= upto}
            await self._release(upto)
            if restored is not None and restored.get("finished"):  # deployed finished: no finish()
                await sink.put(_Ended(me))

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if self._hold is not None:
            await self._hold.put((records, None))
        elif self._exactly_once:
            self._epoch += records
        else:
            await self.sink.put((records, None))

    def snapshot_state(self, checkpoint_id: int) -> Any | None:
        if not self._exactly_once:
            return None
        if self._epoch:
            self.sink.held.setdefault(self.ctx.subtask_index, {})[checkpoint_id] = self._epoch
            self._epoch = []
        return {"subtask": self.ctx.subtask_index, "checkpoint": checkpoint_id, "finished": self._finished}

    async def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if not self._exactly_once:
            return
        await self._release(checkpoint_id)
        me = self.ctx.subtask_index
        if self._finished and not self._end_sent and not self._epoch and not self.sink.held.get(me):
            self._end_sent = True
            await self.sink.put(_Ended(me))

    async def _release(self, checkpoint_id: int) -> None:
        me, sink = self.ctx.subtask_index, self.sink
        held = sink.held.get(me, {})
        for cid in sorted(cid for cid in held if cid <= checkpoint_id):
            await sink.put((held.pop(cid), None))
            sink.released[me] = max(cid, sink.released.get(me, cid))

    async def finish(self) -> None:
        if self._exactly_once:
            self._finished = True  # the final checkpoint releases the last epoch, then the end
            return
        if self._hold is None:
            await self.sink.put(_Ended(self.ctx.subtask_index))
            return
        self._held_to_job_end = True  # the attempt succeeded: its records go out at the job's end
        if self.ctx.job_end is None:  # (outside an Execution: now)
            await self._hand_out()
        else:
            self.ctx.job_end.append(self._hand_out)

    async def _hand_out(self) -> None:
        """The held records, then this subtask's end; once: a retry of the job end after a
        failure part way (reading the spilled hold back, say) skips the batches already handed
        out, and repeats nothing after the hand-out completed."""
        hold = self._hold
        if hold is None or hold.released:
            return
        for n, item in enumerate(hold.read()):
            if n < self._handed_out:
                continue  # handed out before the failure the job end is retried after
            await self.sink.put(item)
            self._handed_out = n + 1
        hold.release()
        await self.sink.put(_Ended(self.ctx.subtask_index))

    async def close(self) -> None:
        if self._hold is not None and not self._held_to_job_end:  # a failed attempt's: dropped
            self._hold.release()
        await super().close()


class _ListBuffer:
    """The held records of a subtask run outside an Execution (no job memory budget)."""

    def __init__(self) -> None:
        self._items: list[tuple[list[Any], None]] = []
        self.released = False

    async def put(self, item: tuple[list[Any], None]) -> None:
        self._items.append(item)

    def read(self) -> list[tuple[list[Any], None]]:
        return self._items

    def release(self) -> None:
        self._items = []
        self.released = True
