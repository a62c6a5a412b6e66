"""Cleanup of expired TTL state that is never read again (Flink's TTL cleanup strategies).

Theory of operation
-------------------
A TTL state stores ``(value, last write time)`` (``ttl_state.py``); reading an
expired value removes it, but a key that is never read again would keep its
expired value for ever. Flink offers three ways to drop those, configured on
the ``StateTtlConfig`` (``state/ttl.py``), and this module ports them for the
heap backend:

* **Full snapshot** (``cleanup_full_snapshot()``): when a snapshot is written,
  expired values, list elements and map entries are left out of it
  (:meth:`TtlRegistry.snapshot_view`); the local state is not touched, but a
  restore from that snapshot no longer has them. Flink's
  ``TtlStateSnapshotTransformer``.
* **Incremental** (``cleanup_incrementally(n, run_for_every_record)``): each
  TTL state keeps a lazy cursor over all its keys (:class:`IncrementalCleanup`).
  Every access of the state advances it by ``n`` keys, and with
  ``run_for_every_record`` so does every record the operator processes (every
  change of the backend's current key, Flink's key-selection listener). Each
  visited key's expired value is removed, or its expired elements/entries are
  removed from its list/map. The cursor walks a copy of the key list taken
  when it starts a pass (a dict cannot be iterated while it changes; Flink's
  heap backend with synchronous snapshots copies the keys the same way), so a
  key added during a pass is visited in the next one. Flink's
  ``TtlIncrementalCleanup``.
* **In background** (the default, ``disable_cleanup_in_background()`` turns it
  off): with no explicit strategy the heap backend cleans incrementally, 5
  keys per state access and not per record, as Flink's
  ``DEFAULT_INCREMENTAL_CLEANUP_STRATEGY``.

``cleanup_in_rocksdb_compact_filter`` is accepted and has no effect on the
heap backend (as in Flink; logged once per backend). On RocksDB (as in Flink)
the compaction filter's cleanup (the default with background cleanup) and
full-snapshot cleanup apply, in ``rocksdb_ttl_cleanup.py``; incremental cleanup
is the heap's only (logged).

Every removal or rewrite goes through the backend (``remove_entry`` /
``put_entry``), so a backend that tracks writes records it as a deletion.
Expiry is ``last write + ttl <= now``, ``now`` from the job's clock: tests
drive it with a manual clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .ttl import StateTtlConfig

__all__ = ["IncrementalCleanup", "TtlRegistry", "prune", "registry"]

log = logging.getLogger(__name__)

#: ``prune``'s answer for an entry with nothing left
GONE = object()


def prune(kind: str, entry: Any, ttl: int, now: int) -> Any:
    """``entry`` without what expired at ``now``: the entry itself if nothing expired,
    ``GONE`` if nothing is left, else a new list/dict of the live elements/entries."""
    if kind == "list":
        kept = [e for e in entry if e[1] + ttl > now]
        if len(kept) == len(entry):
            return entry
        return kept if kept else GONE
    if kind == "map":
        kept_map = {k: e for k, e in entry.items() if e[1] + ttl > now}
        if len(kept_map) == len(entry):
            return entry
        return kept_map if kept_map else GONE
    return entry if entry[1] + ttl > now else GONE  # value, reducing, aggregating: (value, ts)


class IncrementalCleanup:
    """The lazy cursor over one TTL state's keys (see the module docstring)."""

    __slots__ = ("_backend", "_keys", "_name", "_now", "_pos", "_table", "kind", "removed", "size", "ttl")

    def __init__(
        self, backend: Any, table: dict, name: str, kind: str, ttl: int, now: Callable[[], int], size: int
    ) -> None:
        self._backend, self._table, self._name, self.kind = backend, table, name, kind
        self.ttl, self._now, self.size = ttl, now, size
        self._keys: list = []
        self._pos = 0
        self.removed = 0  # keys removed so far (for tests and metrics)

    def run(self) -> None:
        """Visit the next ``size`` keys, removing what expired."""
        if self.size <= 0:
            return
        table = self._table
        if self._pos >= len(self._keys):
            if not table:
                return
            self._keys, self._pos = list(table), 0
        end = min(self._pos + self.size, len(self._keys))
        keys, now, ttl, kind = self._keys, self._now(), self.ttl, self.kind
        for i in range(self._pos, end):
            key = keys[i]
            entry = table.get(key)
            if entry is None:
                continue
            kept = prune(kind, entry, ttl, now)
            if kept is GONE:
                _write(self._backend, table, self._name, key, GONE)
                self.removed += 1
            elif kept is not entry:
                _write(self._backend, table, self._name, key, kept)
        self._pos = end
        if end >= len(keys):
            self._keys, self._pos = [], 0  # the pass is over: the next run takes a fresh copy


