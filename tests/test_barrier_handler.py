"""Scripted tests of BarrierHandler (aligned, unaligned, alternating).

Scenarios of Flink's AlignedCheckpointsTest, UnalignedCheckpointsTest and AlternatingCheckpointsTest
(flink-streaming-java/src/test/java/org/apache/flink/streaming/runtime/io/checkpointing/) are
ported as scripts, one row per Flink test method, the row id naming it (``<Class>.<method>``;
data buffers are left out, and streamflow runs with checkpoints after tasks finished, so an ended
channel counts as delivered), plus streamflow's own (lower-case ids). Not ported: tests of
announcements, metrics in bytes and Flink's network buffers, which streamflow does not have. A script is
``(num_channels, handler kwargs, steps)``; a step feeds one event and the handler must return
exactly the listed actions, in order, and nothing else. ``advance`` moves the ManualClock and
``check`` asserts handler properties (``paused`` is the set of paused channels).
"""

from __future__ import annotations

from typing import Any

import pytest

from streamflow.checkpoint.barrier_handler import (
    AbortCheckpoint,
    AbortReason,
    Action,
    BarrierHandler,
    CheckpointDone,
    CheckpointMode,
    PauseChannel,
    PersistInput,
    Phase,
    ResumeChannels,
    SnapshotState,
    StartAlignmentTimer,
    StopPersisting,
    TimeoutBase,
    barrier_alignment,
)
from streamflow.runtime.events import (
    AlignmentType,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointType,
)
from streamflow.testing import ManualClock

# ---- barriers: stamped ALIGNED (forced), UNALIGNED, ALTERNATING (timeoutable), savepoint
SAVEPOINT = CheckpointType.SAVEPOINT


def cb(n: int, ts: int = 0) -> CheckpointBarrier:
    return CheckpointBarrier(n, ts)


def ub(n: int, ts: int = 0) -> CheckpointBarrier:
    return CheckpointBarrier(n, ts, alignment=AlignmentType.UNALIGNED)


def tb(n: int, ts: int = 0) -> CheckpointBarrier:
    return CheckpointBarrier(n, ts, alignment=AlignmentType.ALTERNATING)


def sp(n: int, alignment: AlignmentType = AlignmentType.ALIGNED) -> CheckpointBarrier:
    return CheckpointBarrier(n, 0, SAVEPOINT, alignment)


# ---- actions
P = PauseChannel
R = ResumeChannels()
D = CheckpointDone
T = StartAlignmentTimer
SUB = AbortReason.SUBSUMED
CAN = AbortReason.CANCELED_UPSTREAM


def S(b: CheckpointBarrier) -> SnapshotState:
    return SnapshotState(b, unaligned=False)


def SU(b: CheckpointBarrier) -> SnapshotState:
    return SnapshotState(b.as_unaligned(), unaligned=True)


def PI(n: int, *channels: int) -> PersistInput:
    return PersistInput(n, frozenset(channels))


def ST(n: int, channel: int) -> StopPersisting:
    return StopPersisting(n, channel)


def AB(n: int, reason: AbortReason) -> AbortCheckpoint:
    return AbortCheckpoint(n, reason)


# ---- steps
Step = tuple[str, Any, Any, list[Action]]


def bar(ch: int, b: CheckpointBarrier, *out: Action) -> Step:
    return ("barrier", ch, b, list(out))


def cancel(ch: int, n: int, *out: Action) -> Step:
    return ("cancel", ch, CancelCheckpointMarker(n), list(out))


def eoi(ch: int, *out: Action) -> Step:
    return ("eoi", ch, None, list(out))


def timer(*out: Action) -> Step:
    return ("timer", None, None, list(out))


def advance(ms: int) -> Step:
    return ("advance", None, ms, [])


def check(**attrs: Any) -> Step:
    return ("check", None, attrs, [])


ALIGNED: dict[str, Any] = {}
UNALIGNED: dict[str, Any] = {"unaligned": True}
ALT: dict[str, Any] = {"unaligned": True, "aligned_timeout_ms": 100}
ALT0: dict[str, Any] = {"unaligned": True, "aligned_timeout_ms": 0}
ALT_10: dict[str, Any] = {"unaligned": True, "aligned_timeout_ms": 10}
ALT_10S: dict[str, Any] = {"unaligned": True, "aligned_timeout_ms": 10_000}
ALT_FROM_CHECKPOINT_START: dict[str, Any] = {
    **ALT,
    "timeout_base": TimeoutBase.CHECKPOINT_START,
}
WAITING = Phase.WAITING_FOR_FIRST_BARRIER
COLLECTING = Phase.COLLECTING_BARRIERS
COLLECTING_UNALIGNED = Phase.COLLECTING_BARRIERS_UNALIGNED

