"""The PyFlink-shaped API end to end: transformations, keyed state, side outputs, parallelism."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from typing import Any

import pytest

import streamflow as sf


def env(parallelism: int = 1, **kw: Any) -> sf.StreamExecutionEnvironment:
    e = sf.StreamExecutionEnvironment(**kw).set_parallelism(parallelism)
    e.set_batch_size(7)  # small batches: many batch boundaries in small tests
    return e


def test_map_flat_map_filter() -> None:
    out = (
        env()
        .from_collection(["a b", "c", "", "d e f"])
        .flat_map(lambda line: line.split())
        .map(str.upper)
        .filter(lambda w: w != "C")
        .execute_and_collect()
    )
    assert list(out) == ["A", "B", "D", "E", "F"]


class Doubler(sf.MapFunction):
    def open(self, runtime_context: sf.RuntimeContext) -> None:
        self.factor = 2
        self.subtasks = runtime_context.get_number_of_parallel_subtasks()

    def map(self, value: int) -> int:
        return value * self.factor


def test_function_classes_and_generator_sources() -> None:
    out = env().from_collection(lambda: (i for i in range(5))).map(Doubler()).execute_and_collect()
    assert list(out) == [0, 2, 4, 6, 8]


def test_async_functions_keep_order_with_bounded_concurrency() -> None:
    running = peak = 0

    async def slow_square(x: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001 * (x % 3))
        running -= 1
        return x * x

    async def is_even(x: int) -> bool:
        await asyncio.sleep(0)
        return x % 2 == 0

    s = env().from_collection(list(range(40))).map(slow_square, concurrency=5).filter(is_even)
    assert list(s.execute_and_collect()) == [x * x for x in range(40) if x % 2 == 0]
    assert 1 < peak <= 5


def test_union_merges_all_inputs() -> None:
    e = env()
    a = e.from_collection([1, 2, 3])
    b = e.from_collection([10, 20])
    c = e.from_collection([100])
    assert sorted(a.union(b, c).map(lambda x: x + 1).execute_and_collect()) == [2, 3, 4, 11, 21, 101]


@pytest.mark.parametrize("parallelism", [1, 3])
def test_rolling_aggregations(parallelism: int) -> None:
    data = [("a", 3, "x"), ("b", 1, "y"), ("a", 1, "z"), ("a", 5, "w"), ("b", 2, "v")]

    def run(op: str) -> dict[str, list]:
        e = env(parallelism)
        ks = e.from_collection(data).key_by(lambda r: r[0])
        out = defaultdict(list)
        for r in getattr(ks, op)(1).execute_and_collect():
            out[r[0]].append(r)
        return dict(out)

    assert run("sum") == {
        "a": [("a", 3, "x"), ("a", 4, "x"), ("a", 9, "x")],
        "b": [("b", 1, "y"), ("b", 3, "y")],
    }
    assert run("min")["a"] == [("a", 3, "x"), ("a", 1, "x"), ("a", 1, "x")]
    assert run("max")["a"] == [("a", 3, "x"), ("a", 3, "x"), ("a", 5, "x")]
    assert run("min_by")["a"] == [("a", 3, "x"), ("a", 1, "z"), ("a", 1, "z")]
    assert run("max_by")["a"] == [("a", 3, "x"), ("a", 3, "x"), ("a", 5, "w")]


def test_sum_by_field_name_on_dicts_and_reduce() -> None:
    data = [{"k": "a", "n": 1}, {"k": "a", "n": 2}, {"k": "b", "n": 5}]
    out = list(env().from_collection(data).key_by(lambda r: r["k"]).sum("n").execute_and_collect())
    assert out == [{"k": "a", "n": 1}, {"k": "a", "n": 3}, {"k": "b", "n": 5}]

    class Concat(sf.ReduceFunction):
        def reduce(self, a: str, b: str) -> str:
            return a + b

    out2 = list(
        env()
        .from_collection(["ab", "cd", "ae"])
        .key_by(lambda s: s[0])
        .reduce(Concat())
        .execute_and_collect()
    )
    assert out2 == ["ab", "cd", "abae"]


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_key_by_routes_every_key_to_one_subtask(parallelism: int) -> None:
    class Where(sf.KeyedProcessFunction):
        def open(self, ctx: sf.RuntimeContext) -> None:
            self.me = ctx.get_index_of_this_subtask()

        def process_element(self, value: tuple, ctx: Any) -> Any:
            yield (ctx.get_current_key(), self.me)

    data = [(f"k{i % 13}", i) for i in range(500)]
    out = env(parallelism).from_collection(data).key_by(lambda r: r[0]).process(Where()).execute_and_collect()
    where: dict[str, set[int]] = defaultdict(set)
    for key, sub in out:
        where[key].add(sub)
    # each key on exactly the subtask its key group is assigned to (Flink's KeyGroupRangeAssignment)
    from streamflow.state.key_groups import DEFAULT_MAX_PARALLELISM as MAXP
    from streamflow.state.key_groups import key_group_of, subtask_of_key_group

    assert where == {k: {subtask_of_key_group(key_group_of(k, MAXP), MAXP, parallelism)} for k in where}
    assert len(where) == 13


class AllStates(sf.KeyedProcessFunction):
    def open(self, ctx: sf.RuntimeContext) -> None:
        self.count = ctx.get_state(sf.ValueStateDescriptor("count"))
        self.items = ctx.get_list_state(sf.ListStateDescriptor("items"))
        self.seen = ctx.get_map_state(sf.MapStateDescriptor("seen"))
        self.total = ctx.get_reducing_state(sf.ReducingStateDescriptor("total", lambda a, b: a + b))
        self.avg = ctx.get_aggregating_state(sf.AggregatingStateDescriptor("avg", Avg()))

    def process_element(self, value: tuple, ctx: Any) -> Any:
        key, n = value
        self.count.update((self.count.value() or 0) + 1)
        self.items.add(n)
        self.seen.put(n, self.seen.get(n) + 1 if self.seen.contains(n) else 1)
        self.total.add(n)
        self.avg.add(n)
        yield (
            key,
            self.count.value(),
            self.items.get(),
            sorted(self.seen.items()),
            self.total.get(),
            self.avg.get(),
        )


class Avg(sf.AggregateFunction):
    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: int, acc: tuple[int, int]) -> tuple[int, int]:
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc: tuple[int, int]) -> float:
        return acc[0] / acc[1]


def test_keyed_state_kinds_are_scoped_to_the_current_key() -> None:
    data = [("a", 1), ("b", 10), ("a", 3), ("a", 1)]
    out = list(env().from_collection(data).key_by(lambda r: r[0]).process(AllStates()).execute_and_collect())
    assert out == [
        ("a", 1, [1], [(1, 1)], 1, 1.0),
        ("b", 1, [10], [(10, 1)], 10, 10.0),
        ("a", 2, [1, 3], [(1, 1), (3, 1)], 4, 2.0),
        ("a", 3, [1, 3, 1], [(1, 2), (3, 1)], 5, 5 / 3),
    ]


def test_keyed_state_on_non_keyed_stream_is_a_clear_error() -> None:
    class NeedsState(sf.MapFunction):
        def open(self, ctx: sf.RuntimeContext) -> None:
            ctx.get_state(sf.ValueStateDescriptor("x"))

        def map(self, v: Any) -> Any:
            return v

    e = env()
    e.from_collection([1]).map(NeedsState()).name("stateful").print()
    with pytest.raises(RuntimeError, match="call key_by"):
        e.execute()


def test_side_outputs_from_process_functions() -> None:
    odd = sf.OutputTag("odd")

    class Split(sf.ProcessFunction):
        def process_element(self, value: int, ctx: Any) -> Any:
            if value % 2:
                yield odd, f"odd {value}"
            else:
                yield value

    e = env()
    main = e.from_collection(list(range(6))).process(Split())
    side = sf.CollectSink()
    main.get_side_output(odd).sink_to(side)
    assert list(main.execute_and_collect()) == [0, 2, 4]
    assert side.results == ["odd 1", "odd 3", "odd 5"]


@pytest.mark.parametrize("how", ["rebalance", "broadcast"])
def test_rebalance_and_broadcast(how: str) -> None:
    e = env(3)
    out = list(getattr(e.from_collection(list(range(30))), how)().map(lambda x: x).execute_and_collect())
    counts = Counter(out)
    assert set(counts) == set(range(30))
    assert set(counts.values()) == ({1} if how == "rebalance" else {3})


def test_rebalance_is_round_robin_per_record() -> None:
    """Flink's RebalancePartitioner: record by record across the channels, continuing from batch
    to batch (a whole batch to one subtask left the others idle)."""

    class Tag(sf.MapFunction):
        def open(self, runtime_context: sf.RuntimeContext) -> None:
            self.subtask = runtime_context.get_index_of_this_subtask()

        def map(self, value: int) -> tuple[int, int]:
            return (self.subtask, value)

    e = env(4)
    e.set_batch_size(1000)
    out = list(e.from_collection(list(range(30))).rebalance().map(Tag()).execute_and_collect())
    by_subtask: dict[int, list[int]] = defaultdict(list)
    for subtask, value in out:
        by_subtask[subtask].append(value)
    assert sorted(len(v) for v in by_subtask.values()) == [7, 7, 8, 8]
    assert all(len({v % 4 for v in values}) == 1 for values in by_subtask.values())
    assert sorted(v for values in by_subtask.values() for v in values) == list(range(30))


def test_collect_sink_is_one_subtask() -> None:
    """execute_and_collect() reads through one sink subtask, as Flink's collect sink: a stream of
    parallelism 1 comes out in order whatever the environment's parallelism."""
    e = env(4)
    assert list(e.from_collection(list(range(50))).execute_and_collect()) == list(range(50))


