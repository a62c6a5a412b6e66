"""Flink's state TTL test suite, ported: flink-runtime/src/test/java/org/apache/flink/runtime/
state/ttl/TtlStateTestBase.java with its contexts (TtlValueStateTestContext,
TtlFixedLenElemListStateTestContext, TtlNonFixedLenElemListStateTestContext,
TtlMapStateAllEntriesTestContext, TtlMapStatePerElementTestContext,
TtlMapStatePerNullElementTestContext, TtlReducingStateTestContext, TtlAggregatingStateTestContext),
each scenario on the heap backend and on RocksDB. testRestoreTtlAndRegisterNonTtlStateCompatFailure
needs a job (the TTL flags travel in the operator's snapshot): tests/test_state_ttl_migration.py.
Not ported: the namespace scenarios (testMergeNamespaces, testMultipleNamespaces*: namespaces are
not in the public API) and testIncrementalCleanup* (they count CopyOnWriteStateMap's rehash
buckets; streamflow's incremental cleanup is tested in tests/test_state_ttl_cleanup.py).

Time is a settable provider (Flink's MockTtlTimeProvider); a "snapshot and restore" takes the
backend's snapshot and restores it into a new backend, then makes the TTL state handle again (as
Flink's takeAndRestoreSnapshot does with a new keyed state backend).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from stable_ids import stable_repr  # tests/stable_ids.py

from streamflow.common import Time, Types
from streamflow.datastream.functions import AggregateFunction
from streamflow.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from streamflow.state import codec as _codec
from streamflow.state.key_groups import key_group_range
from streamflow.state.keyed import KeyedStateBackend
from streamflow.state.rocksdb_backend import RocksDBKeyedStateBackend
from streamflow.state.ttl_state import ttl_state

TTL = 100
MAXP = 128
UT, SV = StateTtlConfig.UpdateType, StateTtlConfig.StateVisibility


class _Agg(AggregateFunction):
    """TtlAggregatingStateTestContext.AGGREGATE: a sum starting at 3, shown as a string."""

    def create_accumulator(self) -> int:
        return 3

    def add(self, value: int, accumulator: int) -> int:
        return accumulator + value

    def get_result(self, accumulator: int) -> str:
        return str(accumulator)

    def merge(self, a: int, b: int) -> int:
        return a + b


class TimeProvider:
    """Flink's MockTtlTimeProvider: a time the test sets, also backwards (a ManualClock never
    goes back, and testMultipleKeysWithSnapshotCleanup turns the time back after a restore)."""

    def __init__(self) -> None:
        self.time = 0

    def set(self, time: int) -> None:
        self.time = time

    def now_ms(self) -> int:
        return self.time


class Kind:
    """One of Flink's TtlStateTestContexts: the descriptor, how to update and read, the values."""

    def __init__(self, name: str, make: Callable[[], Any], update: Callable[[Any, Any], None],
                 get: Callable[[Any], Any], empty: Any, updates: tuple, gets: tuple) -> None:
        self.name, self.make, self._update, self._get, self.empty = name, make, update, get, empty
        self.update_empty, self.update_unexpired, self.update_expired = updates
        self.get_update_empty, self.get_unexpired, self.get_update_expired = gets

    def __repr__(self) -> str:
        return self.name


def _put_all(s: Any, m: dict) -> None:
    s.put_all(m)


KINDS = [
    # TtlValueStateTestContext
    Kind("value", lambda: ValueStateDescriptor("s", Types.STRING()), lambda s, v: s.update(v),
         lambda s: s.value(), None, ("5", "10", "15"), ("5", "10", "15")),
    # TtlFixedLenElemListStateTestContext (update = addAll; get = the live elements)
    Kind("list", lambda: ListStateDescriptor("s", Types.LONG()), lambda s, v: s.add_all(v),
         lambda s: list(s.get() or []), [], ([5, 7, 10], [8, 9, 11], [1, 4]),
         ([5, 7, 10], [8, 9, 11], [1, 4])),
    # TtlNonFixedLenElemListStateTestContext (strings)
    Kind("list_str", lambda: ListStateDescriptor("s", Types.STRING()), lambda s, v: s.add_all(v),
         lambda s: list(s.get() or []), [], (["5", "7", "10"], ["8", "9", "11"], ["1", "4"]),
         (["5", "7", "10"], ["8", "9", "11"], ["1", "4"])),
    # TtlMapStateAllEntriesTestContext (update = putAll; get = the set of entries)
    Kind("map_entries", lambda: MapStateDescriptor("s", Types.INT(), Types.STRING()), _put_all,
         lambda s: set(s.items()), set(),
         ({3: "3", 5: "5", 23: None, 10: "10"}, {12: "12", 24: None, 7: "7"},
          {15: "15", 25: None, 4: "4"}),
         ({(3, "3"), (5, "5"), (23, None), (10, "10")}, {(12, "12"), (24, None), (7, "7")},
          {(15, "15"), (25, None), (4, "4")})),
    # TtlMapStatePerElementTestContext (one user key, TEST_KEY = 1)
    Kind("map_element", lambda: MapStateDescriptor("s", Types.INT(), Types.STRING()),
         lambda s, v: s.put(1, v), lambda s: s.get(1), None, ("5", "10", "15"), ("5", "10", "15")),
    # TtlMapStatePerNullElementTestContext (the user key mapped to null)
    Kind("map_null_element", lambda: MapStateDescriptor("s", Types.INT(), Types.STRING()),
         lambda s, v: s.put(1, v), lambda s: s.get(1), None, (None, None, None), (None, None, None)),
    # TtlReducingStateTestContext (a sum)
    Kind("reducing", lambda: ReducingStateDescriptor("s", lambda a, b: a + b, Types.INT()),
         lambda s, v: s.add(v), lambda s: s.get(), None, (5, 7, 6), (5, 12, 6)),
    # TtlAggregatingStateTestContext
    Kind("aggregating", lambda: AggregatingStateDescriptor("s", _Agg(), Types.LONG()),
         lambda s, v: s.add(v), lambda s: s.get(), None, (5, 7, 6), ("8", "15", "9")),
]


