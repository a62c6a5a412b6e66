"""streamflow.testing.ScriptedSource: scripted records, watermarks, idleness and failures end to end."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from waiting import wait_until

import streamflow as sf
from streamflow.runtime.events import WatermarkStatus
from streamflow.testing import Fail, ListSink, Record, ScriptedSource
from streamflow.windowing import TumblingEventTimeWindows

IDLE, ACTIVE = WatermarkStatus.IDLE, WatermarkStatus.ACTIVE


def total(key: str, ctx: Any, elements: Any) -> Any:
    yield (key, ctx.window().end, sum(e[1] for e in elements))


def windows(env: sf.StreamExecutionEnvironment, stream: sf.DataStream) -> ListSink:
    sink = ListSink()
    stream.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(10)).process(total).sink_to(sink)
    return sink


async def settle(rounds: int = 40) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


async def test_source_watermarks_fire_windows_in_order() -> None:
    source = ScriptedSource(
        [Record(("a", 1), 1), Record(("a", 2), 5), sf.Watermark(9), Record(("a", 4), 12)], end=False
    )
    env = sf.StreamExecutionEnvironment()
    sink = windows(env, env.from_source(source, None, "scripted"))
    client = await env.execute_async()
    await settle()
    assert sink.results == [("a", 10, 3)]  # fired by the source's own watermark
    source.finish()
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert sink.results == [("a", 10, 3), ("a", 20, 4)]  # the end of input fires the rest


@pytest.mark.parametrize("quiet_goes_idle", [True, False])
async def test_an_idle_input_does_not_hold_back_the_valve(quiet_goes_idle: bool) -> None:
    busy = ScriptedSource(
        [Record(("a", 1), 1), sf.Watermark(5), Record(("a", 2), 15), sf.Watermark(25)], end=False
    )
    quiet_script: list = [Record(("b", 7), 2), sf.Watermark(3)]
    if quiet_goes_idle:
        quiet_script.append(IDLE)
    quiet = ScriptedSource(quiet_script, end=False)
    env = sf.StreamExecutionEnvironment()
    a = env.from_source(busy, None, "busy")
    b = env.from_source(quiet, None, "quiet")
    sink = windows(env, a.union(b))
    client = await env.execute_async()
    await settle()
    if quiet_goes_idle:
        assert sorted(sink.results) == [("a", 10, 1), ("a", 20, 2), ("b", 10, 7)]
    else:
        assert sink.results == []  # the quiet input's watermark (3) holds every window back
    # the quiet input comes back with a late record: it is active again but cannot pull the
    # watermark back, so its record for [0, 10) is late and dropped (and counted)
    quiet.push(ACTIVE, Record(("b", 100), 4), sf.Watermark(40))
    await settle()
    busy.finish()
    quiet.finish()
    result = await asyncio.wait_for(client.get_job_execution_result(), 60)
    late = [v for k, v in result.metrics.items() if k.endswith("numLateRecordsDropped")]
    if quiet_goes_idle:
        assert late == [1]
        assert ("b", 10, 107) not in sink.results
    else:
        assert late == [0]
        assert sorted(sink.results) == [("a", 10, 1), ("a", 20, 2), ("b", 10, 107)]


def test_scripted_failure_names_the_source() -> None:
    env = sf.StreamExecutionEnvironment()
    env.from_source(ScriptedSource([1, 2, Fail(ConnectionError("broker gone")), 3]), None, "feed").print()
    with pytest.raises(ConnectionError, match="broker gone") as info:
        env.execute()
    assert "source 'feed" in "\n".join(info.value.__notes__)


async def test_position_survives_a_savepoint(tmp_path: Any) -> None:
    source = ScriptedSource([("k", 1), ("k", 2)], end=False)
    env = sf.StreamExecutionEnvironment()
    out: list = []
    env.from_source(source, None, "s").uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(
        out.append
    )
    client = await env.execute_async("scripted")
    await settle()
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)
    again = ScriptedSource([("k", 1), ("k", 2), ("k", 4)])
    env2 = sf.StreamExecutionEnvironment().configure({"execution.savepoint.path": path})
    out2: list = []
    env2.from_source(again, None, "s").uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(
        out2.append
    )
    await (await env2.execute_async("scripted")).get_job_execution_result()
    assert out == [("k", 1), ("k", 3)]
    assert out2 == [("k", 7)]  # continues after the two items already consumed, with their state


async def test_checkpoint_recorder_sees_snapshots_before_completions() -> None:
    from streamflow.testing import CheckpointRecorder

    source = ScriptedSource([("k", i) for i in range(5)], end=False)
    env = sf.StreamExecutionEnvironment()
    recorder = CheckpointRecorder()
    env.from_source(source, None, "s").sink_to(recorder)
    client = await env.execute_async()
    await settle()
    await client.trigger_checkpoint()
    await client.trigger_checkpoint()
    await settle()
    source.push(("k", 5))
    source.finish()
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert recorder.checkpoints("snapshot") == [1, 2]
    assert recorder.checkpoints("complete") == [1, 2]
    snap1, done1 = recorder.events.index(("snapshot", 1)), recorder.events.index(("complete", 1))
    assert snap1 < done1 < recorder.events.index(("snapshot", 2))
    assert [v for e, v in recorder.events if e == "record"] == [("k", i) for i in range(6)]


async def test_all_read_tells_when_the_readers_read_every_item() -> None:
    """``all_read()``: False before a reader starts and after a push, True once the items read."""
    source = ScriptedSource([1, sf.Watermark(5), 2], end=False)
    assert not source.all_read()
    env = sf.StreamExecutionEnvironment()
    sink = ListSink()
    env.from_source(source, None, "scripted").sink_to(sink)
    client = await env.execute_async()
    await wait_until(source.all_read)
    source.push(3)
    assert not source.all_read()
    await wait_until(source.all_read)
    source.finish()
    await asyncio.wait_for(client.get_job_execution_result(), 30)
    assert sink.results == [1, 2, 3]
