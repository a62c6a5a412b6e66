"""Expired TTL state in RocksDB that is never read again is removed (``state/rocksdb_ttl_cleanup.py``,
Flink's compaction-filter cleanup ``cleanupInRocksdbCompactFilter`` and ``cleanupFullSnapshot``):
background passes scan in a worker thread and the loop applies what they found, leaving any
key written since; unexpired entries, lists' and maps' live elements stay; checkpoints and
restores hold exactly what is left."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_rocksdb_rescale import Storage

import streamflow as sf
from streamflow.common import Time, Types
from streamflow.datastream.functions import KeyedProcessFunction
from streamflow.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from streamflow.state import codec as _codec
from streamflow.state.backends import EmbeddedRocksDBStateBackend
from streamflow.state.key_groups import key_group_range
from streamflow.state.rocksdb_backend import RocksDBKeyedStateBackend
from streamflow.state.ttl_state import ttl_state
from streamflow.testing import ListSink, ManualClock

MAXP = 128
TTL = 1000


class Clock:
    def __init__(self) -> None:
        self.t = 0

    def now(self) -> int:
        return self.t


def _backend(tmp_path: Path, cache_entries: int = 100_000) -> RocksDBKeyedStateBackend:
    return RocksDBKeyedStateBackend(
        MAXP, key_group_range(0, MAXP, 1), operator_id="ttl", subtask=0, codec=_codec.MsgpackCodec(),
        local_dir=str(tmp_path / "work"), cache_entries=cache_entries,
    )  # fmt: skip


def _entries(backend: RocksDBKeyedStateBackend, name: str, kind: str) -> dict[Any, Any]:
    """What the DB holds for state ``name`` (not the cache)."""
    backend.flush()
    return {key: backend.decode(raw) for _rk, key, raw in backend.scan(backend.sid_of(name, kind))}


async def _cleaned(backend: RocksDBKeyedStateBackend) -> None:
    """Safe points until a background pass has run and what it found is applied."""
    cleanup = backend.ttl_cleanup
    assert cleanup is not None
    passes = cleanup.passes
    for _ in range(500):
        backend.flush()
        if cleanup.passes > passes and not cleanup._found and cleanup._pass is None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no TTL cleanup pass ran")


def _config(builder: Any = None) -> StateTtlConfig:
    b = StateTtlConfig.new_builder(Time.milliseconds(TTL)).return_expired_if_not_cleaned_up()
    return (builder(b) if builder else b).build()


@pytest.mark.parametrize("query_every", [None, 7])  # the default (background cleanup), explicit
async def test_expired_values_never_read_again_leave_the_db_and_checkpoints(
    tmp_path: Path, query_every: int | None
) -> None:
    clock = Clock()
    backend = _backend(tmp_path)
    d = ValueStateDescriptor("v", Types.INT())
    d.enable_time_to_live(
        _config(None if query_every is None else lambda b: b.cleanup_in_rocksdb_compact_filter(7))
    )
    state = ttl_state(backend, d, clock.now)
    for k in range(100):  # written at 0: expired at 1000
        backend.current_key = k
        state.update(k)
    clock.t = 900
    for k in range(100, 150):  # written at 900: live until 1900
        backend.current_key = k
        state.update(k)
    clock.t = 1500
    assert len(_entries(backend, "v", "value")) == 150  # nothing read: nothing expired yet
    await _cleaned(backend)
    assert _entries(backend, "v", "value") == {k: (k, 900) for k in range(100, 150)}
    assert backend.ttl_cleanup is not None and backend.ttl_cleanup.removed == 100
    store = Storage(tmp_path / "shared")
    snap = store.snapshot(backend, 1)
    backend.close()
    restored = _backend(tmp_path)
    try:
        restored.restore([snap], lambda g: True, store.path)
        assert _entries(restored, "v", "value") == {k: (k, 900) for k in range(100, 150)}
        state = ttl_state(restored, d, clock.now)
        restored.current_key = 120
        assert state.value() == 120
        restored.current_key = 5
        assert state.value() is None  # removed, not just expired (visibility returns expired)
    finally:
        restored.close()


async def test_lists_and_maps_keep_their_live_elements(tmp_path: Path) -> None:
    clock = Clock()
    backend = _backend(tmp_path, cache_entries=4)  # most keys are read from the DB
    ld, md = ListStateDescriptor("l", Types.INT()), MapStateDescriptor("m", Types.INT(), Types.INT())
    ld.enable_time_to_live(_config())
    md.enable_time_to_live(_config())
    lst, mp = ttl_state(backend, ld, clock.now), ttl_state(backend, md, clock.now)
    for k in range(20):
        backend.current_key = k
        lst.add(1)
        mp.put("old", 1)
    clock.t = 900
    for k in range(10):
        backend.current_key = k
        lst.add(2)
        mp.put("new", 2)
    clock.t = 1500
    await _cleaned(backend)
    assert _entries(backend, "l", "list") == {k: [(2, 900)] for k in range(10)}
    assert _entries(backend, "m", "map") == {k: {"new": (2, 900)} for k in range(10)}
    backend.close()


async def test_a_key_written_after_the_scan_keeps_its_new_value(tmp_path: Path) -> None:
    """The pass found key 1 expired; the operator wrote it again before the loop applied the
    pass (flushed and evicted: not in the cache): the new value stays."""
    clock = Clock()
    backend = _backend(tmp_path)
    d = ValueStateDescriptor("v", Types.INT())
    d.enable_time_to_live(_config())
    state = ttl_state(backend, d, clock.now)
    for k in (1, 2):
        backend.current_key = k
        state.update(k)
    backend.flush()
    clock.t = 1500
    cleanup = backend.ttl_cleanup
    assert cleanup is not None
    cleanup._found = cleanup.scan(list(cleanup._states.values()))
    assert len(cleanup._found) == 2
    backend.current_key = 1
    state.update(10)
    backend.flush()
    backend.table("v", "value").drop_cache()
    cleanup._apply(100)
    assert _entries(backend, "v", "value") == {1: (10, 1500)}
    backend.close()


async def test_full_snapshot_cleanup_leaves_expired_entries_out_of_every_checkpoint(tmp_path: Path) -> None:
    clock = Clock()
    backend = _backend(tmp_path)
    d = ValueStateDescriptor("v", Types.INT())
    d.enable_time_to_live(_config(lambda b: b.cleanup_full_snapshot().disable_cleanup_in_background()))
    state = ttl_state(backend, d, clock.now)
    for k in range(10):
        backend.current_key = k
        state.update(k)
        clock.t += 100
    clock.t = 1450  # keys 0-4 written at 0-400: expired; 5-9 live
    assert backend.ttl_cleanup is not None and backend.ttl_cleanup._pass is None  # no background
    store = Storage(tmp_path / "shared")
    snap = store.snapshot(backend, 1)
    backend.close()
    restored = _backend(tmp_path)
    try:
        restored.restore([snap], lambda g: True, store.path)
        assert sorted(_entries(restored, "v", "value")) == [5, 6, 7, 8, 9]
    finally:
        restored.close()


async def test_a_job_on_rocksdb_drops_keys_never_read_again_from_its_savepoint(tmp_path: Path) -> None:
    """End to end (the compaction filter's cleanup): keys written at 0 are never read again; the
    job runs on (other keys, checkpoints) past their TTL; the savepoint taken then does not hold
    them, so the restored job counts them from 1, while a key still live counts on. (With
    ``return_expired_if_not_cleaned_up``, an uncleaned expired key would count on too.)"""
    from test_checkpointing import wait_until

    clock = ManualClock()
    descriptor = ValueStateDescriptor("count", Types.INT())
    # the compaction filter's cleanup alone (background cleanup's default on RocksDB, which
    # before was the heap's incremental cleanup: a scan of every key on the loop)
    descriptor.enable_time_to_live(
        _config(lambda b: b.disable_cleanup_in_background().cleanup_in_rocksdb_compact_filter(100))
    )

    class Count(KeyedProcessFunction):
        def open(self, ctx):  # type: ignore[no-untyped-def]
            self.count = ctx.get_state(descriptor)

        def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
            clock.set(value[0])
            n = (self.count.value() or 0) + 1
            self.count.update(n)
            yield value[1], n

    def env_for(sink: ListSink) -> Any:
        env = sf.StreamExecutionEnvironment(clock=clock).set_parallelism(2)
        env.set_state_backend(EmbeddedRocksDBStateBackend(local_dir=str(tmp_path / "db"), cache_entries=8))
        env.enable_checkpointing(3_600_000)
        env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
        return env

    feed: asyncio.Queue = asyncio.Queue()

    async def records() -> Any:
        while True:
            yield await feed.get()

    sink1 = ListSink()
    env = env_for(sink1)
    env.from_async_iterable(records).uid("src").set_parallelism(1).key_by(lambda r: r[1]).process(
        Count()
    ).uid("count").sink_to(sink1)
    client = await env.execute_async("ttl")
    for i in range(40):
        feed.put_nowait((0, f"old{i}"))
    await wait_until(lambda: len(sink1.results) == 40, timeout=30)
    n = 40
    # later: other keys flow and checkpoints are taken (the safe points cleanup passes run at)
    for round_ in range(200):
        for i in range(20):
            feed.put_nowait((5_000, f"new{round_}-{i}"))
        n += 20
        await wait_until(lambda n=n: len(sink1.results) == n, timeout=30)
        await client.trigger_checkpoint()
        await asyncio.sleep(0.02)
        if round_ >= 3:
            break
    feed.put_nowait((5_500, "live"))
    await wait_until(lambda: len(sink1.results) == n + 1, timeout=30)
    for _ in range(3):  # passes found the old keys; the next safe points apply them
        await client.trigger_checkpoint()
        await asyncio.sleep(PASS_WAIT)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()

    sink2 = ListSink()
    env2 = env_for(sink2)
    # a new source (the old one's position is not wanted): its state left unclaimed
    env2.configure({"execution.savepoint.path": path, "execution.savepoint.ignore-unclaimed-state": "true"})
    env2.from_collection([(6_000, "old0"), (6_000, "old7"), (6_000, "live")]).uid("src2").set_parallelism(
        1
    ).key_by(lambda r: r[1]).process(Count()).uid("count").sink_to(sink2)
    await (await env2.execute_async("ttl")).get_job_execution_result()
    assert sorted(sink2.results) == [("live", 2), ("old0", 1), ("old7", 1)]


PASS_WAIT = 1.2  # > PASS_INTERVAL_S: a new pass may start at the next safe point
