"""Event-time windows with allowed lateness resumed from savepoints that switch the state
backend (heap <-> RocksDB) between the on-time firing, the late firings and the cleanup.

Flink's savepoints are canonical (``SavepointFormatITCase``; ``TimersSavepointITCase``'s
switch): a job resumes with the other backend and its WindowOperator makes every firing it
would have made without the switch, exactly once. The rules (``WindowOperator``,
``EventTimeTrigger``): a window fires once when the watermark passes ``max_timestamp()``; an
element within the allowed lateness fires it again at once if the watermark passed its end,
else (after a restore the operator's watermark starts at MIN) registers a timer at
``max_timestamp()`` that fires it at the next watermark; the cleanup timer at
``max_timestamp() + lateness`` clears its state, so an element for that window after a later
restore starts a new window. The heap runs tumbling windows on the fast path (panes with
implied timers and ``fired``/``refire`` bookkeeping), RocksDB on the general path (real
timers), so each switch converts one into the other.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_checkpointing import Gate, wait_until

import streamflow as sf
from streamflow.common import Types
from streamflow.datastream.functions import ProcessWindowFunction
from streamflow.datastream.state import ValueStateDescriptor
from streamflow.datastream.window import (
    ContinuousEventTimeTrigger,
    CountTrigger,
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from streamflow.eventtime import WatermarkGenerator
from streamflow.runtime.events import Watermark

# (key, value, timestamp, watermark emitted after it or None)
RECORDS = [
    ("a", 1, 10, None),
    ("b", 2, 20, None),
    ("a", 3, 110, 105),  # [0,100) fires on time for a and b
    ("a", 4, 50, None),  # late within lateness: a's [0,100) fires again at once
    # -- savepoint 1
    ("b", 5, 60, None),  # the watermark is MIN after the restore: a timer at 99 for b
    # -- savepoint 2 (b's late firing pending)
    ("a", 6, 120, 115),  # b's [0,100) fires (late firing); a's does not
    ("a", 7, 30, None),  # late within lateness: a's [0,100) fires at once
    # -- savepoint 3
    ("b", 8, 40, None),  # a timer at 99 for b again
    ("a", 9, 210, 160),  # b's [0,100) fires, then [0,100) is cleaned up (149) for a and b
    ("a", 10, 70, None),  # past the cleanup: dropped
    # -- savepoint 4
    ("a", 11, 70, None),  # the watermark is MIN again: a new [0,100) window for a
    ("a", 12, 300, 300),  # fires it, then a's [100,200) and [200,300)
]
STOPS = [4, 5, 7, 10]
EXPECTED = [
    ("a", 0, 1, 1),
    ("b", 0, 1, 2),
    ("a", 0, 2, 5),
    ("b", 0, 2, 7),
    ("a", 0, 3, 12),
    ("b", 0, 3, 15),
    ("a", 0, 1, 11),
    ("a", 100, 2, 9),
    ("a", 200, 1, 9),
    ("a", 300, 1, 12),  # at the end of the input
]
PER_PHASE = [3, 0, 2, 1, 4]  # firings in each job


class Punctuated(WatermarkGenerator):
    def on_event(self, event: Any, ts: int, output: Any) -> None:
        if event[3] is not None:
            output.emit_watermark(Watermark(event[3]))

    def on_periodic_emit(self, output: Any) -> None:
        pass


def count_and_sum(key: str, window: Any, inputs: Any) -> Any:
    values = [r[1] for r in inputs]
    yield (key, window.start, len(values), sum(values))


def tumbling(keyed: Any) -> Any:
    return keyed.window(TumblingEventTimeWindows.of(100)).allowed_lateness(50).apply(count_and_sum)


async def run_phase(
    directory: Path,
    backend: str,
    stop: int | None,
    restore: str | None,
    fired: int | None,
    build: Callable[[Any], Any] = tumbling,
    parallelism: int = 1,
) -> tuple[list, str]:
    """One job up to record ``stop`` (to the end if None): waits until its source reached the
    gate (and for ``fired`` results, if given), takes a savepoint and cancels; the results and
    the savepoint. No fixed wait: the savepoint's barrier follows every record before the gate
    and every firing they caused (the watermarks are in-band), so a savepoint that completed has
    all of them in the sink's list (a fixed 0.3-0.6 s wait before, 6 s of each scenario test)."""
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    if backend == "rocksdb":
        env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    env.enable_checkpointing(60_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir(directory / "chk")
    if restore is not None:
        env.configure({"execution.savepoint.path": restore})
    out: list = []
    gate = Gate(RECORDS, len(RECORDS) if stop is None else stop)
    strategy = sf.WatermarkStrategy.for_generator(Punctuated).with_timestamp_assigner(lambda r, _: r[2])
    keyed = (
        env.from_async_iterable(gate.__aiter__)
        .uid("src")
        .set_parallelism(1)
        .assign_timestamps_and_watermarks(strategy)
        .uid("wm")
        .set_parallelism(1)
        .key_by(lambda r: r[0])
    )
    build(keyed).uid("window").add_sink(out.append)
    client = await env.execute_async("lateness switch")
    if stop is None:
        await client.get_job_execution_result()
        return out, ""
    await asyncio.wait_for(gate.reached.wait(), 20)
    if fired is not None:
        await wait_until(lambda: len(out) >= fired, timeout=20.0)
    path = await asyncio.wait_for(client.trigger_savepoint(str(directory / f"sp{stop}")), 30)
    await asyncio.wait_for(client.cancel(), 30)
    try:
        await client.get_job_execution_result()
    except BaseException:  # cancelled on purpose
        pass
    return out, path


@pytest.mark.parametrize(
    "backends",
    [
        ["heap"] * 5,
        ["rocksdb"] * 5,
        ["heap", "rocksdb", "heap", "rocksdb", "heap"],
        ["rocksdb", "heap", "rocksdb", "heap", "rocksdb"],
    ],
    ids=["heap", "rocksdb", "heap-first", "rocksdb-first"],
)
@pytest.mark.parametrize("parallelisms", [[1] * 5, [1, 3, 2, 4, 1]], ids=["p1", "rescaled"])
async def test_every_firing_once_across_backend_switches(
    tmp_path: Path, backends: list[str], parallelisms: list[int]
) -> None:
    """Each job fires exactly what Flink's WindowOperator fires (``EXPECTED``, ``PER_PHASE``),
    whatever backend each job runs on, and with the window operator rescaled at each resume
    (its keys' windows, timers and fired/refire bookkeeping split and merged by key group)."""
    restore: str | None = None
    out: list = []
    stops: list[int | None] = [*STOPS, None]
    for phase, (backend, stop) in enumerate(zip(backends, stops, strict=True)):
        emitted, restore = await run_phase(
            tmp_path, backend, stop, restore, PER_PHASE[phase], parallelism=parallelisms[phase]
        )
        assert len(emitted) == PER_PHASE[phase], f"job {phase + 1} ({backend}) fired {emitted}"
        out += emitted
    assert sorted(out) == sorted(EXPECTED)


class FiringsPerWindow(ProcessWindowFunction):
    """Counts each window's firings in per-window state (``context.window_state()``) and the
    key's in global state; ``clears``: clears the window's at its cleanup (general path)."""

    def __init__(self, clears: bool, per_window: bool = True) -> None:
        self.clears, self.per_window = clears, per_window

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        values = [r[1] for r in elements]
        mine = 0
        if self.per_window:  # (merging windows have none, as in Flink)
            state = context.window_state().get_state(ValueStateDescriptor("firings", Types.INT()))
            state.update(mine := (state.value() or 0) + 1)
        total = context.global_state().get_state(ValueStateDescriptor("all", Types.INT()))
        total.update((total.value() or 0) + 1)
        yield (key, context.window().start, len(values), sum(values), mine, total.value())

    def clear(self, context: Any) -> None:
        if self.clears and self.per_window:
            context.window_state().get_state(ValueStateDescriptor("firings", Types.INT())).clear()


class PlainFirings(FiringsPerWindow):
    clear = ProcessWindowFunction.clear  # type: ignore[assignment]  # the fast path applies


SCENARIOS: dict[str, Callable[[Any], Any]] = {
    "sliding": lambda k: (
        k.window(SlidingEventTimeWindows.of(100, 50)).allowed_lateness(50).apply(count_and_sum)
    ),
    "session": lambda k: (
        k.window(EventTimeSessionWindows.with_gap(30)).allowed_lateness(50).apply(count_and_sum)
    ),
    "window-state": lambda k: (
        k.window(TumblingEventTimeWindows.of(100)).allowed_lateness(50).process(PlainFirings(False))
    ),
    "window-state-cleared": lambda k: (
        k.window(TumblingEventTimeWindows.of(100)).allowed_lateness(50).process(FiringsPerWindow(True))
    ),
    "session-global-state": lambda k: (
        k.window(EventTimeSessionWindows.with_gap(30))
        .allowed_lateness(50)
        .process(FiringsPerWindow(True, per_window=False))
    ),
    "count-trigger": lambda k: (
        k.window(TumblingEventTimeWindows.of(100))
        .allowed_lateness(50)
        .trigger(CountTrigger.of(2))
        .apply(count_and_sum)
    ),
    "continuous-trigger": lambda k: (
        k.window(TumblingEventTimeWindows.of(100))
        .allowed_lateness(50)
        .trigger(ContinuousEventTimeTrigger.of(40))
        .apply(count_and_sum)
    ),
    "session-continuous-trigger": lambda k: (  # the trigger's reducing state merges with the windows
        k.window(EventTimeSessionWindows.with_gap(30))
        .allowed_lateness(50)
        .trigger(ContinuousEventTimeTrigger.of(20))
        .apply(count_and_sum)
    ),
    "count-window": lambda k: k.count_window(2).apply(count_and_sum_global),
    "sliding-count-window": lambda k: k.count_window(3, 2).apply(count_and_sum_global),
}


def count_and_sum_global(key: str, window: Any, inputs: Any) -> Any:
    values = [r[1] for r in inputs]
    yield (key, len(values), sum(values))


async def run_jobs(
    directory: Path, backends: list[str], build: Callable[[Any], Any], fired: list | None
) -> list:
    """The five jobs, each resumed from the previous one's savepoint: each job's sorted
    results (``fired``: the results to wait for per job, else each job runs a while)."""
    stops: list[int | None] = [*STOPS, None]
    restore: str | None = None
    out = []
    for phase, (backend, stop) in enumerate(zip(backends, stops, strict=True)):
        wait = None if fired is None else len(fired[phase])
        emitted, restore = await run_phase(directory, backend, stop, restore, wait, build)
        out.append(sorted(emitted))
    return out


# the suite runs three (merging windows with trigger state, per-window state on the heap's fast
# path, count windows: ~6 s each, 20 jobs); STREAMFLOW_BACKEND_SWITCH_SCENARIOS=all runs every one
IN_SUITE = ["session-continuous-trigger", "window-state", "sliding-count-window"]
RUN = list(SCENARIOS) if os.environ.get("STREAMFLOW_BACKEND_SWITCH_SCENARIOS") == "all" else IN_SUITE


@pytest.mark.parametrize("scenario", RUN)
async def test_switching_backends_fires_as_one_backend_does(tmp_path: Path, scenario: str) -> None:
    """Sliding and session windows with lateness, per-window and global state of a
    ProcessWindowFunction (fast path on the heap when it does not clear), a CountTrigger's
    and a ContinuousEventTimeTrigger's state (merged with session windows), count windows:
    the same five jobs on the heap alone and on RocksDB alone fire the same, and so does
    each job of a run switching the backend at every savepoint (heap first, RocksDB first)."""
    build = SCENARIOS[scenario]
    heap = await run_jobs(tmp_path / "heap", ["heap"] * 5, build, None)
    rocksdb = await run_jobs(tmp_path / "rocksdb", ["rocksdb"] * 5, build, heap)
    assert rocksdb == heap
    for plan in (["heap", "rocksdb"] * 3)[:5], (["rocksdb", "heap"] * 3)[:5]:
        assert await run_jobs(tmp_path / f"{plan[0]}-first", plan, build, heap) == heap, plan


def fast_path(keyed: Any) -> Any:
    """The heap runs it on the fast path (its ProcessWindowFunction has no ``clear()``)."""
    return keyed.window(TumblingEventTimeWindows.of(100)).allowed_lateness(50).process(PlainFirings(False))


def general_path(keyed: Any) -> Any:
    """The same job with a ``clear()`` (that clears nothing): the general path."""
    return (
        keyed.window(TumblingEventTimeWindows.of(100)).allowed_lateness(50).process(FiringsPerWindow(False))
    )


@pytest.mark.parametrize("first", ["fast", "general"])
async def test_the_heap_switching_paths_fires_as_one_path_does(tmp_path: Path, first: str) -> None:
    """A job whose ProcessWindowFunction gains or loses a ``clear()`` between savepoints moves
    between the heap's fast path (panes, implied timers) and its general path (real timers):
    each job fires what the same job on one path fires, Flink's firings (``EXPECTED``). The
    fast path's panes restored on the general path had no timers (never fired, never cleaned
    up; a pending late firing lost)."""
    builds = {"fast": fast_path, "general": general_path}
    reference = await run_jobs(tmp_path / "ref", ["heap"] * 5, fast_path, None)
    assert sorted(r[:4] for job in reference for r in job) == sorted(EXPECTED)
    order = ([first, "general" if first == "fast" else "fast"] * 3)[:5]
    restore: str | None = None
    for phase, (path, stop) in enumerate(zip(order, [*STOPS, None], strict=True)):
        emitted, restore = await run_phase(
            tmp_path / "run", "heap", stop, restore, len(reference[phase]), builds[path]
        )
        assert sorted(emitted) == reference[phase], f"job {phase + 1} ({path} path)"
