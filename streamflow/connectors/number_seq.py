"""``NumberSequenceSource``: the bounded sequence ``from..to`` (both inclusive), as Flink's.

A replayable collection source underneath: its position in a checkpoint is the
count of numbers emitted by each reader. With parallelism ``p`` reader ``i``
emits ``start + i, start + i + p, ...`` (Flink splits the range into
contiguous splits instead; the set of numbers is the same).
"""

from __future__ import annotations

from .base import SourceReader
from .collection import CollectionSource, _IterableReader

__all__ = ["NumberSequenceSource"]


class NumberSequenceSource(CollectionSource):
    def __init__(self, start: int, end: int) -> None:
        if end < start:
            raise ValueError(f"NumberSequenceSource needs start <= end, got {start} > {end}")
        self.start, self.end = int(start), int(end)
        super().__init__(lambda: range(self.start, self.end + 1))

    def get_from(self) -> int:
        return self.start

    def get_to(self) -> int:
        return self.end

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        start, end = self.start + subtask_index, self.end
        return _IterableReader(lambda: range(start, end + 1, parallelism))
