"""Flink 1.20's operator metrics ``numFiredTimers`` and ``numFiredTimersPerSecond``
(FLINK-35065): every timer a keyed operator fires is counted once, in both time domains, on
both backends, in streaming and batch (sorted input) mode; a window fast path counts the
timers the general window operator would have fired (one per key and window, and with
allowed lateness one more per key at the window's cleanup).

Flink's ``InternalTimerServiceImplTest`` asserts the counter after ``advanceWatermark`` and
``onProcessingTime``; here the counts come from a job, through ``JobClient.get_metrics()``
(what the REST ``/jobs/<id>/metrics`` and Prometheus ``/metrics`` read) and the job result.
"""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.request
from typing import Any

import pytest
from waiting import wait_until

import streamflow as sf
from streamflow.common import Time
from streamflow.datastream import EmbeddedRocksDBStateBackend, TimeDomain
from streamflow.datastream.functions import KeyedProcessFunction
from streamflow.datastream.window import EventTimeTrigger, TumblingEventTimeWindows
from streamflow.execution_mode import RuntimeExecutionMode
from streamflow.rest.prometheus import render
from streamflow.testing import ListSink, Record, ScriptedSource

KEYS = 5


class _Timers(KeyedProcessFunction):
    """Per record: an event-time timer at ``ts + 100`` and a processing-time timer due now."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 100)
        ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time())
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield (ctx.time_domain(), ctx.get_current_key())


def _env(backend: str, batch: bool) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(1)
    if backend == "rocksdb":
        env.set_state_backend(EmbeddedRocksDBStateBackend())
    if batch:
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    return env


def _fired(metrics: dict[str, Any], name: str = "numFiredTimers") -> int:
    return sum(v for k, v in metrics.items() if k.endswith(f"].{name}"))


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
async def test_event_and_processing_timers_are_counted_streaming(backend: str) -> None:
    """N event-time timers (one per key) and M processing-time timers (one per key, due at
    once): numFiredTimers == N + M, read from the running job and the result."""
    source = ScriptedSource([Record((f"k{i}", i), 10 * i) for i in range(KEYS)], end=False)
    env = _env(backend, batch=False)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        env.configure({"rest.port": sock.getsockname()[1]})
    sink = ListSink()
    env.from_source(source, None, "timers").key_by(lambda e: e[0]).process(_Timers()).uid("keyed").sink_to(
        sink
    )
    client = await env.execute_async()
    processing = lambda: [r for r in sink.results if r[0] == TimeDomain.PROCESSING_TIME]  # noqa: E731
    await wait_until(lambda: len(processing()) == KEYS)
    await wait_until(lambda: _fired(client.get_metrics()) == KEYS)  # only the processing timers yet
    # the job page's snapshot: its operator table and the task (Flink's TaskIOMetricGroup)
    snap = client.get_metrics_snapshot()
    (subtask,) = [s for v in snap["vertices"] for s in v["subtasks"] if "KeyedProcess" in s["name"]]
    assert [op["numFiredTimers"] for op in subtask["operators"]] == [None, KEYS, None]
    assert subtask["numFiredTimers"] == KEYS
    assert client.get_metrics()[f"{subtask['name']}.numFiredTimers"] == KEYS
    # REST /jobs/<id>/metrics and Prometheus /metrics
    rest = f"{client.rest.url}/jobs/{client.job_id}/metrics?get=" + ",".join(
        f"{uid}.numFiredTimers" for uid in ("keyed[0]", "timers[0]")
    )
    body = await asyncio.to_thread(lambda: urllib.request.urlopen(rest, timeout=10).read())
    assert json.loads(body) == [{"id": "keyed[0].numFiredTimers", "value": str(KEYS)}]
    text = render(client).decode()
    assert f'streamflow_task_numFiredTimers{{job_id="{client.job_id}"' in text
    assert (
        "streamflow_operator_numFiredTimers{" in text
        and "streamflow_operator_numFiredTimersPerSecond{" in text
    )
    source.finish()  # the end of input: watermark MAX fires the event-time timers
    result = await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert len(sink.results) == 2 * KEYS
    assert _fired(result.metrics) == 2 * KEYS
    assert _fired(result.metrics, "numFiredTimersPerSecond") == 2 * KEYS  # the meter's count


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_event_and_processing_timers_are_counted_batch(backend: str) -> None:
    """Batch mode's sorted input fires each key's timers at its end: counted the same."""
    env = _env(backend, batch=True)
    sink = ListSink()
    stream = env.from_collection([(f"k{i}", i) for i in range(KEYS)]).assign_timestamps_and_watermarks(
        sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: 10 * e[1])
    )
    stream.key_by(lambda e: e[0]).process(_Timers()).uid("keyed").sink_to(sink)
    result = env.execute()
    assert len(sink.results) == 2 * KEYS
    assert _fired(result.metrics) == 2 * KEYS
    assert _fired(result.metrics, "numFiredTimersPerSecond") == 2 * KEYS


class _NotTheDefaultTrigger(EventTimeTrigger):
    """EventTimeTrigger's behaviour, another type: the window operator takes its general path."""


def _window_job(backend: str, batch: bool, general: bool, lateness: int) -> tuple[list, int]:
    env = _env(backend, batch)
    sink = ListSink()
    # windows [0, 10), [10, 20), [20, 30): key a in all three, b in two, c in one; after the
    # watermark 12 fired [0, 10), b and a new key d are late for it (within a lateness of 5:
    # fired again at once, no timer, and d's cleanup timer; else dropped)
    script = [Record(("a", 1), 1), Record(("b", 2), 2), Record(("a", 12), 12), sf.Watermark(12),
              Record(("b", 3), 3), Record(("d", 4), 4), Record(("c", 13), 13), Record(("b", 14), 14),
              Record(("a", 25), 25), Record(("a", 27), 27)]  # fmt: skip
    stream = env.from_source(ScriptedSource(script), None, "windows")
    windowed = stream.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
    if general:
        windowed = windowed.trigger(_NotTheDefaultTrigger())
    if lateness:
        windowed = windowed.allowed_lateness(lateness)
    windowed.reduce(lambda a, b: (a[0], a[1] + b[1])).sink_to(sink)
    result = env.execute()
    return sorted(sink.results), _fired(result.metrics)


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize("lateness", [0, 5])
def test_window_fast_and_general_paths_count_the_same_timers(batch: bool, lateness: int) -> None:
    """Streaming: six (key, window) pairs on time, six timers without lateness (a window's
    trigger and cleanup timer are one: same key, window and time), with lateness one cleanup
    timer more each and d's (its late element fires the window at once: no timer), 13. Batch:
    nothing is late, seven pairs: 7 and 14."""
    fast = _window_job("heap", batch, general=False, lateness=lateness)
    general = _window_job("heap", batch, general=True, lateness=lateness)
    rocks = _window_job("rocksdb", batch, general=False, lateness=lateness)  # RocksDB: general path
    expected = {(False, 0): 6, (False, 5): 13, (True, 0): 7, (True, 5): 14}[batch, lateness]
    assert (fast[1], general[1], rocks[1]) == (expected,) * 3
    assert fast[0] == general[0] == rocks[0]
