"""Keyed state declared ``Types.PICKLED_BYTE_ARRAY()`` holds any picklable object on both backends.

PyFlink stores such a state's values with its ``PickleSerializer`` (pyflink/fn_execution/
coders.py, ``PickledBytesCoderImpl``): any picklable Python object can be kept, whatever the
state backend. The heap backend pickled those states in its snapshots (state/typed.py); the
RocksDB backend wrote their values with the job's codec, so the first checkpoint of a job
keeping, say, an instance of a plain user class failed (``TypeError: cannot encode ...``). Now a
RocksDB backend stores a pickled state's entries pickled (codec extension 18) and unpickles them
only for a state the running job declares pickled.

Every kind of keyed state (value, list, map with pickled keys and values, reducing,
aggregating) is checked end to end through the public API: a checkpoint, then a restore from
it or from a savepoint, rescaled 1 <-> 4, on the same backend and across a heap <-> RocksDB
switch; the restored job's results equal a model's of the whole input.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

from streamflow import RestartStrategies
from streamflow.common import Time, Types
from streamflow.datastream import EmbeddedRocksDBStateBackend, StreamExecutionEnvironment
from streamflow.datastream.functions import AggregateFunction, KeyedProcessFunction
from streamflow.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from streamflow.testing import ListSink, ScriptedSource

PICKLED = Types.PICKLED_BYTE_ARRAY()
KEYS = 8
FIRST = [(k, n) for n in range(3) for k in range(KEYS)]  # before the checkpoint
SECOND = [(k, n) for n in range(3, 5) for k in range(KEYS)]  # after the restore


class Point:
    """A plain class (no dataclass): the default codec refuses it, pickle takes it."""

    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return type(other) is Point and other.x == self.x

    def __hash__(self) -> int:
        return hash(("Point", self.x))

    def __repr__(self) -> str:
        return f"Point({self.x})"


class Acc:
    """An aggregating state's accumulator of a plain class."""

    def __init__(self) -> None:
        self.seen: set[Point] = set()


class Distinct(AggregateFunction):
    def create_accumulator(self) -> Acc:
        return Acc()

    def add(self, value: Point, accumulator: Acc) -> Acc:
        accumulator.seen.add(value)
        return accumulator

    def get_result(self, accumulator: Acc) -> list[int]:
        return sorted(p.x for p in accumulator.seen)

    def merge(self, a: Acc, b: Acc) -> Acc:
        a.seen |= b.seen
        return a


class Everything(KeyedProcessFunction):
    """Each record ``(key, n)`` updates five pickled states with Points and emits what they hold
    (``ttl``: every state with that time-to-live)."""

    def __init__(self, ttl: StateTtlConfig | None = None) -> None:
        self.ttl = ttl

    def _declared(self, descriptor: Any) -> Any:
        if self.ttl is not None:
            descriptor.enable_time_to_live(self.ttl)
        return descriptor

    def open(self, runtime_context: Any) -> None:
        ctx, d = runtime_context, self._declared
        self.total = ctx.get_state(d(ValueStateDescriptor("total", PICKLED)))
        self.seen = ctx.get_list_state(d(ListStateDescriptor("seen", PICKLED)))
        self.by_point = ctx.get_map_state(d(MapStateDescriptor("by_point", PICKLED, PICKLED)))
        self.sum = ctx.get_reducing_state(
            d(ReducingStateDescriptor("sum", lambda a, b: Point(a.x + b.x), PICKLED))
        )
        distinct = AggregatingStateDescriptor("distinct", Distinct(), PICKLED)
        self.distinct = ctx.get_aggregating_state(d(distinct))

    def process_element(self, record: Any, ctx: Any) -> Any:
        key, n = record
        total = self.total.value() or Point(0)
        total.x += n  # changed in place, then written back (as Flink asks)
        self.total.update(total)
        self.seen.add(Point(n))
        self.by_point.put(Point(n), {Point(n * 10)})
        self.sum.add(Point(n))
        self.distinct.add(Point(n % 2))
        by_point = sorted((p.x, sorted(q.x for q in v)) for p, v in self.by_point.items())
        seen = [p.x for p in self.seen.get()]
        yield key, n, self.total.value().x, seen, by_point, self.sum.get().x, self.distinct.get()


def expected(records: list[tuple[int, int]]) -> set[tuple]:
    """What Everything emits for each record of ``records`` given every record before it."""
    out = set()
    for i, (key, n) in enumerate(records):
        mine = [m for k, m in records[: i + 1] if k == key]
        by_point = tuple(sorted((m, (m * 10,)) for m in set(mine)))
        out.add((key, n, sum(mine), tuple(mine), by_point, sum(mine), tuple(sorted({m % 2 for m in mine}))))
    return out


def _as_set(results: list) -> set[tuple]:
    return {
        (k, n, t, tuple(s), tuple((p, tuple(q)) for p, q in b), r, tuple(d))
        for k, n, t, s, b, r, d in results
    }


