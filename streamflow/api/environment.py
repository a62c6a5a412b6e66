"""``StreamExecutionEnvironment``: builds the dataflow and runs it."""

from __future__ import annotations

import asyncio
import copy
import datetime
import logging
import signal
import sys
from collections.abc import AsyncIterable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..checkpoint.config import CheckpointConfig, CheckpointingMode, RestartStrategy
from ..clock import SYSTEM_CLOCK, Clock
from ..connectors.base import Source
from ..connectors.collection import AsyncIterableSource, CollectionSource
from ..graph import GraphError, JobGraph, StreamGraph, build_job_graph
from ..runtime.execution import RuntimeConfig
from ..runtime.job import JobClient, JobExecutionResult
from ..runtime.loop_budget import parse_loop_budget
from ..runtime.record_size import parse_memory_size
from ..state.backends import HashMapStateBackend, StateBackend
from ..state.key_groups import DEFAULT_MAX_PARALLELISM
from .batch import resolve_batch
from .blocking import refuse_running_loop, run_coroutine
from .env_configure import ConfigurationMixin
from .env_pyflink import PyFlinkEnvironmentMixin
from .execution_config import ExecutionConfig
from .typed import collection_source, typed

if TYPE_CHECKING:
    from .datastream import DataStream


_log = logging.getLogger("streamflow")

_default_configuration: dict[str, Any] = {}


def set_default_configuration(configuration: dict[str, Any]) -> None:
    """Configuration every ``StreamExecutionEnvironment`` created from now on starts with
    (Flink's keys, as in :meth:`StreamExecutionEnvironment.configure`). ``streamflow run``
    sets it so an unchanged script picks up the command's settings; calls the script makes
    on its environment afterwards still win."""
    _default_configuration.clear()
    _default_configuration.update(configuration)


def get_default_configuration() -> dict[str, Any]:
    return dict(_default_configuration)


def to_millis(duration: int | float | datetime.timedelta, what: str) -> int:
    """Durations are milliseconds (int) or ``datetime.timedelta``."""
    if isinstance(duration, datetime.timedelta):
        return int(duration.total_seconds() * 1000)
    if isinstance(duration, bool) or not isinstance(duration, (int, float)):
        raise TypeError(f"{what} must be milliseconds or a timedelta, got {duration!r}")
    return int(duration)


ENGINES = ("asyncio", "spark")


