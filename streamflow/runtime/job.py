"""The JobClient that controls a running job: its status, metrics, savepoints, cancellation, and
the in-process failover (a fresh ``execution.Execution`` restored from the latest complete
checkpoint, as the restart strategy allows)."""

from __future__ import annotations

import asyncio
import copy
import enum
import logging
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from ..checkpoint.config import NoRestart
from ..checkpoint.restore import RestoredCheckpoint
from ..checkpoint.storage import FileSystemCheckpointStorage
from ..checkpoint.storages import local_path
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import StreamflowError
from ..graph import JobGraph
from .checkpoint_stats import CheckpointStatsTracker
from .events import CheckpointType, StopMode
from .execution import Execution, JobEndError, RuntimeConfig
from .gc_policy import GC_POLICY
from .job_metrics import JobMetricsReader

_log = logging.getLogger("streamflow")


class RestartsExhaustedError(StreamflowError, RuntimeError):
    """The job failed and its restart strategy allows no further restart (Flink: "Recovery is
    suppressed by ..."); ``__cause__`` is the last failure."""


class SavepointCommitError(StreamflowError, RuntimeError):
    """A stop-with-savepoint's savepoint completed, and the job failed while committing its side
    effects (its sinks' commits): the job is not restarted (FLINK-26783); ``savepoint_path``
    is complete and consistent, and resuming from it commits the rest."""

    def __init__(self, message: str, savepoint_path: str) -> None:
        super().__init__(message)
        self.savepoint_path = savepoint_path


class JobStatus(enum.Enum):
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"


@dataclass
class JobExecutionResult:
    job_name: str
    status: JobStatus
    metrics: dict[str, float | int]
    net_runtime_ms: int
    job_id: str = ""

    def get_net_runtime(self) -> int:
        return self.net_runtime_ms

    def get_job_id(self) -> str:
        """The id of the job this result is of: the same as its client's ``get_job_id()``."""
        return self.job_id

    def get_accumulator_result(self, accumulator_name: str) -> None:
        """None, as PyFlink's for an accumulator the job does not have: streamflow jobs have
        no accumulators (use metrics, ``client.get_metrics()``)."""
        return None

    def get_all_accumulator_results(self) -> dict[str, Any]:
        """Empty, as PyFlink's for a job without accumulators (streamflow jobs have none)."""
        return {}


