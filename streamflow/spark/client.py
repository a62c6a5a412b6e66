"""``SparkJobClient``: a job running on Spark, controlled from the caller's event loop.

Spark's driver API blocks, so the session, the translation and the queries run in one
worker thread; the caller's loop stays free (sinks other than files run their operators
in it). Status, progress and metrics come from each query's ``lastProgress``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from ..graph import JobGraph
from ..runtime.execution import RuntimeConfig
from ..runtime.job import JobExecutionResult, JobStatus
from .exchange import Exchange
from .plan import Translation
from .session import get_session, session_settings
from .sinks import BatchSink, batch_sink_for, foreach_batch

_log = logging.getLogger(__name__)

# fault hooks for the driver-kill tests: SIGKILL after a sink query's (an exchange query's) micro-batch
# <b> was written, before Spark committed it
KILL_AFTER_BATCH = "STREAMFLOW_SPARK_KILL_AFTER_BATCH"
KILL_AFTER_EXCHANGE_BATCH = "STREAMFLOW_SPARK_KILL_AFTER_EXCHANGE_BATCH"
# Spark starts the driver-side Python processes of a Python data source (the Kafka source's
# offset planning) with a connect-back timeout of 10 s fixed in PythonWorkerFactory (no
# setting changes it in 4.3); on an overloaded machine a fresh interpreter importing pyspark
# can miss it. The query is then restarted from its checkpoint.
_CONNECT_BACK = "Python worker failed to connect back"
_RESTARTS = 2


class SparkJobClient:
    """The Spark twin of :class:`~streamflow.runtime.job.JobClient`."""

    def __init__(self, job_name: str, graph: JobGraph, config: RuntimeConfig,
                 configuration: dict[str, Any]) -> None:
        self.job_name = job_name
        self.job_id = uuid.uuid4().hex  # as Flink's JobID: 32 hex digits
        self._graph = graph
        self._config = config
        self._configuration = configuration
        self._status = JobStatus.RUNNING
        self._queries: list[Any] = []
        self.rest: Any = None  # the job page is served by the asyncio engine only
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._thread = threading.Thread(target=self._main, name=f"spark job {job_name}", daemon=True)
        self._thread.start()

    # -- the worker thread -----------------------------------------------------------
    def _main(self) -> None:
        error: BaseException | None = None
        try:
            self._run()
        except BaseException as exc:  # reported through the future, re-raised by the caller
            error = exc
        self._loop.call_soon_threadsafe(self._finish, error)

    def _finish(self, error: BaseException | None) -> None:
        if error is not None and not self._stop.is_set():
            self._status = JobStatus.FAILED
            _log.error("job %r failed on Spark", self.job_name, exc_info=error)
            self._done.set_exception(error)
            return
        self._status = JobStatus.CANCELED if self._stop.is_set() else JobStatus.FINISHED
        _log.info("job %r %s on Spark", self.job_name, self._status.name.lower())
        self._done.set_result(None)

    def _run(self) -> None:
        spark = get_session(self._configuration)
        storage = self._config.checkpoint.storage_dir
        temp = None
        if storage:
            work = os.path.join(storage, "spark")
        else:
            work = temp = tempfile.mkdtemp(prefix="streamflow-spark-")
        try:
            per_batch = int(self._configuration.get("execution.spark.records-per-batch", 100_000))
            native = str(self._configuration.get("execution.spark.native-windows", True)).lower() != "false"
            exprs = str(self._configuration.get("execution.spark.native-expressions", True)).lower()
            plan = Translation(spark, self._graph, self._config.checkpoint.codec, work, per_batch, native,
                               exprs != "false", self._config.batch, self._config.sorted_inputs)
            sinks: list[BatchSink] = []
            _log.info("job %r: translating to Spark (work dir %s)", self.job_name, work)
            kill_after = os.environ.get(KILL_AFTER_BATCH)
            # (name, foreachBatch function, the DataFrame, the exchanges it reads, the exchange it writes)
            queries: list[tuple[str, Any, Any, frozenset[str], Exchange | None]] = []
            for node, stream in plan.sink_streams():
                spec = plan.spec(node)
                sink = batch_sink_for(spec, self._loop, os.path.join(work, "checkpoints", spec.uid))
                sink.open()
                sinks.append(sink)
                codec = self._config.checkpoint.codec
                function = foreach_batch(sink, codec, _killer(kill_after), stream.layout)
                queries.append((spec.uid, function, stream.df, stream.reads, None))
            # an exchange's query runs before the queries reading it (.exchange: AvailableNow)
            killer = _killer(os.environ.get(KILL_AFTER_EXCHANGE_BATCH))
            queries[:0] = [(f"exchange-{e.uid}", e.writer(killer), e.df, e.reads, e) for e in plan.exchanges]
            settings = plan.session_settings
            self._run_queries(work, queries, lambda: session_settings(spark, settings, self.job_name))
            if not self._stop.is_set():
                for sink in sinks:
                    sink.finish()
            for sink in sinks:
                sink.close()
        finally:
            self._stop_queries()
            if temp is not None:
                shutil.rmtree(temp, ignore_errors=True)

    def _run_queries(self, work: str, queries: list[tuple[str, Any, Any, frozenset[str], Exchange | None]],
                     settings: Callable[[], AbstractContextManager[None]]) -> None:
        """Starts every query reading no exchange at once, the others when the queries of the
        exchanges they read have ended (.exchange), and waits for all of them; each starts
        within ``settings()`` (the translation's Spark settings for its queries)."""
        slots: dict[int, tuple[int, Any]] = {}  # query position -> (its slot in self._queries, start)
        by_uid = {q[4].uid: n for n, q in enumerate(queries) if q[4] is not None}
        done: set[int] = set()

        def start(n: int) -> None:
            name, function, df, _reads, _exchange = queries[n]
            writer = (
                df.writeStream.foreachBatch(function)
                .option("checkpointLocation", os.path.join(work, "checkpoints", name))
                .queryName(f"{self.job_name}/{name}".replace(" ", "_"))
                .trigger(availableNow=True)
            )

            def begin() -> Any:
                with settings():
                    return writer.start()

            slots[n] = (self._started_query(begin()), begin)

        def finish(n: int) -> None:
            if n in done:
                return
            self._await(*slots[n])
            done.add(n)
            exchange = queries[n][4]
            if exchange is not None and not self._stop.is_set():
                exchange.finish()

        for n, query in enumerate(queries):
            if not query[3]:
                start(n)
        for n, query in enumerate(queries):  # an exchange's query comes before the queries reading it
            if n in slots:
                continue
            for uid in sorted(query[3], key=by_uid.__getitem__):
                finish(by_uid[uid])
            if self._stop.is_set():
                return
            start(n)
        for n in range(len(queries)):
            finish(n)

    def _started_query(self, query: Any, n: int | None = None) -> int:
        """Records a started query (in slot ``n``, or a new one); returns its slot."""
        with self._lock:
            if n is None:
                n = len(self._queries)
                self._queries.append(query)
            else:
                self._queries[n] = query
        if self._stop.is_set():  # cancel() ran before this query existed
            query.stop()
        return n

    def _await(self, n: int, start: Any) -> None:
        """Waits for query ``n`` to end; restarts it from its checkpoint (the same batch ids, so
        the sinks stay idempotent) when Spark could not start a driver-side Python process in
        time (see ``_CONNECT_BACK``), at most ``_RESTARTS`` times, logged."""
        for attempt in range(_RESTARTS + 1):
            query = self._queries[n]
            # Blocks in the JVM until the query ends: no polling. cancel() stops the queries
            # from another thread, which ends this wait (a StreamingQueryListener would deliver
            # the same event through py4j's callback server, a second channel for nothing).
            try:
                query.awaitTermination()
                error = query.exception()
            except Exception as exc:  # the query failed: awaitTermination raises its exception
                error = exc
            if error is None or self._stop.is_set():
                return
            if _CONNECT_BACK not in str(error) or attempt == _RESTARTS:
                raise error
            _log.warning("job %r: query %s failed because %s; restarting it from its checkpoint (%d of %d)",
                         self.job_name, query.name, _CONNECT_BACK, attempt + 1, _RESTARTS)
            self._started_query(start(), n)

    def _stop_queries(self) -> None:
        with self._lock:
            queries = list(self._queries)
        for query in queries:
            if query.isActive:
                query.stop()

    # -- the JobClient interface -----------------------------------------------------
    def get_job_status(self) -> JobStatus:
        return self._status

    def get_metrics(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {"job.numRestarts": 0}
        rows = batches = 0
        for query in list(self._queries):
            progress = query.lastProgress
            if progress:
                batches = max(batches, int(progress.get("batchId", 0)) + 1)
                rows += int(progress.get("numInputRows", 0))
        out["spark.numBatches"] = batches
        out["spark.lastBatchInputRows"] = rows
        return out

    def get_job_id(self) -> str:
        return self.job_id

    async def trigger_checkpoint(self) -> str:
        raise RuntimeError("on the Spark engine every micro-batch is checkpointed by Spark itself")

    async def trigger_savepoint(self, savepoint_directory: str) -> str:
        raise RuntimeError("savepoints are not supported on the Spark engine (Spark has none)")

    async def stop_with_savepoint(
        self, advance_to_end_of_event_time: bool = False, savepoint_directory: str | None = None
    ) -> str:
        raise RuntimeError(
            "stop-with-savepoint is not supported on the Spark engine (Spark has no savepoints): "
            "cancel() stops the queries, and a restart resumes from the checkpoint location"
        )

    async def get_job_execution_result(self) -> JobExecutionResult:
        await asyncio.shield(self._done)
        return JobExecutionResult(
            self.job_name, self._status, self.get_metrics(), int((time.monotonic() - self._started) * 1000),
            self.job_id,
        )

    async def cancel(self) -> None:
        self._stop.set()
        await asyncio.get_running_loop().run_in_executor(None, self._stop_queries)
        try:
            await asyncio.shield(self._done)
        except Exception as exc:
            _log.debug("job %r ended with %r while cancelling", self.job_name, exc)


def _killer(after: str | None) -> Any:
    if after is None:
        return None
    limit = int(after)

    def kill(batch_id: int) -> None:
        if batch_id >= limit:
            import signal

            os.kill(os.getpid(), signal.SIGKILL)

    return kill
