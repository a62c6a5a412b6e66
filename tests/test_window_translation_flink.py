"""Flink's WindowTranslationTest and AllWindowTranslationTest, ported on the public API.

Sources (apache/flink, ``flink-streaming-java/src/test/java/org/apache/flink/streaming/runtime/
operators/windowing/``): ``WindowTranslationTest.java`` and ``AllWindowTranslationTest.java``.
Flink's tests check, for each windowed call (``reduce``, ``reduce`` with a window function,
``aggregate``, ``aggregate`` with a window function, ``process``, ``apply``; with and without an
evictor; event and processing time; keyed and all-windowed), the operator's default trigger,
and push one element ``("hello", 1)`` at timestamp 0 through it (``processElementAndEnsureOutput``:
the watermark and the processing time then go to ``Long.MAX_VALUE``) to see it come out.
Here the same element runs through a job whose source ends after it (the final watermark) and,
for processing-time windows, whose :class:`ManualClock` is moved past the window first; the one
result must be the function's answer for that element, with the window's end - 1 as timestamp.
The default triggers (``testReduceEventTime``: ``EventTimeTrigger``; ``...ProcessingTime``:
``ProcessingTimeTrigger``) are checked on the assigners. ``testMergingAssignerWithNonMergingTriggerFails``
and ``testMergingWindowsWithEvictor`` are here too; the rich-function refusals have no Python
counterpart (PyFlink has no ``RichReduceFunction``), and the fold variants are gone from Flink.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from waiting import wait_until

import streamflow as sf
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.functions import (
    AggregateFunction,
    ProcessAllWindowFunction,
    ProcessFunction,
    ProcessWindowFunction,
)
from streamflow.runtime.events import MIN_WATERMARK
from streamflow.testing import ListSink, ManualClock, Record, ScriptedSource
from streamflow.windowing import (
    CountEvictor,
    EventTimeSessionWindows,
    EventTimeTrigger,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)

ELEMENT = ("hello", 1)
LATER = 10_000_000  # processing time past every window below (Flink's harness: Long.MAX_VALUE)

ASSIGNERS: dict[str, Callable[[], Any]] = {
    "tumbling-event": lambda: TumblingEventTimeWindows.of(1000),
    "sliding-event": lambda: SlidingEventTimeWindows.of(1000, 100),
    "session-event": lambda: EventTimeSessionWindows.with_gap(5000),
    "tumbling-processing": lambda: TumblingProcessingTimeWindows.of(1000),
    "sliding-processing": lambda: SlidingProcessingTimeWindows.of(1000, 100),
    "session-processing": lambda: ProcessingTimeSessionWindows.with_gap(5000),
}


@pytest.mark.parametrize("name", list(ASSIGNERS))
def test_default_triggers(name: str) -> None:
    """WindowTranslationTest#testReduceEventTime / #testReduceProcessingTime (and the other
    translation tests): an event-time assigner's default trigger is EventTimeTrigger, a
    processing-time one's ProcessingTimeTrigger."""
    assigner = ASSIGNERS[name]()
    expected = EventTimeTrigger if name.endswith("event") else ProcessingTimeTrigger
    assert type(assigner.get_default_trigger(None)) is expected


class _DummyAggregate(AggregateFunction):
    """The tests' DummyAggregationFunction: (key, sum of f1)."""

    def create_accumulator(self) -> tuple:
        return ("", 0)

    def add(self, value: tuple, acc: tuple) -> tuple:
        return (value[0], acc[1] + value[1])

    def get_result(self, acc: tuple) -> tuple:
        return acc

    def merge(self, a: tuple, b: tuple) -> tuple:
        return (a[0] or b[0], a[1] + b[1])