class JobClient:
    """Controls a job running in the caller's event loop (``execute_async``).

    On a failure the job fails over in-process as the restart strategy allows:
    a fresh execution (new operator instances) restored from the latest
    complete checkpoint.
    """

    def __init__(self, job_name: str, graph: JobGraph, config: RuntimeConfig, clock: Clock) -> None:
        self.job_name = job_name
        self._graph = graph
        self._config = config
        self._clock = clock
        ck = config.checkpoint
        self._storage = ck.storage or (
            FileSystemCheckpointStorage(ck.storage_dir, retain=ck.retained) if ck.storage_dir else None
        )
        # Flink creates a RestartBackoffTimeStrategy per job: a strategy counts failures, and the
        # environment's (or another job's) must not count this job's
        self._restart_strategy = copy.deepcopy(config.resolved_restart_strategy(job_name))
        self.restarts = 0
        self.publish_retries = 0  # of the publication at the job's end (_retry_job_end)
        self.job_id = uuid.uuid4().hex  # as Flink's JobID: 32 hex digits
        self.last_failure_cause: str | None = None
        self.rest: Any = None  # the RestServer when rest.port is configured (streamflow.rest)
        self.checkpoint_stats = CheckpointStatsTracker(clock)
        self._metrics_reader = JobMetricsReader(self)
        self._status = JobStatus.RUNNING
        self._cancel_requested = False
        self._stop: StopMode | None = None  # a stop-with-savepoint in progress
        self._stopped = False  # its savepoint completed: the job ends FINISHED
        self._started = clock.monotonic()
        GC_POLICY.job_started(self, freeze=config.gc_freeze)
        try:
            self.execution = Execution(
                job_name, graph, config, clock, self._initial_restore(), self._storage, self.checkpoint_stats,
                self._storage.first_free_id(job_name) if self._storage is not None else 1,
                on_region_failure=self._region_failed,
            )  # fmt: skip
        except BaseException:
            GC_POLICY.job_ended(self)
            raise
        if self.execution.restore is not None:
            self.checkpoint_stats.restored_checkpoint_id = self.execution.restore.checkpoint_id
            GC_POLICY.after_restore(self, self.execution.restore.source)
        _log.info(
            "job %r (%s) started: %d tasks%s", job_name, self.job_id, len(self.execution.tasks),
            "" if self.execution.restore is None else f", restored from {self.execution.restore.source}",
            extra=self._log_fields(),
        )  # fmt: skip
        self._task: asyncio.Task[None] = asyncio.get_running_loop().create_task(
            self._run(), name=f"streamflow job {self.job_name}"
        )
        self._task.add_done_callback(lambda _task: GC_POLICY.job_ended(self))
        self._task.add_done_callback(self._log_failure)

    def _log_failure(self, task: asyncio.Task[None]) -> None:
        """Report a failure at once (and mark it retrieved: get_job_execution_result re-raises it)."""
        if not task.cancelled() and (exc := task.exception()) is not None and not self._cancel_requested:
            _log.error("job %r failed", self.job_name, exc_info=exc)

    @property
    def _fallback(self) -> bool:
        return self._config.checkpoint.fallback_to_older_checkpoint

    def _initial_restore(self) -> RestoredCheckpoint | None:
        codec, records = self._config.checkpoint.codec, self._config.checkpoint.get_records_codec()
        if self._config.savepoint_path:
            where = local_path(self._config.savepoint_path, "execution.savepoint.path")
            storage = self._storage or FileSystemCheckpointStorage(where)
            resumed = storage.load(self._config.savepoint_path)
            if isinstance(self._storage, FileSystemCheckpointStorage):
                self._storage.protect(resumed.path)  # NO_CLAIM: the resumed-from checkpoint stays
            return RestoredCheckpoint.load(resumed, codec, records)
        if self._storage is not None:
            # the latest completed checkpoint, strictly: a damaged one is refused (defect 3)
            handle = self._storage.restore_point(
                self.job_name, fallback=self._config.checkpoint.fallback_to_older_checkpoint
            )
            if handle is not None:
                return RestoredCheckpoint.load(handle, codec, records)
        return None

    def _latest_restore(self) -> RestoredCheckpoint | None:
        codec, records = self._config.checkpoint.codec, self._config.checkpoint.get_records_codec()
        if self._storage is not None:
            handle = self._storage.restore_point(
                self.job_name, fallback=self._config.checkpoint.fallback_to_older_checkpoint
            )
            if handle is None:
                return self._restore_again()
            return RestoredCheckpoint.load(handle, codec, records)
        memory = self.execution.driver.writer.latest_in_memory
        if memory is not None:
            restored = RestoredCheckpoint.from_entries(memory[0], "memory", memory[1], codec, records)
            restored.shared_path = self.execution.driver.writer.memory_shared.path
            return restored
        return self._restore_again()

    def _restore_again(self) -> RestoredCheckpoint | None:
        """The attempt that failed completed no checkpoint: the checkpoint (or savepoint) it was
        restored from, decoded afresh (the failed attempt's operators changed the decoded state
        they were handed: ``RestoredCheckpoint.fresh``)."""
        restore = self.execution.restore
        return None if restore is None else restore.fresh()

    async def _run(self) -> None:
        while True:
            try:
                await self.execution.run()
                break
            except JobEndError as exc:
                try:
                    await self._retry_job_end(exc)
                except BaseException:
                    self._status = self._ended_status(JobStatus.FAILED)
                    raise
                break
            except BaseException as exc:
                if self._cancel_requested and isinstance(exc, Exception) and not self._stopped:
                    raise self._cancelled_despite(exc) from exc
                if self._cancel_requested or not isinstance(exc, Exception) or self.execution.blocking:
                    # (a batch job with blocking exchanges: its regions failed over alone, and the
                    # restart strategy decided this failure ends the job: _region_failed)
                    self._status = self._ended_status(JobStatus.FAILED)
                    raise
                if self.execution.driver.stop_savepoint is not None:
                    self._status = JobStatus.FAILED
                    raise self._savepoint_commit_error(exc) from exc
                await self._restart(exc)
        self._status = self._ended_status(JobStatus.FINISHED)
        _log.info("job %r %s", self.job_name, self._status.value.lower(), extra=self._log_fields())

    def _cancelled_despite(self, failure: Exception) -> asyncio.CancelledError:
        """A task failed while the job was being cancelled (e.g. a restored subtask failing in
        ``open()`` as the cancel arrived): the cancel wins, as Flink's (a job asked to cancel
        ends CANCELED, its racing failure is not restarted nor reported as the job's result);
        the failure is logged with its cause."""
        self._status = JobStatus.CANCELED
        _log.warning(
            "job %r failed while being cancelled (%s: %s); it ends CANCELED", self.job_name,
            type(failure).__name__, failure, exc_info=failure, extra=self._log_fields(),
        )  # fmt: skip
        return asyncio.CancelledError(f"job {self.job_name!r} cancelled")

    def _savepoint_commit_error(self, failure: BaseException) -> SavepointCommitError:
        """Flink's rule (FLINK-26783): restarting from the latest checkpoint, older than the
        savepoint whose side effects were being committed, would write them again; restarting
        from the savepoint would make the running job depend on it. The job fails, naming it."""
        path = self.execution.driver.stop_savepoint
        assert path is not None
        return SavepointCommitError(
            f"job {self.job_name!r} failed while committing the side effects of its stop-with-savepoint "
            f"{path} ({type(failure).__name__}: {failure}); the savepoint is complete and consistent, "
            "but part of its output may be uncommitted: the job is not restarted from its latest "
            "checkpoint (that would write committed output again); resume it from the savepoint to "
            "commit the rest", path,
        )  # fmt: skip

    async def _restart(self, failure: Exception) -> None:
        """Fail the job over after ``failure``: a fresh execution restored from the latest
        completed checkpoint, after the restart strategy's delay (or the job fails: raises).

        A failure while restoring (reading the checkpoint, building the new execution) is one
        more failure of the job, counted and logged with its cause, and the restart is tried
        again as the strategy allows (Flink: a task failing while restoring its state fails over
        again); it must not end a job whose strategy has restarts left."""
        strategy = self._restart_strategy
        while True:
            delay_ms = self._delay_or_fail(
                failure, failure,
                f"job {self.job_name!r} failed and is not restarted: the restart strategy {strategy!r} is "
                f"exhausted after {self.restarts} restart(s); last failure: {failure!r}",
            )  # fmt: skip
            self._status = JobStatus.RESTARTING
            self.restarts += 1
            _log.warning(
                "job %r failed (%s); restart %d in %d ms by the restart strategy %r, from its latest "
                "completed checkpoint", self.job_name, self.last_failure_cause, self.restarts, delay_ms,
                strategy, exc_info=failure, extra=self._log_fields(),
            )  # fmt: skip
            await asyncio.sleep(delay_ms / 1000)
            try:
                restore = self._latest_restore()
                # ids continue above every id the old attempt used: its writes are settled
                # (Execution.run), and no directory it touched is written again
                first_id = self.execution.driver.coordinator.next_checkpoint_id
                execution = Execution(
                    self.job_name, self._graph, self._config, self._clock, restore, self._storage,
                    self.checkpoint_stats, first_id, attempt=self.restarts,
                    on_region_failure=self._region_failed,
                )  # fmt: skip
            except Exception as exc:
                _log.warning(
                    "job %r: restart %d: restoring its latest completed checkpoint failed (%s: %s)",
                    self.job_name, self.restarts, type(exc).__name__, exc, extra=self._log_fields(),
                )  # fmt: skip
                failure = exc
                continue
            self.execution = execution
            if restore is not None:
                self.checkpoint_stats.restored_checkpoint_id = restore.checkpoint_id
                GC_POLICY.after_restore(self, restore.source)
                fields = self._log_fields()
                _log.info("job %r restarted from %s", self.job_name, restore.source, extra=fields)
            self._status = JobStatus.RUNNING
            return

    def _ended_status(self, otherwise: JobStatus) -> JobStatus:
        if self._stopped:
            return JobStatus.FINISHED  # stop-with-savepoint: Flink's job ends FINISHED
        return JobStatus.CANCELED if self._cancel_requested else otherwise

    def _region_failed(self, region: str, failure: Exception, attempt: int) -> float:
        """A pipelined region of a batch job failed (``regions.py``): the delay before it restarts
        alone, as the restart strategy allows (counted and logged with its cause); raises to end
        the job: the failure itself under ``NoRestart``, else ``RestartsExhaustedError``."""
        strategy = self._restart_strategy
        delay_ms = self._delay_or_fail(
            failure, failure,
            f"job {self.job_name!r} failed and is not restarted: the restart strategy {strategy!r} is "
            f"exhausted after {self.restarts} restart(s); last failure, in {region}: {failure!r}",
        )  # fmt: skip
        self.restarts += 1
        _log.warning(
            "job %r: %s failed (%s) in attempt %d; restart %d in %d ms by the restart strategy %r: "
            "only its pipelined region restarts, re-reading the results of the finished regions "
            "upstream", self.job_name, region, self.last_failure_cause, attempt, self.restarts, delay_ms,
            strategy, exc_info=failure, extra=self._log_fields(),
        )  # fmt: skip
        return delay_ms

    def _delay_or_fail(self, failure: Exception, raised: Exception, exhausted: str) -> float:
        """The restart strategy's delay before trying again after ``failure`` (recorded as the
        last cause), or the job fails: with ``raised`` under ``NoRestart``, else with a
        ``RestartsExhaustedError(exhausted)`` caused by ``failure``."""
        strategy = self._restart_strategy
        # wall time, the clock the restart delay elapses on (Flink's JobMaster gives its
        # RestartBackoffTimeStrategy the SystemClock), not the job's processing-time clock: on a
        # ManualClock every failure would look "before the scheduled restart" to the
        # exponential delay, merged into one attempt forever
        delay_ms = strategy.next_delay_ms(SYSTEM_CLOCK.now_ms())
        self.last_failure_cause = f"{type(failure).__name__}: {failure}"
        if delay_ms is None:
            self._status = JobStatus.FAILED
            if isinstance(strategy, NoRestart):
                raise raised
            raise RestartsExhaustedError(exhausted) from failure
        return delay_ms

    def get_job_status(self) -> JobStatus:
        return self._status

    def _log_fields(self) -> dict[str, Any]:
        """Fields on every job log record, for structured (e.g. JSON) log formatters."""
        return {"job_name": self.job_name, "job_id": self.job_id, "restarts": self.restarts}

    async def _retry_job_end(self, error: JobEndError) -> None:
        """Every task finished but the publication at the job's end failed: retry it alone, as
        the restart strategy allows (Flink's committer retries its committables; running the
        tasks again would write the records already published a second time)."""
        strategy = self._restart_strategy
        failure: Exception = error
        while True:
            delay_ms = self._delay_or_fail(
                failure, error,
                f"job {self.job_name!r}: publishing its output at the job's end failed and the "
                f"restart strategy {strategy!r} allows no further retry; last failure: {failure!r}",
            )  # fmt: skip
            self.publish_retries += 1
            _log.warning(
                "job %r: %s; retry %d of the publication in %d ms by the restart strategy %r (the "
                "tasks are not run again: their output is complete)", self.job_name, failure,
                self.publish_retries, delay_ms, strategy, extra=self._log_fields(),
            )  # fmt: skip
            await asyncio.sleep(delay_ms / 1000)
            try:
                await self.execution.run_job_end()
                return
            except Exception as exc:
                failure = exc

    def get_job_id(self) -> str:
        return self.job_id

    def get_metrics_snapshot(self) -> dict[str, Any]:
        """Every metric, structured per vertex, subtask, operator and channel (the REST API's view)."""
        return self._metrics_reader.snapshot()

    def get_metrics(self) -> dict[str, float | int]:
        metrics = self._metrics_reader.flat(self._metrics_reader.snapshot())
        metrics.update(self.execution.read_metrics())
        metrics["job.numRestarts"] = self.restarts
        metrics["job.numPublishRetries"] = self.publish_retries  # of the job-end publication
        restore = self.execution.restore
        metrics["job.restoredCheckpointId"] = restore.checkpoint_id if restore is not None else 0
        return metrics

    async def trigger_checkpoint(self) -> str:
        """Take a checkpoint now; returns where it was stored once it completed."""
        return await self.execution.driver.request(CheckpointType.CHECKPOINT, None)

    async def trigger_savepoint(self, savepoint_directory: str | None = None) -> str:
        """Take an aligned savepoint into a new directory inside ``savepoint_directory`` (else
        inside the environment's default savepoint directory, ``set_default_savepoint_directory``);
        returns that new directory's path (see :meth:`_savepoint_target`)."""
        target = self._savepoint_target(savepoint_directory)
        return await self.execution.driver.request(CheckpointType.SAVEPOINT, target)

    def _savepoint_target(self, savepoint_directory: str | None) -> str:
        """Where a savepoint goes: a new ``savepoint-<job id prefix>-<random>`` directory inside
        the directory given, else inside the default savepoint directory, as Flink names each
        savepoint in its target directory (``AbstractFsCheckpointStorageAccess
        .initializeLocationForSavepoint`` / ``createSavepointLocation``: 12 random hex digits),
        so one directory takes any number of savepoints and each keeps its own files. The new
        directory is created when the savepoint's files are written (it must not exist then;
        :func:`~streamflow.checkpoint._fs.prepare_savepoint_dir`) and removed whole if the write
        fails; ``_metadata``, written last, is what makes it a savepoint. A path or a local
        ``file:`` URI (Flink's target is a URI); other schemes are refused here, before
        anything starts."""
        if savepoint_directory:
            parent = local_path(savepoint_directory, "savepoint directory")
        elif self._config.default_savepoint_directory is not None:
            parent = local_path(self._config.default_savepoint_directory, "default savepoint directory")
        else:
            raise ValueError(
                "a savepoint needs a directory: pass one, or env.set_default_savepoint_directory(...)"
            )
        return str(parent / f"savepoint-{self.job_id[:6]}-{secrets.token_hex(6)}")

    async def stop_with_savepoint(
        self, advance_to_end_of_event_time: bool = False, savepoint_directory: str | None = None
    ) -> str:
        """Stop the job with a synchronous savepoint (Flink's ``stopWithSavepoint``, FLIP-34);
        returns its path once the job has ended FINISHED.

        The sources halt at the savepoint's barrier: no record after it is processed anywhere,
        so nothing a sink wrote is replayed when the job resumes from it. With
        ``advance_to_end_of_event_time`` (``--drain``) they first emit the maximum watermark:
        every event-time timer and window fires, and every operator finishes, before the barrier
        (``source_task.py``, ``task_checkpointer.py``). Once
        the savepoint is written every task is notified of its completion (sinks commit), then
        the tasks end. If the savepoint fails the job keeps running (logged at WARNING) and
        this raises; a drained job fails over instead, as Flink's (its sources already
        advanced event time to the end, its operators finished)."""
        target = self._savepoint_target(savepoint_directory)
        if self._stop is not None or self._stopped:
            raise RuntimeError(f"job {self.job_name!r} is already stopping with a savepoint")
        if self._task.done() or self._status is not JobStatus.RUNNING:
            status = self._status.value
            raise RuntimeError(f"job {self.job_name!r} is {status}: it cannot stop with a savepoint")
        mode = StopMode.TERMINATE if advance_to_end_of_event_time else StopMode.SUSPEND
        self._stop = mode
        try:
            path = await self.execution.driver.request(CheckpointType.SAVEPOINT, target, mode)
        except Exception as exc:
            if self.execution.driver.stop_savepoint is not None:
                error = self._savepoint_commit_error(exc.__cause__ or exc)
                _log.warning("%s", error, extra=self._log_fields())
                raise error from exc
            _log.warning(
                "job %r: stop-with-savepoint (%s) failed, the job %s: %s", self.job_name, mode.value,
                "fails over" if mode is StopMode.TERMINATE else "keeps running", exc,
                extra=self._log_fields(),
            )  # fmt: skip
            raise
        finally:
            self._stop = None
        self._stopped = True
        _log.info(
            "job %r stopped with the savepoint %s (%s); its tasks end", self.job_name, path, mode.value,
            extra=self._log_fields(),
        )  # fmt: skip
        await self.cancel()
        return path

    async def get_job_execution_result(self) -> JobExecutionResult:
        """Wait for the job to end; raises the job's error if it failed."""
        try:
            await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if not self._cancel_requested or not self._task.done():
                raise
        return JobExecutionResult(
            self.job_name,
            self._status,
            self.get_metrics(),
            int((self._clock.monotonic() - self._started) * 1000),
            self.job_id,
        )

    async def cancel(self) -> None:
        """Stop the job: every task closes its operators; returns when all have."""
        if self._task.done():
            return
        self._cancel_requested = True
        scope = getattr(self.execution, "cancel_scope", None)
        if scope is not None and self._status is JobStatus.RUNNING:
            scope.cancel()
        else:
            self._task.cancel()
        try:
            await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if not self._task.done():
                raise
        finally:
            if self._task.done() and self._task.cancelled():
                self._status = JobStatus.CANCELED  # cancelled before or between attempts
