"""A task runs one chain of operators for one subtask (Flink's StreamTask).

Theory of operation
-------------------
A task is one coroutine. It owns its operators and everything that may call
into them, so operator code never runs concurrently with itself:

* input: a source task (``source_task.py``) polls its :class:`SourceReader`; any other task polls
  its :class:`InputGate`. A batch goes straight into the chain's head; the
  chain ends in :class:`ChannelWriter` objects or in sinks.
* control events from channels: watermarks and watermark status go through
  the task's :class:`WatermarkValve` (one per task, over all input channels);
  end of input closes a channel; checkpoint events go to the checkpoint
  participant.
* mail: processing-time callbacks and requests from the job (checkpoint
  triggers, completion notices) run between batches, never inside one.

When nothing is ready the task waits on a single wake-up future that data,
mail and the clock can resolve. A long run of ready input lets the event loop
run whenever the job's :class:`LoopBudget` (``loop_budget.py``, shared by all
tasks of a job) says its slice is used up: checked after every input batch,
control event and mail run, and after every batch an operator emits (the
chain's outputs hold the budget too), so an embedding application keeps being
served.

Lifecycle: setup and ``initialize_state`` happen when the job is built; then
``open`` (tail to head, so consumers are ready first), the run, ``finish``
(head to tail, normal end only), ``close`` for every opened operator and
``dispose`` for every operator, on every path: normal end, failure and
cancellation. The first error wins; later ones are attached as notes.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from ..clock import Clock
from .channel import InputGate, Waker
from .events import (
    MAX_WATERMARK,
    EndOfInput,
    Watermark,
    WatermarkStatus,
)
from .gc_policy import GC_POLICY, collect_young_when_idle
from .input_selection import InputSelection
from .loop_budget import LoopBudget, bind
from .operator import StreamOperator, TwoInputOperator, attribute_error
from .processing_time import ProcessingTimeService
from .start_gate import StartGate
from .task_state import ChainState
from .watermark_valve import WatermarkValve
from .writer import ChannelWriter

if TYPE_CHECKING:
    from ..checkpoint.task_checkpointer import TaskCheckpointer

_log = logging.getLogger("streamflow.task")
Mail = Callable[[], Awaitable[None]]


class Task(ChainState):
    def __init__(
        self,
        name: str,
        operators: list[StreamOperator],
        writers: list[ChannelWriter],
        clock: Clock,
        batch_size: int,
        budget: LoopBudget | None = None,
    ) -> None:
        self.name = name
        self.task_id = ""  # "<head uid>#<subtask>" in a job (execution.py)
        self.operators = operators  # topological order, head first
        self.writers = writers
        self.clock = clock
        self.batch_size = batch_size
        # shared by the tasks of a job; a task built alone gets its own (the default budget)
        self.budget = budget if budget is not None else LoopBudget(10.0, clock)
        self.mailbox: deque[Mail] = deque()
        self.waker: Waker | InputGate = Waker()
        self.processing_time = ProcessingTimeService(clock, self.wake)
        self.checkpointer: TaskCheckpointer | None = None
        self.start_gate: StartGate | None = None  # shared by the tasks of a job (start_gate.py)
        self._opened: list[StreamOperator] = []
        self._sealers: list[Callable[[], None]] = []  # keyed backends' seal_dirty (see _seal_dirty)
        self._restored_state = False  # decoded restored keyed state (_finish_restores)
        self.finished = False
        self.scheduled = True  # False while a batch job's region waits for its inputs (regions.py)
        self.finished_on_restore = False  # had finished in the restored checkpoint (FLIP-147)
        self.is_source = False
        self.parallelism = 1  # of the job vertex this task belongs to
        self.max_parallelism: int | None = None  # of that vertex (its key groups), for checkpoints
        self.restored_out: dict[int, dict[int, list]] = {}  # output channel state to re-send
        # in-flight data redistributed at a rescale (channel_restore.py): (operator, input, batches)
        self.restored_replay: list[tuple[StreamOperator, int, list]] = []
        self.channel_layout: dict[str, list[Any]] = {"in": [], "out": []}  # (channel_restore.py)
        self.writer_types: list[Any] = []  # the declared record type of each writer's stream (or None)
        self._finish_waiter: asyncio.Future[None] | None = None  # see _wait_for_final_checkpoint
        # metrics (read by runtime/job_metrics.py): the chain's outputs, loop time spent waiting
        # for input (idle) and when the run started; time blocked on full output channels is
        # counted by the channels themselves
        self.outputs: list[tuple[Any, Any]] = []  # (StreamNode, MeteredOutput), head first
        self.idle_s = 0.0
        self.started_s: float | None = None
        self.ended_s: float | None = None

    async def _wait_for_final_checkpoint(self) -> None:
        """Hand the final state to the checkpoint driver; serve mail until it is committed."""
        cp = self.checkpointer
        if cp is None:
            return
        released = await cp.finish_checkpointing()
        loop = asyncio.get_running_loop()
        while not released.done():
            if self.mailbox or self.processing_time.has_due():
                await self._run_mail()
                continue
            # a future made here, resolved by wake(): a wake-up between this line and the
            # await cannot be lost (Waker.wait() only registers once its task first runs)
            self._finish_waiter = waiter = loop.create_future()
            self.budget.task_waits()
            try:
                await asyncio.wait({waiter, released}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._finish_waiter = None
                self.budget.task_wakes()
        await self._run_mail()

    def wake(self) -> None:
        self.waker.wake()
        waiter = self._finish_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def post(self, mail: Mail) -> None:
        """Run ``mail`` in this task between batches (Flink's mailbox)."""
        self.mailbox.append(mail)
        self.wake()

    async def _run_mail(self) -> None:
        budget = self.budget
        while self.mailbox:
            await self.mailbox.popleft()()
            if budget.due():
                await budget.pause()
        if self.processing_time.has_due():
            await self.processing_time.run_due()
            if budget.due():
                await budget.pause()

    def has_mail(self) -> bool:
        return bool(self.mailbox) or self.processing_time.has_due()

    # -- lifecycle ---------------------------------------------------------

    def _seal_dirty(self) -> None:
        """A loop budget chore (and, the sealing only, before each idle wait): keyed backends
        move aside dirty-key dicts grown past a few thousand keys, so none grows into a long
        resize (``KeyedStateBackend.seal_dirty``); then a young-generation collection, so the
        next one never has more than a slice's objects to look at. (Objects a free list hands
        out are tracked without counting towards the collector's threshold: a keyed job that
        replaces a tuple per record let generation 0 grow to hundreds of thousands of them
        between two automatic collections, 15-20 ms of CPU each at 1M keys; at every pause,
        1-2 ms at most. Skipped when the application turned the collector off.)"""
        for seal in self._sealers:
            seal()
        if gc.isenabled():
            gc.collect(0)

    async def _idle(self, waiter: Awaitable[None]) -> None:
        """Wait for input or mail, counting the time as idle (only when a task has to wait);
        the last task of the job to wait collects the young garbage first, when no record of
        the job is in flight (``gc_policy.collect_young_when_idle``)."""
        for seal in self._sealers:
            seal()
        loop = asyncio.get_running_loop()
        started = loop.time()
        self.budget.task_waits()
        if not self.budget.running:
            collect_young_when_idle()
        try:
            await waiter
        finally:
            self.budget.task_wakes()
            self.idle_s += loop.time() - started
        # anyio cancels a task only while its waiter is pending; a waiter another task resolves
        # every time before anyio looks (a source fed by its reader's pump, writing a batch job's
        # blocking result that never blocks) would never be cancelled: look here (one attribute
        # read while the job runs; anyio's own check costs microseconds)
        scope = self.budget.job_scope
        if scope is not None and scope.cancel_called:
            await anyio.lowlevel.checkpoint_if_cancelled()

    async def run(self) -> None:
        error: BaseException | None = None
        self.started_s = asyncio.get_running_loop().time()
        self.budget.task_started()
        bind(self.budget)  # long steps of this task yield through the job's budget
        try:
            await self._start_backends()  # RocksDB: opened and restored in worker threads
            if self.finished_on_restore:
                await self._run_finished_on_restore()
                return
            await self._finish_restores()
            for op in reversed(self.operators):
                self._opened.append(op)
                await op.open()
            if self._keyed_backends():  # the tables exist now: freeze them (gc_policy.py)
                tables = [t for b in self._keyed_backends() for t in getattr(b, "heap_tables", list)()]
                GC_POLICY.task_state_ready(self.name, self._restored_state, tables)
            sealers = (getattr(b, "seal_dirty", None) for b in self._keyed_backends())
            self._sealers = [s for s in sealers if s is not None]
            if self._sealers:
                self.budget.chores.append(self._seal_dirty)
            await self._all_opened()
            await self._start()
            await self._replay_in_flight()
            for w, per_channel in self.restored_out.items():
                for c, batches in per_channel.items():
                    for batch in batches:
                        await self.writers[w].channels[c].put(tuple(batch))
            await self._run_loop()
            for op in self.operators:
                await op.finish()
            await self._end()
            self.finished = True
            _log.debug("task %s finished", self.name, extra={"task": self.name})
            await self._wait_for_final_checkpoint()
        except BaseException as exc:
            error = exc
            if isinstance(exc, Exception):
                _log.warning("task %s failed: %r", self.name, exc, extra={"task": self.name})
            raise
        finally:
            self.ended_s = asyncio.get_running_loop().time()
            self.budget.task_waits()  # ended: no longer holds the loop
            if self._sealers:
                self.budget.chores.remove(self._seal_dirty)
            with anyio.CancelScope(shield=True):
                await self._cleanup(error)

    async def _replay_in_flight(self) -> None:
        """In-flight records redistributed at a rescale, into their operators before any input."""
        for op, input_index, batches in self.restored_replay:
            process = op.process_batch2 if input_index == 1 else op.process_batch  # type: ignore[attr-defined]
            for records, timestamps in batches:
                await process(list(records), None if timestamps is None else list(timestamps))
                if self.budget.due():
                    await self.budget.pause()
        self.restored_replay = []

    async def _run_finished_on_restore(self) -> None:
        """A task restored from a checkpoint in which it had finished (FLIP-147; Flink's
        ``FinishedOnRestoreOperatorChain``): its operators open (a sink commits what its
        restored state holds pending) but never process, finish or start a source; its outputs
        get the maximum watermark and their end, as when it finished; then it hands its final
        state over like any finished task."""
        _log.info("task %s had finished in the restored checkpoint: it stays finished", self.name)
        for op in reversed(self.operators):
            self._opened.append(op)
            await op.open()
        await self._all_opened()
        for w in self.writers:
            await w.process_watermark(Watermark(MAX_WATERMARK))
        await self._end()
        self.finished = True
        await self._wait_for_final_checkpoint()

    async def _all_opened(self) -> None:
        """This task's operators have opened: wait until every task of the job has
        (start_gate.py), not holding the job's loop budget meanwhile."""
        if self.start_gate is None:
            return
        self.budget.task_waits()
        try:
            await self.start_gate.opened()
        finally:
            self.budget.task_wakes()

    async def _cleanup(self, error: BaseException | None) -> None:
        self.processing_time.cancel_all()
        late: list[BaseException] = []
        for op in list(self._opened):
            try:
                await op.close()
            except Exception as exc:
                late.append(exc)
        self._opened.clear()
        try:
            await self._stop()
        except Exception as exc:
            late.append(exc)
        try:  # RocksDB: closed in worker threads (each after its thread work still running)
            await self._close_backends()
        except Exception as exc:
            late.append(exc)
        for op in self.operators:
            try:
                op.dispose()
            except Exception as exc:
                late.append(attribute_error(exc, f"operator {op.name!r} dispose()"))
        if late:
            if error is None:
                raise late[0]
            for failure in late:
                error.add_note(f"streamflow: also failed while cleaning up: {failure!r}")

    async def _start(self) -> None:
        pass

    async def _stop(self) -> None:
        pass

    async def _run_loop(self) -> None:
        raise NotImplementedError

    async def _end(self) -> None:
        for w in self.writers:
            await w.end_of_input()


class InputTask(Task):
    """Reads an input gate (one channel per upstream subtask) into the chain head."""

    def __init__(self, name: str, gate: InputGate, input_of_channel: list[int], **kw: Any) -> None:
        super().__init__(name, **kw)
        self.waker = gate
        self.gate = gate
        self.input_of_channel = input_of_channel  # 0, or 1 for the second input of connect()
        self.valve = WatermarkValve(len(gate.channels))
        self.open_channels = len(gate.channels)
        self.selection = InputSelection(gate, input_of_channel)  # which inputs are read; end_input
        self.records_in = 0
        self.restored_in: dict[int, list] = {}  # input channel state to replay first
        self.input_types: list[Any] = []  # the declared record type of each channel's stream (or None)

    async def _run_loop(self) -> None:
        gate, head = self.gate, self.operators[0]
        second = head.process_batch
        if isinstance(head, TwoInputOperator):
            second = head.process_batch2
        elif 1 in self.input_of_channel:
            raise TypeError(f"task {self.name!r}: operator {head.name!r} has no second input")
        process = [second if i == 1 else head.process_batch for i in self.input_of_channel]
        for channel, batches in sorted(self.restored_in.items()):
            for records, timestamps in batches:
                await process[channel](records, timestamps)
        cp = self.checkpointer
        budget = self.budget
        while self.open_channels:
            if self.mailbox or self.processing_time.has_due():
                await self._run_mail()
            polled = gate.poll()
            if polled is None:
                if not self.has_mail():
                    await self._idle(gate.wait())
                continue
            channel, item = polled
            if type(item) is tuple:
                self.records_in += len(item[0])
                if cp is not None and cp.persisting:
                    cp.record_input(channel, item)
                await process[channel](item[0], item[1])
            else:
                await self._on_event(channel, item)
            if budget.due():
                await budget.pause()
        if self.valve.last_output_watermark < MAX_WATERMARK:
            if self.valve.is_idle:
                await head.process_watermark_status(WatermarkStatus.ACTIVE)
            await head.process_watermark(Watermark(MAX_WATERMARK))

    async def _on_event(self, channel: int, event: Any) -> None:
        head = self.operators[0]
        if type(event) is Watermark:
            outputs = self.valve.input_watermark(channel, event.timestamp)
        elif type(event) is WatermarkStatus:
            outputs = self.valve.input_status(channel, event)
        elif type(event) is EndOfInput:
            self.open_channels -= 1
            self.gate.pause(channel)
            if self.checkpointer is not None:
                await self.checkpointer.on_end_of_input(channel)
            if self.valve.channel_state(channel).status is WatermarkStatus.IDLE:
                outputs = self.valve.input_status(channel, WatermarkStatus.ACTIVE)
                outputs += self.valve.input_watermark(channel, MAX_WATERMARK)
            else:
                outputs = self.valve.input_watermark(channel, MAX_WATERMARK)
            ended = self.selection.channel_ended(channel)  # the last of an input: the others are read
            if ended is not None and hasattr(head, "end_input"):
                await head.end_input(ended)  # Flink's BoundedMultiInput.endInput(inputId)
        elif self.checkpointer is not None:
            await self.checkpointer.on_event(channel, event)
            return
        else:
            raise TypeError(f"task {self.name!r}: unexpected event {event!r} on channel {channel}")
        for out in outputs:
            if isinstance(out, Watermark):
                await head.process_watermark(out)
            else:
                await head.process_watermark_status(out)
