"""The task of a source chain: it polls a :class:`SourceReader` and pushes into the chain.

Theory of operation
-------------------
A :class:`SourceTask` is a :class:`Task` (``task.py``) whose input is a reader instead of an
input gate. Each poll returns a batch of records (with or without timestamps), a watermark,
a watermark status, ``None`` (nothing now: wait for a wake-up or mail) or ``END``; mail runs
between polls. A bounded source ends with the maximum watermark, so every window fires.

A reader's watermarks and statuses reach the chain through :class:`SourceWatermarkOutput`,
Flink's ``WatermarkToDataOutput`` (flink-streaming-java,
``api/operators/source/WatermarkToDataOutput.java``), the output of every FLIP-27 source:

* a watermark passes only if it is above every watermark passed before (the operators
  chained to a source have no valve to drop one that goes back, and those behind a channel
  would drop it anyway);
* a watermark of an idle output first marks it ACTIVE (else the valves downstream, which
  ignore watermarks on an idle channel, would drop it);
* IDLE and ACTIVE pass only when they change the output's status.

Watermark alignment (``watermark_alignment.py``) follows what passes.

Stop-with-savepoint (Flink's FLIP-34 synchronous savepoint, ``SourceOperator.stop``): the
savepoint's trigger halts the source (``halt_for_savepoint``) before it snapshots and emits the
barrier: from then on it polls nothing, serving mail only, so no record follows the barrier
anywhere in the job. With drain (``StopMode.TERMINATE``) it first emits the maximum watermark:
every event-time timer and window downstream fires, and its output precedes the barrier (then
every task finishes its operators before it snapshots: ``task_checkpointer.py``). When
the savepoint completes the job ends (``JobClient.stop_with_savepoint``); when it is aborted a
suspended source polls again (Flink: the job continues), while a drained one fails its task,
as Flink fails a drained job over (its event time already reached the end).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..connectors.base import DEAD_LETTER, END, DeadLetter, MalformedRecordError, SourceReader
from ..errors import StreamflowError
from .channel import Waker
from .events import MAX_WATERMARK, MIN_WATERMARK, Watermark, WatermarkStatus
from .operator import Output, attribute_error
from .task import Task
from .watermark_alignment import AlignmentMember

_log = logging.getLogger(__name__)
_ACTIVE = WatermarkStatus.ACTIVE
_IDLE = WatermarkStatus.IDLE


class SourceWatermarkOutput:
    """A source's watermarks and statuses into its chain, deduplicated as Flink's
    ``WatermarkToDataOutput`` (see the module docstring)."""

    __slots__ = ("_max_watermark", "_output", "idle")

    def __init__(self, output: Output) -> None:
        self._output = output
        self._max_watermark = MIN_WATERMARK
        self.idle = False

    async def emit_watermark(self, watermark: Watermark) -> bool:
        """Passes ``watermark`` if it is above every earlier one; True if it passed."""
        if watermark.timestamp <= self._max_watermark:
            return False
        self._max_watermark = watermark.timestamp
        if self.idle:
            self.idle = False
            await self._output.emit_watermark_status(_ACTIVE)
        await self._output.emit_watermark(watermark)
        return True

    async def emit_status(self, status: WatermarkStatus) -> bool:
        """Passes IDLE or ACTIVE if it changes the status; True if it passed."""
        idle = status is _IDLE
        if idle == self.idle:
            return False
        self.idle = idle
        await self._output.emit_watermark_status(status)
        return True


class StopWithSavepointAbortedError(StreamflowError, RuntimeError):
    """The savepoint of a stop-with-savepoint with drain was aborted after the source had
    emitted the maximum watermark: the job fails over (as Flink's does)."""


class SourceTask(Task):
    """Polls a source reader and pushes its batches into the chain."""

    def __init__(self, name: str, reader: SourceReader, source_output: Output, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.is_source = True
        self.source_uid = ""
        self.reader = reader
        self.source_output = source_output
        self.watermarks = SourceWatermarkOutput(source_output)
        self.records_out = 0
        self.records_malformed = 0
        self.alignment: AlignmentMember | None = None  # watermark alignment (watermark_alignment.py)
        self.drained = False  # halted for a stop-with-savepoint with drain (halted_for: its id)

    async def _start(self) -> None:
        try:
            await self.reader.start(self.wake)
        except Exception as exc:
            raise attribute_error(exc, f"source {self.name!r}") from None
        if self.alignment is not None:
            self.alignment.wake = self.wake
            self._schedule_alignment_report()

    def _schedule_alignment_report(self) -> None:
        assert self.alignment is not None
        at = self.processing_time.current_processing_time() + self.alignment.update_interval_ms
        self.processing_time.register(at, self._report_watermark)

    async def _report_watermark(self, at: int) -> None:
        """Every update interval: the source's watermark to its alignment group (Flink's
        ``SourceOperator.emitLatestWatermark``), until its input ends."""
        if self.alignment is not None and self.alignment.latest != MAX_WATERMARK:
            self.alignment.report()
            self._schedule_alignment_report()

    async def _stop(self) -> None:
        await self.reader.close()

    def snapshot_operators(self, checkpoint_id: int, final: bool = False) -> dict[str, Any]:
        ops = super().snapshot_operators(checkpoint_id, final)
        state: dict[str, Any] = {"position": self.reader.snapshot_for_checkpoint(checkpoint_id)}
        if self.reader.rescalable_position:
            state["rescalable"] = True  # any parallelism restores it (restore.check_fits)
        ops[self.source_uid] = state
        return ops

    def chain_uids(self) -> list[str]:
        return [self.source_uid, *super().chain_uids()]

    async def halt_for_savepoint(self, checkpoint_id: int, drain: bool) -> bool:
        """The savepoint of a stop-with-savepoint: poll nothing more; with drain, first the
        maximum watermark (see the module docstring); no processing-time callback runs."""
        if not await super().halt_for_savepoint(checkpoint_id, drain):
            return False
        self.drained = drain
        _log.info(
            "source %s halts for the savepoint %d of a stop-with-savepoint (%s)", self.name,
            checkpoint_id, "drain: maximum watermark first" if drain else "suspend",
        )  # fmt: skip
        if drain:
            if self.alignment is not None:
                self.alignment.finish()
            await self.watermarks.emit_watermark(Watermark(MAX_WATERMARK))
        return True

    async def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        halted = self.halted_for == checkpoint_id
        await super().notify_checkpoint_aborted(checkpoint_id)  # (releases the timers)
        if not halted:
            return
        if self.drained:
            raise StopWithSavepointAbortedError(
                f"source {self.name!r}: the savepoint {checkpoint_id} of a stop-with-savepoint with "
                "drain was aborted after the maximum watermark was emitted; the job fails over"
            )
        _log.warning(
            "source %s: the savepoint %d of a stop-with-savepoint was aborted; the source polls "
            "again and the job continues", self.name, checkpoint_id,
        )  # fmt: skip
        self.wake()

    async def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.reader.notify_checkpoint_complete(checkpoint_id)
        await super().notify_checkpoint_complete(checkpoint_id)

    async def _run_loop(self) -> None:
        reader, push, size = self.reader, self.source_output.push, self.batch_size
        budget, alignment = self.budget, self.alignment
        waker: Waker = self.waker  # type: ignore[assignment]
        while True:
            if self.mailbox or self.processing_time.has_due():
                await self._run_mail()
            if self.halted_for is not None:  # stop-with-savepoint: mail only, nothing is polled
                if not self.has_mail():
                    await self._idle(waker.wait())
                continue
            if alignment is not None:
                if alignment.waiting():  # ahead of its group: mail only
                    if not self.has_mail():
                        await self._idle(waker.wait())
                    continue
                reader.align_splits(alignment.max_allowed)
            try:
                batch = reader.poll_batch(size)
            except Exception as exc:
                raise attribute_error(exc, f"source {self.name!r}") from None
            if batch is END:
                break
            if batch is None:
                if not self.has_mail():
                    await self._idle(waker.wait())
                continue
            kind = type(batch)
            if kind is list:
                self.records_out += len(batch)  # type: ignore[arg-type]
                await push(batch, None)  # type: ignore[arg-type]
            elif kind is tuple:  # (records, timestamps): a source that knows event time
                self.records_out += len(batch[0])  # type: ignore[index]
                await push(batch[0], batch[1])  # type: ignore[index]
            elif kind is Watermark:
                if await self.watermarks.emit_watermark(batch) and alignment is not None:  # type: ignore[arg-type]
                    alignment.on_status(False)  # an idle output turned active
                    alignment.on_watermark(batch.timestamp)  # type: ignore[attr-defined]
            elif kind is WatermarkStatus:
                if await self.watermarks.emit_status(batch) and alignment is not None:  # type: ignore[arg-type]
                    alignment.on_status(batch is _IDLE)
            else:
                raise TypeError(f"source {self.name!r} returned {batch!r} from poll_batch()")
            letters = reader.take_dead_letters()
            if letters:
                await self._route_dead_letters(letters)
            if budget.due():
                await budget.pause()
        if alignment is not None:  # holds no one back any more
            alignment.finish()
        # a bounded source ends with the maximum watermark: every window fires
        await self.watermarks.emit_watermark(Watermark(MAX_WATERMARK))

    async def _route_dead_letters(self, letters: Sequence[DeadLetter]) -> None:
        self.records_malformed += len(letters)
        if not self.source_output.has_side(DEAD_LETTER.tag_id):
            first = letters[0]
            raise attribute_error(
                MalformedRecordError(
                    f"malformed record at {first.location}: {first.error} (raw {first.raw[:200]!r}); "
                    f"{len(letters)} malformed in this batch. Read them with "
                    "stream.get_side_output(DEAD_LETTER) to route instead of failing"
                ),
                f"source {self.name!r}",
            )
        await self.source_output.push_side(DEAD_LETTER.tag_id, list(letters), None)
