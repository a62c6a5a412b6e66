"""Ports of Flink's window join and co-group integration tests onto streamflow's DataStream API.

Source (apache/flink):
flink-tests/src/test/java/org/apache/flink/test/streaming/runtime/CoGroupJoinITCase.java, with the
rules of JoinedStreams/CoGroupedStreams (flink-streaming-java/.../api/datastream/) the ITCase relies
on: both inputs tagged and unioned, keyed by where()/equal_to(), windowed, each window's elements
split back into the two sides; a result carries the window's max timestamp (WindowOperator).
Flink's Tuple toString ``(a,0)`` is written out by :func:`_t`.
"""

from __future__ import annotations

from typing import Any

from streamflow.common import Types, WatermarkStrategy
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.functions import ProcessFunction
from streamflow.datastream.window import TumblingEventTimeWindows
from streamflow.eventtime import WatermarkGenerator
from streamflow.runtime.events import Watermark
from streamflow.testing import ListSink

SOURCE1_2 = [("a", 0), ("a", 1), ("a", 2), ("b", 3), ("b", 4), ("b", 5), ("a", 6), ("a", 7), ("a", 8)]
SOURCE2_2 = [("a", 0), ("a", 1), ("b", 3), ("c", 6), ("c", 7), ("c", 8)]
SOURCE1_3 = [
    ("a", "x", 0),
    ("a", "y", 1),
    ("a", "z", 2),
    ("b", "u", 3),
    ("b", "w", 5),
    ("a", "i", 6),
    ("a", "j", 7),
    ("a", "k", 8),
]
SOURCE2_3 = [("a", "u", 0), ("a", "w", 1), ("b", "i", 3), ("b", "k", 5), ("a", "x", 6), ("a", "z", 8)]


def _t(t: tuple) -> str:
    return "(" + ",".join(str(f) for f in t) + ")"


class _MinusOne(WatermarkGenerator):
    """Flink's Tuple2/Tuple3TimestampExtractor: after each element, a watermark one below it."""

    def on_event(self, event: Any, ts: int, output: Any) -> None:
        output.emit_watermark(Watermark(ts - 1))

    def on_periodic_emit(self, output: Any) -> None:
        pass


def _source(env: StreamExecutionEnvironment, data: list) -> Any:
    strategy = WatermarkStrategy.for_generator(_MinusOne).with_timestamp_assigner(lambda e, ts: e[-1])
    return env.from_collection(data).assign_timestamps_and_watermarks(strategy)


def _env() -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)


def _joined(first: Any, second: Any) -> list[str]:
    sink = ListSink()
    first.join(second).where(lambda t: t[0]).equal_to(lambda t: t[0]).window(
        TumblingEventTimeWindows.of(3)
    ).apply(lambda a, b: f"{_t(a)}:{_t(b)}", Types.STRING()).sink_to(sink)
    first._env.execute("Join Test")
    return sorted(sink.results)


def test_co_group() -> None:
    """CoGroupJoinITCase#testCoGroup: one call per key and window, even when a side is empty."""

    def co_group(first: Any, second: Any) -> list[str]:
        return ["F:" + "".join(_t(t) for t in first) + " S:" + "".join(_t(t) for t in second)]

    env, sink = _env(), ListSink()
    _source(env, SOURCE1_2).co_group(_source(env, SOURCE2_2)).where(lambda t: t[0]).equal_to(
        lambda t: t[0]
    ).window(TumblingEventTimeWindows.of(3)).apply(co_group, Types.STRING()).sink_to(sink)
    env.execute("CoGroup Test")
    assert sorted(sink.results) == sorted(
        [
            "F:(a,0)(a,1)(a,2) S:(a,0)(a,1)",
            "F:(b,3)(b,4)(b,5) S:(b,3)",
            "F:(a,6)(a,7)(a,8) S:",
            "F: S:(c,6)(c,7)(c,8)",
        ]
    )


