"""Flink 1.19+'s exponential-delay restart strategy (FLIP-364), the default of a checkpointed
job without a configured one (``checkpoint/restart_config.py``).

Ported: ``flink-runtime/src/test/java/org/apache/flink/runtime/executiongraph/failover/
ExponentialDelayRestartBackoffTimeStrategyTest.java`` (apache/flink 1.19+, with
``attemptsBeforeResetBackoff``). Flink's ``notifyFailure`` + ``canRestart`` +
``getBackoffTime`` at a ``ManualClock`` time are one ``next_delay_ms(now)`` here (the delay, or
None when the strategy cannot restart); ``testNotCallNotifyFailure`` has no counterpart (there
is no separate getter to call first).
"""

from __future__ import annotations

import random

import pytest

from streamflow.checkpoint.restart_strategy import ExponentialDelayRestart

INT_MAX = 2**31 - 1


def strategy(
    initial: int,
    max_ms: int,
    multiplier: float,
    reset: int,
    jitter: float,
    attempts: int | None,
    seed: int = 1,
) -> ExponentialDelayRestart:
    s = ExponentialDelayRestart(initial, max_ms, multiplier, reset, jitter, attempts)
    s._random = random.Random(seed)
    return s


def test_max_attempts() -> None:
    """testMaxAttempts: 13 attempts: 13 restarts, the 14th failure cannot restart."""
    s, now = strategy(1, 3, 1.2, 10, 0.25, 13), 0
    for _ in range(13):
        assert s.next_delay_ms(now) is not None
        now += 3 + 1
    assert s.next_delay_ms(now) is None


def test_initial_backoff() -> None:
    """testInitialBackoff."""
    assert strategy(42, 45, 2.0, 8, 0, INT_MAX).next_delay_ms(0) == 42


def test_max_backoff() -> None:
    """testMaxBackoff: never above the maximum, jitter included."""
    s = strategy(1, 6, 2.0, 8, 0.25, INT_MAX)
    assert all(s.next_delay_ms(t) <= 6 for t in range(0, 100, 10))  # type: ignore[operator]


def test_reset_backoff() -> None:
    """testResetBackoff: a failure sooner than the threshold after the scheduled restart
    increases the backoff; one the threshold after it resets it."""
    s = strategy(1, 5, 2.0, 8, 0.25, INT_MAX)
    first = s.next_delay_ms(0)
    assert first == 1
    now = 8 + first - 1
    assert s.next_delay_ms(now) == 2  # "Backoff should be increased"
    now += 8 + 2
    assert s.next_delay_ms(now) == 1  # "Backoff should be reset"


def test_backoff_multiplier() -> None:
    """testBackoffMultiplier: initial * multiplier**n, truncated: 4, 4 * 2.3, 4 * 2.3 * 2.3."""
    s, now, delays = strategy(4, 300, 2.3, INT_MAX, 0, 10), 0, []
    for _ in range(3):
        delays.append(s.next_delay_ms(now))
        now += 301
    assert delays == [4, 9, 21]


def delays_after(failures: int, initial: int, max_ms: int, jitter: float) -> set[int | None]:
    """Flink's assertCorrectRandomRangeWithFailureCount: a fresh strategy per sample, the clock
    advanced past the maximum before each failure; the delays the last failure can get."""
    seen: set[int | None] = set()
    now = 0
    for seed in range(600):
        s = strategy(initial, max_ms, 2.0, INT_MAX, jitter, INT_MAX, seed)
        for _ in range(failures):
            now += max_ms + 1
            delay = s.next_delay_ms(now)
        seen.add(delay)
    return seen


@pytest.mark.parametrize(
    "case, failures, initial, jitter, expected",
    [
        ("testJitter", 2, 2, 0.25, {3, 4, 5}),
        ("testJitter", 3, 2, 0.25, {6, 7}),
        ("testJitter", 4, 2, 0.25, {7}),
        ("testJitterNoHigherThanMax", 1, 1, 1.0, {1, 2}),  # and never below the initial backoff
        ("testJitterNoHigherThanMax", 2, 1, 1.0, {1, 2, 3, 4}),
        ("testJitterNoHigherThanMax", 3, 1, 1.0, {1, 2, 3, 4, 5, 6, 7}),
    ],
)
def test_jitter_range(case: str, failures: int, initial: int, jitter: float, expected: set[int]) -> None:
    assert delays_after(failures, initial, 7, jitter) == expected, case


