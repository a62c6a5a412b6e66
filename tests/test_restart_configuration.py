"""The restart strategy a job gets from Flink's ``restart-strategy.*`` configuration keys.

Ported: ``flink-runtime/src/test/java/org/apache/flink/runtime/executiongraph/failover/
RestartBackoffTimeStrategyFactoryLoaderTest.java`` (apache/flink; the 1.19/1.20 version that
still has job-level ``RestartStrategies``): every test, as a table. Flink's three sources map
to streamflow's: the job-level ``ExecutionConfig`` strategy is ``set_restart_strategy``; the job
configuration is ``get_execution_environment(configuration)`` / ``env.configure``; the cluster
configuration is ``set_default_configuration`` (what ``streamflow run`` applies to every
environment). Also the options, aliases and defaults of ``RestartStrategyOptions`` (its
descriptions: Flink 2.x's ``flink-core/.../configuration/RestartStrategyOptions.java``), and
jobs that a configured strategy restarts, or does not, through the PyFlink API.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from streamflow.api.environment import get_default_configuration, set_default_configuration
from streamflow.checkpoint.restart_strategy import (
    ExponentialDelayRestart,
    FailureRateRestart,
    FixedDelayRestart,
    NoRestart,
)
from streamflow.common import Configuration, RestartStrategies
from streamflow.datastream import MapFunction, StreamExecutionEnvironment
from streamflow.runtime.job import RestartsExhaustedError

INT_MAX = 2**31 - 1


@pytest.fixture(autouse=True)
def _cluster_configuration() -> Iterator[None]:
    before = get_default_configuration()
    yield
    set_default_configuration(before)


def resolved(env: StreamExecutionEnvironment) -> Any:
    return env.runtime.resolved_restart_strategy()


def flink_default_exponential() -> ExponentialDelayRestart:
    """RestartStrategyOptions' exponential-delay defaults (Flink 1.19+/2.x)."""
    return ExponentialDelayRestart(1_000, 60_000, 1.5, 3_600_000, 0.1, INT_MAX)


JOB_LEVEL = {  # RestartStrategies factories: the job-level ExecutionConfig strategy
    "no_restart": (RestartStrategies.no_restart, NoRestart),
    "fixed_delay": (lambda: RestartStrategies.fixed_delay_restart(1, 1000), FixedDelayRestart),
    "exponential_delay": (
        lambda: RestartStrategies.exponential_delay_restart(1, 1000, 1.1, 2000, 0),
        ExponentialDelayRestart,
    ),
    "failure_rate": (lambda: RestartStrategies.failure_rate_restart(1, 1000, 1000), FailureRateRestart),
}


@pytest.mark.parametrize(
    "case, job_level, configured",
    [
        ("testNoRestartStrategySpecifiedInExecutionConfig", "no_restart", "failure-rate"),
        ("testFixedDelayRestartStrategySpecifiedInExecutionConfig", "fixed_delay", "failure-rate"),
        (
            "testExponentialDelayRestartStrategySpecifiedInExecutionConfig",
            "exponential_delay",
            "failure-rate",
        ),
        ("testFailureRateRestartStrategySpecifiedInExecutionConfig", "failure_rate", "fixed-delay"),
    ],
)
def test_the_job_level_strategy_wins_over_the_configuration(
    case: str, job_level: str, configured: str
) -> None:
    """RestartBackoffTimeStrategyFactoryLoaderTest.test*SpecifiedInExecutionConfig: a strategy
    the program sets wins over the configured type (in job and cluster configuration)."""
    set_default_configuration({"restart-strategy.type": configured})
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_string("restart-strategy.type", configured)
    )
    factory, kind = JOB_LEVEL[job_level]
    env.set_restart_strategy(factory())
    assert type(resolved(env)) is kind, case


KINDS = {"disable": NoRestart, "fixed-delay": FixedDelayRestart, "failure-rate": FailureRateRestart,
         "exponential-delay": ExponentialDelayRestart}  # fmt: skip


