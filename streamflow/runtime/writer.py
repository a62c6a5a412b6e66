"""The end of a chain: routes batches to the channels of the downstream subtasks.

Partitioning is per batch: forward and rebalance move the whole batch (no
per-record work); hash partitioning computes each record's key group, which is
per-record work by nature and only happens between parallel operators.
Control events go to every channel.
"""

from __future__ import annotations

from typing import Any

from ..graph import Partitioning
from ..state.key_groups import stable_hash, subtask_of_key_group
from .channel import Channel
from .events import END_OF_INPUT, Watermark, WatermarkStatus
from .operator import BatchTarget, attribute_error


class ChannelWriter(BatchTarget):
    def __init__(
        self,
        channels: list[Channel],
        partitioning: Partitioning,
        *,
        subtask_index: int = 0,
        key_selector: Any = None,
        max_parallelism: int = 128,
        where: str = "",
    ) -> None:
        self.channels = channels
        self.partitioning = partitioning
        self._next = subtask_index % len(channels)
        self._key_selector = key_selector
        self._max_parallelism = max_parallelism
        self._where = where
        n = len(channels)
        if n == 1 or partitioning is Partitioning.FORWARD:
            self._target = channels[subtask_index if partitioning is Partitioning.FORWARD and n > 1 else 0]
            self.process_batch = self._to_one  # type: ignore[method-assign]
        elif partitioning is Partitioning.HASH:
            self._route = [subtask_of_key_group(g, max_parallelism, n) for g in range(max_parallelism)]
            self.process_batch = self._by_key  # type: ignore[method-assign]
        elif partitioning is Partitioning.REBALANCE:
            self.process_batch = self._round_robin  # type: ignore[method-assign]
        else:
            self.process_batch = self._to_all  # type: ignore[method-assign]

    async def _to_one(self, records: list, timestamps: list[int] | None) -> None:
        await self._target.put((records, timestamps))

    async def _round_robin(self, records: list, timestamps: list[int] | None) -> None:
        i = self._next
        self._next = (i + 1) % len(self.channels)
        await self.channels[i].put((records, timestamps))

    async def _to_all(self, records: list, timestamps: list[int] | None) -> None:
        for ch in self.channels:
            await ch.put((records, timestamps))

    async def _by_key(self, records: list, timestamps: list[int] | None) -> None:
        n = len(self.channels)
        buckets: list[list] = [[] for _ in range(n)]
        ts_buckets: list[list[int]] | None = None if timestamps is None else [[] for _ in range(n)]
        route, maxp, key_of = self._route, self._max_parallelism, self._key_selector
        try:
            targets = [route[stable_hash(key_of(record)) % maxp] for record in records]
        except Exception as exc:
            raise attribute_error(exc, self._where) from None
        for target, record in zip(targets, records, strict=True):
            buckets[target].append(record)
        if ts_buckets is not None:
            for target, ts in zip(targets, timestamps, strict=True):  # type: ignore[arg-type]
                ts_buckets[target].append(ts)
        for i, bucket in enumerate(buckets):
            if bucket:
                await self.channels[i].put((bucket, None if ts_buckets is None else ts_buckets[i]))

    async def broadcast_event(self, event: Any) -> None:
        for ch in self.channels:
            await ch.put(event)

    async def process_watermark(self, watermark: Watermark) -> None:
        await self.broadcast_event(watermark)

    async def process_watermark_status(self, status: WatermarkStatus) -> None:
        await self.broadcast_event(status)

    async def end_of_input(self) -> None:
        await self.broadcast_event(END_OF_INPUT)