# fmt: off
SCRIPTS: dict[str, tuple[int, dict[str, Any], list[Step]]] = {
    # ---- aligned: ported from Flink's AlignedCheckpointsTest ---------------------------------
    "AlignedCheckpointsTest.testSingleChannelWithBarriers": (1, ALIGNED, [
        bar(0, cb(1), S(cb(1)), D(1)),
        bar(0, cb(2), S(cb(2)), D(2)),
        bar(0, cb(3), S(cb(3)), D(3)),
        bar(0, cb(4), S(cb(4)), D(4)),
        check(current_checkpoint_id=4, pending_checkpoint_id=None, paused=set(),
              last_alignment_duration_ms=0),
        eoi(0),
    ]),
    "AlignedCheckpointsTest.testMultiChannelWithBarriers": (3, ALIGNED, [
        # checkpoint with data from multiple channels
        bar(1, cb(1), P(1)),
        bar(2, cb(1), P(2)),
        check(paused={1, 2}, phase=COLLECTING, pending_checkpoint_id=1),
        bar(0, cb(1), S(cb(1)), R, D(1)),
        check(paused=set(), phase=WAITING, pending_checkpoint_id=None),
        # barriers come together
        bar(0, cb(2), P(0)),
        bar(1, cb(2), P(1)),
        bar(2, cb(2), S(cb(2)), R, D(2)),
        # data only on one channel
        bar(2, cb(3), P(2)),
        bar(0, cb(3), P(0)),
        bar(1, cb(3), S(cb(3)), R, D(3)),
        # empty checkpoint
        bar(1, cb(4), P(1)),
        bar(2, cb(4), P(2)),
        bar(0, cb(4), S(cb(4)), R, D(4)),
        eoi(0), eoi(1), eoi(2),
    ]),
    "AlignedCheckpointsTest.testMultiChannelJumpingOverCheckpoint": (3, ALIGNED, [
        bar(1, cb(1), P(1)),
        bar(2, cb(1), P(2)),
        bar(0, cb(1), S(cb(1)), R, D(1)),
        bar(1, cb(2), P(1)),
        check(current_checkpoint_id=2),
        bar(0, cb(2), P(0)),
        # a premature barrier 3 subsumes 2
        bar(2, cb(3), AB(2, SUB), R, P(2)),
        check(current_checkpoint_id=3, paused={2}),
        bar(0, cb(3), P(0)),
        bar(1, cb(4), AB(3, SUB), R, P(1)),
        check(current_checkpoint_id=4, paused={1}),
        # streamflow (Flink with checkpoints after tasks finish): ended channels count as
        # delivered, so the last end of input completes 4 instead of aborting it
        eoi(0),
        eoi(2, S(cb(4)), R, D(4)),
        eoi(1),
    ]),
    # old main also aborted the pending checkpoint 1 (SUBSUMED); Flink declines only 3
    "AlignedCheckpointsTest.testMissingCancellationBarriers": (2, ALIGNED, [
        bar(0, cb(1), P(0)),
        cancel(1, 3, AB(3, CAN), R),
        cancel(0, 2),  # older than the current id
        cancel(0, 3),  # already aborted
        check(paused=set(), current_checkpoint_id=3, pending_checkpoint_id=None),
        bar(0, cb(1)),  # 1 was dropped with the alignment
    ]),
    "AlignedCheckpointsTest.testStartAlignmentWithClosedChannels": (4, ALIGNED, [
        eoi(2),
        eoi(1),
        bar(3, cb(2), P(3)),
        bar(0, cb(2), S(cb(2)), R, D(2)),
        bar(0, cb(3), P(0)),
        bar(3, cb(3), S(cb(3)), R, D(3)),
        eoi(0),
        # checkpoint on the last remaining channel completes at once
        bar(3, cb(4), S(cb(4)), D(4)),
        eoi(3),
    ]),
    "AlignedCheckpointsTest.testEndOfStreamWhileCheckpoint": (3, ALIGNED, [
        bar(0, cb(1), P(0)),
        bar(1, cb(1), P(1)),
        bar(2, cb(1), S(cb(1)), R, D(1)),
        bar(2, cb(2), P(2)),
        bar(0, cb(2), P(0)),
        # streamflow: the channel that ends before its barrier counts as delivered
        eoi(1, S(cb(2)), R, D(2)),
        eoi(2),
        eoi(0),
    ]),
    "AlignedCheckpointsTest.testSingleChannelAbortCheckpoint": (1, ALIGNED, [
        bar(0, cb(1), S(cb(1)), D(1)),
        bar(0, cb(2), S(cb(2)), D(2)),
        cancel(0, 4, AB(4, CAN)),
        check(current_checkpoint_id=4, last_alignment_duration_ms=0),
        bar(0, cb(5), S(cb(5)), D(5)),
        cancel(0, 6, AB(6, CAN)),
        bar(0, cb(6)),  # canceled: its barrier is ignored
    ]),
    "AlignedCheckpointsTest.testMultiChannelAbortCheckpoint": (3, ALIGNED, [
        bar(1, cb(1), P(1)),
        bar(2, cb(1), P(2)),
        bar(0, cb(1), S(cb(1)), R, D(1)),
        # aborted on the last barrier
        bar(0, cb(2), P(0)),
        bar(2, cb(2), P(2)),
        cancel(1, 2, AB(2, CAN), R),
        check(paused=set(), pending_checkpoint_id=None),
        # a successful one
        bar(1, cb(3), P(1)),
        bar(2, cb(3), P(2)),
        bar(0, cb(3), S(cb(3)), R, D(3)),
        # aborted on the first barrier
        cancel(1, 4, AB(4, CAN)),
        bar(2, cb(4)),
        bar(0, cb(4)),
        check(paused=set()),
        # another successful one
        bar(2, cb(5), P(2)),
        bar(1, cb(5), P(1)),
        bar(0, cb(5), S(cb(5)), R, D(5)),
        # several cancellations, then a barrier
        cancel(1, 6, AB(6, CAN)),
        cancel(2, 6),
        bar(0, cb(6)),
        check(paused=set(), current_checkpoint_id=6),
    ]),
    "AlignedCheckpointsTest.testAbortOnCanceledBarriers": (3, ALIGNED, [
        bar(1, cb(1), P(1)),
        cancel(0, 1, AB(1, CAN), R),
        bar(1, cb(2), P(1)),
        bar(2, cb(1)),  # ignored: 1 was canceled and 2 started
        check(paused={1}),
        bar(0, cb(2), P(0)),
        bar(2, cb(2), S(cb(2)), R, D(2)),
    ]),
    "AlignedCheckpointsTest.testIgnoreCancelBarrierIfCheckpointSubsumed": (3, ALIGNED, [
        bar(1, cb(3), P(1)),
        bar(0, cb(3), P(0)),
        bar(2, cb(5), AB(3, SUB), R, P(2)),
        cancel(0, 3),  # already subsumed
        bar(0, cb(5), P(0)),
        bar(1, cb(5), S(cb(5)), R, D(5)),
    ]),
    # with checkpoints after tasks finished (FLIP-147), as streamflow always runs
    "AlignedCheckpointsTest.testTriggerCheckpointsWithEndOfPartition": (3, ALIGNED, [
        bar(0, cb(1), P(0)),
        bar(1, cb(1), P(1)),
        eoi(2, S(cb(1)), R, D(1)),
        check(pending_checkpoint_id=None, paused=set()),
    ]),
    "AlignedCheckpointsTest.testDeduplicateChannelsWithBothBarrierAndEndOfPartition": (3, ALIGNED, [
        bar(0, cb(2), P(0)),
        bar(1, cb(2), P(1)),
        eoi(1),  # channel 1 already delivered 2: counted once
        check(pending_checkpoint_id=2),
        bar(2, cb(2), S(cb(2)), R, D(2)),
        check(pending_checkpoint_id=None),
    ]),
    "AlignedCheckpointsTest.testTriggerCheckpointsAfterReceivedEndOfPartition": (3, ALIGNED, [
        eoi(2),
        bar(0, cb(6), P(0)),
        bar(1, cb(6), S(cb(6)), R, D(6)),
        eoi(1),
        bar(0, cb(7), S(cb(7)), D(7)),
        check(pending_checkpoint_id=None),
    ]),
    # ---- aligned: streamflow's own ---------------------------------------------------------
    "aligned_two_channels_and_alignment_time": (2, ALIGNED, [
        advance(1000),
        bar(0, cb(1, ts=990), P(0)),
        check(alignment_started_ms=1000, pending_checkpoint_id=1),
        advance(30),
        bar(1, cb(1, ts=990), S(cb(1, ts=990)), R, D(1)),
        check(alignment_started_ms=None, last_alignment_duration_ms=30),
    ]),
    "aligned_older_barrier_ignored_after_subsumption": (3, ALIGNED, [
        bar(0, cb(1), P(0)),
        bar(1, cb(2), AB(1, SUB), R, P(1)),
        bar(2, cb(1)),
        bar(0, cb(2), P(0)),
        bar(2, cb(2), S(cb(2)), R, D(2)),
    ]),
    "aligned_late_barrier_of_completed_checkpoint_ignored": (2, ALIGNED, [
        bar(0, cb(1), P(0)),
        bar(1, cb(1), S(cb(1)), R, D(1)),
        bar(0, cb(1)),
        bar(0, cb(0)),
        check(current_checkpoint_id=1, phase=WAITING),
    ]),
    "aligned_duplicate_barrier_on_a_channel_ignored": (3, ALIGNED, [
        bar(0, cb(1), P(0)),
        bar(0, cb(1)),
        bar(1, cb(1), P(1)),
        bar(1, cb(1)),
        bar(2, cb(1), S(cb(1)), R, D(1)),
    ]),
    "aligned_cancel_newer_id_aborts_only_it_and_ignores_its_barriers": (3, ALIGNED, [
        bar(0, cb(1), P(0)),
        cancel(1, 2, AB(2, CAN), R),  # old main: AB(1, SUB), R, AB(2, CAN)
        check(current_checkpoint_id=2, pending_checkpoint_id=None, paused=set()),
        bar(0, cb(2)),
        bar(2, cb(2)),
        bar(1, cb(1)),
        bar(2, cb(3), P(2)),
        bar(0, cb(3), P(0)),
        bar(1, cb(3), S(cb(3)), R, D(3)),
    ]),
    "unaligned_cancel_newer_id_drops_the_pending_persisting": (3, UNALIGNED, [
        bar(0, ub(1), SU(ub(1)), PI(1, 1, 2)),
        cancel(0, 2, AB(2, CAN)),  # old main: AB(1, SUB), AB(2, CAN)
        check(pending_checkpoint_id=None, phase=WAITING),
        bar(1, ub(1)),  # no StopPersisting: 1's channel state was dropped
        bar(2, ub(3), SU(ub(3)), PI(3, 0, 1)),
    ]),
    "aligned_cancel_current_when_nothing_pending_is_ignored": (2, ALIGNED, [
        bar(0, cb(1), P(0)),
        bar(1, cb(1), S(cb(1)), R, D(1)),
        cancel(0, 1),
    ]),
    "aligned_end_of_input_on_paused_channel_drops_the_pause": (2, ALIGNED, [
        bar(0, cb(1), P(0)),
        eoi(0),
        check(paused=set(), pending_checkpoint_id=1),
        bar(1, cb(1), S(cb(1)), D(1)),
    ]),
    "aligned_all_channels_end_during_alignment": (3, ALIGNED, [
        bar(0, cb(1), P(0)),
        eoi(1),
        eoi(2, S(cb(1)), R, D(1)),
        eoi(0),
    ]),
    "aligned_mode_treats_alternating_barrier_as_aligned": (2, ALIGNED, [
        bar(0, tb(1), P(0)),
        advance(10_000),
        timer(),
        bar(1, tb(1), S(tb(1)), R, D(1)),
    ]),
    # ---- unaligned: ported from Flink's UnalignedCheckpointsTest --------------------------
    "UnalignedCheckpointsTest.testSingleChannelWithBarriers": (1, UNALIGNED, [
        bar(0, ub(1), SU(ub(1)), D(1)),
        bar(0, ub(2), SU(ub(2)), D(2)),
        bar(0, ub(3), SU(ub(3)), D(3)),
        check(paused=set(), last_alignment_duration_ms=0),
    ]),
    "UnalignedCheckpointsTest.testMultiChannelWithBarriers": (3, UNALIGNED, [
        bar(1, ub(1), SU(ub(1)), PI(1, 0, 2)),
        check(phase=COLLECTING_UNALIGNED, paused=set()),
        bar(2, ub(1), ST(1, 2)),
        bar(0, ub(1), ST(1, 0), D(1)),
        bar(0, ub(2), SU(ub(2)), PI(2, 1, 2)),
        bar(1, ub(2), ST(2, 1)),
        bar(2, ub(2), ST(2, 2), D(2)),
        bar(2, ub(3), SU(ub(3)), PI(3, 0, 1)),
        bar(0, ub(3), ST(3, 0)),
        bar(1, ub(3), ST(3, 1), D(3)),
        eoi(0), eoi(1), eoi(2),
    ]),
    # old main also aborted the pending checkpoint 1 (SUBSUMED); Flink declines only 2 and 3
    "UnalignedCheckpointsTest.testMissingCancellationBarriers": (2, UNALIGNED, [
        bar(0, ub(1), SU(ub(1)), PI(1, 1)),
        cancel(0, 2, AB(2, CAN)),
        cancel(0, 3, AB(3, CAN)),
        cancel(1, 3),
        eoi(0),
        eoi(1),
        check(current_checkpoint_id=3, pending_checkpoint_id=None),
    ]),
    "UnalignedCheckpointsTest.testEarlyCleanup": (3, UNALIGNED, [
        bar(1, ub(1), SU(ub(1)), PI(1, 0, 2)),
        bar(2, ub(1), ST(1, 2)),
        bar(0, ub(1), ST(1, 0), D(1)),
        bar(1, ub(2), SU(ub(2)), PI(2, 0, 2)),
        eoi(1),  # already delivered 2
        bar(2, ub(2), ST(2, 2)),
        eoi(2),
        eoi(0, ST(2, 0), D(2)),  # ended before its barrier: everything up to the end persisted
    ]),
    "UnalignedCheckpointsTest.testStartAlignmentWithClosedChannels": (4, UNALIGNED, [
        eoi(2),
        eoi(1),
        bar(3, ub(2), SU(ub(2)), PI(2, 0)),
        bar(0, ub(2), ST(2, 0), D(2)),
        bar(3, ub(3), SU(ub(3)), PI(3, 0)),
        bar(0, ub(3), ST(3, 0), D(3)),
        eoi(0),
        bar(3, ub(5), SU(ub(5)), D(5)),
        eoi(3),
    ]),
    "UnalignedCheckpointsTest.testMultiChannelTrailingInflightData": (3, UNALIGNED, [
        bar(1, ub(1), SU(ub(1)), PI(1, 0, 2)),
        bar(2, ub(1), ST(1, 2)),
        bar(0, ub(1), ST(1, 0), D(1)),
        bar(1, ub(2), SU(ub(2)), PI(2, 0, 2)),
        eoi(1),
        bar(2, ub(2), ST(2, 2)),
        eoi(2),
        eoi(0, ST(2, 0), D(2)),
    ]),
    "UnalignedCheckpointsTest.testEndOfStreamWhileCheckpoint": (3, UNALIGNED, [
        bar(0, ub(1), SU(ub(1)), PI(1, 1, 2)),
        bar(1, ub(1), ST(1, 1)),
        bar(2, ub(1), ST(1, 2), D(1)),
        bar(2, ub(2), SU(ub(2)), PI(2, 0, 1)),
        bar(0, ub(2), ST(2, 0)),
        eoi(2),  # after its barrier
        eoi(1, ST(2, 1), D(2)),  # before its barrier: its data up to the end is channel state
        eoi(0),
    ]),
    "UnalignedCheckpointsTest.testSingleChannelAbortCheckpoint": (1, UNALIGNED, [
        bar(0, ub(1), SU(ub(1)), D(1)),
        bar(0, ub(2), SU(ub(2)), D(2)),
        cancel(0, 4, AB(4, CAN)),
        bar(0, ub(5), SU(ub(5)), D(5)),
        cancel(0, 6, AB(6, CAN)),
        eoi(0),
    ]),
    "UnalignedCheckpointsTest.testMultiChannelAbortCheckpoint": (3, UNALIGNED, [
        bar(1, ub(1), SU(ub(1)), PI(1, 0, 2)),
        bar(2, ub(1), ST(1, 2)),
        bar(0, ub(1), ST(1, 0), D(1)),
        # canceled on the last barrier
        bar(0, ub(2), SU(ub(2)), PI(2, 1, 2)),
        bar(2, ub(2), ST(2, 2)),
        cancel(1, 2, AB(2, CAN)),
        bar(1, ub(3), SU(ub(3)), PI(3, 0, 2)),
        bar(2, ub(3), ST(3, 2)),
        bar(0, ub(3), ST(3, 0), D(3)),
        # canceled at once: no checkpoint starts at all
        cancel(1, 4, AB(4, CAN)),
        bar(2, ub(4)),
        bar(0, ub(4)),
        bar(2, ub(5), SU(ub(5)), PI(5, 0, 1)),
        bar(1, ub(5), ST(5, 1)),
        bar(0, ub(5), ST(5, 0), D(5)),
        cancel(1, 6, AB(6, CAN)),
        cancel(2, 6),
        bar(0, ub(6)),
        eoi(0), eoi(1), eoi(2),
    ]),
    "UnalignedCheckpointsTest.testProcessCancellationBarrierAfterProcessBarrier": (2, UNALIGNED, [
        bar(0, ub(0), SU(ub(0)), PI(0, 1)),
        check(pending_checkpoint_id=0),
        cancel(0, 1, AB(1, CAN)),  # the newer id; old main also declined 0
        check(pending_checkpoint_id=None, current_checkpoint_id=1),
        cancel(0, 2, AB(2, CAN)),
        check(pending_checkpoint_id=None, current_checkpoint_id=2),
    ]),
    "UnalignedCheckpointsTest.testProcessCancellationBarrierBeforeProcessAndReceiveBarrier": (1, UNALIGNED, [
        cancel(0, 0, AB(0, CAN)),
        check(pending_checkpoint_id=None, current_checkpoint_id=0),
        bar(0, ub(0)),  # its cancel marker came first
        check(pending_checkpoint_id=None, current_checkpoint_id=0),
    ]),
    "UnalignedCheckpointsTest.testTriggerCheckpointsWithEndOfPartition": (3, UNALIGNED, [
        bar(1, ub(1), SU(ub(1)), PI(1, 0, 2)),
        bar(0, ub(1), ST(1, 0)),
        eoi(2, ST(1, 2), D(1)),
        eoi(0),
        eoi(1),
    ]),
    "UnalignedCheckpointsTest.testTriggerCheckpointsAfterReceivedEndOfPartition": (3, UNALIGNED, [
        eoi(0),
        bar(1, ub(3), SU(ub(3)), PI(3, 2)),
        eoi(1),
        bar(2, ub(3), ST(3, 2), D(3)),
        bar(2, ub(4), SU(ub(4)), D(4)),
        eoi(2),
    ]),
    # ---- unaligned: streamflow's own -------------------------------------------------------
    "unaligned_subsumed_by_newer_barrier": (3, UNALIGNED, [
        bar(0, ub(1), SU(ub(1)), PI(1, 1, 2)),
        bar(0, ub(2), AB(1, SUB), SU(ub(2)), PI(2, 1, 2)),
        bar(1, ub(1)),
        bar(1, ub(2), ST(2, 1)),
        bar(2, ub(2), ST(2, 2), D(2)),
    ]),
    "unaligned_canceled_by_marker": (3, UNALIGNED, [
        bar(0, ub(1), SU(ub(1)), PI(1, 1, 2)),
        cancel(1, 1, AB(1, CAN)),
        bar(2, ub(1)),
        check(pending_checkpoint_id=None, phase=WAITING),
    ]),
    "unaligned_duplicate_barrier_on_a_channel_ignored": (3, UNALIGNED, [
        bar(0, ub(1), SU(ub(1)), PI(1, 1, 2)),
        bar(0, ub(1)),
        bar(1, ub(1), ST(1, 1)),
        bar(1, ub(1)),
        bar(2, ub(1), ST(1, 2), D(1)),
    ]),
    "unaligned_alignment_time_is_first_to_last_barrier": (2, UNALIGNED, [
        advance(500),
        bar(1, ub(1), SU(ub(1)), PI(1, 0)),
        check(alignment_started_ms=500),
        advance(70),
        bar(0, ub(1), ST(1, 0), D(1)),
        check(last_alignment_duration_ms=70, alignment_started_ms=None),
    ]),
    "unaligned_mode_treats_alternating_barrier_as_unaligned": (2, UNALIGNED, [
        bar(0, tb(1), SU(tb(1)), PI(1, 1)),
        bar(1, tb(1), ST(1, 1), D(1)),
    ]),
    "unaligned_mode_keeps_forced_aligned_barrier_aligned": (2, UNALIGNED, [
        bar(0, cb(1), P(0)),
        bar(1, cb(1), S(cb(1)), R, D(1)),
    ]),
    "unaligned_mode_savepoint_always_aligned": (3, UNALIGNED, [
        bar(0, sp(1), P(0)),
        bar(2, sp(1), P(2)),
        bar(1, sp(1), S(sp(1)), R, D(1)),
        # even a savepoint stamped unaligned by mistake
        bar(0, sp(2, AlignmentType.UNALIGNED), P(0)),
        bar(1, sp(2, AlignmentType.UNALIGNED), P(1)),
        bar(2, sp(2, AlignmentType.UNALIGNED), S(sp(2, AlignmentType.UNALIGNED)), R, D(2)),
        bar(1, ub(3), SU(ub(3)), PI(3, 0, 2)),
    ]),
    # ---- alternating: ported from Flink's AlternatingCheckpointsTest -----------------------
    "AlternatingCheckpointsTest.testAlternation": (2, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        bar(1, tb(1), S(tb(1)), R, D(1)),
        bar(1, sp(2), P(1)),  # savepoints never time out: no timer
        advance(1000),
        timer(),
        bar(0, sp(2), S(sp(2)), R, D(2)),
        bar(1, tb(3), P(1), T(3, 1100)),
        bar(0, tb(3), S(tb(3)), R, D(3)),
    ]),
    "AlternatingCheckpointsTest.testSwitchToUnalignedByUpstream": (2, ALT, [
        bar(1, ub(1), SU(ub(1)), PI(1, 0)),
        bar(0, tb(1), ST(1, 0), D(1)),
    ]),
    "AlternatingCheckpointsTest.testTimeoutAlignmentOnUnalignedCheckpoint": (3, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        # already unaligned: an upstream task timed out
        bar(1, ub(1), SU(ub(1)), PI(1, 2), R),
        check(phase=COLLECTING_UNALIGNED, paused=set()),
        timer(),
        bar(2, tb(1), ST(1, 2), D(1)),
    ]),
    "AlternatingCheckpointsTest.testAlignedNeverTimeoutableCheckpoint": (2, ALT, [
        bar(0, cb(1), P(0)),  # stamped ALIGNED (Flink: FORCED_ALIGNED / no timeout)
        advance(10_000),
        timer(),
        bar(1, cb(1), S(cb(1)), R, D(1)),
    ]),
    "AlternatingCheckpointsTest.testActiveTimeoutAlignmentOnFirstBarrier": (2, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        advance(101),
        timer(SU(tb(1)), PI(1, 1), R),
        bar(1, tb(1), ST(1, 1), D(1)),
    ]),
    "AlternatingCheckpointsTest.testActiveTimeoutAfterBarrierPassiveTimeout": (3, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        advance(150),
        bar(1, tb(1), SU(tb(1)), PI(1, 2), R),
        timer(),  # the timer fires after the passive switch: nothing left to do
        bar(2, tb(1), ST(1, 2), D(1)),
    ]),
    "AlternatingCheckpointsTest.testAllChannelsUnblockedAfterAlignmentTimeout": (2, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        advance(101),
        bar(1, tb(1), S(tb(1)), R, D(1)),  # the last barrier completes: no switch needed
        check(paused=set()),
    ]),
    "AlternatingCheckpointsTest.testNoActiveTimeoutAlignmentAfterLastBarrier": (2, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        bar(1, tb(1), S(tb(1)), R, D(1)),
        advance(101),
        timer(),
    ]),
    "AlternatingCheckpointsTest.testNoActiveTimeoutAlignmentAfterAbort": (2, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        cancel(1, 1, AB(1, CAN), R),
        advance(101),
        timer(),
    ]),
    "AlternatingCheckpointsTest.testTimeoutAlignmentAfterReceivedEndOfPartition": (3, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        advance(101),  # the timer has not run yet: the end of input switches
        eoi(1, SU(tb(1)), PI(1, 2), R),
        eoi(2, ST(1, 2), D(1)),
        timer(),
    ]),
    "AlternatingCheckpointsTest.testStartNewCheckpointViaAnnouncement": (3, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        eoi(1),
        check(pending_checkpoint_id=1, phase=COLLECTING),
        bar(2, tb(1), S(tb(1)), R, D(1)),
    ]),
    "AlternatingCheckpointsTest.testTimeoutAlignmentBeforeFirstBarrier": (2, ALT_FROM_CHECKPOINT_START, [
        advance(1000),
        # the checkpoint started at 899: its 100 ms are up when the first barrier arrives
        bar(0, tb(1, ts=899), SU(tb(1, ts=899)), PI(1, 1)),
        bar(1, tb(1, ts=899), ST(1, 1), D(1)),
    ]),
    "alternating_timeout_measured_from_checkpoint_start": (2, ALT_FROM_CHECKPOINT_START, [
        advance(1000),
        bar(0, tb(2, ts=950), P(0), T(2, 1050)),
        advance(49),
        timer(),
        advance(1),
        timer(SU(tb(2, ts=950)), PI(2, 1), R),
    ]),
    "AlternatingCheckpointsTest.testAlignedAfterTimedOut": (2, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        advance(100),
        timer(SU(tb(1)), PI(1, 1), R),
        bar(1, tb(1), ST(1, 1), D(1)),
        check(last_alignment_duration_ms=100),
        # the next checkpoint starts aligned again
        bar(1, tb(2), P(1), T(2, 200)),
        advance(10),
        bar(0, tb(2), S(tb(2)), R, D(2)),
        check(last_alignment_duration_ms=10),
    ]),
    "AlternatingCheckpointsTest.testNextFirstCheckpointBarrierOvertakesCancellationBarrier": (2, ALT_10S, [
        bar(0, tb(1), P(0), T(1, 10_000)),
        advance(1000),
        bar(0, tb(2), AB(1, SUB), R, P(0), T(2, 11_000)),
        advance(1000),
        cancel(1, 1),  # older than the pending 2
        advance(1000),
        bar(1, tb(2), S(tb(2)), R, D(2)),
        check(last_alignment_duration_ms=2000),
    ]),
    "AlternatingCheckpointsTest.testOutOfOrderBarrier": (2, ALT, [
        bar(0, tb(10), P(0), T(10, 100)),
        bar(1, sp(5)),  # an older savepoint: ignored, channel 1 keeps being read
        check(current_checkpoint_id=10, pending_checkpoint_id=10, paused={0}),
    ]),
    "AlternatingCheckpointsTest.testCheckpointHandling": (2, ALT, [
        bar(0, ub(123), SU(ub(123)), PI(123, 1)),  # triggered on the first barrier
        bar(1, ub(123), ST(123, 1), D(123)),
        check(paused=set()),
    ]),
    "AlternatingCheckpointsTest.testSavepointHandling": (2, ALT, [
        bar(0, sp(123), P(0)),  # not triggered before the last barrier
        bar(1, sp(123), S(sp(123)), R, D(123)),
        check(paused=set()),
    ]),
    "AlternatingCheckpointsTest.testHasInflightDataBeforeProcessBarrier": (2, ALT, [
        bar(0, cb(1), P(0)),
        check(pending_checkpoint_id=1),
    ]),
    "AlternatingCheckpointsTest.testTimeoutAlignment": (2, ALT_10, [
        bar(0, tb(1), P(0), T(1, 10)),
        advance(20),
        timer(SU(tb(1)), PI(1, 1), R),
        bar(1, tb(1), ST(1, 1), D(1)),
    ]),
    # ---- alternating: streamflow's own -----------------------------------------------------
    "alternating_switch_on_timeout_with_stale_and_early_timer_calls": (3, ALT, [
        advance(1000),
        bar(0, tb(1), P(0), T(1, 1100)),
        check(alignment_started_ms=1000, phase=COLLECTING),
        advance(50),
        bar(1, tb(1), P(1)),
        advance(49),
        timer(),  # 1099: early
        advance(1),
        timer(SU(tb(1)), PI(1, 2), R),
        check(phase=COLLECTING_UNALIGNED, paused=set()),
        timer(),  # stale
        advance(5),
        bar(2, tb(1), ST(1, 2), D(1)),
        check(last_alignment_duration_ms=105),
    ]),
    "alternating_finishes_in_time_no_switch": (3, ALT, [
        bar(2, tb(1), P(2), T(1, 100)),
        advance(60),
        bar(0, tb(1), P(0)),
        advance(39),
        bar(1, tb(1), S(tb(1)), R, D(1)),
        advance(1),
        timer(),
        check(last_alignment_duration_ms=99),
    ]),
    "alternating_unaligned_barrier_as_last_barrier": (2, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        bar(1, ub(1), SU(ub(1)), R, D(1)),
    ]),
    "alternating_old_timer_ignored_after_subsumption": (2, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        advance(50),
        bar(1, tb(2), AB(1, SUB), R, P(1), T(2, 150)),
        advance(50),
        timer(),  # the deadline of 1; 2's is 150
        advance(50),
        timer(SU(tb(2)), PI(2, 0), R),
        bar(0, tb(2), ST(2, 0), D(2)),
    ]),
    "alternating_unaligned_switch_then_subsumed": (3, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        advance(100),
        timer(SU(tb(1)), PI(1, 1, 2), R),
        bar(0, tb(2), AB(1, SUB), P(0), T(2, 200)),
        bar(1, tb(1)),
        bar(1, tb(2), P(1)),
        bar(2, tb(2), S(tb(2)), R, D(2)),
    ]),
    "alternating_duplicate_barrier_after_deadline_changes_nothing": (3, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        advance(200),
        bar(0, tb(1)),  # a duplicate is ignored outright, even as a passive timeout
        check(phase=COLLECTING, alignment_started_ms=0),
        timer(SU(tb(1)), PI(1, 1, 2), R),
        cancel(1, 1, AB(1, CAN)),
        check(alignment_started_ms=None, pending_checkpoint_id=None, phase=WAITING),
        bar(2, tb(1)),
    ]),
    # Flink's isTimedOut: timeout < now - start. Old main switched at exactly the timeout.
    "alternating_timeout_is_strictly_longer_than_on_a_barrier": (3, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        advance(100),
        bar(1, tb(1), P(1)),  # exactly the timeout: still aligned
        advance(1),
        bar(2, tb(1), S(tb(1)), R, D(1)),
        bar(0, tb(2), P(0), T(2, 201)),
        advance(101),
        bar(1, tb(2), SU(tb(2)), PI(2, 2), R),  # longer than the timeout: unaligned
        bar(2, tb(2), ST(2, 2), D(2)),
    ]),
    "alternating_timeout_is_strictly_longer_than_on_end_of_input": (3, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        advance(100),
        eoi(1),  # exactly the timeout: still aligned
        check(phase=COLLECTING, paused={0}),
        advance(1),
        eoi(2, S(tb(1)), R, D(1)),
    ]),
    "alternating_timer_at_the_deadline_switches": (3, ALT, [
        bar(0, tb(1), P(0), T(1, 100)),
        advance(100),
        timer(SU(tb(1)), PI(1, 1, 2), R),  # Flink's timer fires after exactly the delay
        bar(1, tb(1), ST(1, 1)),
        bar(2, tb(1), ST(1, 2), D(1)),
    ]),
    "alternating_first_barrier_exactly_at_timeout_from_checkpoint_start": (2, ALT_FROM_CHECKPOINT_START, [
        advance(1000),
        # checkpoint started at 900: 100 ms passed, not more: aligned, timer due at once
        bar(0, tb(1, ts=900), P(0), T(1, 1000)),
        timer(SU(tb(1, ts=900)), PI(1, 1), R),
        bar(1, tb(1, ts=900), ST(1, 1), D(1)),
    ]),
    "alternating_timeout_zero_is_unaligned_at_once": (2, ALT0, [
        bar(0, tb(1), SU(tb(1)), PI(1, 1)),
        bar(1, tb(1), ST(1, 1), D(1)),
        bar(0, sp(2), P(0)),
        bar(1, sp(2), S(sp(2)), R, D(2)),
    ]),
    "alternating_timeout_zero_single_channel": (1, ALT0, [
        bar(0, tb(1), SU(tb(1)), D(1)),
    ]),
    "alternating_single_channel_completes_aligned_at_once": (1, ALT, [
        bar(0, tb(1), S(tb(1)), D(1)),
        bar(0, ub(2), SU(ub(2)), D(2)),
        bar(0, sp(3), S(sp(3)), D(3)),
    ]),
}
# fmt: on


