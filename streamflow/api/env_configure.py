"""The configuration keys of ``StreamExecutionEnvironment.configure`` (Flink's names).

Mixed into :class:`~streamflow.api.environment.StreamExecutionEnvironment`: each key
sets what the environment's own setter does (``enable_checkpointing``,
``set_state_backend``, ``set_runtime_mode``, ...) or a field of its
:class:`~streamflow.runtime.execution.RuntimeConfig`; an unknown key is refused.
"""

from __future__ import annotations

import logging
from typing import Any

from ..checkpoint.config import CheckpointingMode
from ..checkpoint.restart_config import configure_restart_key, is_restart_key
from ..checkpoint.storages import JobManagerCheckpointStorage
from ..configuration import _parse_bool
from ..execution_mode import RuntimeExecutionMode, TimeCharacteristic
from ..flink_duration import duration_ms as _duration_ms
from ..runtime.blocking_result import DEFAULT_RESULTS_MEMORY
from ..runtime.record_size import parse_memory_size
from ..runtime.sort_buffer import DEFAULT_SORT_MEMORY
from ..state.backends import EmbeddedRocksDBStateBackend, state_backend_from_config
from .env_config_keys import configure_more

__all__ = ["ConfigurationMixin"]

_log = logging.getLogger("streamflow")

_IGNORE_UNCLAIMED = (  # Flink 1.x's key, and 2.x's
    "execution.savepoint.ignore-unclaimed-state",
    "execution.state-recovery.ignore-unclaimed-state",
)
_CHECKPOINT_DURATIONS = {  # Flink's duration keys and the CheckpointConfig setter each sets
    "execution.checkpointing.timeout": "set_checkpoint_timeout",
    "execution.checkpointing.min-pause": "set_min_pause_between_checkpoints",
}


