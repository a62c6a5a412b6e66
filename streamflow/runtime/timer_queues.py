"""The queue of one time domain of a :class:`~streamflow.runtime.timers.TimerService`.

Theory of operation
-------------------
A queue is a binary heap of int priorities (``(timestamp << 64) | seq``: comparing ints is
several times cheaper than comparing tuples) with lazy deletion, plus two maps: the live timers
``(timestamp, key, namespace) -> seq`` (set semantics: registering a live timer is a no-op)
and their inverse ``seq -> (timestamp, key, namespace)`` (what a heap entry's timer is, and
whether it is still live). ``seq`` is the registration order, shared by both domains of a
service; it breaks ties between equal timestamps and orders the timers for checkpoints.

**Two layouts, one object.** A queue starts *flat*: the two maps are two plain dicts, the
cheapest on the hot path (a trigger re-registers its window's end for every element: one dict
lookup). A dict grows by copying itself into a table twice as large in one C call; at a
million timers that is 30-40 ms of CPU per dict (most of it the kernel zeroing the new
table's pages), and both dicts of a queue resize at the same registration, so one record held
the caller's event loop 50-85 ms (``bench/timer_checkpoints.py --keys 1000000``). When a queue
holds :data:`SHARD_AT` live timers it turns *sharded*, in place (the object's class becomes
:class:`ShardedTimerQueue`, whose ``__slots__`` layout is the same, so every reference to the
queue stays valid): the live timers are spread over :data:`SHARDS` dicts by the hash of the
timer's key (a key's timers stay together, as in Flink's key groups; hashing the whole timer
tuple cost twice as much per operation; a single key with a million timers would still be one
dict), and the inverse over dicts of :data:`SEQ_RANGE` consecutive seqs each (seqs ascend, so
only the newest range grows; a range whose timers are all gone is dropped). No dict then holds
more than about ``1.4 * timers / SHARDS`` entries or ``SEQ_RANGE`` of them, so a resize costs
at most that (22k entries at a million timers, about 0.5 ms). The shards' shares of the keys
differ, spread over an octave (a key's hash picks one of :data:`SLOTS` slots, and shard ``s``
has a number of slots proportional to ``2 ** (s / SHARDS)``): with equal shares the dicts of
evenly spread keys grew alike and reached their resize points within the same few dozen
registrations, so one batch of records paid all 64 resizes (22 ms of CPU at 698,880 timers,
about 45 ms at 1.4M); now their resize points lie apart, about 1 % of the timers from one
to the next. The move
itself is one step over :data:`SHARD_AT` timers (a few ms). A sharded queue costs a key hash,
a subscript and a range lookup more per operation (11-18 % of the timer operations' own
instructions, docs/performance.md), which only large queues pay; it never turns flat again.

**Compaction, a little at a time** (``timer_compaction.py``): when the heap holds more than
twice the live timers (dead entries of deleted timers: lazy deletion), the queue does not
rebuild it in one step but turns into the compacting variant of its layout, which moves the
old heap's entries to a new heap a few at every operation.

Both layouts answer the same reads: :meth:`TimerQueue.table` (the live timers as a read-only
mapping with ``len``, iteration and ``values()`` in registration order: a base of an
incremental checkpoint; a sharded one reads them through its seq ranges, in the order their
memory was allocated, not shard by shard: 5x faster), :meth:`TimerQueue.by_seq` (the live
timers by seq, ascending: a full snapshot), :meth:`TimerQueue.newest_first` (``(seq,
timer)`` pairs, newest first: what a delta reads) and :meth:`TimerQueue.newest_seq`.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any

__all__ = [
    "DEAD_SLICE", "SEQ_RANGE", "SHARDS", "SHARD_AT", "Ident", "ShardedTimerQueue", "Timer", "TimerQueue",
]  # fmt: skip

Ident = tuple[int, Hashable, Hashable]
"""``(timestamp, key, namespace)``."""

SEQ_BITS = 64
SEQ_MASK = (1 << SEQ_BITS) - 1
COMPACT_MIN = 64
SHARD_AT = 1 << 15
"""Live timers at which a flat queue turns sharded (the move is one step over that many)."""
SHARDS = 64
"""Dicts of live timers in a sharded queue, by the hash of the timer's key."""
SLOTS = 4_096
"""Slots a key's hash picks (written as the literal 4095, ``SLOTS - 1``, where a shard is
picked): a sharded queue's ``_shards`` is a list of ``SLOTS`` references to its ``SHARDS``
dicts, dict ``s`` in ``_SLOT_COUNTS[s]`` slots."""
_WEIGHTS = [2 ** (s / SHARDS) for s in range(SHARDS)]
_SLOT_COUNTS = [round(SLOTS * w / sum(_WEIGHTS)) for w in _WEIGHTS]
_SLOT_COUNTS[-1] += SLOTS - sum(_SLOT_COUNTS)
_SHARD_OF = [s for s, n in enumerate(_SLOT_COUNTS) for _ in range(n)]
random.Random(SLOTS).shuffle(_SHARD_OF)  # (no stride of keys lands on one dict)
DEAD_SLICE = 4_096
"""Heap entries of deleted timers one :meth:`TimerQueue.drop_dead` step skips at most (about
3-4 ms of CPU in a heap of a million entries; the operator may pause between two steps)."""
_RANGE_BITS = 14
SEQ_RANGE = 1 << _RANGE_BITS
"""Consecutive seqs per dict of a sharded queue's inverse map."""
_TS, _KEY, _NS = itemgetter(0), itemgetter(1), itemgetter(2)


