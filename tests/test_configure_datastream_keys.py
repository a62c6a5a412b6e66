"""Flink's DataStream configuration keys through ``configure`` / ``get_execution_environment``:
each honoured (the setter it names answers the value), accepted and logged with why it changes
nothing, or refused naming the key (``api/env_config_keys.py``). Key names and values: Flink 2.x's
``CheckpointingOptions`` (with their deprecated 1.x keys) and ``PipelineOptions``."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from streamflow.common import Configuration
from streamflow.datastream import (
    ExternalizedCheckpointRetention,
    StreamExecutionEnvironment,
)


def env_with(options: dict[str, Any]) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment(Configuration.from_dict(options))


@pytest.mark.parametrize(
    "key, value, getter, expected",
    [
        ("execution.checkpointing.tolerable-failed-checkpoints", "3",
         lambda e: e.get_checkpoint_config().get_tolerable_checkpoint_failure_number(), 3),
        ("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION",
         lambda e: e.get_checkpoint_config().get_externalized_checkpoint_retention(),
         ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION),
        ("execution.checkpointing.externalized-checkpoint-retention", "NO_EXTERNALIZED_CHECKPOINTS",
         lambda e: e.get_checkpoint_config().is_externalized_checkpoints_enabled(), False),
        ("execution.checkpointing.num-retained", "5", lambda e: e.get_checkpoint_config().retained, 5),
        ("state.checkpoints.num-retained", 2, lambda e: e.get_checkpoint_config().retained, 2),
        ("execution.checkpointing.unaligned.enabled", "true",
         lambda e: e.get_checkpoint_config().is_unaligned_checkpoints_enabled(), True),
        ("execution.checkpointing.unaligned", "true",
         lambda e: e.get_checkpoint_config().is_unaligned_checkpoints_enabled(), True),
        ("execution.checkpointing.aligned-checkpoint-timeout", "30 s",
         lambda e: e.get_checkpoint_config().get_aligned_checkpoint_timeout().to_milliseconds(), 30_000),
        ("execution.checkpointing.alignment-timeout", "2 s",
         lambda e: e.get_checkpoint_config().get_aligned_checkpoint_timeout().to_milliseconds(), 2_000),
        ("execution.checkpointing.unaligned.forced", "true",
         lambda e: e.get_checkpoint_config().is_force_unaligned_checkpoints(), True),
        ("execution.checkpointing.incremental", "false",
         lambda e: e.get_checkpoint_config().is_incremental_checkpoints_enabled(), False),
        ("pipeline.max-parallelism", "64", lambda e: e.get_max_parallelism(), 64),
        ("execution.state-recovery.path", "/tmp/sp-1", lambda e: e.runtime.savepoint_path, "/tmp/sp-1"),
        ("execution.state-recovery.ignore-unclaimed-state", "true",
         lambda e: e.runtime.allow_non_restored_state, True),
        ("execution.checkpointing.prefer-checkpoint-for-recovery", "true",
         lambda e: e.get_checkpoint_config().is_prefer_checkpoint_for_recovery(), True),
        ("state.backend.changelog.enabled", "true", lambda e: e.is_changelog_state_backend_enabled(), True),
        ("execution.buffer-timeout.enabled", "false", lambda e: e.get_buffer_timeout(), -1),
        ("state.checkpoint-storage", "jobmanager",
         lambda e: type(e.get_checkpoint_config().get_checkpoint_storage()).__name__,
         "JobManagerCheckpointStorage"),
        ("pipeline.object-reuse", "true", lambda e: e.get_config().is_object_reuse_enabled(), True),
        ("pipeline.generic-types", "false", lambda e: e.get_config().has_generic_types_disabled(), True),
        ("pipeline.force-kryo", "true", lambda e: e.get_config().is_force_kryo_enabled(), True),
        ("pipeline.force-avro", "true", lambda e: e.get_config().is_force_avro_enabled(), True),
        ("pipeline.closure-cleaner-level", "NONE",
         lambda e: e.get_config().is_closure_cleaner_enabled(), False),
        ("pipeline.closure-cleaner-level", "recursive",
         lambda e: e.get_config().is_closure_cleaner_enabled(), True),
        ("pipeline.global-job-parameters", "a:1,b:two",
         lambda e: e.get_config().get_global_job_parameters(), {"a": "1", "b": "two"}),
        ("pipeline.global-job-parameters", {"a": 1},
         lambda e: e.get_config().get_global_job_parameters(), {"a": "1"}),
    ],
)  # fmt: skip
def test_a_key_sets_what_its_setter_sets(key: str, value: Any, getter: Any, expected: Any) -> None:
    env = env_with({key: value}) if not isinstance(value, dict) else StreamExecutionEnvironment({key: value})
    assert getter(env) == expected


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("execution.checkpointing.tolerable-failed-checkpoints", "-1", "must be >= 0"),
        ("execution.checkpointing.externalized-checkpoint-retention", "KEEP", "choose one of"),
        ("execution.checkpointing.num-retained", "0", "must be >= 1"),
        ("execution.checkpointing.unaligned.enabled", "yes", "Unrecognized option for boolean"),
        ("pipeline.closure-cleaner-level", "DEEP", "choose one of NONE, TOP_LEVEL, RECURSIVE"),
        ("pipeline.global-job-parameters", "a=1", "key:value"),
        ("state.backend.rocksdb.options-factory", "org.example.MyFactory", "RocksDBOptionsFactory"),
        ("table.exec.state.ttl", "1 h", "Table API / SQL option"),
        ("jobmanager.execution.failover-strategy", "full", "ALL_EXCHANGES_PIPELINED"),
        ("jobmanager.execution.failover-strategy", "partial", "choose region or full"),
        ("execution.state-recovery.claim-mode", "OWN", "choose NO_CLAIM, CLAIM or LEGACY"),
        ("table.exec.mini-batch.enabled", "true", "Table API / SQL option"),
    ],
)
def test_a_bad_or_unsupported_key_is_refused_naming_it(key: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        env_with({key: value})
    assert key.split(".")[0] in str(info.value)


@pytest.mark.parametrize(
    "key, value",
    [("state.backend.rocksdb.predefined-options", "SPINNING_DISK_OPTIMIZED"),
     ("state.backend.rocksdb.checkpoint.transfer.thread.num", "8"),
     ("state.backend.rocksdb.memory.managed", "true"),
     ("state.backend.rocksdb.block.cache-size", "64mb"),
     ("state.backend.rocksdb.timer-service.factory", "HEAP")],
)  # fmt: skip
def test_rocksdb_keys_kept_without_effect_are_logged(key: str, value: str, caplog: Any) -> None:
    with caplog.at_level(logging.INFO, "streamflow"):
        env_with({key: value})
    assert f"{key}={value} accepted, changes nothing" in caplog.text


def test_pipeline_name_names_a_job_executed_without_a_name() -> None:
    """PipelineOptions.NAME: the job name of ``execute()`` without one; a name given wins."""
    env = env_with({"pipeline.name": "orders"})
    env.from_collection([1, 2]).print()
    assert env.execute().get_job_id() is not None
    env.from_collection([1, 2]).print()
    client = env.execute_async()
    try:
        assert client._client.job_name == "orders"
    finally:
        client.get_job_execution_result().result()
    assert env._job_name("mine") == "mine"
    assert StreamExecutionEnvironment()._job_name(None) == "streamflow job"


@pytest.mark.parametrize(
    "key, value, logged",
    [
        ("execution.checkpointing.cleaner.parallel-mode", "true", "accepted, changes nothing"),
        ("execution.checkpointing.interval-during-backlog", "0", "no source reports a backlog"),
        ("jobmanager.execution.failover-strategy", "region", "restarts the failed pipelined region"),
        ("execution.state-recovery.claim-mode", "NO_CLAIM", "NO_CLAIM accepted: what streamflow does"),
        ("execution.savepoint-restore-mode", "CLAIM", "restores as NO_CLAIM"),
        ("execution.checkpointing.file-merging.enabled", "true", "accepted, changes nothing"),
        ("state.backend.local-recovery", "true", "no local copy"),
        ("execution.state-recovery.from-local", "true", "no local copy"),
        ("state.backend.async", "true", "accepted, changes nothing"),
        ("pipeline.auto-type-registration", "false", "accepted, changes nothing"),
        ("python.state.cache-size", "1000", "no Python worker process"),
        ("python.metric.enabled", "false", "no Python worker process"),
        ("python.operator-chaining.enabled", "false", "pipeline.operator-chaining"),
        ("python.requirements", "requirements.txt", "set_python_requirements('requirements.txt') accepted"),
        ("python.executable", "/usr/bin/python3", "set_python_executable('/usr/bin/python3') accepted"),
        ("python.archives", "venv.zip#venv", "add_python_archive('venv.zip#venv') accepted"),
        (
            "pipeline.jars",
            "file:///a.jar;file:///b.jar",
            "add_jars(('file:///a.jar', 'file:///b.jar')) accepted",
        ),
        ("pipeline.classpaths", "file:///c", "add_classpaths(('file:///c',)) accepted"),
    ],
)
def test_keys_of_parts_streamflow_has_not_are_accepted_and_logged(
    key: str, value: str, logged: str, caplog: Any
) -> None:
    with caplog.at_level(logging.INFO, "streamflow"):
        env_with({key: value})
    assert logged in caplog.text


def test_python_files_go_on_sys_path(tmp_path: Any) -> None:
    import sys

    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "my_udfs_for_config.py").write_text("X = 42\n")
    try:
        env_with({"python.files": f"{tmp_path / 'helpers'},{tmp_path / 'helpers' / 'my_udfs_for_config.py'}"})
        import my_udfs_for_config  # type: ignore[import-not-found]

        assert my_udfs_for_config.X == 42
    finally:
        sys.path[:] = [p for p in sys.path if p != str(tmp_path / "helpers")]
        sys.modules.pop("my_udfs_for_config", None)


def test_checkpoints_after_tasks_finish_cannot_be_turned_off() -> None:
    env_with({"execution.checkpointing.checkpoints-after-tasks-finish": "true"})
    with pytest.raises(ValueError, match="checkpoints-after-tasks-finish=false is not supported"):
        env_with({"execution.checkpointing.checkpoints-after-tasks-finish": "false"})


def test_latency_interval_and_snapshot_compression_are_recorded_by_the_execution_config() -> None:
    env = env_with(
        {"metrics.latency.interval": "2 s", "execution.checkpointing.snapshot-compression": "true"}
    )
    assert env.get_config().get_latency_tracking_interval() == 2000
    assert env.get_config().is_use_snapshot_compression() is True


def test_auto_generated_uids_disabled_refuses_an_operator_without_uid() -> None:
    """Flink's StreamGraphGenerator: with ``pipeline.auto-generate-uids: false`` a physical
    transformation without uid fails the job's submission, naming the operator; with every
    operator's uid set the job runs (the watermark node ``from_source`` appends is part of the
    source operator and needs none)."""
    from streamflow.common import WatermarkStrategy
    from streamflow.datastream.connectors.number_seq import NumberSequenceSource
    from streamflow.graph import GraphError
    from streamflow.testing import ListSink

    env = env_with({"pipeline.auto-generate-uids": "false"})
    assert env.get_config().has_auto_generated_uids_enabled() is False
    env.from_collection([1, 2]).uid("numbers").map(lambda x: x + 1).name("plus one").print().uid("out")
    with pytest.raises(GraphError, match="no UID or hash has been assigned to operator plus one"):
        env.execute()
    env = env_with({"pipeline.auto-generate-uids": "false"})
    stream = env.from_source(NumberSequenceSource(1, 3), WatermarkStrategy.for_monotonous_timestamps(), "seq")
    sink = ListSink()
    stream.uid("seq").map(lambda x: x * 2).uid("double").sink_to(sink).uid("out")
    env.execute()
    assert sorted(sink.results) == [2, 4, 6]
    env2 = StreamExecutionEnvironment.get_execution_environment()
    env2.get_config().disable_auto_generated_uids()
    env2.from_collection([1]).print()
    with pytest.raises(GraphError, match="Auto generated UIDs have been disabled"):
        env2.execute()
