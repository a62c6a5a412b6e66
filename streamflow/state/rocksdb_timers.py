"""Timers in RocksDB: the timer service of a keyed operator on the RocksDB state backend.

Theory of operation
-------------------
With ``EmbeddedRocksDBStateBackend`` a keyed operator's timers live in its
RocksDB, beside its keyed state, as Flink's RocksDB timer queues do
(``RocksDBPriorityQueueSetFactory``, ``KeyGroupPartitionedPriorityQueue`` over
``RocksDBCachingPriorityQueueSet``): memory holds only a small *head* of the
earliest timers of each key group, so millions of pending timers cost disk,
not heap, and checkpoints, restore and rescale treat them like any other
state (they are in the SST files; a rescale copies key-group ranges).

**Layout.** One state id per time domain (state names ``_timers/event_time``
and ``_timers/processing_time``, kind ``timer``). A timer's RocksDB key is
``key group (2 bytes) | state id (2) | timestamp (8, big-endian, offset by
2**63 so negative timestamps sort first) | msgpack of (key, namespace)``, with
an empty value. RocksDB keeps keys sorted, so within a key group the timers
are in firing order; a set of timers is a set of keys (registering twice
writes the same key: set semantics for free).

**Heads.** Per key group a sorted list of the suffixes (``timestamp | key |
namespace``) of its earliest timers, at most ``head_size`` (128, Flink's
default cache size). The invariant: *a head holds the smallest ``len(head)``
timers of its key group*; a key group is *complete* when its head holds all
of them. A heap over the key groups' first timers gives the global next
timer. Registering a timer below the head's last one (or into a complete
head) inserts it into the head (the largest drops out when the head
overflows: no longer complete); one above goes to RocksDB only. Popping takes
the first of the head; a head emptied while incomplete is reloaded from
RocksDB (one seek, up to ``head_size`` keys) before the next timer is chosen.
After a restore every head starts empty and incomplete, so the first query
reloads them all (one seek per key group).

**Writes** are collected in a dict ``{RocksDB key: put or delete}`` and
written in one WriteBatch: with the backend's state flush (so before every
RocksDB checkpoint), before a head is reloaded, and when 4,096 are pending.
Whether a timer exists is answered from the head when the head decides it,
else from the pending writes, else by a RocksDB get.

**Differences from the heap service** (``runtime/timers.py``): timers with
the same timestamp fire in the order of their encoded key and namespace, not
in registration order (Flink leaves this order unspecified); registering or
deleting a timer beyond the head returns True without a lookup ("may have
changed"); keys come back in canonical form (``1.0`` as ``1``, as keyed
state stores them); ``snapshot()`` scans RocksDB (introspection: a
checkpoint stores the files, not this list).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable, Hashable
from itertools import islice
from typing import TYPE_CHECKING, Any, cast

import rocksdict

from ..runtime.timers import Timer, TimerService
from . import codec as _codec
from .key_groups import key_group_of
from .rocksdb_table import canonical_key, encode_key

if TYPE_CHECKING:
    from .rocksdb_backend import RocksDBKeyedStateBackend

__all__ = ["TIMER_STATES", "RocksDBTimerService"]

HEAD_SIZE = 128
_FLUSH_AT = 4096
_OFFSET = 1 << 63
TIMER_STATES = ("_timers/event_time", "_timers/processing_time")


def _ts_bytes(ts: int) -> bytes:
    return (ts + _OFFSET).to_bytes(8, "big")  # OverflowError outside int64, TypeError if not an int


def _ts_of(suffix: bytes) -> int:
    return int.from_bytes(suffix[:8], "big") - _OFFSET


class RocksTimerQueue:
    """The timers of one time domain of one operator subtask (see the module docstring); the
    queue interface of ``runtime/timers.py``'s ``_TimerQueue``."""

    __slots__ = (
        "_backend",
        "_complete",
        "_decode_ns",
        "_encode_ns",
        "_heads",
        "_order",
        "_pending",
        "_prefixes",
        "_stale",
        "head_size",
        "name",
    )

    def __init__(
        self,
        backend: RocksDBKeyedStateBackend,
        name: str,
        encode_ns: Callable[[Any], Any],
        decode_ns: Callable[[Any], Any],
        head_size: int = HEAD_SIZE,
    ) -> None:
        self._backend = backend
        self.name = name
        self._encode_ns = encode_ns
        self._decode_ns = decode_ns
        self.head_size = head_size
        self._heads: dict[int, list[bytes]] = {}
        self._complete: set[int] = set()
        self._stale: set[int] = set()
        self._order: list[tuple[bytes, int]] = []
        self._pending: dict[bytes, bool] = {}
        self._prefixes: dict[int, bytes] = {}
        self.reset(restored=False)

    def reset(self, restored: bool) -> None:
        """Forget the heads: a fresh DB has no timers (every head complete); a restored one
        has them on disk (every head to be loaded). The state id is looked up again."""
        groups = self._backend.key_groups
        self._heads = {kg: [] for kg in groups}
        self._order = []
        self._pending = {}
        sid = self._backend.sid_of(self.name, "timer").to_bytes(2, "big")
        self._prefixes = {kg: kg.to_bytes(2, "big") + sid for kg in groups}
        if restored:
            self._complete, self._stale = set(), set(groups)
        else:
            self._complete, self._stale = set(groups), set()

    # -- encoding -----------------------------------------------------------------
    def _locate(self, timestamp: int, key: Hashable, namespace: Hashable) -> tuple[int, bytes]:
        key = canonical_key(key)
        kg = key_group_of(key, self._backend.max_parallelism)
        if kg not in self._heads:
            raise ValueError(
                f"timer key {key!r} is in key group {kg}, not one of this subtask's "
                f"({self._backend.key_groups.start}-{self._backend.key_groups.stop - 1})"
            )
        return kg, _ts_bytes(timestamp) + encode_key((key, self._encode_ns(namespace)))

    def _timer(self, suffix: bytes) -> Timer:
        key, ns = cast(tuple, _codec.decode(suffix[8:]))
        return Timer(_ts_of(suffix), key, self._decode_ns(ns))

    # -- the queue interface ---------------------------------------------------
    def add(self, timestamp: int, key: Hashable, namespace: Hashable) -> bool:
        kg, s = self._locate(timestamp, key, namespace)
        head = self._heads[kg]
        rk = self._prefixes[kg] + s
        if kg in self._complete or (head and s < head[-1]):
            i = bisect_left(head, s)
            if i < len(head) and head[i] == s:
                return False
            head.insert(i, s)
            if i == 0:
                self._push(s, kg)
            if len(head) > self.head_size:
                head.pop()  # still in RocksDB (below): the head no longer holds them all
                self._complete.discard(kg)
        elif self._pending.get(rk) is True:
            return False
        self._write(rk, True)
        return True

    def remove(self, timestamp: int, key: Hashable, namespace: Hashable) -> bool:
        kg, s = self._locate(timestamp, key, namespace)
        head = self._heads[kg]
        rk = self._prefixes[kg] + s
        i = bisect_left(head, s)
        if i < len(head) and head[i] == s:
            del head[i]
            if head:
                if i == 0:
                    self._push(head[0], kg)
            elif kg not in self._complete:
                self._stale.add(kg)
        elif kg in self._complete or (head and s < head[-1]) or self._pending.get(rk) is False:
            return False  # the head decides: not registered
        self._write(rk, False)
        return True

    def __contains__(self, ident: tuple[int, Hashable, Hashable]) -> bool:
        kg, s = self._locate(*ident)
        head = self._heads[kg]
        i = bisect_left(head, s)
        if i < len(head) and head[i] == s:
            return True
        if kg in self._complete or (head and s < head[-1]):
            return False
        rk = self._prefixes[kg] + s
        pending = self._pending.get(rk)
        if pending is not None:
            return pending
        return self._backend.db_get(rk) is not None

    def peek_timestamp(self) -> int | None:
        top = self._peek()
        return None if top is None else _ts_of(top[0])

    def drop_dead(self, time: int, limit: int) -> bool:
        """Nothing to skip: a deletion removes the timer from its head or RocksDB (no lazy
        deletion; ``_peek`` drops at most one stale entry per key group)."""
        return True

    def pop_due(self, time: int) -> Timer | None:
        top = self._peek()
        if top is None or _ts_of(top[0]) > time:
            return None
        s, kg = heapq.heappop(self._order)
        head = self._heads[kg]
        del head[0]
        if head:
            self._push(head[0], kg)
        elif kg not in self._complete:
            self._stale.add(kg)
        self._write(self._prefixes[kg] + s, False)
        return self._timer(s)

    def entries(self) -> list[tuple[int, Any, Any]]:
        """Every timer, in firing order (a scan of RocksDB: introspection and tests)."""
        self.flush()
        suffixes = [s for prefix in self._prefixes.values() for s in self._scan(prefix, None)]
        return [(t.timestamp, t.key, t.namespace) for t in map(self._timer, sorted(suffixes))]

    def __len__(self) -> int:
        self.flush()
        return sum(sum(1 for _ in self._scan(p, None)) for p in self._prefixes.values())

    # -- heads ---------------------------------------------------------------------
    def _peek(self) -> tuple[bytes, int] | None:
        if self._stale:
            self._reload()
        order, heads = self._order, self._heads
        while order:
            s, kg = order[0]
            head = heads[kg]
            if head and head[0] == s:
                return order[0]
            heapq.heappop(order)  # that head has changed since
        return None

    def _push(self, first: bytes, kg: int) -> None:
        order = self._order
        heapq.heappush(order, (first, kg))
        if len(order) > 4 * len(self._heads) + 64:  # mostly outdated entries: rebuild
            self._order = [(h[0], g) for g, h in self._heads.items() if h]
            heapq.heapify(self._order)

    def _reload(self) -> None:
        self.flush()
        for kg in sorted(self._stale):
            head = self._heads[kg] = list(self._scan(self._prefixes[kg], self.head_size + 1))
            if len(head) > self.head_size:
                head.pop()
            else:
                self._complete.add(kg)
            if head:
                self._push(head[0], kg)
        self._stale.clear()

    def _scan(self, prefix: bytes, limit: int | None) -> list[bytes]:
        keys = self._backend.db.keys(from_key=prefix)
        out = []
        for k in keys if limit is None else islice(keys, limit):
            rk = cast(bytes, k)
            if not rk.startswith(prefix):
                break
            out.append(rk[4:])
        return out

    # -- writes ----------------------------------------------------------------
    def _write(self, rk: bytes, put: bool) -> None:
        pending = self._pending
        pending[rk] = put
        if len(pending) >= _FLUSH_AT:
            self.flush()

    def flush_into(self, batch: Any) -> int:
        """Put the pending writes into ``batch`` (the backend writes it); returns how many."""
        pending = self._pending
        for rk, put in pending.items():
            if put:
                batch.put(rk, b"")
            else:
                batch.delete(rk)
        n = len(pending)
        self._pending = {}
        return n

    def flush(self) -> None:
        if self._pending:
            batch = rocksdict.WriteBatch(raw_mode=True)
            self.flush_into(batch)
            self._backend.write_batch(batch, "timers")


class RocksDBTimerService(TimerService):
    """``TimerService`` (runtime/timers.py) with both queues in RocksDB."""

    __slots__ = ()

    def __init__(
        self,
        backend: RocksDBKeyedStateBackend,
        encode_ns: Callable[[Any], Any],
        decode_ns: Callable[[Any], Any],
    ) -> None:
        super().__init__()
        event = RocksTimerQueue(backend, TIMER_STATES[0], encode_ns, decode_ns)
        processing = RocksTimerQueue(backend, TIMER_STATES[1], encode_ns, decode_ns)
        self._event = cast(Any, event)
        self._processing = cast(Any, processing)
        backend.timer_queues = [event, processing]

    def reset(self, restored: bool) -> None:
        """After the backend restored its DB: the timers are whatever it holds now."""
        for q in self.queues:
            q.reset(restored)

    @property
    def queues(self) -> tuple[RocksTimerQueue, RocksTimerQueue]:
        return cast(RocksTimerQueue, self._event), cast(RocksTimerQueue, self._processing)
