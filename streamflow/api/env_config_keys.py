"""More of Flink's configuration keys for ``StreamExecutionEnvironment.configure``: the
checkpoint options ``CheckpointConfig`` has setters for, the ``pipeline.*`` options of
``ExecutionConfig``, the Python worker and dependency options, Flink's RocksDB tuning options
(logged: they change no result), and the Table API keys this DataStream runtime refuses.

:func:`configure_more` answers whether it took the key. Each key is either honoured (it sets
what the named setter sets), or accepted and logged at INFO with why it changes nothing here
(as ``ExecutionConfig``'s JVM settings are), or refused with a ``ValueError`` naming the key and
why: never dropped without a word.
"""

from __future__ import annotations

import logging
from typing import Any

from ..checkpoint.storages import ExternalizedCheckpointRetention
from ..configuration import _parse_bool
from ..flink_duration import duration_ms

__all__ = ["configure_more"]

_log = logging.getLogger("streamflow")

_RETAINED = ("execution.checkpointing.num-retained", "state.checkpoints.num-retained")  # 2.x, 1.x
_ALIGNED_TIMEOUT = (
    "execution.checkpointing.aligned-checkpoint-timeout",
    "execution.checkpointing.alignment-timeout",
)
_CLOSURE_LEVELS = ("NONE", "TOP_LEVEL", "RECURSIVE")  # Flink's ExecutionConfig.ClosureCleanerLevel
_RECORDED = {  # pipeline keys ExecutionConfig records (logging why they change nothing here)
    "pipeline.object-reuse": ("enable_object_reuse", "disable_object_reuse"),
    "pipeline.auto-generate-uids": ("enable_auto_generated_uids", "disable_auto_generated_uids"),
    "pipeline.generic-types": ("enable_generic_types", "disable_generic_types"),
    "pipeline.force-kryo": ("enable_force_kryo", "disable_force_kryo"),
    "pipeline.force-avro": ("enable_force_avro", "disable_force_avro"),
}
_WORKER = "streamflow runs Python functions in this interpreter: there is no Python worker process"
_LOCAL = "a restart in this process restores from the checkpoint storage (or memory): no local copy"
_NOTHING_TO_DO = {  # keys Flink reads that describe what streamflow does anyway, or a part it has not
    "execution.checkpointing.cleaner.parallel-mode": "there is no cleaner executor to parallelise",
    "state.backend.async": "deprecated in Flink: every snapshot is asynchronous (so are streamflow's)",
    "pipeline.auto-type-registration": "records are Python objects: there are no types to register",
    "execution.checkpointing.interval-during-backlog": "no source reports a backlog (Flink's "
    "isProcessingBacklog), so execution.checkpointing.interval applies throughout",
    "execution.checkpointing.file-merging.enabled": "each checkpoint entry is one file, renamed into place",
    "execution.checkpointing.local-backup.enabled": _LOCAL,
    "state.backend.local-recovery": _LOCAL,
    "execution.state-recovery.from-local": _LOCAL,
    "python.pythonpath": _WORKER,
    "python.state.cache-size": _WORKER + " (state is read in place)",
    "python.map-state.read-cache-size": _WORKER + " (state is read in place)",
    "python.map-state.write-cache-size": _WORKER + " (state is written in place)",
    "python.map-state.iterate-response-batch-size": _WORKER + " (map state is iterated in place)",
    "python.metric.enabled": _WORKER + " (user metrics are always on)",
    "python.profile.enabled": _WORKER + " (profile the program's own process)",
    "python.systemenv.enabled": _WORKER,
    "python.operator-chaining.enabled": "operators chain as pipeline.operator-chaining says",
}
_PYTHON_SETTERS = {  # keys of PyFlink's dependency setters (env_pyflink.py)
    "python.requirements": "set_python_requirements",
    "python.archives": "add_python_archive",
    "python.executable": "set_python_executable",
    "python.client.executable": "set_python_executable",
    "pipeline.jars": "add_jars",
    "pipeline.classpaths": "add_classpaths",
}
_ROCKSDB_KEPT = {  # why a RocksDB key changes nothing, where more than "it tunes Flink's RocksDB"
    "state.backend.rocksdb.predefined-options": "Flink's profiles tune RocksDB's block cache and compaction",
    "state.backend.rocksdb.checkpoint.transfer.thread.num": "checkpoints are written by the job's own tasks",
    "state.backend.rocksdb.timer-service.factory": "timers live in RocksDB beside the keyed state (Flink's "
    "default, ROCKSDB; state/rocksdb_timers.py)",
}


