"""Pipelined regions of a batch job: scheduled over blocking exchanges, each failing over alone.

Theory of operation
-------------------
Flink runs a job in ``RuntimeExecutionMode.BATCH`` with blocking exchanges
(``execution.batch-shuffle-mode`` ``ALL_EXCHANGES_BLOCKING``, its default): every job edge
that is not chained is a BLOCKING result partition, written in full by its producer before
its consumer is scheduled. The subtasks joined by pipelined exchanges form a *pipelined
region* (``PipelinedRegionComputeUtil``); with every exchange blocking, a region is one
subtask of one chain, which is one task here (a batch job chains only forward edges:
``graph.py``). This module is the scheduler and failover of those regions for one execution
(``execution.Execution``), after Flink's ``PipelinedRegionSchedulingStrategy`` and
``RestartPipelinedRegionFailoverStrategy``:

* **Scheduling.** A region starts once every region producing its inputs has finished: its
  inputs are complete then. Its input channels are fed from the producers' results
  (``blocking_result.BlockingResult.feed``) while it runs; its writers write results of its
  own, which nobody reads until it has finished. Regions of independent branches run at once.
* **Failover.** A failure of a region's task (an ``Exception`` from the task or from feeding
  its input) restarts only that region. The job decides first (``on_region_failure``, the
  ``JobClient``): its restart strategy gives the delay, counts and logs the restart with its
  cause, or ends the job (the failure itself under ``NoRestart``, else
  ``RestartsExhaustedError`` naming it). After the delay a fresh task is built: new operator
  instances whose runtime context reports the region's next attempt number, new results for
  its outputs (the failed attempt's partial results are released: its consumers never saw
  them) and new input channels, fed again from the start of the upstream results, which are
  complete and kept. No other region is touched: its producers stay finished (their
  operators keep attempt 0), its consumers have not started, other branches go on. A
  failure to build the next attempt is that attempt's failure (the strategy decides again).
  The strategy is the job's, shared by all regions, as Flink's restart back-off strategy is.
* **Release.** When a region has finished, the results it read are released: every result
  has exactly one consumer subtask (Flink releases a blocking partition once consumed). When
  the scheduler ends (finished, failed, cancelled) every result left is released.
* **Side effects.** What a failed attempt's operators deferred to the job's end (a file
  sink's batch publication, ``OperatorContext.job_end``) is dropped with the attempt
  (``Execution.task_job_end`` is per task); the collect sink holds an attempt's records
  for the job's end when the job may restart (``connectors/queue_sink.py``), so the
  consumer sees no record of a failed attempt.
* A cancellation (of the job, or the whole job failing) is never a region failure: it
  propagates and every region stops.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

import anyio

from .blocking_result import BlockingResult
from .failures import primary_error

if TYPE_CHECKING:
    from .execution import Execution
    from .task import Task

__all__ = ["RegionFailure", "RegionScheduler"]

_log = logging.getLogger("streamflow")

# the job's decision on a region's failure: (region name, failure, attempt that failed) -> the
# delay in ms before the region restarts; raises to end the job
RegionFailure = Callable[[str, Exception, int], float]


class _Region:
    """One pipelined region: the task at ``index`` in the execution's tasks (module doc)."""

    __slots__ = ("attempt", "index", "inputs", "outputs", "producers", "sub")

    def __init__(self, index: int, sub: int, attempt: int) -> None:
        self.index = index
        self.sub = sub
        self.attempt = attempt
        # the input channels in the order of the task's gate: (consumer id, edge index), upstream subtask
        self.inputs: list[tuple[tuple[int, int], int]] = []
        self.outputs: list[tuple[int, int]] = []  # the edges it writes results of: (consumer id, edge index)
        self.producers: set[int] = set()  # regions whose results it reads


