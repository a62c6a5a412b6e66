"""Restart strategies (Flink's ``RestartBackoffTimeStrategy``): whether a failed job restarts
from its latest completed checkpoint, and after what delay. ``next_delay_ms`` records one failure
at a time of the job's clock and answers both questions at once (the delay, or None to give up);
a strategy is stateful, one per job."""

from __future__ import annotations

import datetime
import random
from collections import deque


def _ms(value: int | datetime.timedelta, what: str, minimum: int = 0) -> int:
    if isinstance(value, datetime.timedelta):
        value = int(value.total_seconds() * 1000)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be int milliseconds or a timedelta, got {value!r}")
    if value < minimum:
        raise ValueError(f"{what} must be >= {minimum} ms, got {value}")
    return value


class RestartStrategy:
    """Decides whether a failed job restarts from its last checkpoint, and after what delay.
    Strategies compare by their configuration, as PyFlink's do: a subclass's ``repr`` names it
    all (never the failures counted so far)."""

    def next_delay_ms(self, now_ms: int) -> int | None:
        """Record a failure at ``now_ms``; the delay before restarting, or None to give up."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and repr(other) == repr(self)

    def __hash__(self) -> int:
        return hash(repr(self))


class NoRestart(RestartStrategy):
    def next_delay_ms(self, now_ms: int) -> int | None:
        return None

    def __repr__(self) -> str:
        return "no_restart()"


class FallbackRestart(RestartStrategy):
    """PyFlink's ``RestartStrategies.fall_back_restart()`` (Flink's
    ``FallbackRestartStrategyConfiguration``): no strategy of the program's own, the
    configuration decides (``restart-strategy.type`` and its options, else Flink's default:
    ``exponential-delay`` with checkpointing on, no restart without;
    ``checkpoint/restart_config.py``). The environment's default; a job resolves it to a
    concrete strategy when it starts (``RuntimeConfig.resolved_restart_strategy``)."""

    def next_delay_ms(self, now_ms: int) -> int | None:
        raise RuntimeError("fall_back_restart() is resolved to a concrete strategy before a job runs")

    def __repr__(self) -> str:
        return "fall_back_restart()"


class FixedDelayRestart(RestartStrategy):
    def __init__(self, attempts: int, delay_ms: int) -> None:
        self.attempts, self.delay_ms, self.failures = attempts, delay_ms, 0

    def __repr__(self) -> str:
        return f"fixed_delay_restart(attempts={self.attempts}, delay_ms={self.delay_ms})"

    def next_delay_ms(self, now_ms: int) -> int | None:
        self.failures += 1
        return self.delay_ms if self.failures <= self.attempts else None


class FailureRateRestart(RestartStrategy):
    """At most ``max_failures`` within any ``interval_ms``; ``delay_ms`` between attempts."""

    def __init__(self, max_failures: int, interval_ms: int, delay_ms: int) -> None:
        self.max_failures, self.interval_ms, self.delay_ms = max_failures, interval_ms, delay_ms
        self._times: deque[int] = deque()

    def __repr__(self) -> str:
        return (
            f"failure_rate_restart(max_failures={self.max_failures}, interval_ms={self.interval_ms}, "
            f"delay_ms={self.delay_ms})"
        )

    def next_delay_ms(self, now_ms: int) -> int | None:
        """Flink's ``FailureRateRestartBackoffTimeStrategy``: the job fails once ``max_failures
        + 1`` failures lie within ``interval_ms``, its bound included (the oldest of them exactly
        ``interval_ms`` ago still counts)."""
        self._times.append(now_ms)
        while len(self._times) > self.max_failures + 1:
            self._times.popleft()
        if len(self._times) <= self.max_failures or now_ms - self._times[0] > self.interval_ms:
            return self.delay_ms
        return None


class ExponentialDelayRestart(RestartStrategy):
    """Flink's ``ExponentialDelayRestartBackoffTimeStrategy`` (1.19+, FLIP-364): the n-th
    restart since the last reset waits ``initial_ms * multiplier**n`` (truncated to ms), plus a
    random offset within +-``jitter`` times that, kept within ``[initial_ms, max_ms]``. A
    failure at least ``reset_threshold_ms`` after the restart the previous one scheduled (the
    job ran smoothly that long after it) resets ``n`` to 0. It restarts without limit unless
    ``attempts`` is given (``attempts-before-reset-backoff``: the restarts allowed since the
    last reset; Flink's default is Integer.MAX_VALUE).

    Failures reported at or before the time of the restart already scheduled are merged into
    that attempt, as Flink's ``notifyFailure`` merges them (many tasks failing at once, or
    concurrent pipelined regions of a batch job failing over alone): they do not count as an
    attempt, nor raise the backoff, and their delay is what remains of the scheduled one, so they
    restart together with it."""

    def __init__(
        self, initial_ms: int, max_ms: int, multiplier: float, reset_threshold_ms: int, jitter: float = 0.0,
        attempts: int | None = None,
    ) -> None:  # fmt: skip
        if not 1 <= initial_ms <= max_ms:
            raise ValueError(f"need 1 ms <= initial backoff <= maximum backoff, got {initial_ms}, {max_ms}")
        if multiplier <= 1:
            raise ValueError(f"the backoff multiplier must be > 1, got {multiplier}")
        if reset_threshold_ms < 1 or not 0 <= jitter <= 1:
            raise ValueError(f"need reset threshold >= 1 ms, 0 <= jitter <= 1: {reset_threshold_ms} {jitter}")
        self.initial_ms, self.max_ms, self.multiplier = initial_ms, max_ms, multiplier
        self.reset_threshold_ms, self.jitter, self.attempts = reset_threshold_ms, jitter, attempts
        self._attempt = 0  # Flink's currentRestartAttempt: restarts since the last reset
        self._next_restart_ms: int | None = None  # when the last restart was scheduled; None: none yet
        self._random = random.Random()

    def __repr__(self) -> str:
        return (
            f"exponential_delay_restart(initial_ms={self.initial_ms}, max_ms={self.max_ms}, "
            f"multiplier={self.multiplier}, reset_threshold_ms={self.reset_threshold_ms}, "
            f"jitter={self.jitter}, attempts={self.attempts})"
        )

    def next_delay_ms(self, now_ms: int) -> int | None:
        scheduled = self._next_restart_ms
        if scheduled is not None and now_ms <= scheduled:  # merged into the pending attempt
            return None if self._exhausted() else scheduled - now_ms
        if scheduled is None or now_ms - scheduled >= self.reset_threshold_ms:
            self._attempt = 0
        try:
            base = min(self.initial_ms * self.multiplier**self._attempt, _LONG_MAX)
        except OverflowError:  # Java's Math.pow gives Infinity, its (long) cast Long.MAX_VALUE
            base = _LONG_MAX
        backoff = int(base)
        offset = int(backoff * self.jitter)
        jittered = backoff + (self._random.randint(-offset, offset) if offset else 0)
        delay = max(self.initial_ms, min(jittered, self.max_ms))
        self._next_restart_ms = now_ms + delay
        self._attempt += 1
        return None if self._exhausted() else delay

    def _exhausted(self) -> bool:
        """Flink's ``!canRestart()``: more attempts since the last reset than allowed."""
        return self.attempts is not None and self._attempt > self.attempts


