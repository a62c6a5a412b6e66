"""Event time end to end: idleness, windows of every kind, lateness, timers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import streamflow as sf
from streamflow.testing import ManualClock
from streamflow.windowing import (
    CountEvictor,
    CountTrigger,
    EventTimeSessionWindows,
    GlobalWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)


class Feed:
    """An endless async source the test pushes records into."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        while True:
            yield await self.queue.get()

    def push(self, *records: Any) -> None:
        for r in records:
            self.queue.put_nowait(r)


async def settle(rounds: int = 30) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def window_sum(key: str, ctx: Any, elements: Any) -> Any:
    yield (key, ctx.window().start, ctx.window().end, sum(e[1] for e in elements))


def strategy(idle_ms: int | None = None) -> sf.WatermarkStrategy:
    s = sf.WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(lambda e: e[2])
    return s.with_idleness(idle_ms) if idle_ms else s


@pytest.mark.parametrize("idleness", [True, False])
async def test_union_with_a_source_that_stops_fires_only_with_idleness(idleness: bool) -> None:
    clock = ManualClock(1_000_000)
    env = sf.StreamExecutionEnvironment(clock=clock)
    busy, quiet = Feed(), Feed()
    a = env.from_async_iterable(lambda: busy.__aiter__()).assign_timestamps_and_watermarks(
        strategy(1_000 if idleness else None)
    )
    b = env.from_async_iterable(lambda: quiet.__aiter__()).assign_timestamps_and_watermarks(
        strategy(1_000 if idleness else None)
    )
    results: list[tuple] = []
    a.union(b).key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(10)).process(window_sum).add_sink(
        results.append
    )
    client = await env.execute_async()
    quiet.push(("k", 1, 1))  # the quiet source produces once, then stops
    busy.push(("k", 2, 2), ("k", 3, 5))
    await settle()
    for step in range(10):  # busy keeps producing; 200 ms periodic watermarks; quiet goes idle
        busy.push(("k", 1, 20 + step * 10))
        clock.advance(200)
        await settle()
    await asyncio.wait_for(client.cancel(), 30)
    if idleness:
        assert ("k", 0, 10, 6) in results  # [0, 10) fired although quiet's watermark stayed at 0
    else:
        assert results == []  # the quiet input holds the watermark back


async def late_pipeline(lateness: int) -> tuple[list, list, dict]:
    env = sf.StreamExecutionEnvironment()
    late = sf.OutputTag("late")
    data = [
        ("k", 1, 1_000),
        ("k", 2, 12_000),  # watermark -> 11_999: [0, 10_000) fires with 1
        ("k", 4, 9_000),  # late but within lateness 5_000: updates [0, 10_000) to 5
        ("k", 8, 16_000),  # watermark -> 15_999 > 9_999 + 5_000: [0, 10_000) is cleaned up
        ("k", 16, 3_000),  # beyond allowed lateness: side output
    ]
    env.set_auto_watermark_interval(0)  # periodic emission off: watermark per record below

    class PerRecord(sf.WatermarkGenerator):
        def __init__(self) -> None:
            self.max = -(2**63)

        def on_event(self, event: Any, ts: int, output: Any) -> None:
            self.max = max(self.max, ts)
            output.emit_watermark(sf.runtime.events.Watermark(self.max - 1))

        def on_periodic_emit(self, output: Any) -> None:
            pass

    wm = sf.WatermarkStrategy.for_generator(PerRecord).with_timestamp_assigner(lambda e: e[2])
    env.set_batch_size(1)
    windowed = (
        env.from_collection(data)
        .assign_timestamps_and_watermarks(wm)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(10_000))
        .allowed_lateness(lateness)
        .side_output_late_data(late)
        .process(window_sum)
    )
    side = sf.CollectSink()
    windowed.get_side_output(late).sink_to(side)
    main = sf.CollectSink()
    windowed.sink_to(main)
    client = await env.execute_async()
    result = await asyncio.wait_for(client.get_job_execution_result(), 60)
    return main.results, side.results, result.metrics


async def test_late_records_within_lateness_update_and_beyond_go_to_side_output() -> None:
    main, side, metrics = await late_pipeline(5_000)
    assert main == [
        ("k", 0, 10_000, 1),  # on time
        ("k", 0, 10_000, 5),  # late firing within allowed lateness
        ("k", 10_000, 20_000, 10),  # the final watermark fires the rest
    ]
    assert side == [("k", 16, 3_000)]
    late_counts = [v for k, v in metrics.items() if k.endswith("numLateRecords")]
    assert late_counts == [1]


