"""A blocking exchange's persisted result (Flink's BLOCKING result partition), for batch jobs.

Theory of operation
-------------------
In a batch job (``RuntimeExecutionMode.BATCH``, ``execution.batch-shuffle-mode``
``ALL_EXCHANGES_BLOCKING``, Flink's default) no record crosses a job edge while its producer
runs: the producing subtask writes everything it sends one consumer subtask into a
:class:`BlockingResult` (one per producer subtask, consumer subtask and edge), and the
consumer is scheduled once the producer has finished (``regions.py``). The consumer's input
channel is then fed from the result by :meth:`BlockingResult.feed`; the result stays
whole, so a consumer that fails and restarts reads it again from its start, and the
producer never runs again (Flink's ``RestartPipelinedRegionFailoverStrategy`` re-reads the
finished upstream partitions).

* The write side is a channel's (``put``): batches ``(records, timestamps)`` and control
  events (the final watermark, the end of input) are appended in order and never wait: a
  blocking result has no reader while it is written. Its metrics look like a channel's that
  is never full.
* Memory is bounded per job (a :class:`ResultBudget`, ``streamflow.blocking-results.memory``):
  a result whose batch passes the budget moves what it holds in memory to a temporary file
  of its own (``spill``), frames of MessagePack written with the job's records codec as the
  sort buffer's runs are (``sort_runs.RunCodec``: the same exact round trips, the same
  pickle opt-in and refusal), and appends there until its memory fills again. A read goes
  through the file's frames first, then what is in memory: the order written.
* Each read hands out its own list objects (a consumer may reorder or extend a batch's
  list); the records themselves are shared with the first reader, as records are shared
  between operators everywhere in streamflow (``detach.py``): an operator that changes a
  record it received in place and then fails changes what its restart reads.
* ``release`` drops the result once every consumer of it has finished (Flink releases a
  blocking partition when its consumers are done): memory returns to the budget and the
  file is closed (a temporary file, gone when closed).
"""

from __future__ import annotations

import logging
import struct
import tempfile
from collections.abc import Iterator
from typing import IO, Any

import msgpack

from .channel import Channel, ChannelItem
from .events import END_OF_INPUT, EndOfInput, Watermark, WatermarkStatus
from .record_size import batch_size
from .sort_runs import RunCodec

__all__ = ["BlockingResult", "ResultBudget"]

_log = logging.getLogger("streamflow")
_FRAME = struct.Struct(">Q")
DEFAULT_RESULTS_MEMORY = 256 * 2**20  # streamflow.blocking-results.memory


class ResultBudget:
    """The bytes the blocking results of one job hold in memory, bounded by ``limit``."""

    __slots__ = ("limit", "peak", "spill_dir", "spilled", "used")

    def __init__(self, limit: int, spill_dir: str | None = None) -> None:
        if limit < 0:
            raise ValueError(f"streamflow.blocking-results.memory must be >= 0, got {limit}")
        self.limit = limit
        self.spill_dir = spill_dir
        self.used = 0
        self.peak = 0
        self.spilled = 0  # results that spilled (a metric; the first is logged)