def configure_more(env: Any, key: str, value: Any) -> bool:
    """Apply ``key`` to ``env`` (a StreamExecutionEnvironment) if it is one of this module's."""
    checkpoint = env.get_checkpoint_config()
    if key == "execution.checkpointing.tolerable-failed-checkpoints":
        checkpoint.set_tolerable_checkpoint_failure_number(_int(value, key, 0))
    elif key == "execution.checkpointing.externalized-checkpoint-retention":
        checkpoint.set_externalized_checkpoint_retention(_retention(value))
    elif key in _RETAINED:
        checkpoint.set_max_retained_checkpoints(_int(value, key, 1))
    elif key in ("execution.checkpointing.unaligned.enabled", "execution.checkpointing.unaligned"):
        checkpoint.enable_unaligned_checkpoints(_bool(value, key))
    elif key in _ALIGNED_TIMEOUT:
        checkpoint.set_aligned_checkpoint_timeout(duration_ms(value, key))
    elif key == "execution.checkpointing.unaligned.forced":
        checkpoint.set_force_unaligned_checkpoints(_bool(value, key))
    elif key == "pipeline.max-parallelism":
        env.set_max_parallelism(_int(value, key, 1))
    elif key == "pipeline.name":
        env._pipeline_name = None if value is None else str(value)
    elif key in _RECORDED:
        enable, disable = _RECORDED[key]
        getattr(env.get_config(), enable if _bool(value, key) else disable)()
    elif key == "pipeline.closure-cleaner-level":
        level = str(value).strip().upper()
        if level not in _CLOSURE_LEVELS:
            raise ValueError(
                f"pipeline.closure-cleaner-level {value!r}: choose one of {', '.join(_CLOSURE_LEVELS)}"
            )
        config = env.get_config()
        config.disable_closure_cleaner() if level == "NONE" else config.enable_closure_cleaner()
    elif key == "pipeline.global-job-parameters":
        env.set_global_job_parameters(_map(value, key))
    elif key == "state.backend.rocksdb.options-factory":
        raise ValueError(
            f"{key}={value!r} is not supported: a Java RocksDBOptionsFactory cannot configure "
            "streamflow's RocksDB (rocksdict, no JVM); its own settings are "
            "EmbeddedRocksDBStateBackend(cache_entries=..., flush_entries=...)"
        )
    elif key.startswith("state.backend.rocksdb."):  # Flink's RocksDB tuning: no effect on results
        _log.info(
            "%s=%s accepted, changes nothing: %s; streamflow's RocksDB (rocksdict) is tuned with "
            "EmbeddedRocksDBStateBackend(cache_entries=..., flush_entries=...)",
            key, value, _ROCKSDB_KEPT.get(key, "it tunes Flink's JNI RocksDB (memory, caches, compaction)"),
        )  # fmt: skip
    elif key in _NOTHING_TO_DO:
        _log.info("%s=%s accepted, changes nothing: %s", key, value, _NOTHING_TO_DO[key])
    elif key == "execution.checkpointing.checkpoints-after-tasks-finish":
        if not _bool(value, key):
            raise ValueError(
                f"{key}=false is not supported: streamflow always checkpoints after some tasks "
                "finished (Flink's default, true), and cannot turn checkpoints off then"
            )
    elif key == "state.backend.changelog.enabled":
        env.enable_changelog_statebackend(_bool(value, key))  # logs what it does here
    elif key == "execution.checkpointing.prefer-checkpoint-for-recovery":  # PyFlink 1.x
        checkpoint.set_prefer_checkpoint_for_recovery(_bool(value, key))
    elif key == "execution.buffer-timeout.enabled":  # false: flush only when full (Flink's -1)
        if not _bool(value, key):
            env.set_buffer_timeout(-1)
    elif key in ("execution.state-recovery.claim-mode", "execution.savepoint-restore-mode"):  # 2.x, 1.x
        _claim_mode(key, value)
    elif key == "jobmanager.execution.failover-strategy":
        _failover_strategy(value)
    elif key == "metrics.latency.interval":
        env.get_config().set_latency_tracking_interval(duration_ms(value, key))
    elif key == "execution.checkpointing.snapshot-compression":
        env.get_config().set_use_snapshot_compression(_bool(value, key))
    elif key == "python.files":  # PythonOptions.PYTHON_FILES: comma-separated, put on sys.path
        for path in (p.strip() for p in str(value).split(",") if p.strip()):
            env.add_python_file(path)
    elif key in _PYTHON_SETTERS:  # the PyFlink setters: each logs that it changes nothing
        setter = getattr(env, _PYTHON_SETTERS[key])
        if key.startswith("pipeline."):  # Flink's list value: ';'-separated URLs
            setter(*[p.strip() for p in str(value).split(";") if p.strip()])
        else:
            setter(str(value))
    elif key.startswith(("table.", "sql-client.")):
        raise ValueError(
            f"configuration key {key!r} is a Table API / SQL option: streamflow runs the DataStream API "
            "only, so it would change nothing"
        )
    else:
        return False
    return True


