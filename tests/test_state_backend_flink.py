"""Ports of Flink's keyed-state backend tests onto streamflow, through the public API, on the
heap backend and on EmbeddedRocksDBStateBackend (each test runs on both).

Source (apache/flink): flink-runtime/src/test/java/org/apache/flink/runtime/state/
StateBackendTestBase.java; the scenarios a DataStream user can observe (the state of each kind
per key, default values, ListState's refusal of null, MapState's views). Snapshots, key-group
restore and rescaling are in test_state_backend_flink_restore.py. Flink's NullPointerException
is Python's TypeError here, with Flink's message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from state_backend_harness import Raised, backend_param, run_steps

from streamflow.common import Types


def _put(name: str, value: Any) -> Any:
    return lambda s: s[name].update(value)


@backend_param
def test_value_state(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase.testValueState: unset is null; each key has its own value; clear
    affects only the current key."""
    steps = [
        ("1", lambda s: s["value"].value()),
        ("1", _put("value", 1)),
        ("1", lambda s: s["value"].value()),
        ("2", lambda s: s["value"].value()),
        ("2", _put("value", 2)),
        ("1", lambda s: s["value"].value()),
        ("2", lambda s: s["value"].value()),
        ("1", lambda s: s["value"].clear()),
        ("1", lambda s: s["value"].value()),
        ("2", lambda s: s["value"].value()),
        ("2", _put("value", None)),  # Flink: update(null) clears
        ("2", lambda s: s["value"].value()),
    ]
    assert run_steps(backend, tmp_path, steps) == [None, None, 1, None, None, 1, 2, None, None, 2, None, None]