@pytest.mark.parametrize(
    "case, job, cluster, kind",
    [
        ("testNoRestartStrategySpecifiedInJobConfig", "disable", "fixed-delay", "disable"),
        ("testFixedDelayStrategySpecifiedInJobConfig", "fixed-delay", "exponential-delay", "fixed-delay"),
        (
            "testExponentialDelayStrategySpecifiedInJobConfig",
            "exponential-delay",
            "failure-rate",
            "exponential-delay",
        ),
        ("testFailureRateStrategySpecifiedInJobConfig", "failure-rate", "fixed-delay", "failure-rate"),
        ("testNoRestartStrategySpecifiedInClusterConfig", None, "disable", "disable"),
        ("testFixedDelayStrategySpecifiedInClusterConfig", None, "fixed-delay", "fixed-delay"),
        (
            "testExponentialDelayStrategySpecifiedInClusterConfig",
            None,
            "exponential-delay",
            "exponential-delay",
        ),
        ("testFailureRateStrategySpecifiedInClusterConfig", None, "failure-rate", "failure-rate"),
    ],
)
def test_job_configuration_then_cluster_configuration(
    case: str, job: str | None, cluster: str, kind: str
) -> None:
    """RestartBackoffTimeStrategyFactoryLoaderTest.test*SpecifiedIn{Job,Cluster}Config: the
    job's configured type wins over the cluster's; the cluster's applies when the job sets none."""
    set_default_configuration({"restart-strategy.type": cluster})
    conf = Configuration()
    if job is not None:
        conf.set_string("restart-strategy.type", job)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    assert type(resolved(env)) is KINDS[kind], case


@pytest.mark.parametrize("where", ["job", "cluster"])
def test_an_invalid_strategy_is_refused(where: str) -> None:
    """RestartBackoffTimeStrategyFactoryLoaderTest.testInvalidStrategySpecifiedIn{Job,Cluster}Config:
    Flink's IllegalArgumentException; here a ValueError naming the key and the accepted values."""
    refused = r"restart-strategy\.type: unknown restart strategy 'invalid-strategy'.*fixed-delay"
    with pytest.raises(ValueError, match=refused):
        if where == "cluster":
            set_default_configuration({"restart-strategy.type": "invalid-strategy"})
            StreamExecutionEnvironment.get_execution_environment()
        else:
            StreamExecutionEnvironment.get_execution_environment(
                {"restart-strategy.type": "invalid-strategy"}
            )