class Harness:
    """Flink's StateBackendTestContext: a keyed backend (heap or RocksDB), snapshot and restore."""

    def __init__(self, backend_kind: str, tmp_path: Path, kind: Kind, config: StateTtlConfig) -> None:
        self.backend_kind, self.tmp, self.kind, self.config = backend_kind, tmp_path, kind, config
        self.clock = TimeProvider()
        self.cid = 0
        self.shared = tmp_path / "shared"
        self.shared.mkdir(exist_ok=True)
        self.backend = self._new_backend()
        self.state = self._create_state()
        self.set_key("defaultKey")

    def _new_backend(self) -> Any:
        if self.backend_kind == "heap":
            return KeyedStateBackend(MAXP)
        return RocksDBKeyedStateBackend(
            MAXP, key_group_range(0, MAXP, 1), operator_id="ttl", subtask=0,
            codec=_codec.MsgpackCodec(), local_dir=str(self.tmp / "work"),
            cache_entries=4, flush_entries=4,  # small: reads and writes reach the DB
        )

    def _create_state(self) -> Any:
        descriptor = self.kind.make()
        descriptor.enable_time_to_live(self.config)
        return ttl_state(self.backend, descriptor, self.clock.now_ms)

    def set_key(self, key: Any) -> None:
        self.backend.current_key = key

    def update(self, value: Any) -> None:
        self.kind._update(self.state, value)

    def get(self) -> Any:
        return self.kind._get(self.state)

    def original_empty(self) -> bool:
        """Flink's isOriginalEmptyValue: the backend holds nothing for the current key."""
        if self.backend_kind == "rocksdb":
            self.backend.flush()
        table = self.backend.table("s", self.state_kind())
        return self.backend.current_key not in table

    def state_kind(self) -> str:
        return self.kind.make().kind

    def take_snapshot(self) -> dict[str, Any]:
        if self.backend_kind == "heap":
            # a checkpoint encodes the snapshot before the next record: a copy, not the live lists
            return copy.deepcopy(self.backend.snapshot())
        self.cid += 1
        self.backend.prepare(self.cid)()
        snap = self.backend.snapshot(self.cid)
        new, _refs = self.backend.take_shared(self.cid)
        for name, src in new.items():
            if not (self.shared / name).exists():
                os.link(src, self.shared / name)
        self.backend.checkpoint_complete(self.cid)
        return snap

    def restore(self, snap: dict[str, Any]) -> None:
        key = self.backend.current_key
        self.close()
        self.backend = self._new_backend()
        self.backend.restore([snap], lambda kg: True, shared_path=lambda n: self.shared / n)
        self.state = self._create_state()
        self.set_key(key)

    def take_and_restore(self) -> None:
        self.restore(self.take_snapshot())

    def close(self) -> None:
        if self.backend_kind == "rocksdb":
            self.backend.close()


def _config(update: Any = UT.OnCreateAndWrite, visibility: Any = SV.NeverReturnExpired,
            ttl: int = TTL) -> StateTtlConfig:
    return (StateTtlConfig.new_builder(Time.milliseconds(ttl)).set_update_type(update)
            .set_state_visibility(visibility).disable_cleanup_in_background().build())