class StreamExecutionEnvironment(ConfigurationMixin, PyFlinkEnvironmentMixin):
    """Entry point of a streaming job, with PyFlink's names."""

    def __init__(self, configuration: Any = None, *, clock: Clock | None = None) -> None:
        self._graph = StreamGraph()
        self._parallelism = 1
        self._max_parallelism = DEFAULT_MAX_PARALLELISM
        self._max_parallelism_configured = False  # set_max_parallelism called (restores differ)
        self._chaining = True
        self._clock = clock or SYSTEM_CLOCK
        self.runtime = RuntimeConfig()
        self._auto_watermark_interval_ms = 200
        self._buffer_timeout_ms = 100
        self._engine = "asyncio"
        self._spark_configuration: dict[str, Any] = {}
        self._state_backend: StateBackend = HashMapStateBackend()
        self._state_backend_set = False
        self._rocksdb_local_dir: str | None = None
        self._pipeline_name: str | None = None  # pipeline.name: the job name execute() defaults to
        if _default_configuration:
            self.configure(dict(_default_configuration))
        if configuration is not None:
            self.configure(configuration)

    @staticmethod
    def get_execution_environment(configuration: Any = None, **kw: Any) -> StreamExecutionEnvironment:
        return StreamExecutionEnvironment(configuration, **kw)

    # -- configuration -----------------------------------------------------
    def set_parallelism(self, parallelism: int) -> StreamExecutionEnvironment:
        if parallelism < 1:
            raise ValueError(f"parallelism must be >= 1, got {parallelism}")
        self._parallelism = self._graph.parallelism = parallelism
        return self

    def get_parallelism(self) -> int:
        return self._parallelism

    def set_max_parallelism(self, max_parallelism: int) -> StreamExecutionEnvironment:
        if not 1 <= max_parallelism <= 32768:
            raise ValueError(f"max parallelism must be in 1..32768, got {max_parallelism}")
        self._max_parallelism = max_parallelism
        self._max_parallelism_configured = True
        return self

    def get_max_parallelism(self) -> int:
        """The configured max parallelism, or -1 when unset (Flink's PipelineOptions.MAX_PARALLELISM
        default): each keyed operator then derives its own from its parallelism, as Flink's
        ``KeyGroupRangeAssignment.computeDefaultMaxParallelism``."""
        return self._max_parallelism if self._max_parallelism_configured else -1

    def disable_operator_chaining(self) -> StreamExecutionEnvironment:
        self._chaining = False
        return self

    def is_chaining_enabled(self) -> bool:
        return self._chaining

    def set_batch_size(self, records: int) -> StreamExecutionEnvironment:
        """Records per batch read from a source (default 512)."""
        if records < 1:
            raise ValueError(f"batch size must be >= 1, got {records}")
        self.runtime.batch_size = records
        return self

    def set_channel_capacity(self, records: int) -> StreamExecutionEnvironment:
        """Records a channel between two tasks holds before its writer waits (default 4096)."""
        if records < 1:
            raise ValueError(f"channel capacity must be >= 1, got {records}")
        self.runtime.channel_capacity = records
        return self

    def set_channel_byte_budget(self, max_bytes: int | str | None) -> StreamExecutionEnvironment:
        """Estimated bytes a channel between two tasks holds before its writer waits (default
        64 MiB; ``None`` turns the per-channel bound off). Int bytes or a size such as ``"16 mb"``.
        A batch larger than the budget is still admitted into an empty channel."""
        self.runtime.channel_max_bytes = parse_memory_size(max_bytes, "channel byte budget")
        return self

    def set_job_byte_budget(self, max_bytes: int | str | None) -> StreamExecutionEnvironment:
        """Estimated bytes all channels of the job hold together before writers wait (default
        512 MiB, Flink's network memory; ``None`` turns it off). Int bytes or e.g. ``"1 gb"``."""
        self.runtime.job_max_bytes = parse_memory_size(max_bytes, "job byte budget")
        return self

    def set_loop_budget(self, budget: float | datetime.timedelta | str | None) -> StreamExecutionEnvironment:
        """How long the job may work before it lets the event loop run (default 10 ms; the
        configuration key ``execution.loop-budget``): milliseconds, a ``timedelta`` or a string
        such as ``"10 ms"``. Shared by all tasks of the job (see docs/embedding.md). ``None``
        (or ``"none"``): the job lets the loop run only when it waits for input or room, which
        starves everything else in the loop, its own timers and checkpoints included."""
        self.runtime.loop_budget_ms = parse_loop_budget(budget)
        return self

    def get_loop_budget(self) -> float | None:
        return self.runtime.loop_budget_ms

    def get_config(self) -> ExecutionConfig:
        """PyFlink's ``ExecutionConfig`` of this environment (``api/execution_config.py``)."""
        config = self.__dict__.get("_execution_config")
        if config is None:
            config = self._execution_config = ExecutionConfig(self)
        return config

    def set_auto_watermark_interval(self, interval: int | datetime.timedelta) -> StreamExecutionEnvironment:
        ms = to_millis(interval, "auto watermark interval")
        if ms < 0:  # Flink's ExecutionConfig.setAutoWatermarkInterval refuses it when set
            raise ValueError(f"the auto watermark interval must not be negative, got {ms} ms")
        self._auto_watermark_interval_ms = ms
        return self

    def get_auto_watermark_interval(self) -> int:
        return self._auto_watermark_interval_ms

    def set_global_job_parameters(self, params: dict[str, str]) -> StreamExecutionEnvironment:
        self.runtime.job_parameters = dict(params)
        return self

    # -- checkpoints and recovery --------------------------------------------
    def enable_checkpointing(
        self, interval: int | datetime.timedelta, mode: CheckpointingMode | None = None
    ) -> StreamExecutionEnvironment:
        self.runtime.checkpoint.set_checkpoint_interval(interval)
        if mode is not None:
            self.runtime.checkpoint.set_checkpointing_mode(mode)
        return self

    def get_checkpoint_config(self) -> CheckpointConfig:
        return self.runtime.checkpoint

    def set_state_backend(self, state_backend: StateBackend) -> StreamExecutionEnvironment:
        """Where keyed state lives: ``HashMapStateBackend()`` (the default, Python objects in
        memory) or ``EmbeddedRocksDBStateBackend()`` (RocksDB on local disk; see
        docs/state-backends.md)."""
        if not isinstance(state_backend, StateBackend):
            raise TypeError(f"set_state_backend() expects a StateBackend, got {type(state_backend).__name__}")
        self.runtime.state_backend = None if isinstance(state_backend, HashMapStateBackend) else state_backend
        self._state_backend = state_backend
        self._state_backend_set = True
        return self

    def get_state_backend(self) -> StateBackend | None:
        """The backend set (``set_state_backend``, ``state.backend.type``); ``None`` until one is,
        as PyFlink's (the job then keeps its state in a ``HashMapStateBackend``)."""
        return self._state_backend if self._state_backend_set else None

    def set_restart_strategy(self, restart_strategy: RestartStrategy) -> StreamExecutionEnvironment:
        self.runtime.restart_strategy = restart_strategy
        return self

    def set_engine(self, engine: str) -> StreamExecutionEnvironment:
        """``"asyncio"`` (the default: the job runs in this process's event loop) or
        ``"spark"`` (the same job on PySpark Structured Streaming; see docs/spark.md)."""
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
        self._engine = engine
        return self

    def get_engine(self) -> str:
        return self._engine

    @property
    def clock(self) -> Clock:
        return self._clock

    # -- sources -----------------------------------------------------------
    def from_collection(
        self, collection: Iterable[Any] | Callable[[], Iterable[Any]], type_info: Any = None
    ) -> DataStream:
        """A bounded stream of the given elements (any deterministic iterable); with
        ``type_info`` the elements become records of that type (rows, tuples, ...)."""
        return typed(
            self.from_source(collection_source(collection, type_info), None, "collection"),
            type_info,
        )

    def from_iterable(self, iterable: Iterable[Any] | Callable[[], Iterable[Any]]) -> DataStream:
        return self.from_source(CollectionSource(iterable), None, "iterable")

    def from_async_iterable(
        self, iterable: AsyncIterable[Any] | Callable[[], AsyncIterable[Any]]
    ) -> DataStream:
        return self.from_source(AsyncIterableSource(iterable), None, "async iterable")

    def from_source(
        self,
        source: Source,
        watermark_strategy: Any = None,
        source_name: str = "source",
        type_info: Any = None,
    ) -> DataStream:
        """``type_info`` declares the record type, as PyFlink's ``from_source(..., type_info=)``:
        records of a converting type (rows, tuples, ...) become that type, before the watermark
        strategy's timestamp assigner sees them.

        What this appends after the source (the conversion, the strategy's operator) runs inside
        Flink's source operator: those nodes take the source's parallelism, and the stream
        returned is the source's (its name, uid, parallelism, chaining and side outputs, such as
        ``DEAD_LETTER``, are the source's: ``api/datastream.SourceStream``)."""
        from .datastream import DataStream, SourceStream

        if not isinstance(source, Source):
            raise TypeError(f"from_source() expects a Source, got {type(source).__name__}")
        per_partition = getattr(source, "with_watermark_strategy", None)
        alignment = getattr(watermark_strategy, "alignment", None)
        if watermark_strategy is not None and per_partition is not None:
            # the source generates watermarks per partition itself (KafkaSource, ReplaySource)
            source = per_partition(watermark_strategy, self._auto_watermark_interval_ms)
            watermark_strategy = None
        node = self._graph.add(source_name, None, source=source)
        node.watermark_alignment = alignment  # runtime/watermark_alignment.py
        appended_from = len(self._graph.nodes)  # what is added from here on runs inside the source
        stream = DataStream(self, [(node, None)])
        if type_info is None:  # as Flink: the source's own type (e.g. its deserializer's row type)
            produced = getattr(source, "get_produced_type", None)
            stream = typed(stream, produced() if callable(produced) else None)
        elif getattr(type_info, "converts", lambda: False)():
            stream = typed(stream.map(type_info.convert).name(f"{source_name} as {type_info}"), type_info)
        else:
            stream = typed(stream, type_info)
        if watermark_strategy is not None:
            stream = stream._assign_timestamps(watermark_strategy)
        for appended in self._graph.nodes[appended_from:]:
            appended.inside_source = node
        return SourceStream(stream, node)

    def add_source(
        self, source_func: Source, source_name: str = "source", type_info: Any = None
    ) -> DataStream:
        return self.from_source(source_func, None, source_name, type_info)

    def read_text_file(self, file_path: str, charset_name: str = "utf-8") -> DataStream:
        from ..connectors.files import FileSource, StreamFormat

        return self.from_source(
            FileSource.for_record_stream_format(
                StreamFormat.text_line_format(charset_name), file_path
            ).build(),
            None,
            f"text file {file_path}",
        )

    # -- execution ---------------------------------------------------------
    def get_job_graph(self, job_name: str = "job", *, blocking_exchanges: bool = False) -> JobGraph:
        """The validated, chained job graph (``blocking_exchanges``: a batch job's, whose
        non-forward edges are blocking exchanges and never chain: ``runtime/regions.py``).
        With auto-generated uids disabled (``pipeline.auto-generate-uids: false``,
        ``get_config().disable_auto_generated_uids()``) an operator without ``uid()`` is
        refused, as Flink's ``StreamGraphGenerator`` refuses a physical transformation without
        a uid or uid hash (the node ``from_source`` appends is part of the source's operator)."""
        config = self.__dict__.get("_execution_config")
        if config is not None and not config.has_auto_generated_uids_enabled():
            for node in self._graph.nodes:
                if node.uid is None and node.inside_source is None:
                    raise GraphError(
                        "Auto generated UIDs have been disabled but no UID or hash has been assigned "
                        f"to operator {node.name} (give it .uid(...), or enable pipeline.auto-generate-uids)"
                    )
        for node in self._graph.nodes:
            # a source generating watermarks per partition (from_source) takes the auto-watermark
            # interval set by now, as Flink's SourceOperator reads the ExecutionConfig when it opens
            source: Any = node.source
            if getattr(source, "watermark_strategy", None) is not None:
                node.source = source.with_watermark_strategy(
                    source.watermark_strategy, self._auto_watermark_interval_ms
                )
        return build_job_graph(
            self._graph,
            default_parallelism=self._parallelism,
            default_max_parallelism=self._max_parallelism,
            chaining_enabled=self._chaining,
            max_parallelism_configured=self._max_parallelism_configured,
            blocking_exchanges=blocking_exchanges,
        )

    def execute_async(self, job_name: str | None = None) -> Any:
        """Start the job. Inside a running event loop this is a coroutine:
        ``client = await env.execute_async()`` gives the :class:`JobClient`. Called where no loop
        runs (a PyFlink program), the job starts in an event loop of its own thread and a
        PyFlink-style client comes back at once, its methods returning futures
        (``client.get_job_execution_result().result()``; ``api/blocking_client.py``)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            from .blocking_client import BlockingJobClient

            return BlockingJobClient(self, self._job_name(job_name))
        return self._execute_async(job_name)

    def _job_name(self, job_name: str | None) -> str:
        """The name given, else ``pipeline.name`` when configured, else ``"streamflow job"``
        (Flink's ``execute()`` without a name takes ``PipelineOptions.NAME``)."""
        return job_name if job_name is not None else self._pipeline_name or "streamflow job"

    async def _execute_async(self, job_name: str | None = None) -> JobClient:
        """Start the job in the running event loop; returns its :class:`JobClient`.

        As in Flink (``StreamExecutionEnvironment.getStreamGraph(clearTransformations=true)``),
        the operators added so far are cleared once the job graph is built: the next
        ``execute()`` runs only what is added after this one. In batch mode
        (``api/batch.py``) the job runs without checkpoints."""
        job_name = self._job_name(job_name)
        runtime = self.runtime
        if resolve_batch(self):
            runtime = copy.copy(runtime)
            runtime.batch = True  # processing-time timers fire at the end of input (api/batch.py)
            if runtime.checkpoint.interval_ms is not None:
                runtime.checkpoint = copy.copy(runtime.checkpoint)
                runtime.checkpoint.interval_ms = None
        blocking = runtime.blocking_exchanges and self._engine != "spark"  # runtime/regions.py
        graph = self.get_job_graph(job_name, blocking_exchanges=blocking)
        self._graph.clear()
        if self._engine == "spark":
            from ..spark.client import SparkJobClient

            return SparkJobClient(job_name, graph, runtime, self._spark_configuration)  # type: ignore[return-value]
        client = JobClient(job_name, graph, runtime, self._clock)
        if self.runtime.rest_port is not None:
            from ..rest import serve_job

            try:
                await serve_job(client, self.runtime.rest_address, self.runtime.rest_port)
            except OSError:
                await client.cancel()
                raise
        if self._progress_wanted():
            from ..runtime.progress import show_progress

            show_progress(client)
        return client

    def _progress_wanted(self) -> bool:
        wanted = self.runtime.progress
        if wanted is None:
            return sys.stderr.isatty()
        return wanted

    def execute(self, job_name: str | None = None) -> JobExecutionResult:
        """Run the job to completion in a new event loop (uvloop when installed)."""
        refuse_running_loop(
            "execute() blocks and cannot run inside a running event loop; "
            "use `client = await env.execute_async(...)` and "
            "`await client.get_job_execution_result()` instead"
        )
        job_name = self._job_name(job_name)
        terminated: list[bool] = []

        async def main() -> JobExecutionResult:
            client = await self.execute_async(job_name)
            loop = asyncio.get_running_loop()
            pending: set[asyncio.Task[None]] = set()

            def on_sigterm() -> None:
                _log.warning("SIGTERM: cancelling job %r (graceful shutdown, as on Ctrl-C)", job_name)
                terminated.append(True)
                task = loop.create_task(client.cancel())
                pending.add(task)
                task.add_done_callback(pending.discard)

            try:
                loop.add_signal_handler(signal.SIGTERM, on_sigterm)
                handled = True
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
                _log.debug("cannot handle SIGTERM here: a SIGTERM ends the process at once")
                handled = False
            try:
                return await client.get_job_execution_result()
            finally:
                if handled:
                    loop.remove_signal_handler(signal.SIGTERM)
                if client.rest is not None:
                    await client.rest.wait_stopped()

        result = run_coroutine(main())
        if terminated:  # the job is cancelled and cleaned up: end like the signal would
            raise SystemExit(128 + signal.SIGTERM)
        return result

