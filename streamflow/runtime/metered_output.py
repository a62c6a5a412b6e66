"""An operator's output that counts what it emits (Flink's per-operator ``numRecordsOut``
and ``currentOutputWatermark``): one integer addition per batch, nothing per record.

It also holds the job's :class:`~streamflow.runtime.loop_budget.LoopBudget`: after each batch it
passes on, a used-up slice pauses the task there, so an operator that emits many batches for
one input (a window firing, a flat_map, a final flush) lets the event loop run in between.
Pausing inside the chain is safe: the task is one coroutine, and nothing else calls into its
operators meanwhile (mail runs between batches only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .events import MIN_WATERMARK, Watermark
from .loop_budget import LoopBudget
from .operator import BatchTarget, Output


class MeteredOutput(Output):
    __slots__ = ("budget", "current_watermark", "records_out", "side_records_out")

    def __init__(
        self,
        main: Sequence[BatchTarget],
        side: Mapping[str, Sequence[BatchTarget]],
        budget: LoopBudget | None = None,
    ):
        super().__init__(main, side)
        self.budget = budget
        self.records_out = 0  # to the main output
        self.side_records_out: dict[str, int] = {}
        self.current_watermark = MIN_WATERMARK

    async def push(self, records: list, timestamps: list[int] | None) -> None:
        self.records_out += len(records)
        for target in self._main:
            await target.process_batch(records, timestamps)
        budget = self.budget
        if budget is not None and budget.due():
            await budget.pause()

    async def push_side(self, tag_id: str, records: list, timestamps: list[int] | None) -> None:
        self.side_records_out[tag_id] = self.side_records_out.get(tag_id, 0) + len(records)
        await super().push_side(tag_id, records, timestamps)
        budget = self.budget
        if budget is not None and budget.due():
            await budget.pause()

    async def emit_watermark(self, watermark: Watermark) -> None:
        self.current_watermark = watermark.timestamp
        await super().emit_watermark(watermark)
