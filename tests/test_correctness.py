"""Wrong results found by running PyFlink programs as a new user would (issue 8), end to end.

Each test failed on the main of 2026-11-23 (3cca4a7) and pins the Flink behaviour.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

import streamflow as sf
from streamflow.windowing import TumblingEventTimeWindows


def env(parallelism: int = 1) -> sf.StreamExecutionEnvironment:
    e = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    e.set_batch_size(7)
    return e


def _count(ctx: sf.RuntimeContext) -> Any:
    return ctx.get_state(sf.ValueStateDescriptor("count", None))


def _bump(state: Any) -> int:
    n = (state.value() or 0) + 1
    state.update(n)
    return n


def _by_key(pairs: list[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for k, n in pairs:
        out[k].append(n)
    return dict(out)


# -- 1: generators run under the record's key ----------------------------------


class CountingFlatMap(sf.FlatMapFunction):
    def open(self, runtime_context: sf.RuntimeContext) -> None:
        self.state = _count(runtime_context)

    def flat_map(self, value: str) -> Iterator[tuple[str, int]]:
        yield value, _bump(self.state)


class CountingProcess(sf.KeyedProcessFunction):
    def open(self, runtime_context: sf.RuntimeContext) -> None:
        self.state = _count(runtime_context)

    def process_element(self, value: str, ctx: Any) -> Iterator[tuple[str, int]]:
        yield value, _bump(self.state)
        ctx.timer_service().register_event_time_timer(10)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[tuple[str, int]]:
        yield ctx.get_current_key(), -_bump(self.state)


@pytest.mark.parametrize("kind", ["flat_map", "process"])
def test_generator_functions_read_and_write_state_under_the_records_key(kind: str) -> None:
    keyed = env().from_collection(["a", "b", "a", "b"]).key_by(lambda v: v)
    out = keyed.flat_map(CountingFlatMap()) if kind == "flat_map" else keyed.process(CountingProcess())
    result = _by_key(list(out.execute_and_collect()))
    expected = {"a": [1, 2], "b": [1, 2]}
    if kind == "process":  # the timer (at the max watermark) runs under its own key too
        expected = {"a": [1, 2, -3], "b": [1, 2, -3]}
    assert result == expected


# -- 2: every function is copied per subtask, connect() and windows included -------------


class CoCounter(sf.KeyedCoProcessFunction):
    """Keeps its state handle in ``self``: correct only if each subtask has its own copy."""

    def open(self, runtime_context: sf.RuntimeContext) -> None:
        self.state = _count(runtime_context)

    def process_element1(self, value: tuple[str, int], ctx: Any) -> Iterator[tuple[str, int]]:
        yield value[0], _bump(self.state)

    def process_element2(self, value: tuple[str, int], ctx: Any) -> Iterator[tuple[str, int]]:
        yield value[0], _bump(self.state)


class KeyCounter(sf.KeyedProcessFunction):
    def open(self, runtime_context: sf.RuntimeContext) -> None:
        self.state = _count(runtime_context)

    def process_element(self, value: tuple[str, int], ctx: Any) -> Iterator[tuple[str, int]]:
        yield value[0], _bump(self.state)


def test_keyed_co_process_function_state_handle_in_self_at_parallelism_4() -> None:
    records = [(f"k{i % 20}", i) for i in range(200)]
    e = env(4).set_channel_capacity(8)  # small channels: the four subtasks interleave
    first = e.from_collection(records[::2]).key_by(lambda r: r[0])
    second = e.from_collection(records[1::2]).key_by(lambda r: r[0])
    co = _by_key(list(first.connect(second).process(CoCounter()).execute_and_collect()))
    plain = _by_key(
        list(
            env(4).from_collection(records).key_by(lambda r: r[0]).process(KeyCounter()).execute_and_collect()
        )
    )
    assert {k: sorted(v) for k, v in co.items()} == {k: sorted(v) for k, v in plain.items()}
    assert all(sorted(v) == list(range(1, 11)) for v in co.values()) and len(co) == 20


class SubtaskTaggingWindow(sf.ProcessWindowFunction):
    """Remembers, in ``self``, which subtask opened it: shared objects see the last one."""

    def open(self, runtime_context: sf.RuntimeContext) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.keys: set[str] = set()

    def process(self, key: str, context: Any, elements: Any) -> Iterator[tuple[str, int, int]]:
        self.keys.add(key)
        yield key, self.subtask, len(self.keys)


def test_window_functions_are_copied_per_subtask() -> None:
    records = [(f"k{i % 8}", i) for i in range(64)]
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _: r[1])
    out = list(
        env(4)
        .set_channel_capacity(8)
        .from_collection(records)
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(1000))
        .process(SubtaskTaggingWindow())
        .execute_and_collect()
    )
    assert len(out) == 8
    by_subtask: dict[int, int] = defaultdict(int)
    for _key, subtask, seen in out:
        by_subtask[subtask] += 1
        assert seen <= by_subtask[subtask]  # a copy sees only its own subtask's keys
    assert len(by_subtask) > 1


# -- 4: WindowedStream.apply with a WindowFunction object, and plain callables -------------


class WindowSum(sf.WindowFunction):
    def apply(self, key: str, window: Any, inputs: Any) -> Iterator[tuple[str, int, int, int]]:
        yield key, window.start, window.end, sum(v for _, v in inputs)


def _windowed(records: list[tuple[str, int]]) -> Any:
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _: r[1])
    return (
        env()
        .from_collection(records)
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(10))
    )


def test_window_apply_takes_a_window_function_object_and_callables() -> None:
    records = [("a", 1), ("a", 5), ("b", 7), ("a", 12)]
    expected = [("a", 0, 10, 6), ("b", 0, 10, 7), ("a", 10, 20, 12)]
    assert sorted(_windowed(records).apply(WindowSum()).execute_and_collect()) == sorted(expected)

    def fn(key: str, window: Any, inputs: Any) -> list[tuple[str, int, int, int]]:
        return [(key, window.start, window.end, sum(v for _, v in inputs))]

    assert sorted(_windowed(records).apply(fn).execute_and_collect()) == sorted(expected)


def test_window_reduce_with_a_window_function_object() -> None:
    out = _windowed([("a", 1), ("a", 5)]).reduce(lambda x, y: (x[0], x[1] + y[1]), WindowSum())
    assert list(out.execute_and_collect()) == [("a", 0, 10, 6)]


# -- 5: execute() runs only what was added since the last execute() ------------------------


def test_execute_clears_the_pipelines_it_ran() -> None:
    e = env()
    first, second = sf.CollectSink(), sf.CollectSink()
    e.from_collection([1, 2]).sink_to(first)
    e.execute("one")
    e.from_collection([3]).sink_to(second)
    e.execute("two")
    assert first.results == [1, 2]
    assert second.results == [3]
    with pytest.raises(sf.GraphError, match="no sink"):
        e.execute("three")


# -- 6: open/close with the runtime context for every function kind ------------------------


class StatefulReduce(sf.ReduceFunction):
    def open(self, runtime_context: sf.RuntimeContext) -> None:
        self.calls = _count(runtime_context)

    def reduce(self, value1: tuple[str, int], value2: tuple[str, int]) -> tuple[str, int]:
        return value1[0], value1[1] + value2[1] + 0 * _bump(self.calls)


def test_keyed_reduce_function_is_opened_with_keyed_state() -> None:
    out = (
        env().from_collection([("a", 1), ("b", 2), ("a", 3)]).key_by(lambda r: r[0]).reduce(StatefulReduce())
    )
    assert list(out.execute_and_collect()) == [("a", 1), ("b", 2), ("a", 4)]


class Opened:
    log: list[str] = []


class LoggingReduce(sf.ReduceFunction):
    def open(self, runtime_context: sf.RuntimeContext) -> None:
        Opened.log.append(f"reduce open {runtime_context.get_task_name()}")

    def close(self) -> None:
        Opened.log.append("reduce close")

    def reduce(self, a: tuple[str, int], b: tuple[str, int]) -> tuple[str, int]:
        return a[0], a[1] + b[1]


class LoggingAggregate(sf.AggregateFunction):
    def open(self, runtime_context: sf.RuntimeContext) -> None:
        Opened.log.append("aggregate open")

    def close(self) -> None:
        Opened.log.append("aggregate close")

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: tuple[str, int], accumulator: int) -> int:
        return accumulator + value[1]

    def get_result(self, accumulator: int) -> int:
        return accumulator


class LoggingCoMap(sf.CoMapFunction):
    def open(self, runtime_context: sf.RuntimeContext) -> None:
        Opened.log.append("co-map open")

    def close(self) -> None:
        Opened.log.append("co-map close")

    def map1(self, value: int) -> int:
        return value

    def map2(self, value: int) -> int:
        return -value


def test_every_function_kind_is_opened_and_closed() -> None:
    Opened.log = []
    assert list(_windowed([("a", 1), ("a", 2)]).reduce(LoggingReduce()).execute_and_collect()) == [("a", 3)]
    assert list(_windowed([("a", 1), ("a", 2)]).aggregate(LoggingAggregate()).execute_and_collect()) == [3]
    e = env()
    out = list(
        e.from_collection([1]).connect(e.from_collection([2])).map(LoggingCoMap()).execute_and_collect()
    )
    assert sorted(out) == [-2, 1]
    assert [entry.split(" ")[:2] for entry in Opened.log] == [
        ["reduce", "open"],
        ["reduce", "close"],
        ["aggregate", "open"],
        ["aggregate", "close"],
        ["co-map", "open"],
        ["co-map", "close"],
    ]


class EnvAwareAssigner(TumblingEventTimeWindows):
    seen_env: Any = None

    def get_default_trigger(self, env: Any) -> Any:
        EnvAwareAssigner.seen_env = env
        return super().get_default_trigger(env)


def test_custom_assigner_gets_the_environment_for_its_default_trigger() -> None:
    e = env()
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _: r[1])
    out = (
        e.from_collection([("a", 1), ("a", 2)])
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda r: r[0])
        .window(EnvAwareAssigner(10, 0))
        .reduce(lambda x, y: (x[0], x[1] + y[1]))
    )
    assert list(out.execute_and_collect()) == [("a", 3)]
    assert EnvAwareAssigner.seen_env is e


# -- 8: a key_by makes no operator: naming it is refused, as PyFlink does ------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda k: k.name("x"),
        lambda k: k.get_name(),
        lambda k: k.uid("x"),
        lambda k: k.set_parallelism(2),
        lambda k: k.set_max_parallelism(8),
        lambda k: k.start_new_chain(),
        lambda k: k.disable_chaining(),
    ],
)
def test_key_by_refuses_operator_settings(call: Any) -> None:
    source = env().from_collection([1, 2]).map(lambda v: v).name("upstream").uid("up")
    keyed = source.key_by(lambda v: v)
    with pytest.raises(sf.GraphError, match="KeyedStream is not supported"):
        call(keyed)
    assert source.get_name() == "upstream"


@pytest.mark.parametrize("partition", ["rebalance", "broadcast", "forward"])
def test_a_partitioning_refuses_operator_settings(partition: str) -> None:
    source = env().from_collection([1, 2]).map(lambda v: v).name("upstream")
    with pytest.raises(sf.GraphError, match="partitioning makes no operator"):
        getattr(source, partition)().name("renamed")
    assert source.get_name() == "upstream"