def test_no_strategy_with_checkpointing_is_exponential_delay_with_its_defaults() -> None:
    """RestartBackoffTimeStrategyFactoryLoaderTest.testNoStrategySpecifiedWhenCheckpointingEnabled:
    exponential-delay with every RestartStrategyOptions default (initial 1 s, max 1 min,
    multiplier 1.5, reset threshold 1 h, jitter 0.1, Integer.MAX_VALUE attempts)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(1000)
    strategy = resolved(env)
    assert strategy == flink_default_exponential()
    assert (strategy.initial_ms, strategy.max_ms, strategy.multiplier) == (1_000, 60_000, 1.5)
    assert (strategy.reset_threshold_ms, strategy.jitter, strategy.attempts) == (3_600_000, 0.1, INT_MAX)


def test_no_strategy_without_checkpointing_is_no_restart() -> None:
    """RestartBackoffTimeStrategyFactoryLoaderTest.testNoStrategySpecifiedWhenCheckpointingDisabled."""
    env = StreamExecutionEnvironment.get_execution_environment()
    assert isinstance(resolved(env), NoRestart)
    assert env.get_restart_strategy() == RestartStrategies.fall_back_restart()


# RestartStrategyOptions: each type's aliases (RestartStrategyType), its options and defaults
@pytest.mark.parametrize(
    "options, expected",
    [
        ({"restart-strategy.type": "none"}, NoRestart()),
        ({"restart-strategy.type": "off"}, NoRestart()),
        ({"restart-strategy.type": "Disable"}, NoRestart()),  # compared lower-cased, as Flink
        ({"restart-strategy": "fixed-delay"}, FixedDelayRestart(1, 1_000)),  # Flink 1.x's key
        ({"restart-strategy.type": "fixeddelay"}, FixedDelayRestart(1, 1_000)),
        (
            {
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": "3",
                "restart-strategy.fixed-delay.delay": "20 s",
            },
            FixedDelayRestart(3, 20_000),
        ),
        ({"restart-strategy.type": "failure-rate"}, FailureRateRestart(1, 60_000, 1_000)),
        (
            {
                "restart-strategy.type": "failurerate",
                "restart-strategy.failure-rate.max-failures-per-interval": 5,
                "restart-strategy.failure-rate.failure-rate-interval": "5 min",
                "restart-strategy.failure-rate.delay": "10 s",
            },
            FailureRateRestart(5, 300_000, 10_000),
        ),
        ({"restart-strategy.type": "exponential-delay"}, flink_default_exponential()),
        (
            {
                "restart-strategy.type": "exponentialdelay",
                "restart-strategy.exponential-delay.initial-backoff": "10 s",
                "restart-strategy.exponential-delay.max-backoff": "2 min",
                "restart-strategy.exponential-delay.backoff-multiplier": "1.4",
                "restart-strategy.exponential-delay.reset-backoff-threshold": "10 min",
                "restart-strategy.exponential-delay.jitter-factor": 0.1,
                "restart-strategy.exponential-delay.attempts-before-reset-backoff": "10",
            },
            ExponentialDelayRestart(10_000, 120_000, 1.4, 600_000, 0.1, 10),
        ),
    ],
)
def test_restart_strategy_options(options: dict[str, Any], expected: Any) -> None:
    """The types, aliases and defaults of RestartStrategyOptions (the examples of Flink's
    task_failure_recovery.md for the option values); checkpointing changes nothing once a
    type is configured; get_restart_strategy() answers the configured strategy (1.x's
    ExecutionConfig.configure sets it)."""
    for checkpointing in (False, True):
        env = StreamExecutionEnvironment.get_execution_environment(options)
        if checkpointing:
            env.enable_checkpointing(500)
        assert resolved(env) == expected
        assert env.get_restart_strategy() == expected


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("restart-strategy.fixed-delay.attempts", "-1", "must be >= 0"),
        ("restart-strategy.fixed-delay.attempts", "three", "expected an integer"),
        ("restart-strategy.fixed-delay.delay", "soon", "cannot read the duration"),
        ("restart-strategy.failure-rate.max-failures-per-interval", 0, "must be >= 1"),
        ("restart-strategy.failure-rate.failure-rate-interval", "0 s", "at least 1 ms"),
        ("restart-strategy.exponential-delay.backoff-multiplier", "1.0", "must be > 1.0"),
        ("restart-strategy.exponential-delay.jitter-factor", "1.5", "<= 1.0"),
        ("restart-strategy.exponential-delay.attempts-before-reset-backoff", "0", "must be >= 1"),
        ("restart-strategy.exponential-delay.initial-backoff", "0 ms", "at least 1 ms"),
    ],
)
def test_a_bad_option_value_fails_naming_the_key(key: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=key.replace(".", r"\.") + ".*" + message.replace(".", r"\.")):
        StreamExecutionEnvironment.get_execution_environment({key: value})


def test_initial_backoff_above_max_backoff_is_refused_when_the_type_is_set() -> None:
    env = StreamExecutionEnvironment.get_execution_environment(
        {"restart-strategy.exponential-delay.initial-backoff": "2 min"}
    )  # the max-backoff default (1 min) is below: refused once the type makes it the strategy
    with pytest.raises(ValueError, match=r"initial-backoff.*max-backoff"):
        env.configure({"restart-strategy.type": "exponential-delay"})
    assert resolved(env) == NoRestart()  # the refused type changed nothing
    env = StreamExecutionEnvironment.get_execution_environment({"restart-strategy.type": "exponential-delay"})
    with pytest.raises(ValueError, match=r"initial-backoff.*max-backoff"):  # set after the type
        env.configure({"restart-strategy.exponential-delay.initial-backoff": "2 min"})
    assert resolved(env) == flink_default_exponential()  # unchanged


def test_options_and_type_in_separate_configure_calls_combine() -> None:
    """Options given without the type key are kept (Flink 2's environment configuration
    accumulates): a later type key uses them."""
    env = StreamExecutionEnvironment.get_execution_environment({"restart-strategy.fixed-delay.attempts": 4})
    env.configure({"restart-strategy.fixed-delay.delay": "0 ms"})
    env.configure(Configuration().set_string("restart-strategy.type", "fixed-delay"))
    assert resolved(env) == FixedDelayRestart(4, 0)


def test_options_without_a_type_keep_flink_default_and_are_logged(caplog: Any) -> None:
    """RestartStrategyOptions: with checkpointing on and no type, "the default value is
    exponential-delay, and the default values of exponential-delay related config options will
    be used": options set without the type change nothing, so the job says so at WARNING."""
    env = StreamExecutionEnvironment.get_execution_environment(
        {"restart-strategy.exponential-delay.initial-backoff": "10 s",
         "restart-strategy.fixed-delay.attempts": 3}
    )  # fmt: skip
    env.enable_checkpointing(1000)
    with caplog.at_level(logging.WARNING, "streamflow"):
        assert env.runtime.resolved_restart_strategy("j") == flink_default_exponential()
    message = caplog.text
    assert "restart-strategy.exponential-delay.initial-backoff" in message
    assert "restart-strategy.fixed-delay.attempts" in message
    assert "restart-strategy.type is not set" in message


def test_options_of_another_type_are_logged(caplog: Any) -> None:
    env = StreamExecutionEnvironment.get_execution_environment(
        {"restart-strategy.type": "fixed-delay", "restart-strategy.failure-rate.delay": "1 s"}
    )
    with caplog.at_level(logging.WARNING, "streamflow"):
        env.runtime.resolved_restart_strategy("j")
    assert (
        "restart-strategy.failure-rate.delay change nothing: restart-strategy.type is fixed-delay"
        in caplog.text
    )


