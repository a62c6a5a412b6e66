"""Turns a JobGraph into running tasks, and the JobClient that controls them.

Each job vertex runs as ``parallelism`` tasks; every non-chained edge becomes
one bounded channel per (upstream subtask, downstream subtask) pair (only the
diagonal for forward edges). All tasks run in one anyio task group: the first
failure cancels the others, every task cleans up, and the original error is
raised to the caller.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..clock import Clock
from ..graph import JobGraph, Partitioning, StreamNode, effective_partitioning, is_chained
from ..state.keyed import KeyedStateBackend
from .channel import Channel, InputGate
from .context import OperatorContext
from .metrics import MetricGroup, read_metrics
from .operator import BatchTarget, Output, StreamOperator
from .task import InputTask, SourceTask, Task
from .writer import ChannelWriter


class JobStatus(enum.Enum):
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"


@dataclass
class RuntimeConfig:
    batch_size: int = 512
    channel_capacity: int = 4096
    clock: Clock | None = None
    job_parameters: dict[str, str] = field(default_factory=dict)


@dataclass
class JobExecutionResult:
    job_name: str
    status: JobStatus
    metrics: dict[str, float | int]
    net_runtime_ms: int

    def get_net_runtime(self) -> int:
        return self.net_runtime_ms


class Execution:
    """The physical job: tasks, channels and operator instances."""

    def __init__(self, job_name: str, graph: JobGraph, config: RuntimeConfig, clock: Clock):
        self.job_name = job_name
        self.graph = graph
        self.config = config
        self.clock = clock
        self.metrics: dict[str, object] = {}
        self.tasks: list[Task] = []
        # (node id, subtask) -> operator instance (sources have none)
        self.operators: dict[tuple[int, int], StreamOperator] = {}
        self.channels: list[Channel] = []
        self._build()

    # -- construction ------------------------------------------------------
    def _build(self) -> None:
        g = self.graph
        # channels of each non-chained edge: (consumer id, edge index) -> [up][down] channels
        edge_channels: dict[tuple[int, int], list[list[Channel | None]]] = {}
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
                        ch = Channel(
                            self.config.channel_capacity,
                            f"{edge.upstream.name}[{j}] -> {node.name}[{i}]",
                        )
                        self.channels.append(ch)
                        row.append(ch)
                    grid.append(row)
                edge_channels[(node.id, k)] = grid

        for vertex in g.vertices:
            for sub in range(vertex.parallelism):
                self.tasks.append(self._build_task(vertex.nodes, sub, edge_channels))

    def _build_task(
        self,
        nodes: list[StreamNode],
        sub: int,
        edge_channels: dict[tuple[int, int], list[list[Channel | None]]],
    ) -> Task:
        g = self.graph
        task_name = " -> ".join(n.name for n in nodes) + (f" ({sub + 1}/{g.parallelism[nodes[0].id]})")
        ops: list[StreamOperator] = []
        for node in nodes:
            if node.operator_factory is not None:
                op = node.operator_factory(sub)  # type: ignore[call-arg]
                self.operators[(node.id, sub)] = op
                ops.append(op)
        writers: list[ChannelWriter] = []
        outputs: dict[int, Output] = {}
        for node in reversed(nodes):  # consumers first, so their operators exist
            main: list[BatchTarget] = []
            side: dict[str, list[BatchTarget]] = {}
            for consumer, edge in g.consumers[node.id]:
                if is_chained(g, consumer, edge):
                    target: BatchTarget = self.operators[(consumer.id, sub)]
                else:
                    k = consumer.inputs.index(edge)
                    row = edge_channels[(consumer.id, k)][sub]
                    channels = [ch for ch in row if ch is not None]
                    up_p, p = g.parallelism[node.id], g.parallelism[consumer.id]
                    target = ChannelWriter(
                        channels,
                        effective_partitioning(edge, up_p, p) if len(channels) > 1 else Partitioning.FORWARD,
                        subtask_index=sub if len(channels) > 1 else 0,
                        key_selector=edge.key_selector,
                        max_parallelism=g.vertex_of[consumer.id].max_parallelism,
                        where=f"key selector of {consumer.name!r}",
                    )
                    writers.append(target)
                (main if edge.side_tag is None else side.setdefault(edge.side_tag, [])).append(target)
            outputs[node.id] = Output(main, side)

        head = nodes[0]
        kw: dict[str, Any] = dict(
            operators=ops, writers=writers, clock=self.clock, batch_size=self.config.batch_size
        )
        task: Task
        if head.source is not None:
            reader = head.source.create_reader(sub, g.parallelism[head.id])
            task = SourceTask(task_name, reader, outputs[head.id], **kw)
        else:
            gate_channels: list[Channel] = []
            for k, _edge in enumerate(head.inputs):
                for row in edge_channels[(head.id, k)]:
                    ch = row[sub]
                    if ch is not None:
                        gate_channels.append(ch)
            task = InputTask(task_name, InputGate(gate_channels), **kw)
        for node in nodes:
            op = self.operators.get((node.id, sub))
            if op is not None:
                op.setup(self._context(node, sub, task), outputs[node.id])
                op.initialize_state(None)
        return task

    def _context(self, node: StreamNode, sub: int, task: Task) -> OperatorContext:
        g = self.graph
        uid = g.uid_of(node)
        maxp = g.vertex_of[node.id].max_parallelism
        return OperatorContext(
            uid=uid,
            name=node.name,
            task_name=task.name,
            subtask_index=sub,
            parallelism=g.parallelism[node.id],
            max_parallelism=maxp,
            clock=self.clock,
            metrics=MetricGroup(f"{uid}[{sub}]", self.metrics),
            processing_time=task.processing_time,
            job_parameters=dict(self.config.job_parameters),
            keyed_backend=KeyedStateBackend(maxp) if node.keyed else None,
        )

    # -- running -----------------------------------------------------------
    async def run(self, scope_ready: anyio.Event | None = None) -> None:
        try:
            async with anyio.create_task_group() as tg:
                self.cancel_scope = tg.cancel_scope
                if scope_ready is not None:
                    scope_ready.set()
                for task in self.tasks:
                    tg.start_soon(task.run, name=task.name)
        except BaseExceptionGroup as group:
            raise primary_error(group) from None

    def read_metrics(self) -> dict[str, float | int]:
        out = read_metrics(self.metrics)
        for t in self.tasks:
            if isinstance(t, SourceTask):
                out[f"{t.name}.numRecordsOut"] = t.records_out
                out[f"{t.name}.numRecordsMalformed"] = t.records_malformed
            elif isinstance(t, InputTask):
                out[f"{t.name}.numRecordsIn"] = t.records_in
        return out


def primary_error(group: BaseExceptionGroup) -> BaseException:
    """The error that started a failure: the first one that is not a cancellation."""
    cancelled = anyio.get_cancelled_exc_class()
    fallback: BaseException | None = None
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            stack[:0] = list(exc.exceptions)
        elif not isinstance(exc, cancelled):
            return exc
        elif fallback is None:
            fallback = exc
    return fallback or group


class JobClient:
    """Controls a job running in the caller's event loop (``execute_async``)."""

    def __init__(self, execution: Execution) -> None:
        self.execution = execution
        self.job_name = execution.job_name
        self._status = JobStatus.RUNNING
        self._scope_ready = anyio.Event()
        self._started = execution.clock.monotonic()
        self._task: asyncio.Task[None] = asyncio.get_running_loop().create_task(
            self._run(), name=f"streamflow job {self.job_name}"
        )
        self._cancel_requested = False

    async def _run(self) -> None:
        try:
            await self.execution.run(self._scope_ready)
        except BaseException:
            self._status = JobStatus.CANCELED if self._cancel_requested else JobStatus.FAILED
            raise
        self._status = JobStatus.CANCELED if self._cancel_requested else JobStatus.FINISHED

    def get_job_status(self) -> JobStatus:
        return self._status

    def get_metrics(self) -> dict[str, float | int]:
        return self.execution.read_metrics()

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
            int((self.execution.clock.monotonic() - self._started) * 1000),
        )

    async def cancel(self) -> None:
        """Stop the job: every task closes its operators; returns when all have."""
        if self._task.done():
            return
        self._cancel_requested = True
        await self._scope_ready.wait()
        self.execution.cancel_scope.cancel()
        try:
            await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if not self._task.done():
                raise