def _claim_mode(key: str, value: Any) -> None:
    """Flink's restore (claim) mode of ``execution.state-recovery.path``: streamflow restores
    as ``NO_CLAIM`` (Flink 2's default): the snapshot resumed from stays the user's, never
    deleted by the job's retention (``JobClient._initial_restore``). ``CLAIM`` and 1.x's
    ``LEGACY`` would let Flink delete it once subsumed; here it is kept: logged."""
    mode = str(value).strip().upper()
    if mode not in ("NO_CLAIM", "CLAIM", "LEGACY"):
        raise ValueError(f"{key} {value!r}: choose NO_CLAIM, CLAIM or LEGACY")
    if mode == "NO_CLAIM":
        _log.info("%s=NO_CLAIM accepted: what streamflow does (the snapshot resumed from stays yours)", key)
    else:
        _log.info(
            "%s=%s accepted, changes nothing: streamflow restores as NO_CLAIM, the snapshot resumed "
            "from is never deleted by the job (Flink would take it over and delete it once subsumed)",
            key, mode,
        )  # fmt: skip


def _failover_strategy(value: Any) -> None:
    """Flink's ``jobmanager.execution.failover-strategy``: ``region`` (its default) is what
    streamflow does (a batch job over blocking exchanges restarts the failed pipelined region,
    a streaming job restarts whole: Flink restarts only the failed one of its disjoint
    pipelines); ``full`` is refused: it would restart every region of a batch job."""
    strategy = str(value).strip().lower()
    if strategy == "region":
        _log.info(
            "jobmanager.execution.failover-strategy=region accepted (Flink's default): a batch job "
            "restarts the failed pipelined region; a streaming job restarts whole, also where Flink "
            "would restart only the failed one of its disjoint pipelines"
        )
    elif strategy == "full":
        raise ValueError(
            "jobmanager.execution.failover-strategy=full is not supported: streamflow restarts the "
            "failed pipelined region of a batch job (region); to have a failure restart the whole "
            "batch job, set execution.batch-shuffle-mode: ALL_EXCHANGES_PIPELINED"
        )
    else:
        raise ValueError(f"jobmanager.execution.failover-strategy {value!r}: choose region or full")


def _int(value: Any, key: str, minimum: int) -> int:
    try:
        number = int(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None:
        raise ValueError(f"{key}: expected an integer, got {value!r}")
    if number < minimum:
        raise ValueError(f"{key} must be >= {minimum}, got {number}")
    return number


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    try:
        return _parse_bool(str(value))
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None


def _retention(value: Any) -> ExternalizedCheckpointRetention:
    if isinstance(value, ExternalizedCheckpointRetention):
        return value
    name = str(value).strip().upper()
    try:
        return ExternalizedCheckpointRetention[name]
    except KeyError:
        choices = ", ".join(r.name for r in ExternalizedCheckpointRetention)
        raise ValueError(
            f"execution.checkpointing.externalized-checkpoint-retention {value!r}: choose one of {choices}"
        ) from None


def _map(value: Any, key: str) -> dict[str, str]:
    """Flink's map option value: a dict, or ``k1:v1,k2:v2`` (``ConfigurationUtils.parseMap``)."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    out: dict[str, str] = {}
    for item in (i for i in str(value).split(",") if i.strip()):
        name, sep, text = item.partition(":")
        if not sep:
            raise ValueError(f"{key}: cannot read {item!r} as key:value (e.g. 'k1:v1,k2:v2')")
        out[name.strip()] = text.strip()
    return out