async def test_without_lateness_a_late_record_is_side_output_and_counted() -> None:
    main, side, metrics = await late_pipeline(0)
    assert main == [("k", 0, 10_000, 1), ("k", 10_000, 20_000, 10)]
    assert side == [("k", 4, 9_000), ("k", 16, 3_000)]
    assert [v for k, v in metrics.items() if k.endswith("numLateRecords")] == [2]


def run_window(
    window: Any, data: list, *, apply: str = "process", trigger: Any = None, evictor: Any = None
) -> list:
    env = sf.StreamExecutionEnvironment().set_batch_size(3)
    ws = (
        env.from_collection(data)
        .assign_timestamps_and_watermarks(strategy())
        .key_by(lambda e: e[0])
        .window(window)
    )
    if trigger is not None:
        ws = ws.trigger(trigger)
    if evictor is not None:
        ws = ws.evictor(evictor)
    if apply == "process":
        out = ws.process(window_sum)
    elif apply == "reduce":
        out = ws.reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])))
    elif apply == "reduce+process":
        out = ws.reduce(lambda a, b: (a[0], a[1] + b[1], a[2]), window_sum)
    else:

        class Count(sf.AggregateFunction):
            def create_accumulator(self) -> int:
                return 0

            def add(self, value: Any, acc: int) -> int:
                return acc + 1

            def get_result(self, acc: int) -> int:
                return acc

            def merge(self, a: int, b: int) -> int:
                return a + b

        out = ws.aggregate(Count(), lambda key, ctx, counts: [(key, ctx.window().end, counts[0])])
    return list(out.execute_and_collect())


DATA = [("a", 1, 0), ("a", 2, 4), ("b", 5, 3), ("a", 4, 11), ("a", 8, 30), ("b", 16, 33)]


@pytest.mark.parametrize(
    ("window", "apply", "expected"),
    [
        (
            TumblingEventTimeWindows.of(10),
            "process",
            [("a", 0, 10, 3), ("b", 0, 10, 5), ("a", 10, 20, 4), ("a", 30, 40, 8), ("b", 30, 40, 16)],
        ),
        (
            TumblingEventTimeWindows.of(10),
            "reduce",
            [("a", 3, 4), ("b", 5, 3), ("a", 4, 11), ("a", 8, 30), ("b", 16, 33)],
        ),
        (
            TumblingEventTimeWindows.of(10),
            "reduce+process",
            [("a", 0, 10, 3), ("b", 0, 10, 5), ("a", 10, 20, 4), ("a", 30, 40, 8), ("b", 30, 40, 16)],
        ),
        (
            TumblingEventTimeWindows.of(10),
            "aggregate",
            [("a", 10, 2), ("b", 10, 1), ("a", 20, 1), ("a", 40, 1), ("b", 40, 1)],
        ),
        (
            SlidingEventTimeWindows.of(10, 5),
            "process",
            [
                ("a", -5, 5, 3),
                ("b", -5, 5, 5),
                ("a", 0, 10, 3),
                ("b", 0, 10, 5),
                ("a", 5, 15, 4),
                ("a", 10, 20, 4),
                ("a", 25, 35, 8),
                ("b", 25, 35, 16),
                ("a", 30, 40, 8),
                ("b", 30, 40, 16),
            ],
        ),
        (
            EventTimeSessionWindows.with_gap(5),
            "process",
            [("a", 0, 9, 3), ("b", 3, 8, 5), ("a", 11, 16, 4), ("a", 30, 35, 8), ("b", 33, 38, 16)],
        ),
        (
            EventTimeSessionWindows.with_gap(5),
            "aggregate",
            [("a", 9, 2), ("b", 8, 1), ("a", 16, 1), ("a", 35, 1), ("b", 38, 1)],
        ),
    ],
)
def test_event_time_windows(window: Any, apply: str, expected: list) -> None:
    assert sorted(run_window(window, DATA, apply=apply)) == sorted(expected)


def test_global_window_with_count_trigger_and_count_window() -> None:
    data = [("a", i, i) for i in range(7)]
    out = run_window(GlobalWindows.create(), data, apply="reduce", trigger=CountTrigger.of(3))
    assert out == [("a", 3, 2), ("a", 15, 5)]  # fires every 3 elements without purging
    env = sf.StreamExecutionEnvironment()
    counted = (
        env.from_collection(data)
        .key_by(lambda e: e[0])
        .count_window(3)
        .reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
    )
    assert list(counted.execute_and_collect()) == [("a", 3, 2), ("a", 12, 5)]  # purging


