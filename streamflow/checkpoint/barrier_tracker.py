"""At-least-once barrier tracking for a task with N input channels: a sans-I/O class.

Theory of operation
-------------------
A port of Flink's ``CheckpointBarrierTracker`` (apache/flink,
flink-streaming-java/.../streaming/runtime/io/checkpointing/CheckpointBarrierTracker.java),
with checkpoints after tasks finished enabled (FLIP-147). The tracker never
blocks a channel: it only counts, per checkpoint, the channels that delivered
its barrier. Records behind an early barrier are processed before the snapshot,
so after a restore they may be replayed: at least once, never lost.

Unlike the exactly-once :class:`~streamflow.checkpoint.barrier_handler.BarrierHandler`
it tracks *several* pending checkpoints at once, oldest first, so that inputs
with different latencies do not make every checkpoint skip its predecessor
(Flink's ``testCompleteCheckpointsOnLateBarriers``: 2,3,4,5,7,8,9,10 complete):

* **Barrier n** on channel c: if n is pending, c is counted; once all the
  channels open at n's first barrier are counted, n and every older pending
  checkpoint leave the queue (the older ones are subsumed, silently, as in Flink)
  and n is triggered unless it was aborted. A first barrier of n starts tracking
  n only if n is newer than every id seen, at most ``MAX_CHECKPOINTS_TO_TRACK``
  (the oldest is forgotten). With one open channel a new id triggers at once.
* **Cancel marker** for n: every older pending checkpoint is aborted (once); a
  pending n is aborted once and still counts its channels until it can be
  forgotten; an unseen newer n is aborted and remembered as aborted.
* **End of input** on c: one channel fewer for checkpoints that start later;
  the newest pending checkpoint that now has all its channels (c counted) is
  triggered, older ones subsumed (``checkAlignmentOnEndOfPartitionIfEnabled``).

Triggering is ``SnapshotState(barrier, unaligned=False)`` then
``CheckpointDone(n)``; an abort is ``AbortCheckpoint(n, CANCELED_UPSTREAM)``
(Flink's ``CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER``). The alignment time is
measured from the first barrier of the newest pending checkpoint to its trigger.
Illegal calls raise :class:`ValueError` and change nothing.
"""

from __future__ import annotations

import logging
from collections import deque

from streamflow.checkpoint.barrier_handler import (
    AbortCheckpoint,
    AbortReason,
    Action,
    CheckpointDone,
    SnapshotState,
)
from streamflow.checkpoint.events import CancelCheckpointMarker, CheckpointBarrier
from streamflow.clock import Clock

log = logging.getLogger(__name__)

MAX_CHECKPOINTS_TO_TRACK = 50  # Flink's CheckpointBarrierTracker.MAX_CHECKPOINTS_TO_TRACK


