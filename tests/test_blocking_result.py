"""``runtime/blocking_result.py``: a blocking exchange's persisted result, scripted: what is
written comes back whole and in order, from memory and from its spill file, as often as it
is read, with the job's memory budget kept; a released result is refused."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest

from streamflow.runtime.blocking_result import BlockingResult, ResultBudget
from streamflow.runtime.channel import Channel
from streamflow.runtime.events import END_OF_INPUT, Watermark, WatermarkStatus
from streamflow.runtime.sort_runs import RunCodec


def _codec(pickle_reason: str | None = None) -> RunCodec:
    """The edge's spill codec; with ``pickle_reason`` the job opted in to pickling refused records."""
    return RunCodec(
        "exchange 'up' -> 'down'", 0, None, pickle_reason, set(),
        what="a blocking exchange's result", memory_key="streamflow.blocking-results.memory",
    )  # fmt: skip


ITEMS: list[Any] = [
    ([(1, "a"), (2, "b")], [10, 20]),
    Watermark(5),
    ([{"k": 1}, [1, 2], {3}], None),
    WatermarkStatus.IDLE,
    ([decimal.Decimal("1.5"), datetime.datetime(2026, 1, 2, 3, 4, 5), b"x", None, True], [1, 2, 3, 4, 5]),
    ([(3, "c")], [30]),
    Watermark(2**63 - 1),
    END_OF_INPUT,
]


@pytest.mark.parametrize("limit", [1 << 30, 0, 300], ids=["memory", "disk", "both"])
async def test_what_is_written_is_read_back_whole_in_order_every_time(limit: int) -> None:
    budget = ResultBudget(limit)
    result = BlockingResult("up[0] -> down[0]", budget, _codec())
    for item in ITEMS:
        await result.put(item)
    assert result.records_in == 11
    assert budget.used <= limit
    assert (budget.spilled == 1) is (limit < 1 << 30)
    for _ in range(2):  # a restarted consumer reads it again
        assert list(result.read()) == ITEMS
    channel = Channel(100)
    await result.feed(channel)
    assert [channel.get_nowait() for _ in range(len(channel))] == ITEMS
    result.release()
    assert budget.used == 0
    with pytest.raises(RuntimeError, match="read after it was released"):
        list(result.read())
    with pytest.raises(RuntimeError, match="written after it was released"):
        await result.put(ITEMS[0])


async def test_each_read_hands_out_its_own_lists() -> None:
    result = BlockingResult("r", ResultBudget(1 << 30), _codec())
    await result.put(([1, 2], [5, 6]))
    first = next(result.read())
    first[0].append(3)
    first[1].clear()
    assert next(result.read()) == ([1, 2], [5, 6])


class Opaque:
    def __init__(self, v: int) -> None:
        self.v = v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.v == self.v

    __hash__ = None  # type: ignore[assignment]


async def test_a_refused_record_fails_unless_the_job_opted_in_to_pickling() -> None:
    refused = BlockingResult("up[0] -> down[1]", ResultBudget(0), _codec())
    with pytest.raises(TypeError, match=r"streamflow\.blocking-results\.memory") as info:
        await refused.put(([Opaque(1)], None))
    assert info.value.__notes__ == ["streamflow: while spilling the blocking result 'up[0] -> down[1]'"]
    pickled = BlockingResult("r", ResultBudget(0), _codec("the job's records codec is PickleCodec()"))
    await pickled.put(([Opaque(1), 2], None))
    assert list(pickled.read()) == [([Opaque(1), 2], None)]


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        ResultBudget(-1)