def test_evictor_keeps_only_the_last_elements() -> None:
    data = [("a", i, i) for i in range(1, 6)]
    out = run_window(TumblingEventTimeWindows.of(100), data, evictor=CountEvictor.of(2))
    assert out == [("a", 0, 100, 9)]


async def test_processing_time_windows_with_manual_clock() -> None:
    clock = ManualClock(0)
    env = sf.StreamExecutionEnvironment(clock=clock)
    feed = Feed()
    results: list = []
    env.from_async_iterable(lambda: feed.__aiter__()).key_by(lambda e: e[0]).window(
        TumblingProcessingTimeWindows.of(1_000)
    ).process(window_sum).add_sink(results.append)
    client = await env.execute_async()
    feed.push(("a", 1, 0), ("a", 2, 0))
    await settle()
    clock.advance(500)
    feed.push(("a", 4, 0))
    await settle()
    assert results == []
    clock.advance(500)  # processing time reaches 999: the window [0, 1000) fires
    await settle()
    assert results == [("a", 0, 1_000, 7)]
    feed.push(("a", 8, 0))
    await settle()  # processed at 1_000: window [1000, 2000)
    clock.advance(1_000)
    await settle()
    await asyncio.wait_for(client.cancel(), 30)
    assert results == [("a", 0, 1_000, 7), ("a", 1_000, 2_000, 8)]


class Timers(sf.KeyedProcessFunction):
    def process_element(self, value: tuple, ctx: Any) -> Any:
        ctx.timer_service().register_event_time_timer(value[2] + 10)
        if value[1] == "cancel":
            ctx.timer_service().delete_event_time_timer(value[2] + 10)
        ctx.timer_service().register_processing_time_timer(5_000)
        return []

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield (ctx.get_current_key(), timestamp, ctx.time_domain(), ctx.timestamp())


async def test_keyed_process_function_event_and_processing_timers() -> None:
    clock = ManualClock(0)
    env = sf.StreamExecutionEnvironment(clock=clock)
    feed = Feed()
    out: list = []
    env.from_async_iterable(lambda: feed.__aiter__()).assign_timestamps_and_watermarks(strategy()).key_by(
        lambda e: e[0]
    ).process(Timers()).add_sink(out.append)
    client = await env.execute_async()
    feed.push(("a", "x", 0), ("b", "cancel", 5), ("b", "x", 50))
    await settle()
    clock.advance(200)  # periodic watermark 49: a's timer at 10 fires; b's at 15 was deleted
    await settle()
    assert out == [("a", 10, sf.TimeDomain.EVENT_TIME, 10)]
    clock.advance(5_000)  # processing time 5_200: one processing timer per key
    await settle()
    await asyncio.wait_for(client.cancel(), 30)
    # ctx.timestamp() is the timer's time in both domains (Flink's OnTimerContext, PyFlink)
    assert sorted(out[1:]) == [("a", 5_000, 1, 5_000), ("b", 5_000, 1, 5_000)]


def test_window_without_timestamps_is_a_clear_error() -> None:
    env = sf.StreamExecutionEnvironment()
    env.from_collection([("a", 1)]).key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(5)).reduce(
        lambda a, b: a
    ).print()
    with pytest.raises(ValueError, match="assign_timestamps_and_watermarks"):
        env.execute()


def test_bounded_source_fires_every_window_at_the_end() -> None:
    data = [("k", 1, t) for t in range(0, 100_000, 1_000)]
    assert len(run_window(TumblingEventTimeWindows.of(10_000), data)) == 10