class RegionScheduler:
    """Runs an execution's tasks as pipelined regions (module doc)."""

    def __init__(self, execution: Execution) -> None:
        self.execution = execution
        g = execution.graph
        index_of = {(nodes[0].id, sub): i for i, (nodes, sub) in enumerate(execution.task_slots)}
        self.regions: list[_Region] = []
        for i, (nodes, sub) in enumerate(execution.task_slots):
            region = _Region(i, sub, execution.attempt)
            head = nodes[0]
            for k, edge in enumerate(head.inputs):
                up_head = g.vertex_of[edge.upstream.id].head
                for j, row in enumerate(execution.edge_channels[(head.id, k)]):
                    if row[sub] is not None:
                        region.inputs.append(((head.id, k), j))
                        region.producers.add(index_of[(up_head.id, j)])
            for node in nodes:
                for consumer, edge in g.consumers[node.id]:
                    key = (consumer.id, consumer.inputs.index(edge))
                    if key in execution.results:
                        region.outputs.append(key)
            self.regions.append(region)
            execution.tasks[i].scheduled = False  # until its inputs are complete (run)

    async def run(self) -> None:
        """Run every region to its end (or until the job fails or is cancelled); then every
        result left is released (a failed or cancelled job's, with their spill files)."""
        finished = [anyio.Event() for _ in self.regions]
        try:
            async with anyio.create_task_group() as tg:
                for region in self.regions:
                    name = f"region {self.execution.tasks[region.index].name}"
                    tg.start_soon(self._run_region, region, finished, name=name)
        finally:
            for grid in self.execution.results.values():
                for row in grid:
                    for result in row:
                        if result is not None:
                            result.release()

    async def _run_region(self, region: _Region, finished: list[anyio.Event]) -> None:
        for producer in region.producers:
            await finished[producer].wait()
        ex = self.execution
        failure = await self._attempt(region, ex.tasks[region.index])
        while failure is not None:
            if ex.on_region_failure is None:
                raise failure
            delay_ms = ex.on_region_failure(ex.tasks[region.index].name, failure, region.attempt)
            await anyio.sleep(delay_ms / 1000)
            try:
                task = self._rebuild(region)
            except Exception as exc:  # building the next attempt failed: that attempt failed
                failure = exc
                continue
            failure = await self._attempt(region, task)
        finished[region.index].set()
        for key, j in region.inputs:  # its only consumer has finished with them
            ex.results[key][j][region.sub].release()

    async def _attempt(self, region: _Region, task: Task) -> Exception | None:
        """Run ``task`` with its inputs fed from the upstream results; its failure, or None.

        The failure is the first in time: a feed that fails cancels the task, but the task may
        go on with what its channels hold (it awaits nothing while they do) and fail as well
        before the cancellation lands; the group then lists the task's error first. The others
        of the attempt are noted on it (logged with it), never dropped."""
        ex = self.execution
        task.scheduled = True
        failures: list[Exception] = []

        async def recorded(run: Callable[[], Awaitable[None]]) -> None:
            try:
                await run()
            except Exception as exc:
                failures.append(exc)
                raise

        try:
            async with anyio.create_task_group() as tg:
                gate = getattr(task, "gate", None)  # (a source task has none, nor inputs)
                for (key, j), channel in zip(region.inputs, gate.channels if gate else (), strict=True):
                    result: BlockingResult = ex.results[key][j][region.sub]
                    tg.start_soon(recorded, partial(result.feed, channel), name=f"feed {channel.name}")
                await recorded(task.run)
        except BaseExceptionGroup as group:
            error = primary_error(group)
            if not isinstance(error, Exception):  # cancelled: the job ends, not the region
                raise error from None
            if failures:
                error = failures[0]
                for other in failures[1:]:
                    error.add_note(f"streamflow: also failed in the same attempt: {other!r}")
            return error
        return None

    def _rebuild(self, region: _Region) -> Task:
        """A fresh task for the region's next attempt (module doc: failover)."""
        ex = self.execution
        nodes, sub = ex.task_slots[region.index]
        region.attempt += 1
        for key, j in region.inputs:
            old = ex.edge_channels[key][j][sub]
            assert old is not None
            ex.channels.remove(old)
            ex.edge_channels[key][j][sub] = ex.new_channel(old.name)
        for key in region.outputs:
            row = ex.results[key][sub]
            for result in row:
                if result is not None:
                    result.release()  # the failed attempt's partial output
            budget = ex.result_budget  # the same edge's codec (its records codec and pickle opt-in)
            ex.results[key][sub] = [
                None if r is None else BlockingResult(r.name, budget, r.codec) for r in row
            ]
        task = ex.build_task(nodes, sub, ex.edge_channels, ex.results, attempt=region.attempt)
        task.scheduled = False
        ex.tasks[region.index] = task
        _log.info(
            "%s: restarting its pipelined region (attempt %d), reading the complete results of %d "
            "upstream subtask(s) again", task.name, region.attempt, len(region.producers),
        )  # fmt: skip
        return task
