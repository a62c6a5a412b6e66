"""Batch mode fires processing-time timers at the end of input, as Flink's
``BatchExecutionInternalTimeService`` does at the end of each key (after the event-time
timers; a timer registered by a timer callback then is ignored, with a log line). Before,
processing-time windows and timers of a batch job never fired."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from streamflow.common import Time, WatermarkStrategy
from streamflow.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from streamflow.datastream.functions import KeyedProcessFunction
from streamflow.datastream.window import TumblingProcessingTimeWindows

DATA = [("a", 1), ("b", 2), ("a", 3)]


def _env(mode: RuntimeExecutionMode) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    return env.set_runtime_mode(mode)


@pytest.mark.parametrize("mode", [RuntimeExecutionMode.BATCH, RuntimeExecutionMode.AUTOMATIC])
def test_processing_time_windows_fire_at_the_end_of_a_batch_job(mode: RuntimeExecutionMode) -> None:
    keyed = _env(mode).from_collection(DATA).key_by(lambda x: x[0])
    windows = keyed.window(TumblingProcessingTimeWindows.of(Time.hours(1)))
    assert sorted(windows.reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect()) == [
        ("a", 4),
        ("b", 2),
    ]


def test_a_streaming_job_does_not_fire_them_at_the_end_of_input() -> None:
    """As Flink's streaming mode: pending processing-time timers do not fire when input ends."""
    keyed = _env(RuntimeExecutionMode.STREAMING).from_collection(DATA).key_by(lambda x: x[0])
    windows = keyed.window(TumblingProcessingTimeWindows.of(Time.hours(1)))
    assert list(windows.reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect()) == []


class Timers(KeyedProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        service = ctx.timer_service()
        service.register_processing_time_timer(service.current_processing_time() + 3_600_000)
        service.register_event_time_timer(value[1] * 1000)
        yield "element", value

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        domain = ctx.time_domain().name
        # registered while the timer service is quiesced: ignored, as in Flink
        ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 1)
        yield domain, ctx.get_current_key(), ctx.timer_service().current_watermark()


def test_keyed_process_function_timers_fire_at_the_end_of_a_batch_job(
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = _env(RuntimeExecutionMode.BATCH)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda e, ts: e[1] * 1000
    )
    stream = env.from_collection(DATA).assign_timestamps_and_watermarks(strategy)
    with caplog.at_level(logging.WARNING, logger="streamflow.runtime.timer_operator"):
        out = list(stream.key_by(lambda x: x[0]).process(Timers()).execute_and_collect())
    timers = [r for r in out if r[0] != "element"]
    end = 2**63 - 1
    # every event-time timer, then every processing-time timer (a's two may be one: the same
    # millisecond), all at the end; the registrations in on_timer are ignored
    events = [("EVENT_TIME", "a", end), ("EVENT_TIME", "a", end), ("EVENT_TIME", "b", end)]
    assert sorted(t for t in timers if t[0] == "EVENT_TIME") == events
    processing = sorted(t for t in timers if t[0] == "PROCESSING_TIME")
    assert processing in (
        [("PROCESSING_TIME", "a", end), ("PROCESSING_TIME", "b", end)],
        [("PROCESSING_TIME", "a", end), ("PROCESSING_TIME", "a", end), ("PROCESSING_TIME", "b", end)],
    )
    assert "timer service is quiesced" in caplog.text