def test_custom_trigger_fires_early_and_at_the_end() -> None:
    from streamflow.windowing import Trigger, TriggerResult
    from streamflow.windowing.context import TriggerStateDescriptor

    count = TriggerStateDescriptor("n", lambda a, b: a + b)

    class EveryTwo(Trigger):
        """Fires (without purging) on every second element, and at the window's end."""

        def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
            ctx.register_event_time_timer(window.max_timestamp())
            state = ctx.get_partitioned_state(count)
            state.add(1)
            return TriggerResult.FIRE if state.get() % 2 == 0 else TriggerResult.CONTINUE

        def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
            return TriggerResult.FIRE_AND_PURGE if time == window.max_timestamp() else TriggerResult.CONTINUE

        def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
            return TriggerResult.CONTINUE

        def clear(self, window: Any, ctx: Any) -> None:
            ctx.get_partitioned_state(count).clear()
            ctx.delete_event_time_timer(window.max_timestamp())

    data = [("a", 1, 0), ("a", 2, 1), ("a", 4, 2)]
    out = run_window(TumblingEventTimeWindows.of(10), data, trigger=EveryTwo())
    assert out == [("a", 0, 10, 3), ("a", 0, 10, 7)]  # early firing after two, final at the end


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        # records at 0, 300, 1500; slide 500, size 1000: windows that end by processing time 3000
        (
            "sliding",
            [("a", -500, 500, 3), ("a", 0, 1_000, 3), ("a", 1_000, 2_000, 4), ("a", 1_500, 2_500, 4)],
        ),
        # sessions with a 400 ms gap: [0, 700) merges the first two, [1500, 1900) alone
        ("session", [("a", 0, 700, 3), ("a", 1_500, 1_900, 4)]),
    ],
)
async def test_processing_time_sliding_and_session_windows(window: str, expected: list) -> None:
    from streamflow.windowing import ProcessingTimeSessionWindows, SlidingProcessingTimeWindows

    assigner = (
        SlidingProcessingTimeWindows.of(1_000, 500)
        if window == "sliding"
        else ProcessingTimeSessionWindows.with_gap(400)
    )
    clock = ManualClock(0)
    env = sf.StreamExecutionEnvironment(clock=clock)
    feed = Feed()
    results: list = []
    env.from_async_iterable(lambda: feed.__aiter__()).key_by(lambda e: e[0]).window(assigner).process(
        window_sum
    ).add_sink(results.append)
    client = await env.execute_async()
    for at, value in ((0, 1), (300, 2), (1_500, 4)):
        clock.set(at)
        feed.push(("a", value, 0))
        await settle()
    for _ in range(30):  # let processing time pass in steps: every due window fires
        clock.advance(100)
        await settle(5)
    await asyncio.wait_for(client.cancel(), 30)
    assert sorted(results) == sorted(expected)


class Punctuated(sf.WatermarkGenerator):
    """Emits a watermark at the timestamp of every record marked "wm" (punctuated)."""

    def on_event(self, event: Any, timestamp: int, output: Any) -> None:
        if event[1] == "wm":
            output.emit_watermark(sf.Watermark(timestamp))


def test_punctuated_watermark_cuts_the_batch_so_later_records_are_late() -> None:
    """Issue 8 item 7: a record after a punctuated watermark (same source batch) sees it."""
    env = sf.StreamExecutionEnvironment().set_auto_watermark_interval(0)
    late = sf.OutputTag("late")
    data = [("a", "x", 100), ("a", "wm", 2500), ("a", "x", 300), ("a", "x", 2600)]
    wm = sf.WatermarkStrategy.for_generator(Punctuated).with_timestamp_assigner(lambda e: e[2])
    windowed = (
        env.from_collection(data)  # one batch: the default batch size is far larger
        .assign_timestamps_and_watermarks(wm)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(1000))
        .side_output_late_data(late)
        .process(lambda key, ctx, els: [(key, ctx.window().start, len(list(els)))])
    )
    side = sf.CollectSink()
    windowed.get_side_output(late).sink_to(side)
    main = sf.CollectSink()
    windowed.sink_to(main)
    env.execute()
    assert main.results == [("a", 0, 1), ("a", 2000, 2)]
    assert side.results == [("a", "x", 300)]  # behind the watermark 2500: late, as in Flink


@pytest.mark.parametrize(
    ("strategy", "warned"),
    [(sf.WatermarkStrategy.no_watermarks(), False), (sf.WatermarkStrategy.for_monotonous_timestamps(), True)],
    ids=["no_watermarks", "monotonous"],
)
def test_records_without_timestamps_are_warned_about_only_where_event_time_was_meant_to_advance(
    strategy: Any, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Records without timestamps under a strategy without an assigner get Long.MIN_VALUE (as in
    Flink). With a watermark generator that is worth a warning (event time will not advance);
    with no_watermarks() (PyFlink's from_source(source, no_watermarks(), name) idiom) it is what
    the user chose, and a warning would only mislead."""
    env = sf.StreamExecutionEnvironment()
    out: list[int] = []
    env.from_collection([1, 2, 3]).assign_timestamps_and_watermarks(strategy).add_sink(out.append)
    with caplog.at_level("WARNING", logger="streamflow"):
        env.execute("untimed")
    assert out == [1, 2, 3]
    assert ("records have no timestamps" in caplog.text) is warned