@backend_param
def test_value_state_default_value(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase.testValueStateDefaultValue: the descriptor's default while unset and
    again after clear."""
    steps = [
        ("a", lambda s: s["default"].value()),
        ("a", _put("default", 7)),
        ("a", lambda s: s["default"].value()),
        ("b", lambda s: s["default"].value()),
        ("a", lambda s: s["default"].clear()),
        ("a", lambda s: s["default"].value()),
    ]
    assert run_steps(backend, tmp_path, steps) == [42, None, 7, 42, None, 42]


@backend_param
def test_list_state(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase.testListState and testListStateAPIs: add, add_all, update per key;
    update with an empty list and clear leave the key without state."""
    steps = [
        ("1", lambda s: s["list"].get()),
        ("1", lambda s: s["list"].add(1)),
        ("2", lambda s: s["list"].add(2)),
        ("1", lambda s: s["list"].add_all([3, 4])),
        ("1", lambda s: list(s["list"].get())),
        ("2", lambda s: list(s["list"].get())),
        ("2", lambda s: s["list"].update([5, 6])),
        ("2", lambda s: list(s["list"].get())),
        ("1", lambda s: s["list"].update([])),
        ("1", lambda s: list(s["list"].get())),
        ("2", lambda s: s["list"].add_all([])),
        ("2", lambda s: list(s["list"].get())),
        ("2", lambda s: s["list"].clear()),
        ("2", lambda s: list(s["list"].get())),
    ]
    got = run_steps(backend, tmp_path, steps)
    assert list(got[0]) == []  # PyFlink's get() of no state is empty (Java's null)
    assert got[1:] == [None, None, None, [1, 3, 4], [2], None, [5, 6], None, [], None, [5, 6], None, []]


_NULL_ELEMENT = "You cannot add null to a ListState."
_NULL_LIST = "List of values to add cannot be null."


def _refused(result: Any, message: str) -> None:
    assert isinstance(result, Raised), result
    assert result.type is TypeError and message in result.message, result


@backend_param
@pytest.mark.parametrize("ttl", [False, True], ids=["plain", "ttl"])
def test_list_state_refuses_null(backend: str, ttl: bool, tmp_path: Path) -> None:
    """StateBackendTestBase.testListStateAddNull, testListStateAddAllNullEntries,
    testListStateAddAllNull, testListStateUpdateNullEntries, testListStateUpdateNull: null as an
    element or as the list is refused (Flink: NullPointerException), and the state keeps what it
    held (Flink's heap state checks every element before it writes). The same with a TTL
    (Flink's TtlListState checks through the state it wraps)."""
    steps = [
        ("k", lambda s: s["list"].add(1)),
        ("k", lambda s: s["list"].add(None)),
        ("k", lambda s: s["list"].add_all([2, None, 3])),
        ("k", lambda s: s["list"].add_all(None)),
        ("k", lambda s: s["list"].update([4, None])),
        ("k", lambda s: s["list"].update(None)),
        ("k", lambda s: list(s["list"].get())),
    ]
    got = run_steps(backend, tmp_path, steps, ttl)
    _refused(got[1], _NULL_ELEMENT)
    _refused(got[2], _NULL_ELEMENT)
    _refused(got[3], _NULL_LIST)
    _refused(got[4], _NULL_ELEMENT)
    _refused(got[5], _NULL_LIST)
    assert got[6] == [1]


@backend_param
def test_reducing_state(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase.testReducingState / testReducingStateDefaultValue: null until the
    first add, reduced per key, null again after clear."""
    steps = [
        ("1", lambda s: s["reducing"].get()),
        ("1", lambda s: s["reducing"].add(1)),
        ("2", lambda s: s["reducing"].add(10)),
        ("1", lambda s: s["reducing"].add(2)),
        ("1", lambda s: s["reducing"].get()),
        ("2", lambda s: s["reducing"].get()),
        ("1", lambda s: s["reducing"].clear()),
        ("1", lambda s: s["reducing"].get()),
        ("2", lambda s: s["reducing"].get()),
    ]
    assert run_steps(backend, tmp_path, steps) == [None, None, None, None, 3, 10, None, None, 10]


@backend_param
def test_aggregating_state(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase.testAggregatingState(AddAndGet / ClearAndGet): the result of the
    key's accumulator; null without one, and after clear."""
    steps = [
        ("1", lambda s: s["aggregating"].get()),
        ("1", lambda s: s["aggregating"].add(1)),
        ("1", lambda s: s["aggregating"].add(4)),
        ("2", lambda s: s["aggregating"].add(7)),
        ("1", lambda s: s["aggregating"].get()),
        ("2", lambda s: s["aggregating"].get()),
        ("1", lambda s: s["aggregating"].clear()),
        ("1", lambda s: s["aggregating"].get()),
    ]
    assert run_steps(backend, tmp_path, steps) == [None, None, None, None, 2.5, 7.0, None, None]


@backend_param
def test_map_state(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase.testMapState: put/get/contains/remove/put_all and the views per key;
    a missing user key reads null; removing the last entry leaves the key empty."""
    steps = [
        ("1", lambda s: s["map"].get(1)),
        ("1", lambda s: s["map"].put(1, "1")),
        ("2", lambda s: s["map"].put_all({2: "2", 3: "3"})),
        ("1", lambda s: (s["map"].get(1), s["map"].contains(1), s["map"].contains(2))),
        ("2", lambda s: sorted(s["map"].items())),
        ("2", lambda s: s["map"].remove(2)),
        ("2", lambda s: (sorted(s["map"].keys()), sorted(s["map"].values()))),
        ("2", lambda s: s["map"].remove(99)),  # removing a missing key is fine
        ("2", lambda s: s["map"].put(3, "three")),
        ("2", lambda s: sorted(iter(s["map"]))),
        ("2", lambda s: s["map"].get(3)),
        ("1", lambda s: s["map"].remove(1)),
        ("1", lambda s: (s["map"].is_empty(), s["map"].get(1), list(s["map"].items()))),
        ("2", lambda s: s["map"].clear()),
        ("2", lambda s: s["map"].is_empty()),
    ]
    assert run_steps(backend, tmp_path, steps) == [
        None,
        None,
        None,
        ("1", True, False),
        [(2, "2"), (3, "3")],
        None,
        ([3], ["3"]),
        None,
        None,
        [3],
        "three",
        None,
        (True, None, []),
        None,
        True,
    ]


@backend_param
def test_map_state_is_empty(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase.testMapStateIsEmpty: empty before any put, not after, empty again
    after clear."""
    steps = [
        ("k", lambda s: s["map"].is_empty()),
        ("k", lambda s: s["map"].put(1, "a")),
        ("k", lambda s: s["map"].is_empty()),
        ("j", lambda s: s["map"].is_empty()),
        ("k", lambda s: s["map"].clear()),
        ("k", lambda s: s["map"].is_empty()),
    ]
    assert run_steps(backend, tmp_path, steps) == [True, None, False, True, None, True]


@backend_param
def test_map_state_put_null_value(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase.testMapStateGetKeys / the null-value rows of testMapState: a user key
    mapped to null is present (contains) and reads null."""
    steps = [
        ("k", lambda s: s["map"].put(1, None)),
        ("k", lambda s: (s["map"].contains(1), s["map"].get(1), s["map"].is_empty())),
    ]
    assert run_steps(backend, tmp_path, steps) == [None, (True, None, False)]


@backend_param
def test_many_keys(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase's many-keys scenarios (testNumStateEntries, reduced): 500 keys each
    keep their own value, list and map through the backend's cache and flushes."""
    keys = [f"key-{i}" for i in range(500)]

    def write(i: int) -> Any:
        def step(s: dict[str, Any]) -> None:
            s["value"].update(i)
            s["list"].add_all([i, i + 1])
            s["map"].put(i, str(i))

        return step

    def read(s: dict[str, Any]) -> Any:
        return s["value"].value(), list(s["list"].get()), s["map"].items()

    steps = [(k, write(i)) for i, k in enumerate(keys)] + [(k, read) for k in reversed(keys)]
    got = run_steps(backend, tmp_path, steps)[len(keys) :]
    assert got == [(i, [i, i + 1], [(i, str(i))]) for i in reversed(range(len(keys)))]


@backend_param
def test_state_per_namespace_in_windows(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase's per-namespace rows (testValueState, testListState... set two
    namespaces per key; a DataStream user sees namespaces as windows): a ProcessWindowFunction's
    window_state() is per key and window, its global_state() per key; sliding windows put each
    element in two namespaces (the heap case is test_window_function_state.py's)."""
    from state_backend_harness import set_backend
    from test_window_function_state import Firings, _windows

    from streamflow.common import Time
    from streamflow.datastream import StreamExecutionEnvironment
    from streamflow.datastream.window import SlidingEventTimeWindows

    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    set_backend(env, backend, tmp_path)
    env.set_batch_size(1)
    data = [("a", 1000), ("a", 6000), ("b", 2000), ("a", 16000), ("a", 4000)]
    stream = _windows(env, data, SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5)))
    out = sorted(stream.process(Firings()).execute_and_collect())
    a = [r for r in out if r[0] == "a"]
    assert [r[1:6] for r in a] == [
        (-5000, 1, 2, [1000, 4000], 5000),
        (0, 1, 3, [1000, 4000, 6000], 11000),
        (5000, 1, 1, [6000], 6000),
        (10000, 1, 1, [16000], 16000),
        (15000, 1, 1, [16000], 16000),
    ]
    assert sorted(r[7] for r in a) == [1, 2, 3, 4, 5]
    assert sorted(r[7] for r in out if r[0] == "b") == [1, 2]


def _null_attempts(state: Any) -> list[Any]:
    """Each null a ListState refuses, tried in turn: what each raised (None: it was accepted)."""
    attempts = [lambda: state.add(None), lambda: state.add_all([1, None]), lambda: state.add_all(None)]
    if hasattr(state, "update"):
        attempts += [lambda: state.update([None]), lambda: state.update(None)]
    results: list[Any] = []
    for attempt in attempts:
        try:
            attempt()
            results.append(None)
        except Exception as exc:
            results.append(Raised(exc))
    return results


@backend_param
def test_window_and_trigger_list_state_refuse_null(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase.testListStateAddNull & co. for the list states a window user holds:
    a ProcessWindowFunction's window_state() and a trigger's partitioned state are the backend's
    ListState in Flink (namespaced by the window), with the same refusals; the state stays empty."""
    from state_backend_harness import set_backend

    from streamflow.datastream import StreamExecutionEnvironment
    from streamflow.datastream.functions import ProcessWindowFunction
    from streamflow.datastream.state import ListStateDescriptor
    from streamflow.datastream.window import CountTumblingWindowAssigner, Trigger, TriggerResult

    seen: dict[str, Any] = {}
    items = ListStateDescriptor("items", Types.INT())

    class TryNullsTrigger(Trigger):
        def on_element(self, element, timestamp, window, ctx):
            state = ctx.get_partitioned_state(items)
            seen["trigger"] = (_null_attempts(state), list(state.get()))
            return TriggerResult.FIRE_AND_PURGE

        def on_event_time(self, time, window, ctx):
            return TriggerResult.CONTINUE

        def on_processing_time(self, time, window, ctx):
            return TriggerResult.CONTINUE

        def clear(self, window, ctx):
            ctx.get_partitioned_state(items).clear()

    class TryNulls(ProcessWindowFunction):
        def process(self, key, context, elements):
            state = context.window_state().get_list_state(items)
            seen["window"] = (_null_attempts(state), list(state.get()))
            yield key

    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    set_backend(env, backend, tmp_path)
    stream = env.from_collection([("a", 1)]).key_by(lambda e: e[0]).window(CountTumblingWindowAssigner.of(1))
    assert list(stream.trigger(TryNullsTrigger()).process(TryNulls()).execute_and_collect()) == ["a"]
    for where in ("trigger", "window"):
        results, left = seen[where]
        messages = [_NULL_ELEMENT, _NULL_ELEMENT, _NULL_LIST, _NULL_ELEMENT, _NULL_LIST][: len(results)]
        for result, message in zip(results, messages, strict=True):
            _refused(result, message)
        assert left == [], where


@backend_param
def test_map_state_iterate_and_modify(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase.testMapState's iterator rows (entries().iterator().remove(), and
    setValue): removing and updating entries while iterating the keys and items of a map state
    leaves exactly the changes made; iterating a key with no map yields nothing."""

    def remove_odd_and_double(s: dict[str, Any]) -> Any:
        for k in s["map"]:  # PyFlink: iterating a MapState gives its keys
            if k % 2:
                s["map"].remove(k)
        for k, v in s["map"].items():
            s["map"].put(k, v * 2)
        return sorted(s["map"].items())

    steps = [
        ("k", lambda s: list(iter(s["map"]))),
        ("k", lambda s: s["map"].put_all({i: str(i) for i in range(6)})),
        ("k", remove_odd_and_double),
        ("k", lambda s: (sorted(s["map"].keys()), sorted(s["map"].values()))),
    ]
    assert run_steps(backend, tmp_path, steps) == [
        [],
        None,
        [(0, "00"), (2, "22"), (4, "44")],
        ([0, 2, 4], ["00", "22", "44"]),
    ]


@backend_param
def test_window_value_state_default_value(backend: str, tmp_path: Path) -> None:
    """StateBackendTestBase.testValueStateDefaultValue in a window's namespace: a
    ProcessWindowFunction's window_state() value reads the descriptor's default while the
    window has no value, again after update(None) and clear, and in the next window (it read
    None: the default was dropped for per-window state)."""
    from state_backend_harness import set_backend

    from streamflow.datastream import StreamExecutionEnvironment
    from streamflow.datastream.functions import ProcessWindowFunction
    from streamflow.datastream.state import ValueStateDescriptor
    from streamflow.datastream.window import CountTumblingWindowAssigner

    class Defaults(ProcessWindowFunction):
        def process(self, key, context, elements):
            v = context.window_state().get_state(ValueStateDescriptor("v", Types.INT(), 42))
            first = v.value()
            v.update(7)
            written = v.value()
            v.update(None)
            after_null = v.value()
            v.update(8)
            v.clear()
            yield first, written, after_null, v.value()

    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    set_backend(env, backend, tmp_path)
    stream = env.from_collection([("a", 1), ("a", 2)]).key_by(lambda e: e[0])
    out = list(stream.window(CountTumblingWindowAssigner.of(1)).process(Defaults()).execute_and_collect())
    assert out == [(42, 7, 42, 42), (42, 7, 42, 42)]


@backend_param
def test_state_outside_a_keyed_context_is_refused(backend: str, tmp_path: Path) -> None:
    """Flink's heap and RocksDB states refuse an access while no key is set: a value written in
    open() must not become the state of the records whose key is None."""
    from state_backend_harness import set_backend

    import streamflow as sf
    from streamflow.datastream.functions import KeyedProcessFunction
    from streamflow.datastream.state import ValueStateDescriptor

    class InOpen(KeyedProcessFunction):
        def open(self, runtime_context):
            self.state = runtime_context.get_state(ValueStateDescriptor("v", Types.INT()))
            self.refused = []
            for access in (lambda: self.state.update(7), self.state.value, self.state.clear):
                try:
                    access()
                except RuntimeError as exc:
                    self.refused.append(str(exc))

        def process_element(self, value, ctx):
            yield len(self.refused), self.state.value()
            self.state.update(1 if value is None else 2)
            yield self.state.value()

    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    set_backend(env, backend, tmp_path)
    out = list(env.from_collection([None, "a"]).key_by(lambda x: x).process(InOpen()).execute_and_collect())
    assert out == [(3, None), 1, (3, None), 2]  # key None is a key like any other: no 7 from open()

    class Refused(KeyedProcessFunction):
        def open(self, runtime_context):
            runtime_context.get_state(ValueStateDescriptor("v", Types.INT())).update(7)

    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    set_backend(env, backend, tmp_path / "2")
    stream = env.from_collection([1]).key_by(lambda x: x).process(Refused()).name("opener")
    with pytest.raises(RuntimeError, match="No key set: keyed state 'v' was used outside") as failure:
        list(stream.execute_and_collect())
    assert "process_element / on_timer" in str(failure.value)
    assert "'opener'" in "".join(getattr(failure.value, "__notes__", []))
