"""Flink's ``TimestampITCase``: timestamps and watermarks through running topologies.

Source: apache/flink, ``flink-tests/src/test/java/org/apache/flink/test/streaming/runtime/
TimestampITCase.java``. Each test names its Java test. Flink's ``CustomOperator`` (added with
``DataStream.transform``, which PyFlink lacks) is a plain streamflow operator here, added
through the DataStream's internal one-input hook: it records every watermark it is given per
subtask, asserts each is above the ones before, and checks each record's timestamp is its
value. Flink's ``timestampSource`` (a record with timestamp i, then watermark i, for each i)
and ``LongMaxWatermarkSource`` are ``ScriptedSource`` scripts.
"""

from __future__ import annotations

from typing import Any

import pytest

import streamflow as sf
from streamflow.runtime.factory import OperatorFactory
from streamflow.runtime.operator import StreamOperator
from streamflow.testing import ListSink, Record, ScriptedSource

MAX = 2**63 - 1


class _Watermarks:
    """``CustomOperator.finalWatermarks``: every watermark each subtask was given."""

    def __init__(self) -> None:
        self.by_subtask: dict[int, list[int]] = {}


def _custom_operator(stream: sf.DataStream, seen: _Watermarks, timestamps: bool = True) -> sf.DataStream:
    """``.transform("Custom Operator", ..., new CustomOperator(timestampsEnabled))``."""

    class CustomOperator(StreamOperator):
        async def open(self) -> None:
            await super().open()
            self.marks: list[int] = []
            seen.by_subtask[self.ctx.subtask_index] = self.marks

        async def process_batch(self, records: list, ts: list[int] | None) -> None:
            if timestamps:
                assert ts is not None and list(ts) == list(records), "timestamps are not properly handled"
            await self.output.push(records, ts)

        async def process_watermark(self, watermark: Any) -> None:
            assert all(m < watermark.timestamp for m in self.marks), (self.marks, watermark)
            self.marks.append(watermark.timestamp)
            await self.output.emit_watermark(watermark)

    factory = OperatorFactory("Custom Operator", lambda: CustomOperator("Custom Operator"))
    return stream._one_input("Custom Operator", factory)  # type: ignore[attr-defined]


def _timestamp_source(num_watermarks: int) -> ScriptedSource:
    """``timestampSource``: for each i, record i with timestamp i, then watermark i."""
    script: list[Any] = []
    for i in range(num_watermarks):
        script += [Record(i, i), sf.Watermark(i)]
    return ScriptedSource(script)


class _IdentityCoMap(sf.CoMapFunction):
    def map1(self, value: Any) -> Any:
        return value

    def map2(self, value: Any) -> Any:
        return value


@pytest.mark.parametrize("parallelism", [1, 3])
def test_watermark_propagation(parallelism: int) -> None:
    """TimestampITCase.testWatermarkPropagation: two sources (10 and 5 watermarks per subtask),
    unioned, mapped, connected with the second again and co-mapped: every subtask of the final
    operator sees the watermarks 0..4 in order (the second source stops after those) and ends
    with the maximum watermark."""
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    source1 = env.from_source(_timestamp_source(10), None, "TimestampSource1")
    source2 = env.from_source(_timestamp_source(5), None, "TimestampSource2")
    seen = _Watermarks()
    connected = source1.union(source2).map(lambda v: v).connect(source2).map(_IdentityCoMap())
    _custom_operator(connected, seen).sink_to(ListSink())
    env.execute()
    assert sorted(seen.by_subtask) == list(range(parallelism))
    for marks in seen.by_subtask.values():
        assert marks[:5] == [0, 1, 2, 3, 4], marks
        assert marks[-1] == MAX


def test_self_union_watermark_propagation() -> None:
    """TimestampITCase.testSelfUnionWatermarkPropagation: a stream unioned with itself ends
    with the maximum watermark."""
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    stream = env.from_collection([1, 2, 3])
    seen = _Watermarks()
    _custom_operator(stream.union(stream), seen, timestamps=False).sink_to(ListSink())
    env.execute()
    assert seen.by_subtask[0][-1] == MAX


