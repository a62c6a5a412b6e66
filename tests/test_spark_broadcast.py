"""Broadcast state on the Spark engine (``streamflow/spark/broadcast.py``): a
KeyedBroadcastProcessFunction with keyed state, event-time timers and rules looked up by event
time, a non-keyed BroadcastProcessFunction, a co-map over a broadcast stream, and a batch job
give the asyncio engine's answers at the same parallelism, including the copy of every
broadcast-side output that each subtask emits; in a batch job the operator sees what the asyncio
engine's does (every rule first, a keyed input key by key in timestamp order with each key's timers
at its end, a non-keyed one's regular input as it arrives). ``broadcast()`` into one-input operators
(every record to every subtask) gives the same copies on both engines."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from test_spark import _env, _strategy, events

from streamflow import MapStateDescriptor
from streamflow.common import Types
from streamflow.datastream.functions import (
    BroadcastProcessFunction,
    CoMapFunction,
    KeyedBroadcastProcessFunction,
    MapFunction,
)
from streamflow.execution_mode import RuntimeExecutionMode
from streamflow.spark.sources import SparkTranslationError
from streamflow.testing import ListSink

RULES = MapStateDescriptor("rules", Types.LONG(), Types.LONG())
PARALLELISM = 3


def rules(n: int) -> list[tuple[int, int]]:
    """(rule time, factor): a new factor every 250 ms, past the events' last timestamp."""
    return [(t, 1 + (t // 250) % 4) for t in range(0, n // 100 * 100 + 1000, 250)]


class ScaledBuckets(KeyedBroadcastProcessFunction):
    """Per key and second: the sum of the values times the factor in force at the second's end
    (the latest rule at or before it), emitted by an event-time timer. The rules' watermark
    holds the timer back until every rule up to its time is in the broadcast state, so the
    answer does not depend on how the two inputs interleave."""

    def open(self, runtime_context: Any) -> None:
        self.sums = runtime_context.get_map_state(MapStateDescriptor("sums", Types.LONG(), Types.LONG()))
        self.index = runtime_context.get_index_of_this_subtask()

    def process_element(self, value: Any, ctx: Any) -> None:
        bucket = ctx.timestamp() // 1000
        self.sums.put(bucket, (self.sums.get(bucket) or 0) + value[1])
        ctx.timer_service().register_event_time_timer(bucket * 1000 + 999)

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        ctx.get_broadcast_state(RULES).put(value[0], value[1])
        yield ("rule", value[0], self.index)  # once per subtask

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        rules_now = ctx.get_broadcast_state(RULES)
        factor = rules_now.get(max(t for t in rules_now.keys() if t <= timestamp))  # noqa: SIM118
        bucket = timestamp // 1000
        yield (ctx.get_current_key(), bucket, self.sums.get(bucket) * factor, ctx.timestamp())
        self.sums.remove(bucket)


class Tagged(BroadcastProcessFunction):
    """Non-keyed: every record passes through; every subtask reports each rule it stores."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        if value[1] % 3 == 0:
            yield ("event", *value)

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        ctx.get_broadcast_state(RULES).put(value[0], value[1])
        yield ("stored", value[0], len(ctx.get_broadcast_state(RULES).keys()) > 0)


class Sides(CoMapFunction):
    def map1(self, value: Any) -> Any:
        return ("first", value[0], value[1])

    def map2(self, value: Any) -> Any:
        return ("second", *value)


class Factors(KeyedBroadcastProcessFunction):
    """A batch job reads the broadcast input in full first: every record sees every rule."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        state = ctx.get_broadcast_state(RULES)
        yield (value[0], value[1] * state.get(value[1] % 4 * 250), len(state.keys()))

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(RULES).put(value[0], value[1])


def broadcast_jobs(engine: str) -> dict[str, list]:
    env = _env(engine).set_parallelism(PARALLELISM)
    data = events(3000)
    sinks = {name: ListSink() for name in ("keyed", "non_keyed", "co_map")}
    main = env.from_collection(data).assign_timestamps_and_watermarks(_strategy())
    ruled = env.from_collection(rules(3000)).assign_timestamps_and_watermarks(
        _strategy(0).with_timestamp_assigner(lambda r, _t: r[0]))
    stream = main.key_by(lambda e: e[0]).connect(ruled.broadcast(RULES)).process(ScaledBuckets())
    stream.sink_to(sinks["keyed"])
    main.connect(ruled.broadcast(RULES)).process(Tagged()).sink_to(sinks["non_keyed"])
    main.filter(lambda e: e[1] % 7 == 0).connect(ruled.broadcast()).map(Sides()).sink_to(sinks["co_map"])
    env.execute(f"broadcast state on {engine}")
    return {name: sink.results for name, sink in sinks.items()}


def test_broadcast_state_same_on_both_engines() -> None:
    expected, actual = broadcast_jobs("asyncio"), broadcast_jobs("spark")
    n_rules = len(rules(3000))
    # every subtask emits each rule once; ten keys over three seconds
    per_subtask = Counter(r[2] for r in expected["keyed"] if r[0] == "rule")
    assert per_subtask == {i: n_rules for i in range(PARALLELISM)}
    assert len([r for r in expected["keyed"] if r[0] != "rule"]) == 10 * 3
    assert len(expected["co_map"]) == sum(e[1] % 7 == 0 for e in events(3000)) + PARALLELISM * n_rules
    for name in expected:
        assert Counter(map(repr, actual[name])) == Counter(map(repr, expected[name])), name


class KeyRuns(KeyedBroadcastProcessFunction):
    """What a batch job's keyed broadcast operator has seen at each record (counted in ``self``):
    every rule first, then key by key (each key once), a key's records in timestamp order, and its
    timer at its end (after its last record, before the next key's first)."""

    def open(self, runtime_context: Any) -> None:
        self.seen = 0
        self.keys: list[str] = []
        self.last: dict[str, int] = {}

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.seen += 1
        key = ctx.get_current_key()
        if not self.keys or self.keys[-1] != key:
            self.keys.append(key)
        in_order = self.last.get(key, -1) <= ctx.timestamp()
        self.last[key] = ctx.timestamp()
        ctx.timer_service().register_event_time_timer(0)
        yield (key, value[1], self.seen, len(self.keys), in_order, len(ctx.get_broadcast_state(RULES).keys()))

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(RULES).put(value[0], value[1])

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ("timer", ctx.get_current_key(), self.seen)


class Arrivals(BroadcastProcessFunction):
    """A non-keyed one reads every rule first, then its regular input as it arrives (unsorted)."""

    def open(self, runtime_context: Any) -> None:
        self.seen = 0

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.seen += 1
        yield (value[1], value[2], self.seen, len(ctx.get_broadcast_state(RULES).keys()))

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(RULES).put(value[0], value[1])


def batch_job(engine: str) -> dict[str, list]:
    env = _env(engine).set_parallelism(PARALLELISM)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    sinks = {name: ListSink() for name in ("factors", "key_runs", "key_runs_p1", "arrivals")}
    ruled = env.from_collection(rules(3000)[:4])
    data = env.from_collection(events(1000))
    data.key_by(lambda e: e[0]).connect(ruled.broadcast(RULES)).process(Factors()).sink_to(sinks["factors"])
    timed = data.assign_timestamps_and_watermarks(_strategy()).key_by(lambda e: e[0])
    timed.connect(ruled.broadcast(RULES)).process(KeyRuns()).sink_to(sinks["key_runs"])
    for name, stream in (("key_runs_p1", timed.connect(ruled.broadcast(RULES)).process(KeyRuns())),
                         ("arrivals", data.connect(ruled.broadcast(RULES)).process(Arrivals()))):
        stream.set_parallelism(1).sink_to(sinks[name]).set_parallelism(1)  # one subtask, in order
    env.execute(f"broadcast state in batch mode on {engine}")
    return {name: sink.results for name, sink in sinks.items()}


def test_broadcast_state_in_batch_mode_same_on_both_engines() -> None:
    expected, actual = batch_job("asyncio"), batch_job("spark")
    assert len(expected["factors"]) == 1000 and {r[2] for r in expected["factors"]} == {4}
    runs = [r for r in expected["key_runs_p1"] if r[0] != "timer"]
    assert [r[2] for r in runs] == list(range(1, 1001)) and {(r[4], r[5]) for r in runs} == {(True, 4)}
    assert max(r[3] for r in runs) == 10  # ten keys, each once
    assert [r[2] for r in expected["arrivals"]] == list(range(1, 1001))
    for name in ("key_runs_p1", "arrivals"):  # one subtask: the same order too
        assert actual[name] == expected[name], name
    for name in ("factors", "key_runs"):
        assert Counter(map(repr, actual[name])) == Counter(map(repr, expected[name])), name


class Indexed(MapFunction):
    """Tags each record with the subtask that maps it (its runtime context's index)."""

    def open(self, runtime_context: Any) -> None:
        self.index = runtime_context.get_index_of_this_subtask()
        self.count = runtime_context.get_number_of_parallel_subtasks()

    def map(self, value: Any) -> Any:
        return (value[0], value[1], self.index, self.count)


def replicated_job(engine: str) -> dict[str, list]:
    """``broadcast()`` into one-input operators (and a sink) of parallelism 1 and 3: every
    record once per subtask, each copy mapped by that subtask (Flink's BroadcastPartitioner)."""
    env = _env(engine).set_parallelism(PARALLELISM)
    data = events(300)
    sinks = {name: ListSink() for name in ("p1", "p3", "fused", "keyed", "sink")}
    main = env.from_collection(data)
    main.broadcast().map(Indexed()).set_parallelism(1).sink_to(sinks["p1"])
    mapped = main.broadcast().map(Indexed())
    mapped.sink_to(sinks["p3"])
    # chained after the broadcast consumer: the same subtask's copy (its index too)
    main.broadcast().flat_map(lambda e: [e] * (e[1] % 3)).map(Indexed()).filter(
        lambda r: r[1] % 2 == 0).sink_to(sinks["fused"])
    mapped.key_by(lambda r: r[2]).reduce(lambda a, b: (a[0], a[1] + b[1], a[2], a[3])).sink_to(sinks["keyed"])
    main.filter(lambda e: e[1] < 5).broadcast().sink_to(sinks["sink"])
    env.execute(f"broadcast partitioning on {engine}")
    return {name: sink.results for name, sink in sinks.items()}


def test_broadcast_partitioning_into_one_input_operators_same_on_both_engines() -> None:
    expected, actual = replicated_job("asyncio"), replicated_job("spark")
    assert Counter(r[2:] for r in expected["p1"]) == {(0, 1): 300}
    assert Counter(r[2:] for r in expected["p3"]) == {(i, PARALLELISM): 300 for i in range(PARALLELISM)}
    assert {r[2] for r in expected["fused"]} == set(range(PARALLELISM))
    assert len(expected["sink"]) == PARALLELISM * sum(e[1] < 5 for e in events(300))
    for name in expected:
        assert Counter(map(repr, actual[name])) == Counter(map(repr, expected[name])), name


def test_broadcast_into_the_first_input_is_refused() -> None:
    env = _env("spark")
    first = env.from_collection([(1, 2)])
    first.broadcast().connect(env.from_collection([(3, 4)])).map(Sides()).name("broadcast first").sink_to(
        ListSink())
    with pytest.raises(SparkTranslationError, match="broadcast first"):
        env.execute("refused")
