"""Channel and input gate: exact backpressure, pause/resume, snapshots, ordering."""

from __future__ import annotations

import asyncio

import pytest

from streamflow.runtime.channel import Channel, InputGate
from streamflow.runtime.events import END_OF_INPUT, Watermark


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


async def test_snapshot_copies_without_consuming_and_control_first_overtakes() -> None:
    ch = Channel(10)
    gate = InputGate([ch])
    await ch.put(([1, 2], [10, 20]))
    await ch.put(Watermark(15))
    snap = ch.snapshot()
    assert snap == [([1, 2], [10, 20]), Watermark(15)]
    assert ch.size == 3
    ch.put_control_first(END_OF_INPUT)
    assert gate.poll() == (0, END_OF_INPUT)
    assert gate.poll() == (0, ([1, 2], [10, 20]))


def test_bad_capacity_and_double_gate() -> None:
    with pytest.raises(ValueError, match="capacity"):
        Channel(0)
    ch = Channel(1, "x")
    InputGate([ch])
    with pytest.raises(ValueError, match="already read"):
        InputGate([ch])
