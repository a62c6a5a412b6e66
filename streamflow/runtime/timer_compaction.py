"""A timer queue's heap compacted a little at a time (``timer_queues.py``).

Theory of operation
-------------------
A deleted timer stays in the heap until it reaches the head (lazy deletion), so a job that
deletes and re-registers timers grows the heap by one entry per deletion. When the heap holds
more than twice the live timers (and more than ``COMPACT_MIN``), the queue used to rebuild it
in one step, a pass over every entry and a ``heapify``: at a million timers 0.4-0.5 s of CPU
in one removal, seconds of wall time on a loaded machine (``bench/timer_hold.py``). Now it
*starts* a compaction: the heap becomes the *old* heap (nothing is pushed to it any more), a
new, empty heap takes the pushes, and the queue's class becomes the compacting variant of its
layout (:class:`_CompactingFlat`, :class:`_CompactingSharded`; same ``__slots__``, swapped in
place as the layouts are). While it compacts, every removal, pop and peek first moves
:data:`MIGRATE` entries from the end of the old heap's array (cutting off the end of a heap's
array leaves a heap) to the new heap, live ones only, and reads take the smaller live head of
the two heaps; once the old heap is empty, the next registration or removal makes the queue's
class its layout's again (not a read: a caller may hold a bound ``pop_due`` in a loop, and a
bound method of one class must not run on an object of the other). A removal leaves one dead
entry and moves up to ``MIGRATE``, so the old heap (about twice the live timers when it
started) is gone after ``2 / MIGRATE`` of the live timers' worth of operations, long before
the new heap can reach the threshold again: the heaps together hold about twice the live
timers plus what was registered meanwhile, and no step does more than ``MIGRATE`` pushes. A
queue that is not compacting runs the same code as before (no check on its pops and peeks).
A watermark that passes a long run of deleted timers pops them all in one ``pop_due`` (a
million at the end of ``bench/timer_hold.py``'s input: 0.6-0.9 s of CPU); the operators that
fire timers call :meth:`~TimerQueue.drop_dead` first, which skips them :data:`DEAD_SLICE` at a
time so the operator can pause through the job's loop budget between two slices (here: the
dead heads of both heaps, whatever their time, as ``pop_due`` pops them).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable

from .timer_queues import SEQ_BITS, SEQ_MASK, ShardedTimerQueue, Timer, TimerQueue

__all__ = ["COMPACTING", "MIGRATE"]

MIGRATE = 16
"""Old-heap entries an operation moves while the queue compacts (see the module doc)."""


class _Compacting(TimerQueue):
    """A queue while it compacts (the module doc): every operation moves old-heap entries,
    reads take the smaller head of the two heaps. Only ever a base of the two classes below."""

    __slots__ = ()
    _settled: type[TimerQueue] = TimerQueue  # the layout's own class, once the old heap is empty

    def add(self, timestamp: int, key: Hashable, namespace: Hashable) -> bool:
        settled = self._settled
        if not self._old:  # the compaction is over: the layout's own class again
            self.__class__ = settled  # type: ignore[assignment]
        return settled.add(self, timestamp, key, namespace)

    def remove(self, timestamp: int, key: Hashable, namespace: Hashable) -> bool:
        settled = self._settled
        removed = settled.remove(self, timestamp, key, namespace)
        if removed:
            self._move()
        if not self._old:  # the compaction is over: the layout's own class again
            self.__class__ = settled  # type: ignore[assignment]
        return removed

    def _compact(self) -> None:
        pass  # compacting already: the new heap's own turn comes once the old one is empty

    def _move(self) -> None:
        """Move the last ``MIGRATE`` entries of the old heap to the heap, live ones only."""
        old, heap, alive = self._old, self._heap, self._alive
        for priority in old[-MIGRATE:]:
            if alive(priority & SEQ_MASK):
                heapq.heappush(heap, priority)
        del old[-MIGRATE:]

    def _head(self, heap: list[int]) -> int | None:
        """The heap's first live priority, its dead head entries popped on the way."""
        alive = self._alive
        while heap:
            priority = heap[0]
            if alive(priority & SEQ_MASK):
                return priority
            heapq.heappop(heap)
        return None

    def drop_dead(self, time: int, limit: int) -> bool:
        # pop_due's _head pops the dead heads of both heaps whatever their time: so here too
        alive = self._alive
        for heap in (self._heap, self._old):
            while heap and not alive(heap[0] & SEQ_MASK):
                if limit <= 0:
                    return False
                heapq.heappop(heap)
                limit -= 1
        return True

    def peek_timestamp(self) -> int | None:
        self._move()  # reads move entries too: a queue that only fires timers ends its compaction
        if not self._old:  # (the class stays until the next registration or removal: a caller
            return self._settled.peek_timestamp(self)  # may hold this bound method in a loop)
        heads = [p for p in (self._head(self._heap), self._head(self._old)) if p is not None]
        return min(heads) >> SEQ_BITS if heads else None

    def pop_due(self, time: int) -> Timer | None:
        self._move()
        if not self._old:
            return self._settled.pop_due(self, time)
        new, old = self._head(self._heap), self._head(self._old)
        if old is not None and (new is None or old < new):
            heap, priority = self._old, old
        elif new is not None:
            heap, priority = self._heap, new
        else:
            return None
        if priority > (time << SEQ_BITS) | SEQ_MASK:
            return None
        heapq.heappop(heap)
        seq = priority & SEQ_MASK
        ident = self._take(seq)
        if seq <= self.mark:
            self.dead.append(ident)
        return Timer(ident[0], ident[1], ident[2])


class _CompactingFlat(_Compacting):
    """A flat queue while it compacts."""

    __slots__ = ()


class _CompactingSharded(_Compacting, ShardedTimerQueue):
    """A sharded queue while it compacts."""

    __slots__ = ()
    _settled = ShardedTimerQueue


COMPACTING: dict[type[TimerQueue], type[TimerQueue]] = {
    TimerQueue: _CompactingFlat,
    ShardedTimerQueue: _CompactingSharded,
}
