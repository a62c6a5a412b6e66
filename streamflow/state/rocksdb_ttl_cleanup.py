"""Cleanup of expired TTL state in RocksDB that is never read again (Flink's compaction filter).

Theory of operation
-------------------
Flink drops the expired entries of a TTL state on RocksDB with a compaction filter
(``cleanupInRocksdbCompactFilter(queryTimeAfterNumEntries)``, on by default with background
cleanup): as RocksDB compacts, the filter looks at each entry's last write time and drops the
expired ones, reading the current time once every ``queryTimeAfterNumEntries`` entries. rocksdict
(the binding) offers no compaction filter a Python callback can serve (``AccessType.with_ttl``
is one TTL for the whole DB, stamped by RocksDB, not a state's ``(value, last write)``), so
this module does the filter's work in passes of its own, off the event loop:

* **Scan** (a worker thread): a pass walks every TTL state's key range of the subtask's key
  groups, ``query_time_after_num_entries`` entries per slice (the time is read once per slice,
  the backend's lock held for that slice only, so a checkpoint or a close waits at most one
  slice). Each expired value, and each value, list or map with expired elements or entries,
  is a *candidate*: its RocksDB key, the bytes the scan read and what should replace them
  (nothing, or the pruned list/map, as ``ttl_cleanup.prune`` decides).
* **Apply** (the loop, at the backend's next safe points): :data:`APPLY_SLICE` candidates at
  a time. A key dirty in the operator's cache is skipped (its cached value is newer than the DB;
  an expired one is removed by its next access); a clean cached key (the DB's value) leaves
  the cache. One multi-get reads the candidates' current bytes, and a candidate is applied (one
  WriteBatch) only if they are still the bytes the scan saw: a key written since the scan keeps
  its new value. Applying costs a multi-get and a write per slice, never a scan.

A pass ends early once it holds :data:`MAX_FOUND` candidates (the next one starts over: what
was applied is gone). A pass starts at a safe point (a flush: writes, evictions, every
checkpoint) once the previous one is applied and at least :data:`PASS_INTERVAL_S` later, so
cleanup advances while the job writes or checkpoints, as compactions do in Flink.

**Full snapshots** (``cleanup_full_snapshot()``): a RocksDB snapshot is its files, so the
entries of such a state that have expired are removed from the DB before each checkpoint's
files are taken: in the checkpoint's worker thread, while the task waits for it (so its cache
is still: its clean entries of removed keys are dropped, and nothing is dirty after the
flush). No checkpoint or savepoint holds them; restoring it does not revive them.

Expiry is Flink's: ``last access + ttl <= now`` with processing time (the only
characteristic), ``now`` from the job's clock, the stored time being the last write's or,
with ``OnReadAndWrite``, the last read's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import rocksdict

from . import codec as _codec
from .rocksdb_table import canonical_key, fast_decoder
from .ttl_cleanup import GONE, prune

if TYPE_CHECKING:
    from .rocksdb_backend import RocksDBKeyedStateBackend

__all__ = ["PASS_INTERVAL_S", "RocksTtlCleanup"]

log = logging.getLogger(__name__)

_decode_key = fast_decoder(_codec.MsgpackCodec())  # keys are always the safe msgpack codec's

PASS_INTERVAL_S = 1.0  # the least time between the end of a pass and the start of the next
MAX_FOUND = 100_000  # candidates a pass holds (memory): it ends there, the next one starts over
APPLY_SLICE = 250  # candidates applied at one safe point: ~2 ms of the loop (tuple keys, values)


@dataclass
class _State:
    name: str
    kind: str
    ttl: int
    now: Callable[[], int]
    query_every: int  # entries per slice: the time is read once per slice (Flink's queryTime...)
    background: bool  # the compaction-filter cleanup
    full_snapshot: bool


class RocksTtlCleanup:
    """The TTL cleanup of one RocksDB backend (see the module docstring)."""

    def __init__(self, backend: RocksDBKeyedStateBackend) -> None:
        self._backend = backend
        self._states: dict[str, _State] = {}
        self._pass: asyncio.Future[list[tuple[str, bytes, bytes, bytes | None]]] | None = None
        self._found: list[tuple[str, bytes, bytes, bytes | None]] = []
        self._next_pass = 0.0
        self.removed = 0  # entries removed (or pruned) so far: tests and logs
        self.passes = 0

    def register(
        self, name: str, kind: str, ttl: int, now: Callable[[], int], query_every: int | None, full: bool
    ) -> None:
        """State ``name`` has a TTL: cleaned in background passes when ``query_every`` is set
        (the compaction filter's ``query_time_after_num_entries``), before snapshots if ``full``."""
        every = max(1, query_every or 1000)
        self._states[name] = _State(name, kind, ttl, now, every, query_every is not None, full)

    # -- background passes -----------------------------------------------------
    def tick(self) -> None:
        """At a safe point on the loop: apply what the last pass found (a slice), start the next
        pass when it is due."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on the loop (a restore's flush in its thread): later
            return
        if self._found:
            self._apply(APPLY_SLICE)
            return
        running = self._pass
        if running is not None:
            if not running.done():
                return
            self._pass = None
            try:
                self._found = running.result()
            except Exception as exc:  # the pass failed: logged, retried at the next interval
                log.warning("TTL cleanup pass over RocksDB at %s failed: %r", self._backend.db_path, exc)
            self._next_pass = time.monotonic() + PASS_INTERVAL_S
            if self._found:
                self._apply(APPLY_SLICE)
            return
        states = [s for s in self._states.values() if s.background]
        if not states or time.monotonic() < self._next_pass or self._backend.start_pending:
            return
        self._pass = loop.run_in_executor(None, self.scan, states)

    def scan(self, states: list[_State]) -> list[tuple[str, bytes, bytes, bytes | None]]:
        """One pass over ``states`` (a worker thread): the candidates (state, key, bytes read,
        replacement or None)."""
        found: list[tuple[str, bytes, bytes, bytes | None]] = []
        for state in states:
            for prefix in self._prefixes(state.name):
                start: bytes | None = prefix
                while start is not None:
                    with self._backend._io:  # one slice: a checkpoint or a close waits for it
                        if self._backend._closed or self._backend._db is None:
                            return found
                        slice_, start = self._slice(state, prefix, start)
                    found.extend(slice_)
                    if len(found) >= MAX_FOUND:
                        self.passes += 1
                        return found
        self.passes += 1
        return found

    def _prefixes(self, name: str) -> list[bytes]:
        """``key group | state id`` of each key group of the subtask."""
        table = self._backend._rtables.get(name)
        if table is None:
            return []
        sid = table.sid.to_bytes(2, "big")
        return [kg.to_bytes(2, "big") + sid for kg in self._backend.key_groups]

    def _slice(
        self, state: _State, prefix: bytes, start: bytes
    ) -> tuple[list[tuple[str, bytes, bytes, bytes | None]], bytes | None]:
        """Up to ``query_every`` entries of ``prefix`` from ``start``: the candidates and where
        the next slice starts (None: the prefix is done)."""
        db = cast(rocksdict.Rdict, self._backend._db)
        # the table's own value form: a pickled state's entries are unpickled (state/typed.py)
        table = self._backend._rtables[state.name]
        decode, encode, to_plain = table._decode, self._backend.codec.encode, table._to_plain
        now = state.now()
        out: list[tuple[str, bytes, bytes, bytes | None]] = []
        for n, (k, raw) in enumerate(db.items(from_key=start)):
            rk = cast(bytes, k)
            if not rk.startswith(prefix):
                return out, None
            if n == state.query_every:
                return out, rk
            entry = decode(raw)
            kept = prune(state.kind, entry, state.ttl, now)
            if kept is GONE:
                out.append((state.name, rk, raw, None))
            elif kept is not entry:  # a list or map with expired elements: the live ones
                out.append((state.name, rk, raw, encode(kept if to_plain is None else to_plain(kept))))
        return out, None

    def _apply(self, limit: int) -> None:
        """Apply up to ``limit`` candidates (on the loop; see the module docstring)."""
        batch_of, self._found = self._found[:limit], self._found[limit:]
        backend = self._backend
        wanted = []
        for name, rk, raw, new in batch_of:
            table = backend._rtables.get(name)
            if table is None:
                continue
            key = canonical_key(_decode_key(rk[4:]))
            if key in table._dirty:
                continue  # written since the last flush: the cache's value is the newer one
            if key in table._cache:  # clean: the DB's value; read again from the DB if kept
                del table._cache[key]
                table._rkeys.pop(key, None)
            wanted.append((rk, raw, new))
        if not wanted:
            return
        current = backend.db_multi_get([rk for rk, _raw, _new in wanted])
        batch = rocksdict.WriteBatch(raw_mode=True)
        n = 0
        for (rk, raw, new), now in zip(wanted, current, strict=True):
            if now != raw:
                continue  # written (or removed) since the scan read it: left alone
            if new is None:
                batch.delete(rk)
            else:
                batch.put(rk, new)
            n += 1
        if n:
            backend.write_batch(batch, f"{n} expired TTL state entries")
            self.removed += n

    # -- full snapshots ---------------------------------------------------------
    def before_snapshot(self) -> None:
        """Remove the full-snapshot states' expired entries from the DB (the checkpoint's worker
        thread, after the flush: see the module docstring)."""
        states = [s for s in self._states.values() if s.full_snapshot]
        if not states:
            return
        backend = self._backend
        found: list[tuple[str, bytes, bytes, bytes | None]] = []
        for state in states:
            for prefix in self._prefixes(state.name):
                at: bytes | None = prefix
                while at is not None:
                    slice_, at = self._slice(state, prefix, at)
                    found.extend(slice_)
        if not found:
            return
        batch = rocksdict.WriteBatch(raw_mode=True)
        for name, rk, _raw, new in found:
            table = backend._rtables[name]
            key = canonical_key(_decode_key(rk[4:]))
            table._cache.pop(key, None)  # clean after the flush: read again from the DB
            table._rkeys.pop(key, None)
            if new is None:
                batch.delete(rk)
            else:
                batch.put(rk, new)
        backend.write_batch(batch, f"{len(found)} expired TTL state entries")
        self.removed += len(found)
