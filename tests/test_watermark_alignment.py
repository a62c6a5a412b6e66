"""Watermark alignment (Flink's FLIP-182): the protocol classes as tables, then sources of one
group run by a manual clock, the slow one pushed by the test."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from waiting import wait_until

import streamflow as sf
from streamflow.common.time import Duration
from streamflow.runtime.events import MAX_WATERMARK, Watermark, WatermarkStatus
from streamflow.runtime.watermark_alignment import WatermarkAlignment
from streamflow.testing import ManualClock
from streamflow.testing.scripted import ScriptedSource

# -- the protocol ------------------------------------------------------------------------


def _members(*drifts: int) -> list[Any]:
    alignment = WatermarkAlignment()
    return [alignment.member(f"s{i}", 0, ("g", drift, 10)) for i, drift in enumerate(drifts)]


@pytest.mark.parametrize(
    ("reports", "expected"),
    [
        ([], [MAX_WATERMARK, MAX_WATERMARK]),  # nothing reported: no limit
        ([(0, 500)], [600, MAX_WATERMARK]),  # the only report; s1 has not reported: no limit
        ([(0, 500), (1, 200)], [300, 300]),  # the smallest report
        ([(0, 500), (1, 200), (1, 900)], [600, 600]),  # a member's newer report replaces its older
        ([(0, MAX_WATERMARK), (1, 200)], [300, 300]),  # an idle or finished member holds no one back
        ([(0, MAX_WATERMARK)], [MAX_WATERMARK, MAX_WATERMARK]),  # no overflow past MAX
        ([(0, MAX_WATERMARK - 50)], [MAX_WATERMARK, MAX_WATERMARK]),
    ],
)
def test_max_allowed_is_the_smallest_report_plus_the_drift(reports: list, expected: list) -> None:
    members = _members(100, 100)
    for who, watermark in reports:
        members[who].on_watermark(watermark)
        members[who].report()
    assert [m.max_allowed for m in members] == expected


def test_each_source_has_its_own_drift() -> None:
    tight, loose = _members(10, 1_000)
    loose.on_watermark(500)
    loose.report()
    tight.on_watermark(100)
    tight.report()
    assert (tight.max_allowed, loose.max_allowed) == (110, 1_100)


def test_reports_follow_the_latest_watermark_and_idleness() -> None:
    a, b = _members(100, 100)
    a.report()  # no watermark yet: nothing reported
    assert a.group.reported == {}
    a.on_watermark(50)
    a.on_status(True)
    a.report()
    assert a.group.reported == {"s0#0": MAX_WATERMARK}
    a.on_status(False)
    a.report()
    assert a.group.reported == {"s0#0": 50}
    b.on_watermark(20)
    b.finish()  # the end of input: MAX at once
    assert a.group.reported == {"s0#0": 50, "s1#0": MAX_WATERMARK}
    assert b.latest == MAX_WATERMARK


@pytest.mark.parametrize(
    ("latest", "max_allowed", "waiting"),
    [(None, 100, False), (100, 100, False), (101, 100, True), (MAX_WATERMARK, 100, True)],
)
def test_a_member_waits_while_ahead_of_its_max_allowed(
    latest: int | None, max_allowed: int, waiting: bool
) -> None:
    (member,) = _members(0)
    if latest is not None:
        member.on_watermark(latest)
    member.announce(max_allowed)
    assert member.waiting() is waiting


def test_an_announcement_wakes_a_member_it_lets_go_only() -> None:
    a, b = _members(100, 100)
    woken: list[str] = []
    a.wake = lambda: woken.append("a")
    b.wake = lambda: woken.append("b")
    a.on_watermark(1_000)
    a.report()  # alone: a may go to 1_100
    assert (a.waiting(), woken) == (False, [])
    b.on_watermark(0)
    b.report()  # a may go to 100: it waits; b reads
    assert (a.waiting(), b.waiting(), woken) == (True, False, [])
    b.on_watermark(950)  # past its own 100: b waits too
    b.report()  # combined 950: both may go to 1_050
    assert (a.waiting(), b.waiting(), woken) == (False, False, ["a", "b"])
    b.report()
    assert woken == ["a", "b"]  # not waiting before: not woken again


def test_members_are_shared_by_source_and_subtask() -> None:
    alignment = WatermarkAlignment()
    first = alignment.member("src", 1, ("g", 5, 10))
    assert alignment.member("src", 1, ("g", 5, 10)) is first
    other = alignment.member("other", 0, ("g", 7, 10))
    assert other.group is first.group and len(first.group.members) == 2
    assert alignment.member("x", 0, ("h", 5, 10)).group is not first.group


# -- sources of one group ----------------------------------------------------------------


class EveryRecord(sf.WatermarkGenerator):
    """A watermark at each record's timestamp, so a source's watermark is exact at every batch."""

    def on_event(self, event: Any, event_timestamp: int, output: Any) -> None:
        output.emit_watermark(Watermark(event_timestamp))

    def on_periodic_emit(self, output: Any) -> None:
        pass


DRIFT, INTERVAL, BATCH = 100, 10, 10


def aligned(drift: int = DRIFT) -> sf.WatermarkStrategy:
    return (
        sf.WatermarkStrategy.for_generator(EveryRecord)
        .with_timestamp_assigner(lambda e: e[1])
        .with_watermark_alignment("group", Duration.of_millis(drift), Duration.of_millis(INTERVAL))
    )


async def settle(rounds: int = 60) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


async def tick(clock: ManualClock, times: int = 1) -> None:
    """Move processing time one update interval at a time: each subtask reports once."""
    for _ in range(times):
        clock.advance(INTERVAL)
        await settle()


async def tick_until(clock: ManualClock, done: Any) -> None:
    """Tick until ``done()``: a source alone in front holds itself back by its own last report,
    so it moves at most the drift (plus a batch) per update interval, as in Flink."""
    for _ in range(200):
        if done():
            return
        await tick(clock)
    assert done(), "timed out"


def _max(out: list, name: str) -> int:
    return max((t for n, t in out if n == name), default=-1)


async def _start(fast: Any, slow: Any, strategy: sf.WatermarkStrategy) -> tuple[ManualClock, list, Any]:
    clock = ManualClock(0)
    env = sf.StreamExecutionEnvironment(clock=clock)
    env.set_batch_size(BATCH)
    out: list = []
    slow_stream = env.from_source(slow, strategy, "slow")
    env.from_source(fast, strategy, "fast").union(slow_stream).add_sink(out.append)
    client = await env.execute_async()
    return clock, out, client


async def _first_reports(clock: ManualClock, fast: ScriptedSource, slow: ScriptedSource, out: list) -> None:
    """Both sources at 0 and reported (before any report a source has no limit, as in Flink
    before the coordinator's first announcement)."""
    fast.push(("a", 0))
    slow.push(("b", 0))
    await wait_until(lambda: len(out) == 2)
    await tick(clock)


async def test_a_source_ahead_of_its_group_waits_until_the_group_catches_up() -> None:
    fast, slow = ScriptedSource(end=False), ScriptedSource(end=False)
    clock, out, client = await _start(fast, slow, aligned())
    await _first_reports(clock, fast, slow, out)
    fast.push(*[("a", t) for t in range(1, 2_000)])
    await wait_until(lambda: _max(out, "a") >= DRIFT)
    await tick(clock, 3)
    # the group's watermark is 0: the fast source stops after the batch that took it past 100
    assert DRIFT <= _max(out, "a") <= DRIFT + BATCH
    drifts = {k: v for k, v in client.get_metrics().items() if k.endswith(".watermarkAlignmentDrift")}
    # Flink's metric: the watermark minus the max allowed one (the group's 0 plus the drift)
    assert sorted(drifts.values()) == [0 - DRIFT, _max(out, "a") - DRIFT]
    slow.push(("b", 500))
    await wait_until(lambda: _max(out, "b") == 500)
    await tick(clock, 12)  # the fast source's own report is the group's smallest: 100 a report
    assert 500 + DRIFT <= _max(out, "a") <= 500 + DRIFT + BATCH
    slow.finish()  # the slow source ends: MAX reported, it holds no one back
    await tick_until(clock, lambda: _max(out, "a") == 1_999)
    fast.finish()
    await asyncio.wait_for(client.get_job_execution_result(), 30)
    assert sorted(t for n, t in out if n == "a") == list(range(2_000))


async def test_without_alignment_the_fast_source_runs_ahead() -> None:
    """The same job without alignment: what the test above prevents."""
    fast, slow = ScriptedSource(end=False), ScriptedSource(end=False)
    plain = sf.WatermarkStrategy.for_generator(EveryRecord).with_timestamp_assigner(lambda e: e[1])
    clock, out, client = await _start(fast, slow, plain)
    await _first_reports(clock, fast, slow, out)
    fast.push(*[("a", t) for t in range(1, 2_000)])
    await wait_until(lambda: _max(out, "a") == 1_999)
    await client.cancel()


async def test_an_idle_source_holds_no_one_back() -> None:
    fast, slow = ScriptedSource(end=False), ScriptedSource(end=False)
    clock, out, client = await _start(fast, slow, aligned().with_idleness(Duration.of_millis(25)))
    await _first_reports(clock, fast, slow, out)
    fast.push(*[("a", t) for t in range(1, 2_000)])
    await wait_until(lambda: _max(out, "a") >= DRIFT)
    await tick(clock)
    assert _max(out, "a") <= DRIFT + BATCH
    # the slow source gets nothing for longer than its idle timeout: it reports MAX
    await tick_until(clock, lambda: _max(out, "a") == 1_999)
    await client.cancel()


class PerPartitionSource(ScriptedSource):
    """A source that generates its own watermarks (as KafkaSource does per partition): the
    strategy goes to the source, whose reader returns the watermarks from ``poll_batch``."""

    bounded = False

    def with_watermark_strategy(self, strategy: Any, interval_ms: int) -> PerPartitionSource:
        self.strategy = strategy
        return self


async def test_a_source_generating_its_own_watermarks_is_aligned() -> None:
    fast, slow = PerPartitionSource(end=False), PerPartitionSource(end=False)
    clock, out, client = await _start(fast, slow, aligned())
    fast.push(("a", 0), Watermark(0))
    slow.push(("b", 0), Watermark(0))
    await wait_until(lambda: len(out) == 2)
    await tick(clock)
    for t in range(1, 300):
        fast.push(("a", t), Watermark(t))
    await wait_until(lambda: _max(out, "a") >= DRIFT)
    await tick(clock, 3)
    assert _max(out, "a") == DRIFT + 1  # the record after the watermark that took it past 100
    slow.push(WatermarkStatus.IDLE)
    await tick_until(clock, lambda: _max(out, "a") == 299)
    await client.cancel()


async def test_a_waiting_source_still_takes_checkpoints(tmp_path: Any) -> None:
    fast, slow = ScriptedSource(end=False), ScriptedSource(end=False)
    clock, out, client = await _start(fast, slow, aligned())
    await _first_reports(clock, fast, slow, out)
    fast.push(*[("a", t) for t in range(1, 2_000)])
    await wait_until(lambda: _max(out, "a") >= DRIFT)
    await tick(clock)
    path = await asyncio.wait_for(client.trigger_savepoint(str(tmp_path / "sp")), 30)
    assert path and _max(out, "a") <= DRIFT + BATCH
    await client.cancel()


def test_alignment_outside_from_source_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    env = sf.StreamExecutionEnvironment()
    out: list = []
    with caplog.at_level(logging.WARNING):
        stream = env.from_collection([("a", 1), ("a", 2)]).assign_timestamps_and_watermarks(aligned())
    stream.add_sink(out.append)
    assert "watermark alignment 'group' is ignored" in caplog.text
    env.execute()
    assert out == [("a", 1), ("a", 2)]


def test_a_member_waiting_a_minute_says_who_holds_it_back(caplog: pytest.LogCaptureFixture) -> None:
    alignment = WatermarkAlignment()
    fast = alignment.member("fast", 0, ("g", 100, 7_000))  # 60 s: the 9th report (ceiling)
    slow = alignment.member("slow", 0, ("g", 100, 7_000))
    slow.on_watermark(0)
    slow.report()
    fast.on_watermark(5_000)
    with caplog.at_level(logging.WARNING):
        for _ in range(8):
            fast.report()
        assert caplog.text == ""
        for _ in range(3):
            fast.report()  # once a wait
    assert caplog.text.count("has not read for 60 s") == 1
    assert "held back by slow#0 at 0" in caplog.text and "with_idleness()" in caplog.text
    slow.on_watermark(4_950)
    slow.report()
    fast.report()
    assert fast.waiting_reports == 0
