"""Null handed to reducing, aggregating and map state, as Flink's state backends take it, on
the heap backend and on RocksDB, with and without a time-to-live (each case on all four).

Sources (apache/flink, flink-runtime/src/main/java/org/apache/flink/runtime/state/):
``heap/HeapReducingState#add`` and ``heap/HeapAggregatingState#add`` (``if (value == null) {
clear(); return; }``: adding null empties the state); ``heap/HeapReducingState.
ReduceTransformation`` and ``HeapAggregatingState.AggregateTransformation`` (a null previous
state is no state: the next add starts from the value, or from a new accumulator, so a reduce
function that returns null leaves the state empty); ``ttl/TtlMapState#putAll`` and
flink-statebackend-rocksdb ``RocksDBMapState#putAll`` (``if (map == null) return;``).
The scenarios are StateBackendTestBase.testReducingStateAddAndGet /
testAggregatingStateAddAndGetWith(Im)mutableAccumulator / testMapState with a null in place of
a value (ListState's refusal of null is test_state_backend_flink.py's).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from state_backend_harness import Average, Raised, backend_param, descriptors, run_steps

from streamflow.common import Time, Types
from streamflow.datastream.state import (
    AggregatingStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
)
from streamflow.state import codec as _codec
from streamflow.state.key_groups import key_group_range
from streamflow.state.keyed import KeyedStateBackend
from streamflow.state.rocksdb_backend import RocksDBKeyedStateBackend
from streamflow.state.ttl_state import ttl_state

Op = Callable[[Any], Any]


def _run(backend: str, ttl: bool, tmp_path: Path, descriptor: Any, steps: list[tuple[str, Op]]) -> list[Any]:
    """Each step's result (or :class:`Raised`) under its key, on a state-level backend: RocksDB
    writes every entry through and drops its cache after each step (reads decode from the DB)."""
    if backend == "heap":
        b: Any = KeyedStateBackend(128)
    else:
        b = RocksDBKeyedStateBackend(
            128,
            key_group_range(0, 128, 1),
            operator_id="nulls",
            subtask=0,
            codec=_codec.MsgpackCodec(),
            local_dir=str(tmp_path / "db"),
            cache_entries=1,
            flush_entries=1,
        )
    try:
        if ttl:  # a time-to-live far longer than the test: a TTL state that never expires
            descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.hours(1)).build())
            state = ttl_state(b, descriptor, lambda: 0)
        else:
            state = b.get_state(descriptor)
        out: list[Any] = []
        for key, op in steps:
            b.current_key = key
            try:
                out.append(op(state))
            except Exception as exc:
                out.append(Raised(exc))
            if backend == "rocksdb":
                b.flush()
                for table in b._rtables.values():
                    table.evict(0)
        return out
    finally:
        if backend == "rocksdb":
            b.close()


both = pytest.mark.parametrize("ttl", [False, True], ids=["plain", "ttl"])


@backend_param
@both
def test_reducing_state_add_null_clears(backend: str, ttl: bool, tmp_path: Path) -> None:
    """HeapReducingState#add: null clears the key's state; the next add starts afresh (it had
    kept null as the value and handed it to the reduce function: TypeError on the next add)."""
    descriptor = ReducingStateDescriptor("r", lambda a, b: a + b, Types.INT())
    steps: list[tuple[str, Op]] = [
        ("k", lambda s: s.add(None)),
        ("k", lambda s: s.get()),
        ("k", lambda s: s.add(1)),
        ("k", lambda s: s.add(2)),
        ("j", lambda s: s.add(10)),
        ("k", lambda s: s.add(None)),
        ("k", lambda s: s.get()),
        ("j", lambda s: s.get()),
        ("k", lambda s: s.add(5)),
        ("k", lambda s: s.get()),
    ]
    got = _run(backend, ttl, tmp_path, descriptor, steps)
    assert got == [None, None, None, None, None, None, None, 10, None, 5]


@backend_param
@both
def test_reduce_function_returning_null_empties_the_state(backend: str, ttl: bool, tmp_path: Path) -> None:
    """HeapReducingState.ReduceTransformation: a null previous value is no value, so after a
    reduce function returned null the next add keeps the value added (it had been reduced with
    null, giving null forever)."""
    descriptor = ReducingStateDescriptor("r", lambda a, b: None if a + b == 3 else a + b, Types.INT())
    steps: list[tuple[str, Op]] = [
        ("k", lambda s: s.add(1)),
        ("k", lambda s: s.add(2)),  # 1 + 2 == 3: the function returns null
        ("k", lambda s: s.get()),
        ("k", lambda s: s.add(7)),
        ("k", lambda s: s.get()),
    ]
    assert _run(backend, ttl, tmp_path, descriptor, steps) == [None, None, None, None, 7]


@backend_param
@both
def test_aggregating_state_add_null_clears(backend: str, ttl: bool, tmp_path: Path) -> None:
    """HeapAggregatingState#add: null clears the key's accumulator, without calling the
    aggregate function (it had been handed null: TypeError from the user's add)."""
    descriptor = AggregatingStateDescriptor("a", Average(), Types.TUPLE([Types.INT(), Types.INT()]))
    steps: list[tuple[str, Op]] = [
        ("k", lambda s: s.add(None)),
        ("k", lambda s: s.get()),
        ("k", lambda s: s.add(2)),
        ("k", lambda s: s.add(4)),
        ("k", lambda s: s.get()),
        ("k", lambda s: s.add(None)),
        ("k", lambda s: s.get()),
        ("k", lambda s: s.add(8)),
        ("k", lambda s: s.get()),
    ]
    got = _run(backend, ttl, tmp_path, descriptor, steps)
    assert got == [None, None, None, None, 3.0, None, None, None, 8.0]


@backend_param
@both
def test_map_state_put_all_null_is_a_no_op(backend: str, ttl: bool, tmp_path: Path) -> None:
    """RocksDBMapState#putAll and TtlMapState#putAll: a null map adds nothing (it raised
    TypeError without a TTL and AttributeError with one); an empty map adds nothing either."""
    descriptor = MapStateDescriptor("m", Types.INT(), Types.STRING())
    steps: list[tuple[str, Op]] = [
        ("k", lambda s: s.put_all(None)),
        ("k", lambda s: (s.is_empty(), s.items())),
        ("k", lambda s: s.put(1, "a")),
        ("k", lambda s: s.put_all(None)),
        ("k", lambda s: s.put_all({})),
        ("k", lambda s: (s.is_empty(), s.items())),
    ]
    got = _run(backend, ttl, tmp_path, descriptor, steps)
    assert got == [None, (True, []), None, None, None, (False, [(1, "a")])]


@backend_param
def test_nulls_through_the_public_api(backend: str, tmp_path: Path) -> None:
    """The same rules through a KeyedProcessFunction's states (declared types and all)."""
    steps = [
        ("k", lambda s: s["reducing"].add(3)),
        ("k", lambda s: s["reducing"].add(None)),
        ("k", lambda s: (s["reducing"].add(4), s["reducing"].get())[1]),
        ("k", lambda s: s["aggregating"].add(None)),
        ("k", lambda s: (s["aggregating"].add(4), s["aggregating"].get())[1]),
        ("k", lambda s: s["map"].put_all(None)),
        ("k", lambda s: s["map"].is_empty()),
    ]
    assert run_steps(backend, tmp_path, steps) == [None, None, 4, None, 4.0, None, True]


def _null_steps(states: dict[str, Any]) -> list[Any]:
    """Nulls handed to a window's reducing, aggregating (and map) states, with what each reads."""
    r, a = states["reducing"], states["aggregating"]
    out = [r.add(5), r.add(None), r.get(), r.add(2), r.get(), a.add(None), a.get(), a.add(6), a.get()]
    if "map" in states:
        m = states["map"]
        out += [m.put_all(None), m.is_empty(), m.put(1, "x"), m.put_all(None), m.items()]
    return out


@backend_param
def test_window_and_trigger_states_take_null_as_flink(backend: str, tmp_path: Path) -> None:
    """The same rules for the states a window user holds (Flink's heap states namespaced by the
    window): a ProcessWindowFunction's window_state() and a trigger's partitioned state."""
    from state_backend_harness import descriptors, set_backend

    from streamflow.datastream import StreamExecutionEnvironment
    from streamflow.datastream.functions import ProcessWindowFunction
    from streamflow.datastream.window import CountTumblingWindowAssigner, Trigger, TriggerResult

    seen: dict[str, Any] = {}
    which = {k: v for k, v in descriptors().items() if k in ("reducing", "aggregating", "map")}

    class NullsTrigger(Trigger):
        def on_element(self, element, timestamp, window, ctx):
            states = {k: ctx.get_partitioned_state(which[k]) for k in ("reducing", "aggregating")}
            seen["trigger"] = _null_steps(states)
            return TriggerResult.FIRE_AND_PURGE

        def on_event_time(self, time, window, ctx):
            return TriggerResult.CONTINUE

        def on_processing_time(self, time, window, ctx):
            return TriggerResult.CONTINUE

        def clear(self, window, ctx):
            for k in ("reducing", "aggregating"):
                ctx.get_partitioned_state(which[k]).clear()

    class Nulls(ProcessWindowFunction):
        def process(self, key, context, elements):
            ws = context.window_state()
            getters = {
                "reducing": ws.get_reducing_state,
                "aggregating": ws.get_aggregating_state,
                "map": ws.get_map_state,
            }
            seen["window"] = _null_steps({k: getters[k](d) for k, d in which.items()})
            yield key

    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    set_backend(env, backend, tmp_path)
    stream = env.from_collection([("a", 1)]).key_by(lambda e: e[0]).window(CountTumblingWindowAssigner.of(1))
    assert list(stream.trigger(NullsTrigger()).process(Nulls()).execute_and_collect()) == ["a"]
    common = [None, None, None, None, 2, None, None, None, 6.0]
    assert seen["trigger"] == common
    assert seen["window"] == [*common, None, True, None, None, [(1, "x")]]


@backend_param
def test_emptied_window_state_holds_no_entry(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase.testNumStateEntries / testListStateAPIs' closing check ("State
    backend is not empty") for a window's namespace: update(None) of a value, update([]) and
    add_all([]) of a list, removing a map's last entry, put_all({}), and adding null to reducing
    and aggregating state leave the window without an entry (Flink clears the namespace's entry;
    an empty entry per window was kept, so every fired window left state behind). Read through
    the per-window state's storage, one map state per descriptor keyed by window."""
    from state_backend_harness import set_backend

    from streamflow.datastream import StreamExecutionEnvironment
    from streamflow.datastream.functions import ProcessWindowFunction
    from streamflow.datastream.state import ListStateDescriptor, ValueStateDescriptor
    from streamflow.datastream.window import CountTumblingWindowAssigner

    names = ("value", "list", "map", "reducing", "aggregating")
    which = {**descriptors(), "value": ValueStateDescriptor("value", Types.INT())}
    which["list"] = ListStateDescriptor("list", Types.INT())

    class Empties(ProcessWindowFunction):
        def process(self, key, context, elements):
            ws = context.window_state()
            v, lst = ws.get_state(which["value"]), ws.get_list_state(which["list"])
            m, r = ws.get_map_state(which["map"]), ws.get_reducing_state(which["reducing"])
            a = ws.get_aggregating_state(which["aggregating"])
            v.update(1), v.update(None)
            lst.update([1]), lst.update([]), lst.add_all([])
            m.put(1, "a"), m.remove(1), m.put_all({})
            r.add(1), r.add(None)
            a.add(1), a.add(None)
            stored = context.global_state()
            per_window = [MapStateDescriptor("window-state:" + n, None, None) for n in names]
            yield [stored.get_map_state(d).items() for d in per_window]

    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    set_backend(env, backend, tmp_path)
    stream = env.from_collection([("a", 1)]).key_by(lambda e: e[0]).window(CountTumblingWindowAssigner.of(1))
    assert list(stream.process(Empties()).execute_and_collect()) == [[[], [], [], [], []]]


def test_emptied_trigger_state_holds_no_entry() -> None:
    """The same for a trigger's partitioned states (one slot per key, window and name): a
    list's add_all([]) left an empty list in its slot."""
    from streamflow.windowing.trigger_state import partitioned_state

    store: dict[Any, Any] = {}
    which = descriptors()
    states = {name: partitioned_state(store, name, which[name]) for name in which if name != "map"}
    states["value"].update(1), states["value"].update(None)
    states["list"].add_all([]), states["list"].add(1), states["list"].update([]), states["list"].add_all([])
    states["reducing"].add(1), states["reducing"].add(None)
    states["aggregating"].add(1), states["aggregating"].add(None)
    assert store == {}


def _reduce_to_null_at_3(a: Any, b: Any) -> Any:
    """A reduce function that returns null when the values add up to 3."""
    return None if a[1] + b[1] == 3 else (a[0], a[1] + b[1])


@backend_param
def test_window_reduce_returning_null(backend: str, tmp_path: Path) -> None:
    """A window's contents are Flink's ReducingState in the window's namespace
    (WindowOperator, HeapReducingState.ReduceTransformation): a reduce function that returns null
    leaves the contents empty, so the next element starts them afresh (it was reduced with null:
    TypeError), and a window whose contents are empty when it fires emits nothing (the fast
    path of time windows emitted None). Count windows take the general path, event-time
    tumbling windows the fast path."""
    from state_backend_harness import set_backend

    from streamflow.common import Time, WatermarkStrategy
    from streamflow.datastream import StreamExecutionEnvironment
    from streamflow.datastream.window import CountTumblingWindowAssigner, TumblingEventTimeWindows

    def run(assigner: Any, data: list[tuple[str, int]], timed: bool) -> list[Any]:
        env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
        set_backend(env, backend, tmp_path / str(timed))
        stream = env.from_collection(data)
        if timed:  # element i at time i * 100: one 10-second window
            strategy = WatermarkStrategy.for_monotonous_timestamps()
            strategy = strategy.with_timestamp_assigner(lambda e, _: e[1] * 100)
            stream = stream.assign_timestamps_and_watermarks(strategy)
        windowed = stream.key_by(lambda e: e[0]).window(assigner)
        return list(windowed.reduce(_reduce_to_null_at_3).execute_and_collect())

    data = [("a", i) for i in range(1, 7)]
    assert run(CountTumblingWindowAssigner.of(3), data, False) == [("a", 3), ("a", 15)]
    assert run(TumblingEventTimeWindows.of(Time.seconds(10)), data[:2], True) == []
    assert run(TumblingEventTimeWindows.of(Time.seconds(10)), data[:3], True) == [("a", 3)]
