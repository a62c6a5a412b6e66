"""Per-operator event-time and processing-time timers.

Theory of operation
-------------------
A timer is ``(timestamp, key, namespace)``: "call me back for this key (and
this namespace, e.g. a window) once time reaches ``timestamp``". An operator
owns one :class:`TimerService` holding two independent queues, one per time
domain, with Flink's rules (``flink-streaming-java/.../streaming/api/
operators/InternalTimerServiceImpl.java`` over ``HeapPriorityQueueSet``):

* **Set semantics.** Registering a timer that is already registered is a
  no-op, so a trigger may re-register its window's end on every element.
  Deleting a timer that is not registered is a no-op.
* **Order.** Timers fire in timestamp order; equal timestamps fire in
  registration order (Flink leaves ties unspecified; FIFO keeps runs
  reproducible).
* **Event time.** A timer fires when the watermark reaches it: ``timestamp
  <= watermark``. The service's :attr:`~TimerService.current_watermark` is
  set *before* any timer fires, as in Flink's ``advanceWatermark``, and it
  never goes backwards (a regression raises ``ValueError``).
* **Firing while firing.** Handling a timer may register new timers. One
  due at or before the watermark being processed must fire within the same
  advance, in timestamp order. So the operator drains one timer at a time::

      while (timer := timers.pop_event_timer(watermark)) is not None:
          on_event_time(timer)          # may register / delete timers

  :meth:`~TimerService.advance_watermark` is the list-returning shortcut
  for callers that register nothing while handling (it returns what is due
  at the call); after handling its list, such a caller drains any newly
  due timers with the loop above.
* **Processing time** works the same with the caller's clock:
  ``pop_processing_timer(now)`` in a loop; :meth:`~TimerService.
  next_processing_time` tells the task when to wake up next.

Implementation: per domain a binary heap of int priorities (``timestamp``
and a registration ``seq`` packed into one int, cheap to compare), a dict
``(timestamp, key, namespace) -> seq`` of the live timers and its inverse
``seq -> (timestamp, key, namespace)``. Registration is one dict lookup plus
one heap push; deletion only drops the dict entries (lazy deletion); popping
skips heap entries whose ``seq`` is no longer live, so a timer deleted and
registered again fires once, in its new FIFO position. When dead entries
outnumber live ones the heap is compacted, a little at every operation
(``timer_compaction.py``); a run of dead entries in front of the live ones
is skipped in bounded steps by ``drop_dead_*_timers``, between which the
operator firing the timers may pause (its loop budget). Keys
and namespaces must be hashable; timestamps must be ``int``. The queues
(``timer_queues.py``) turn *sharded* in place once they hold 32,768 timers
(many small dicts instead of two large ones), so no registration resizes a
dict of a million entries in one call.

Snapshots are plain data: ``{"event_time": [(ts, key, ns), ...],
"processing_time": [...]}`` in firing order, or, for checkpoints
(``snapshot_columns``), three columns per non-empty domain in registration
order (no sort, no tuple per timer to encode). ``restore`` adds a snapshot's
timers (restoring several snapshots unions them, e.g. when rescaling, with
``key_filter`` keeping only this subtask's keys). As in Flink the watermark is
not part of the snapshot: it starts again from ``MIN_WATERMARK``.

Incremental checkpoints (heap backend, ``timer_checkpoints.py``) read the live
timers (``live``: a dict, or a read-only view of the shards) for a base and,
for a delta, what changed since a *mark* (``set_mark``): the timers registered
after it are the end of the ``seq``-ordered map, and a deletion or firing of a
timer registered at or before it is appended to the queue's ``dead`` list
(``changes``). Nothing else is logged.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from itertools import count
from typing import Any

from streamflow.runtime.events import MIN_WATERMARK
from streamflow.runtime.timer_queues import DEAD_SLICE, Timer, TimerQueue

__all__ = ["Timer", "TimerService", "TimerSnapshot"]

TimerSnapshot = dict[str, list[tuple[int, Any, Any]]]
"""``{"event_time": [(ts, key, ns), ...], "processing_time": [...]}``."""

_EVENT = "event_time"
_PROCESSING = "processing_time"


class TimerService:
    """Event-time and processing-time timers of one operator (all keys)."""

    __slots__ = ("_event", "_processing", "_watermark")

    def __init__(self) -> None:
        seq = count().__next__  # shared, so FIFO order survives a snapshot round trip
        self._event = TimerQueue(seq)
        self._processing = TimerQueue(seq)
        self._watermark = MIN_WATERMARK

    # ---------------------------------------------------------------- registration

    def register_event_time_timer(self, key: Hashable, namespace: Hashable, ts: int) -> bool:
        """Fire ``(ts, key, namespace)`` once the watermark reaches ``ts``; False if set."""
        return self._event.add(ts, key, namespace)

    def delete_event_time_timer(self, key: Hashable, namespace: Hashable, ts: int) -> bool:
        """Forget the timer; False if it was not registered."""
        return self._event.remove(ts, key, namespace)

    def register_processing_time_timer(self, key: Hashable, namespace: Hashable, ts: int) -> bool:
        """Fire ``(ts, key, namespace)`` once processing time reaches ``ts``; False if set."""
        return self._processing.add(ts, key, namespace)

    def delete_processing_time_timer(self, key: Hashable, namespace: Hashable, ts: int) -> bool:
        """Forget the timer; False if it was not registered."""
        return self._processing.remove(ts, key, namespace)

    def has_event_time_timer(self, key: Hashable, namespace: Hashable, ts: int) -> bool:
        return (ts, key, namespace) in self._event

    def has_processing_time_timer(self, key: Hashable, namespace: Hashable, ts: int) -> bool:
        return (ts, key, namespace) in self._processing

    # ---------------------------------------------------------------- event time

    @property
    def current_watermark(self) -> int:
        """The last watermark given to ``advance_watermark`` / ``pop_event_timer``."""
        return self._watermark

    def _set_watermark(self, watermark: int) -> None:
        if watermark < self._watermark:
            raise ValueError(f"watermark went backwards: {watermark} < current {self._watermark}")
        self._watermark = watermark

    def pop_event_timer(self, watermark: int) -> Timer | None:
        """Advance the watermark to ``watermark`` and pop the next timer due (``ts <= watermark``).

        Returns None when no timer is due. Call in a loop; timers registered
        meanwhile are seen by the next call.
        """
        if watermark != self._watermark:
            self._set_watermark(watermark)
        return self._event.pop_due(watermark)

    def drop_dead_event_timers(self, watermark: int, limit: int = DEAD_SLICE) -> bool:
        """Skip at most ``limit`` deleted event-time timers that ``pop_event_timer(watermark)``
        would skip; False when more are left (``TimerQueue.drop_dead``). An operator that fires
        timers calls it before each pop and pauses through its loop budget while it is False,
        so a long run of deleted timers in front of the live ones is skipped in slices."""
        return self._event.drop_dead(watermark, limit)

    def advance_watermark(self, watermark: int) -> list[Timer]:
        """Advance the watermark and pop every timer due now, in firing order.

        Timers registered while the caller handles the returned ones are not
        in the list; drain them with :meth:`pop_event_timer`.
        """
        self._set_watermark(watermark)
        fired: list[Timer] = []
        pop = self._event.pop_due
        while (timer := pop(watermark)) is not None:
            fired.append(timer)
        return fired

    def next_event_time(self) -> int | None:
        """Timestamp of the earliest event-time timer, or None."""
        return self._event.peek_timestamp()

    # ---------------------------------------------------------------- processing time

    def pop_processing_timer(self, now: int) -> Timer | None:
        """Pop the next processing-time timer with ``ts <= now``, or None. Call in a loop."""
        return self._processing.pop_due(now)

    def drop_dead_processing_timers(self, now: int, limit: int = DEAD_SLICE) -> bool:
        """:meth:`drop_dead_event_timers` for processing time."""
        return self._processing.drop_dead(now, limit)

    def advance_processing_time(self, now: int) -> list[Timer]:
        """Pop every processing-time timer due at ``now``, in firing order."""
        fired: list[Timer] = []
        pop = self._processing.pop_due
        while (timer := pop(now)) is not None:
            fired.append(timer)
        return fired

    def next_processing_time(self) -> int | None:
        """Timestamp of the earliest processing-time timer (when to wake up), or None."""
        return self._processing.peek_timestamp()

    # ---------------------------------------------------------------- introspection

    @property
    def num_event_time_timers(self) -> int:
        return len(self._event)

    @property
    def num_processing_time_timers(self) -> int:
        return len(self._processing)

    @property
    def num_timers(self) -> int:
        """Registered timers of both domains."""
        return len(self._event) + len(self._processing)

    # ---------------------------------------------------------------- snapshot / restore

    def snapshot(self) -> TimerSnapshot:
        """All registered timers as plain data, each list in firing order."""
        return {_EVENT: self._event.entries(), _PROCESSING: self._processing.entries()}

    def snapshot_columns(self) -> dict[str, tuple[list[int], list[Any], list[Any]]]:
        """The registered timers of each non-empty domain as columns (``TimerQueue.columns``):
        what a checkpoint stores, a few lists instead of a tuple per timer."""
        out = {}
        for name, queue in ((_EVENT, self._event), (_PROCESSING, self._processing)):
            if len(queue):
                out[name] = queue.columns()
        return out

    # ---------------------------------------------------------------- incremental checkpoints

    def live(self) -> dict[str, Any]:
        """Per domain, the live timers (``(ts, key, namespace) -> seq``: ``len``, iteration,
        ``values()``, in registration order):
        what a base of an incremental checkpoint writes (``timer_checkpoints.py``). Read only."""
        return {_EVENT: self._event.table(), _PROCESSING: self._processing.table()}

    def changes(
        self, domain: str
    ) -> tuple[list[tuple[int, Any, Any]], Iterator[tuple[int, tuple[int, Any, Any]]]]:
        """Since :meth:`set_mark`: the timers of ``domain`` deleted or fired that were live at
        the mark, in order, and the live timers as ``(seq, timer)``, newest first (those
        registered after the mark come first: read until a seq at or below it). Read only."""
        queue = self._event if domain == _EVENT else self._processing
        return queue.dead, queue.newest_first()

    def set_mark(self, tracked: bool = True) -> int:
        """Start logging changes anew from now (``tracked``; else stop logging); returns the mark."""
        mark = -1
        if tracked:
            mark = max(self._event.newest_seq(), self._processing.newest_seq())
        for queue in (self._event, self._processing):
            queue.mark, queue.dead = mark, []
        return mark

    def restore(
        self,
        data: Mapping[str, Iterable[tuple[int, Any, Any]]],
        key_filter: Callable[[Any], bool] | None = None,
    ) -> None:
        """Register the timers of a :meth:`snapshot` (only keys passing ``key_filter``)."""
        for name, queue in ((_EVENT, self._event), (_PROCESSING, self._processing)):
            for ts, key, namespace in data.get(name, ()):
                if key_filter is None or key_filter(key):
                    queue.add(ts, key, namespace)
