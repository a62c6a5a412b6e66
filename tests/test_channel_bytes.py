"""In-flight byte budget: per channel and per job (issue 12 item 5), and the size estimate."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

import streamflow as sf
from streamflow.runtime.channel import ByteBudget, Channel, InputGate
from streamflow.runtime.events import END_OF_INPUT, AlignmentType, CheckpointBarrier
from streamflow.runtime.record_size import OBJECT_OVERHEAD, batch_size, parse_memory_size, record_size

MB = 2**20


def blob(n: int) -> bytes:
    return b"x" * n


@dataclasses.dataclass
class Event:
    key: str
    payload: bytes


class Slotted:
    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


@pytest.mark.parametrize(
    ("record", "at_least", "at_most"),
    [
        (blob(10 * MB), 10 * MB, 10 * MB + 100),
        ("é" * 1000, 1000, 1200),
        (("k", blob(MB)), MB, MB + 200),
        ([1, 2, blob(MB)], MB, MB + 300),
        ({"k": blob(MB)}, MB, MB + 400),
        (Event("k", blob(MB)), MB, MB + 400),
        (Slotted(blob(MB)), MB, MB + 200),
        (memoryview(blob(MB)), MB, MB + 100),
        (7, 1, 100),
        (None, 1, 100),
    ],
    ids=["bytes", "str", "tuple", "list", "dict", "dataclass", "slots", "memoryview", "int", "none"],
)
def test_record_size_counts_the_large_fields(record: Any, at_least: int, at_most: int) -> None:
    assert at_least <= record_size(record) <= at_most


def test_batch_size_sums_strings_and_samples_other_records() -> None:
    assert batch_size([]) == 0
    assert batch_size([b"ab", b"cde", "f"]) == 6 + 3 * OBJECT_OVERHEAD
    uniform = [("k", blob(1000))] * 10
    assert batch_size(uniform) == 10 * record_size(uniform[0])
    # the largest of first, middle and last counts for every record
    mixed = [("k", blob(10)), ("k", blob(5000)), ("k", blob(10))]
    assert batch_size(mixed) == 3 * record_size(mixed[1])
    # a record without a length among strings: sampled instead
    assert batch_size([b"ab", 3, b"cd"]) == 3 * record_size(b"ab")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1024, 1024), ("64 mb", 64 * MB), ("1g", 2**30), ("512KB", 512 * 1024), ("10", 10), (None, None)],
)
def test_parse_memory_size(value: Any, expected: int | None) -> None:
    assert parse_memory_size(value, "budget") == expected


@pytest.mark.parametrize("value", ["lots", "12 parsecs", "", 0, -5, True, 1.5])
def test_parse_memory_size_refuses(value: Any) -> None:
    with pytest.raises(ValueError, match="budget"):
        parse_memory_size(value, "budget")


async def test_channel_byte_budget_backpressures_large_records_before_the_record_capacity() -> None:
    ch = Channel(4096, max_bytes=3 * MB + 1000)  # + per-record overhead
    gate = InputGate([ch])
    await ch.put(([blob(MB)], None))
    await ch.put(([blob(MB)], None))
    assert ch.queued_bytes >= 2 * MB
    blocked = asyncio.ensure_future(ch.put(([blob(2 * MB)], None)))  # 2 + 2 MB > 3 MB
    await asyncio.sleep(0)
    assert not blocked.done()
    gate.poll()  # frees 1 MB: 1 + 2 MB fits
    await asyncio.sleep(0)
    assert blocked.done()
    gate.poll()
    gate.poll()
    assert ch.queued_bytes == 0 and ch.size == 0


async def test_a_batch_larger_than_the_byte_budget_enters_an_empty_channel() -> None:
    ch = Channel(4096, max_bytes=MB)
    gate = InputGate([ch])
    await asyncio.wait_for(ch.put(([blob(5 * MB)], None)), 1)  # empty: admitted
    blocked = asyncio.ensure_future(ch.put(([b"x"], None)))
    await asyncio.sleep(0)
    assert not blocked.done()
    gate.poll()
    await asyncio.sleep(0)
    assert blocked.done()
    # control events never wait for bytes
    await asyncio.wait_for(ch.put(END_OF_INPUT), 1)


async def test_job_budget_is_shared_and_any_read_wakes_a_waiting_writer() -> None:
    budget = ByteBudget(3 * MB + 1000)  # + per-record overhead
    a, b = Channel(4096, "a", budget=budget), Channel(4096, "b", budget=budget)
    gate_a, gate_b = InputGate([a]), InputGate([b])
    await a.put(([blob(MB)], None))
    await a.put(([blob(MB)], None))
    await b.put(([blob(MB)], None))
    assert budget.used >= 3 * MB
    blocked = asyncio.ensure_future(b.put(([blob(MB)], None)))  # b is not empty: waits for the job
    await asyncio.sleep(0)
    assert not blocked.done()
    gate_a.poll()  # another channel is read: the job has room again
    await asyncio.sleep(0)
    assert blocked.done()
    assert budget.peak <= 3 * MB + 1000
    while gate_a.poll() or gate_b.poll():
        pass
    assert budget.used == 0 and a.queued_bytes == 0 and b.queued_bytes == 0


async def test_priority_and_before_end_events_keep_the_byte_accounting() -> None:
    budget = ByteBudget(100 * MB)
    ch = Channel(4096, max_bytes=100 * MB, budget=budget)
    gate = InputGate([ch])
    await ch.put(([blob(MB)], None))
    await ch.put(END_OF_INPUT)
    assert ch.put_priority(CheckpointBarrier(1, 0, alignment=AlignmentType.UNALIGNED))
    assert ch.put_before_end(CheckpointBarrier(2, 0))
    got = []
    while (polled := gate.poll()) is not None:
        got.append(polled[1])
        gate.resume(0)
    assert [type(x).__name__ for x in got] == [
        "CheckpointBarrier",
        "tuple",
        "CheckpointBarrier",
        "EndOfInput",
    ]
    assert ch.queued_bytes == 0 and budget.used == 0 and ch.size == 0


def test_bad_byte_budgets() -> None:
    with pytest.raises(ValueError, match="channel byte budget"):
        Channel(10, max_bytes=0)
    with pytest.raises(ValueError, match="job byte budget"):
        ByteBudget(0)
    env = sf.StreamExecutionEnvironment()
    with pytest.raises(ValueError, match="channel byte budget"):
        env.set_channel_byte_budget("a lot")
    with pytest.raises(ValueError, match="job byte budget"):
        env.configure({"taskmanager.memory.network.max": "-1"})


async def slow(record: Any) -> Any:
    await asyncio.sleep(0.002)
    return record


def _big_records_job(job_budget: str, channel_budget: str | None) -> tuple[list[int], int]:
    env = sf.StreamExecutionEnvironment().set_parallelism(1).set_batch_size(1)
    env.configure({"taskmanager.memory.network.max": job_budget}).set_channel_byte_budget(channel_budget)
    record = blob(2 * MB)
    seen: list[int] = []
    (
        env.from_collection(range(60))
        .map(lambda i: (i, record))
        .disable_chaining()
        .map(slow, concurrency=1)
        .disable_chaining()
        .sink_to(lambda r: seen.append(r[0]))
    )
    result = env.execute("big-records")
    return seen, int(result.metrics["job.inFlightBytesPeak"])


@pytest.mark.parametrize("channel_budget", [None, "4 mb"])
def test_large_records_behind_a_slow_sink_stay_within_the_byte_budget(channel_budget: str | None) -> None:
    """Old main counted records only: 2 MB records filled 4,096-record channels (GBs)."""
    seen, peak = _big_records_job("8 mb", channel_budget)
    assert seen == list(range(60))
    # each channel takes one batch when empty, so the budget may be passed by one record
    assert 2 * MB <= peak <= 8 * MB + 2 * MB + 1000, peak
    if channel_budget is not None:
        assert peak <= 2 * (4 * MB + 1000), peak  # two channels, each within its own budget


def test_without_a_tight_budget_large_records_pile_up() -> None:
    seen, peak = _big_records_job("1 gb", None)
    assert seen == list(range(60))
    assert peak > 16 * MB, peak  # what the budget prevents
