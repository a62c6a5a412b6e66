"""A RocksDB backend's snapshot read back as heap state: a job moving from RocksDB to the heap.

Theory of operation
-------------------
A savepoint (or checkpoint) written with ``EmbeddedRocksDBStateBackend`` holds each keyed
subtask's DB as SST files and its timers inside that DB. A job restored from it with the heap
backend (``HashMapStateBackend``, the default) needs both as Python objects, as Flink reads a
canonical savepoint with another backend.

:func:`heap_state_of` restores the snapshots into a *scratch* RocksDB backend for the restoring
subtask's key groups, in a temporary directory, exactly as a RocksDB job restores them (the
largest overlap linked and clipped, the other overlaps ingested: ``rocksdb_restore``, so any
parallelism change works), reads its tables whole and lists its two timer queues, then closes
it and removes the directory. What it returns is a heap backend's full snapshot (``groups`` by
key group, as ``keyed.snapshot_tables`` writes them) and the timers in the tuple form a heap
timer snapshot has: the operator restores both as it restores a heap checkpoint. Values come in
their stored form (a window operator's plain form too: the scratch backend applies no value
transform), namespaces still encoded, as in a heap snapshot.

The whole state is read into memory at once: the heap backend holds it there anyway.
"""

from __future__ import annotations

import tempfile
from typing import Any

from .codec import Codec
from .keyed import snapshot_tables


def _same(value: Any) -> Any:
    return value


def heap_state_of(
    states: list[dict[str, Any]], restored: Any, max_parallelism: int, codec: Codec | None
) -> dict[str, Any]:
    """The operator state ``{"keyed", "timers"}`` as the heap backend writes it, from a keyed
    operator's subtask states written on RocksDB (see the module doc). ``restored``: the
    operator's ``OperatorRestore`` (its key groups, shared files and state codec)."""
    from .rocksdb_backend import RocksDBKeyedStateBackend
    from .rocksdb_timers import TIMER_STATES, RocksDBTimerService

    key_groups: range = restored.key_groups
    codec = restored.codec or codec
    snaps = [state["keyed"] for state in states]
    kinds = {n: kind for snap in snaps for n, kind in snap.get("kinds", {}).items() if n not in TIMER_STATES}
    with tempfile.TemporaryDirectory(prefix="streamflow-rocksdb-to-heap-") as scratch:
        rocks = RocksDBKeyedStateBackend(
            max_parallelism, key_groups, operator_id="to-heap", subtask=0, codec=codec, local_dir=scratch
        )
        try:
            timers = RocksDBTimerService(rocks, _same, _same)  # namespaces stay encoded
            rocks.restore(snaps, lambda g: g in key_groups, restored.shared_path, restored.read_shared)
            timers.reset(restored=True)
            tables = {name: dict(rocks.table(name, kind).items()) for name, kind in kinds.items()}
            event, processing = timers.queues
            timer_lists = {"event_time": event.entries(), "processing_time": processing.entries()}
            key_types = rocks.restored_key_types
        finally:
            rocks.close()
    snap = snapshot_tables(tables, kinds, max_parallelism)
    if key_types:  # the kinds the writer recorded (an empty table records none)
        snap["key_types"] = sorted(set(snap["key_types"]) | key_types)
    return {"keyed": snap, "timers": timer_lists}