class BlockingResult:
    """What one producer subtask sent one consumer subtask over one edge (module doc);
    ``codec`` writes its spill file (``sort_runs.RunCodec``: the records codec and the pickle
    opt-in of the edge's stream)."""

    __slots__ = (
        "_budget",
        "_file",
        "_items",
        "_memory",
        "blocked_s",
        "codec",
        "name",
        "records_in",
        "released",
        "writer",
    )

    def __init__(self, name: str, budget: ResultBudget, codec: RunCodec) -> None:
        self.name = name
        self._budget = budget
        self.codec = codec
        self._items: list[ChannelItem] = []
        self._memory = 0  # estimated bytes of _items' batches
        self._file: IO[bytes] | None = None
        self.writer: Any = None  # the producing task
        self.records_in = 0
        self.blocked_s = 0.0  # never blocked: a channel's metric, always 0 here
        self.released = False

    # -- the write side (a channel's) -----------------------------------------
    size = 0  # nothing queued for a reader: metrics see a channel never full
    capacity = 1

    async def put(self, item: ChannelItem) -> None:
        if self.released:
            raise RuntimeError(f"blocking result {self.name!r} written after it was released")
        if type(item) is tuple:
            self.records_in += len(item[0])
            nbytes = batch_size(item[0])
            budget = self._budget
            if budget.used + nbytes > budget.limit and (self._items or self._file is not None):
                self.spill()
            if budget.used + nbytes > budget.limit:
                self._write([item])  # the batch alone is over the budget: straight to the file
                return
            self._memory += nbytes
            budget.used += nbytes
            budget.peak = max(budget.peak, budget.used)
        self._items.append(item)

    def spill(self) -> None:
        """Move what is in memory to this result's file (appended after what it holds)."""
        if not self._items:
            return
        items, self._items = self._items, []
        self._write(items)
        self._budget.used -= self._memory
        self._memory = 0

    def _write(self, items: list[ChannelItem]) -> None:
        budget = self._budget
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="streamflow-result-", dir=budget.spill_dir)  # noqa: SIM115 (kept open until released)
            budget.spilled += 1
            if budget.spilled == 1:
                _log.info(
                    "%s: the blocking results passed streamflow.blocking-results.memory (%d bytes): "
                    "spilling to %s", self.name, budget.limit, budget.spill_dir or tempfile.gettempdir(),
                )  # fmt: skip
        try:
            frames = [self._frame(item) for item in items]
        except TypeError as exc:  # a record the codec refuses: name the exchange too
            exc.add_note(f"streamflow: while spilling the blocking result {self.name!r}")
            raise
        self._file.seek(0, 2)
        self._file.writelines(frames)

    def _frame(self, item: ChannelItem) -> bytes:
        if type(item) is tuple:
            packed, pickles = self.codec.pack_records(item[0])
            body = msgpack.packb([0, packed, item[1], pickles], use_bin_type=True)
        elif type(item) is Watermark:
            body = msgpack.packb([1, item.timestamp])
        elif type(item) is WatermarkStatus:
            body = msgpack.packb([2, item.value])
        elif type(item) is EndOfInput:
            body = msgpack.packb([3])
        else:
            raise TypeError(f"{self.name}: a blocking result cannot hold {item!r}")
        return _FRAME.pack(len(body)) + body

    # -- the read side ---------------------------------------------------------
    def _spilled(self) -> Iterator[ChannelItem]:
        file, codec = self._file, self.codec
        if file is None:
            return
        file.seek(0)
        while header := file.read(_FRAME.size):
            (size,) = _FRAME.unpack(header)
            frame = msgpack.unpackb(file.read(size), raw=False, use_list=True)
            kind = frame[0]
            if kind == 0:
                yield codec.unpack_records(frame[1], frame[3]), frame[2]
            elif kind == 1:
                yield Watermark(frame[1])
            elif kind == 2:
                yield WatermarkStatus(frame[1])
            elif kind == 3:
                yield END_OF_INPUT
            else:
                raise ValueError(f"{self.name}: a spill file's frame is damaged (kind {kind!r})")

    def read(self) -> Iterator[ChannelItem]:
        """The whole result, from its start, in the order written (module doc)."""
        if self.released:
            raise RuntimeError(f"blocking result {self.name!r} read after it was released")
        yield from self._spilled()
        for item in list(self._items):
            if type(item) is tuple:
                records, timestamps = item
                item = (list(records), None if timestamps is None else list(timestamps))
            yield item

    async def feed(self, channel: Channel) -> None:
        """Write the whole result into ``channel`` (the consumer's input), from its start."""
        for item in self.read():
            await channel.put(item)

    def release(self) -> None:
        """Every consumer finished: drop the data (module doc)."""
        if self.released:
            return
        self.released = True
        self._items = []
        self._budget.used -= self._memory
        self._memory = 0
        if self._file is not None:
            self._file.close()
            self._file = None
