"""Checkpoint barrier handling for a task with N input channels: a sans-I/O state machine.

Theory of operation
-------------------
A task reads its input channels; between records it meets control events. For
checkpointing three of them matter: barrier n, a cancel marker for n, and end of
input. The task's driver feeds each one to a :class:`BarrierHandler` and gets
back a list of *actions* (frozen dataclasses below) to carry out in order. The
handler does no I/O and reads time only from a :class:`~streamflow.clock.Clock`;
an illegal call raises :class:`ValueError` and leaves the state unchanged.

One checkpoint is tracked at a time (Flink's ``SingleCheckpointBarrierHandler``,
apache/flink flink-streaming-java/.../streaming/runtime/io/checkpointing/); the
protocol states are in :mod:`streamflow.checkpoint.barrier_states`.

Rules (from ``SingleCheckpointBarrierHandler.java`` unless noted):

* **Ids.** A barrier older than the current id, or for the current id once it
  completed or was aborted, is ignored; so is a second barrier n on a channel
  that delivered n (Flink keeps a *set* of aligned channels). A newer barrier m
  while n is pending aborts n (``SUBSUMED``) and starts m.
* **Cancel markers** (``processCancellationBarrier``): for the pending id, abort
  it (``CANCELED_UPSTREAM``); for an older or finished id, ignore; for a newer
  id m, abort m only (``abortInternal`` declines m alone and moves the current id
  to m, so m's barriers are ignored): a pending older checkpoint is dropped with
  its alignment, not declined (``AlignedCheckpointsTest.testMissingCancellationBarriers``).
* **End of input** (``processEndOfPartition``, checkpoints after tasks finish):
  the channel counts as delivered and may complete the pending checkpoint; a
  checkpoint waits only for the channels open when its first barrier arrived.
* **Aligned** (``AbstractAlignedBarrierHandlerState``): barrier n on channel i
  pauses i; the last one snapshots, forwards n, resumes all.
* **Unaligned** (``AlternatingWaitingForFirstBarrierUnaligned``,
  ``AlternatingCollectingBarriersUnaligned``): the first barrier snapshots at
  once and persists the channels still to deliver n; each later barrier stops
  its channel; the last completes. With one channel every mode completes at once.
* **Per barrier**, as Flink reads its ``CheckpointOptions`` (not the handler's
  config; sources stamp barriers with :func:`barrier_alignment`, a port of
  ``CheckpointOptions.forConfig``): a savepoint, or a barrier stamped ``ALIGNED``
  (Flink's ``FORCED_ALIGNED``), is aligned and never times out in any mode. One
  stamped ``UNALIGNED`` (from the start, or forwarded by an upstream task that
  timed out) makes the pending checkpoint unaligned at once, even mid-alignment;
  an ``ALIGNED``-mode handler rejects it (Flink's ``checkState``). One stamped
  ``ALTERNATING`` is aligned in ALIGNED mode, unaligned in UNALIGNED mode (and
  with timeout 0), aligned with a deadline in ALTERNATING mode.
* **Alternating** (``AbstractAlternatingAlignedBarrierHandlerState``,
  ``AlternatingCollectingBarriers``): an alignment with a deadline switches to
  unaligned when :meth:`BarrierHandler.on_alignment_timer` finds the deadline
  reached (stale or early calls are ignored) or when a barrier or end of input
  arrives after it (Flink's passive timeout): snapshot with the barrier marked
  unaligned, persist the channels still to deliver, resume the paused ones.

Time: deadline = start + ``aligned_timeout_ms``. A barrier or end of input finds the
alignment timed out only when it took strictly longer, ``now > deadline`` (Flink's
``isTimedOut``: ``alignedCheckpointTimeout < now - start``); the timer call switches
once ``now >= deadline`` (Flink's timer fires after exactly the remaining delay).
Start is the first barrier's arrival here (``TimeoutBase.ALIGNMENT_START``, the default)
or ``barrier.timestamp``, the checkpoint's start
(``TimeoutBase.CHECKPOINT_START``, Flink's ``BarrierAlignmentUtil.getTimerDelay``).

Deviations from Flink: no announcements or priority events (the output-side
overtaking is the driver's job on :class:`SnapshotState`, FIFO among barriers:
``Channel.put_priority``); paused channels resume at the switch to unaligned.
At-least-once mode uses :class:`~streamflow.checkpoint.barrier_tracker.BarrierTracker`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from streamflow.checkpoint.barrier_states import (
    COLLECTING_BARRIERS,
    WAITING_FOR_FIRST_BARRIER,
    BarrierHandlerState,
    Phase,
)
from streamflow.checkpoint.events import (
    AlignmentType,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointType,
)
from streamflow.clock import Clock


class CheckpointMode(enum.Enum):
    ALIGNED = "aligned"
    UNALIGNED = "unaligned"
    ALTERNATING = "alternating"


class TimeoutBase(enum.Enum):
    """Where the aligned-checkpoint timeout is measured from."""

    ALIGNMENT_START = "alignment_start"  # first barrier of n at this task
    CHECKPOINT_START = "checkpoint_start"  # barrier.timestamp (Flink)


class AbortReason(enum.Enum):
    SUBSUMED = "subsumed"  # a newer checkpoint started (Flink CHECKPOINT_DECLINED_SUBSUMED)
    CANCELED_UPSTREAM = "canceled_upstream"  # a cancel marker (..._ON_CANCELLATION_BARRIER)


@dataclass(frozen=True, slots=True)
class PauseChannel:
    """Stop reading ``channel`` (it delivered the barrier of an aligned checkpoint)."""

    channel: int


@dataclass(frozen=True, slots=True)
class ResumeChannels:
    """Resume reading every paused channel."""


@dataclass(frozen=True, slots=True)
class SnapshotState:
    """Snapshot operator state, then forward ``barrier`` downstream. ``unaligned``: the barrier
    overtakes the queued output, which the driver captures as channel state."""

    barrier: CheckpointBarrier
    unaligned: bool


@dataclass(frozen=True, slots=True)
class PersistInput:
    """Unaligned: from now on, records read from ``channels`` before their barrier
    ``checkpoint_id`` are channel state of that checkpoint (and are processed as usual)."""

    checkpoint_id: int
    channels: frozenset[int]


@dataclass(frozen=True, slots=True)
class StopPersisting:
    """``channel`` delivered barrier ``checkpoint_id`` (or ended): its channel state is complete."""

    checkpoint_id: int
    channel: int


@dataclass(frozen=True, slots=True)
class CheckpointDone:
    """All barriers n are in: acknowledge (unaligned: channel state complete)."""

    checkpoint_id: int


@dataclass(frozen=True, slots=True)
class AbortCheckpoint:
    """Give up ``checkpoint_id``: decline it, discard any partial snapshot or channel
    state (all persisting for it stops), forward a cancel marker downstream."""

    checkpoint_id: int
    reason: AbortReason


@dataclass(frozen=True, slots=True)
class StartAlignmentTimer:
    """Call :meth:`BarrierHandler.on_alignment_timer` once the clock reaches ``deadline_ms``.
    Never cancelled: a call that has become stale is ignored."""

    checkpoint_id: int
    deadline_ms: int


Action = (
    PauseChannel
    | ResumeChannels
    | SnapshotState
    | PersistInput
    | StopPersisting
    | CheckpointDone
    | AbortCheckpoint
    | StartAlignmentTimer
)


def barrier_alignment(
    checkpoint_type: CheckpointType, *, unaligned: bool, aligned_timeout_ms: int | None
) -> AlignmentType:
    """The alignment a source stamps on barrier n (port of ``CheckpointOptions.forConfig``)."""
    if checkpoint_type is CheckpointType.SAVEPOINT or not unaligned:
        return AlignmentType.ALIGNED
    if not aligned_timeout_ms:  # None or 0
        return AlignmentType.UNALIGNED
    return AlignmentType.ALTERNATING


class _Bookkeeping:
    """Per-checkpoint channel sets and the actions being built; the states' :class:`Controller`."""

    def __init__(self, handler: BarrierHandler) -> None:
        self._handler = handler
        self.out: list[Action] = []
        self.paused: set[int] = set()
        self.reset()

    def reset(
        self,
        barrier: CheckpointBarrier | None = None,
        target: frozenset[int] = frozenset(),
        deadline_ms: int | None = None,
    ) -> None:
        """Track ``barrier``'s checkpoint over the ``target`` channels, or nothing."""
        self.barrier, self.target, self.deadline_ms = barrier, target, deadline_ms
        self.delivered: set[int] = set()  # delivered the barrier, or ended, since the start
        self.persisting: set[int] = set()

    # -- Controller
    @property
    def pending_barrier(self) -> CheckpointBarrier:
        assert self.barrier is not None
        return self.barrier

    def alignment_of(self, barrier: CheckpointBarrier) -> AlignmentType:
        return self._handler._alignment_of(barrier)

    def all_barriers_received(self) -> bool:
        return self.target <= self.delivered

    def is_timed_out(self) -> bool:
        # strictly longer than the timeout (Flink's ``ControllerImpl.isTimedOut``:
        # ``alignedCheckpointTimeout < now - start``)
        return self.deadline_ms is not None and self._handler._clock.now_ms() > self.deadline_ms

    def timer_due(self) -> bool:
        """The alignment timer's deadline is reached (Flink's timer fires after exactly the
        remaining delay and switches without re-checking)."""
        return self.deadline_ms is not None and self._handler._clock.now_ms() >= self.deadline_ms

    def pause(self, channel: int) -> None:
        if channel not in self.paused:
            self.paused.add(channel)
            self.out.append(PauseChannel(channel))

    def resume_all(self) -> None:
        if self.paused:
            self.paused.clear()
            self.out.append(ResumeChannels())

    def snapshot_aligned(self, barrier: CheckpointBarrier) -> None:
        self.out.append(SnapshotState(barrier, unaligned=False))

    def snapshot_unaligned(self, barrier: CheckpointBarrier) -> None:
        self.out.append(SnapshotState(barrier.as_unaligned(), unaligned=True))
        remaining = self.target - self.delivered
        if remaining:
            self.persisting = set(remaining)
            self.out.append(PersistInput(self.pending_barrier.checkpoint_id, frozenset(remaining)))

    def stop_persisting(self, channel: int) -> None:
        if channel in self.persisting:
            self.persisting.discard(channel)
            self.out.append(StopPersisting(self.pending_barrier.checkpoint_id, channel))

    def start_alignment_timer(self) -> None:
        if self.deadline_ms is not None:
            self.out.append(StartAlignmentTimer(self.pending_barrier.checkpoint_id, self.deadline_ms))

    def take(self) -> list[Action]:
        out, self.out = self.out, []
        return out


