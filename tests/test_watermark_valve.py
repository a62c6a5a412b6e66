"""Scripted tests of WatermarkValve.

Every scenario of Flink's StatusWatermarkValveTest
(flink-streaming-java/src/test/java/org/apache/flink/streaming/runtime/watermarkstatus/
StatusWatermarkValveTest.java) is ported as a script, plus streamflow's own scenarios. A script
is a list of steps ``(op, channel, arg, expected)``: ``op`` is ``"wm"`` (feed a watermark),
``"st"`` (feed a status) or ``"state"`` (assert ``channel_state(channel) == arg``). After each
feed the output must be exactly ``expected``, nothing more.
"""

from __future__ import annotations

from typing import Any

import pytest

from streamflow.runtime.events import MAX_WATERMARK, MIN_WATERMARK, Watermark, WatermarkStatus
from streamflow.runtime.watermark_valve import ChannelState, WatermarkValve

A = WatermarkStatus.ACTIVE
I = WatermarkStatus.IDLE  # noqa: E741
W = Watermark
MAX = MAX_WATERMARK
MIN = MIN_WATERMARK

Step = tuple[str, int, Any, list[Any]]

# fmt: off
SCRIPTS: dict[str, tuple[int, list[Step]]] = {
    # ---- ported from Flink's StatusWatermarkValveTest -----------------------------------
    "flink_single_input_increasing_watermarks": (1, [
        ("wm", 0, 0, [W(0)]),
        ("wm", 0, 25, [W(25)]),
    ]),
    "flink_single_input_decreasing_watermarks_yield_no_output": (1, [
        ("wm", 0, 25, [W(25)]),
        ("wm", 0, 18, []),
        ("wm", 0, 42, [W(42)]),
    ]),
    "flink_single_input_status_toggling": (1, [
        ("st", 0, A, []),  # channels start ACTIVE
        ("st", 0, I, [I]),
        ("st", 0, I, []),
        ("st", 0, A, [A]),
    ]),
    "flink_single_input_watermark_intact_during_idleness": (1, [
        ("wm", 0, 25, [W(25)]),
        ("st", 0, I, [I]),
        ("wm", 0, 50, []),
        ("state", 0, ChannelState(25, I, False), []),
        ("st", 0, A, [A]),
        ("wm", 0, 50, [W(50)]),
    ]),
    "flink_multi_input_yields_watermark_only_when_all_channels_have_one": (3, [
        ("wm", 0, 0, []),
        ("wm", 1, 0, []),
        ("wm", 2, 0, [W(0)]),
    ]),
    "flink_multi_input_increasing_watermarks": (3, [
        ("wm", 0, 0, []),
        ("wm", 1, 0, []),
        ("wm", 2, 0, [W(0)]),
        ("wm", 0, 12, []),
        ("wm", 2, 8, []),
        ("wm", 2, 10, []),
        ("wm", 1, 15, [W(10)]),  # min is channel 2 @ 10
        ("wm", 2, 17, [W(12)]),  # min is channel 0 @ 12
        ("wm", 0, 20, [W(15)]),  # min is channel 1 @ 15
    ]),
    "flink_multi_input_decreasing_watermarks_yield_no_output": (3, [
        ("wm", 0, 25, []),
        ("wm", 1, 10, []),
        ("wm", 2, 17, [W(10)]),
        ("wm", 0, 12, []),
        ("wm", 1, 8, []),
        ("wm", 2, 15, []),
    ]),
    "flink_multi_input_status_toggling": (2, [
        ("st", 0, A, []),
        ("st", 1, A, []),
        ("st", 1, I, []),
        ("st", 0, I, [I]),  # now all channels are idle
        ("st", 0, I, []),
        ("st", 1, I, []),
        ("st", 1, A, [A]),  # one active channel makes the valve active
        ("st", 0, A, []),  # already active
    ]),
    "flink_multi_input_advancing_with_partially_idle_channels": (3, [
        ("wm", 0, 15, []),
        ("wm", 1, 10, []),
        ("st", 2, I, [W(10)]),  # min over the remaining active channels
        ("wm", 1, 18, [W(15)]),
        ("wm", 0, 20, [W(18)]),
    ]),
    "flink_multi_input_advancing_as_channels_individually_become_idle": (3, [
        ("wm", 0, 25, []),
        ("wm", 1, 10, []),
        ("wm", 2, 17, [W(10)]),
        ("st", 1, I, [W(17)]),
        ("st", 2, I, [W(25)]),
    ]),
    "flink_multi_input_flush_max_watermark_and_idle_once_all_idle": (3, [
        ("wm", 0, 10, []),
        ("wm", 1, 5, []),
        ("wm", 2, 3, [W(3)]),
        ("st", 0, I, []),
        ("st", 1, I, []),
        ("st", 2, I, [W(10), I]),
    ]),
    "flink_multi_input_realignment_after_resume_active": (3, [
        ("wm", 0, 10, []),
        ("wm", 1, 7, []),
        ("wm", 2, 3, [W(3)]),
        ("st", 2, I, [W(7)]),
        ("st", 2, A, []),
        ("state", 2, ChannelState(3, A, False), []),  # behind the output: unaligned
        ("wm", 2, 5, []),  # accepted, but does not count
        ("state", 2, ChannelState(5, A, False), []),
        ("wm", 2, 9, []),  # caught up: aligned again
        ("state", 2, ChannelState(9, A, True), []),
        ("wm", 1, 12, [W(9)]),  # the realigned channel now holds the min
    ]),
    "flink_no_output_when_all_active_channels_are_unaligned": (3, [
        ("wm", 0, 10, []),
        ("wm", 1, 7, []),
        ("st", 2, I, [W(7)]),
        ("st", 2, A, []),  # still unaligned
        ("st", 0, I, []),
        ("st", 1, I, []),  # only channel 2 is active, and it is unaligned: no MAX
    ]),
    # ---- FLINK-40475 (apache/flink#29024, "Fix watermark loss and stall in
    # StatusWatermarkValve when subpartitions realign after idleness"): its two symptoms -------
    "flink_40475_all_idle_flushes_max_whichever_channel_goes_idle_last": (3, [
        ("wm", 0, 40, []),
        ("wm", 1, 10, []),
        ("wm", 2, 20, [W(10)]),
        ("st", 1, I, [W(20)]),
        ("st", 1, A, []),  # 10 < 20: unaligned
        ("st", 0, I, []),
        ("st", 2, I, []),  # channel 1 still active (unaligned): nothing to advance
        ("st", 1, I, [W(40), I]),  # the last to go idle is unaligned: the max is flushed anyway
    ]),
    "flink_40475_a_channel_realigned_alone_is_not_stalled": (3, [
        ("wm", 0, 40, []),
        ("wm", 1, 10, []),
        ("wm", 2, 20, [W(10)]),
        ("st", 1, I, [W(20)]),
        ("st", 1, A, []),  # unaligned at 10
        ("st", 0, I, []),  # 40 was never the output
        ("st", 2, I, []),  # no aligned channel left
        ("st", 0, A, [W(40)]),  # aligned again, the only one: its 40 is the minimum now
        ("wm", 1, 45, []),  # channel 1 catches up (45 >= 40): aligned
        ("wm", 0, 50, [W(45)]),
    ]),
    "flink_40475_the_watermark_follows_the_active": (2, [
        ("wm", 0, 30, []),
        ("wm", 1, 10, [W(10)]),
        ("st", 0, I, []),
        ("st", 1, I, [W(30), I]),
        ("st", 1, A, [A]),  # 10 < 30: unaligned, nothing to re-derive
        ("st", 0, A, []),  # 30 >= 30: aligned, minimum 30 == output
        ("wm", 0, 35, [W(35)]),
    ]),
    # ---- streamflow scenarios -------------------------------------------------------------
    "initial_state": (2, [
        ("state", 0, ChannelState(MIN, A, True), []),
        ("state", 1, ChannelState(MIN, A, True), []),
    ]),
    "equal_watermark_is_dropped": (1, [
        ("wm", 0, 5, [W(5)]),
        ("wm", 0, 5, []),
        ("state", 0, ChannelState(5, A, True), []),
    ]),
    "min_watermark_input_is_not_above_start": (1, [
        ("wm", 0, MIN, []),
        ("wm", 0, MIN + 1, [W(MIN + 1)]),
    ]),
    "never_goes_back_and_realigns": (2, [
        ("wm", 0, 10, []),
        ("wm", 1, 20, [W(10)]),
        ("st", 0, I, [W(20)]),
        ("st", 0, A, []),
        ("state", 0, ChannelState(10, A, False), []),
        ("wm", 0, 15, []),  # behind the output: must not pull it back to 15
        ("wm", 1, 30, [W(30)]),  # the unaligned channel does not hold the output back
        ("wm", 0, 25, []),
        ("wm", 0, 35, []),  # aligned again; min(35, 30) == last output
        ("state", 0, ChannelState(35, A, True), []),
        ("wm", 1, 40, [W(35)]),
    ]),
    "single_input_to_the_end": (1, [
        ("wm", 0, 5, [W(5)]),
        ("wm", 0, 3, []),
        ("wm", 0, MAX, [W(MAX)]),
        ("wm", 0, MAX, []),
    ]),
    "all_idle_then_one_active_again_does_not_pull_output_back": (2, [
        ("wm", 0, 10, []),
        ("wm", 1, 20, [W(10)]),
        ("st", 0, I, [W(20)]),
        ("st", 1, I, [I]),  # its watermark was already output: nothing to flush
        ("st", 0, A, [A]),  # 10 < 20: unaligned
        ("wm", 0, 15, []),
        ("wm", 0, 25, [W(25)]),
    ]),
    "all_idle_flushes_max_then_active_again": (2, [
        ("wm", 0, 10, []),
        ("wm", 1, 20, [W(10)]),
        ("st", 1, I, []),
        ("st", 0, I, [W(20), I]),
        ("st", 1, A, [A]),  # 20 >= 20: aligned right away
        ("state", 1, ChannelState(20, A, True), []),
        ("wm", 1, 21, [W(21)]),
        ("st", 0, A, []),
        ("wm", 0, 15, []),
    ]),
    "all_idle_flush_skips_max_not_above_output": (3, [
        ("wm", 0, 5, []),
        ("wm", 1, 7, []),
        ("wm", 2, 9, [W(5)]),
        ("st", 2, I, []),
        ("st", 1, I, []),
        ("st", 0, I, [W(9), I]),
    ]),
    "last_idle_channel_behind_output_flushes_nothing": (2, [
        ("wm", 0, 10, []),
        ("wm", 1, 20, [W(10)]),
        ("st", 0, I, [W(20)]),
        ("st", 0, A, []),  # unaligned at 10
        ("st", 1, I, []),  # channel 0 still active, but nothing is aligned
        ("st", 0, I, [I]),  # 10 != 20: no flush
    ]),
    "idle_channel_watermarks_are_ignored": (2, [
        ("st", 1, I, []),
        ("wm", 1, 100, []),
        ("state", 1, ChannelState(MIN, I, False), []),
        ("wm", 0, 5, [W(5)]),
        ("wm", 1, 200, []),
        ("wm", 0, 6, [W(6)]),
    ]),
    "idle_valve_ignores_watermarks": (1, [
        ("st", 0, I, [I]),
        ("wm", 0, 5, []),
        ("state", 0, ChannelState(MIN, I, False), []),
    ]),
    "end_of_input_sends_max_watermark": (2, [
        ("wm", 0, 5, []),
        ("wm", 1, MAX, [W(5)]),  # channel 1 ended
        ("wm", 0, 8, [W(8)]),
        ("wm", 0, MAX, [W(MAX)]),
    ]),
    "end_of_input_on_an_idle_channel_sends_active_first": (2, [
        ("wm", 0, 5, []),
        ("st", 1, I, [W(5)]),
        ("wm", 1, MAX, []),  # dropped: the channel is idle
        ("st", 1, A, []),
        ("wm", 1, MAX, []),  # aligned again, min is still channel 0 @ 5
        ("wm", 0, MAX, [W(MAX)]),
    ]),
    "active_on_active_valve_emits_nothing": (3, [
        ("st", 0, I, []),
        ("st", 0, A, []),
        ("wm", 0, 1, []),
        ("wm", 1, 1, []),
        ("wm", 2, 1, [W(1)]),
    ]),
}
# fmt: on


