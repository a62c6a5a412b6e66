"""A scripted source for tests: records, timestamps, watermarks, idleness, failures, the end.

    source = ScriptedSource([
        Record("a", 1_000), Record("b", 2_500),   # records with event timestamps
        Watermark(2_000),                          # downstream of the source, if above every earlier one
        WatermarkStatus.IDLE,                      # the source goes idle ...
        "plain value",                             # a record without a timestamp
        Fail(ConnectionError("lost")),             # raised inside the source task
    ], end=False)                                  # keep running (and accept push()) after the script
    env.from_source(source, None, "scripted")

Its watermarks and statuses pass as any source's do (``runtime/source_task.py``, Flink's
``WatermarkToDataOutput``): a watermark only if above every earlier one, first marking an
idle source active. Consecutive records are delivered as one batch (up to the batch size). The
position in a checkpoint is the number of script items consumed, so a
restored job continues the same script where it stopped. ``push()`` adds
items while the job runs; ``finish()`` ends a source created with
``end=False``. ``all_read()`` tells when every reader has read every item so far: the source
task emits what it read before it handles its next checkpoint, so a checkpoint triggered after
that holds every item's effect (a test waits for it instead of sleeping).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..connectors.base import END, Source, SourceReader
from ..runtime.events import Watermark, WatermarkStatus


@dataclass(frozen=True)
class Record:
    value: Any
    timestamp: int | None = None


@dataclass(frozen=True)
class Fail:
    error: BaseException


class ScriptedSource(Source):
    def __init__(self, script: Iterable[Any] = (), *, end: bool = True) -> None:
        self.items: list[Any] = list(script)
        self.ended = end
        self._readers: list[_ScriptReader] = []

    def push(self, *items: Any) -> None:
        self.items.extend(items)
        for reader in self._readers:
            reader.wake()

    def finish(self) -> None:
        self.ended = True
        for reader in self._readers:
            reader.wake()

    def all_read(self) -> bool:
        """Whether every reader (one per source subtask started) has read every item pushed so
        far; False before the first reader starts."""
        return bool(self._readers) and all(r.position >= len(self.items) for r in self._readers)

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        reader = _ScriptReader(self)
        self._readers.append(reader)
        return reader


class _ScriptReader(SourceReader):
    def __init__(self, source: ScriptedSource) -> None:
        self.source = source
        self.position = 0
        self.wake: Callable[[], None] = lambda: None

    async def start(self, wake: Callable[[], None]) -> None:
        self.wake = wake

    def snapshot_position(self) -> int:
        return self.position

    def restore_position(self, position: Any) -> None:
        self.position = int(position)

    def poll_batch(self, max_records: int) -> Any:
        items = self.source.items
        if self.position >= len(items):
            return END if self.source.ended else None
        item = items[self.position]
        if isinstance(item, (Watermark, WatermarkStatus)):
            self.position += 1
            return item
        if isinstance(item, Fail):
            self.position += 1
            raise item.error
        records: list = []
        timestamps: list[int | None] = []
        while self.position < len(items) and len(records) < max_records:
            item = items[self.position]
            if isinstance(item, (Watermark, WatermarkStatus, Fail)):
                break
            if isinstance(item, Record):
                records.append(item.value)
                timestamps.append(item.timestamp)
            else:
                records.append(item)
                timestamps.append(None)
            self.position += 1
        if all(ts is None for ts in timestamps):
            return records
        return (records, timestamps)
