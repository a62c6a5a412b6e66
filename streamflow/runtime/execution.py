"""Turns a JobGraph into running tasks: the physical job of one attempt (``Execution``).

Each job vertex runs as ``parallelism`` tasks; every non-chained edge becomes
one bounded channel per (upstream subtask, downstream subtask) pair (only the
diagonal for forward edges). All tasks run in one anyio task group: the first
failure cancels the others, every task cleans up, and the original error is
raised to the caller. A failover builds a new ``Execution`` (``job.JobClient``).
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401  (preloaded: see the comment after the imports)
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
import anyio._backends._asyncio  # preloaded: see the comment after the imports

from ..checkpoint.channel_types import declared_pickled
from ..checkpoint.config import NoRestart
from ..checkpoint.driver import CheckpointDriver
from ..checkpoint.max_parallelism import fit_max_parallelism
from ..checkpoint.restore import RestoredCheckpoint
from ..checkpoint.storage import FileSystemCheckpointStorage
from ..checkpoint.task_checkpointer import CheckpointedTask
from ..clock import Clock
from ..errors import StreamflowError
from ..graph import JobGraph, Partitioning, StreamNode, effective_partitioning, is_chained
from ..state.key_groups import key_group_range
from ..state.keyed import IncrementalSettings, KeyedStateBackend
from .blocking_result import BlockingResult, ResultBudget
from .channel import ByteBudget, Channel, InputGate
from .channel_restore import InFlightRestore, channel_layout, finished_on_restore
from .checkpoint_stats import CheckpointStatsTracker
from .context import OperatorContext
from .failures import primary_error as primary_error
from .gc_policy import GC_POLICY
from .half_sorted_input import install_half_sorted_input
from .input_selection import plan_input_selection
from .loop_budget import LoopBudget
from .metered_output import MeteredOutput
from .metrics import MetricGroup, read_metrics
from .operator import BatchTarget, StreamOperator
from .regions import RegionFailure, RegionScheduler
from .runtime_config import RuntimeConfig as RuntimeConfig
from .sort_runs import RunCodec, spill_opt_in
from .sorting_input import install_sorted_input
from .source_task import SourceTask
from .start_gate import StartGate
from .task import InputTask, Task
from .timestamps import TimestampsAndWatermarksOperator
from .watermark_alignment import AlignmentMember, WatermarkAlignment
from .writer import ChannelWriter, create_writer

# Preloaded (the two imports so marked above): they load when streamflow is imported, not on
# the event loop while the first job runs: anyio imports its asyncio backend at the first task
# group (a job's start) and asyncio the thread pool module at the first run_in_executor (the
# first checkpoint's write), 40-60 ms of imports holding the caller's loop (bench/loop_hold.py
# --watch-ms 20 showed them as the longest hold of a run).

_log = logging.getLogger("streamflow")


class Execution:
    """The physical job: tasks, channels and operator instances."""

    def __init__(
        self,
        job_name: str,
        graph: JobGraph,
        config: RuntimeConfig,
        clock: Clock,
        restore: RestoredCheckpoint | None = None,
        storage: FileSystemCheckpointStorage | None = None,
        checkpoint_stats: CheckpointStatsTracker | None = None,
        first_checkpoint_id: int = 1,
        attempt: int = 0,
        on_region_failure: RegionFailure | None = None,
    ):
        self.job_name = job_name
        self.attempt = attempt  # 0, then the number of restarts (RuntimeContext.get_attempt_number)
        # what operators defer to the successful end of this execution (OperatorContext.job_end):
        # a file sink without checkpoints publishes its files only when every task has finished,
        # so a failure and restart of the job never leaves a finished subtask's output twice
        self.job_end: list[Callable[[], Awaitable[None]]] = []
        # a batch job with blocking exchanges runs its tasks as pipelined regions, each failing
        # over on its own (regions.py); its job-end actions are kept per task, so a restarted
        # task's failed attempt publishes nothing
        self.blocking = config.blocking_exchanges and restore is None
        if config.blocking_exchanges and restore is not None:
            _log.info(
                "job %r: a batch job restored from %s runs with pipelined exchanges (the restore "
                "is per task of the whole job); a failure restarts the whole job", job_name, restore.source,
            )  # fmt: skip
        self.task_job_end: dict[str, list[Callable[[], Awaitable[None]]]] = {}
        self.on_region_failure = on_region_failure
        self.graph = graph
        self.config = config
        self._restart_strategy = config.resolved_restart_strategy()  # whether operators see restarts
        self.clock = clock
        self.restore = restore
        self.checkpoint_stats = checkpoint_stats or CheckpointStatsTracker(clock)
        self.metrics: dict[str, object] = {}
        self.tasks: list[Task] = []
        # (node id, subtask) -> operator instance (sources have none)
        self.operators: dict[tuple[int, int], StreamOperator] = {}
        self.channels: list[Channel] = []
        limit = self.config.job_max_bytes
        self.byte_budget = ByteBudget(limit) if limit is not None else None
        self.loop_budget = LoopBudget(config.loop_budget_ms, clock)
        self.alignment = WatermarkAlignment()
        self._task_ids: list[str] = []  # parallel to tasks: "<head uid>#<subtask>"
        self.task_slots: list[tuple[list[StreamNode], int]] = []  # parallel to tasks: (chain, subtask)
        self._spill_fallbacks: set[str] = set()  # operators whose sorted input logged a pickle fallback
        self._result_budget: ResultBudget | None = None
        if restore is not None:
            restore.check_fits(
                {graph.uid_of(n): graph.parallelism[n.id] for n in graph.nodes},
                {graph.uid_of(n) for n in graph.nodes if n.keyed or n.rescalable},
                config.allow_non_restored_state,
            )
            fit_max_parallelism(restore, graph, {graph.uid_of(n) for n in graph.nodes if n.keyed})
            self._in_flight = InFlightRestore(restore, graph, config.allow_non_restored_state)
        self._build()
        self.driver = CheckpointDriver(
            job_name,
            [
                (task_id, cast(CheckpointedTask, t))
                for task_id, t in zip(self._task_ids, self.tasks, strict=True)
            ],
            clock,
            config.checkpoint,
            storage,
            None if restore is None else restore.checkpoint_id,
            first_checkpoint_id,
            self.checkpoint_stats,
        )
        if self.blocking:  # no checkpoints in a batch job; the driver does not run (regions.py)
            for task in self.tasks:
                task.checkpointer = None
            self.driver.refuse_requests("a batch job takes no checkpoints")

    # -- construction ------------------------------------------------------
    def _build(self) -> None:
        g = self.graph
        self._reads_first = plan_input_selection(g.nodes) if self.config.batch else {}
        # channels of each non-chained edge: (consumer id, edge index) -> [up][down] channels;
        # with blocking exchanges each has a result the producer writes (blocking_result.py)
        edge_channels: dict[tuple[int, int], list[list[Channel | None]]] = {}
        self.results: dict[tuple[int, int], list[list[Any]]] = {}
        self.edge_channels = edge_channels
        for node in g.nodes:
            for k, edge in enumerate(node.inputs):
                if is_chained(g, node, edge):
                    continue
                up_p, p = g.parallelism[edge.upstream.id], g.parallelism[node.id]
                forward = effective_partitioning(edge, up_p, p) is Partitioning.FORWARD
                grid: list[list[Channel | None]] = []
                for j in range(up_p):
                    row: list[Channel | None] = []
                    for i in range(p):
                        if forward and i != j:
                            row.append(None)
                            continue
                        row.append(self.new_channel(f"{edge.upstream.name}[{j}] -> {node.name}[{i}]"))
                    grid.append(row)
                edge_channels[(node.id, k)] = grid
                if self.blocking:
                    codec = self._run_codec(f"exchange {edge.upstream.name!r} -> {node.name!r}", [edge])
                    budget = self.result_budget
                    self.results[(node.id, k)] = [
                        [None if ch is None else BlockingResult(ch.name, budget, codec) for ch in row]
                        for row in grid
                    ]

        finished: dict[int, list[bool]] = {}  # head node id -> its subtasks deployed finished
        for vertex in g.vertices:
            subtasks = finished[vertex.nodes[0].id] = []
            for sub in range(vertex.parallelism):
                task = self.build_task(vertex.nodes, sub, edge_channels, self.results or edge_channels)
                self._task_ids.append(task.task_id)
                self.task_slots.append((vertex.nodes, sub))
                task.finished_on_restore = finished_on_restore(g, self.restore, vertex.nodes, sub, finished)
                subtasks.append(task.finished_on_restore)
                self.tasks.append(task)
        if self.blocking:  # a region starts once its inputs are complete (regions.py)
            self.scheduler = RegionScheduler(self)
            return
        gate = StartGate(len(self.tasks))  # no input starts before every task opened (start_gate.py)
        for task in self.tasks:
            task.start_gate = gate

    def new_channel(self, name: str) -> Channel:
        """A channel of this job (listed in ``channels`` for the metrics)."""
        cfg = self.config
        ch = Channel(cfg.channel_capacity, name, max_bytes=cfg.channel_max_bytes, budget=self.byte_budget)
        self.channels.append(ch)
        return ch

    @property
    def result_budget(self) -> ResultBudget:
        """The memory of this job's blocking results (blocking_result.py), made on first use."""
        budget = self._result_budget
        if budget is None:
            budget = self._result_budget = ResultBudget(self.config.blocking_results_memory)
        return budget

    def _run_codec(self, where: str, edges: list[Any]) -> RunCodec:
        """How a blocking result of ``edges``' stream (or records an operator holds) spills."""
        codec, reason, logged = self._spill_of(edges)
        return RunCodec(
            where, self.config.blocking_results_memory, codec, reason, logged,
            what="a blocking exchange's result", memory_key="streamflow.blocking-results.memory",
        )  # fmt: skip

    def build_task(
        self,
        nodes: list[StreamNode],
        sub: int,
        edge_channels: dict[tuple[int, int], list[list[Channel | None]]],
        edge_outputs: dict[tuple[int, int], list[list[Any]]],
        attempt: int | None = None,
    ) -> Task:
        """Subtask ``sub`` of the chain ``nodes``, reading the channels of ``edge_channels``
        and writing those (or the blocking results) of ``edge_outputs``; its operators see
        ``attempt`` (the execution's attempt when None) as their attempt number."""
        g = self.graph
        task_name = " -> ".join(n.name for n in nodes) + (f" ({sub + 1}/{g.parallelism[nodes[0].id]})")
        ops: list[StreamOperator] = []
        for node in nodes:
            if node.operator_factory is not None:
                op = node.operator_factory.create(sub)
                if node.keyed and self.config.batch and self.config.sorted_inputs:  # sorting_input.py
                    install_sorted_input(
                        op, self.config.sorted_inputs_memory, self.config.batch_size,
                        self._spill_of(node.inputs),
                    )  # fmt: skip
                elif node.half_keys is not None and self.config.batch and self.config.sorted_inputs:
                    install_half_sorted_input(
                        op, node.half_keys, self.config.sorted_inputs_memory, self.config.batch_size,
                        self._spill_of(node.inputs),
                    )  # fmt: skip
                self.operators[(node.id, sub)] = op
                ops.append(op)
        writers: list[ChannelWriter] = []
        writer_types: list[Any] = []  # the declared record type each writer carries (or None)
        outputs: dict[int, MeteredOutput] = {}
        for node in reversed(nodes):  # consumers first, so their operators exist
            main: list[BatchTarget] = []
            side: dict[str, list[BatchTarget]] = {}
            for consumer, edge in g.consumers[node.id]:
                if is_chained(g, consumer, edge):
                    target: BatchTarget = self.operators[(consumer.id, sub)]
                else:
                    k = consumer.inputs.index(edge)
                    row = edge_outputs[(consumer.id, k)][sub]
                    channels = [ch for ch in row if ch is not None]
                    up_p, p = g.parallelism[node.id], g.parallelism[consumer.id]
                    writer = create_writer(
                        channels,
                        effective_partitioning(edge, up_p, p) if len(channels) > 1 else Partitioning.FORWARD,
                        subtask_index=sub if len(channels) > 1 else 0,
                        key_selector=edge.key_selector,
                        partitioner=edge.partitioner,
                        upstream_parallelism=up_p,
                        max_parallelism=g.vertex_of[consumer.id].max_parallelism,
                        where=f"key selector of {consumer.name!r}",
                    )
                    writers.append(writer)
                    writer_types.append(node.declared_types.get(edge.side_tag))
                    target = writer
                (main if edge.side_tag is None else side.setdefault(edge.side_tag, [])).append(target)
            outputs[node.id] = MeteredOutput(main, side, self.loop_budget)

        head = nodes[0]
        task_id = f"{g.uid_of(head)}#{sub}"
        if self.blocking:
            self.task_job_end[task_id] = []  # a new attempt's: the failed one's actions are dropped
        kw: dict[str, Any] = dict(
            operators=ops, writers=writers, clock=self.clock, batch_size=self.config.batch_size,
            budget=self.loop_budget,
        )  # fmt: skip
        task: Task
        if head.source is not None:
            reader = head.source.create_reader(sub, g.parallelism[head.id])
            task = SourceTask(task_name, reader, outputs[head.id], **kw)
            task.source_uid = g.uid_of(head)
            task.alignment = self._alignment_member(head, sub)
            if hasattr(reader, "set_metric_group"):  # e.g. Kafka consumer lag per partition
                reader.set_metric_group(MetricGroup(f"{g.uid_of(head)}[{sub}]", self.metrics))
            restored = self._restored(head, sub)
            if restored is not None and reader.rescalable_position:
                reader.restore_positions([s["position"] for s in restored.all if s is not None])
            elif restored is not None and restored.own is not None:
                reader.restore_position(restored.own["position"])
        else:
            gate_channels: list[Channel] = []
            input_of_channel: list[int] = []
            input_types: list[Any] = []
            for k, edge in enumerate(head.inputs):
                for row in edge_channels[(head.id, k)]:
                    ch = row[sub]
                    if ch is not None:
                        gate_channels.append(ch)
                        input_of_channel.append(edge.input_index)
                        input_types.append(edge.upstream.declared_types.get(edge.side_tag))
            task = InputTask(task_name, InputGate(gate_channels), input_of_channel, **kw)
            task.input_types = input_types
            task.selection.read_first(self._reads_first.get(head.id))
        task.parallelism = g.parallelism[head.id]
        task.max_parallelism = g.vertex_of[head.id].max_parallelism
        task.writer_types = writer_types
        task.outputs = [(node, outputs[node.id]) for node in nodes]
        task.task_id = task_id
        for writer in writers:
            for ch in writer.channels:
                ch.writer = task
        for node in nodes:
            chained = self.operators.get((node.id, sub))
            if chained is not None:
                ctx = self._context(node, sub, task, self.attempt if attempt is None else attempt, task_id)
                chained.setup(ctx, outputs[node.id])
                if node.inside_source is not None and isinstance(chained, TimestampsAndWatermarksOperator):
                    chained.alignment = self._alignment_member(node.inside_source, sub)
                try:
                    chained.initialize_state(self._restored(node, sub))
                except Exception as exc:  # which operator could not take its state
                    exc.add_note(f"while restoring operator {node.name!r} (uid {ctx.uid!r}), subtask {sub}")
                    raise
        task.channel_layout = channel_layout(g, nodes, sub)
        if self.restore is not None:
            self._in_flight.apply(task, task_id, nodes, sub, self.operators)
        return task

    def _alignment_member(self, source: StreamNode, sub: int) -> AlignmentMember | None:
        """The watermark alignment member of ``source``'s subtask ``sub``, if its strategy aligns
        (none in a batch job: no watermarks there, as in Flink)."""
        params = source.watermark_alignment
        if params is None or self.config.batch:
            return None
        return self.alignment.member(self.graph.uid_of(source), sub, params)

    def _spill_of(self, edges: list[Any]) -> tuple[Any, str | None, set[str]]:
        """How records of ``edges`` spill (a keyed node's sorted input writes its runs,
        ``sort_runs.py``; a blocking result its file): the records codec, why a record it
        refuses may be pickled, and the job's set of fallbacks logged."""
        pickled = any(declared_pickled(e.upstream.declared_types.get(e.side_tag)) for e in edges)
        codec, reason = spill_opt_in(self.config.checkpoint.get_records_codec(), pickled)
        return codec, reason, self._spill_fallbacks

    def _restored(self, node: StreamNode, sub: int) -> Any:
        if self.restore is None:
            return None
        g = self.graph
        maxp = g.vertex_of[node.id].max_parallelism
        groups = key_group_range(sub, maxp, g.parallelism[node.id])
        return self.restore.for_operator(g.uid_of(node), sub, groups)

    def _context(self, node: StreamNode, sub: int, task: Task, attempt: int, task_id: str) -> OperatorContext:
        g = self.graph
        uid = g.uid_of(node)
        maxp = g.vertex_of[node.id].max_parallelism
        return OperatorContext(
            uid=uid,
            name=node.name,
            task_name=g.vertex_of[node.id].name,  # the chain's name (the task's has its subtask)
            subtask_index=sub,
            parallelism=g.parallelism[node.id],
            max_parallelism=maxp,
            clock=self.clock,
            metrics=MetricGroup(f"{uid}[{sub}]", self.metrics),
            processing_time=task.processing_time,
            job_parameters=dict(self.config.job_parameters),
            keyed_backend=self._keyed_backend(uid, sub, maxp, g.parallelism[node.id]) if node.keyed else None,
            checkpointing=self.config.checkpoint.is_checkpointing_enabled(),
            attempt=attempt,
            batch=self.config.batch,
            job_end=self.task_job_end[task_id] if self.blocking else self.job_end,
            restarts=not isinstance(self._restart_strategy, NoRestart),
            new_buffer=lambda name: BlockingResult(
                name, self.result_budget, self._run_codec(f"operator {node.name!r}", node.inputs)
            ),
        )

    def _keyed_backend(self, uid: str, sub: int, maxp: int, parallelism: int) -> KeyedStateBackend:
        backend = self.config.state_backend
        if backend is None:
            keyed = KeyedStateBackend(
                maxp,
                self._incremental(uid, sub, maxp, parallelism),
                codec=self.config.checkpoint.codec,
                key_groups=key_group_range(sub, maxp, parallelism),
            )
        else:
            groups = key_group_range(sub, maxp, parallelism)
            keyed = cast(
                KeyedStateBackend,
                backend.create_keyed_backend(maxp, groups, uid, sub, self.config.checkpoint.codec),
            )
        if hasattr(keyed, "defer_restore"):  # the heap backend: its task decodes a restore in slices
            keyed.defer_restore = True
        return keyed

    def _incremental(self, uid: str, sub: int, maxp: int, parallelism: int) -> IncrementalSettings | None:
        """Incremental keyed checkpoints need them on and checkpointing; without a storage
        directory the chain's files are kept in memory (``MemorySharedFiles``) with the latest
        checkpoint, as a RocksDB backend's are."""
        cfg = self.config.checkpoint
        if not (cfg.incremental and cfg.is_checkpointing_enabled()):
            return None
        groups = key_group_range(sub, maxp, parallelism)
        return IncrementalSettings(
            f"{uid}#{sub}", groups, cfg.codec, cfg.incremental_max_chain,
            cfg.snapshot_process, cfg.snapshot_process_min_entries,
        )  # fmt: skip

    # -- running -----------------------------------------------------------
    async def run(self) -> None:
        """Run every task and the checkpoint driver; on every end (finished, cancelled, failed)
        the driver first settles the checkpoints in flight (see ``CheckpointDriver.settle``)."""
        error: BaseException | None = None
        try:
            async with anyio.create_task_group() as tg:
                self.cancel_scope = self.loop_budget.job_scope = tg.cancel_scope
                if self.blocking:
                    tg.start_soon(self.scheduler.run, name="region scheduler")
                else:
                    for task in self.tasks:
                        tg.start_soon(task.run, name=task.name)
                    tg.start_soon(self.driver.run, name="checkpoint driver")
            if self.job_end_actions():  # every task finished: the deferred publications
                try:
                    await self.run_job_end()
                except Exception as exc:
                    raise JobEndError(
                        f"job {self.job_name!r}: every task finished, but publishing its output at the "
                        f"job's end failed: {exc!r}"
                    ) from exc
        except BaseExceptionGroup as group:
            error = primary_error(group)
            raise error from error.__cause__  # (its own cause kept, the group's context dropped)
        except BaseException as exc:  # cancelled before the task group started
            error = exc
            raise
        finally:
            scope = getattr(self, "cancel_scope", None)
            cancelled = isinstance(error, anyio.get_cancelled_exc_class()) or (
                error is None and scope is not None and scope.cancel_called
            )
            detail = "was cancelled" if cancelled else "finished" if error is None else f"failed: {error!r}"
            with anyio.CancelScope(shield=True):
                await self.driver.settle(detail, None if cancelled else error)

    async def run_job_end(self) -> None:
        """What operators deferred to the job's successful end (``OperatorContext.job_end``: a
        file sink without checkpoints publishing its files). Each action is idempotent, so a
        retry after a failure runs them all again (``JobClient``), never the tasks."""
        for action in self.job_end_actions():
            await action()

    def job_end_actions(self) -> list[Callable[[], Awaitable[None]]]:
        """What the operators deferred to the job's end: those of each task's last attempt."""
        return self.job_end + [a for task_id in self._task_ids for a in self.task_job_end.get(task_id, ())]

    def read_metrics(self) -> dict[str, float | int]:
        out = read_metrics(self.metrics)
        stats = self.driver.coordinator.stats
        out["checkpoints.numCompleted"] = self.driver.num_completed
        out["checkpoints.numAborted"] = stats.num_aborted
        out["checkpoints.lastDurationMs"] = stats.last_duration_ms or 0
        if self.byte_budget is not None:
            out["job.inFlightBytesPeak"] = self.byte_budget.peak
        out["job.numLoopYields"] = self.loop_budget.slices
        out["job.numLoopTaskWaits"] = self.loop_budget.waits
        out.update(GC_POLICY.metrics())
        for t in self.tasks:
            if t.checkpointer is not None and t.checkpointer.handler is not None:
                out[f"{t.name}.lastAlignmentMs"] = t.checkpointer.last_alignment_ms
            if isinstance(t, SourceTask):
                out[f"{t.name}.numRecordsOut"] = t.records_out
                out[f"{t.name}.numRecordsMalformed"] = t.records_malformed
            elif isinstance(t, InputTask):
                out[f"{t.name}.numRecordsIn"] = t.records_in
        return out


class JobEndError(StreamflowError, RuntimeError):
    """Every task finished, but an action deferred to the job's end failed (``__cause__``):
    the output is complete, so only that publication is retried, never the tasks."""