@dataclass(frozen=True, slots=True)
class Timer:
    """A fired (or registered) timer."""

    timestamp: int
    key: Any
    namespace: Any


class TimerQueue:
    """A deduplicated min-queue of timers with lazy deletion (one time domain), flat layout
    (see the module doc). ``dead``/``mark``: for incremental checkpoints, the timers deleted
    or fired that were registered at or before ``mark`` (a seq: the last checkpoint's), in
    order; those registered after it are the end of :meth:`by_seq`. ``mark`` -1: nothing is
    logged. The timer object the caller sees is built only when a timer fires."""

    # one layout for both classes (``__class__`` is swapped in place): the flat layout uses
    # _live/_timers, the sharded one _shards/_ranges/_count
    __slots__ = (
        "_check_at", "_count", "_heap", "_live", "_old", "_ranges", "_seq", "_shards", "_timers", "dead",
        "mark",
    )  # fmt: skip

    def __init__(self, seq: Callable[[], int]) -> None:
        self._heap: list[int] = []
        self._old: list[int] = []  # the heap a compaction empties (see the module doc)
        self._live: dict[Ident, int] = {}
        self._timers: dict[int, Ident] = {}
        self._shards: list[dict[Ident, int]] = []
        self._ranges: dict[int, dict[int, Ident]] = {}
        self._count = 0
        self._check_at = 0  # (the first registration sets it: see _check_size)
        self._seq = seq
        self.mark = -1
        self.dead: list[Ident] = []

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, ident: Ident) -> bool:
        return ident in self._live

    def add(self, timestamp: int, key: Hashable, namespace: Hashable) -> bool:
        ident = (timestamp, key, namespace)
        if ident in self._live:  # (a trigger's re-registration: the hot path, kept to this)
            return False
        seq = self._seq()
        priority = (timestamp << SEQ_BITS) | seq  # TypeError for a non-int timestamp
        self._live[ident] = seq
        self._timers[seq] = ident
        heapq.heappush(self._heap, priority)
        if seq >= self._check_at:  # (no len() per new timer: that cost 2 % of a register + fire)
            self._check_size(seq)
        return True

    def _check_size(self, seq: int) -> None:
        """Turn sharded at ``SHARD_AT`` live timers, else check again at the first seq that
        could reach it (a registration adds one timer and takes one seq)."""
        room = SHARD_AT - len(self._live)
        if room > 0:
            self._check_at = seq + room
        else:
            self._to_shards()

    def _to_shards(self) -> None:
        """Turn this queue sharded, in place (the module doc)."""
        dicts: list[dict[Ident, int]] = [{} for _ in range(SHARDS)]
        shards = [dicts[s] for s in _SHARD_OF]  # (the module doc: uneven shares, resizes apart)
        for ident, seq in self._live.items():
            shards[hash(ident[1]) & 4095][ident] = seq
        ranges: dict[int, dict[int, Ident]] = {}
        for seq, ident in self._timers.items():  # ascending: the ranges are made in order
            r = ranges.get(seq >> _RANGE_BITS)
            if r is None:
                r = ranges[seq >> _RANGE_BITS] = {}
            r[seq] = ident
        self._count = len(self._live)
        self._shards, self._ranges = shards, ranges
        self._live, self._timers = {}, {}
        self.__class__ = ShardedTimerQueue
        if self._old:  # compacting (timer_compaction.py): the sharded layout's compacting variant
            self._compact_as(ShardedTimerQueue)

    def remove(self, timestamp: int, key: Hashable, namespace: Hashable) -> bool:
        seq = self._live.pop((timestamp, key, namespace), None)
        if seq is None:
            return False
        ident = self._timers.pop(seq)
        if seq <= self.mark:
            self.dead.append(ident)
        heap = self._heap
        if len(heap) > COMPACT_MIN and len(heap) > 2 * len(self._live):
            self._compact()
        return True

    def _compact(self) -> None:
        """Start a compaction (``timer_compaction.py``): the heap becomes the old heap."""
        self._old, self._heap = self._heap, []
        self._compact_as(type(self))

    def _compact_as(self, layout: type[TimerQueue]) -> None:
        from .timer_compaction import COMPACTING  # (it subclasses the layouts: imported when used)

        self.__class__ = COMPACTING[layout]

    def _alive(self, seq: int) -> bool:
        return seq in self._timers

    def _take(self, seq: int) -> Ident:
        """Forget the live timer ``seq`` (its heap entry is popped already)."""
        ident = self._timers.pop(seq)
        del self._live[ident]
        return ident

    def peek_timestamp(self) -> int | None:
        heap, timers = self._heap, self._timers
        while heap:
            priority = heap[0]
            if (priority & SEQ_MASK) in timers:
                return priority >> SEQ_BITS
            heapq.heappop(heap)  # a deleted timer
        return None

    def pop_due(self, time: int) -> Timer | None:
        """The next live timer with ``timestamp <= time``, removed; None when none is due."""
        heap, timers = self._heap, self._timers
        limit = (time << SEQ_BITS) | SEQ_MASK
        while heap:
            priority = heap[0]
            if priority > limit:  # even a dead head means nothing live is due
                return None
            heapq.heappop(heap)
            seq = priority & SEQ_MASK
            ident = timers.pop(seq, None)
            if ident is not None:
                del self._live[ident]
                if seq <= self.mark:
                    self.dead.append(ident)
                return Timer(ident[0], ident[1], ident[2])
        return None

    def drop_dead(self, time: int, limit: int) -> bool:
        """Pop at most ``limit`` heap entries of deleted timers off the head (those due by
        ``time``: what ``pop_due(time)`` would skip). True when no such entry is left at the
        head, so the next ``pop_due(time)`` skips none; False when it stopped at ``limit``:
        call again, after letting the loop run (lazy deletion can leave a million deleted
        timers in front of the live ones, and one ``pop_due`` would skip them all in one
        step). Which timers fire, and in what order, does not change: only dead entries go."""
        heap = self._heap
        if not heap or (heap[0] & SEQ_MASK) in self._timers:  # (per fired timer: kept to this)
            return True
        return self._drop_dead(time, limit)

    def _drop_dead(self, time: int, limit: int) -> bool:
        heap, alive = self._heap, self._alive
        bound = (time << SEQ_BITS) | SEQ_MASK
        for _ in range(limit):
            if not heap:
                return True
            priority = heap[0]
            if priority > bound or alive(priority & SEQ_MASK):
                return True
            heapq.heappop(heap)
        return not heap or heap[0] > bound or alive(heap[0] & SEQ_MASK)

    # -- reads (snapshots, checkpoints) -------------------------------------------------
    def table(self) -> Any:
        """The live timers, ``(timestamp, key, namespace) -> seq``: ``len``, iteration (keys)
        and ``values()`` in the same order. Read only."""
        return self._live

    def by_seq(self) -> Any:
        """The live timers by seq, ascending: iteration (seqs), ``[seq]``, ``values()``. Read only."""
        return self._timers

    def newest_seq(self) -> int:
        """The seq of the newest live timer, or -1."""
        return next(reversed(self._timers), -1)

    def newest_first(self) -> Iterator[tuple[int, Ident]]:
        """The live timers as ``(seq, timer)``, newest first (what a delta reads)."""
        return reversed(self._timers.items())

    def columns(self) -> tuple[list[int], list[Any], list[Any]]:
        """Live timers in registration order as three columns (timestamps, keys, namespaces):
        re-registered in this order they fire in the same order (``seq`` breaks ties), and
        the order costs no sort (the inverse map is in ascending seq order)."""
        timers = list(self.by_seq().values())  # (one map per column: 4x faster than zip(*timers))
        return list(map(_TS, timers)), list(map(_KEY, timers)), list(map(_NS, timers))

    def entries(self) -> list[Ident]:
        """Live timers in firing order."""
        timers = self.by_seq()
        out = []
        for priority in sorted(chain(self._heap, self._old)):
            seq = priority & SEQ_MASK
            if self._alive(seq):
                out.append(timers[seq])
        return out


