"""The runtime configuration of one job (``RuntimeConfig``): what ``Execution`` builds with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..checkpoint.config import CheckpointConfig, FallbackRestart, NoRestart, RestartStrategy
from ..checkpoint.restart_config import resolve_restart_strategy
from .blocking_result import DEFAULT_RESULTS_MEMORY
from .loop_budget import DEFAULT_LOOP_BUDGET_MS
from .sort_buffer import DEFAULT_SORT_MEMORY

__all__ = ["RuntimeConfig"]


@dataclass
class RuntimeConfig:
    batch_size: int = 512
    channel_capacity: int = 4096
    # in-flight bytes (estimated, see record_size.py): per channel and for the whole job; None: off
    channel_max_bytes: int | None = 64 * 2**20
    job_max_bytes: int | None = 512 * 2**20
    job_parameters: dict[str, str] = field(default_factory=dict)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    # set_restart_strategy; fall_back_restart(): the configuration decides (restart_config.py)
    restart_strategy: RestartStrategy = field(default_factory=FallbackRestart)
    restart_options: dict[str, Any] = field(default_factory=dict)  # the restart-strategy.* keys
    savepoint_path: str | None = None
    allow_non_restored_state: bool = False
    rest_port: int | None = None  # rest.port: serve the job page, REST API and /metrics (0: any free port)
    rest_address: str = "127.0.0.1"  # rest.address
    progress: bool | None = None  # streamflow.progress: None = only on a terminal
    # execution.loop-budget: ms of continuous work after which the job lets the event loop run
    # (shared by all tasks of the job, see loop_budget.py); None: only when it has to wait
    loop_budget_ms: float | None = DEFAULT_LOOP_BUDGET_MS
    state_backend: Any = None  # a state.backends.StateBackend; None: the heap (HashMapStateBackend)
    gc_freeze: bool = True  # streamflow.gc.freeze: see gc_policy.py
    batch: bool = False  # a batch job (api/batch.py): keyed operators sort their input (sorting_input.py)
    sorted_inputs: bool = True  # execution.sorted-inputs.enabled: batch mode sorts keyed inputs
    sorted_inputs_memory: int = DEFAULT_SORT_MEMORY  # execution.sorted-inputs.memory (sort_buffer.py)
    default_savepoint_directory: str | None = None  # trigger_savepoint() without a directory
    # execution.batch-shuffle-mode: ALL_EXCHANGES_BLOCKING (True, Flink's default): a batch job's
    # non-chained edges are blocking exchanges between pipelined regions, a failure restarts
    # only its region (regions.py); ALL_EXCHANGES_PIPELINED (False): every task runs at once
    # and a failure restarts the whole job. A job without restarts (NoRestart) runs pipelined:
    # nothing to fail over (blocking_exchanges)
    batch_blocking: bool = True
    # streamflow.blocking-results.memory: bytes of blocking results kept in memory (blocking_result.py)
    blocking_results_memory: int = DEFAULT_RESULTS_MEMORY

    @property
    def blocking_exchanges(self) -> bool:
        """Whether a job with this configuration runs as pipelined regions over blocking
        exchanges (``regions.py``): a batch job in ``ALL_EXCHANGES_BLOCKING`` mode whose restart
        strategy may restart it (without restarts a failure ends the job: there is no region to
        fail over alone, and materialising every result would only cost)."""
        restarts = not isinstance(self.resolved_restart_strategy(), NoRestart)
        return self.batch and self.batch_blocking and restarts

    def resolved_restart_strategy(self, job_name: str | None = None) -> RestartStrategy:
        """The strategy a job with this configuration runs with: ``restart_strategy``, or, when
        that is ``fall_back_restart()``, the configured one or Flink's default for whether
        checkpointing is on (``checkpoint/restart_config.py``; with ``job_name``, options that
        change nothing are logged)."""
        return resolve_restart_strategy(
            self.restart_strategy, self.restart_options, self.checkpoint.is_checkpointing_enabled(), job_name
        )
