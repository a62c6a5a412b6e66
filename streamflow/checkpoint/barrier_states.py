"""The protocol states of :class:`streamflow.checkpoint.barrier_handler.BarrierHandler`.

A port of Flink's ``BarrierHandlerState`` family (apache/flink,
flink-streaming-java/.../streaming/runtime/io/checkpointing/):

* :class:`WaitingForFirstBarrier`: ``WaitingForFirstBarrier`` and
  ``AlternatingWaitingForFirstBarrier``;
* :class:`CollectingBarriers`: ``CollectingBarriers`` and ``AlternatingCollectingBarriers``
  (both with ``AbstractAlignedBarrierHandlerState`` /
  ``AbstractAlternatingAlignedBarrierHandlerState`` as :class:`_AlignedState`);
* :class:`WaitingForFirstBarrierUnaligned`: ``AlternatingWaitingForFirstBarrierUnaligned``;
* :class:`CollectingBarriersUnaligned`: ``AlternatingCollectingBarriersUnaligned``.

Each state is a tiny stateless object whose methods take a :class:`Controller`
(the handler's bookkeeping: which channels delivered the barrier, the deadline,
the list of actions being built) and return the next state. Flink needs two
aligned families (with and without the timeout) because its handler is built
for one mode; here the mode is decided per barrier by
:meth:`Controller.alignment_of`, so one family serves every mode: a barrier that
never times out simply makes :meth:`Controller.is_timed_out` false.

A mode switch is "transition, then replay the event", exactly as in Flink's
``AbstractAlternatingAlignedBarrierHandlerState.barrierReceived``::

    return self.alignment_timeout(ctl, barrier).barrier_received(ctl, channel, barrier)

The handler adds the channel to the delivered set *before* calling a state
(Flink's ``SingleCheckpointBarrierHandler.markCheckpointAlignedAndTransformState``),
so :meth:`Controller.all_barriers_received` already counts the current event.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from typing import Protocol

from streamflow.checkpoint.events import AlignmentType, CheckpointBarrier


class Phase(enum.Enum):
    """Which protocol state the handler is in (one value per state class)."""

    WAITING_FOR_FIRST_BARRIER = "waiting_for_first_barrier"
    COLLECTING_BARRIERS = "collecting_barriers"
    WAITING_FOR_FIRST_BARRIER_UNALIGNED = "waiting_for_first_barrier_unaligned"
    COLLECTING_BARRIERS_UNALIGNED = "collecting_barriers_unaligned"


class Controller(Protocol):
    """What a state may ask of the handler; every effect becomes an action.

    Flink's ``BarrierHandlerState.Controller`` plus its ``ChannelState``.
    """

    @property
    def pending_barrier(self) -> CheckpointBarrier:
        """The first barrier of the pending checkpoint."""
        ...

    def alignment_of(self, barrier: CheckpointBarrier) -> AlignmentType:
        """How this handler treats ``barrier`` (ALIGNED, ALTERNATING = timeoutable, UNALIGNED)."""
        ...

    def all_barriers_received(self) -> bool: ...

    def is_timed_out(self) -> bool:
        """The pending checkpoint has a deadline and the clock has reached it."""
        ...

    def pause(self, channel: int) -> None: ...

    def resume_all(self) -> None:
        """Resume every paused channel (no action if none is paused)."""
        ...

    def snapshot_aligned(self, barrier: CheckpointBarrier) -> None: ...

    def snapshot_unaligned(self, barrier: CheckpointBarrier) -> None:
        """Snapshot now with ``barrier`` as unaligned; persist the channels still to deliver."""
        ...

    def stop_persisting(self, channel: int) -> None:
        """``channel`` delivered (or ended): its channel state is complete, if it had any."""
        ...

    def start_alignment_timer(self) -> None:
        """Ask the driver for a timer call at the deadline, if the checkpoint has one."""
        ...


class BarrierHandlerState(ABC):
    """One protocol state; every method returns the next state."""

    phase: Phase

    @abstractmethod
    def barrier_received(
        self, ctl: Controller, channel: int, barrier: CheckpointBarrier
    ) -> BarrierHandlerState: ...

    @abstractmethod
    def end_of_input_received(self, ctl: Controller, channel: int) -> BarrierHandlerState:
        """Only called while a checkpoint is pending (Flink ``processEndOfPartition``)."""

    @abstractmethod
    def alignment_timeout(self, ctl: Controller, barrier: CheckpointBarrier) -> BarrierHandlerState:
        """Switch the pending checkpoint to unaligned (a no-op once unaligned)."""

    def abort(self, ctl: Controller) -> BarrierHandlerState:
        """The pending checkpoint is aborted: resume everything, wait for the next one."""
        return self._finish(ctl)

    @staticmethod
    def _finish(ctl: Controller) -> BarrierHandlerState:
        """Completed or aborted: resume all paused channels (Flink ``finishCheckpoint``)."""
        ctl.resume_all()
        return WAITING_FOR_FIRST_BARRIER

    def __repr__(self) -> str:
        return type(self).__name__


class _AlignedState(BarrierHandlerState):
    """Port of ``AbstractAlternatingAlignedBarrierHandlerState`` (and the plain aligned one)."""

    def barrier_received(
        self, ctl: Controller, channel: int, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        if ctl.alignment_of(barrier) is AlignmentType.UNALIGNED:
            # announced unaligned (upstream timed out, or unaligned from the start)
            return self.alignment_timeout(ctl, barrier).barrier_received(ctl, channel, barrier)
        if ctl.all_barriers_received():
            ctl.snapshot_aligned(barrier)
            return self._finish(ctl)
        if ctl.is_timed_out():
            # passive timeout: checked on every barrier, not only when the timer fires
            unaligned = barrier.as_unaligned()
            return self.alignment_timeout(ctl, unaligned).barrier_received(ctl, channel, unaligned)
        ctl.pause(channel)
        return self._after_barrier_received(ctl)

    @abstractmethod
    def _after_barrier_received(self, ctl: Controller) -> BarrierHandlerState: ...


class WaitingForFirstBarrier(_AlignedState):
    """No checkpoint pending.

    Flink ``WaitingForFirstBarrier`` / ``AlternatingWaitingForFirstBarrier``.
    """

    phase = Phase.WAITING_FOR_FIRST_BARRIER

    def _after_barrier_received(self, ctl: Controller) -> BarrierHandlerState:
        ctl.start_alignment_timer()
        return COLLECTING_BARRIERS

    def end_of_input_received(self, ctl: Controller, channel: int) -> BarrierHandlerState:
        return self  # nothing pending

    def alignment_timeout(self, ctl: Controller, barrier: CheckpointBarrier) -> BarrierHandlerState:
        return WAITING_FOR_FIRST_BARRIER_UNALIGNED


class CollectingBarriers(_AlignedState):
    """Aligning: some channels delivered the barrier and are paused.

    Flink ``CollectingBarriers`` / ``AlternatingCollectingBarriers``.
    """

    phase = Phase.COLLECTING_BARRIERS

    def _after_barrier_received(self, ctl: Controller) -> BarrierHandlerState:
        return self

    def end_of_input_received(self, ctl: Controller, channel: int) -> BarrierHandlerState:
        # an ended channel counts as delivered; it may complete the alignment
        if ctl.all_barriers_received():
            ctl.snapshot_aligned(ctl.pending_barrier)
            return self._finish(ctl)
        if ctl.is_timed_out():
            return self.alignment_timeout(ctl, ctl.pending_barrier).end_of_input_received(ctl, channel)
        return self

    def alignment_timeout(self, ctl: Controller, barrier: CheckpointBarrier) -> BarrierHandlerState:
        ctl.snapshot_unaligned(barrier)
        # Deviation: Flink keeps the delivered channels blocked until the last barrier (its
        # credit-based network blocked them); their data is after the snapshot, so reading it
        # now is correct and is the point of switching.
        ctl.resume_all()
        return COLLECTING_BARRIERS_UNALIGNED


class WaitingForFirstBarrierUnaligned(BarrierHandlerState):
    """Transient: an unaligned first barrier is replayed here (Flink
    ``AlternatingWaitingForFirstBarrierUnaligned``)."""

    phase = Phase.WAITING_FOR_FIRST_BARRIER_UNALIGNED

    def barrier_received(
        self, ctl: Controller, channel: int, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        ctl.snapshot_unaligned(barrier)
        if ctl.all_barriers_received():
            return self._finish(ctl)
        return COLLECTING_BARRIERS_UNALIGNED

    def end_of_input_received(self, ctl: Controller, channel: int) -> BarrierHandlerState:
        return self

    def alignment_timeout(self, ctl: Controller, barrier: CheckpointBarrier) -> BarrierHandlerState:
        return self  # already unaligned


class CollectingBarriersUnaligned(BarrierHandlerState):
    """Snapshot taken; persisting the channels still to deliver (Flink
    ``AlternatingCollectingBarriersUnaligned``)."""

    phase = Phase.COLLECTING_BARRIERS_UNALIGNED

    def barrier_received(
        self, ctl: Controller, channel: int, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        ctl.stop_persisting(channel)
        if ctl.all_barriers_received():
            return self._finish(ctl)
        return self

    def end_of_input_received(self, ctl: Controller, channel: int) -> BarrierHandlerState:
        # everything up to the end was persisted: that channel's state is complete
        return self.barrier_received(ctl, channel, ctl.pending_barrier)

    def alignment_timeout(self, ctl: Controller, barrier: CheckpointBarrier) -> BarrierHandlerState:
        return self  # already unaligned


WAITING_FOR_FIRST_BARRIER = WaitingForFirstBarrier()
COLLECTING_BARRIERS = CollectingBarriers()
WAITING_FOR_FIRST_BARRIER_UNALIGNED = WaitingForFirstBarrierUnaligned()
COLLECTING_BARRIERS_UNALIGNED = CollectingBarriersUnaligned()