class ConfigurationMixin:
    """``configure()``: Flink configuration keys (module doc)."""

    runtime: Any
    _rocksdb_local_dir: str | None
    _state_backend: Any
    _spark_configuration: dict[str, Any]
    _chaining: bool

    def configure(self, configuration: Any) -> Any:
        """Flink configuration keys: ``execution.savepoint.path`` (2.x:
        ``execution.state-recovery.path``), ``execution.savepoint.ignore-unclaimed-state`` (2.x:
        ``execution.state-recovery.ignore-unclaimed-state``), ``execution.checkpointing.interval``,
        ``state.checkpoints.dir``, ``state.savepoints.dir`` (``execution.checkpointing.savepoint-dir``:
        the default savepoint directory), ``execution.checkpointing.unaligned``, ``parallelism.default``,
        ``execution.engine`` (``asyncio``), ``state.backend.type`` (``hashmap``, ``rocksdb``),
        ``state.backend.rocksdb.localdir``, ``state.backend.incremental`` and
        ``state.backend.incremental.max-chain`` (incremental checkpoints of heap keyed state: on,
        32), ``state.backend.heap.snapshot-process`` (``auto`` by default: bases, ``on``, ``off``: encode heap
        checkpoints in a forked child, ``state/heap_fork.py``) and its ``.min-entries`` (a capture
        of at least that many entries forks, instead of the cost estimate),
        ``taskmanager.memory.network.max`` (the job's in-flight byte budget),
        ``streamflow.channel.max-in-flight-bytes`` (a channel's),
        ``execution.loop-budget`` (how long the job works before it lets the event loop run,
        e.g. ``"10 ms"``), ``streamflow.gc.freeze`` (``gc.freeze()`` after long collections and
        restores while jobs run; default true, see docs/performance.md), ``rest.port`` and
        ``rest.address`` (serve the job page,
        REST API and ``/metrics``; off by default, 127.0.0.1 unless told otherwise) and
        ``streamflow.progress`` (progress bars for bounded jobs: true, false, or auto = on a TTY),
        ``pipeline.auto-watermark-interval`` (``"200 ms"``, ``"1 s"``; 0: no periodic watermarks),
        ``pipeline.watermark-alignment.allow-unaligned-source-splits`` (accepted, changes nothing:
        every reader here aligns its splits or reads one stream),
        ``execution.checkpointing.storage`` (``jobmanager``: in memory, or in
        ``execution.checkpointing.dir`` when one is set, as Flink's; ``filesystem``),
        ``execution.checkpointing.timeout``, ``.min-pause``, ``.mode``,
        ``.max-concurrent-checkpoints``, ``pipeline.operator-chaining`` (``.enabled``),
        ``pipeline.time-characteristic`` (PyFlink 1.x), ``execution.buffer-timeout``
        (``.interval``), ``state.backend`` (1.x's name of ``state.backend.type``; ``jobmanager``
        and ``filesystem`` are the heap backend), ``execution.runtime-mode``,
        ``execution.sorted-inputs.enabled`` (batch mode: keyed
        operators read their input sorted by key and timestamp; default true) and
        ``execution.sorted-inputs.memory`` (the bytes of records a keyed operator sorts in memory
        before it spills sorted runs to disk; ``runtime/sort_buffer.py``),
        ``execution.batch-shuffle-mode`` (``ALL_EXCHANGES_BLOCKING``, the default: a batch job's
        exchanges are blocking and a failure restarts only its pipelined region,
        ``runtime/regions.py``; ``ALL_EXCHANGES_PIPELINED``: every task runs at once and a
        failure restarts the whole job) and ``streamflow.blocking-results.memory`` (the bytes of
        blocking results kept in memory before they spill, ``runtime/blocking_result.py``);
        ``restart-strategy.type`` (1.x: ``restart-strategy``) and the ``restart-strategy.*``
        options of its strategies (``checkpoint/restart_config.py``: Flink's names, defaults and
        default-strategy rule); the checkpoint keys ``execution.checkpointing.tolerable-failed-checkpoints``,
        ``.externalized-checkpoint-retention``, ``.num-retained`` (``state.checkpoints.num-retained``),
        ``.unaligned.enabled`` (``.unaligned``), ``.aligned-checkpoint-timeout``
        (``.alignment-timeout``), ``.unaligned.forced``, ``.incremental``; ``pipeline.max-parallelism``,
        ``pipeline.name`` (the name of a job executed without one), ``pipeline.global-job-parameters``
        and ``ExecutionConfig``'s recorded ``pipeline.*`` keys, the Python worker and dependency
        keys (``python.files`` on ``sys.path``, the others logged); Flink's RocksDB tuning keys
        (logged) and the Table API keys (refused, naming them; ``api/env_config_keys.py``). A
        dict or a PyFlink ``Configuration``; an unknown key is refused."""
        env: Any = self  # a StreamExecutionEnvironment: its setters do the work
        if hasattr(configuration, "to_dict"):
            configuration = configuration.to_dict()
        for key, value in configuration.items():
            if key in ("execution.savepoint.path", "execution.state-recovery.path"):  # 1.x, 2.x
                self.runtime.savepoint_path = None if value is None else str(value)
            elif key in _IGNORE_UNCLAIMED:
                self.runtime.allow_non_restored_state = _truthy(value)
            elif key == "execution.checkpointing.interval":
                env.enable_checkpointing(_duration_ms(value, key))
            elif key in _CHECKPOINT_DURATIONS:
                getattr(self.runtime.checkpoint, _CHECKPOINT_DURATIONS[key])(_duration_ms(value, key))
            elif key in ("execution.checkpointing.mode", "execution.checkpointing.consistency-mode"):
                self.runtime.checkpoint.set_checkpointing_mode(CheckpointingMode[str(value).upper()])
            elif key == "execution.checkpointing.max-concurrent-checkpoints":
                self.runtime.checkpoint.set_max_concurrent_checkpoints(int(value))
            elif key in ("pipeline.operator-chaining", "pipeline.operator-chaining.enabled"):
                self._chaining = _truthy(value)
            elif key == "pipeline.time-characteristic":  # PyFlink 1.x
                env.set_stream_time_characteristic(TimeCharacteristic[str(value)])
            elif key in ("execution.buffer-timeout", "execution.buffer-timeout.interval"):
                env.set_buffer_timeout(_duration_ms(value, key))
            elif key in ("state.backend.type", "state.backend"):  # state.backend: Flink 1.x's key
                local = self._rocksdb_local_dir
                env.set_state_backend(state_backend_from_config(str(value)))
                if local is not None:
                    self._configure_rocksdb_dir(local)
            elif key == "state.backend.rocksdb.localdir":
                self._configure_rocksdb_dir(str(value))
            elif key in ("state.backend.incremental", "execution.checkpointing.incremental"):
                if not _truthy(value) and isinstance(self._state_backend, EmbeddedRocksDBStateBackend):
                    raise ValueError("streamflow's RocksDB checkpoints are always incremental")
                self.runtime.checkpoint.enable_incremental_checkpoints(_truthy(value))  # the heap's
            elif key in ("state.checkpoints.dir", "execution.checkpointing.dir"):
                self.runtime.checkpoint.set_checkpoint_storage_dir(str(value))
            elif key in ("state.savepoints.dir", "execution.checkpointing.savepoint-dir"):
                env.set_default_savepoint_directory(str(value))  # each savepoint in a new subdirectory
            elif key in ("execution.checkpointing.storage", "state.checkpoint-storage"):  # 2.x, 1.x
                self._configure_checkpoint_storage(str(value), configuration)
            elif key in ("state.storage.fs.write-buffer-size", "execution.checkpointing.write-buffer-size"):
                _log.info("%s=%s is recorded, not used: streamflow writes each checkpoint entry as one "
                         "file with one atomic rename", key, value)
            elif key == "pipeline.watermark-alignment.allow-unaligned-source-splits":
                _configure_unaligned_source_splits(value)
            elif key == "state.backend.incremental.max-chain":
                self.runtime.checkpoint.enable_incremental_checkpoints(
                    self.runtime.checkpoint.incremental, max_chain=int(value)
                )
            elif key == "state.backend.heap.snapshot-process":
                self.runtime.checkpoint.snapshot_process = _snapshot_mode(value)
            elif key == "state.backend.heap.snapshot-process.min-entries":
                self.runtime.checkpoint.snapshot_process_min_entries = None if value is None else int(value)
            elif key == "parallelism.default":
                env.set_parallelism(int(value))
            elif key == "rest.port":
                self.runtime.rest_port = None if value is None else int(value)
            elif key in ("rest.address", "rest.bind-address"):
                self.runtime.rest_address = str(value)
            elif key == "taskmanager.memory.network.max":
                env.set_job_byte_budget(value)
            elif key == "streamflow.channel.max-in-flight-bytes":
                env.set_channel_byte_budget(value)
            elif key == "execution.loop-budget":
                env.set_loop_budget(value)
            elif key == "streamflow.gc.freeze":
                self.runtime.gc_freeze = _truthy(value)
            elif key == "streamflow.progress":
                self.runtime.progress = None if value in (None, "auto") else _truthy(value)
            elif key == "execution.engine":
                env.set_engine(str(value))
            elif key == "python.execution-mode":  # PyFlink's process/thread workers
                _log.info("python.execution-mode=%s accepted: streamflow runs functions in this "
                          "interpreter and event loop (no process or thread workers)", value)
            elif key.startswith("python.fn-execution."):  # PyFlink's bundles between JVM and Python
                _log.info("%s=%s accepted: no JVM, so no bundles (records move in batches between "
                          "operators in this process)", key, value)
            elif key == "pipeline.auto-watermark-interval":
                env.set_auto_watermark_interval(_duration_ms(value, key))
            elif key == "execution.runtime-mode":
                env.set_runtime_mode(RuntimeExecutionMode[str(value).upper()])
            elif key == "execution.sorted-inputs.enabled":
                self.runtime.sorted_inputs = _truthy(value)
            elif key == "execution.sorted-inputs.memory":
                memory = parse_memory_size(value, key)
                self.runtime.sorted_inputs_memory = DEFAULT_SORT_MEMORY if memory is None else memory
            elif key == "execution.batch-shuffle-mode":
                self.runtime.batch_blocking = _batch_shuffle_mode(value)
            elif key == "streamflow.blocking-results.memory":
                memory = parse_memory_size(value, key)
                self.runtime.blocking_results_memory = DEFAULT_RESULTS_MEMORY if memory is None else memory
            elif is_restart_key(key):  # restart-strategy.type and its options (restart_config.py)
                configure_restart_key(self.runtime, key, value)
            elif key.startswith(("spark.", "execution.spark.")):
                self._spark_configuration[key] = value
            elif not configure_more(env, key, value):  # env_config_keys.py
                raise ValueError(f"unknown configuration key {key!r}")
        return env

    def _configure_checkpoint_storage(self, kind: str, configuration: Any) -> None:
        """``jobmanager``: Flink's ``JobManagerCheckpointStorage``, with the checkpoint directory
        when one is configured (``execution.checkpointing.dir`` in this configuration or before:
        Flink's ``JobManagerCheckpointStorage.createFromConfig`` takes it as its path and persists
        the checkpoints there), else in memory; ``filesystem``: in the directory that
        ``execution.checkpointing.dir`` names (in the same configuration)."""
        if kind == "jobmanager":
            directory = next(
                (configuration[k] for k in ("execution.checkpointing.dir", "state.checkpoints.dir")
                 if configuration.get(k) is not None),
                self.runtime.checkpoint.storage_dir,
            )  # fmt: skip
            self.runtime.checkpoint.set_checkpoint_storage(JobManagerCheckpointStorage(directory))
        elif kind == "filesystem":
            named = any(k in configuration for k in ("execution.checkpointing.dir", "state.checkpoints.dir"))
            if not named and self.runtime.checkpoint.storage_dir is None:
                raise ValueError(
                    "execution.checkpointing.storage: filesystem needs execution.checkpointing.dir"
                )
        else:
            raise ValueError(f"execution.checkpointing.storage {kind!r}: choose jobmanager or filesystem")

    def _configure_rocksdb_dir(self, path: str) -> None:
        self._rocksdb_local_dir = path
        if isinstance(self._state_backend, EmbeddedRocksDBStateBackend):
            self._state_backend.set_db_storage_paths(path)


