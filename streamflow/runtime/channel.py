"""Bounded channels between tasks, and the input gate that reads several of them.

Theory of operation
-------------------
A :class:`Channel` is a FIFO between one upstream subtask and one downstream
subtask. It carries *batches* of records and *control events* (watermarks,
watermark status, checkpoint barriers, cancel markers, end of input). A batch
is the tuple ``(records, timestamps)`` where ``records`` is a list and
``timestamps`` is a parallel list of event timestamps or ``None``.

* Capacity counts records; a control event counts as one. ``put`` suspends the
  writer while the channel is full, so backpressure is exact. A batch larger
  than the whole capacity is admitted when the channel is empty (otherwise it
  could never be written).
* Bytes are bounded too (Flink bounds in-flight buffers in bytes): each batch's
  size is estimated once when written (:mod:`streamflow.runtime.record_size`),
  and ``put`` also waits while the channel's bytes would exceed ``max_bytes``
  or the job's bytes (a :class:`ByteBudget` shared by all channels of a job)
  would exceed the job budget. The same empty-channel rule applies, so every
  channel can always take one batch and the job always makes progress; a
  writer waiting for the job budget is woken when any channel is read.
* The reader side is driven by the :class:`InputGate` of the downstream task.
  Each channel can be *paused* on its own (aligned checkpoints stop reading a
  channel that already delivered barrier n; input selection, ``input_selection.py``,
  *deselects* the channels of an input not read yet, which a barrier's resume leaves
  paused); a paused channel keeps accepting writes until it is full.
* ``snapshot()`` copies the queued items without consuming them, and
  ``put_priority`` lets an unaligned barrier overtake the queued data, returning
  the batches it overtook (the output channel state of its checkpoint). It never
  overtakes an earlier checkpoint event still queued (a barrier, priority or
  not, or a cancel marker): priority events keep FIFO order among themselves, as
  in Flink's ``PrioritizedDeque.addPriorityElement`` (apache/flink,
  flink-runtime/.../io/network/partition/PrioritizedDeque.java). Otherwise the
  barrier of checkpoint n+1 would reach the reader before that of n, and n
  could never complete downstream.

No locks are needed: everything runs on one event loop. Wake-ups are plain
futures, created only when somebody actually has to wait.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from .events import CancelCheckpointMarker, CheckpointBarrier
from .record_size import batch_size

Batch = tuple[list, list[int] | None]
ChannelItem = Any  # a Batch or a control event (see events.py)
# what an unaligned barrier never overtakes
_CHECKPOINT_EVENTS = (CheckpointBarrier, CancelCheckpointMarker)


class ByteBudget:
    """The in-flight bytes of all channels of one job, bounded by ``limit``."""

    __slots__ = ("limit", "peak", "used", "waiting")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"job byte budget must be >= 1, got {limit}")
        self.limit = limit
        self.used = 0
        self.peak = 0  # the most bytes in flight at once (a metric)
        self.waiting: set[Channel] = set()  # channels whose writer waits for room

    def _release(self, nbytes: int) -> None:
        self.used -= nbytes
        if self.waiting:
            waiting, self.waiting = self.waiting, set()
            for ch in waiting:
                ch._wake_writer()


class Channel:
    __slots__ = (
        "_budget",
        "_bytes",
        "_capacity",
        "_gate",
        "_index",
        "_item_bytes",
        "_items",
        "_max_bytes",
        "_measure",
        "_paused",
        "_size",
        "_writer_waiter",
        "blocked_s",
        "name",
        "records_in",
        "writer",
    )

    def __init__(
        self,
        capacity: int,
        name: str = "",
        *,
        max_bytes: int | None = None,
        budget: ByteBudget | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"channel capacity must be >= 1, got {capacity}")
        if max_bytes is not None and max_bytes < 1:
            raise ValueError(f"channel byte budget must be >= 1, got {max_bytes}")
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._budget = budget
        self._measure = max_bytes is not None or budget is not None
        self._items: deque[ChannelItem] = deque()
        self._item_bytes: deque[int] = deque()  # estimated bytes of each queued item
        self._bytes = 0
        self._size = 0
        self._paused = False
        self._writer_waiter: asyncio.Future[None] | None = None
        self._gate: InputGate | None = None
        self._index = 0
        self.name = name
        self.writer: Any = None  # the task writing into this channel
        self.records_in = 0  # records written (a metric)
        self.blocked_s = 0.0  # loop time the writer waited for room: its backpressured time

    # -- writer side -------------------------------------------------------
    async def put(self, item: ChannelItem) -> None:
        """Append a batch or a control event, waiting while the channel is full."""
        nbytes = 0
        if type(item) is tuple:
            n = len(item[0])
            self.records_in += n
            if self._measure:
                nbytes = batch_size(item[0])
        else:
            n = 1
        if self._size and not self._fits(n, nbytes):
            loop = asyncio.get_running_loop()
            started = loop.time()
            try:
                while self._size and not self._fits(n, nbytes):
                    fut = loop.create_future()
                    self._writer_waiter = fut
                    if self._budget is not None:
                        self._budget.waiting.add(self)
                    await fut
            finally:
                self.blocked_s += loop.time() - started
                if self._budget is not None:
                    self._budget.waiting.discard(self)
        self._items.append(item)
        self._item_bytes.append(nbytes)
        self._size += n
        if nbytes:
            self._bytes += nbytes
            budget = self._budget
            if budget is not None:
                budget.used += nbytes
                if budget.used > budget.peak:
                    budget.peak = budget.used
        gate = self._gate
        if gate is not None and not self._paused:
            gate._notify(self._index)

    def _fits(self, n: int, nbytes: int) -> bool:
        if self._size + n > self._capacity:
            return False
        if not nbytes:
            return True
        if self._max_bytes is not None and self._bytes + nbytes > self._max_bytes:
            return False
        budget = self._budget
        return budget is None or budget.used + nbytes <= budget.limit

    def _wake_writer(self) -> None:
        waiter = self._writer_waiter
        if waiter is not None:
            self._writer_waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def put_priority(self, event: ChannelItem) -> list[Batch]:
        """Let ``event`` (an unaligned barrier) overtake the queued data, but no checkpoint
        event queued before it. Returns the batches it overtook, oldest first."""
        items = self._items
        at = len(items)
        while at and type(items[at - 1]) not in _CHECKPOINT_EVENTS:
            at -= 1
        overtaken = [item for i, item in enumerate(items) if i >= at and type(item) is tuple]
        items.insert(at, event)
        self._item_bytes.insert(at, 0)
        self._size += 1
        if self._gate is not None and not self._paused:
            self._gate._notify(self._index)
        return overtaken

    def put_before_end(self, event: ChannelItem) -> bool:
        """Insert a control event just before a queued end of input (the writer finished).
        False when the end of input was already read."""
        items = self._items
        if not items or type(items[-1]).__name__ != "EndOfInput":
            return False
        at = len(items) - 1
        items.insert(at, event)
        self._item_bytes.insert(at, 0)
        self._size += 1
        return True

    # -- reader side -------------------------------------------------------
    def get_nowait(self) -> ChannelItem:
        item = self._items.popleft()
        self._size -= len(item[0]) if type(item) is tuple else 1
        nbytes = self._item_bytes.popleft()
        if nbytes:
            self._bytes -= nbytes
            if self._budget is not None:
                self._budget._release(nbytes)
        self._wake_writer()
        return item

    def snapshot(self) -> list[ChannelItem]:
        """A copy of the queued items, oldest first; the queue is not touched."""
        return list(self._items)

    @property
    def paused(self) -> bool:
        return self._paused

    def __len__(self) -> int:
        return len(self._items)

    @property
    def size(self) -> int:
        """Queued records (control events count one each)."""
        return self._size

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def queued_bytes(self) -> int:
        """Estimated bytes of the queued batches (0 unless a byte budget is set)."""
        return self._bytes

    @property
    def max_bytes(self) -> int | None:
        return self._max_bytes

    def statistics(self) -> dict[str, int | bool | None]:
        return {
            "queued_items": len(self._items),
            "queued_records": self._size,
            "queued_bytes": self._bytes,
            "capacity": self._capacity,
            "max_bytes": self._max_bytes,
            "paused": self._paused,
        }


class Waker:
    """One wake-up future at a time; resolved by data, mail or the clock."""

    __slots__ = ("_waiter",)

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self) -> None:
        fut = asyncio.get_running_loop().create_future()
        self._waiter = fut
        await fut


class InputGate:
    """Reads the channels of one downstream subtask in arrival order.

    ``poll()`` returns ``(channel_index, item)`` or ``None`` when no unpaused
    channel has data; ``wait()`` suspends until one has, or until ``wake()`` is
    called (mail for the task or the clock).
    """

    def __init__(self, channels: list[Channel]) -> None:
        self.channels = channels
        self._ready: deque[int] = deque()
        self._in_ready = [False] * len(channels)
        self._waker = Waker()
        self._deselected: set[int] = set()  # paused by input selection, not by a barrier
        for i, ch in enumerate(channels):
            if ch._gate is not None:
                raise ValueError(f"channel {ch.name!r} is already read by another gate")
            ch._gate = self
            ch._index = i

    def _notify(self, index: int) -> None:
        if not self._in_ready[index]:
            self._in_ready[index] = True
            self._ready.append(index)
        self.wake()

    def wake(self) -> None:
        self._waker.wake()

    def poll(self) -> tuple[int, ChannelItem] | None:
        ready = self._ready
        while ready:
            index = ready[0]
            ch = self.channels[index]
            if ch._paused or not ch._items:
                ready.popleft()
                self._in_ready[index] = False
                continue
            item = ch.get_nowait()
            # round robin: a channel with more data goes to the back of the line
            ready.popleft()
            if ch._items:
                ready.append(index)
            else:
                self._in_ready[index] = False
            return index, item
        return None

    async def wait(self) -> None:
        """Wait until ``poll`` may return something, or ``wake`` is called."""
        if not self._ready:
            await self._waker.wait()

    async def wait_notified(self) -> None:
        """Wait for the next item written to any channel, or ``wake``, whatever is queued."""
        await self._waker.wait()

    def pause(self, index: int) -> None:
        self.channels[index]._paused = True

    def deselect(self, index: int) -> None:
        """Input selection (``input_selection.py``): paused until :meth:`select`, whatever
        :meth:`resume` a barrier alignment calls meanwhile."""
        self._deselected.add(index)
        self.pause(index)

    def select(self, index: int) -> None:
        if index in self._deselected:
            self._deselected.discard(index)
            self.resume(index)

    def resume(self, index: int) -> None:
        ch = self.channels[index]
        if ch._paused and index not in self._deselected:
            ch._paused = False
            if ch._items:
                self._notify(index)

    def resume_all(self) -> None:
        for i in range(len(self.channels)):
            self.resume(i)