class _Keyed(ProcessWindowFunction):
    """Flink's tests' window functions: each input as (key, f0, f1)."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        for value in elements:
            yield (key, value[0], value[1])


class _All(ProcessAllWindowFunction):
    def process(self, context: Any, elements: Any) -> Any:
        for value in elements:
            yield (value[0], value[0], value[1])


def _reduce(a: tuple, b: tuple) -> tuple:
    return (a[0], a[1] + b[1])


def _apply(key: Any, window: Any, inputs: Any) -> Any:
    return [(key, v[0], v[1]) for v in inputs]


def _apply_all(window: Any, inputs: Any) -> Any:
    return [(v[0], v[0], v[1]) for v in inputs]


CALLS: dict[str, tuple[Callable[[Any, bool], Any], tuple]] = {
    "reduce": (lambda w, keyed: w.reduce(_reduce), ELEMENT),
    "reduce-with-window-function": (
        lambda w, keyed: w.reduce(_reduce, window_function=_Keyed() if keyed else _All()),
        ("hello", "hello", 1),
    ),
    "aggregate": (lambda w, keyed: w.aggregate(_DummyAggregate()), ELEMENT),
    "aggregate-with-window-function": (
        lambda w, keyed: w.aggregate(_DummyAggregate(), window_function=_Keyed() if keyed else _All()),
        ("hello", "hello", 1),
    ),
    "process": (lambda w, keyed: w.process(_Keyed() if keyed else _All()), ("hello", "hello", 1)),
    "apply": (lambda w, keyed: w.apply(_apply if keyed else _apply_all), ("hello", "hello", 1)),
}


class _Stamped(ProcessFunction):
    def __init__(self, opened: list) -> None:
        self.opened = opened

    def open(self, runtime_context: Any) -> None:
        self.opened.append(True)

    def process_element(self, value: Any, ctx: Any) -> Any:
        ts = ctx.timestamp()
        yield value, (None if ts == MIN_WATERMARK else ts)


async def _one_element(assigner: str, call: str, keyed: bool, evictor: bool) -> list:
    clock = ManualClock()
    env = StreamExecutionEnvironment(clock=clock).set_parallelism(2)
    source = ScriptedSource([], end=False)
    stream = env.from_source(source, None, "src").set_parallelism(1)
    windowed = (stream.key_by(lambda v: v[0]).window(ASSIGNERS[assigner]()) if keyed
                else stream.window_all(ASSIGNERS[assigner]()))  # fmt: skip
    if evictor:
        windowed = windowed.evictor(CountEvictor.of(100))
    sink, opened = ListSink(), []
    CALLS[call][0](windowed, keyed).process(_Stamped(opened)).sink_to(sink)
    client = await env.execute_async("translation")
    await wait_until(lambda: opened)
    source.push(Record(ELEMENT, 0))
    for _ in range(300):
        await asyncio.sleep(0)
    if assigner.endswith("processing"):
        clock.set(LATER)  # the windows' timers fire before the end of input (which does not fire them)
        await wait_until(lambda: sink.results, timeout=20.0)
    source.finish()
    await asyncio.wait_for(client.get_job_execution_result(), 30)
    return sink.results


@pytest.mark.parametrize("evictor", [False, True], ids=["", "evictor"])
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "all"])
@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("assigner", list(ASSIGNERS))
async def test_one_element_comes_out(assigner: str, call: str, keyed: bool, evictor: bool) -> None:
    """WindowTranslationTest / AllWindowTranslationTest: test{Reduce,ReduceWithWindowFunction,
    Aggregate,AggregateWithWindowFunction,Process,Apply}{EventTime,ProcessingTime}, their
    ``...WithEvictor`` twins and testMergingWindowsWithEvictor: one element in, the function's
    answer for it out once, stamped with its window's end - 1 (for sliding windows, once per
    window holding it)."""
    results = await _one_element(assigner, call, keyed, evictor)
    expected = CALLS[call][1]
    windows = 10 if assigner.startswith("sliding") else 1  # 1000 / 100 windows hold the element
    assert [value for value, _ts in results] == [expected] * windows
    if assigner == "tumbling-event":
        assert [ts for _v, ts in results] == [999]
    elif assigner == "session-event":
        assert [ts for _v, ts in results] == [4999]


class _NonMerging(Trigger):
    """AllWindowTranslationTest#testMergingAssignerWithNonMergingTriggerFails's trigger."""

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return False

    def clear(self, window: Any, ctx: Any) -> None:
        pass


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "all"])
def test_merging_assigner_with_non_merging_trigger_fails(keyed: bool) -> None:
    """(All)WindowTranslationTest#testMergingAssignerWithNonMergingTriggerFails."""
    env = sf.StreamExecutionEnvironment()
    stream = env.from_collection(["Hello", "Ciao"])
    windowed = (stream.key_by(lambda v: v).window(EventTimeSessionWindows.with_gap(5000)) if keyed
                else stream.window_all(EventTimeSessionWindows.with_gap(5000)))  # fmt: skip
    with pytest.raises(ValueError, match="cannot be used with a merging window assigner"):
        windowed.trigger(_NonMerging()).reduce(lambda a, b: a).print()
        env.execute()