def test_the_later_of_set_restart_strategy_and_the_type_key_wins(caplog: Any) -> None:
    """Flink 1.x: ``ExecutionConfig.configure`` sets the job's strategy from
    ``restart-strategy.type``, replacing the one set before; a later ``setRestartStrategy``
    replaces it in turn (and the configured keys are then logged as changing nothing)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(7, 0))
    env.configure({"restart-strategy.type": "none"})
    assert isinstance(env.get_restart_strategy(), NoRestart) and isinstance(resolved(env), NoRestart)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(7, 0))
    with caplog.at_level(logging.WARNING, "streamflow"):
        assert env.runtime.resolved_restart_strategy("j") == FixedDelayRestart(7, 0)
    assert "restart-strategy.type change nothing: the program set the restart strategy" in caplog.text
    env.set_restart_strategy(RestartStrategies.fall_back_restart())  # the configuration again
    assert isinstance(resolved(env), NoRestart)


# -- jobs restarted (or not) by the configured strategy ------------------------------------
ATTEMPTS: list[int] = []


class FailFirstAttempts(MapFunction):
    """Fails every attempt before ``healthy_from`` at its 3rd record."""

    def __init__(self, healthy_from: int) -> None:
        self.healthy_from = healthy_from

    def open(self, runtime_context: Any) -> None:
        self.attempt, self.seen = runtime_context.get_attempt_number(), 0
        ATTEMPTS.append(self.attempt)

    def map(self, value: Any) -> Any:
        self.seen += 1
        if self.attempt < self.healthy_from and self.seen == 3:
            raise RuntimeError(f"injected failure in attempt {self.attempt}")
        return value * 10


def run(configuration: dict[str, Any], healthy_from: int, checkpointing: bool = True) -> list[Any]:
    ATTEMPTS.clear()
    env = StreamExecutionEnvironment.get_execution_environment(Configuration.from_dict(configuration))
    if checkpointing:
        env.enable_checkpointing(50)
    return sorted(
        env.from_collection(list(range(10))).map(FailFirstAttempts(healthy_from)).execute_and_collect()
    )


def test_a_configured_fixed_delay_restarts_the_job_until_it_succeeds() -> None:
    out = run({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "2",
               "restart-strategy.fixed-delay.delay": "10 ms"}, healthy_from=2)  # fmt: skip
    assert out == [i * 10 for i in range(10)]
    assert ATTEMPTS == [0, 1, 2]


def test_a_configured_fixed_delay_gives_up_after_its_attempts() -> None:
    with pytest.raises(RestartsExhaustedError, match=r"fixed_delay_restart\(attempts=2, delay_ms=0\)"):
        run({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 2,
             "restart-strategy.fixed-delay.delay": 0}, healthy_from=99)  # fmt: skip
    assert ATTEMPTS == [0, 1, 2]


def test_a_configured_none_does_not_restart_a_checkpointed_job() -> None:
    with pytest.raises(RuntimeError, match="injected failure in attempt 0"):
        run({"restart-strategy.type": "none"}, healthy_from=99)
    assert ATTEMPTS == [0]


def test_without_a_type_a_checkpointed_job_restarts_by_flink_default() -> None:
    """No restart strategy anywhere and checkpointing on: exponential delay (1 s +-10% first)."""
    assert run({}, healthy_from=1) == [i * 10 for i in range(10)]
    assert ATTEMPTS == [0, 1]


def test_without_a_type_or_checkpointing_a_job_fails_at_once() -> None:
    with pytest.raises(RuntimeError, match="injected failure in attempt 0"):
        run({}, healthy_from=1, checkpointing=False)
    assert ATTEMPTS == [0]


def test_a_configured_exponential_delay_gives_up_after_its_attempts_before_reset() -> None:
    exhausted = r"exponential_delay_restart\(initial_ms=10, max_ms=20, .*attempts=2\)"
    with pytest.raises(RestartsExhaustedError, match=exhausted):
        run(
            {"restart-strategy.type": "exponential-delay",
             "restart-strategy.exponential-delay.initial-backoff": "10 ms",
             "restart-strategy.exponential-delay.max-backoff": "20 ms",
             "restart-strategy.exponential-delay.attempts-before-reset-backoff": "2"},
            healthy_from=99,
        )  # fmt: skip
    assert ATTEMPTS == [0, 1, 2]


def test_a_configured_failure_rate_fails_the_job_past_its_rate() -> None:
    """One failure per minute allowed: the first restarts the job, the second ends it."""
    with pytest.raises(RestartsExhaustedError, match=r"failure_rate_restart\(max_failures=1"):
        run(
            {"restart-strategy.type": "failure-rate",
             "restart-strategy.failure-rate.max-failures-per-interval": 1,
             "restart-strategy.failure-rate.failure-rate-interval": "1 min",
             "restart-strategy.failure-rate.delay": "0 s"},
            healthy_from=99,
        )  # fmt: skip
    assert ATTEMPTS == [0, 1]
