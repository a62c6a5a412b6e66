"""Flink's ``AsyncWaitOperator``: requests stay in flight across batches, watermarks and
checkpoint barriers, and the checkpoint stores their inputs.

Theory of operation. Every input record starts a request (an asyncio task running
``invoke(value)``) and takes a place in the operator's queue; a watermark takes a place
too when requests are queued before it. The queue holds at most ``capacity`` records
(completed but not yet emitted ones count, as in Flink): ``process_batch`` waits for a
place (emitting what it can meanwhile) before it starts another request. Results leave
the queue only in the task's own calls, never from a request's completion: a completion
posts one drain to the task (a processing-time callback due now, Flink's mailbox), and
``process_batch``, ``process_watermark`` and ``finish`` drain too. Ordered mode emits
from the head while the head is done; unordered mode emits any completed record queued
before the first watermark (Flink's segments), so a watermark never overtakes a record
that arrived before it, and never waits for one that arrived after it, in both modes.
A watermark status (IDLE/ACTIVE) queues as a watermark does (Flink's
``WatermarkStatusQueueEntry``): an IDLE forwarded ahead of records still in flight would let
the valves downstream advance past their timestamps without this input, and make them late.

Checkpoints (``snapshot_state``) do not wait for anything: the state is the queue's
elements as Flink's ``AsyncWaitOperator`` stores them, the input (value and timestamp)
of every record not yet emitted (in flight, or completed but held back in ordered mode)
and the watermarks between them, in queue order, encoded by the job's state codec (not the
statuses: a restored job starts every input and valve ACTIVE, and its sources find their
idleness again).
Results emitted after the barrier belong to the next checkpoint, so a restore from this
one re-issues exactly the requests whose results it does not hold: ``open`` re-submits
the restored inputs (and re-queues the watermarks) in their order before any new input,
so ordered mode keeps its order and the watermarks keep their place. On a rescale
subtask ``i`` takes the queues of the old subtasks ``j`` with ``j % parallelism == i``.

A failed request fails the operator at the next drain (named with the failing input);
``close`` cancels the requests still running.

``process_tagged`` is ``process_batch`` for a host that must know which input each output
comes from (the Spark engine numbers a stage's outputs by their input's position, and feeds a
partition's shuffled rows concurrently: ``spark/harness.py``): a tagged request's outputs are
emitted as ``(tag, output, timestamp)`` triples, in the same places a plain one's would be.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from .events import Watermark, WatermarkStatus
from .operator import StreamOperator

__all__ = ["AsyncQueueOperator"]

log = logging.getLogger(__name__)


class _Request:
    __slots__ = ("done", "tag", "task", "ts", "value")

    def __init__(self, value: Any, ts: int | None, tag: int | None = None) -> None:
        self.value, self.ts, self.tag = value, ts, tag
        self.done = False
        self.task: asyncio.Task[list[Any]] | None = None


class AsyncQueueOperator(StreamOperator):
    """The queue, emission and checkpointing of async requests; subclasses give ``invoke``."""

    def __init__(self, name: str, capacity: int, ordered: bool) -> None:
        super().__init__(name)
        self.capacity, self.ordered = capacity, ordered
        self._queue: deque[_Request | Watermark | WatermarkStatus] = deque()
        self._records = 0  # records in the queue
        self._error: tuple[BaseException, Any] | None = None
        self._drain_posted = False
        self._progress: asyncio.Event | None = None
        self._restored: list[Any] = []

    def invoke(self, value: Any) -> Coroutine[Any, Any, list[Any]]:
        raise NotImplementedError

    # -- checkpoints -------------------------------------------------------
    def snapshot_state(self, checkpoint_id: int) -> Any | None:
        if not self._queue:
            return None
        queue = [
            ["w", e.timestamp] if isinstance(e, Watermark) else ["r", e.value, e.ts]
            for e in self._queue
            if not isinstance(e, WatermarkStatus)  # statuses are not restored (module docstring)
        ]
        # rescalable: initialize_state hands the old subtasks' queues out by index (any
        # parallelism, and a restore where some subtasks had finished and left no state)
        return {"subtask": self.ctx.subtask_index, "queue": queue, "rescalable": True}

    def initialize_state(self, restored: Any | None) -> None:
        if restored is None:
            return
        me, p = self.ctx.subtask_index, self.ctx.parallelism
        states = restored.all if hasattr(restored, "all") else [restored]
        for state in states:
            if state is not None and int(state["subtask"]) % p == me:
                self._restored.extend(state["queue"])
        if self._restored:
            log.info("%s: re-issuing %d restored queue elements", self.name, len(self._restored))

    async def open(self) -> None:
        await super().open()
        self._progress = asyncio.Event()
        restored, self._restored = self._restored, []
        for element in restored:  # before any new input, in their order (may exceed capacity)
            if element[0] == "w":
                self._queue.append(Watermark(int(element[1])))
            else:
                self._start(element[1], element[2])

    # -- data --------------------------------------------------------------
    def _start(self, value: Any, ts: int | None, tag: int | None = None) -> None:
        request = _Request(value, ts, tag)
        task = asyncio.get_running_loop().create_task(self.invoke(value))
        request.task = task
        task.add_done_callback(lambda t, r=request: self._on_done(r, t))  # type: ignore[misc]
        self._queue.append(request)
        self._records += 1

    def _on_done(self, request: _Request, task: asyncio.Task[list[Any]]) -> None:
        if task.cancelled():
            return
        request.done = True
        if task.exception() is not None and self._error is None:
            self._error = (task.exception(), request.value)  # type: ignore[assignment]
        if self._progress is not None:
            self._progress.set()
        if not self._drain_posted:
            self._drain_posted = True
            service = self.ctx.processing_time
            service.register(service.current_processing_time(), self._drain_mail)

    async def _drain_mail(self, _ts: int) -> None:
        self._drain_posted = False
        await self._drain()

    async def _drain(self) -> None:
        """Emit every result that may leave the queue now, and the watermarks they free."""
        if self._error is not None:
            exc, value = self._error
            raise self.failure(exc, value)
        queue = self._queue
        out: list[Any] = []
        out_ts: list[int] = []
        timed = True
        while queue:
            head = queue[0]
            if isinstance(head, Watermark):
                await self._flush(out, out_ts, timed)
                out, out_ts, timed = [], [], True
                queue.popleft()
                await self.output.emit_watermark(head)
                continue
            if isinstance(head, WatermarkStatus):
                await self._flush(out, out_ts, timed)
                out, out_ts, timed = [], [], True
                queue.popleft()
                await self.output.emit_watermark_status(head)
                continue
            if head.done:
                queue.popleft()
                self._emit_into(head, out, out_ts)
                timed = timed and head.ts is not None
                continue
            if not self.ordered:  # completed records of the first segment
                for request in [e for e in self._segment() if e.done]:
                    queue.remove(request)
                    self._emit_into(request, out, out_ts)
                    timed = timed and request.ts is not None
            break
        await self._flush(out, out_ts, timed)

    def _segment(self) -> list[_Request]:
        segment = []
        for element in self._queue:
            if not isinstance(element, _Request):  # a watermark or a status ends the segment
                break
            segment.append(element)
        return segment

    def _emit_into(self, request: _Request, out: list[Any], out_ts: list[int]) -> None:
        self._records -= 1
        assert request.task is not None
        result = request.task.result()
        if request.tag is not None:
            result = [(request.tag, r, request.ts) for r in result]
        out.extend(result)
        if request.ts is not None:
            out_ts.extend([request.ts] * len(result))

    async def _flush(self, out: list[Any], out_ts: list[int], timed: bool) -> None:
        if out:
            await self.output.push(out, out_ts if timed else None)

    async def _wait_progress(self, busy: Callable[[], bool]) -> None:
        """Drain, and while ``busy()`` wait for a request to complete and drain again."""
        progress = self._progress
        assert progress is not None
        while True:
            progress.clear()  # a completion from here on sets it again: no lost wake-up
            await self._drain()
            if not busy():
                return
            await progress.wait()

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        await self._submit(records, timestamps, None)

    async def process_tagged(self, records: list, timestamps: list[int | None], tags: list[int]) -> None:
        """``process_batch``, each output emitted as ``(tags[i], output, timestamps[i])`` (the
        module doc): which input it comes from, whatever the mode's emission order."""
        await self._submit(records, timestamps, tags)

    async def _submit(self, records: list, timestamps: list[int] | list[int | None] | None,
                      tags: list[int] | None) -> None:
        for i, record in enumerate(records):
            if self._records >= self.capacity:
                await self._wait_progress(self._full)
            ts = None if timestamps is None else timestamps[i]
            self._start(record, ts, None if tags is None else tags[i])
        if self._error is not None:
            await self._drain()

    async def process_watermark(self, watermark: Watermark) -> None:
        if not self._queue:
            await self.output.emit_watermark(watermark)
            return
        self._queue.append(watermark)
        await self._drain()

    async def process_watermark_status(self, status: WatermarkStatus) -> None:
        """Behind the records in flight, as a watermark (module docstring)."""
        if not self._queue:
            await self.output.emit_watermark_status(status)
            return
        self._queue.append(status)
        await self._drain()

    async def finish(self) -> None:
        await self._wait_progress(lambda: bool(self._queue))

    def _full(self) -> bool:
        return self._records >= self.capacity

    async def close(self) -> None:
        for element in self._queue:
            if isinstance(element, _Request) and element.task is not None:
                element.task.cancel()
        await super().close()