async def _run(
    tmp_path: Path,
    backend: str,
    parallelism: int,
    records: list,
    wanted: int,
    restore: str | None = None,
    ttl: StateTtlConfig | None = None,
) -> tuple[str, str, list]:
    """A job over ``records`` (a restored source skips what it emitted before): waits for
    ``wanted`` results, takes a checkpoint and a savepoint, cancels; returns both paths and
    the results."""
    env = StreamExecutionEnvironment().set_parallelism(parallelism)
    if backend == "rocksdb-tiny-cache":  # every few records evict the cache: read back from the DB
        env.set_state_backend(EmbeddedRocksDBStateBackend(cache_entries=2, flush_entries=2))
    else:
        env.configure({"state.backend.type": backend})
    env.enable_checkpointing(3_600_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / f"chk-{backend}-{parallelism}"))
    env.set_restart_strategy(RestartStrategies.no_restart())
    if restore is not None:
        env.configure({"execution.savepoint.path": restore})
    sink = ListSink()
    source = env.from_source(ScriptedSource(records, end=False), None, "records").uid("records")
    keyed = source.set_parallelism(1).key_by(lambda r: r[0]).process(Everything(ttl)).uid("everything")
    keyed.sink_to(sink).set_parallelism(1)
    client = await env.execute_async("pickled-state")
    result = asyncio.ensure_future(client.get_job_execution_result())
    await wait_until(lambda: len(sink.results) >= wanted or result.done())
    if result.done():
        result.result()  # the job's failure
    checkpoint = await client.trigger_checkpoint()
    savepoint = await client.trigger_savepoint(str(tmp_path / f"sp-{backend}-{parallelism}-{len(records)}"))
    await client.cancel()
    return str(checkpoint), str(savepoint), sink.results


@pytest.mark.parametrize(
    ("first", "old", "second", "new", "restore_from"),
    [
        ("rocksdb", 1, "rocksdb", 1, "checkpoint"),
        ("rocksdb-tiny-cache", 1, "rocksdb-tiny-cache", 4, "checkpoint"),
        ("rocksdb", 1, "rocksdb", 4, "checkpoint"),
        ("rocksdb", 4, "rocksdb", 1, "savepoint"),
        ("hashmap", 1, "rocksdb", 4, "savepoint"),
        ("rocksdb", 4, "hashmap", 1, "savepoint"),
        ("rocksdb", 1, "hashmap", 4, "checkpoint"),
        ("hashmap", 4, "hashmap", 1, "checkpoint"),
    ],
)
async def test_pickled_states_hold_any_picklable_object(
    tmp_path: Path, first: str, old: int, second: str, new: int, restore_from: str
) -> None:
    checkpoint, savepoint, out = await _run(tmp_path, first, old, FIRST, len(FIRST))
    assert _as_set(out) == expected(FIRST)
    path = checkpoint if restore_from == "checkpoint" else savepoint
    _, _, out = await _run(tmp_path, second, new, FIRST + SECOND, len(SECOND), restore=path)
    assert _as_set(out) == expected(FIRST + SECOND) - expected(FIRST)


@pytest.mark.parametrize(
    ("first", "old", "second", "new", "restore_from"),
    [
        ("rocksdb", 1, "rocksdb", 4, "checkpoint"),
        ("hashmap", 4, "rocksdb", 1, "savepoint"),
        ("rocksdb", 4, "hashmap", 1, "savepoint"),
    ],
)
async def test_pickled_states_with_a_time_to_live(
    tmp_path: Path, first: str, old: int, second: str, new: int, restore_from: str
) -> None:
    """With a TTL (an hour: nothing expires) cleaned up in full snapshots: RocksDB's cleanup
    scans the DB before each checkpoint and must read a pickled state's entries unpickled (it
    read the pickled bytes as ``(value, last write)``, so every entry looked expired)."""
    ttl = StateTtlConfig.new_builder(Time.hours(1)).cleanup_full_snapshot().build()
    checkpoint, savepoint, out = await _run(tmp_path, first, old, FIRST, len(FIRST), ttl=ttl)
    assert _as_set(out) == expected(FIRST)
    path = checkpoint if restore_from == "checkpoint" else savepoint
    _, _, out = await _run(tmp_path, second, new, FIRST + SECOND, len(SECOND), restore=path, ttl=ttl)
    assert _as_set(out) == expected(FIRST + SECOND) - expected(FIRST)


class Untyped(KeyedProcessFunction):
    """The same operator declaring its value state without a type: it emits what it reads."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(ValueStateDescriptor("total", None))

    def process_element(self, record: Any, ctx: Any) -> Any:
        yield record, self.total.value()


@pytest.mark.parametrize(
    ("first", "second"), [("rocksdb", "rocksdb"), ("rocksdb", "hashmap"), ("hashmap", "rocksdb")]
)
async def test_a_pickled_state_declared_without_a_type_after_a_restore_is_refused(
    tmp_path: Path, first: str, second: str
) -> None:
    """A restore never unpickles a state the running job does not declare pickled: declared
    without a type, the state's pickled entries would reach the job as bytes (RocksDB handed
    them over so); the restore is refused naming the state, as the heap backend refused it."""
    _, savepoint, _ = await _run(tmp_path, first, 1, FIRST, len(FIRST))
    env = StreamExecutionEnvironment().set_parallelism(1)
    env.configure({"state.backend.type": second, "execution.savepoint.path": savepoint})
    env.set_restart_strategy(RestartStrategies.no_restart())
    sink = ListSink()
    source = env.from_source(ScriptedSource(FIRST + SECOND), None, "records").uid("records")
    source.key_by(lambda r: r[0]).process(Untyped()).uid("everything").sink_to(sink)
    client = await env.execute_async("pickled-state")
    with pytest.raises(TypeError, match="state 'total' was checkpointed pickled"):
        await asyncio.wait_for(client.get_job_execution_result(), 30)
    assert sink.results == []