def _check(handler: BarrierHandler, num_channels: int, attrs: dict[str, Any]) -> None:
    for name, expected in attrs.items():
        if name == "paused":
            actual: Any = {c for c in range(num_channels) if handler.is_paused(c)}
        else:
            actual = getattr(handler, name)
        assert actual == expected, f"{name}: {actual!r} != {expected!r}"


def make(num_channels: int, config: dict[str, Any]) -> tuple[BarrierHandler, ManualClock]:
    clock = ManualClock()
    return BarrierHandler(num_channels, clock, **config), clock


def play(handler: BarrierHandler, clock: ManualClock, num_channels: int, steps: list[Step]) -> None:
    for i, (op, channel, arg, expected) in enumerate(steps):
        out: list[Action] = []
        if op == "barrier":
            out = handler.on_barrier(channel, arg)
        elif op == "cancel":
            out = handler.on_cancel_marker(channel, arg)
        elif op == "eoi":
            out = handler.on_end_of_input(channel)
        elif op == "timer":
            out = handler.on_alignment_timer()
        elif op == "advance":
            clock.advance(arg)
        elif op == "check":
            _check(handler, num_channels, arg)
        else:  # pragma: no cover
            raise AssertionError(op)
        assert out == expected, f"step {i} {op}({channel}, {arg}): {out} != {expected}"


