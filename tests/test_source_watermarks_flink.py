"""Flink's StreamSourceOperatorWatermarksTest and idleness on a keyed pipeline across a restore,
through the public API.

StreamSourceOperatorWatermarksTest (flink-streaming-java/src/test/java/org/apache/flink/
streaming/runtime/operators/StreamSourceOperatorWatermarksTest.java): a finite source ends
with the maximum watermark, after its last record; a cancelled source emits none (a job
cancelled with open windows and timers fires nothing). The watermark is observed where Flink's
test reads the output: an event-time timer far in the future fires only on the maximum
watermark.

Idleness (WatermarkStrategy.with_idleness; Flink's WatermarksWithIdleness and the valve's
idle channels) on a keyed window pipeline over two sources, one of which stops: its input goes
idle and the windows fire from the other. A savepoint restores the windows; the restored
sources start ACTIVE (statuses are not part of a checkpoint in Flink either), the stopped one
goes idle again after the timeout, and the windows fire again, at parallelism 1 and 4.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

import streamflow as sf
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.functions import KeyedProcessFunction
from streamflow.runtime.events import MAX_WATERMARK
from streamflow.testing import ListSink, Record, ScriptedSource
from streamflow.windowing import TumblingEventTimeWindows


class FarTimer(KeyedProcessFunction):
    """Each record passes; its key gets a timer at 1,000,000, which only MAX reaches."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        ctx.timer_service().register_event_time_timer(1_000_000)
        yield "record", value

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield "timer", ctx.timer_service().current_watermark()


def _job(source: ScriptedSource, sink: ListSink, parallelism: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment().set_parallelism(parallelism)
    stream = env.from_source(source, None, "source").set_parallelism(1)
    timed = stream.key_by(lambda v: v % 2).process(FarTimer()).set_parallelism(parallelism)
    timed.sink_to(sink).set_parallelism(1)
    return env


@pytest.mark.parametrize("parallelism", [1, 4])
def test_max_watermark_is_forwarded_last_for_finite_source(parallelism: int) -> None:
    """StreamSourceOperatorWatermarksTest#testEmitMaxWatermarkForFiniteSource and
    #testMaxWatermarkIsForwardedLastForFiniteSource: the records, then the maximum watermark
    (every key's timer fires at MAX, after every record)."""
    sink = ListSink()
    _job(ScriptedSource([Record(v, v) for v in range(10)]), sink, parallelism).execute()
    records = [r for r in sink.results if r[0] == "record"]
    timers = [r for r in sink.results if r[0] == "timer"]
    assert sorted(v for _, v in records) == list(range(10))
    assert timers == [("timer", MAX_WATERMARK)] * 2
    assert sink.results[-2:] == timers


@pytest.mark.parametrize("immediately", [True, False], ids=["immediate", "async"])
async def test_no_max_watermark_on_cancel(immediately: bool) -> None:
    """StreamSourceOperatorWatermarksTest#testNoMaxWatermarkOnImmediateCancel and
    #testNoMaxWatermarkOnAsyncCancel: a cancelled job's source emits no maximum watermark, so
    no timer (and no window) fires."""
    source = ScriptedSource([], end=False)
    sink = ListSink()
    client = await _job(source, sink, 2).execute_async("cancelled")
    if not immediately:
        source.push(*[Record(v, v) for v in range(10)])
        await wait_until(lambda: len(sink.results) == 10)
    await client.cancel()
    await asyncio.sleep(0.1)
    assert all(kind == "record" for kind, _ in sink.results)


def _strategy() -> sf.WatermarkStrategy:
    return sf.WatermarkStrategy.for_monotonous_timestamps().with_idleness(150)


class IdleJob:
    """Sources ``a`` and ``b`` (idle after 150 ms without records), unioned, keyed tumbling
    windows of 100 ms summing ``(key, n)`` records."""

    def __init__(self, parallelism: int, savepoint: str | None = None, consumed: tuple = ((), ())) -> None:
        self.a = ScriptedSource(list(consumed[0]), end=False)
        self.b = ScriptedSource(list(consumed[1]), end=False)
        self.env = StreamExecutionEnvironment().set_parallelism(parallelism)
        self.env.get_config().set_auto_watermark_interval(20)
        if savepoint is not None:
            self.env.configure({"execution.savepoint.path": savepoint})
        self.sink = ListSink()
        a = self.env.from_source(self.a, _strategy(), "a").uid("a").set_parallelism(1)
        b = self.env.from_source(self.b, _strategy(), "b").uid("b").set_parallelism(1)
        (
            a.union(b)
            .key_by(lambda t: t[0])
            .window(TumblingEventTimeWindows.of(100))
            .reduce(lambda x, y: (x[0], x[1] + y[1]))
            .uid("windows")
            .sink_to(self.sink)
            .set_parallelism(1)
        )
        self.client: Any = None

    async def start(self) -> IdleJob:
        self.client = await self.env.execute_async("idle-restore")
        return self


@pytest.mark.parametrize(("old", "new"), [(1, 1), (4, 4), (1, 4), (4, 1)])
async def test_idleness_on_a_keyed_pipeline_across_a_restore(tmp_path: Path, old: int, new: int) -> None:
    first_a = [Record(("a", 1), 10)]
    first_b = [Record(("b", 1), 20), Record(("b", 1), 150), Record(("b", 1), 250)]
    job = await IdleJob(old).start()
    job.a.push(*first_a)
    job.b.push(*first_b)
    # a goes idle at 9 and b at 249: the flush of the idle valve fires [0, 100) and [100, 200)
    await wait_until(lambda: len(job.sink.results) == 3)
    assert sorted(job.sink.results) == [("a", 1), ("b", 1), ("b", 1)]
    path = await job.client.trigger_savepoint(str(tmp_path / "sp"))
    await job.client.cancel()

    restored = await IdleJob(new, savepoint=path, consumed=(tuple(first_a), tuple(first_b))).start()
    await asyncio.sleep(0.3)  # both go idle again: nothing more to fire before b's records
    assert restored.sink.results == []
    restored.b.push(Record(("b", 1), 320), Record(("b", 1), 420))
    # b alone (a idle) moves event time to 419: [200, 300) with the restored 250, and [300, 400)
    await wait_until(lambda: len(restored.sink.results) == 2)
    await asyncio.sleep(0.3)
    await restored.client.cancel()
    assert sorted(restored.sink.results) == [("b", 1), ("b", 1)]
