"""Flink's connect ITCases, ported on streamflow's public (PyFlink-named) API.

Sources (apache/flink, ``flink-tests/src/test/java/org/apache/flink/test/streaming/runtime/``):

* ``SelfConnectionITCase.java``: ``differentDataStreamSameChain`` (a stream connected with a
  stream derived from it, in one chain) and ``differentDataStreamDifferentChain`` (the two
  sides keyed, parallelism 3).
* ``BroadcastStateITCase.java``: ``testKeyedWithBroadcastTranslation`` (a keyed stream
  connected with a broadcast stream; every timer, set far in the future, sees the whole
  broadcast state and the key that set it) and ``testBroadcastTranslation`` (the non-keyed
  twin, no output). Flink's ``CustomWmEmitter`` is a punctuated assigner: a watermark at every
  element's timestamp; here a ``WatermarkGenerator`` emitting from ``on_event``.

Flink's ``AbstractTestBase`` runs with parallelism 4; each case runs at 1 and 4 here.
"""

from __future__ import annotations

from typing import Any

import pytest

from streamflow.common import Types, WatermarkStrategy
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.functions import (
    BroadcastProcessFunction,
    CoMapFunction,
    KeyedBroadcastProcessFunction,
)
from streamflow.datastream.state import MapStateDescriptor
from streamflow.eventtime import WatermarkGenerator, WatermarkOutput
from streamflow.runtime.events import Watermark
from streamflow.testing import ListSink

EXPECTED_STATE = {k: f"test:{k}" for k in range(6)}


class _Punctuated(WatermarkGenerator):
    """BroadcastStateITCase.CustomWmEmitter: a watermark at each element's timestamp."""

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        output.emit_watermark(Watermark(event_timestamp))

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        pass


def _punctuated(timestamp_of: Any) -> WatermarkStrategy:
    return WatermarkStrategy.for_generator(_Punctuated).with_timestamp_assigner(
        lambda value, _ts: timestamp_of(value)
    )


def _env(parallelism: int) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment().set_parallelism(parallelism)


@pytest.mark.parametrize("parallelism", [1, 4])
def test_different_data_stream_same_chain(parallelism: int) -> None:
    """SelfConnectionITCase#differentDataStreamSameChain."""

    class Co(CoMapFunction):
        def map1(self, value: str) -> str:
            return value

        def map2(self, value: int) -> str:
            return str(value + 1)

    env = _env(parallelism)
    sink = ListSink()
    src = env.from_collection([1, 3, 5])
    src.map(lambda v: f"x {v}").connect(src).map(Co()).sink_to(sink)
    env.execute()
    assert sorted(sink.results) == sorted(["x 1", "x 3", "x 5", "2", "4", "6"])


@pytest.mark.parametrize("parallelism", [1, 3])
def test_different_data_stream_different_chain(parallelism: int) -> None:
    """SelfConnectionITCase#differentDataStreamDifferentChain: both sides keyed (by the
    string's length, by the number), chaining off at the source."""

    class Co(CoMapFunction):
        def map1(self, value: str) -> str:
            return value

        def map2(self, value: int) -> str:
            return str(value)

    env = _env(parallelism)
    sink = ListSink()
    src = env.from_collection([1, 3, 5]).disable_chaining()
    strings = src.flat_map(lambda v: [f"x {v}"]).key_by(len)
    longs = src.map(lambda v: v + 1).key_by(lambda v: v)
    strings.connect(longs).map(Co()).sink_to(sink)
    env.execute()
    assert sorted(sink.results) == sorted(["x 1", "x 3", "x 5", "2", "4", "6"])


BROADCAST_STATE = MapStateDescriptor("broadcast-state", Types.LONG(), Types.STRING())


class KeyedBroadcastChecker(KeyedBroadcastProcessFunction):
    """BroadcastStateITCase.TestKeyedBroadcastProcessFunction: each element sets an event-time
    timer (100000, 100001, ... per subtask); each timer checks its key and the whole
    broadcast state, and emits its timestamp."""

    def __init__(self, initial_timer_timestamp: int, expected_state: dict) -> None:
        self.next_timer_timestamp = initial_timer_timestamp
        self.expected_state = expected_state
        self.timer_to_expected_key: dict[int, Any] = {}

    def process_element(self, value: int, ctx: Any) -> None:
        current = self.next_timer_timestamp
        self.next_timer_timestamp += 1
        ctx.timer_service().register_event_time_timer(current)
        self.timer_to_expected_key[current] = value

    def process_broadcast_element(self, value: str, ctx: Any) -> None:
        ctx.get_broadcast_state(BROADCAST_STATE).put(int(value.split(":")[1]), value)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        assert self.timer_to_expected_key[timestamp] == ctx.get_current_key()
        assert dict(ctx.get_broadcast_state(BROADCAST_STATE).items()) == self.expected_state
        yield str(timestamp)


class BroadcastFiller(BroadcastProcessFunction):
    """BroadcastStateITCase.TestBroadcastProcessFunction: fills the broadcast state only."""

    def process_element(self, value: int, ctx: Any) -> None:
        pass

    def process_broadcast_element(self, value: str, ctx: Any) -> None:
        ctx.get_broadcast_state(BROADCAST_STATE).put(int(value.split(":")[1]), value)


def _sources(env: StreamExecutionEnvironment) -> tuple[Any, Any]:
    numbers = env.from_collection(list(range(6))).assign_timestamps_and_watermarks(_punctuated(lambda v: v))
    texts = env.from_collection(list(EXPECTED_STATE.values())).assign_timestamps_and_watermarks(
        _punctuated(lambda v: int(v.split(":")[1]))
    )
    return numbers, texts.broadcast(BROADCAST_STATE)


@pytest.mark.parametrize("parallelism", [1, 4])
def test_keyed_with_broadcast_translation(parallelism: int) -> None:
    """BroadcastStateITCase#testKeyedWithBroadcastTranslation: one output per timer (6), each
    timer seeing its key and the six broadcast entries."""
    env = _env(parallelism)
    numbers, broadcast = _sources(env)
    sink = ListSink()
    (
        numbers.key_by(lambda v: v)
        .connect(broadcast)
        .process(KeyedBroadcastChecker(100000, EXPECTED_STATE))
        .sink_to(sink)
        .set_parallelism(1)
    )
    env.execute()
    assert len(sink.results) == len(EXPECTED_STATE)
    if parallelism == 1:
        assert sorted(sink.results) == [str(100000 + i) for i in range(6)]


@pytest.mark.parametrize("parallelism", [1, 4])
def test_broadcast_translation(parallelism: int) -> None:
    """BroadcastStateITCase#testBroadcastTranslation: the non-keyed connect runs, no output."""
    env = _env(parallelism)
    numbers, broadcast = _sources(env)
    sink = ListSink()
    numbers.connect(broadcast).process(BroadcastFiller()).sink_to(sink).set_parallelism(1)
    env.execute()
    assert sink.results == []
