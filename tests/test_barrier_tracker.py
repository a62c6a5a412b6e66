"""Table tests of BarrierTracker (at-least-once), ported from Flink's CheckpointBarrierTrackerTest.

apache/flink flink-streaming-java/src/test/java/org/apache/flink/streaming/runtime/io/checkpointing/
CheckpointBarrierTrackerTest.java. One row per Flink test method (the row id names it); data
buffers are left out (the tracker never looks at them, and never blocks a channel). A row is
``(num_channels, events, outcome, checks)``: ``outcome`` lists what the tracker reported, in
order, as Flink's ``CheckpointSequenceValidator`` does: ``n`` triggered checkpoint n, ``-n``
aborted it. ``checks`` are the tracker's properties at the end. Every checkpoint in these
tests runs with checkpoints after tasks finished enabled (streamflow always does).
"""

from __future__ import annotations

from typing import Any

import pytest

from streamflow.checkpoint.barrier_handler import (
    AbortCheckpoint,
    AbortReason,
    Action,
    CheckpointDone,
    SnapshotState,
)
from streamflow.checkpoint.barrier_tracker import MAX_CHECKPOINTS_TO_TRACK, BarrierTracker
from streamflow.runtime.events import CancelCheckpointMarker, CheckpointBarrier
from streamflow.testing import ManualClock

Event = tuple[str, int, int]


def b(n: int, ch: int) -> Event:
    return ("barrier", n, ch)


def c(n: int, ch: int) -> Event:
    return ("cancel", n, ch)


def eop(ch: int) -> Event:
    return ("eop", 0, ch)


def tick(ms: int) -> Event:
    return ("tick", ms, 0)


