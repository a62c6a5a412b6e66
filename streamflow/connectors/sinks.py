"""Sinks for scripts and tests: print, collect into a list, stream into a queue."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TextIO

from ..runtime.channel import Channel, InputGate
from ..runtime.events import END_OF_INPUT
from ..runtime.operator import StreamOperator
from ..types.fast_paths import print_lines
from .base import Sink

if TYPE_CHECKING:
    from ..runtime.job import JobClient


class _WriteOperator(StreamOperator):
    def __init__(self, name: str, write: Any) -> None:
        super().__init__(name)
        self._write = write

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        self._write(records)


class PrintSink(Sink):
    """Prints each record on its own line (``identifier> record`` when named)."""

    def __init__(self, sink_identifier: str | None = None, stream: TextIO | None = None) -> None:
        self.prefix = f"{sink_identifier}> " if sink_identifier else ""
        self.stream = stream

    def create_operator(self, name: str) -> StreamOperator:
        prefix = self.prefix

        def write(records: list) -> None:
            (self.stream or sys.stdout).write(print_lines(format, prefix, records))

        return _WriteOperator(name, write)


class CollectSink(Sink):
    """Appends every record to ``self.results`` (all subtasks share the list)."""

    def __init__(self) -> None:
        self.results: list[Any] = []

    def create_operator(self, name: str) -> StreamOperator:
        return _WriteOperator(name, self.results.extend)


class _QueueSinkOperator(StreamOperator):
    """One subtask's writer into the sink's shared channel. A channel has one writer's
    wake-up slot, so the subtasks take turns (``lock``): with two writers waiting for
    room at once, the first one's wake-up was lost and the job hung."""

    def __init__(self, name: str, channel: Channel, lock: asyncio.Lock) -> None:
        super().__init__(name)
        self._channel = channel
        self._lock = lock

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        async with self._lock:
            await self._channel.put((records, None))

    async def finish(self) -> None:
        async with self._lock:
            await self._channel.put(END_OF_INPUT)


class QueueSink(Sink):
    """Streams records to one async consumer through a bounded channel (backpressure)."""

    def __init__(self, capacity: int = 4096) -> None:
        self._channel = Channel(capacity, "collect")
        self._gate = InputGate([self._channel])
        self._lock = asyncio.Lock()  # the writers (one per subtask) put one at a time
        self._writers = 0
        self._ended = 0  # writers whose end of input take() has seen
        self._watching = False  # take() wakes up when the job ends

    def create_operator(self, name: str) -> StreamOperator:
        self._writers += 1
        return _QueueSinkOperator(name, self._channel, self._lock)

    async def take(self, client: JobClient, at_least: int = 1, linger_s: float = 0.01) -> list[Any] | None:
        """The records queued, as one new list, once there are ``at_least``, or ``linger_s``
        after the first of them arrived, or the input ended; ``None`` once every writer has
        ended and nothing is left. Raises the job's error (after the records before it)."""
        out: list[Any] = []
        job = client._task
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        timer: asyncio.TimerHandle | None = None
        try:
            while self._ended < self._writers:
                polled = self._gate.poll()
                if polled is None:
                    if out and (len(out) >= at_least or (deadline is not None and loop.time() >= deadline)):
                        return out
                    if job.done():
                        if out:
                            return out
                        job.result()  # raises the job's error
                        return None
                    if not self._watching:
                        self._watching = True
                        job.add_done_callback(lambda _t: self._gate.wake())
                    if out and timer is None:
                        deadline = loop.time() + linger_s
                        timer = loop.call_at(deadline, self._gate.wake)
                    await self._gate.wait()
                    continue
                item = polled[1]
                if type(item) is tuple:
                    out += item[0]
                else:
                    self._ended += 1
            return out or None
        finally:
            if timer is not None:
                timer.cancel()

    async def drain(self, client: JobClient) -> AsyncIterator[Any]:
        ended = 0
        job = client._task
        while ended < self._writers:
            polled = self._gate.poll()
            if polled is None:
                if job.done():
                    job.result()  # raises the job's error
                    return
                if not self._watching:
                    self._watching = True
                    job.add_done_callback(lambda _t: self._gate.wake())
                await self._gate.wait()
                continue
            item = polled[1]
            if type(item) is tuple:
                for record in item[0]:
                    yield record
            else:
                ended += 1