def test_multiple_settings() -> None:
    """testMultipleSettings."""
    s = strategy(1, 9, 2.0, 80, 0.25, INT_MAX)
    assert s.next_delay_ms(0) == 1  # initial data
    assert s.next_delay_ms(81) == 1  # the threshold after the scheduled restart: reset
    assert s.next_delay_ms(85) == 2  # increases until the threshold is reached
    assert s.next_delay_ms(85 + 80 + 9 + 1) == 1  # reset after the threshold
    assert s.next_delay_ms(85 + 80 + 9 + 1 + 9 + 1) == 2  # and increases again


def _merged_round(s: ExponentialDelayRestart, now: int, backoff: int) -> int:
    """Flink's checkMultipleExceptionsAreMerged: at each millisecond of the backoff, ten
    failures; the first one of the round is the new attempt, all get what remains of its
    backoff. Returns the time after the round."""
    for advance in range(backoff):
        for _ in range(10):
            assert s.next_delay_ms(now) == backoff - advance, (now, advance)
        now += 1
    return now


def test_merge_multiple_exceptions_into_one_attempt() -> None:
    """testMergeMultipleExceptionsIntoOneAttempt: failures at or before the scheduled restart
    are merged into its attempt (no new attempt, no higher backoff, the remaining delay); one
    after it is a new attempt; the fourth attempt exceeds attemptsBeforeResetBackoff = 3."""
    s = strategy(2, 6, 2.0, 80, 0.0, 3)
    now = _merged_round(s, 0, 2)
    now = _merged_round(s, now + 1, 4)
    now = _merged_round(s, now + 1, 6)
    assert s.next_delay_ms(now + 1) is None  # a new attempt: canRestart() is false


def test_merging_exceptions_works_with_resetting() -> None:
    """testMergingExceptionsWorksWithResetting: the same rounds, ten times, each after the reset
    threshold."""
    s, now = strategy(2, 6, 2.0, 80, 0.0, 3), 0
    for _ in range(10):
        now = _merged_round(s, now, 2)
        now = _merged_round(s, now + 1, 4)
        now = _merged_round(s, now + 1, 6)
        now += 80


def test_unlimited_attempts_do_not_overflow() -> None:
    """The backoff saturates (Java's Math.pow to Infinity, its long cast to Long.MAX_VALUE)."""
    s = strategy(1_000, 60_000, 1.5, 3_600_000, 0.1, INT_MAX)
    delays = [s.next_delay_ms(t) for t in range(0, 3_000 * 61_000, 61_000)]
    assert delays[-1] == 60_000 and all(d is not None for d in delays)


async def test_a_job_on_a_manual_clock_counts_its_restarts_in_wall_time() -> None:
    """The restart strategy measures failures on the clock its restart delays elapse on (wall
    time, as Flink's JobMaster gives its RestartBackoffTimeStrategy the SystemClock), not on the
    job's processing-time clock: a job whose ManualClock never moves, failing at every attempt,
    has each failure after the previous restart, so two attempts are allowed and the third
    failure ends the job (on the manual clock every failure would be "at or before the
    scheduled restart", merged into the first attempt, and the job would restart forever)."""
    import asyncio

    import streamflow as sf
    from streamflow.runtime.job import RestartsExhaustedError
    from streamflow.testing import ManualClock

    def always_fails(v: int) -> int:
        raise RuntimeError("always failing")

    env = sf.StreamExecutionEnvironment(clock=ManualClock()).set_parallelism(1)
    env.set_restart_strategy(ExponentialDelayRestart(10, 20, 2.0, 3_600_000, 0.0, attempts=2))
    env.from_collection([1, 2, 3]).map(always_fails).add_sink(lambda v: None)
    client = await env.execute_async("manual-clock-restarts")
    with pytest.raises(RestartsExhaustedError):
        try:
            await asyncio.wait_for(client.get_job_execution_result(), 10)
        except TimeoutError:
            await client.cancel()
            raise AssertionError("the job still restarts after 10 s") from None
