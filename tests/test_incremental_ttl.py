"""TTL state on the heap backend is checkpointed incrementally (streamflow/state/ttl_state.py):
writes, expiries on read and timestamps renewed on read reach the deltas, a restore from a
chain of them equals the live state, and full-snapshot cleanup keeps its full snapshots."""

from __future__ import annotations

from typing import Any

import pytest
from test_incremental_state import MAXP, Files, settings, tables

from streamflow.common import Time
from streamflow.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from streamflow.state.keyed import KeyedStateBackend
from streamflow.state.ttl_state import ttl_state
from streamflow.testing import ManualClock

UT = StateTtlConfig.UpdateType


def _config(update: Any = UT.OnCreateAndWrite, full_snapshot: bool = False) -> StateTtlConfig:
    builder = StateTtlConfig.new_builder(Time.milliseconds(100)).set_update_type(update)
    builder = builder.cleanup_full_snapshot() if full_snapshot else builder.disable_cleanup_in_background()
    return builder.build()


def _states(backend: KeyedStateBackend, clock: ManualClock, update: Any) -> dict[str, Any]:
    out = {}
    for descriptor in (
        ValueStateDescriptor("v"),
        ListStateDescriptor("l"),
        MapStateDescriptor("m"),
        ReducingStateDescriptor("r", lambda a, b: a + b),
    ):
        descriptor.enable_time_to_live(_config(update))
        out[descriptor.name] = ttl_state(backend, descriptor, clock.now_ms)
    return out


def _at(backend: KeyedStateBackend, key: Any) -> KeyedStateBackend:
    backend.current_key = key
    return backend


@pytest.mark.parametrize("update", [UT.OnCreateAndWrite, UT.OnReadAndWrite])
def test_restore_after_a_chain_of_ttl_deltas_equals_the_live_state(update: Any) -> None:
    files, clock = Files(), ManualClock()
    backend = KeyedStateBackend(MAXP, settings())
    s = _states(backend, clock, update)
    for k in range(20):
        _at(backend, k)
        s["v"].update(k)
        s["l"].add(k)
        s["m"].put("a", k)
        s["r"].add(k)
    assert backend.incremental
    descriptors = [files.take(backend, 1)]
    clock.advance(60)
    for k in range(0, 20, 2):  # newer writes: these outlive the others
        _at(backend, k)
        s["v"].update(-k)
        s["l"].add(-k)
        s["m"].put("b", -k)
        s["r"].add(1)
    descriptors.append(files.take(backend, 2))
    clock.advance(50)  # the first writes expired, the second ones not
    for k in range(20):  # reads: expire (deleting) or renew (OnReadAndWrite) what they see
        _at(backend, k)
        s["v"].value()
        s["l"].get()
        s["m"].get("a")
        s["r"].get()
    _at(backend, 3)
    s["m"].put("c", 3)
    descriptors.append(files.take(backend, 3))
    chain = descriptors[-1]["chain"]
    assert len(chain) == 3 and "-delta-" in chain[-1]
    restored = files.restore([descriptors[-1]])
    assert tables(restored) == tables(backend)
    assert 1 not in backend._tables["v"]  # an odd key expired on read: its deletion was restored
    # the restored state answers as the live one, later too
    clock.advance(40)
    r = _states(restored, clock, update)
    for k in range(20):
        _at(backend, k), _at(restored, k)
        assert [r[n].value() if n == "v" else r[n].get() for n in ("v", "l", "r")] == [
            s[n].value() if n == "v" else s[n].get() for n in ("v", "l", "r")
        ]
        assert r["m"].items() == s["m"].items()


def test_a_read_that_changes_nothing_logs_nothing() -> None:
    clock = ManualClock()
    backend = KeyedStateBackend(MAXP, settings())
    s = _states(backend, clock, UT.OnCreateAndWrite)
    _at(backend, "k")
    s["v"].update(1)
    backend._dirty["v"].clear()
    assert s["v"].value() == 1
    assert len(backend._dirty["v"]) == 0
    clock.advance(100)
    assert s["v"].value() is None  # expired: removed, and logged as a deletion
    assert len(backend._dirty["v"]) == 1


def test_full_snapshot_cleanup_keeps_full_snapshots_that_drop_expired_entries() -> None:
    clock = ManualClock()
    backend = KeyedStateBackend(MAXP, settings())
    descriptor = ValueStateDescriptor("v")
    descriptor.enable_time_to_live(_config(full_snapshot=True))
    state = ttl_state(backend, descriptor, clock.now_ms)
    _at(backend, "old")
    state.update(1)
    clock.advance(100)
    _at(backend, "new")
    state.update(2)
    assert not backend.incremental
    snap = backend.snapshot()
    assert "incremental" not in snap
    entries = {k for group in snap["groups"].values() for k in group["v"]}
    assert entries == {"new"}