_LONG_MAX = 2**63 - 1


class RestartStrategies:
    """PyFlink's factory names."""

    @staticmethod
    def no_restart() -> RestartStrategy:
        return NoRestart()

    @staticmethod
    def fall_back_restart() -> RestartStrategy:
        """The configuration's strategy (``restart-strategy.type``), else Flink's default."""
        return FallbackRestart()

    @staticmethod
    def fixed_delay_restart(
        restart_attempts: int, delay_between_attempts: int | datetime.timedelta
    ) -> RestartStrategy:
        return FixedDelayRestart(restart_attempts, _ms(delay_between_attempts, "restart delay"))

    @staticmethod
    def failure_rate_restart(
        failure_rate: int,
        failure_interval: int | datetime.timedelta,
        delay_interval: int | datetime.timedelta,
    ) -> RestartStrategy:
        return FailureRateRestart(
            failure_rate, _ms(failure_interval, "failure interval", 1), _ms(delay_interval, "restart delay")
        )

    @staticmethod
    def exponential_delay_restart(
        initial_backoff: int | datetime.timedelta,
        max_backoff: int | datetime.timedelta,
        backoff_multiplier: float,
        reset_backoff_threshold: int | datetime.timedelta,
        jitter_factor: float,
    ) -> RestartStrategy:
        """Flink's ``RestartStrategies.exponentialDelayRestart`` (Java; PyFlink has none)."""
        return ExponentialDelayRestart(
            _ms(initial_backoff, "initial backoff", 1), _ms(max_backoff, "maximum backoff", 1),
            backoff_multiplier, _ms(reset_backoff_threshold, "reset backoff threshold", 1), jitter_factor,
        )  # fmt: skip
