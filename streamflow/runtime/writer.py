"""The end of a chain: routes batches to the channels of the downstream subtasks.

One class per partitioning, each with its declared ``process_batch``;
:func:`create_writer` picks the class. Partitioning is per batch: forward and
rebalance move the whole batch (no per-record work); hash partitioning
computes each record's key group, which is per-record work by nature and only
happens between parallel operators. Control events go to every channel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..graph import Partitioning
from ..state.key_groups import stable_hash, subtask_of_key_group
from .channel import Channel
from .events import END_OF_INPUT, Watermark, WatermarkStatus
from .operator import BatchTarget, attribute_error


class ChannelWriter(BatchTarget):
    """Writes to ``channels`` (one per downstream subtask it reaches)."""

    def __init__(self, channels: list[Channel]) -> None:
        self.channels = channels

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        raise NotImplementedError

    async def broadcast_event(self, event: Any) -> None:
        for ch in self.channels:
            await ch.put(event)

    async def process_watermark(self, watermark: Watermark) -> None:
        await self.broadcast_event(watermark)

    async def process_watermark_status(self, status: WatermarkStatus) -> None:
        await self.broadcast_event(status)

    async def end_of_input(self) -> None:
        await self.broadcast_event(END_OF_INPUT)


class ForwardWriter(ChannelWriter):
    """Every batch to one channel (a forward edge, or a single downstream subtask)."""

    def __init__(self, channels: list[Channel], target: int) -> None:
        super().__init__(channels)
        self._target = channels[target]

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        await self._target.put((records, timestamps))


class RebalanceWriter(ChannelWriter):
    """Whole batches round-robin, starting at the writer's own subtask index."""

    def __init__(self, channels: list[Channel], subtask_index: int) -> None:
        super().__init__(channels)
        self._next = subtask_index % len(channels)

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        i = self._next
        self._next = (i + 1) % len(self.channels)
        await self.channels[i].put((records, timestamps))


class BroadcastWriter(ChannelWriter):
    """Every batch to every channel."""

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        for ch in self.channels:
            await ch.put((records, timestamps))


class HashWriter(ChannelWriter):
    """Each record to the subtask owning its key's key group (Flink's KeyGroupStreamPartitioner)."""

    def __init__(
        self, channels: list[Channel], key_selector: Callable[[Any], Any], max_parallelism: int, where: str
    ) -> None:
        super().__init__(channels)
        n = len(channels)
        self._route = [subtask_of_key_group(g, max_parallelism, n) for g in range(max_parallelism)]
        self._key_selector = key_selector
        self._max_parallelism = max_parallelism
        self._where = where

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        n = len(self.channels)
        buckets: list[list] = [[] for _ in range(n)]
        route, maxp, key_of = self._route, self._max_parallelism, self._key_selector
        try:
            targets = [route[stable_hash(key_of(record)) % maxp] for record in records]
        except Exception as exc:
            raise attribute_error(exc, self._where) from None
        for target, record in zip(targets, records, strict=True):
            buckets[target].append(record)
        ts_buckets: list[list[int]] | None = None
        if timestamps is not None:
            ts_buckets = [[] for _ in range(n)]
            for target, ts in zip(targets, timestamps, strict=True):
                ts_buckets[target].append(ts)
        for i, bucket in enumerate(buckets):
            if bucket:
                await self.channels[i].put((bucket, None if ts_buckets is None else ts_buckets[i]))


def create_writer(
    channels: list[Channel],
    partitioning: Partitioning,
    *,
    subtask_index: int = 0,
    key_selector: Callable[[Any], Any] | None = None,
    max_parallelism: int = 128,
    where: str = "",
) -> ChannelWriter:
    """The writer for ``partitioning`` over ``channels``."""
    n = len(channels)
    if n == 1:
        return ForwardWriter(channels, 0)
    if partitioning is Partitioning.FORWARD:
        return ForwardWriter(channels, subtask_index)
    if partitioning is Partitioning.HASH:
        if key_selector is None:
            raise ValueError(f"{where}: hash partitioning needs a key selector")
        return HashWriter(channels, key_selector, max_parallelism, where)
    if partitioning is Partitioning.REBALANCE:
        return RebalanceWriter(channels, subtask_index)
    return BroadcastWriter(channels)