class _Count:
    """Flink's ``CheckpointBarrierCount``: the channels that delivered (or ended) for one id."""

    __slots__ = ("aborted", "aligned", "barrier", "checkpoint_id", "target")

    def __init__(
        self, checkpoint_id: int, barrier: CheckpointBarrier | None, channel: int, target: int
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.barrier = barrier  # None for a checkpoint first seen through its cancel marker
        self.aligned = {channel}
        self.target = target
        self.aborted = False

    def mark_aligned(self, channel: int) -> int:
        self.aligned.add(channel)
        return len(self.aligned)

    def mark_aborted(self) -> bool:
        """True the first time only."""
        first, self.aborted = not self.aborted, True
        return first


class BarrierTracker:
    """At-least-once barrier tracking for ``num_channels`` input channels (see module doc).

    Same feeding interface as :class:`~streamflow.checkpoint.barrier_handler.BarrierHandler`.
    """

    def __init__(self, num_channels: int, clock: Clock) -> None:
        if num_channels < 1:
            raise ValueError(f"a barrier tracker needs at least one channel, got {num_channels}")
        self._num_channels = num_channels
        self._clock = clock
        self._open = num_channels
        self._ended: set[int] = set()
        self._pending: deque[_Count] = deque()
        self._latest_id = -1  # Flink's latestPendingCheckpointID
        self._alignment_started_ms: int | None = None
        self._last_alignment_duration_ms: int | None = None

    # -------------------------------------------------------------------- queries

    @property
    def pending_checkpoint_ids(self) -> list[int]:
        """Checkpoints with some but not all barriers in, oldest first (aborted ones too)."""
        return [c.checkpoint_id for c in self._pending]

    @property
    def pending_checkpoint_id(self) -> int | None:
        """The newest pending checkpoint, if any."""
        return self._pending[-1].checkpoint_id if self._pending else None

    @property
    def num_open_channels(self) -> int:
        return self._open

    @property
    def alignment_started_ms(self) -> int | None:
        return self._alignment_started_ms

    @property
    def last_alignment_duration_ms(self) -> int | None:
        return self._last_alignment_duration_ms

    def is_paused(self, channel: int) -> bool:
        self._check_channel(channel)
        return False  # never blocks

    # -------------------------------------------------------------------- feed

    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> list[Action]:
        self._check_open(channel)
        bid = barrier.checkpoint_id
        if bid > self._latest_id and self._open == 1:
            # fast path, only for a new id: an older pending one may wait for this channel
            self._alignment_started_ms = None
            self._last_alignment_duration_ms = 0
            return self._trigger(barrier)
        for pos, count in enumerate(self._pending):
            if count.checkpoint_id == bid:
                if count.mark_aligned(channel) == count.target:
                    return self._complete(pos, count)
                return []
        if bid > self._latest_id:
            self._alignment_started_ms = self._clock.now_ms()
            self._latest_id = bid
            self._pending.append(_Count(bid, barrier, channel, self._open))
            if len(self._pending) > MAX_CHECKPOINTS_TO_TRACK:
                dropped = self._pending.popleft()
                log.warning(
                    "tracking more than %d checkpoints: forgetting checkpoint %d",
                    MAX_CHECKPOINTS_TO_TRACK,
                    dropped.checkpoint_id,
                )
        return []  # else obsolete: no checkpoint can complete for it any more

    def on_cancel_marker(self, channel: int, marker: CancelCheckpointMarker) -> list[Action]:
        self._check_open(channel)
        cid = marker.checkpoint_id
        out: list[Action] = []
        if cid > self._latest_id and self._open == 1:
            self._alignment_started_ms = None
            return [AbortCheckpoint(cid, AbortReason.CANCELED_UPSTREAM)]
        pending = self._pending
        while pending and pending[0].checkpoint_id < cid:
            older = pending.popleft()
            if older.mark_aborted():
                out.append(AbortCheckpoint(older.checkpoint_id, AbortReason.CANCELED_UPSTREAM))
        if pending and pending[0].checkpoint_id == cid:
            count = pending[0]
            if count.mark_aborted():
                out.append(AbortCheckpoint(cid, AbortReason.CANCELED_UPSTREAM))
            # still counted, so that the entry can go once every channel has spoken
            if count.mark_aligned(channel) == count.target:
                pending.popleft()
        elif cid > self._latest_id:
            out.append(AbortCheckpoint(cid, AbortReason.CANCELED_UPSTREAM))
            self._latest_id = cid
            marker_count = _Count(cid, None, channel, self._open)
            marker_count.aborted = True
            pending.appendleft(marker_count)  # every older one was removed above
        # else a trailing cancel marker of a checkpoint already given up
        return out

    def on_end_of_input(self, channel: int) -> list[Action]:
        self._check_open(channel)
        self._ended.add(channel)
        self._open -= 1
        # the newest pending checkpoint that waited only for this channel
        for pos in range(len(self._pending) - 1, -1, -1):
            count = self._pending[pos]
            if count.mark_aligned(channel) == count.target:
                return self._complete(pos, count)
        return []

    def on_alignment_timer(self) -> list[Action]:
        """No alignment, no timeout: nothing to do (the interface of BarrierHandler)."""
        return []

    # -------------------------------------------------------------------- internals

    def _complete(self, pos: int, count: _Count) -> list[Action]:
        """``count`` has all its channels: forget it and every older one, trigger it."""
        for _ in range(pos + 1):
            self._pending.popleft()
        if count.aborted:
            return []
        assert count.barrier is not None  # only aborted entries have no barrier
        if count.checkpoint_id == self._latest_id and self._alignment_started_ms is not None:
            # one alignment time at once: the newest checkpoint's (Flink's markAlignmentEnd)
            self._last_alignment_duration_ms = self._clock.now_ms() - self._alignment_started_ms
            self._alignment_started_ms = None
        return self._trigger(count.barrier)

    @staticmethod
    def _trigger(barrier: CheckpointBarrier) -> list[Action]:
        return [SnapshotState(barrier, unaligned=False), CheckpointDone(barrier.checkpoint_id)]

    def _check_channel(self, channel: int) -> None:
        if not isinstance(channel, int) or not 0 <= channel < self._num_channels:
            raise ValueError(f"channel {channel!r} out of range 0..{self._num_channels - 1}")

    def _check_open(self, channel: int) -> None:
        self._check_channel(channel)
        if channel in self._ended:
            raise ValueError(f"channel {channel} already ended: nothing may follow end of input")