def _run(num_inputs: int, script: list[Step]) -> None:
    valve = WatermarkValve(num_inputs)
    last_watermark, idle = MIN, False
    for number, (op, channel, arg, expected) in enumerate(script):
        where = f"step {number}: {(op, channel, arg)}"
        if op == "state":
            assert valve.channel_state(channel) == arg, where
            continue
        if op == "wm":
            out = valve.input_watermark(channel, arg)
        elif op == "st":
            out = valve.input_status(channel, arg)
        else:
            raise AssertionError(f"unknown op {op!r}")
        assert out == expected, where
        for event in out:
            if isinstance(event, Watermark):
                assert event.timestamp > last_watermark, where  # strictly increasing
                last_watermark = event.timestamp
            else:
                assert (event is I) != idle, where  # statuses only on change
                idle = event is I
        assert valve.last_output_watermark == last_watermark, where
        assert valve.is_idle == idle, where


@pytest.mark.parametrize(("num_inputs", "script"), SCRIPTS.values(), ids=SCRIPTS.keys())
def test_script(num_inputs: int, script: list[Step]) -> None:
    _run(num_inputs, script)


@pytest.mark.parametrize("num_inputs", [0, -1])
def test_needs_an_input(num_inputs: int) -> None:
    with pytest.raises(ValueError):
        WatermarkValve(num_inputs)