# fmt: off
ROWS: dict[str, tuple[int, list[Event], list[int], dict[str, Any]]] = {
    "CheckpointBarrierTrackerTest.testSingleChannelWithBarriers": (1, [
        b(1, 0), b(2, 0), b(3, 0), b(4, 0), b(5, 0), b(6, 0),
    ], [1, 2, 3, 4, 5, 6], {}),
    "CheckpointBarrierTrackerTest.testSingleChannelWithSkippedBarriers": (1, [
        b(1, 0), b(3, 0), b(4, 0), b(6, 0), b(7, 0), b(10, 0),
    ], [1, 3, 4, 6, 7, 10], {}),
    "CheckpointBarrierTrackerTest.testMultiChannelWithBarriers": (3, [
        b(1, 1), b(1, 2), b(1, 0),
        b(2, 0), b(2, 1), b(2, 2),
        b(3, 2), b(3, 0), b(3, 1),
        b(4, 1), b(4, 2), b(4, 0),
    ], [1, 2, 3, 4], {"pending_checkpoint_ids": []}),
    "CheckpointBarrierTrackerTest.testMultiChannelSkippingCheckpoints": (3, [
        b(1, 1), b(1, 2), b(1, 0),
        b(2, 0), b(2, 1), b(2, 2),
        b(3, 2),
        # jump to checkpoint 4
        b(4, 0), b(4, 1), b(4, 2),
    ], [1, 2, 4], {"pending_checkpoint_ids": []}),
    # old main (one checkpoint at a time) completed 2, 4, 5, 10
    "CheckpointBarrierTrackerTest.testCompleteCheckpointsOnLateBarriers": (3, [
        b(2, 1), b(2, 0), b(2, 2),
        # incomplete checkpoint 3
        b(3, 1), b(3, 2),
        # some barriers from checkpoint 4
        b(4, 2), b(4, 1),
        # last barrier from checkpoint 3
        b(3, 0),
        # complete checkpoint 4
        b(4, 0),
        # regular checkpoint 5
        b(5, 1), b(5, 0), b(5, 2),
        # checkpoint 6 (incomplete)
        b(6, 1), b(6, 0),
        # checkpoint 7, with early barriers for checkpoints 8 and 9
        b(7, 1), b(7, 2), b(8, 2), b(8, 1), b(9, 1),
        # complete checkpoint 7, first barriers from checkpoint 10
        b(7, 0), b(9, 2), b(10, 2),
        # complete checkpoint 8 and 9
        b(8, 0), b(9, 0),
        # complete checkpoint 10
        b(10, 0), b(10, 1),
    ], [2, 3, 4, 5, 7, 8, 9, 10], {"pending_checkpoint_ids": []}),
    "CheckpointBarrierTrackerTest.testNextFirstCheckpointBarrierOvertakesCancellationBarrier": (2, [
        b(1, 1), tick(1000),
        b(2, 1), tick(1000),
        c(1, 0), tick(1000),
        b(2, 0), tick(1000),
    ], [-1, 2], {"last_alignment_duration_ms": 2000, "pending_checkpoint_ids": []}),
    "CheckpointBarrierTrackerTest.testSingleChannelAbortCheckpoint": (1, [
        b(1, 0), b(2, 0), c(4, 0), b(5, 0), c(6, 0),
    ], [1, 2, -4, 5, -6], {}),
    "CheckpointBarrierTrackerTest.testMultiChannelAbortCheckpoint": (3, [
        # a successful checkpoint
        b(1, 1), b(1, 2), b(1, 0),
        # aborted on last barrier
        b(2, 0), b(2, 2), c(2, 1),
        # successful checkpoint
        b(3, 1), b(3, 2), b(3, 0),
        # abort on first barrier
        c(4, 1), b(4, 2), b(4, 0),
        # another successful checkpoint
        b(5, 2), b(5, 1), b(5, 0),
        # multiple cancellations and a barrier after the cancellations
        c(6, 1), c(6, 2), b(6, 0),
    ], [1, -2, 3, -4, 5, -6], {"pending_checkpoint_ids": []}),
    "CheckpointBarrierTrackerTest.testInterleavedCancellationBarriers": (3, [
        b(1, 0), c(2, 0), c(1, 1), c(2, 1), c(1, 2), c(2, 2),
    ], [-1, -2], {"pending_checkpoint_ids": []}),
    "CheckpointBarrierTrackerTest.testSingleChannelMetrics": (1, [
        b(1, 0), tick(50),
    ], [1], {"last_alignment_duration_ms": 0}),
    "CheckpointBarrierTrackerTest.testMetrics": (3, [
        b(1, 1), tick(10), b(1, 0), tick(10), b(1, 2),
        eop(0), eop(1), eop(2),
    ], [1], {"last_alignment_duration_ms": 20, "num_open_channels": 0}),
    "CheckpointBarrierTrackerTest.testTriggerCheckpointsWithEndOfPartition": (3, [
        b(1, 0), b(2, 0), b(2, 1), b(3, 0), b(4, 0), b(4, 1), b(5, 1), eop(2),
    ], [4], {"pending_checkpoint_ids": [5], "num_open_channels": 2}),
    "CheckpointBarrierTrackerTest.testDeduplicateChannelsWithBothBarrierAndEndOfPartition": (3, [
        b(2, 0), b(2, 1), eop(1),
        # not triggered yet: channel 1 counts once
        ("expect", 0, 0),
        b(2, 2),
    ], [2], {"pending_checkpoint_ids": []}),
    "CheckpointBarrierTrackerTest.testTriggerCheckpointsAfterReceivedEndOfPartition": (3, [
        eop(2), b(5, 0), b(6, 0), b(6, 1), eop(1), b(7, 0),
    ], [6, 7], {"num_open_channels": 1}),
    "CheckpointBarrierTrackerTest.testNoFastPathWithChannelFinishedDuringCheckpoints": (2, [
        b(1, 0), eop(0), b(1, 1),
    ], [1], {"pending_checkpoint_ids": [], "pending_checkpoint_id": None}),
    "CheckpointBarrierTrackerTest.testCompleteAndRemoveAbortedCheckpointWithEndOfPartition": (3, [
        c(4, 0), b(4, 1), b(5, 1), eop(2),
    ], [-4], {"pending_checkpoint_ids": [5], "num_open_channels": 2}),
    "CheckpointBarrierTrackerTest.testAbortCheckpointsAfterEndOfPartitionReceived": (3, [
        eop(2), b(5, 0), b(6, 0), c(6, 1), eop(1), c(7, 0),
    ], [-5, -6, -7], {}),
    "CheckpointBarrierTrackerTest.testNoFastPathWithChannelFinishedDuringCheckpointsCancel": (2, [
        b(1, 0), eop(0), c(1, 1),
    ], [-1], {"pending_checkpoint_ids": []}),
    "CheckpointBarrierTrackerTest.testTwoLastBarriersOneByOne": (2, [
        b(1, 1), tick(1000),
        b(2, 1), tick(1000),
        b(1, 0), tick(1000),
        b(2, 0), tick(1000),
    ], [1, 2], {"last_alignment_duration_ms": 2000, "pending_checkpoint_ids": []}),
    # ---- streamflow's own -------------------------------------------------------------------
    "never_blocks_and_ignores_obsolete_and_duplicate_barriers": (2, [
        b(1, 0), b(1, 0), b(1, 1),
        b(1, 0),  # 1 is done
        b(3, 0), b(2, 1),  # 2 is older than the newest id seen: never tracked
        b(3, 1),
    ], [1, 3], {"pending_checkpoint_ids": []}),
}
# fmt: on


