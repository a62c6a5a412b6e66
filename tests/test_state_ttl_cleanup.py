"""TTL cleanup strategies (state/ttl_cleanup.py): table tests of the pure logic with a manual
clock, and a job showing expired keys that are never read again leave checkpoints and restores."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streamflow.checkpoint.restore import RestoredCheckpoint
from streamflow.checkpoint.storage import FileSystemCheckpointStorage
from streamflow.common import Time, Types
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.functions import KeyedProcessFunction
from streamflow.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from streamflow.state.codec import MsgpackCodec
from streamflow.state.keyed import KeyedStateBackend
from streamflow.state.ttl_cleanup import GONE, prune, registry
from streamflow.state.ttl_state import ttl_state
from streamflow.testing import ListSink, ManualClock

TTL = 100


@pytest.mark.parametrize(
    ("kind", "entry", "now", "expected"),
    [
        ("value", ("v", 0), 99, ("v", 0)),  # alive until ts + ttl
        ("value", ("v", 0), 100, GONE),  # ts + ttl <= now: expired
        ("reducing", (7, 50), 149, (7, 50)),
        ("aggregating", ([1], 50), 150, GONE),
        ("list", [("a", 0), ("b", 60)], 100, [("b", 60)]),  # per element
        ("list", [("a", 0), ("b", 60)], 160, GONE),
        ("list", [("a", 10), ("b", 60)], 50, [("a", 10), ("b", 60)]),
        ("map", {"x": (1, 0), "y": (2, 80)}, 120, {"y": (2, 80)}),  # per entry
        ("map", {"x": (1, 0), "y": (2, 80)}, 180, GONE),
    ],
)
def test_prune(kind: str, entry: object, now: int, expected: object) -> None:
    result = prune(kind, entry, TTL, now)
    assert result == expected if expected is not GONE else result is GONE
    if expected == entry:
        assert result is entry  # nothing expired: the same object (no rewrite)


def _config(build) -> StateTtlConfig:  # type: ignore[no-untyped-def]
    return build(StateTtlConfig.new_builder(Time.milliseconds(TTL))).build()


def _backend_with(keys_at: dict[str, int], build, kind: str = "value"):  # type: ignore[no-untyped-def]
    """A backend whose TTL state ``s`` holds ``keys_at`` (key -> write time), stored directly
    (writing through the state would already run its cleanup)."""
    clock, backend = ManualClock(), KeyedStateBackend(128)
    descriptor = {"value": ValueStateDescriptor("s", Types.INT()), "list": ListStateDescriptor("s"),
                  "map": MapStateDescriptor("s")}[kind]
    descriptor.enable_time_to_live(_config(build))
    state = ttl_state(backend, descriptor, clock.now_ms)
    backend.current_key = "reader"  # the key the state is read for (it has no entry)
    table = backend.table("s", kind)
    for key, at in keys_at.items():
        table[key] = {"value": (1, at), "list": [(1, at)], "map": {"u": (1, at)}}[kind]
    return clock, backend, state


OLD = {f"old{i}": 0 for i in range(8)}  # expire at 100
NEW = {f"new{i}": 150 for i in range(4)}  # expire at 250


@pytest.mark.parametrize(
    ("size", "per_record", "accesses", "records", "left"),
    [
        (3, False, 1, 0, 12 - 3),  # one access visits 3 keys: the first 3 (old) go
        (3, False, 2, 0, 12 - 6),
        (3, False, 3, 0, 12 - 8),  # the third visit sees 2 old and 1 new key
        (3, False, 0, 5, 12),  # no per-record cleanup: records alone clean nothing
        (3, True, 0, 2, 12 - 6),  # per record: each change of the current key runs it
        (3, True, 1, 1, 12 - 6),
        (100, False, 1, 0, 4),  # one pass over all keys
        (0, False, 5, 5, 12),  # size 0: nothing
    ],
)
def test_incremental_cleanup(size: int, per_record: bool, accesses: int, records: int, left: int) -> None:
    clock, backend, state = _backend_with(
        OLD | NEW, lambda b: b.cleanup_incrementally(size, per_record)
    )
    table = backend.table("s", "value")
    clock.set(200)  # old keys expired, new ones alive
    backend.current_key = "nobody"  # (the per-record cleanup ran once here when per_record)
    if per_record:
        records -= 1
        accesses_done = 1
    else:
        accesses_done = 0
    for _ in range(records):
        backend.current_key = "nobody"
    for _ in range(accesses):
        state.value()  # an access of the state: runs the cleanup first (key "nobody": no entry)
    visits = accesses + records + accesses_done
    assert len(table) == left, f"{visits} cleanup runs of {size} keys"
    assert set(NEW) <= set(table)  # live keys stay


def test_incremental_cleanup_prunes_lists_and_maps_and_restarts_its_pass() -> None:
    for kind in ("list", "map"):
        one_key = lambda b: b.cleanup_incrementally(1, False)  # noqa: E731
        clock, backend, state = _backend_with({"a": 0, "b": 0}, one_key, kind)
        table = backend.table("s", kind)
        clock.set(60)
        backend.current_key = "a"
        state.add(2) if kind == "list" else state.put("v", 2)  # (its access visited "a": nothing expired)
        clock.set(120)  # a's first element/entry and all of b expired
        backend.current_key = "z"
        state.get() if kind == "list" else state.get("q")  # visits "b": removed
        assert set(table) == {"a"} and len(table["a"]) == 2
        state.get() if kind == "list" else state.get("q")  # the pass is over: a fresh one visits "a"
        assert len(table["a"]) == 1  # the expired element/entry went, the live one stays


def test_background_cleanup_is_incremental_by_default_and_can_be_disabled() -> None:
    clock, backend, state = _backend_with(OLD, lambda b: b)  # Flink's default: 5 keys per access
    clock.set(200)
    state.value()
    assert len(backend.table("s", "value")) == 3
    clock, backend, state = _backend_with(OLD, lambda b: b.disable_cleanup_in_background())
    clock.set(200)
    state.value()
    assert len(backend.table("s", "value")) == 8


def test_full_snapshot_cleanup_leaves_expired_entries_out_of_the_snapshot_only() -> None:
    full = lambda b: b.cleanup_full_snapshot().disable_cleanup_in_background()  # noqa: E731
    clock, backend, _ = _backend_with(OLD | NEW, full)
    clock.set(200)
    snap = backend.snapshot()
    written = {k for group in snap["groups"].values() for k in group.get("s", {})}
    assert written == set(NEW)
    assert len(backend.table("s", "value")) == 12  # the local state is not cleaned
    clock, backend, _ = _backend_with(OLD | NEW, lambda b: b.disable_cleanup_in_background())
    clock.set(200)
    snap = backend.snapshot()
    assert {k for group in snap["groups"].values() for k in group.get("s", {})} == set(OLD | NEW)


def test_rocksdb_compaction_filter_is_accepted_and_said_to_do_nothing_on_heap(caplog) -> None:  # type: ignore[no-untyped-def]
    with caplog.at_level(logging.INFO, logger="streamflow.state.ttl_cleanup"):
        _, backend, _ = _backend_with(OLD, lambda b: b.cleanup_in_rocksdb_compact_filter(1000))
    assert "no effect on the heap state backend" in caplog.text
    assert registry(backend).incremental["s"].size == 5  # the heap's default still applies


# ---------------------------------------------------------------- end to end

STRATEGIES = {
    "on access only": lambda b: b.disable_cleanup_in_background(),
    "full snapshot": lambda b: b.cleanup_full_snapshot().disable_cleanup_in_background(),
    "incremental per record": lambda b: b.cleanup_incrementally(10, True),
}


@pytest.mark.parametrize(
    ("strategy", "in_savepoint", "restored_read"),
    [
        ("on access only", {"old1", "old2", "new"}, 2),  # the expired count is restored, seen once
        ("full snapshot", {"new"}, 1),
        ("incremental per record", {"new"}, 1),
    ],
)
async def test_expired_keys_never_read_again_leave_checkpoints_and_restores(
    tmp_path: Path, strategy: str, in_savepoint: set[str], restored_read: int
) -> None:
    from test_checkpointing import Gate, wait_until

    clock = ManualClock()
    descriptor = ValueStateDescriptor("count", Types.INT())
    descriptor.enable_time_to_live(
        STRATEGIES[strategy](StateTtlConfig.new_builder(Time.seconds(1)).return_expired_if_not_cleaned_up()).build()
    )

    class Count(KeyedProcessFunction):
        def open(self, ctx):  # type: ignore[no-untyped-def]
            self.count = ctx.get_state(descriptor)

        def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
            clock.set(value[0])
            n = (self.count.value() or 0) + 1
            self.count.update(n)
            yield value[1], n

    def build(env, source, sink) -> None:  # type: ignore[no-untyped-def]
        source.uid("src").key_by(lambda r: r[1]).process(Count()).uid("count").sink_to(sink)

    data = [(0, "old1"), (0, "old2"), (5_000, "new")]  # the old keys are never read again
    gate = Gate([*data, (9_000, "after the savepoint")], 3)  # the job runs on: a savepoint needs it
    env, sink1 = StreamExecutionEnvironment(clock=clock), ListSink()
    build(env, env.from_async_iterable(gate.__aiter__), sink1)
    client = await env.execute_async("ttl")
    await wait_until(lambda: len(sink1.results) == 3)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()

    handle = FileSystemCheckpointStorage(tmp_path / "sp").load(path)
    restored = RestoredCheckpoint.load(handle, MsgpackCodec())
    keys = {k for state in restored.ops["count"].values()
            for group in state["keyed"]["groups"].values() for k in group.get("count", {})}
    assert keys == in_savepoint

    env2, sink2 = StreamExecutionEnvironment(clock=clock), ListSink()
    env2.configure({"execution.savepoint.path": path})
    # the restored source resumes after the 3 records it had read
    build(env2, env2.from_collection([*data, (6_000, "old1")]), sink2)
    await (await env2.execute_async("ttl")).get_job_execution_result()
    assert sink2.results == [("old1", restored_read)]