def test_join() -> None:
    """CoGroupJoinITCase#testJoin: every pair of a key's elements in the same window."""
    env = _env()
    assert _joined(_source(env, SOURCE1_3), _source(env, SOURCE2_3)) == sorted(
        [
            "(a,x,0):(a,u,0)",
            "(a,x,0):(a,w,1)",
            "(a,y,1):(a,u,0)",
            "(a,y,1):(a,w,1)",
            "(a,z,2):(a,u,0)",
            "(a,z,2):(a,w,1)",
            "(b,u,3):(b,i,3)",
            "(b,u,3):(b,k,5)",
            "(b,w,5):(b,i,3)",
            "(b,w,5):(b,k,5)",
            "(a,i,6):(a,x,6)",
            "(a,i,6):(a,z,8)",
            "(a,j,7):(a,x,6)",
            "(a,j,7):(a,z,8)",
            "(a,k,8):(a,x,6)",
            "(a,k,8):(a,z,8)",
        ]
    )


def test_self_join() -> None:
    """CoGroupJoinITCase#testSelfJoin: a stream joined with itself pairs each element with every
    element of its key and window, itself included."""
    env = _env()
    source = _source(env, SOURCE1_3)
    groups = [SOURCE1_3[0:3], SOURCE1_3[3:5], SOURCE1_3[5:8]]
    expected = sorted(f"{_t(a)}:{_t(b)}" for g in groups for a in g for b in g)
    assert _joined(source, source) == expected


def test_join_results_carry_the_windows_max_timestamp() -> None:
    """WindowOperator's rule behind JoinedStreams: results are emitted with window.maxTimestamp()."""

    class Stamp(ProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield value, ctx.timestamp()

    env, sink = _env(), ListSink()
    first, second = _source(env, SOURCE1_3), _source(env, SOURCE2_3)
    first.join(second).where(lambda t: t[0]).equal_to(lambda t: t[0]).window(
        TumblingEventTimeWindows.of(3)
    ).apply(lambda a, b: a[2] // 3, Types.INT()).process(Stamp()).sink_to(sink)
    env.execute()
    assert {window: ts for window, ts in sink.results} == {0: 2, 1: 5, 2: 8}


def test_co_group_with_checkpointing() -> None:
    """CoGroupJoinITCase#testCoGroupOperatorWithCheckpoint (FLINK-6808): a co-group pipeline can
    be checkpointed (its tagged-union elements snapshot); here the job runs with checkpoints every
    10 ms (Flink's minimum) and still produces Flink's result for the two sources of fromElements."""
    env = _env()
    env.enable_checkpointing(10)

    async def slow(v: Any) -> Any:
        import asyncio

        await asyncio.sleep(0.05)  # give the checkpoints time to happen between the elements
        return v

    def source(data: list) -> Any:
        return _source(env, data).map(slow)

    sink = ListSink()
    source([("a", 0), ("b", 3)]).co_group(source([("a", 1), ("b", 6)])).where(lambda t: t[0]).equal_to(
        lambda t: t[0]
    ).window(TumblingEventTimeWindows.of(3)).apply(
        lambda first, second: [f"{[_t(t) for t in first]}:{[_t(t) for t in second]}"], Types.STRING()
    ).sink_to(sink)
    result = env.execute()
    assert sorted(sink.results) == ["['(a,0)']:['(a,1)']", "['(b,3)']:[]", "[]:['(b,6)']"]
    assert result.metrics["checkpoints.numCompleted"] >= 1


def test_join_of_a_keyed_stream() -> None:
    """JoinedStreams takes any DataStream, a KeyedStream included (Flink's KeyedStream is one): the
    join keys by where()/equal_to(), whatever the input's own key."""
    env = _env()
    first = _source(env, SOURCE1_3).key_by(lambda t: t[1])
    assert _joined(first, _source(env, SOURCE2_3))[:2] == ["(a,i,6):(a,x,6)", "(a,i,6):(a,z,8)"]
