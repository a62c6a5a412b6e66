"""A source task: polls a :class:`SourceReader` and pushes its batches into the chain.

The source side of Flink's ``SourceOperatorStreamTask``: the reader is started when
the task starts input (after every task of the job opened, ``start_gate.py``), polled
between mail runs, and paced by watermark alignment when its strategy aligns
(``watermark_alignment.py``); malformed records it reports go to the dead-letter side
output, or fail the task naming where they came from. Its snapshot holds the reader's
position under the source's uid. Everything else (mail, budget, lifecycle) is
:class:`~.task.Task`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..connectors.base import DEAD_LETTER, END, DeadLetter, MalformedRecordError, SourceReader
from .channel import Waker
from .events import MAX_WATERMARK, Watermark, WatermarkStatus
from .operator import Output, attribute_error
from .task import Task
from .watermark_alignment import AlignmentMember

__all__ = ["SourceTask"]


class SourceTask(Task):
    """Polls a source reader and pushes its batches into the chain."""

    def __init__(self, name: str, reader: SourceReader, source_output: Output, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.is_source = True
        self.source_uid = ""
        self.reader = reader
        self.source_output = source_output
        self.records_out = 0
        self.records_malformed = 0
        self.alignment: AlignmentMember | None = None  # watermark alignment (watermark_alignment.py)

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
                if alignment is not None:
                    alignment.on_watermark(batch.timestamp)  # type: ignore[attr-defined]
                await self.source_output.emit_watermark(batch)  # type: ignore[arg-type]
            elif kind is WatermarkStatus:
                if alignment is not None:
                    alignment.on_status(batch is WatermarkStatus.IDLE)
                await self.source_output.emit_watermark_status(batch)  # type: ignore[arg-type]
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
        await self.source_output.emit_watermark(Watermark(MAX_WATERMARK))

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
