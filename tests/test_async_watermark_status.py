"""A watermark status queues behind the records in flight in the async I/O operator, as Flink's
``AsyncWaitOperator`` queues it (flink-streaming-java/src/main/java/org/apache/flink/streaming/
api/operators/async/queue/WatermarkStatusQueueEntry.java: a status is a queue entry, done at
once, emitted in its place; the same rule FLINK-36892 gave the async-state operators).

The scenario is event-time windows over the union of an async lookup's output (input ``a``)
and another input (``b``). Input ``a`` sends a record, then goes IDLE while the lookup of that
record is still running; ``b`` moves its watermark to 100. Forwarded at once, the IDLE lets the
window's valve advance to 100 without ``a``, and the lookup's result arrives late: the window
``[0, 10)`` of key ``a`` is never computed, its record goes to the late side output (what
streamflow did). Queued behind the record, the IDLE reaches the window after it: the record
counts, and the window fires when the valve advances.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

import streamflow as sf
from streamflow.common import Time, Types
from streamflow.datastream import AsyncDataStream, AsyncFunction, StreamExecutionEnvironment
from streamflow.runtime.events import WatermarkStatus
from streamflow.testing import ListSink, Record, ScriptedSource
from streamflow.windowing import TumblingEventTimeWindows

GATE: dict[str, bool] = {}
STARTED: list[Any] = []


class Gated(AsyncFunction):
    """Each call waits until the test opens the gate (Flink's LazyAsyncFunction)."""

    async def async_invoke(self, value: Any) -> list[Any]:
        STARTED.append(value)
        while not GATE.get("open"):
            await asyncio.sleep(0.005)
        return [value]


@pytest.fixture(autouse=True)
def _closed_gate() -> Any:
    GATE.clear()
    STARTED.clear()
    yield


class Job:
    def __init__(self, ordered: bool, savepoint: str | None = None, consumed: tuple = ()) -> None:
        # ``consumed``: the script of ``a`` before the savepoint (a restored source skips it)
        self.a = ScriptedSource(list(consumed), end=False)
        self.b = ScriptedSource([], end=False)
        self.env = StreamExecutionEnvironment().set_parallelism(1)
        if savepoint is not None:
            self.env.configure({"execution.savepoint.path": savepoint})
        self.windows, self.late = ListSink(), ListSink()
        wait = AsyncDataStream.ordered_wait if ordered else AsyncDataStream.unordered_wait
        source_a = self.env.from_source(self.a, None, "a").uid("a")
        a = wait(source_a, Gated(), Time.seconds(30), 10).uid("lookup")
        b = self.env.from_source(self.b, None, "b").uid("b")
        tag = sf.OutputTag("late", Types.PICKLED_BYTE_ARRAY())
        windowed = (
            a.union(b)
            .key_by(lambda t: t[0])
            .window(TumblingEventTimeWindows.of(10))
            .side_output_late_data(tag)
            .reduce(lambda x, y: (x[0], x[1] + y[1]))
            .uid("window")
        )
        windowed.sink_to(self.windows)
        windowed.get_side_output(tag).sink_to(self.late)
        self.client: Any = None

    async def start(self) -> Job:
        self.client = await self.env.execute_async("async-idle")
        return self

    async def end(self) -> None:
        self.a.finish()
        self.b.finish()
        await asyncio.wait_for(self.client.get_job_execution_result(), 30)


async def settle() -> None:
    await asyncio.sleep(0.2)


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
async def test_idle_status_waits_for_the_records_in_flight(ordered: bool) -> None:
    job = await Job(ordered).start()
    job.a.push(Record(("a", 1), 5), WatermarkStatus.IDLE)
    await wait_until(lambda: STARTED == [("a", 1)])
    job.b.push(Record(("b", 1), 6), sf.Watermark(100))
    await settle()
    # the valve must not pass 5 while a's record is in flight: nothing has fired yet
    assert job.windows.results == []
    GATE["open"] = True
    await wait_until(lambda: len(job.windows.results) == 2)
    await job.end()
    assert sorted(job.windows.results) == [("a", 1), ("b", 1)]
    assert job.late.results == []


async def test_a_checkpoint_with_a_queued_status_restores_its_records(tmp_path: Path) -> None:
    """The queue's status is not part of the checkpoint (a restored job starts ACTIVE and its
    sources find their idleness again); the record ahead of it is, and is re-issued."""
    script = (Record(("a", 1), 5), WatermarkStatus.IDLE)
    job = await Job(True).start()
    job.a.push(*script)
    await wait_until(lambda: STARTED == [("a", 1)])
    path = await job.client.trigger_savepoint(str(tmp_path / "sp"))
    await job.client.cancel()
    STARTED.clear()

    GATE["open"] = True
    restored = await Job(True, savepoint=path, consumed=script).start()
    await wait_until(lambda: STARTED == [("a", 1)])
    restored.b.push(Record(("b", 1), 6), sf.Watermark(100))
    restored.a.push(sf.Watermark(100))
    await wait_until(lambda: len(restored.windows.results) == 2)
    await restored.end()
    assert sorted(restored.windows.results) == [("a", 1), ("b", 1)]
    assert restored.late.results == []