class BarrierHandler:
    """Barrier alignment for one task with ``num_channels`` input channels.

    ``unaligned=False``: ALIGNED. ``unaligned=True`` without ``aligned_timeout_ms``:
    UNALIGNED. With it: ALTERNATING (0 means unaligned at once). See the module
    docstring for the rules and how each barrier's ``alignment`` field is read.
    """

    def __init__(
        self,
        num_channels: int,
        clock: Clock,
        *,
        unaligned: bool = False,
        aligned_timeout_ms: int | None = None,
        timeout_base: TimeoutBase = TimeoutBase.ALIGNMENT_START,
    ) -> None:
        if num_channels < 1:
            raise ValueError(f"a barrier handler needs at least one channel, got {num_channels}")
        if aligned_timeout_ms is not None:
            if not unaligned:
                raise ValueError("aligned_timeout_ms needs unaligned=True")
            if aligned_timeout_ms < 0:
                raise ValueError(f"aligned_timeout_ms must be >= 0, got {aligned_timeout_ms}")
        self._num_channels = num_channels
        self._clock = clock
        self._timeout_base = timeout_base
        if not unaligned:
            self._mode, self._timeout_ms = CheckpointMode.ALIGNED, None
        elif aligned_timeout_ms is None:
            self._mode, self._timeout_ms = CheckpointMode.UNALIGNED, 0
        else:
            self._mode, self._timeout_ms = CheckpointMode.ALTERNATING, aligned_timeout_ms
        self._state: BarrierHandlerState = WAITING_FOR_FIRST_BARRIER
        self._book = _Bookkeeping(self)
        self._current_id = -1  # the newest id seen (started, completed or aborted)
        self._last_closed_id = -1  # the newest id completed or aborted
        self._ended: set[int] = set()
        self._alignment_started_ms: int | None = None
        self._last_alignment_duration_ms: int | None = None

    # -------------------------------------------------------------------- queries

    @property
    def mode(self) -> CheckpointMode:
        return self._mode

    @property
    def phase(self) -> Phase:
        return self._state.phase

    @property
    def current_checkpoint_id(self) -> int | None:
        """The newest checkpoint id seen (pending, completed or aborted); None before any."""
        return None if self._current_id < 0 else self._current_id

    @property
    def pending_checkpoint_id(self) -> int | None:
        """The checkpoint being aligned or collected, if any."""
        return self._current_id if self._pending else None

    @property
    def alignment_started_ms(self) -> int | None:
        """Clock time of the pending checkpoint's first barrier at this task."""
        return self._alignment_started_ms

    @property
    def last_alignment_duration_ms(self) -> int | None:
        """First to last barrier of the last completed checkpoint (0 with one channel)."""
        return self._last_alignment_duration_ms

    def is_paused(self, channel: int) -> bool:
        self._check_channel(channel)
        return channel in self._book.paused

    # -------------------------------------------------------------------- feed

    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> list[Action]:
        self._check_open(channel)
        self._alignment_of(barrier)  # validates before any change
        book, bid = self._book, barrier.checkpoint_id
        if bid < self._current_id or (bid == self._current_id and not self._pending):
            return []  # obsolete: older, or current but already completed/aborted
        if bid == self._current_id and channel in book.delivered:
            return []  # duplicate on the same channel
        if bid > self._current_id:
            if self._pending:
                self._abort(self._current_id, AbortReason.SUBSUMED)
            self._start(barrier)
        book.delivered.add(channel)
        self._state = self._state.barrier_received(book, channel, barrier)
        self._complete_if_all_received()
        return book.take()

    def on_cancel_marker(self, channel: int, marker: CancelCheckpointMarker) -> list[Action]:
        self._check_open(channel)
        cid = marker.checkpoint_id
        if cid > self._current_id or (cid == self._current_id and self._pending):
            # Flink's abortInternal: only ``cid`` is declined; a pending older checkpoint is
            # dropped with the alignment (its barriers are obsolete from now on)
            self._abort(cid, AbortReason.CANCELED_UPSTREAM)
        return self._book.take()

    def on_end_of_input(self, channel: int) -> list[Action]:
        self._check_open(channel)
        book = self._book
        self._ended.add(channel)
        book.paused.discard(channel)
        if not self._pending:
            return []
        book.delivered.add(channel)
        self._state = self._state.end_of_input_received(book, channel)
        self._complete_if_all_received()
        return book.take()

    def on_alignment_timer(self) -> list[Action]:
        """The deadline of a :class:`StartAlignmentTimer` passed. Re-checks the clock; a call
        for a finished checkpoint, an unaligned one, or before the deadline does nothing."""
        book = self._book
        if self._state is not COLLECTING_BARRIERS or not book.timer_due():
            return []
        self._state = self._state.alignment_timeout(book, book.pending_barrier)
        return book.take()

    # -------------------------------------------------------------------- internals

    @property
    def _pending(self) -> bool:
        return self._current_id >= 0 and self._current_id != self._last_closed_id

    def _check_channel(self, channel: int) -> None:
        if not isinstance(channel, int) or not 0 <= channel < self._num_channels:
            raise ValueError(f"channel {channel!r} out of range 0..{self._num_channels - 1}")

    def _check_open(self, channel: int) -> None:
        self._check_channel(channel)
        if channel in self._ended:
            raise ValueError(f"channel {channel} already ended: nothing may follow end of input")

    def _alignment_of(self, barrier: CheckpointBarrier) -> AlignmentType:
        """ALIGNED (never times out), ALTERNATING (aligned with a deadline) or UNALIGNED."""
        if barrier.is_savepoint:
            return AlignmentType.ALIGNED
        if barrier.alignment is AlignmentType.UNALIGNED:
            if self._mode is CheckpointMode.ALIGNED:
                raise ValueError(f"unaligned barrier {barrier.checkpoint_id} at a handler in aligned mode")
            return AlignmentType.UNALIGNED
        if barrier.alignment is AlignmentType.ALTERNATING and self._timeout_ms is not None:
            return AlignmentType.ALTERNATING if self._timeout_ms else AlignmentType.UNALIGNED
        return AlignmentType.ALIGNED

    def _deadline(self, barrier: CheckpointBarrier, now: int) -> int | None:
        if self._alignment_of(barrier) is not AlignmentType.ALTERNATING:
            return None
        assert self._timeout_ms is not None
        base = now if self._timeout_base is TimeoutBase.ALIGNMENT_START else barrier.timestamp
        return base + self._timeout_ms

    def _start(self, barrier: CheckpointBarrier) -> None:
        now = self._clock.now_ms()
        self._current_id = barrier.checkpoint_id
        open_channels = frozenset(range(self._num_channels)) - self._ended
        self._book.reset(barrier, open_channels, self._deadline(barrier, now))
        self._alignment_started_ms = now

    def _complete_if_all_received(self) -> None:
        book = self._book
        if not (self._pending and book.all_barriers_received()):
            return
        assert self._state.phase is Phase.WAITING_FOR_FIRST_BARRIER, self._state
        book.out.append(CheckpointDone(self._current_id))
        self._last_closed_id = self._current_id
        assert self._alignment_started_ms is not None
        self._last_alignment_duration_ms = self._clock.now_ms() - self._alignment_started_ms
        self._alignment_started_ms = None
        book.reset()

    def _abort(self, checkpoint_id: int, reason: AbortReason) -> None:
        book = self._book
        book.out.append(AbortCheckpoint(checkpoint_id, reason))
        self._state = self._state.abort(book)
        self._current_id = max(self._current_id, checkpoint_id)
        self._last_closed_id = max(self._last_closed_id, checkpoint_id)
        self._alignment_started_ms = None
        book.reset()
