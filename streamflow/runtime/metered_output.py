"""An operator's output that counts what it emits (Flink's per-operator ``numRecordsOut``
and ``currentOutputWatermark``): one integer addition per batch, nothing per record."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .events import MIN_WATERMARK, Watermark
from .operator import BatchTarget, Output


class MeteredOutput(Output):
    __slots__ = ("current_watermark", "records_out", "side_records_out")

    def __init__(self, main: Sequence[BatchTarget], side: Mapping[str, Sequence[BatchTarget]]):
        super().__init__(main, side)
        self.records_out = 0  # to the main output
        self.side_records_out: dict[str, int] = {}
        self.current_watermark = MIN_WATERMARK

    async def push(self, records: list, timestamps: list[int] | None) -> None:
        self.records_out += len(records)
        await super().push(records, timestamps)

    async def push_side(self, tag_id: str, records: list, timestamps: list[int] | None) -> None:
        self.side_records_out[tag_id] = self.side_records_out.get(tag_id, 0) + len(records)
        await super().push_side(tag_id, records, timestamps)

    async def emit_watermark(self, watermark: Watermark) -> None:
        self.current_watermark = watermark.timestamp
        await super().emit_watermark(watermark)