def _configure_unaligned_source_splits(value: Any) -> None:
    """Flink's ``pipeline.watermark-alignment.allow-unaligned-source-splits`` (default false):
    with true, an aligned source whose reader cannot pause single splits
    (``pauseOrResumeSplits`` raising ``UnsupportedOperationException``) keeps reading them
    unaligned instead of failing the job; a reader that can pause them still does. Every
    streamflow reader either aligns its splits (``SourceReader.align_splits``: the Kafka reader
    pauses the partitions ahead) or reads one stream its task aligns as a whole, so none fails
    and the value changes nothing here: checked as Flink's boolean, logged."""
    allowed = value if isinstance(value, bool) else _parse_bool(str(value))
    _log.info(
        "pipeline.watermark-alignment.allow-unaligned-source-splits=%s accepted; it changes nothing "
        "in streamflow: every reader aligns its splits (the Kafka reader pauses partitions) or reads "
        "one stream its task aligns, so no reader fails for lack of split alignment",
        str(allowed).lower(),
    )


def _batch_shuffle_mode(value: Any) -> bool:
    """Flink's ``BatchShuffleMode``: True for ``ALL_EXCHANGES_BLOCKING``, False for
    ``ALL_EXCHANGES_PIPELINED``; the hybrid modes are refused, naming the supported ones."""
    mode = str(value).strip().upper()
    if mode in ("ALL_EXCHANGES_BLOCKING", "ALL_EXCHANGES_PIPELINED"):
        return mode == "ALL_EXCHANGES_BLOCKING"
    raise ValueError(
        f"execution.batch-shuffle-mode {value!r} is not supported: use ALL_EXCHANGES_BLOCKING "
        "(the default) or ALL_EXCHANGES_PIPELINED"
    )


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() in ("true", "1", "yes")


def _snapshot_mode(value: Any) -> str:
    mode = {"true": "on", "false": "off"}.get(str(value).lower(), str(value).lower())
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"state.backend.heap.snapshot-process must be auto, on or off, got {value!r}")
    return mode
