"""An operator-level harness for :class:`WindowOperator` (Flink's KeyedOneInputStreamOperatorTestHarness).

A script is a list of steps: ``("e", key, value, ts)`` processes one element,
``("b", [(key, value, ts), ...])`` several elements in one batch, ``("w", ts)`` one
watermark, ``("snap",)`` snapshots the operator, encodes the snapshot with the state codec
and restores it into a fresh operator (Flink's
``snapshot``/``close``/``restore``/``open``). :func:`run_script` returns, per
step, what the operator emitted: main records as ``(value, ts)``, late records
as ``("late", value, ts)`` and watermarks as ``("wm", ts)``; records between two
watermarks are sorted, as Flink's ``assertOutputEqualsSorted`` does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from streamflow.functions import AggregateFunction
from streamflow.runtime.context import OperatorContext
from streamflow.runtime.events import Watermark, WatermarkStatus
from streamflow.runtime.metrics import MetricGroup
from streamflow.runtime.operator import BatchTarget, Output
from streamflow.runtime.processing_time import ProcessingTimeService
from streamflow.runtime.window_context import WindowFunctions
from streamflow.runtime.window_operator import WindowOperator
from streamflow.state import codec
from streamflow.state.keyed import KeyedStateBackend
from streamflow.testing import ManualClock
from streamflow.windowing.assigners import WindowAssigner
from streamflow.windowing.evictors import Evictor
from streamflow.windowing.triggers import Trigger

LATE = "late"
MAX_PARALLELISM = 128

Step = tuple[Any, ...]


class Recorder(BatchTarget):
    def __init__(self, tag: str | None = None) -> None:
        self.tag = tag
        self.events: list[tuple] = []

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        assert timestamps is not None, "window results carry timestamps"
        for r, t in zip(records, timestamps, strict=True):
            self.events.append((r, t) if self.tag is None else (self.tag, r, t))

    async def process_watermark(self, watermark: Watermark) -> None:
        if self.tag is None:
            self.events.append(("wm", watermark.timestamp))

    async def process_watermark_status(self, status: WatermarkStatus) -> None:
        pass


class SumAggregate(AggregateFunction):
    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + value[1]

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, acc_a: int, acc_b: int) -> int:
        return acc_a + acc_b


def _sum_reduce(a: tuple, b: tuple) -> tuple:
    return (b[0], a[1] + b[1])  # Flink's SumReducer


def _window_process(key: Any, ctx: Any, elements: Any) -> list:
    w = ctx.window()
    return [(key, sum(e if isinstance(e, int) else e[1] for e in elements), w.start, w.end)]


def _pass_through(key: Any, ctx: Any, elements: Any) -> list:
    return [(key, sorted(e[1] for e in elements))]


#: Every way a window applies a function; each name maps to a fresh WindowFunctions.
FUNCTIONS: dict[str, Callable[[], WindowFunctions]] = {
    "reduce": lambda: WindowFunctions(reduce=_sum_reduce),
    "aggregate": lambda: WindowFunctions(aggregate=SumAggregate()),
    "process": lambda: WindowFunctions(process=_window_process),
    "process-list": lambda: WindowFunctions(process=_pass_through),
    "reduce+process": lambda: WindowFunctions(reduce=_sum_reduce, process=_window_process),
    "aggregate+process": lambda: WindowFunctions(aggregate=SumAggregate(), process=_window_process),
}


class WindowHarness:
    def __init__(
        self,
        assigner: WindowAssigner,
        functions: Callable[[], WindowFunctions],
        *,
        lateness: int = 0,
        trigger: Trigger | None = None,
        evictor: Evictor | None = None,
        fast: bool | None = None,
    ) -> None:
        self.assigner, self.functions, self.lateness = assigner, functions, lateness
        self.trigger, self.evictor, self.fast = trigger, evictor, fast
        self.clock = ManualClock(0)
        self.main, self.late = Recorder(), Recorder(LATE)
        self.op = self._new_operator(None)

    def _new_operator(self, restored: Any) -> WindowOperator:
        op = WindowOperator(
            "Window",
            lambda e: e[0],
            self.assigner,
            self.trigger,
            self.evictor,
            self.lateness,
            LATE,
            self.functions(),
        )
        if self.fast is not None:
            if self.fast:
                assert op.fast, "this scenario is not eligible for the fast path"
            op.fast = self.fast  # force the general path for the same assigner and trigger
        ctx = OperatorContext(
            uid="window",
            name="Window",
            task_name="Window",
            subtask_index=0,
            parallelism=1,
            max_parallelism=MAX_PARALLELISM,
            clock=self.clock,
            metrics=MetricGroup("window[0]", {}),
            processing_time=ProcessingTimeService(self.clock, lambda: None),
            keyed_backend=KeyedStateBackend(MAX_PARALLELISM),
        )
        op.setup(ctx, Output([self.main], {LATE: [self.late]}))
        op.initialize_state(restored)
        return op

    async def step(self, step: Step) -> list[tuple]:
        before_main, before_late = len(self.main.events), len(self.late.events)
        kind = step[0]
        if kind == "e":
            _, key, value, ts = step
            await self.op.process_batch([(key, value)], [ts])
        elif kind == "b":
            await self.op.process_batch([(k, v) for k, v, _ in step[1]], [ts for _, _, ts in step[1]])
        elif kind == "w":
            await self.op.process_watermark(Watermark(step[1]))
        elif kind == "snap":
            from streamflow.checkpoint.restore import OperatorRestore

            state = codec.decode(codec.encode(self.op.snapshot_state(1)))
            await self.op.close()
            self.op = self._new_operator(OperatorRestore(state, [state], range(MAX_PARALLELISM)))
            await self.op.open()
        else:
            raise ValueError(f"unknown step {step!r}")
        return _sorted_between_watermarks(self.main.events[before_main:] + self.late.events[before_late:])

    async def run(self, script: list[Step]) -> list[list[tuple]]:
        await self.op.open()
        out = [await self.step(s) for s in script]
        await self.op.close()
        return out


def _sorted_between_watermarks(events: list[tuple]) -> list[tuple]:
    out: list[tuple] = []
    run: list[tuple] = []
    for ev in events:
        if ev[0] == "wm":
            out.extend(sorted(run, key=repr))
            out.append(ev)
            run = []
        else:
            run.append(ev)
    return out + sorted(run, key=repr)


async def run_script(
    harness: WindowHarness, script: list[Step], timeout_s: float = 10.0
) -> list[list[tuple]]:
    return await asyncio.wait_for(harness.run(script), timeout_s)
