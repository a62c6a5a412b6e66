"""A record emitted from a state value does not change when the function changes its state.

Flink's rule: records and state are copies. PyFlink serializes every record a Python function
emits, and Flink's RocksDB backend serializes what it stores, so a ``KeyedProcessFunction``
that keeps a list in ``ValueState``, appends to it, writes it back and emits it (a common
PyFlink pattern) emits ``[1]``, then ``[1, 2]``, then ``[1, 2, 3]``. streamflow hands records
on by reference; its state keeps its own copy of every value written (``runtime/detach.py``),
so the same holds here, on both state backends, at any parallelism, across a savepoint and
restore, and across a failover restoring a checkpoint. The cases: ``ValueState``,
``ListState`` (elements changed in place and written back), ``MapState``, ``ReducingState``
with a reduce function that changes its first argument in place (PyFlink's ``_accumulate``
idiom), ``AggregatingState`` whose ``get_result`` returns its accumulator, a
``ProcessWindowFunction``'s per-window state and the element list it is handed, broadcast
state (both sides), and ``ValueState`` with a time-to-live. Two neighbours: a mutable default
of a ``ValueStateDescriptor`` is each key's own copy (Flink's
``StateDescriptor#getDefaultValue`` copies it), and a change made in place without ``update``
(outside Flink's contract) is kept alike on both backends.

What is left: a value *read* from ``ValueState`` is the state's own object (no copy per read),
so a function that emits it without writing it back and later changes it in place before
``update`` changes the record emitted (a strict xfail below; ``runtime/detach.py`` says why).

Sources: the contract of Flink's ``ExecutionConfig.enableObjectReuse`` (records are copies
by default) and ``ValueState#update`` (a change is kept only once written back: Flink's
RocksDB state backend); PyFlink's ``KeyedProcessFunction`` examples keeping lists in state.
"""

from __future__ import annotations

import asyncio
import copy
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from state_backend_harness import BACKENDS, savepoint_then_restore, set_backend

import streamflow as sf
from streamflow.common import Time
from streamflow.datastream import (
    AggregateFunction,
    KeyedBroadcastProcessFunction,
    KeyedProcessFunction,
    ProcessWindowFunction,
)
from streamflow.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from streamflow.testing import Record, ScriptedSource

KEYS = ["a", "b", "c", "d", "e"]
DATA = [(k, i) for i in range(1, 4) for k in KEYS]  # every key gets 1, 2, 3


class _Value(KeyedProcessFunction):
    """The key's values in a list in ValueState, emitted after each one (the PyFlink pattern)."""

    def __init__(self, ttl: bool = False) -> None:
        self.ttl = ttl

    def open(self, runtime_context: Any) -> None:
        descriptor = ValueStateDescriptor("values", None)
        if self.ttl:
            descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.hours(1)).build())
        self.values = runtime_context.get_state(descriptor)

    def process_element(self, value: Any, ctx: Any) -> Any:
        current = self.values.value() or []
        current.append(value[1])
        self.values.update(current)
        yield (value[0], current)