class _PerEventMinusOne(sf.WatermarkGenerator):
    """The custom generator of testTimestampExtractorWithCustomWatermarkEmit: each event emits
    its timestamp - 1."""

    def on_event(self, event: Any, event_timestamp: int, output: Any) -> None:
        output.emit_watermark(sf.Watermark(event_timestamp - 1))

    def on_periodic_emit(self, output: Any) -> None:
        pass


def _strategy(generator: type) -> sf.WatermarkStrategy:
    return sf.WatermarkStrategy.for_generator(generator).with_timestamp_assigner(
        lambda element, record_timestamp: element
    )


@pytest.mark.parametrize(
    "values",
    [
        [i + 1 for i in range(10)],  # testTimestampExtractorWithCustomWatermarkEmit
        [i // 2 + 1 if i % 2 == 0 else i // 2 for i in range(20)],  # ...WithDecreasingCustomWatermarkEmit
    ],
    ids=["increasing", "decreasing"],
)
def test_timestamp_extractor_with_custom_watermark_emit(values: list[int]) -> None:
    """TimestampITCase.testTimestampExtractorWithCustomWatermarkEmit and
    testTimestampExtractorWithDecreasingCustomWatermarkEmit: a punctuated generator emitting
    ``timestamp - 1`` per event gives the watermarks 0..9, each above the last (a decreasing
    one is not emitted), then the maximum watermark; records keep their timestamps."""
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    env.get_config().set_auto_watermark_interval(10)
    stream = env.from_collection(values).assign_timestamps_and_watermarks(_strategy(_PerEventMinusOne))
    seen = _Watermarks()
    _custom_operator(stream, seen).sink_to(ListSink())
    env.execute()
    assert seen.by_subtask[0] == [*range(10), MAX]


class _NoWatermarks(sf.WatermarkGenerator):
    def on_event(self, event: Any, event_timestamp: int, output: Any) -> None:
        pass

    def on_periodic_emit(self, output: Any) -> None:
        pass


def _long_max_watermark_source(num_elements: int) -> ScriptedSource:
    """``LongMaxWatermarkSource``: i with timestamp i, i - 1 with timestamp i - 1, the watermark
    i - 2 (from i = 2), for i in 1..n; then the maximum watermark twice."""
    script: list[Any] = []
    for i in range(1, num_elements + 1):
        script += [Record(i, i), Record(i - 1, i - 1)]
        if i >= 2:
            script.append(sf.Watermark(i - 2))
    return ScriptedSource([*script, sf.Watermark(MAX), sf.Watermark(MAX)])


@pytest.mark.parametrize("interval", [1, 10])
def test_timestamp_extractor_with_long_max_watermark_from_source(interval: int) -> None:
    """TimestampITCase.testTimestampExtractorWithLongMaxWatermarkFromSource (and ...Source2):
    after ``assign_timestamps_and_watermarks`` with a generator that emits nothing, the
    source's own watermarks are gone but its maximum watermark passes, once."""
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    env.get_config().set_auto_watermark_interval(interval)
    stream = env.from_source(_long_max_watermark_source(10), None, "LongMaxWatermarkSource")
    stream = stream.assign_timestamps_and_watermarks(sf.WatermarkStrategy.for_generator(_NoWatermarks))
    seen = _Watermarks()
    _custom_operator(stream, seen, timestamps=False).sink_to(ListSink())
    env.execute()
    assert seen.by_subtask == {0: [MAX], 1: [MAX]}


def test_error_on_event_time_without_timestamps() -> None:
    """TimestampITCase.testErrorOnEventTimeWithoutTimestamps: an event-time window over
    records without timestamps fails the job."""
    from streamflow.windowing import TumblingEventTimeWindows

    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    (
        env.from_collection([("a", 1), ("b", 2)])
        .key_by(lambda x: x[0])
        .window(TumblingEventTimeWindows.of(5_000))
        .reduce(lambda a, b: a)
        .sink_to(ListSink())
    )
    with pytest.raises(Exception, match=r"(?i)timestamp"):
        env.execute()
