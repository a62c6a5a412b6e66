"""What an operator, and the user function inside it, can see of the runtime."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clock import Clock
from ..state.keyed import (
    AggregatingStateDescriptor,
    KeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from ..state.ttl_migration import on_register
from ..state.ttl_state import ttl_state
from ..state.typed import (
    TypedReducingState,
    declare,
    typed_list_state,
    typed_map_state,
    typed_reducing_descriptor,
    typed_value_state,
)
from .metrics import MetricGroup

if TYPE_CHECKING:
    from .processing_time import ProcessingTimeService


@dataclass
class OperatorContext:
    """Runtime facts and services of one operator subtask."""

    uid: str
    name: str
    task_name: str  # the chain's name, without the subtask (RuntimeContext.get_task_name)
    subtask_index: int
    parallelism: int
    max_parallelism: int
    clock: Clock
    metrics: MetricGroup
    processing_time: ProcessingTimeService
    job_parameters: dict[str, str] = field(default_factory=dict)
    keyed_backend: KeyedStateBackend | None = None
    checkpointing: bool = False  # periodic checkpoints are enabled for this job
    # 0, then the number of restarts so far: of the job, or in a batch job with blocking
    # exchanges of the subtask's pipelined region (runtime/regions.py)
    attempt: int = 0
    batch: bool = False  # a batch job: processing-time timers fire at the end of input
    restarts: bool = False  # the restart strategy may restart the subtask after a failure
    # a spillable buffer of records in the job's memory budget (runtime/blocking_result.py), for
    # an operator that holds records until its subtask finished (the collect sink in a batch
    # job); None outside an Execution
    new_buffer: Callable[[str], Any] | None = None
    # actions run once every task of this execution has finished without failure (None when
    # the operator runs outside an Execution); a failure or restart drops them (Execution.run)
    job_end: list[Callable[[], Awaitable[None]]] | None = None


class RuntimeContext:
    """PyFlink's ``RuntimeContext``: passed to ``Function.open``."""

    def __init__(self, ctx: OperatorContext) -> None:
        self._ctx = ctx

    def get_task_name(self) -> str:
        """The task's name as the plan has it: its chain's operator names joined by ``" -> "``,
        the same in every subtask (Flink's ``TaskInfo.getTaskName``)."""
        return self._ctx.task_name

    def get_task_name_with_subtasks(self) -> str:
        """``"name (3/6)"``: the subtask's index + 1 of the parallelism, as PyFlink documents."""
        return f"{self._ctx.task_name} ({self._ctx.subtask_index + 1}/{self._ctx.parallelism})"

    def get_attempt_number(self) -> int:
        """0 for the first attempt, then the number of restarts (a restart re-runs every subtask)."""
        return self._ctx.attempt

    def get_number_of_parallel_subtasks(self) -> int:
        return self._ctx.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._ctx.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._ctx.subtask_index

    def get_job_parameter(self, key: str, default_value: str | None = None) -> str | None:
        return self._ctx.job_parameters.get(key, default_value)

    def get_metrics_group(self) -> MetricGroup:
        return self._ctx.metrics

    def _backend(self, descriptor: StateDescriptor) -> KeyedStateBackend:
        backend = self._ctx.keyed_backend
        if backend is None:
            raise RuntimeError(
                f"keyed state {descriptor.name!r} is only available on a keyed stream "
                f"(operator {self._ctx.name!r} is not keyed: call key_by() first)"
            )
        return backend

    def _state(self, descriptor: StateDescriptor) -> Any:
        backend = self._backend(descriptor)
        declare(backend, descriptor)  # its declared type names its codec in checkpoints
        ttl = getattr(descriptor, "ttl_config", None)
        enabled = ttl is not None and ttl.is_enabled()
        on_register(backend, descriptor, enabled, self._ctx.clock.now_ms)  # TTL switched on/off
        if enabled:  # state with a time-to-live (state/ttl_state.py)
            return ttl_state(backend, descriptor, self._ctx.clock.now_ms)
        return backend.get_state(descriptor)

    def get_state(self, state_descriptor: ValueStateDescriptor) -> Any:
        return typed_value_state(self._state(state_descriptor), state_descriptor)

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> Any:
        return typed_list_state(self._state(state_descriptor), state_descriptor)

    def get_map_state(self, state_descriptor: MapStateDescriptor) -> Any:
        return typed_map_state(self._state(state_descriptor), state_descriptor)

    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> Any:
        typed, convert = typed_reducing_descriptor(state_descriptor)
        state = self._state(typed)
        return state if convert is None else TypedReducingState(state, convert)

    def get_aggregating_state(self, state_descriptor: AggregatingStateDescriptor) -> Any:
        return self._state(typed_reducing_descriptor(state_descriptor)[0])


def keyed_state(ctx: OperatorContext, descriptor: StateDescriptor) -> Any:
    """``descriptor``'s keyed state as a function's :class:`RuntimeContext` hands it out (with
    its time-to-live and declared type), for operators reaching state for their function
    (``apply_to_keyed_state``)."""
    context = RuntimeContext(ctx)
    if isinstance(descriptor, ValueStateDescriptor):
        return context.get_state(descriptor)
    if isinstance(descriptor, ListStateDescriptor):
        return context.get_list_state(descriptor)
    if isinstance(descriptor, MapStateDescriptor):
        return context.get_map_state(descriptor)
    if isinstance(descriptor, ReducingStateDescriptor):
        return context.get_reducing_state(descriptor)
    if isinstance(descriptor, AggregatingStateDescriptor):
        return context.get_aggregating_state(descriptor)
    return context._state(descriptor)