def _outcome(actions: list[Action]) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(actions):
        a = actions[i]
        if isinstance(a, SnapshotState):
            done = actions[i + 1]
            assert not a.unaligned
            assert done == CheckpointDone(a.barrier.checkpoint_id), actions
            out.append(a.barrier.checkpoint_id)
            i += 2
        else:
            assert isinstance(a, AbortCheckpoint), actions
            assert a.reason is AbortReason.CANCELED_UPSTREAM
            out.append(-a.checkpoint_id)
            i += 1
    return out


@pytest.mark.parametrize(("num_channels", "events", "outcome", "checks"), ROWS.values(), ids=ROWS.keys())
def test_tracker(num_channels: int, events: list[Event], outcome: list[int], checks: dict[str, Any]) -> None:
    clock = ManualClock()
    tracker = BarrierTracker(num_channels, clock)
    got: list[int] = []
    for op, n, ch in events:
        if op == "barrier":
            got += _outcome(tracker.on_barrier(ch, CheckpointBarrier(n, 0)))
        elif op == "cancel":
            got += _outcome(tracker.on_cancel_marker(ch, CancelCheckpointMarker(n)))
        elif op == "eop":
            got += _outcome(tracker.on_end_of_input(ch))
        elif op == "tick":
            clock.advance(n)
        elif op == "expect":
            assert got == [], got
        assert tracker.on_alignment_timer() == []
        assert not any(tracker.is_paused(i) for i in range(num_channels))
    assert got == outcome
    for name, expected in checks.items():
        assert getattr(tracker, name) == expected, name


def test_tracks_at_most_max_checkpoints_forgetting_the_oldest() -> None:
    tracker = BarrierTracker(2, ManualClock())
    for n in range(1, MAX_CHECKPOINTS_TO_TRACK + 2):
        assert tracker.on_barrier(0, CheckpointBarrier(n, 0)) == []
    assert tracker.pending_checkpoint_ids == list(range(2, MAX_CHECKPOINTS_TO_TRACK + 2))
    assert tracker.on_barrier(1, CheckpointBarrier(1, 0)) == []  # forgotten
    assert _outcome(tracker.on_barrier(1, CheckpointBarrier(2, 0))) == [2]


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.on_barrier(2, CheckpointBarrier(1, 0)),
        lambda t: t.on_cancel_marker(-1, CancelCheckpointMarker(1)),
        lambda t: t.on_end_of_input(1),  # already ended
        lambda t: t.on_barrier(1, CheckpointBarrier(1, 0)),  # after its end of input
        lambda t: t.is_paused(5),
    ],
    ids=["channel_out_of_range", "negative_channel", "end_twice", "barrier_after_end", "is_paused_range"],
)
def test_illegal_calls_raise_and_change_nothing(call: Any) -> None:
    tracker = BarrierTracker(2, ManualClock())
    tracker.on_barrier(0, CheckpointBarrier(1, 0))
    tracker.on_end_of_input(1)  # checkpoint 1 completes: 0 delivered, 1 ended
    before = (tracker.pending_checkpoint_ids, tracker.num_open_channels)
    with pytest.raises(ValueError):
        call(tracker)
    assert (tracker.pending_checkpoint_ids, tracker.num_open_channels) == before
    assert _outcome(tracker.on_barrier(0, CheckpointBarrier(2, 0))) == [2]


def test_needs_a_channel() -> None:
    with pytest.raises(ValueError, match="at least one channel"):
        BarrierTracker(0, ManualClock())
