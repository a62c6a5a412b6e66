"""The cases of Apache Flink's ``pyflink/datastream/tests/test_check_point_config.py``
(apache/flink ``01a5c12``, the version available to us: PyFlink 1.x names such as
``ExternalizedCheckpointCleanup``), on streamflow: the same calls and expected values as
pytest functions. ``test_constant`` compares with ``JCheckpointConfig``'s constants; the port
compares with their values in Flink's ``CheckpointConfig``. Nothing is left out.
"""

from __future__ import annotations

import pytest

from streamflow.common import Duration
from streamflow.datastream import (
    CheckpointConfig,
    CheckpointingMode,
    ExternalizedCheckpointCleanup,
    StreamExecutionEnvironment,
)


@pytest.fixture
def env() -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment()



@pytest.fixture
def checkpoint_config(env) -> CheckpointConfig:
    return env.get_checkpoint_config()


def test_constant():
    # Flink compares with JCheckpointConfig's constants; their values (Flink's CheckpointConfig).
    assert CheckpointConfig.DEFAULT_MAX_CONCURRENT_CHECKPOINTS == 1
    assert CheckpointConfig.DEFAULT_MIN_PAUSE_BETWEEN_CHECKPOINTS == 0
    assert CheckpointConfig.DEFAULT_TIMEOUT == 10 * 60 * 1000
    assert CheckpointConfig.DEFAULT_MODE == CheckpointingMode.EXACTLY_ONCE


def test_is_checkpointing_enabled(env, checkpoint_config):
    assert not checkpoint_config.is_checkpointing_enabled()
    env.enable_checkpointing(1000)
    assert checkpoint_config.is_checkpointing_enabled()


def test_get_set_checkpointing_mode(checkpoint_config):
    assert checkpoint_config.get_checkpointing_mode() == CheckpointingMode.EXACTLY_ONCE
    checkpoint_config.set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)
    assert checkpoint_config.get_checkpointing_mode() == CheckpointingMode.AT_LEAST_ONCE
    checkpoint_config.set_checkpointing_mode(CheckpointingMode.EXACTLY_ONCE)
    assert checkpoint_config.get_checkpointing_mode() == CheckpointingMode.EXACTLY_ONCE


def test_get_set_checkpoint_interval(checkpoint_config):
    assert checkpoint_config.get_checkpoint_interval() == -1
    checkpoint_config.set_checkpoint_interval(1000)
    assert checkpoint_config.get_checkpoint_interval() == 1000


def test_get_set_checkpoint_timeout(checkpoint_config):
    assert checkpoint_config.get_checkpoint_timeout() == 600000
    checkpoint_config.set_checkpoint_timeout(300000)
    assert checkpoint_config.get_checkpoint_timeout() == 300000


def test_get_set_min_pause_between_checkpoints(checkpoint_config):
    assert checkpoint_config.get_min_pause_between_checkpoints() == 0
    checkpoint_config.set_min_pause_between_checkpoints(100000)
    assert checkpoint_config.get_min_pause_between_checkpoints() == 100000


def test_get_set_max_concurrent_checkpoints(checkpoint_config):
    assert checkpoint_config.get_max_concurrent_checkpoints() == 1
    checkpoint_config.set_max_concurrent_checkpoints(2)
    assert checkpoint_config.get_max_concurrent_checkpoints() == 2


def test_get_set_fail_on_checkpointing_errors(checkpoint_config):
    assert checkpoint_config.is_fail_on_checkpointing_errors()
    checkpoint_config.set_fail_on_checkpointing_errors(False)
    assert not checkpoint_config.is_fail_on_checkpointing_errors()


def test_get_set_externalized_checkpoints_cleanup(checkpoint_config):
    assert not checkpoint_config.is_externalized_checkpoints_enabled()
    assert checkpoint_config.get_externalized_checkpoint_cleanup() is None
    checkpoint_config.enable_externalized_checkpoints(ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION)
    assert checkpoint_config.is_externalized_checkpoints_enabled()
    assert (
        checkpoint_config.get_externalized_checkpoint_cleanup()
        == ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION
    )
    checkpoint_config.enable_externalized_checkpoints(ExternalizedCheckpointCleanup.DELETE_ON_CANCELLATION)
    assert (
        checkpoint_config.get_externalized_checkpoint_cleanup()
        == ExternalizedCheckpointCleanup.DELETE_ON_CANCELLATION
    )


def test_get_set_prefer_checkpoint_for_recovery(checkpoint_config):
    assert not checkpoint_config.is_prefer_checkpoint_for_recovery()
    checkpoint_config.set_prefer_checkpoint_for_recovery(True)
    assert checkpoint_config.is_prefer_checkpoint_for_recovery()


def test_is_unaligned_checkpointing_enabled(checkpoint_config):
    assert not checkpoint_config.is_unaligned_checkpoints_enabled()
    assert not checkpoint_config.is_force_unaligned_checkpoints()
    assert checkpoint_config.get_alignment_timeout() == Duration.of_millis(0)
    checkpoint_config.enable_unaligned_checkpoints()
    assert checkpoint_config.is_unaligned_checkpoints_enabled()
    checkpoint_config.disable_unaligned_checkpoints()
    assert not checkpoint_config.is_unaligned_checkpoints_enabled()
    checkpoint_config.enable_unaligned_checkpoints(True)
    assert checkpoint_config.is_unaligned_checkpoints_enabled()
    checkpoint_config.set_force_unaligned_checkpoints(True)
    assert checkpoint_config.is_force_unaligned_checkpoints()
    checkpoint_config.set_alignment_timeout(Duration.of_minutes(1))
    assert checkpoint_config.get_alignment_timeout() == Duration.of_minutes(1)