class _ShardedTable:
    """A sharded queue's live timers as one read-only mapping (:meth:`TimerQueue.table`)."""

    __slots__ = ("queue",)

    def __init__(self, queue: ShardedTimerQueue) -> None:
        self.queue = queue

    def __len__(self) -> int:
        return self.queue._count

    # read through the inverse map, in registration order: shard by shard, a base read every
    # 64th timer of memory allocated in that order (5x slower in a 300k-timer base capture)
    def __iter__(self) -> Iterator[Ident]:
        return chain.from_iterable(r.values() for r in self.queue._ranges.values())

    def values(self) -> Iterator[int]:
        return chain.from_iterable(self.queue._ranges.values())


class _SeqRanges:
    """A sharded queue's live timers by seq, ascending, as one read-only mapping
    (:meth:`TimerQueue.by_seq`)."""

    __slots__ = ("ranges",)

    def __init__(self, ranges: dict[int, dict[int, Ident]]) -> None:
        self.ranges = ranges

    def __len__(self) -> int:
        return sum(map(len, self.ranges.values()))

    def __getitem__(self, seq: int) -> Ident:
        return self.ranges[seq >> _RANGE_BITS][seq]  # (entries(): a snapshot, not per record)

    def __iter__(self) -> Iterator[int]:
        return chain.from_iterable(self.ranges.values())

    def values(self) -> Iterator[Ident]:
        return chain.from_iterable(r.values() for r in self.ranges.values())


