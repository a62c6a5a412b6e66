"""Channel and input gate: exact backpressure, pause/resume, snapshots, ordering."""

from __future__ import annotations

import asyncio

import pytest

from streamflow.runtime.channel import Channel, InputGate
from streamflow.runtime.events import (
    END_OF_INPUT,
    AlignmentType,
    CancelCheckpointMarker,
    CheckpointBarrier,
    Watermark,
)


def ub(n: int) -> CheckpointBarrier:
    return CheckpointBarrier(n, 0, alignment=AlignmentType.UNALIGNED)


async def test_capacity_counts_records_and_blocks_writer_exactly() -> None:
    ch = Channel(10)
    InputGate([ch])
    await ch.put(([1, 2, 3, 4, 5, 6], None))
    await ch.put(([7, 8, 9], None))
    assert ch.size == 9
    blocked = asyncio.ensure_future(ch.put(([10, 11], None)))  # 9 + 2 > 10
    await asyncio.sleep(0)
    assert not blocked.done()
    ch.get_nowait()  # frees 6
    await asyncio.sleep(0)
    assert blocked.done()
    assert ch.size == 5


async def test_control_event_counts_one() -> None:
    ch = Channel(2)
    InputGate([ch])
    await ch.put(([1], None))
    await ch.put(Watermark(5))
    assert ch.size == 2
    blocked = asyncio.ensure_future(ch.put(END_OF_INPUT))
    await asyncio.sleep(0)
    assert not blocked.done()
    ch.get_nowait()
    await asyncio.sleep(0)
    assert blocked.done()


async def test_oversized_batch_admitted_only_into_empty_channel() -> None:
    ch = Channel(3)
    InputGate([ch])
    await ch.put((list(range(10)), None))  # empty: admitted
    blocked = asyncio.ensure_future(ch.put(([1], None)))
    await asyncio.sleep(0)
    assert not blocked.done()
    ch.get_nowait()
    await asyncio.sleep(0)
    assert blocked.done()


async def test_gate_round_robin_and_pause_per_channel() -> None:
    a, b = Channel(100, "a"), Channel(100, "b")
    gate = InputGate([a, b])
    await a.put(([1], None))
    await a.put(([2], None))
    await b.put(([3], None))
    got = [gate.poll()[1][0][0] for _ in range(3)]  # type: ignore[index]
    assert got == [1, 3, 2]
    assert gate.poll() is None

    await a.put(([4], None))
    await b.put(([5], None))
    gate.pause(0)
    assert gate.poll() == (1, ([5], None))
    assert gate.poll() is None  # a is paused although it holds data
    await a.put(([6], None))  # writes to a paused channel still succeed
    assert gate.poll() is None
    gate.resume(0)
    assert gate.poll() == (0, ([4], None))
    assert gate.poll() == (0, ([6], None))


async def test_wait_wakes_on_data_and_on_wake() -> None:
    ch = Channel(10)
    gate = InputGate([ch])
    waiter = asyncio.ensure_future(gate.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    await ch.put(([1], None))
    await asyncio.sleep(0)
    assert waiter.done()
    gate.poll()
    waiter = asyncio.ensure_future(gate.wait())
    await asyncio.sleep(0)
    gate.wake()
    await asyncio.sleep(0)
    assert waiter.done()


async def test_paused_channel_does_not_wake_reader() -> None:
    ch = Channel(10)
    gate = InputGate([ch])
    gate.pause(0)
    waiter = asyncio.ensure_future(gate.wait())
    await ch.put(([1], None))
    await asyncio.sleep(0)
    assert not waiter.done()
    gate.resume(0)
    await asyncio.sleep(0)
    assert waiter.done()


async def test_snapshot_copies_without_consuming_and_priority_event_overtakes_data() -> None:
    ch = Channel(10)
    gate = InputGate([ch])
    await ch.put(([1, 2], [10, 20]))
    await ch.put(Watermark(15))
    snap = ch.snapshot()
    assert snap == [([1, 2], [10, 20]), Watermark(15)]
    assert ch.size == 3
    assert ch.put_priority(ub(1)) == [([1, 2], [10, 20])]
    assert gate.poll() == (0, ub(1))
    assert gate.poll() == (0, ([1, 2], [10, 20]))


async def test_priority_events_keep_fifo_order_among_themselves() -> None:
    """Flink's PrioritizedDeque: unaligned barrier 2 overtakes the data, never barrier 1 that
    is still queued (old main put it at the head: the reader saw 2 before 1)."""
    ch = Channel(100)
    gate = InputGate([ch])
    await ch.put(([1], None))
    assert ch.put_priority(ub(1)) == [([1], None)]
    await ch.put(([2], None))
    assert ch.put_priority(ub(2)) == [([1], None), ([2], None)]
    await ch.put(([3], None))
    assert ch.put_priority(ub(3)) == [([1], None), ([2], None), ([3], None)]
    got = [gate.poll()[1] for _ in range(6)]  # type: ignore[index]
    assert got == [ub(1), ub(2), ub(3), ([1], None), ([2], None), ([3], None)]


async def test_priority_event_never_overtakes_a_queued_aligned_barrier_or_cancel_marker() -> None:
    ch = Channel(100)
    gate = InputGate([ch])
    await ch.put(([1], None))
    await ch.put(CheckpointBarrier(1, 0))  # aligned, behind the data
    await ch.put(([2], None))
    await ch.put(CancelCheckpointMarker(1))
    await ch.put(([3], None))
    await ch.put(Watermark(5))
    # overtakes only what follows the last queued checkpoint event
    assert ch.put_priority(ub(2)) == [([3], None)]
    got = [gate.poll()[1] for _ in range(7)]  # type: ignore[index]
    assert got == [
        ([1], None), CheckpointBarrier(1, 0), ([2], None), CancelCheckpointMarker(1), ub(2),
        ([3], None), Watermark(5),
    ]
    assert ch.size == 0


def test_bad_capacity_and_double_gate() -> None:
    with pytest.raises(ValueError, match="capacity"):
        Channel(0)
    ch = Channel(1, "x")
    InputGate([ch])
    with pytest.raises(ValueError, match="already read"):
        InputGate([ch])


async def test_a_deselected_channel_stays_paused_through_a_barrier_resume() -> None:
    """Input selection (runtime/input_selection.py) deselects a channel with the pause aligned
    barriers use; the alignment's resume_all does not read it, only select() does."""
    a, b = Channel(4, name="a"), Channel(4, name="b")
    gate = InputGate([a, b])
    gate.deselect(1)
    await b.put(([1], None))
    await a.put(([2], None))
    gate.pause(0)
    gate.resume_all()
    assert gate.poll() == (0, ([2], None))
    assert gate.poll() is None and b.paused
    gate.select(1)
    assert gate.poll() == (1, ([1], None))
