"""The restart strategy a job gets from Flink's configuration keys (``RestartStrategyOptions``)
and Flink's rule that picks it (``RestartBackoffTimeStrategyFactoryLoader``).

Theory of operation:

* ``configure()`` hands each ``restart-strategy.*`` key to :func:`configure_restart_key`: the
  value is parsed and range-checked at once (a wrong value fails where it is set, naming the
  key) and recorded in ``RuntimeConfig.restart_options``. Keys accumulate over ``configure``
  calls, as the options of Flink 2's environment configuration do, so a type and its options
  may come in different calls.
* ``restart-strategy.type`` (Flink 1.x's ``restart-strategy``) also hands the decision back to
  the configuration: it replaces a strategy ``set_restart_strategy`` set before (Flink 1.x's
  ``ExecutionConfig.configure`` sets the job's strategy from it), and a ``set_restart_strategy``
  after it replaces it in turn: the later of the two wins.
* When a job starts, :func:`resolve_restart_strategy` turns the environment's strategy into the
  job's: a strategy of the program's own is used as it is (Flink's loader prefers the job's
  ``ExecutionConfig`` strategy to the configuration); ``fall_back_restart()`` (the default)
  becomes the configured type with its options (Flink's defaults for options not set), or,
  with no type configured, Flink's default: ``exponential-delay`` *with its default values*
  when checkpointing is on (Flink reads the options only for a configured type), no restart
  when it is off (a batch job runs without checkpoints, so without restarts by default).
* Options that do not apply to the strategy in effect are what Flink ignores without a word;
  here the job logs a WARNING naming them and the strategy in effect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..flink_duration import duration_ms
from .restart_strategy import (
    ExponentialDelayRestart,
    FailureRateRestart,
    FallbackRestart,
    FixedDelayRestart,
    NoRestart,
    RestartStrategy,
)

__all__ = ["TYPE_KEY", "configure_restart_key", "is_restart_key", "resolve_restart_strategy",
           "strategy_from_configuration"]  # fmt: skip

_log = logging.getLogger("streamflow")

TYPE_KEY = "restart-strategy.type"
_DEPRECATED_TYPE_KEY = "restart-strategy"  # Flink 1.x's name, a deprecated key of TYPE_KEY
_INT_MAX = 2**31 - 1  # Java's Integer.MAX_VALUE: Flink's "infinite" attempts

# Flink's RestartStrategyType: the main value and its aliases (compared lower-cased, as Flink)
_TYPES = {
    **dict.fromkeys(("disable", "none", "off"), "disable"),
    **dict.fromkeys(("fixed-delay", "fixeddelay"), "fixed-delay"),
    **dict.fromkeys(("failure-rate", "failurerate"), "failure-rate"),
    **dict.fromkeys(("exponential-delay", "exponentialdelay"), "exponential-delay"),
}


def _int(minimum: int) -> Callable[[Any, str], int]:
    def parse(value: Any, key: str) -> int:
        if isinstance(value, bool):
            raise ValueError(f"{key}: expected an integer, got {value!r}")
        try:
            number = int(str(value).strip())
        except ValueError:
            raise ValueError(f"{key}: expected an integer, got {value!r}") from None
        if number < minimum:
            raise ValueError(f"{key} must be >= {minimum}, got {number}")
        return number

    return parse


def _duration(minimum: int) -> Callable[[Any, str], int]:
    def parse(value: Any, key: str) -> int:
        ms = duration_ms(value, key)
        if ms < minimum:
            raise ValueError(f"{key} must be at least {minimum} ms, got {value!r}")
        return ms

    return parse


def _float(low: float, high: float | None, low_open: bool = False) -> Callable[[Any, str], float]:
    def parse(value: Any, key: str) -> float:
        try:
            number = float(str(value).strip())
        except ValueError:
            raise ValueError(f"{key}: expected a number, got {value!r}") from None
        if number < low or (low_open and number == low) or (high is not None and number > high):
            bound = (f"> {low}" if low_open else f">= {low}") + ("" if high is None else f" and <= {high}")
            raise ValueError(f"{key} must be {bound}, got {number}")
        return number

    return parse


# RestartStrategyOptions: key -> (the strategy type it belongs to, its parser with the range
# Flink's strategy constructors check, Flink's default value: milliseconds for durations)
_FIXED, _RATE = "restart-strategy.fixed-delay.", "restart-strategy.failure-rate."
_EXP = "restart-strategy.exponential-delay."
OPTIONS: dict[str, tuple[str, Callable[[Any, str], Any], Any]] = {
    _FIXED + "attempts": ("fixed-delay", _int(0), 1),
    _FIXED + "delay": ("fixed-delay", _duration(0), 1_000),
    _RATE + "max-failures-per-interval": ("failure-rate", _int(1), 1),
    _RATE + "failure-rate-interval": ("failure-rate", _duration(1), 60_000),
    _RATE + "delay": ("failure-rate", _duration(0), 1_000),
    _EXP + "initial-backoff": ("exponential-delay", _duration(1), 1_000),
    _EXP + "max-backoff": ("exponential-delay", _duration(1), 60_000),
    _EXP + "backoff-multiplier": ("exponential-delay", _float(1.0, None, low_open=True), 1.5),
    _EXP + "reset-backoff-threshold": ("exponential-delay", _duration(1), 3_600_000),
    _EXP + "jitter-factor": ("exponential-delay", _float(0.0, 1.0), 0.1),
    _EXP + "attempts-before-reset-backoff": ("exponential-delay", _int(1), _INT_MAX),
}


def is_restart_key(key: str) -> bool:
    return key in (TYPE_KEY, _DEPRECATED_TYPE_KEY) or key in OPTIONS


def _strategy_type(value: Any) -> str:
    name = str(value).lower()
    if name not in _TYPES:
        raise ValueError(
            f"{TYPE_KEY}: unknown restart strategy {value!r}; accepted: none, off, disable, fixed-delay, "
            "fixeddelay, failure-rate, failurerate, exponential-delay, exponentialdelay"
        )
    return _TYPES[name]


def configure_restart_key(runtime: Any, key: str, value: Any) -> None:
    """Record one ``restart-strategy.*`` key of ``configure()`` (module doc) in ``runtime``
    (a ``RuntimeConfig``): parsed and checked now; the type key also resets the program's
    strategy to ``fall_back_restart()``, so that this configuration decides."""
    if key in (TYPE_KEY, _DEPRECATED_TYPE_KEY):
        options = {**runtime.restart_options, TYPE_KEY: _strategy_type(value)}
        strategy_from_configuration(options, True)  # its options fit together (else nothing changes)
        runtime.restart_options[TYPE_KEY] = options[TYPE_KEY]
        runtime.restart_strategy = FallbackRestart()
    elif key in OPTIONS:
        options = {**runtime.restart_options, key: OPTIONS[key][1](value, key)}
        if TYPE_KEY in options:
            strategy_from_configuration(options, True)  # still fits the configured type
        runtime.restart_options[key] = options[key]
    else:
        raise ValueError(f"unknown configuration key {key!r} (not a restart-strategy option)")


def strategy_from_configuration(options: dict[str, Any], checkpointing: bool) -> RestartStrategy:
    """Flink's ``RestartBackoffTimeStrategyFactoryLoader`` on one configuration: the configured
    type with its options (Flink's defaults for the others), else ``exponential-delay`` with
    its default values when checkpointing is on, else no restart."""
    kind = options.get(TYPE_KEY)
    if kind is None:
        return _exponential({}) if checkpointing else NoRestart()
    if kind == "disable":
        return NoRestart()
    if kind == "fixed-delay":
        return FixedDelayRestart(_get(options, _FIXED + "attempts"), _get(options, _FIXED + "delay"))
    if kind == "failure-rate":
        return FailureRateRestart(
            _get(options, _RATE + "max-failures-per-interval"),
            _get(options, _RATE + "failure-rate-interval"), _get(options, _RATE + "delay"),
        )  # fmt: skip
    return _exponential(options)


def _exponential(options: dict[str, Any]) -> RestartStrategy:
    try:
        return ExponentialDelayRestart(
            _get(options, _EXP + "initial-backoff"), _get(options, _EXP + "max-backoff"),
            _get(options, _EXP + "backoff-multiplier"), _get(options, _EXP + "reset-backoff-threshold"),
            _get(options, _EXP + "jitter-factor"), _get(options, _EXP + "attempts-before-reset-backoff"),
        )  # fmt: skip
    except ValueError as exc:  # initial-backoff above max-backoff: name the keys
        raise ValueError(f"{_EXP}initial-backoff / {_EXP}max-backoff: {exc}") from None


def _get(options: dict[str, Any], key: str) -> Any:
    return options.get(key, OPTIONS[key][2])


def resolve_restart_strategy(
    strategy: RestartStrategy, options: dict[str, Any], checkpointing: bool, job_name: str | None = None
) -> RestartStrategy:
    """The strategy a job runs with (module doc). With ``job_name``, the options that change
    nothing for it are logged at WARNING, naming them and why."""
    if isinstance(strategy, FallbackRestart):
        resolved = strategy_from_configuration(options, checkpointing)
        kind = options.get(TYPE_KEY)
        why = (
            f"{TYPE_KEY} is {kind}" if kind is not None
            else f"{TYPE_KEY} is not set, so Flink's default applies "
            + ("(exponential-delay with its default values, checkpointing being on)" if checkpointing
               else "(no restart, checkpointing being off)")
        )  # fmt: skip
        unused = sorted(k for k in options if k in OPTIONS and (kind is None or OPTIONS[k][0] != kind))
    else:
        resolved, why = strategy, f"the program set the restart strategy {strategy!r}"
        unused = sorted(options)
    if job_name is not None and unused:
        _log.warning(
            "job %r: the configuration keys %s change nothing: %s; the job's restart strategy is %r",
            job_name, ", ".join(unused), why, resolved,
        )  # fmt: skip
    return resolved