class TtlRegistry:
    """The TTL states of one backend and their cleanup strategies."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self._full_snapshot: dict[str, tuple[str, int, Callable[[], int]]] = {}
        self.incremental: dict[str, IncrementalCleanup] = {}
        self._per_record: list[IncrementalCleanup] = []
        self._warned: set[str] = set()  # the cleanup strategies logged as without effect
        # user states registered (name -> TTL enabled), and those a restore recorded that are
        # not registered again yet: TTL migration on restore (state/ttl_migration.py)
        self.user_states: dict[str, bool] = {}
        self.restored: dict[str, bool] | None = None

    def register(
        self, name: str, table: dict, kind: str, config: StateTtlConfig, now: Callable[[], int]
    ) -> Callable[[], None] | None:
        """Set up ``config``'s cleanup for state ``name``; the callback to run on each access
        of that state (None when it has no incremental cleanup)."""
        strategies = config.get_cleanup_strategies()
        ttl = config.get_ttl()
        if getattr(self._backend, "is_rocksdb", False):
            self._register_rocksdb(name, kind, config, now)
            return None
        if strategies.in_full_snapshot():
            self._full_snapshot[name] = (kind, ttl, now)
        else:
            self._full_snapshot.pop(name, None)
        explicit_rocks = strategies._strategies.get(strategies.Strategies.ROCKSDB_COMPACTION_FILTER)
        if explicit_rocks is not None:  # a RocksDB feature: none on the heap, as in Flink
            self._unused(name, "cleanup_in_rocksdb_compact_filter", "heap", config)
        incremental = strategies.get_incremental_cleanup_strategy()
        if incremental is None or incremental.get_cleanup_size() <= 0:
            return None
        cleanup = self.incremental.get(name)
        if cleanup is None:
            size = incremental.get_cleanup_size()
            cleanup = IncrementalCleanup(self._backend, table, name, kind, ttl, now, size)
            self.incremental[name] = cleanup
            if incremental.run_cleanup_for_every_record():
                self._per_record.append(cleanup)
                _listen_to_keys(self._backend, cleanup.run)
        return cleanup.run

    def _register_rocksdb(self, name: str, kind: str, config: StateTtlConfig, now: Callable[[], int]) -> None:
        """RocksDB (as Flink's): the compaction filter's cleanup (on by default with background
        cleanup) and full-snapshot cleanup, in ``rocksdb_ttl_cleanup.py``; incremental cleanup
        is the heap's only (logged)."""
        strategies = config.get_cleanup_strategies()
        compaction = strategies.get_rocksdb_compact_filter_cleanup_strategy()
        query = None if compaction is None else compaction.get_query_time_after_num_entries()
        full = strategies.in_full_snapshot()
        self._backend.rocks_ttl_cleanup().register(name, kind, config.get_ttl(), now, query, full)
        if strategies._strategies.get(strategies.Strategies.INCREMENTAL_CLEANUP) is not None:
            self._unused(name, "cleanup_incrementally", "RocksDB", config)

    def _unused(self, name: str, strategy: str, backend: str, config: StateTtlConfig) -> None:
        if strategy in self._warned:
            return
        self._warned.add(strategy)
        strategies = config.get_cleanup_strategies()
        also = ""
        if backend == "heap" and strategies.get_incremental_cleanup_strategy():
            also = " and incrementally"
        elif backend == "RocksDB" and strategies.in_rocksdb_compact_filter():
            also = " and by the compaction filter's cleanup"
        log.info(
            "state %r: %s has no effect on the %s state backend; expired entries are cleaned on access%s",
            name,
            strategy,
            backend,
            also,
        )

    def snapshot_view(self, tables: dict[str, dict]) -> dict[str, dict]:
        """``tables`` with the full-snapshot TTL states filtered (copies; the local state stays)."""
        if not self._full_snapshot:
            return tables
        view = dict(tables)
        for name, (kind, ttl, now) in self._full_snapshot.items():
            table = tables.get(name)
            if not table:
                continue
            at, filtered = now(), {}
            for key, entry in table.items():
                kept = prune(kind, entry, ttl, at)
                if kept is not GONE:
                    filtered[key] = kept
            view[name] = filtered
        return view


def registry(backend: Any) -> TtlRegistry:
    """``backend``'s TTL registry, made on first use."""
    found = getattr(backend, "ttl", None)
    if found is None:
        found = backend.ttl = TtlRegistry(backend)
    return found


# ---------------------------------------------------------------- per-record trigger

_LISTENING: dict[type, type] = {}


def _listen_to_keys(backend: Any, callback: Callable[[], None]) -> None:
    """Call ``callback`` whenever ``backend.current_key`` is set (each record, each timer).

    Operators set ``current_key`` as a plain attribute on their hot path; only a backend
    with a per-record cleanup is switched to a subclass whose ``current_key`` is a property,
    so no other job pays for it."""
    listeners: list | None = getattr(backend, "_key_listeners", None)
    if listeners is None:
        cls = type(backend)
        sub = _LISTENING.get(cls)
        if sub is None:
            name = f"{cls.__name__}WithKeyListeners"
            sub = _LISTENING[cls] = type(name, (cls,), {"current_key": _current_key})
        key = backend.current_key  # (a plain attribute on the heap backend: popped below)
        backend.__dict__.pop("current_key", None)
        backend._key_listeners = listeners = []
        backend._current_key_value = key
        backend.__class__ = sub
    listeners.append(callback)


def _get_key(self: Any) -> Any:
    return self._current_key_value


def _set_key(self: Any, key: Any) -> None:
    self._current_key_value = key
    for callback in self._key_listeners:
        callback()


_current_key = property(_get_key, _set_key)


def _write(backend: Any, table: Any, name: str, key: Any, value: Any) -> None:
    """Remove or replace an entry through the backend when it owns the table (heap: recorded
    as a write), else on the table it handed out (RocksDB's cache records its own writes)."""
    owned = getattr(backend, "_tables", {}).get(name) is table
    if owned:
        if value is GONE:
            backend.remove_entry(name, key)
        else:
            backend.put_entry(name, key, value)
    elif value is GONE:
        table.pop(key, None)
    else:
        table[key] = value
