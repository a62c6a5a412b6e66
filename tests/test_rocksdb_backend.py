"""EmbeddedRocksDBStateBackend through the public API, on a real RocksDB: every operator kind and
state kind gives the heap backend's answers (the differential rows of test_differential.py), with
a cache so small that every path (miss, eviction, deferred flush) runs on every few records."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.api.environment import set_default_configuration
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend
from streamflow.testing import ListSink

sys.path.insert(0, str(Path(__file__).parent))
from test_differential import ROWS, _per_key, key0, source

TINY = {"cache_entries": 3, "flush_entries": 2}


def run(build: Any, parallelism: int, backend: Any = None) -> list[list[Any]]:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    if backend is not None:
        env.set_state_backend(backend)
    sinks = []
    for stream in build(env):
        sink = ListSink()
        stream.sink_to(sink)
        sinks.append(sink)
    env.execute(f"rocksdb-p{parallelism}")
    return [list(s.results) for s in sinks]


KEYED_ROWS = [
    name
    for name, (_, keyed) in ROWS.items()
    if keyed or "window" in name or "keyed" in name or "equal-keys" in name
]


@pytest.mark.parametrize("name", KEYED_ROWS)
def test_rocksdb_gives_the_heap_backends_results(name: str, tmp_path: Path) -> None:
    build, keyed = ROWS[name]
    heap = run(build, 1)
    rocks = run(build, 4, EmbeddedRocksDBStateBackend(local_dir=str(tmp_path), **TINY))
    assert any(heap)
    for a, b in zip(heap, rocks, strict=True):
        assert Counter(map(repr, a)) == Counter(map(repr, b))
        if keyed:
            assert _per_key(a) == _per_key(b)
    assert os.listdir(tmp_path) == []  # every working DB removed on close


class EveryStateKind(sf.KeyedProcessFunction):
    """Value, list, map, reducing and aggregating state per key, each read back every record."""

    def open(self, ctx: Any) -> None:
        from streamflow.datastream.state import (
            AggregatingStateDescriptor,
            ListStateDescriptor,
            MapStateDescriptor,
            ReducingStateDescriptor,
            ValueStateDescriptor,
        )

        self.value = ctx.get_state(ValueStateDescriptor("v"))
        self.list = ctx.get_list_state(ListStateDescriptor("l"))
        self.map = ctx.get_map_state(MapStateDescriptor("m"))
        self.reducing = ctx.get_reducing_state(ReducingStateDescriptor("r", lambda a, b: a + b))
        self.agg = ctx.get_aggregating_state(AggregatingStateDescriptor("a", Mean()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        key, v, _ts = value
        self.value.update((self.value.value() or 0) + v)
        self.list.add(v)
        if len(self.list.get()) > 4:
            self.list.update(self.list.get()[-2:])
        self.map.put(v % 3, self.map.get(v % 3) or 0 + 1)
        if v == 7:
            self.map.remove(1)
        self.reducing.add(v)
        self.agg.add(v)
        yield (
            key,
            self.value.value(),
            self.list.get(),
            sorted(self.map.items()),
            self.reducing.get(),
            self.agg.get(),
            1 in self.map,
        )


class Mean(sf.AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: int, acc: list[int]) -> list[int]:
        acc[0] += value  # in place, as user code does
        acc[1] += 1
        return acc

    def get_result(self, acc: list[int]) -> float:
        return acc[0] / acc[1]

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


@pytest.mark.parametrize("parallelism", [1, 3])
def test_every_state_kind_matches_the_heap(parallelism: int) -> None:
    def build(env: Any) -> list[Any]:
        return [source(env).key_by(key0).process(EveryStateKind())]

    heap = run(build, 1, HashMapStateBackend())
    rocks = run(build, parallelism, EmbeddedRocksDBStateBackend(**TINY))
    assert _per_key(heap[0]) == _per_key(rocks[0])


def test_configuration_key_selects_the_backend(tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(
        {"state.backend.type": "rocksdb", "state.backend.rocksdb.localdir": str(tmp_path / "dbs")}
    )
    backend = env.get_state_backend()
    assert isinstance(backend, EmbeddedRocksDBStateBackend)
    assert backend.get_db_storage_paths() == [str(tmp_path / "dbs")]
    seen: list[str] = []

    def peek(r: Any) -> Any:
        seen.extend(os.listdir(tmp_path / "dbs"))
        return r

    sink = ListSink()
    env.from_collection([("a", 1), ("a", 2)]).key_by(key0).sum(1).map(peek).sink_to(sink)
    env.execute()
    assert sink.results == [("a", 1), ("a", 3)]
    assert seen and all(s.startswith("streamflow-rdb-") for s in seen)  # the DB lived there
    assert os.listdir(tmp_path / "dbs") == []
    assert isinstance(StreamExecutionEnvironment({"state.backend.type": "hashmap"}).get_state_backend(),
                      HashMapStateBackend)  # fmt: skip
    with pytest.raises(ValueError, match=r"state\.backend\.type"):
        StreamExecutionEnvironment({"state.backend.type": "leveldb"})
    assert sf.EmbeddedRocksDBStateBackend is EmbeddedRocksDBStateBackend


def test_ttl_on_rocksdb() -> None:
    """The TTL job of test_state_ttl.py, with RocksDB as the default backend."""
    from test_state_ttl import test_ttl_through_a_job_with_the_jobs_clock

    set_default_configuration({"state.backend.type": "rocksdb"})
    try:
        test_ttl_through_a_job_with_the_jobs_clock()
    finally:
        set_default_configuration({})


def test_keys_equal_in_python_share_one_entry() -> None:
    from streamflow.state.backends import EmbeddedRocksDBStateBackend as Backend
    from streamflow.state.codec import MsgpackCodec

    backend: Any = Backend(**TINY).create_keyed_backend(128, range(128), "op", 0, MsgpackCodec())
    try:
        t = backend.table("t", "value")
        t[1] = "one"
        t[(True, 2.0)] = "pair"
        backend.flush()
        backend.current_key = None
        for k in list(t._cache):
            t._cache.pop(k)  # read RocksDB, not the cache
        assert t.get(1.0) == "one" and t[True] == "one" and (1, 2) in t
        assert sorted(map(repr, t.keys())) == ["(1, 2)", "1"]
        t.pop(1.0)
        assert 1 not in t and len(t) == 1
    finally:
        backend.close()