@pytest.fixture(params=["heap", "rocksdb"])
def backend_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make(backend_kind: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    made: list[Harness] = []

    def factory(kind: Kind, config: StateTtlConfig | None = None) -> Harness:
        h = Harness(backend_kind, tmp_path, kind, config or _config())
        made.append(h)
        return h

    yield factory
    for h in made:
        h.close()


@pytest.mark.parametrize("kind", KINDS, ids=stable_repr)
def test_non_existent_value(make, kind: Kind) -> None:  # type: ignore[no-untyped-def]
    """TtlStateTestBase#testNonExistentValue."""
    h = make(kind)
    assert h.get() == kind.empty


def test_value_set_null(make) -> None:  # type: ignore[no-untyped-def]
    """TtlStateTestBase#testValueSetNull (value state only): update(null) empties the state."""
    h = make(KINDS[0], _config(UT.OnCreateAndWrite, SV.ReturnExpiredIfNotCleanedUp))
    h.update("10")
    assert h.get() == "10"
    h.update(None)
    assert h.get() is None


@pytest.mark.parametrize("kind", KINDS, ids=stable_repr)
def test_exact_expiration_on_write(make, kind: Kind) -> None:  # type: ignore[no-untyped-def]
    """TtlStateTestBase#testExactExpirationOnWrite."""
    h = make(kind, _config(UT.OnCreateAndWrite, SV.NeverReturnExpired))
    h.take_and_restore()
    h.clock.set(0)
    h.update(kind.update_empty)
    h.take_and_restore()
    h.clock.set(20)
    assert h.get() == kind.get_update_empty
    h.take_and_restore()
    h.clock.set(50)
    h.update(kind.update_unexpired)
    h.take_and_restore()
    h.clock.set(120)
    assert h.get() == kind.get_unexpired
    h.take_and_restore()
    h.clock.set(170)
    h.update(kind.update_expired)
    h.take_and_restore()
    h.clock.set(220)
    assert h.get() == kind.get_update_expired
    h.take_and_restore()
    h.clock.set(300)
    assert h.get() == kind.empty
    assert h.original_empty(), "Original state should be cleared on access"


@pytest.mark.parametrize("kind", KINDS, ids=stable_repr)
def test_relaxed_expiration_on_write(make, kind: Kind) -> None:  # type: ignore[no-untyped-def]
    """TtlStateTestBase#testRelaxedExpirationOnWrite."""
    h = make(kind, _config(UT.OnCreateAndWrite, SV.ReturnExpiredIfNotCleanedUp))
    h.clock.set(0)
    h.update(kind.update_empty)
    h.take_and_restore()
    h.clock.set(120)
    assert h.get() == kind.get_update_empty
    assert h.original_empty(), "Original state should be cleared on access"
    assert h.get() == kind.empty


@pytest.mark.parametrize("kind", KINDS, ids=stable_repr)
def test_exact_expiration_on_read(make, kind: Kind) -> None:  # type: ignore[no-untyped-def]
    """TtlStateTestBase#testExactExpirationOnRead."""
    h = make(kind, _config(UT.OnReadAndWrite, SV.NeverReturnExpired))
    h.clock.set(0)
    h.update(kind.update_empty)
    h.take_and_restore()
    h.clock.set(50)
    assert h.get() == kind.get_update_empty
    h.take_and_restore()
    h.clock.set(120)
    assert h.get() == kind.get_update_empty, "Unexpired state should be available after read"
    h.take_and_restore()
    h.clock.set(250)
    assert h.get() == kind.empty
    assert h.original_empty(), "Original state should be cleared on access"


@pytest.mark.parametrize("kind", KINDS, ids=stable_repr)
def test_relaxed_expiration_on_read(make, kind: Kind) -> None:  # type: ignore[no-untyped-def]
    """TtlStateTestBase#testRelaxedExpirationOnRead."""
    h = make(kind, _config(UT.OnReadAndWrite, SV.ReturnExpiredIfNotCleanedUp))
    h.clock.set(0)
    h.update(kind.update_empty)
    h.take_and_restore()
    h.clock.set(50)
    assert h.get() == kind.get_update_empty
    h.take_and_restore()
    h.clock.set(170)
    assert h.get() == kind.get_update_empty, "Expired state should be available"
    assert h.get() == kind.empty, "Expired state should be cleared on access"


@pytest.mark.parametrize("kind", KINDS, ids=stable_repr)
def test_expiration_timestamp_overflow(make, kind: Kind) -> None:  # type: ignore[no-untyped-def]
    """TtlStateTestBase#testExpirationTimestampOverflow: a TTL of Long.MAX_VALUE never expires."""
    h = make(kind, _config(ttl=2**63 - 1))
    h.clock.set(10)
    h.update(kind.update_empty)
    h.take_and_restore()
    h.clock.set(50)
    assert h.get() == kind.get_update_empty


def _multiple_keys(h: Harness, kind: Kind, time_back_after_restore: bool) -> None:
    """TtlStateTestBase#testMultipleStateIds with keys as the ids."""
    h.take_and_restore()
    h.clock.set(0)
    h.set_key("id2")
    h.update(kind.update_empty)
    h.take_and_restore()
    h.clock.set(50)
    h.set_key("id1")
    h.update(kind.update_empty)
    h.set_key("id2")
    h.update(kind.update_unexpired)
    h.clock.set(120)
    h.take_and_restore()
    h.set_key("id1")
    assert h.get() == kind.get_update_empty
    h.set_key("id2")
    assert h.get() == kind.get_unexpired
    h.clock.set(170)
    h.set_key("id2")
    h.update(kind.update_expired)
    h.clock.set(230)
    h.take_and_restore()
    if time_back_after_restore:
        h.clock.set(170)
    h.set_key("id1")
    assert h.get() == kind.empty
    h.set_key("id2")
    assert h.get() == kind.get_update_expired
    h.clock.set(300)
    h.take_and_restore()
    if time_back_after_restore:
        h.clock.set(230)
    h.set_key("id1")
    assert h.get() == kind.empty
    h.set_key("id2")
    assert h.get() == kind.empty


@pytest.mark.parametrize("kind", KINDS, ids=stable_repr)
def test_multiple_keys(make, kind: Kind) -> None:  # type: ignore[no-untyped-def]
    """TtlStateTestBase#testMultipleKeys."""
    _multiple_keys(make(kind), kind, False)


@pytest.mark.parametrize("kind", KINDS, ids=stable_repr)
def test_multiple_keys_with_snapshot_cleanup(make, kind: Kind) -> None:  # type: ignore[no-untyped-def]
    """TtlStateTestBase#testMultipleKeysWithSnapshotCleanup: full-snapshot cleanup drops what
    has expired at snapshot time, so turning the clock back after the restore does not revive it.

    Flink runs it only when the snapshot is a full one (``assumeThat(isSavepoint())``);
    RocksDB's snapshots here are its files, from which streamflow removes the state's expired
    entries before each one is taken (``state/rocksdb_ttl_cleanup.py``): both backends."""
    config = StateTtlConfig.new_builder(Time.milliseconds(TTL)).cleanup_full_snapshot().build()
    _multiple_keys(make(kind, config), kind, True)


@pytest.mark.parametrize("kind", KINDS, ids=stable_repr)
def test_snapshot_change_restore(make, kind: Kind) -> None:  # type: ignore[no-untyped-def]
    """TtlStateTestBase#testSnapshotChangeRestore: a restore discards the writes after the
    snapshot, and the restored entries keep their write times."""
    h = make(kind)
    h.clock.set(0)
    h.set_key("k1")
    h.update(kind.update_empty)
    h.clock.set(50)
    h.update(kind.update_unexpired)
    h.clock.set(100)
    h.set_key("k2")
    h.update(kind.update_empty)
    snap = h.take_snapshot()
    h.clock.set(170)
    h.set_key("k1")
    h.update(kind.update_expired)
    h.set_key("k2")
    h.update(kind.update_unexpired)
    h.restore(snap)
    h.clock.set(180)
    h.set_key("k1")
    assert h.get() == kind.empty
    h.set_key("k2")
    assert h.get() == kind.get_update_empty


@pytest.mark.parametrize(
    ("strategy", "build"),
    [
        ("cleanup_full_snapshot", lambda b: b.cleanup_full_snapshot()),
        ("cleanup_in_rocksdb_compact_filter", lambda b: b.cleanup_in_rocksdb_compact_filter(1000)),
        ("cleanup_incrementally", lambda b: b.cleanup_incrementally(10, False)),
    ],
)
def test_cleanup_without_effect_is_logged(  # type: ignore[no-untyped-def]
    make, backend_kind: str, strategy: str, build, caplog: pytest.LogCaptureFixture
) -> None:
    """The cleanup strategies a backend cannot apply are logged, naming the backend (nothing
    fails silently), as Flink leaves them without effect: the compaction filter on the heap,
    incremental cleanup on RocksDB. The others apply (rocksdb_ttl_cleanup.py on RocksDB)."""
    caplog.set_level("INFO", logger="streamflow.state.ttl_cleanup")
    make(KINDS[0], build(StateTtlConfig.new_builder(Time.milliseconds(TTL))).build())
    logged = [r.getMessage() for r in caplog.records if strategy in r.getMessage()]
    unused = {"heap": "cleanup_in_rocksdb_compact_filter", "rocksdb": "cleanup_incrementally"}
    if strategy != unused[backend_kind]:
        assert logged == []  # the backend applies it
    else:
        name = "RocksDB" if backend_kind == "rocksdb" else "heap"
        assert len(logged) == 1
        assert logged[0].startswith(f"state 's': {strategy} has no effect on the {name} state backend")
