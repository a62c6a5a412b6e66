"""The rest of PyFlink's ``StreamExecutionEnvironment`` surface.

Mixed into :class:`~streamflow.api.environment.StreamExecutionEnvironment`.
Settings that change behaviour here: ``set_runtime_mode`` (batch execution,
``api/batch.py``), ``set_buffer_timeout``. Settings that only make sense for
PyFlink's JVM and Python workers (``add_jars``, ``add_classpaths``,
``add_python_file``, ``set_python_requirements``, ...) are accepted and logged
at INFO: streamflow runs the user's code in the user's own interpreter, where
those files are already importable (``add_python_file`` adds the file's
directory to ``sys.path`` so imports inside functions still resolve).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
from typing import Any

from ..checkpoint.restart_strategy import FallbackRestart
from ..execution_mode import RuntimeExecutionMode, TimeCharacteristic

__all__ = ["PyFlinkEnvironmentMixin"]

log = logging.getLogger(__name__)


class PyFlinkEnvironmentMixin:
    _runtime_mode: RuntimeExecutionMode = RuntimeExecutionMode.STREAMING
    _time_characteristic: TimeCharacteristic = TimeCharacteristic.EventTime
    _batch: bool = False
    _default_local_parallelism: int | None = None

    # -- execution mode ----------------------------------------------------
    def set_runtime_mode(self, execution_mode: RuntimeExecutionMode) -> Any:
        if not isinstance(execution_mode, RuntimeExecutionMode):
            raise TypeError(f"set_runtime_mode() expects a RuntimeExecutionMode, got {execution_mode!r}")
        self._runtime_mode = execution_mode
        return self

    def get_runtime_mode(self) -> RuntimeExecutionMode:
        return self._runtime_mode

    def set_stream_time_characteristic(self, characteristic: TimeCharacteristic) -> Any:
        """Accepted for PyFlink 1.x programs: event time is always available (Flink >= 1.12). As
        in Flink it sets the auto-watermark interval: 0 (no periodic watermarks) for
        ``ProcessingTime``, 200 ms otherwise."""
        self._time_characteristic = characteristic
        interval = 0 if characteristic is TimeCharacteristic.ProcessingTime else 200
        self.set_auto_watermark_interval(interval)  # type: ignore[attr-defined]
        return self

    def get_stream_time_characteristic(self) -> TimeCharacteristic:
        return self._time_characteristic

    def set_buffer_timeout(self, timeout_millis: int) -> Any:
        self._buffer_timeout_ms = int(timeout_millis)
        return self

    def get_buffer_timeout(self) -> int:
        return int(getattr(self, "_buffer_timeout_ms", 100))

    def get_default_local_parallelism(self) -> int:
        return self._default_local_parallelism or os.cpu_count() or 1

    def set_default_local_parallelism(self, parallelism: int) -> None:
        self._default_local_parallelism = parallelism

    # -- checkpoint shortcuts ------------------------------------------------
    def get_checkpoint_interval(self) -> int:
        interval = self.runtime.checkpoint.interval_ms  # type: ignore[attr-defined]
        return -1 if interval is None else int(interval)

    def get_checkpointing_mode(self) -> Any:
        return self.runtime.checkpoint.mode  # type: ignore[attr-defined]

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return bool(self.runtime.checkpoint.is_unaligned_checkpoints_enabled())  # type: ignore[attr-defined]

    def enable_changelog_statebackend(self, enabled: bool) -> Any:
        """Flink's changelog state backend uploads state changes continuously so a checkpoint
        writes only what changed. streamflow's heap keyed state is checkpointed that way
        already (deltas since the last checkpoint, ``state/incremental.py``; RocksDB uploads
        new SST files only): ``True`` turns incremental checkpoints of heap keyed state on
        (the default), ``False`` leaves the setting as it is; both are logged."""
        self._changelog_enabled = bool(enabled)
        checkpoint = self.runtime.checkpoint  # type: ignore[attr-defined]
        if enabled:
            checkpoint.enable_incremental_checkpoints(True)
        log.info("enable_changelog_statebackend(%s): heap keyed state is checkpointed incrementally "
                 "(%s); there is no separate changelog", enabled,
                 "on" if checkpoint.is_incremental_checkpoints_enabled() else "off")
        return self

    def enable_changelog_state_backend(self, enabled: bool) -> Any:
        """PyFlink 2.3's name of :meth:`enable_changelog_statebackend`."""
        return self.enable_changelog_statebackend(enabled)

    def get_checkpointing_consistency_mode(self) -> Any:
        return self.get_checkpointing_mode()

    def is_force_unaligned_checkpoints(self) -> bool:
        return bool(self.runtime.checkpoint.is_force_unaligned_checkpoints())  # type: ignore[attr-defined]

    def set_default_savepoint_directory(self, directory: str) -> Any:
        """Where ``trigger_savepoint()`` without a directory writes the savepoint."""
        self.runtime.default_savepoint_directory = str(directory)  # type: ignore[attr-defined]
        return self

    def get_default_savepoint_directory(self) -> str | None:
        return self.runtime.default_savepoint_directory  # type: ignore[attr-defined]

    def register_slot_sharing_group(self, slot_sharing_group: Any) -> Any:
        """Recorded with its resources: one streamflow process is one slot (docs/pyflink.md)."""
        groups = self.__dict__.setdefault("_slot_sharing_groups", {})
        groups[slot_sharing_group.get_name()] = slot_sharing_group
        log.info("slot sharing group %r registered: recorded, one streamflow process is one slot",
                 slot_sharing_group.get_name())  # fmt: skip
        return self

    def is_chaining_of_operators_with_different_max_parallelism_enabled(self) -> bool:
        """True, Flink's default: chaining does not look at max parallelism here either."""
        return True

    def create_input(self, input_format: Any, type_info: Any = None) -> Any:
        from ..errors import NotSupportedError

        raise NotSupportedError(
            "create_input(InputFormat) is not supported by streamflow: an InputFormat is a Java "
            "object of Flink's JVM; use from_source() with a streamflow source"
        )

    def is_changelog_state_backend_enabled(self) -> bool | None:
        return getattr(self, "_changelog_enabled", None)

    # -- PyFlink 1.x's type registrations and restart strategy getter ---------------
    def add_default_kryo_serializer(self, type_class_name: str, serializer_class_name: str) -> None:
        """Recorded in ``get_config()`` (there is no Kryo: records are Python objects)."""
        self.get_config().add_default_kryo_serializer(type_class_name, serializer_class_name)  # type: ignore[attr-defined]

    def register_type_with_kryo_serializer(self, type_class_name: str, serializer_class_name: str) -> None:
        """Recorded in ``get_config()`` (there is no Kryo: records are Python objects)."""
        self.get_config().register_type_with_kryo_serializer(type_class_name, serializer_class_name)  # type: ignore[attr-defined]

    def register_type(self, type_class_name: str) -> None:
        """Recorded in ``get_config().get_registered_pojo_types()``, as Flink registers a POJO."""
        self.get_config().register_pojo_type(type_class_name)  # type: ignore[attr-defined]

    def get_restart_strategy(self) -> Any:
        """The strategy ``set_restart_strategy`` set; else, when ``restart-strategy.type`` is
        configured, the strategy it configures (PyFlink 1.x's ``ExecutionConfig.configure`` sets
        it); else ``RestartStrategies.fall_back_restart()``, as PyFlink's (the job then gets
        Flink's default: exponential delay with checkpointing on, no restart without)."""
        from ..checkpoint.restart_config import TYPE_KEY, strategy_from_configuration

        runtime = self.runtime  # type: ignore[attr-defined]
        if isinstance(runtime.restart_strategy, FallbackRestart) and TYPE_KEY in runtime.restart_options:
            return strategy_from_configuration(runtime.restart_options, True)
        return runtime.restart_strategy

    # -- PyFlink's dependency management: accepted, logged -------------------
    def add_python_file(self, file_path: str) -> None:
        directory = os.path.dirname(os.path.abspath(file_path)) if os.path.isfile(file_path) else file_path
        if directory not in sys.path:
            sys.path.append(directory)
        log.info(
            "add_python_file(%r): %s is on sys.path (functions run in this interpreter)", file_path, directory
        )

    def _accepted(self, what: str, value: Any) -> None:
        log.info(
            "%s(%r) accepted and ignored: streamflow runs functions in this interpreter, no JVM", what, value
        )

    def set_python_requirements(
        self, requirements_file_path: str, requirements_cache_dir: str | None = None
    ) -> None:
        self._accepted("set_python_requirements", requirements_file_path)

    def add_python_archive(self, archive_path: str, target_dir: str | None = None) -> None:
        self._accepted("add_python_archive", archive_path)

    def set_python_executable(self, python_exec: str) -> None:
        self._accepted("set_python_executable", python_exec)

    def add_jars(self, *jars_path: str) -> None:
        self._accepted("add_jars", jars_path)

    def add_classpaths(self, *classpaths: str) -> None:
        self._accepted("add_classpaths", classpaths)

    def register_cached_file(self, file_path: str, name: str, executable: bool = False) -> None:
        self._accepted("register_cached_file", file_path)

    def close(self) -> None:
        """Nothing to release: each execute() owns its event loop and tasks."""

    # -- the plan ------------------------------------------------------------
    def get_execution_plan(self) -> str:
        """The job's operators as JSON in the shape of Flink's ``getExecutionPlan()``: each
        node's parallelism and each edge's ship strategy as the job runs them (a forward edge
        between different parallelisms is ``REBALANCE``, as in Flink). A two-phase sink (Kafka,
        files) shows as Flink's ``<name>: Writer`` and ``<name>: Committer``, one operator here."""
        from ..graph import _parallelism, effective_partitioning

        graph = self._graph  # type: ignore[attr-defined]
        nodes = []
        default_p = self.get_parallelism()  # type: ignore[attr-defined]
        parallelism = {node.id: _parallelism(node, default_p) for node in graph.nodes}
        spare_ids = itertools.count(max((node.id for node in graph.nodes), default=0) + 1)
        for node in graph.nodes:
            kind = "Source: " if node.source is not None else ("Sink: " if node.is_sink else "")
            entry: dict[str, Any] = {
                "id": node.id,
                "type": kind + node.name,
                "pact": "Data Source"
                if node.source is not None
                else ("Data Sink" if node.is_sink else "Operator"),
                "contents": node.name,
                "parallelism": parallelism[node.id],
            }
            for extra in ("slot_sharing_group", "description"):
                if getattr(node, extra, None) is not None:
                    entry[extra] = getattr(node, extra)
            if node.inputs:
                entry["predecessors"] = [
                    {
                        "id": e.upstream.id,
                        "ship_strategy": effective_partitioning(
                            e, parallelism[e.upstream.id], parallelism[node.id]
                        ).name,
                        "side": "second",
                    }
                    for e in node.inputs
                ]
            nodes.append(entry)
            if node.has_committer:  # Flink's sink topology: the committer after the writer
                entry["type"] = f"{node.name}: Writer"
                committer = {**entry, "id": next(spare_ids), "type": f"{node.name}: Committer"}
                committer["predecessors"] = [{"id": node.id, "ship_strategy": "FORWARD", "side": "second"}]
                nodes.append(committer)
        return json.dumps({"nodes": nodes}, indent=2)
