"""Sources over in-memory data: collections, iterables, async iterables.

All three are replayable: the position is the number of records emitted, and
a restored reader skips that many (so the iterable must be deterministic).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterable, Callable, Iterable
from itertools import islice
from typing import Any

from .base import END, Source, SourceReader

_log = logging.getLogger(__name__)


class _CountingReader(SourceReader):
    def __init__(self) -> None:
        self.emitted = 0
        self._skip = 0

    def snapshot_position(self) -> int:
        return self.emitted

    def restore_position(self, position: Any) -> None:
        self._skip = self.emitted = int(position)


class _IterableReader(_CountingReader):
    def __init__(
        self, make_iter: Callable[[], Iterable[Any]], convert_batch: Callable[[list], list] | None = None
    ) -> None:
        super().__init__()
        self._make_iter = make_iter
        self._convert = convert_batch
        self._it: Any = None

    async def start(self, wake: Callable[[], None]) -> None:
        it = iter(self._make_iter())
        if self._skip:
            for _ in islice(it, self._skip):
                pass
        self._it = it

    def poll_batch(self, max_records: int) -> list | object:
        batch = list(islice(self._it, max_records))
        if not batch:
            return END
        self.emitted += len(batch)
        if self._convert is not None:  # one record out for each in: positions are unchanged
            return self._convert(batch)
        return batch


class _SequenceReader(_CountingReader):
    """Slices a list or tuple directly: no iterator overhead per record."""

    def __init__(self, data: list | tuple) -> None:
        super().__init__()
        self._data = data

    def poll_batch(self, max_records: int) -> list | object:
        start = self.emitted
        if start >= len(self._data):
            return END
        batch = list(self._data[start : start + max_records])
        self.emitted += len(batch)
        return batch


class CollectionSource(Source):
    """``env.from_collection(data)``: a list, a tuple, any iterable, or a zero-argument
    callable returning an iterable (re-invoked on restore). ``convert_batch`` (a declared
    type's batch converter: one record out for each record in) converts each batch an
    iterable yields as it is read; a list or tuple is given already converted."""

    def __init__(
        self,
        data: Iterable[Any] | Callable[[], Iterable[Any]],
        convert_batch: Callable[[list], list] | None = None,
    ) -> None:
        self._data = data
        self._convert = convert_batch

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        data = self._data
        if isinstance(data, (list, tuple)):
            if self._convert is not None:
                data = self._data = self._convert(list(data))  # once, for every reader after it
                self._convert = None
            return _SequenceReader(data)
        if callable(data):
            return _IterableReader(data, self._convert)
        return _IterableReader(lambda: data, self._convert)


HANDOVER = 32  # records of one synchronous run of an async iterable between two hand-overs
HANDOVER_MAX = 1_024  # a run longer than this is throughput, not a burst: no more hand-overs


class _AsyncIterableReader(_CountingReader):
    """Pulls from an async iterable in a helper task into a bounded buffer.

    The helper task runs the iterator until it waits (or the buffer is full); the source task,
    woken at the first record, can take them only then. An iterator that makes many records in
    one go (a paced generator catching up after its timer fired late, a parser yielding a
    chunk's records) would so make its first records wait for the whole run to be made, and
    then for the whole run to be processed as one batch. So the helper hands over (one loop
    iteration) after every ``HANDOVER`` records of a run, for the first ``HANDOVER_MAX`` records
    of it: the source task processes them while the run goes on. A run ends when the iterator
    waits, seen as the buffer found drained at the next record without a hand-over of ours in
    between. An iterator that never waits (throughput) is handed over only in its first
    ``HANDOVER_MAX`` records, then fills the buffer as before (bench/latency.py,
    docs/performance.md)."""

    def __init__(self, make_iter: Callable[[], AsyncIterable[Any]], buffer: int) -> None:
        super().__init__()
        self._make_iter = make_iter
        self._buffer: deque[Any] = deque()
        self._limit = buffer
        self._done = False
        self._error: BaseException | None = None
        self._space: asyncio.Event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, wake: Callable[[], None]) -> None:
        self._task = asyncio.get_running_loop().create_task(self._pull(wake))

    async def _pull(self, wake: Callable[[], None]) -> None:
        skip = self._skip
        buf, limit = self._buffer, self._limit
        run = 0  # records of the iterator's current synchronous run (class doc)
        ours = False  # the last suspension of this task was a hand-over or a wait for room
        try:
            async for item in self._make_iter():
                if skip:
                    skip -= 1
                    continue
                buf.append(item)
                if len(buf) == 1:
                    wake()
                    if not ours:  # drained while the iterator waited: a new run
                        run = 0
                ours = False
                run += 1
                if run % HANDOVER == 0 and run <= HANDOVER_MAX:
                    ours = True
                    await asyncio.sleep(0)
                while len(buf) >= limit:
                    ours = True
                    self._space.clear()
                    await self._space.wait()
        except Exception as exc:  # surfaced by the next poll, in the task
            self._error = exc
        finally:
            self._done = True
            wake()

    def poll_batch(self, max_records: int) -> list | object | None:
        buf = self._buffer
        if buf:
            n = min(max_records, len(buf))
            batch = [buf.popleft() for _ in range(n)]
            self.emitted += n
            self._space.set()
            return batch
        if self._error is not None:
            raise self._error
        return END if self._done else None

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass  # the cancel above: the reader is closing
            except Exception as exc:
                _log.warning("async iterable source: the iterator failed while closing: %r", exc)


class AsyncIterableSource(Source):
    """Reads an async iterable (or a zero-argument callable returning one)."""

    def __init__(self, data: AsyncIterable[Any] | Callable[[], AsyncIterable[Any]], buffer: int = 4096):
        self._data = data
        self._buffer = buffer

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        data = self._data
        make = data if callable(data) and not hasattr(data, "__aiter__") else (lambda: data)
        return _AsyncIterableReader(make, self._buffer)