def test_metrics_count_records() -> None:
    e = env()
    e.disable_operator_chaining()
    e.from_collection(list(range(100))).map(lambda x: x).add_sink(lambda x: None)
    result = e.execute("metrics")
    assert result.status is sf.JobStatus.FINISHED
    assert any(k.endswith("numRecordsOut") and v == 100 for k, v in result.metrics.items())
    assert sum(v for k, v in result.metrics.items() if k.endswith(").numRecordsIn")) == 200  # tasks


def test_print_sink(capsys: pytest.CaptureFixture[str]) -> None:
    e = env()
    e.from_collection([1, 2]).print("out")
    e.execute()
    assert capsys.readouterr().out == "out> 1\nout> 2\n"


@pytest.mark.parametrize("identifier", [None, "out"])
def test_parallel_print_prefixes_the_subtask(
    identifier: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Flink's PrintSinkOutputWriter: a parallel print() prefixes each line with its subtask's
    number from 1 (``2> x``, or ``out:2> x`` when named)."""
    e = env(2)
    e.from_collection([1, 2, 3, 4]).rebalance().print(identifier)
    e.execute()
    head = f"{identifier}:" if identifier else ""
    lines = sorted(capsys.readouterr().out.splitlines())
    assert lines == [f"{head}1> 1", f"{head}1> 3", f"{head}2> 2", f"{head}2> 4"]


class Dedup(sf.FilterFunction):
    """Keeps the first record of each key: keyed state inside a filter, as PyFlink allows."""

    def open(self, ctx: sf.RuntimeContext) -> None:
        self.seen = ctx.get_state(sf.ValueStateDescriptor("seen"))

    def filter(self, value: tuple) -> bool:
        if self.seen.value():
            return False
        self.seen.update(True)
        return True


class Numbered(sf.MapFunction):
    def open(self, ctx: sf.RuntimeContext) -> None:
        self.n = ctx.get_state(sf.ValueStateDescriptor("n", default=0))

    def map(self, value: tuple) -> tuple:
        self.n.update(self.n.value() + 1)
        return (value[0], self.n.value())


class Repeat(sf.FlatMapFunction):
    def open(self, ctx: sf.RuntimeContext) -> None:
        self.count = ctx.get_state(sf.ValueStateDescriptor("count", default=0))

    def flat_map(self, value: tuple) -> Any:
        self.count.update(self.count.value() + 1)
        return [value[0]] * self.count.value()


@pytest.mark.parametrize("parallelism", [1, 3])
def test_keyed_state_in_map_filter_and_flat_map_functions(parallelism: int) -> None:
    data = [("a", 1), ("b", 2), ("a", 3), ("a", 4), ("b", 5)]
    e = env(parallelism)
    assert sorted(e.from_collection(data).key_by(lambda r: r[0]).filter(Dedup()).execute_and_collect()) == [
        ("a", 1),
        ("b", 2),
    ]
    e = env(parallelism)
    numbered = sorted(e.from_collection(data).key_by(lambda r: r[0]).map(Numbered()).execute_and_collect())
    assert numbered == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2)]
    e = env(parallelism)
    repeated = sorted(e.from_collection(data).key_by(lambda r: r[0]).flat_map(Repeat()).execute_and_collect())
    assert repeated == ["a"] * 6 + ["b"] * 3


def test_key_groups_spread_similar_keys_evenly() -> None:
    from streamflow.state.key_groups import key_group_of, stable_hash, subtask_of_key_group

    for keys in ([f"k{i}" for i in range(1000)], list(range(1000)), [(f"u{i}", i % 3) for i in range(1000)]):
        for p in (2, 3, 4):
            counts = Counter(subtask_of_key_group(key_group_of(k, 128), 128, p) for k in keys)
            assert min(counts.values()) > 1000 / p * 0.7, (keys[0], p, counts)
    assert stable_hash("k1") == stable_hash("k1") and stable_hash(("a", 1)) != stable_hash(("a", 2))


class Collect(sf.SinkFunction):
    def __init__(self) -> None:
        self.seen: list = []

    def write_batch(self, values: list) -> None:
        self.seen.extend(values)


def test_sink_function_objects_are_copied_per_subtask_as_in_flink() -> None:
    e = env(2)
    sink, shared = Collect(), sf.CollectSink()
    keyed = e.from_collection([(f"k{i}", 1) for i in range(100)]).key_by(lambda r: r[0]).sum(1)
    keyed.add_sink(sink)
    keyed.sink_to(shared)
    e.execute()
    assert len(shared.results) == 100  # a Sink (CollectSink) is shared by all subtasks
    assert 0 < len(sink.seen) < 100  # the user's object is subtask 0's; others got copies


def test_a_sink_function_writing_nothing_is_refused_when_added() -> None:
    """A SinkFunction subclass must override invoke() or write_batch(); one that overrides
    neither failed at its first record with a bare NotImplementedError."""

    class Forgot(sf.SinkFunction):
        def open(self, runtime_context: Any) -> None:
            pass

    with pytest.raises(TypeError, match="Forgot is a SinkFunction that overrides neither"):
        env(1).from_collection([1]).add_sink(Forgot())
    invoke_only = type("InvokeOnly", (sf.SinkFunction,), {"invoke": lambda self, value: None})
    env(1).from_collection([1]).add_sink(invoke_only())  # either method is enough
