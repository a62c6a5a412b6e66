"""Rescaling RocksDB keyed state on real RocksDB DBs (``rocksdb_restore.py``): the old DB with the
largest overlap is linked back and clipped by range, the others' key groups ingested as SST
files; states numbered differently by two old subtasks are mapped by name; and a clipped DB
rescaled again shows none of the entries its range tombstones deleted."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streamflow.state import codec as _codec
from streamflow.state.key_groups import key_group_of, key_group_range
from streamflow.state.rocksdb_backend import RocksDBKeyedStateBackend

MAXP = 128
KEYS = range(3000)


def _backend(tmp_path: Path, subtask: int, parallelism: int) -> RocksDBKeyedStateBackend:
    return RocksDBKeyedStateBackend(
        MAXP,
        key_group_range(subtask, MAXP, parallelism),
        operator_id="op",
        subtask=subtask,
        codec=_codec.MsgpackCodec(),
        local_dir=str(tmp_path / "work"),
        cache_entries=100,
        flush_entries=50,
    )


class Storage:
    """Checkpoint storage stand-in for shared files: each snapshot's SST files linked under their
    shared names (what FileSystemCheckpointStorage does), so the backends can be closed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        return self.root / name

    def snapshot(self, backend: RocksDBKeyedStateBackend, cid: int) -> dict[str, Any]:
        backend.prepare(cid)()
        snap = backend.snapshot(cid)
        new, _refs = backend.take_shared(cid)
        for name, src in new.items():
            if not self.path(name).exists():
                os.link(src, self.path(name))
        backend.checkpoint_complete(cid)
        return snap


def _owner(parallelism: int) -> Callable[[int], int]:
    ranges = [key_group_range(i, MAXP, parallelism) for i in range(parallelism)]
    return lambda key: next(i for i, r in enumerate(ranges) if key_group_of(key, MAXP) in r)


def _fill(tmp_path: Path, store: Storage, parallelism: int, orders: list[list[str]]) -> list[dict[str, Any]]:
    """Old subtasks with states "a" (key -> key * 2) and "b" (key -> [key]), registered in the
    order ``orders[subtask]`` (so their state ids differ)."""
    owner = _owner(parallelism)
    snaps = []
    for i in range(parallelism):
        b = _backend(tmp_path, i, parallelism)
        try:
            tables = {name: b.table(name, "value") for name in orders[i]}
            for k in KEYS:
                if owner(k) == i:
                    b.current_key = k
                    tables["a"][k] = k * 2
                    tables["b"][k] = [k]
            snaps.append(store.snapshot(b, 1))
        finally:
            b.close()
    return snaps


def _restore(
    tmp_path: Path, store: Storage, snaps: list[dict[str, Any]], subtask: int, parallelism: int
) -> RocksDBKeyedStateBackend:
    b = _backend(tmp_path, subtask, parallelism)
    b.table("b", "value")  # registered before the restore, as an operator's open may
    groups = b.key_groups
    b.restore(snaps, lambda g: g in groups, store.path)
    return b


def _contents(b: RocksDBKeyedStateBackend) -> dict[str, dict[Any, Any]]:
    return {name: dict(b.table(name, "value").items()) for name in ("a", "b")}


@pytest.mark.parametrize(("before", "after"), [(2, 3), (1, 4), (4, 1), (3, 2)])
def test_rescaled_subtasks_hold_exactly_their_keys(
    tmp_path: Path, before: int, after: int, caplog: pytest.LogCaptureFixture
) -> None:
    store = Storage(tmp_path / "shared")
    orders = [["a", "b"] if i % 2 == 0 else ["b", "a"] for i in range(before)]
    snaps = _fill(tmp_path, store, before, orders)
    owner = _owner(after)
    caplog.set_level(logging.INFO, logger="streamflow.state.rocksdb_restore")
    for j in range(after):
        caplog.clear()
        b = _restore(tmp_path, store, snaps, j, after)
        try:
            mine = [k for k in KEYS if owner(k) == j]
            assert _contents(b) == {"a": {k: k * 2 for k in mine}, "b": {k: [k] for k in mine}}
            r = b.key_groups
            overlapping = [s for s in snaps if s["key_groups"][0] < r.stop and s["key_groups"][1] > r.start]
            lo, hi = max(
                overlapping, key=lambda s: min(s["key_groups"][1], r.stop) - max(s["key_groups"][0], r.start)
            )["key_groups"]
            # the base's SST files are the stored ones (hard links), not copies
            linked = {os.stat(b.db_path / f).st_ino for f in os.listdir(b.db_path) if f.endswith(".sst")}
            stored = {os.stat(store.path(n)).st_ino for s in overlapping for n in s["files"].values()}
            assert linked & stored
            text = caplog.text
            assert ("deleted by range" in text) == (lo < r.start or hi > r.stop)
            assert text.count("ingested") == len(overlapping) - 1
        finally:
            b.close()


def test_a_clipped_db_rescaled_again_resurrects_nothing(tmp_path: Path) -> None:
    """2 -> 3 (clipped bases holding other key groups' entries under range tombstones, values
    changed and keys deleted after the restore), then 3 -> 1: only the live entries come back."""
    store = Storage(tmp_path / "shared")
    snaps = _fill(tmp_path, store, 2, [["a", "b"], ["b", "a"]])
    owner = _owner(3)
    later = []
    for j in range(3):
        b = _restore(tmp_path, store, snaps, j, 3)
        try:
            a = b.table("a", "value")
            for k in KEYS:
                if owner(k) == j:
                    b.current_key = k
                    if k % 3 == 0:
                        a.pop(k)
                    else:
                        a[k] = -k
            later.append(store.snapshot(b, 2))
        finally:
            b.close()
    shutil.rmtree(tmp_path / "work")
    b = _restore(tmp_path, store, later, 0, 1)
    try:
        assert _contents(b) == {
            "a": {k: -k for k in KEYS if k % 3},
            "b": {k: [k] for k in KEYS},
        }
    finally:
        b.close()