class ShardedTimerQueue(TimerQueue):
    """:class:`TimerQueue` in the sharded layout (the module doc); made only by
    :meth:`TimerQueue._to_shards`."""

    __slots__ = ()

    def __len__(self) -> int:
        return self._count

    def __contains__(self, ident: Ident) -> bool:
        return ident in self._shards[hash(ident[1]) & 4095]

    def add(self, timestamp: int, key: Hashable, namespace: Hashable) -> bool:
        ident = (timestamp, key, namespace)
        shard = self._shards[hash(key) & 4095]  # (SLOTS - 1: a literal is cheaper than a global)
        if ident in shard:
            return False
        seq = self._seq()
        priority = (timestamp << SEQ_BITS) | seq  # TypeError for a non-int timestamp
        shard[ident] = seq
        r = self._ranges.get(seq >> _RANGE_BITS)
        if r is None:
            r = self._ranges[seq >> _RANGE_BITS] = {}
        r[seq] = ident
        self._count += 1
        heapq.heappush(self._heap, priority)
        return True

    def _forget(self, seq: int) -> Ident:
        """Drop ``seq`` from the inverse map (it is live); its range too when that empties."""
        ranges = self._ranges
        r = ranges[seq >> _RANGE_BITS]
        ident = r.pop(seq)
        if not r:
            del ranges[seq >> _RANGE_BITS]
        self._count -= 1
        return ident

    def remove(self, timestamp: int, key: Hashable, namespace: Hashable) -> bool:
        ident = (timestamp, key, namespace)
        seq = self._shards[hash(key) & 4095].pop(ident, None)
        if seq is None:
            return False
        self._forget(seq)
        if seq <= self.mark:
            self.dead.append(ident)
        heap = self._heap
        if len(heap) > COMPACT_MIN and len(heap) > 2 * self._count:
            self._compact()
        return True

    def _alive(self, seq: int) -> bool:
        r = self._ranges.get(seq >> _RANGE_BITS)
        return r is not None and seq in r

    def drop_dead(self, time: int, limit: int) -> bool:
        heap = self._heap
        if not heap:
            return True
        seq = heap[0] & SEQ_MASK
        r = self._ranges.get(seq >> _RANGE_BITS)
        if r is not None and seq in r:  # a live head (per fired timer: kept to this)
            return True
        return self._drop_dead(time, limit)

    def _take(self, seq: int) -> Ident:
        ident = self._forget(seq)
        del self._shards[hash(ident[1]) & 4095][ident]
        return ident

    def peek_timestamp(self) -> int | None:
        heap, alive = self._heap, self._alive
        while heap:
            priority = heap[0]
            if alive(priority & SEQ_MASK):
                return priority >> SEQ_BITS
            heapq.heappop(heap)  # a deleted timer
        return None

    def pop_due(self, time: int) -> Timer | None:
        heap, ranges = self._heap, self._ranges
        limit = (time << SEQ_BITS) | SEQ_MASK
        while heap:
            priority = heap[0]
            if priority > limit:  # even a dead head means nothing live is due
                return None
            heapq.heappop(heap)
            seq = priority & SEQ_MASK
            r = ranges.get(seq >> _RANGE_BITS)
            if r is None:
                continue  # a deleted timer
            ident = r.pop(seq, None)
            if ident is None:
                continue  # a deleted timer
            if not r:
                del ranges[seq >> _RANGE_BITS]
            self._count -= 1
            del self._shards[hash(ident[1]) & 4095][ident]
            if seq <= self.mark:
                self.dead.append(ident)
            return Timer(ident[0], ident[1], ident[2])
        return None

    def table(self) -> Any:
        return _ShardedTable(self)

    def by_seq(self) -> Any:
        return _SeqRanges(self._ranges)

    def newest_first(self) -> Iterator[tuple[int, Ident]]:
        return chain.from_iterable(map(reversed, map(dict.items, reversed(self._ranges.values()))))

    def newest_seq(self) -> int:
        ranges = self._ranges
        return next(reversed(ranges[next(reversed(ranges))])) if ranges else -1
