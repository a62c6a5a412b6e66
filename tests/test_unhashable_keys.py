"""Unhashable keys, as PyFlink allows them (it pickles keys): ``key_by(lambda x: [x[0]])``.

Every keyed operator gives the same answers for a list key as for the equivalent tuple key,
at parallelism 1 and 4, in streaming and batch mode; the key user functions see is the list
(``state/hashable_keys.py``); a checkpoint round-trips it exactly and a restore at another
parallelism gives the same answers.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from test_checkpointing import Gate, wait_until

import streamflow as sf
from streamflow.common import Row, Time, Types, WatermarkStrategy
from streamflow.common.watermark_strategy import TimestampAssigner
from streamflow.datastream import RuntimeExecutionMode
from streamflow.datastream.functions import (
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    MapFunction,
    ProcessWindowFunction,
    RuntimeContext,
)
from streamflow.datastream.state import MapStateDescriptor, ValueStateDescriptor
from streamflow.datastream.window import TumblingEventTimeWindows
from streamflow.state.codec import PickleCodec, decode, encode
from streamflow.state.hashable_keys import DictKey, ListKey, SetKey, hashable_key
from streamflow.state.key_groups import stable_hash

WORDS = [(f"w{i % 5}", i % 3, i) for i in range(60)]  # (word, group, timestamp ms)
COUNT = ValueStateDescriptor("count", Types.INT())
RULES = MapStateDescriptor("rules", Types.STRING(), Types.STRING())


def _plain(v: Any) -> Any:
    """A result with list/dict keys as tuples, to compare a list-keyed job with a tuple-keyed one."""
    if isinstance(v, (list, tuple)):
        return tuple(_plain(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _plain(x)) for k, x in v.items()))
    return v


class _Ts(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[2])


class _Counter(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(COUNT)

    def process_element(self, value: Any, ctx: Any) -> Any:
        key = ctx.get_current_key()
        assert isinstance(key, (list, tuple)), key
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        ctx.timer_service().register_event_time_timer(1000)
        yield "process", key, n

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield "timer", ctx.get_current_key(), self.count.value()


class _StateMap(MapFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(COUNT)

    def map(self, value: Any) -> Any:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        return "map", value[0], value[1], n


class _Window(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield "window", key, context.window().start, sum(e[2] for e in elements)


class _Co(KeyedCoProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(COUNT)

    def process_element1(self, value: Any, ctx: Any) -> Any:
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(10**6)
        return ()

    def process_element2(self, value: Any, ctx: Any) -> Any:
        self.count.update((self.count.value() or 0) + 100)
        ctx.timer_service().register_event_time_timer(10**6)
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield "co", ctx.get_current_key(), self.count.value()


class _Bc(KeyedBroadcastProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(COUNT)

    def process_element(self, value: Any, ctx: Any) -> Any:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield "broadcast", ctx.get_current_key(), n

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        ctx.get_broadcast_state(RULES).put("rule", value)


def _job(make_key: Any, parallelism: int, batch: bool) -> list:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    if batch:
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    out: list = []
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Ts())
    # at parallelism 1, so each key's records keep their order into the keyed operators (a running
    # reduce's outputs and count windows depend on it; a rebalance to 4 subtasks would mix them)
    src = env.from_collection(WORDS).assign_timestamps_and_watermarks(strategy).set_parallelism(1)
    keyed = src.key_by(make_key)
    keyed.map(lambda r: r).key_by(make_key).reduce(lambda a, b: (a[0], a[1], a[2] + b[2])).map(
        lambda r: ("reduce", r)
    ).add_sink(out.append)
    ones = keyed.map(lambda r: (r[0], r[1], 1))
    ones.key_by(make_key).sum(2).map(lambda r: ("sum", r)).add_sink(out.append)
    keyed.process(_Counter()).add_sink(out.append)
    keyed.map(_StateMap()).add_sink(out.append)
    keyed.window(TumblingEventTimeWindows.of(Time.milliseconds(10))).process(_Window()).add_sink(out.append)
    keyed.count_window(4).reduce(lambda a, b: (a[0], a[1], a[2] + b[2])).map(lambda r: ("count", r)).add_sink(
        out.append
    )
    probes = env.from_collection([(w, g, 0) for w in ("w0", "w1") for g in range(3)])
    keyed.connect(probes.key_by(make_key)).process(_Co()).add_sink(out.append)
    rules = env.from_collection(["r"]).broadcast(RULES)
    keyed.connect(rules).process(_Bc()).add_sink(out.append)
    env.execute("keys")
    return out


@pytest.mark.parametrize("batch", [False, True], ids=["streaming", "batch"])
@pytest.mark.parametrize("parallelism", [1, 4])
def test_list_keys_give_the_tuple_keys_answers(parallelism: int, batch: bool) -> None:
    lists = _job(lambda r: [r[0], r[1]], parallelism, batch)
    tuples = _job(lambda r: (r[0], r[1]), parallelism, batch)
    assert sorted(map(_plain, lists), key=repr) == sorted(map(_plain, tuples), key=repr)
    kinds = {r[0] for r in lists}
    assert kinds >= {"reduce", "sum", "process", "timer", "map", "window", "count", "broadcast"}
    seen = [r[1] for r in lists if r[0] in ("process", "timer", "window", "co", "broadcast")]
    assert seen and all(isinstance(k, list) and repr(k).startswith("[") for k in seen)
    reference = _job(lambda r: (r[0], r[1]), 1, False)  # one answer for every setting
    if not batch:
        assert sorted(map(_plain, lists), key=repr) == sorted(map(_plain, reference), key=repr)


def test_dict_set_and_row_keys() -> None:
    for make_key in (
        lambda r: {"word": r[0], "group": [r[1]]},
        lambda r: {r[0], r[1]},
        lambda r: Row(word=r[0], groups=[r[1]]),
        lambda r: (r[0], [r[1]]),
    ):
        env = sf.StreamExecutionEnvironment().set_parallelism(3)
        out: list = []
        env.from_collection(WORDS).key_by(make_key).map(lambda r: (r[0], r[1], 1)).key_by(make_key).sum(
            2
        ).add_sink(out.append)
        env.execute("keys")
        finals: dict = {}
        for w, g, n in out:
            finals[(w, g)] = max(finals.get((w, g), 0), n)
        assert finals == {(w, g): sum(1 for x in WORDS if x[:2] == (w, g)) for w, g in finals}
        assert len(finals) == 15


def test_an_unhashable_key_no_stand_in_fits_is_refused_with_its_reason() -> None:
    class Mutable:
        __hash__ = None  # type: ignore[assignment]

    env = sf.StreamExecutionEnvironment()
    env.from_collection([1, 2]).key_by(lambda r: Mutable()).sum(0).add_sink(lambda r: None)
    with pytest.raises(TypeError, match=r"unhashable key .*Mutable.*@dataclass\(frozen=True\)"):
        env.execute("refused")


def test_a_hashable_key_keeps_its_selector_and_a_list_key_gets_stand_ins() -> None:
    from streamflow.runtime.keyed_operators import ReduceOperator

    ops: list = []
    original = ReduceOperator.check_key_type

    def spy(self: Any, records: list, attr: str = "key_selector") -> Any:
        before = getattr(self, attr)
        after = original(self, records, attr)
        ops.append((before, after))
        return after

    ReduceOperator.check_key_type = spy  # type: ignore[method-assign]
    try:
        for make_key in (lambda r: r[0], lambda r: [r[0]]):
            env = sf.StreamExecutionEnvironment()
            env.from_collection(WORDS).key_by(make_key).reduce(lambda a, b: a).add_sink(lambda r: None)
            env.execute("probe")
    finally:
        ReduceOperator.check_key_type = original  # type: ignore[method-assign]
    (hashable_before, hashable_after), (list_before, list_after) = ops
    assert hashable_after is hashable_before  # zero per-record cost for hashable keys
    assert list_after is not list_before and type(list_after(WORDS[0])) is ListKey


def test_stand_ins_equal_print_hash_and_round_trip_like_the_key() -> None:
    key = hashable_key([1, [2, "a"], {"x": [3]}, {4}])
    assert key == [1, [2, "a"], {"x": [3]}, {4}] and repr(key) == "[1, [2, 'a'], {'x': [3]}, {4}]"
    assert type(key[1]) is ListKey and type(key[2]) is DictKey and type(key[3]) is SetKey
    assert key != (1, (2, "a"), {"x": [3]}, {4})  # a list key is not the tuple key
    assert stable_hash(key) == stable_hash([1, [2, "a"], {"x": [3]}, {4}])
    assert stable_hash({"a": 1, "b": 2}) == stable_hash({"b": 2, "a": 1})
    assert stable_hash(Row(1, [2])) == stable_hash(hashable_key(Row(1, [2])))
    assert stable_hash([1]) != stable_hash([2])
    state = {key: 1, hashable_key(Row(w=1, g=[2])): 2, hashable_key((1, [3])): 3}
    for restored in (decode(encode(state)), pickle.loads(pickle.dumps(state)), PickleCodec().decode(
        PickleCodec().encode(state)
    )):
        assert restored == state
        assert [type(k) for k in restored] == [type(k) for k in state]
        assert type(next(iter(restored))[2]) is DictKey
    with pytest.raises(TypeError, match="a key is immutable"):
        key.append(5)
    with pytest.raises(TypeError, match="a key is immutable"):
        key[2]["y"] = 1


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
async def test_list_keys_survive_a_savepoint_at_another_parallelism(tmp_path: Path, backend: str) -> None:
    data = [(f"k{i % 7}", i % 2, 1) for i in range(140)]
    gate = Gate(data, 70)

    def build(env: sf.StreamExecutionEnvironment, source: sf.DataStream, out: list) -> None:
        env.configure({"state.backend.type": backend})
        source.uid("src").key_by(lambda r: [r[0], r[1]]).process(_Counted()).uid("count").add_sink(out.append)

    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    out1: list = []
    build(env, env.from_async_iterable(gate.__aiter__), out1)
    client = await env.execute_async("count")
    await wait_until(lambda: len(out1) == 70)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()

    env2 = sf.StreamExecutionEnvironment().set_parallelism(3)
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    build(env2, env2.from_collection(data), out2)  # the source resumes after record 70
    await (await env2.execute_async("count")).get_job_execution_result()
    finals: dict = {}
    for key, n in out1 + out2:
        assert isinstance(key, list)
        finals[tuple(key)] = max(finals.get(tuple(key), 0), n)
    assert finals == {(f"k{k}", b): 10 for k in range(7) for b in range(2)}


class _Counted(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(COUNT)

    def process_element(self, value: Any, ctx: Any) -> Any:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield ctx.get_current_key(), n


def test_a_co_process_probes_each_input() -> None:
    env = sf.StreamExecutionEnvironment()
    out: list = []
    a = env.from_collection([("a", 1)]).key_by(lambda r: r[0])  # a hashable key on input 1
    b = env.from_collection([("a", 2)]).key_by(lambda r: [r[0]])  # a list key on input 2
    a.connect(b).process(_Co()).add_sink(out.append)
    env.execute("co")
    assert sorted(out, key=repr) == [("co", "a", 1), ("co", ["a"], 100)]  # different keys, as in PyFlink