class _List(KeyedProcessFunction):
    """Entries in ListState: each element counts itself in every entry before it, in place,
    writes the list back, and emits its own new entry."""

    def open(self, runtime_context: Any) -> None:
        self.entries = runtime_context.get_list_state(ListStateDescriptor("entries", None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        entries = list(self.entries.get())
        for e in entries:
            e["later"] += 1
        entry = {"v": value[1], "later": 0}
        entries.append(entry)
        self.entries.update(entries)
        yield (value[0], entry)


class _Map(KeyedProcessFunction):
    """The key's values in a list under one MapState key, emitted after each one."""

    def open(self, runtime_context: Any) -> None:
        self.map = runtime_context.get_map_state(MapStateDescriptor("map", None, None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        current = self.map.get("all") or []
        current.append(value[1])
        self.map.put("all", current)
        yield (value[0], current)


def _extend(a: list, b: list) -> list:
    a.extend(b)  # in place, returning its first argument (PyFlink's _accumulate idiom)
    return a


class _Reducing(KeyedProcessFunction):
    def open(self, runtime_context: Any) -> None:
        self.acc = runtime_context.get_reducing_state(ReducingStateDescriptor("acc", _extend))

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.acc.add([value[1]])
        yield (value[0], self.acc.get())


class _Collect(AggregateFunction):
    """A list accumulator that ``get_result`` returns as it is."""

    def create_accumulator(self) -> list:
        return []

    def add(self, value: Any, accumulator: list) -> list:
        accumulator.append(value)
        return accumulator

    def get_result(self, accumulator: list) -> list:
        return accumulator

    def merge(self, a: list, b: list) -> list:
        return a + b


class _Aggregating(KeyedProcessFunction):
    def open(self, runtime_context: Any) -> None:
        self.acc = runtime_context.get_aggregating_state(AggregatingStateDescriptor("acc", _Collect(), None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.acc.add(value[1])
        yield (value[0], self.acc.get())


FUNCTIONS = {"value": _Value, "list": _List, "map": _Map, "reducing": _Reducing, "aggregating": _Aggregating}


def _expected(kind: str, keys: list[str], values: list[int]) -> dict[str, list]:
    if kind == "list":
        per_key = [{"v": v, "later": 0} for v in values]
    else:
        per_key = [values[: i + 1] for i in range(len(values))]
    return {k: per_key for k in keys}


def _by_key(records: list) -> dict[str, list]:
    out: dict[str, list] = defaultdict(list)
    for key, value in records:
        out[key].append(value)
    return dict(out)


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", list(FUNCTIONS))
def test_records_emitted_from_state_do_not_change(
    kind: str, backend: str, parallelism: int, tmp_path: Path
) -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    set_backend(env, backend, tmp_path)
    stream = env.from_collection(DATA).key_by(lambda v: v[0]).process(FUNCTIONS[kind]())
    got = _by_key(list(stream.execute_and_collect()))
    assert got == _expected(kind, KEYS, [1, 2, 3])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_value_state_with_a_time_to_live_emitted_then_changed(backend: str, tmp_path: Path) -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    set_backend(env, backend, tmp_path)
    stream = env.from_collection(DATA).key_by(lambda v: v[0]).process(_Value(ttl=True))
    assert _by_key(list(stream.execute_and_collect())) == _expected("value", KEYS, [1, 2, 3])


@pytest.mark.parametrize(("before", "after"), [((1, "heap"), (4, "heap")), ((4, "rocksdb"), (1, "rocksdb"))])
@pytest.mark.parametrize("kind", ["value", "list", "map"])
def test_records_emitted_from_restored_state_do_not_change(
    kind: str, before: tuple[int, str], after: tuple[int, str], tmp_path: Path
) -> None:
    writes = [(k, i) for i in (1, 2) for k in KEYS]
    reads = [(k, i) for i in (3, 4) for k in KEYS]
    out = asyncio.run(
        savepoint_then_restore(tmp_path, before, after, FUNCTIONS[kind], writes, reads, key=lambda v: v[0])
    )
    expected = _expected(kind, KEYS, [1, 2, 3, 4])
    assert _by_key(out) == {k: v[2:] for k, v in expected.items()}


class _WindowList(ProcessWindowFunction):
    """Per-window state: a list of the firings' counts, emitted at each firing."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        state = context.window_state().get_state(ValueStateDescriptor("firings", None))
        firings = state.value() or []
        firings.append(len(list(elements)))
        state.update(firings)
        yield (key, firings)

    def clear(self, context: Any) -> None:
        context.window_state().get_state(ValueStateDescriptor("firings", None)).clear()


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_window_state_emitted_then_changed_by_the_next_firing(backend: str, tmp_path: Path) -> None:
    """A count trigger fires one global window per key three times."""
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    set_backend(env, backend, tmp_path)
    stream = (
        env.from_collection(DATA)
        .key_by(lambda v: v[0])
        .window(sf.GlobalWindows.create())
        .trigger(sf.CountTrigger.of(1))
        .process(_WindowList())
    )
    assert _by_key(list(stream.execute_and_collect())) == {k: [[1], [1, 2], [1, 2, 3]] for k in KEYS}


class _BroadcastRules(KeyedBroadcastProcessFunction):
    """The broadcast side keeps a list of the rules seen, extended in place and written back;
    the keyed side emits it when its element arrives."""

    DESCRIPTOR = MapStateDescriptor("rules", None, None)

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        state = ctx.get_broadcast_state(self.DESCRIPTOR)
        rules = state.get("rules") or []
        rules.append(value)
        state.put("rules", rules)
        yield ("broadcast", rules)

    def process_element(self, value: Any, ctx: Any) -> Any:
        return iter(())


def test_broadcast_state_emitted_then_changed_by_the_next_broadcast_element() -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    keyed = env.from_collection([("a", 1)]).key_by(lambda v: v[0])
    rules = env.from_collection(["r1", "r2", "r3"]).broadcast(_BroadcastRules.DESCRIPTOR)
    got = list(keyed.connect(rules).process(_BroadcastRules()).execute_and_collect())
    assert [v for k, v in got if k == "broadcast"] == [["r1"], ["r1", "r2"], ["r1", "r2", "r3"]]


class _EmitsWhatItRead(KeyedProcessFunction):
    """Emits the state's list as read (no update), then the next element appends to it."""

    def open(self, runtime_context: Any) -> None:
        self.values = runtime_context.get_state(ValueStateDescriptor("values", None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        current = self.values.value()
        if current is None:
            self.values.update([value[1]])
            return
        yield (value[0], current)  # emitted as read
        current.append(value[1])  # ... then changed in place and written back
        self.values.update(current)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "a value read from state is the state's own object (copy on write, not on read: "
        "runtime/detach.py): emitted as read and then changed in place before update(), it "
        "changes the record emitted; Flink's records are copies"
    ),
)
def test_a_state_value_emitted_as_read_then_changed_in_place() -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    data = [("a", 1), ("a", 2), ("a", 3)]
    stream = env.from_collection(data).key_by(lambda v: v[0]).process(_EmitsWhatItRead())
    got = list(stream.execute_and_collect())
    assert got == [("a", [1]), ("a", [1, 2])]


class _ChangesWithoutUpdate(KeyedProcessFunction):
    """Appends to the list read from ValueState without writing it back (outside Flink's
    contract), and emits the length the state then has."""

    def open(self, runtime_context: Any) -> None:
        self.values = runtime_context.get_state(ValueStateDescriptor("values", None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        current = self.values.value()
        if current is None:
            self.values.update([value[1]])
        else:
            current.append(value[1])  # no update()
        yield (value[0], len(self.values.value()))


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_change_without_update_is_kept_alike_on_both_backends(
    backend: str, parallelism: int, tmp_path: Path
) -> None:
    """What streamflow does with a change Flink's contract forbids (Flink's RocksDB backend
    loses it, its heap backend keeps it): a value read is the state's own object, so the change
    is kept, on both backends (RocksDB writes back a mutable value read, ``rocksdb_table.py``),
    at any parallelism (the RocksDB cache here holds 3 entries: keys are evicted and read
    back)."""
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    set_backend(env, backend, tmp_path)
    stream = env.from_collection(DATA).key_by(lambda v: v[0]).process(_ChangesWithoutUpdate())
    assert _by_key(list(stream.execute_and_collect())) == {k: [1, 2, 3] for k in KEYS}


class _AppendsToTheDefault(KeyedProcessFunction):
    """ValueState with a mutable default (``[]``), appended to and written back."""

    def __init__(self, ttl: bool = False) -> None:
        self.ttl = ttl

    def open(self, runtime_context: Any) -> None:
        descriptor = ValueStateDescriptor("values", None, [])
        if self.ttl:
            descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.hours(1)).build())
        self.values = runtime_context.get_state(descriptor)

    def process_element(self, value: Any, ctx: Any) -> Any:
        current = self.values.value()
        current.append(value[1])
        self.values.update(current)
        yield (value[0], current)


@pytest.mark.parametrize("ttl", [False, True], ids=["plain", "ttl"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_mutable_default_value_is_each_keys_own(backend: str, ttl: bool, tmp_path: Path) -> None:
    """Flink's ``StateDescriptor#getDefaultValue`` returns a copy of the default: appending to
    it for one key leaves the next key's default empty."""
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    set_backend(env, backend, tmp_path)
    stream = env.from_collection(DATA).key_by(lambda v: v[0]).process(_AppendsToTheDefault(ttl))
    assert _by_key(list(stream.execute_and_collect())) == _expected("value", KEYS, [1, 2, 3])


class _EmitsItsElements(ProcessWindowFunction):
    """Emits the ``elements`` it is handed, as they are."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield (key, elements)


@pytest.mark.parametrize("backend", BACKENDS)
def test_window_elements_emitted_then_appended_to_by_the_next_element(backend: str, tmp_path: Path) -> None:
    """A count trigger fires a global window per element without purging: the elements list a
    firing emitted is not the window contents the next element is appended to (PyFlink hands
    the function a fresh list per firing)."""
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    set_backend(env, backend, tmp_path)
    stream = (
        env.from_collection(DATA)
        .key_by(lambda v: v[0])
        .window(sf.GlobalWindows.create())
        .trigger(sf.CountTrigger.of(1))
        .process(_EmitsItsElements())
    )
    got = {k: [[v for _, v in elements] for elements in firings] for k, firings in _by_key(
        list(stream.execute_and_collect())
    ).items()}  # fmt: skip
    assert got == {k: [[1], [1, 2], [1, 2, 3]] for k in KEYS}


def test_window_elements_emitted_then_appended_to_by_a_late_element() -> None:
    """An event-time tumbling window with allowed lateness keeps its pane after firing; a late
    element fires it again: the list the first firing emitted stays as it was."""
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    script = [Record(("a", 1), 100), Record(("a", 2), 200), sf.Watermark(1_500), Record(("a", 3), 300)]
    stream = (
        env.from_source(ScriptedSource(script), None, "scripted")
        .key_by(lambda v: v[0])
        .window(sf.TumblingEventTimeWindows.of(Time.seconds(1)))
        .allowed_lateness(10_000)
        .process(_EmitsItsElements())
    )
    got = [[v[1] for v in elements] for _key, elements in stream.execute_and_collect()]
    assert got == [[1, 2], [1, 2, 3]]


_AT_EMISSION: list[Any] = []  # what each record of _EnrichWithRules held when it was emitted


class _EnrichWithRules(KeyedBroadcastProcessFunction):
    """The keyed side emits its element with the rules as read from broadcast state; the
    broadcast side changes what it reads in place (a count of the rules) and writes it back."""

    DESCRIPTOR = MapStateDescriptor("counted", None, None)

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        state = ctx.get_broadcast_state(self.DESCRIPTOR)
        rules = state.get("rules")
        if rules is None:
            rules = {"count": 0}
        rules["count"] += 1  # in place, then written back
        state.put("rules", rules)
        return iter(())

    def process_element(self, value: Any, ctx: Any) -> Any:
        rules = ctx.get_broadcast_state(self.DESCRIPTOR).get("rules")
        _AT_EMISSION.append((value, copy.deepcopy(rules)))
        yield (value, rules)


def test_broadcast_state_read_by_the_keyed_side_then_changed_by_the_broadcast_side() -> None:
    """Every record the keyed side emitted still holds the rules as they were when it was
    emitted, however the two inputs interleave (the broadcast side reads copies)."""
    _AT_EMISSION.clear()
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    rules = env.from_collection([f"r{i}" for i in range(5_000)]).broadcast(_EnrichWithRules.DESCRIPTOR)
    keyed = env.from_collection([f"e{i}" for i in range(5_000)]).key_by(lambda v: v)
    got = list(keyed.connect(rules).process(_EnrichWithRules()).execute_and_collect())
    assert len(got) == 5_000 and sorted(got, key=repr) == sorted(_AT_EMISSION, key=repr)


_FAILED: set[str] = set()


class _FailOnceAt(sf.MapFunction):
    """Raises the first time it meets ``poison`` (once per ``name`` across restarts)."""

    def __init__(self, name: str, poison: Any) -> None:
        self.name, self.poison = name, poison

    def map(self, value: Any) -> Any:
        if value == self.poison and self.name not in _FAILED:
            _FAILED.add(self.name)
            raise RuntimeError(f"injected failure at {value!r}")
        return value


@pytest.mark.parametrize("backend", BACKENDS)
def test_records_emitted_from_state_restored_by_a_failover(backend: str, tmp_path: Path) -> None:
    """A checkpoint completes halfway, the job fails, restores it and replays the rest: every
    record emitted, before and after the failover, is the key's list as it was when emitted
    (a replayed record may repeat)."""
    data = [(k, i) for i in range(1, 21) for k in KEYS]
    half = len(data) // 2
    chk = tmp_path / "chk"

    async def records() -> Any:
        for i, record in enumerate(data):
            if i == half:  # a checkpoint completed before the rest (at once after the restore)
                for _ in range(3000):
                    if any(chk.glob("chk-*/_metadata")):
                        break
                    await asyncio.sleep(0.01)
            yield record
            await asyncio.sleep(0)

    env = sf.StreamExecutionEnvironment().set_parallelism(2).set_batch_size(4)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage_dir(chk)
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(3, 0))
    set_backend(env, backend, tmp_path)
    out: list = []
    (
        env.from_async_iterable(records)
        .uid("src")
        .map(_FailOnceAt(str(tmp_path), data[half + 2]))
        .uid("fail")
        .set_parallelism(1)
        .key_by(lambda v: v[0])
        .process(_Value())
        .uid("fn")
        .add_sink(out.append)
    )
    result = env.execute("failover")
    assert result.metrics["job.numRestarts"] == 1
    for key, emitted in _by_key(out).items():
        assert all(values == list(range(1, len(values) + 1)) for values in emitted), key
        assert sorted({len(values) for values in emitted}) == list(range(1, 21)), key