@pytest.mark.parametrize(("num_channels", "config", "steps"), SCRIPTS.values(), ids=SCRIPTS.keys())
def test_script(num_channels: int, config: dict[str, Any], steps: list[Step]) -> None:
    handler, clock = make(num_channels, config)
    play(handler, clock, num_channels, steps)


# ---- illegal calls raise ValueError and change nothing ---------------------------------------


def _observe(handler: BarrierHandler, num_channels: int) -> tuple[Any, ...]:
    return (
        handler.phase,
        handler.current_checkpoint_id,
        handler.pending_checkpoint_id,
        handler.alignment_started_ms,
        handler.last_alignment_duration_ms,
        tuple(handler.is_paused(c) for c in range(num_channels)),
        repr(handler._book.delivered),
        repr(handler._book.persisting),
    )


# a prefix (run first), the illegal call, then a continuation that must behave as if the
# illegal call never happened
# fmt: off
ILLEGAL: dict[str, tuple[int, dict[str, Any], list[Step], Any, list[Step]]] = {
    "barrier_channel_out_of_range": (
        3, ALIGNED, [bar(0, cb(1), P(0))],
        lambda h: h.on_barrier(3, cb(1)),
        [bar(1, cb(1), P(1)), bar(2, cb(1), S(cb(1)), R, D(1))],
    ),
    "barrier_negative_channel": (
        2, ALIGNED, [], lambda h: h.on_barrier(-1, cb(1)), [bar(0, cb(1), P(0))],
    ),
    "cancel_channel_out_of_range": (
        2, ALIGNED, [bar(0, cb(1), P(0))],
        lambda h: h.on_cancel_marker(2, CancelCheckpointMarker(1)),
        [bar(1, cb(1), S(cb(1)), R, D(1))],
    ),
    "end_of_input_channel_out_of_range": (
        2, ALIGNED, [bar(0, cb(1), P(0))],
        lambda h: h.on_end_of_input(5),
        [bar(1, cb(1), S(cb(1)), R, D(1))],
    ),
    "is_paused_channel_out_of_range": (
        2, ALIGNED, [bar(0, cb(1), P(0))], lambda h: h.is_paused(2), [],
    ),
    "barrier_on_ended_channel": (
        3, UNALIGNED, [eoi(2), bar(0, ub(1), SU(ub(1)), PI(1, 1))],
        lambda h: h.on_barrier(2, ub(1)),
        [bar(1, ub(1), ST(1, 1), D(1))],
    ),
    "cancel_marker_on_ended_channel": (
        2, ALIGNED, [eoi(1), bar(0, cb(1), S(cb(1)), D(1))],
        lambda h: h.on_cancel_marker(1, CancelCheckpointMarker(2)),
        [bar(0, cb(2), S(cb(2)), D(2))],
    ),
    "end_of_input_twice": (
        3, ALIGNED, [bar(0, cb(1), P(0)), eoi(1)],
        lambda h: h.on_end_of_input(1),
        [bar(2, cb(1), S(cb(1)), R, D(1))],
    ),
    "unaligned_barrier_at_aligned_handler": (
        2, ALIGNED, [bar(0, cb(1), P(0))],
        lambda h: h.on_barrier(1, ub(2)),
        [bar(1, cb(1), S(cb(1)), R, D(1))],
    ),
}
# fmt: on


