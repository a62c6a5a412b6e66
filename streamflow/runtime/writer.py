"""The end of a chain: routes batches to the channels of the downstream subtasks.

One class per partitioning, each with its declared ``process_batch``;
:func:`create_writer` picks the class. Forward moves the whole batch, rebalance
cuts it into strided slices (no per-record Python work); hash partitioning
computes each record's key group, which is per-record work by nature and only
happens between parallel operators. Control events go to every channel.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

from ..graph import Partitioning
from ..state.key_groups import stable_hash, subtask_of_key_group
from .channel import Channel
from .events import END_OF_INPUT, Watermark, WatermarkStatus
from .item_getters import item_getter
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
    """Records round-robin, as Flink's RebalancePartitioner, starting at the writer's own subtask
    index: the batch is cut into one strided slice per channel (``records[k::n]``, C speed), and
    the next batch continues where this one stopped. A single-record batch goes to one channel."""

    def __init__(self, channels: list[Channel], subtask_index: int) -> None:
        super().__init__(channels)
        self._next = subtask_index % len(channels)

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        channels, start = self.channels, self._next
        n = len(channels)
        self._next = (start + len(records)) % n
        if len(records) == 1 or n == 1:
            await channels[start].put((records, timestamps))
            return
        for k in range(min(n, len(records))):
            await channels[(start + k) % n].put(
                (records[k::n], None if timestamps is None else timestamps[k::n])
            )


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
        self._key_selector = item_getter(key_selector) or key_selector
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


class PerRecordWriter(ChannelWriter):
    """Shuffle, rescale and custom partitioning: ``pick(record)`` names each record's channel."""

    def __init__(self, channels: list[Channel], pick: Callable[[Any], int], where: str) -> None:
        super().__init__(channels)
        self._pick = pick
        self._where = where

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        n = len(self.channels)
        buckets: list[list] = [[] for _ in range(n)]
        ts_buckets: list[list[int]] | None = None if timestamps is None else [[] for _ in range(n)]
        pick = self._pick
        try:
            targets = [pick(record) for record in records]
        except Exception as exc:
            raise attribute_error(exc, self._where) from None
        for i, (target, record) in enumerate(zip(targets, records, strict=True)):
            if not 0 <= target < n:
                bad = ValueError(f"partitioner returned channel {target!r}, not in 0..{n - 1}")
                raise attribute_error(bad, self._where, record)
            buckets[target].append(record)
            if ts_buckets is not None:
                ts_buckets[target].append(timestamps[i])  # type: ignore[index]
        for i, bucket in enumerate(buckets):
            if bucket:
                await self.channels[i].put((bucket, None if ts_buckets is None else ts_buckets[i]))


def _shuffle(subtask: int, n: int, up_p: int, key_selector: Any, partitioner: Any) -> Callable[[Any], int]:
    """Flink's ShufflePartitioner: a random channel (seeded per writer, so runs repeat)."""
    rng = random.Random(subtask)
    return lambda record: rng.randrange(n)


def _rescale(subtask: int, n: int, up_p: int, key_selector: Any, partitioner: Any) -> Callable[[Any], int]:
    """Flink's RescalePartitioner over a POINTWISE edge: upstream subtask ``i`` of ``up_p`` feeds
    the downstream range ``[i * n // up_p, (i + 1) * n // up_p)`` (at least one channel,
    ``i * n // up_p`` when there are more upstream than downstream subtasks), round robin."""
    first = subtask * n // up_p
    count = max(1, (subtask + 1) * n // up_p - first)
    counter = itertools.count()
    return lambda record: first + next(counter) % count


def _custom(subtask: int, n: int, up_p: int, key_selector: Any, partitioner: Any) -> Callable[[Any], int]:
    """``partition_custom(partitioner, key_selector)``: ``partitioner(key, n)`` picks the channel."""
    return lambda record: int(partitioner(key_selector(record), n))


_PER_RECORD = {Partitioning.SHUFFLE: _shuffle, Partitioning.RESCALE: _rescale, Partitioning.CUSTOM: _custom}


def create_writer(
    channels: list[Channel],
    partitioning: Partitioning,
    *,
    subtask_index: int = 0,
    key_selector: Callable[[Any], Any] | None = None,
    partitioner: Callable[[Any, int], int] | None = None,
    upstream_parallelism: int = 1,
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
    if partitioning in _PER_RECORD:
        make = _PER_RECORD[partitioning]
        pick = make(subtask_index, n, upstream_parallelism, key_selector, partitioner)
        return PerRecordWriter(channels, pick, where)
    return BroadcastWriter(channels)