@pytest.mark.parametrize(
    ("op", "channel"),
    [("wm", 2), ("wm", -1), ("st", 2), ("st", -1), ("state", 2), ("state", -1)],
)
def test_bad_channel_raises_and_changes_nothing(op: str, channel: int) -> None:
    valve = WatermarkValve(2)
    valve.input_watermark(0, 3)
    with pytest.raises(ValueError):
        if op == "wm":
            valve.input_watermark(channel, 10)
        elif op == "st":
            valve.input_status(channel, I)
        else:
            valve.channel_state(channel)
    assert [valve.channel_state(c) for c in range(2)] == [
        ChannelState(3, A, True),
        ChannelState(MIN, A, True),
    ]
    assert valve.last_output_watermark == MIN
    assert not valve.is_idle
    assert valve.num_inputs == 2


@pytest.mark.parametrize("seed", range(0, 3000, 100))
def test_random_inputs_keep_flink_40475s_invariants(seed: int) -> None:
    """FLINK-40475's invariants on random inputs (100 sequences a seed): while every channel
    is idle the output is the maximum of the channels' watermarks (the flush does not depend
    on the order they went idle in), and while the valve is active no aligned channel's
    minimum sits above the output (a realigned channel does not hold it back). Outputs only
    rise and statuses only change. The valve before FLINK-40475 broke both (seeds 236, 1189:
    stuck below the maximum; 1850, 7146: a stall)."""
    import random

    for case in range(seed, seed + 100):
        rng = random.Random(case)
        n = rng.randrange(1, 4)
        valve = WatermarkValve(n)
        last, idle = MIN, False
        for _ in range(rng.randrange(1, 25)):
            channel = rng.randrange(n)
            if rng.random() < 0.6:
                out = valve.input_watermark(channel, rng.randrange(0, 60))
            else:
                out = valve.input_status(channel, rng.choice([A, I]))
            for event in out:
                if isinstance(event, Watermark):
                    assert event.timestamp > last, case
                    last = event.timestamp
                else:
                    assert (event is I) != idle, case
                    idle = event is I
            states = [valve.channel_state(c) for c in range(n)]
            if valve.is_idle:
                assert valve.last_output_watermark == max(last, *(s.watermark for s in states)), case
            else:
                aligned = [s.watermark for s in states if s.aligned]
                assert not aligned or min(aligned) <= valve.last_output_watermark, case