@pytest.mark.parametrize(
    ("num_channels", "config", "prefix", "call", "rest"), ILLEGAL.values(), ids=ILLEGAL.keys()
)
def test_illegal_call_raises_and_leaves_state_unchanged(
    num_channels: int, config: dict[str, Any], prefix: list[Step], call: Any, rest: list[Step]
) -> None:
    handler, clock = make(num_channels, config)
    play(handler, clock, num_channels, prefix)
    before = _observe(handler, num_channels)
    with pytest.raises(ValueError):
        call(handler)
    assert _observe(handler, num_channels) == before
    # the continuation behaves exactly as without the illegal call
    play(handler, clock, num_channels, rest)
    fresh, fresh_clock = make(num_channels, config)
    play(fresh, fresh_clock, num_channels, prefix + rest)
    assert _observe(handler, num_channels) == _observe(fresh, num_channels)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((0,), {}),
        ((2,), {"aligned_timeout_ms": 100}),
        ((2,), {"unaligned": True, "aligned_timeout_ms": -1}),
    ],
    ids=["no_channels", "timeout_without_unaligned", "negative_timeout"],
)
def test_bad_configuration(args: tuple[int], kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        BarrierHandler(*args, ManualClock(), **kwargs)


@pytest.mark.parametrize(
    ("config", "mode"),
    [
        (ALIGNED, CheckpointMode.ALIGNED),
        (UNALIGNED, CheckpointMode.UNALIGNED),
        (ALT, CheckpointMode.ALTERNATING),
        (ALT0, CheckpointMode.ALTERNATING),
    ],
)
def test_mode(config: dict[str, Any], mode: CheckpointMode) -> None:
    handler = BarrierHandler(2, ManualClock(), **config)
    assert handler.mode is mode
    assert handler.phase is WAITING
    assert handler.current_checkpoint_id is None
    assert handler.pending_checkpoint_id is None
    assert handler.last_alignment_duration_ms is None


# ---- barrier_alignment: Flink's CheckpointOptions.forConfig -------------------------------


@pytest.mark.parametrize(
    ("checkpoint_type", "unaligned", "timeout", "expected"),
    [
        (CheckpointType.CHECKPOINT, False, None, AlignmentType.ALIGNED),
        (CheckpointType.CHECKPOINT, True, None, AlignmentType.UNALIGNED),
        (CheckpointType.CHECKPOINT, True, 0, AlignmentType.UNALIGNED),
        (CheckpointType.CHECKPOINT, True, 100, AlignmentType.ALTERNATING),
        (CheckpointType.SAVEPOINT, True, None, AlignmentType.ALIGNED),
        (CheckpointType.SAVEPOINT, True, 100, AlignmentType.ALIGNED),
        (CheckpointType.SAVEPOINT, False, None, AlignmentType.ALIGNED),
    ],
)
def test_barrier_alignment(
    checkpoint_type: CheckpointType, unaligned: bool, timeout: int | None, expected: AlignmentType
) -> None:
    assert barrier_alignment(checkpoint_type, unaligned=unaligned, aligned_timeout_ms=timeout) is expected


@pytest.mark.parametrize("config", [ALIGNED, UNALIGNED, ALT], ids=["aligned", "unaligned", "alt"])
@pytest.mark.parametrize("num_channels", [1, 2, 3])
def test_stamped_barriers_complete_in_every_mode(num_channels: int, config: dict[str, Any]) -> None:
    """Barriers stamped by barrier_alignment for the handler's own config always complete."""
    clock = ManualClock()
    handler = BarrierHandler(num_channels, clock, **config)
    for n, kind in enumerate([CheckpointType.CHECKPOINT, SAVEPOINT, CheckpointType.CHECKPOINT], 1):
        alignment = barrier_alignment(
            kind, unaligned=bool(config), aligned_timeout_ms=config.get("aligned_timeout_ms")
        )
        barrier = CheckpointBarrier(n, clock.now_ms(), kind, alignment)
        actions = [a for ch in range(num_channels) for a in handler.on_barrier(ch, barrier)]
        snapshots = [a for a in actions if isinstance(a, SnapshotState)]
        assert len(snapshots) == 1
        assert snapshots[0].unaligned is (alignment is AlignmentType.UNALIGNED)
        assert actions[-1] == D(n)
        assert not any(handler.is_paused(ch) for ch in range(num_channels))
