"""PyFlink's ``ExecutionConfig``: what ``env.get_config()`` returns.

The settings streamflow uses are the environment's own (``set_auto_watermark_interval``,
``set_parallelism``, ``set_max_parallelism``, ``set_global_job_parameters``): this object
reads and writes them there. The others configure parts of Flink's JVM runtime that
streamflow does not have (Kryo and Avro serializers, the closure cleaner, object reuse
between chained Java operators, latency markers, task cancellation watchdogs, snapshot
compression); they are recorded, so their getters answer what was set, and setting one logs
once that it changes nothing here, and why. Disabling auto-generated uids is honoured: a job
with an operator without ``uid()`` is then refused, as Flink's.

Two configs are equal (with equal hashes) when every setting is, as PyFlink's ``==`` and
``hash`` answer through Java's ``ExecutionConfig.equals``/``hashCode``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .environment import StreamExecutionEnvironment

__all__ = ["ExecutionConfig"]

_log = logging.getLogger(__name__)

_WHY = {
    "closure_cleaner": "functions are Python objects, passed as they are (there are no Java closures)",
    "force_kryo": "records are Python objects: there is no Kryo (the checkpoint codec is MessagePack)",
    "generic_types": "records are Python objects: there are no Kryo generic types",
    "force_avro": "records are Python objects: there is no Avro serializer",
    "object_reuse": "chained operators hand records on as Python references already",
    "latency_tracking_interval": "there are no latency markers (see the job's metrics for latency)",
    "task_cancellation_interval": "a cancelled task is an asyncio task, cancelled at once",
    "task_cancellation_timeout": "a cancelled task is an asyncio task, cancelled at once",
    "use_snapshot_compression": "checkpoint files are written as encoded by the checkpoint codec",
}


class ExecutionConfig:
    """The execution settings of a :class:`StreamExecutionEnvironment` (PyFlink's names)."""

    PARALLELISM_DEFAULT = -1
    PARALLELISM_UNKNOWN = -2

    def __init__(self, env: StreamExecutionEnvironment) -> None:
        self._env = env
        self._recorded: dict[str, Any] = {
            "closure_cleaner": True,
            "force_kryo": False,
            "generic_types": True,
            "force_avro": False,
            "object_reuse": False,
            "auto_generated_uids": True,
            "latency_tracking_interval": 0,
            "task_cancellation_interval": 30_000,
            "task_cancellation_timeout": 180_000,
            "use_snapshot_compression": False,
        }
        self._logged: set[str] = set()

    def _record(self, name: str, value: Any) -> ExecutionConfig:
        self._recorded[name] = value
        if name not in self._logged:
            self._logged.add(name)
            _log.info("ExecutionConfig %s = %r recorded, changes nothing: %s", name, value, _WHY[name])
        return self

    def _settings(self) -> tuple[Any, ...]:
        """Every setting, hashable: what ``==`` and ``hash`` compare."""
        recorded = tuple(sorted((name, _frozen(v)) for name, v in self._recorded.items()))
        return (
            self.get_parallelism(),
            self.get_max_parallelism(),
            self.get_auto_watermark_interval(),
            tuple(sorted(self.get_global_job_parameters().items())),
            recorded,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExecutionConfig) and self._settings() == other._settings()

    def __hash__(self) -> int:
        return hash(self._settings())

    # -- settings streamflow uses: the environment's ------------------------------------
    def set_auto_watermark_interval(self, interval: int) -> ExecutionConfig:
        self._env.set_auto_watermark_interval(interval)
        return self

    def get_auto_watermark_interval(self) -> int:
        return self._env.get_auto_watermark_interval()

    def set_parallelism(self, parallelism: int) -> ExecutionConfig:
        self._env.set_parallelism(parallelism)
        return self

    def get_parallelism(self) -> int:
        return self._env.get_parallelism()

    def set_max_parallelism(self, max_parallelism: int) -> ExecutionConfig:
        self._env.set_max_parallelism(max_parallelism)
        return self

    def get_max_parallelism(self) -> int:
        return self._env.get_max_parallelism()

    def set_global_job_parameters(self, global_job_parameters_dict: dict[str, str]) -> ExecutionConfig:
        self._env.set_global_job_parameters(global_job_parameters_dict)
        return self

    def get_global_job_parameters(self) -> dict[str, str]:
        return dict(self._env.runtime.job_parameters)

    # -- settings of Flink's JVM runtime: recorded ----------------------------------------
    def enable_closure_cleaner(self) -> ExecutionConfig:
        return self._record("closure_cleaner", True)

    def disable_closure_cleaner(self) -> ExecutionConfig:
        return self._record("closure_cleaner", False)

    def is_closure_cleaner_enabled(self) -> bool:
        return bool(self._recorded["closure_cleaner"])

    def enable_force_kryo(self) -> ExecutionConfig:
        return self._record("force_kryo", True)

    def disable_force_kryo(self) -> ExecutionConfig:
        return self._record("force_kryo", False)

    def is_force_kryo_enabled(self) -> bool:
        return bool(self._recorded["force_kryo"])

    def enable_generic_types(self) -> ExecutionConfig:
        return self._record("generic_types", True)

    def disable_generic_types(self) -> ExecutionConfig:
        return self._record("generic_types", False)

    def has_generic_types_disabled(self) -> bool:
        return not self._recorded["generic_types"]

    def enable_auto_generated_uids(self) -> ExecutionConfig:
        """The default: operators without ``uid()`` get one from their name and position."""
        self._recorded["auto_generated_uids"] = True
        return self

    def disable_auto_generated_uids(self) -> ExecutionConfig:
        """Honoured: the job is then refused if an operator has no ``uid()`` (Flink's rule,
        ``StreamExecutionEnvironment.get_job_graph``)."""
        self._recorded["auto_generated_uids"] = False
        return self

    def has_auto_generated_uids_enabled(self) -> bool:
        return bool(self._recorded["auto_generated_uids"])

    def enable_force_avro(self) -> ExecutionConfig:
        return self._record("force_avro", True)

    def disable_force_avro(self) -> ExecutionConfig:
        return self._record("force_avro", False)

    def is_force_avro_enabled(self) -> bool:
        return bool(self._recorded["force_avro"])

    def enable_object_reuse(self) -> ExecutionConfig:
        return self._record("object_reuse", True)

    def disable_object_reuse(self) -> ExecutionConfig:
        return self._record("object_reuse", False)

    def is_object_reuse_enabled(self) -> bool:
        return bool(self._recorded["object_reuse"])

    def set_latency_tracking_interval(self, interval: int) -> ExecutionConfig:
        return self._record("latency_tracking_interval", int(interval))

    def get_latency_tracking_interval(self) -> int:
        return int(self._recorded["latency_tracking_interval"])

    def set_task_cancellation_interval(self, interval: int) -> ExecutionConfig:
        return self._record("task_cancellation_interval", int(interval))

    def get_task_cancellation_interval(self) -> int:
        return int(self._recorded["task_cancellation_interval"])

    def set_task_cancellation_timeout(self, timeout: int) -> ExecutionConfig:
        return self._record("task_cancellation_timeout", int(timeout))

    def get_task_cancellation_timeout(self) -> int:
        return int(self._recorded["task_cancellation_timeout"])

    def set_use_snapshot_compression(self, use_snapshot_compression: bool) -> ExecutionConfig:
        return self._record("use_snapshot_compression", bool(use_snapshot_compression))

    def is_use_snapshot_compression(self) -> bool:
        return bool(self._recorded["use_snapshot_compression"])

    # -- type registrations (PyFlink 1.x): recorded by class name; there is no Kryo --------
    def _registered(self, what: str) -> Any:
        if "registrations" not in self._logged:
            self._logged.add("registrations")
            _log.info("%s recorded: changes nothing here, %s", what, _WHY["force_kryo"])
        return self._recorded.setdefault(what, {} if what.endswith("serializers") else [])

    def add_default_kryo_serializer(
        self, type_class_name: str, serializer_class_name: str
    ) -> ExecutionConfig:
        self._registered("default kryo serializers")[type_class_name] = serializer_class_name
        return self

    def register_type_with_kryo_serializer(
        self, type_class_name: str, serializer_class_name: str
    ) -> ExecutionConfig:
        self._registered("kryo type serializers")[type_class_name] = serializer_class_name
        return self

    def register_pojo_type(self, type_class_name: str) -> ExecutionConfig:
        if type_class_name not in self._registered("pojo types"):
            self._registered("pojo types").append(type_class_name)
        return self

    def register_kryo_type(self, type_class_name: str) -> ExecutionConfig:
        if type_class_name not in self._registered("kryo types"):
            self._registered("kryo types").append(type_class_name)
        return self

    def get_default_kryo_serializer_classes(self) -> dict[str, str]:
        return dict(self._recorded.get("default kryo serializers", {}))

    def get_registered_types_with_kryo_serializer_classes(self) -> dict[str, str]:
        return dict(self._recorded.get("kryo type serializers", {}))

    def get_registered_kryo_types(self) -> list[str]:
        return list(self._recorded.get("kryo types", []))

    def get_registered_pojo_types(self) -> list[str]:
        return list(self._recorded.get("pojo types", []))


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    return tuple(value) if isinstance(value, list) else value
