"""Running keyed-state scenarios through the public API on both backends (heap and RocksDB),
for the ports of Flink's StateBackendTestBase (tests/test_state_backend_flink*.py).

:func:`run_steps` runs one job at parallelism 1 whose keyed function holds one state of each
kind and performs step ``i`` (a callable on those states) under the step's key, in order; each
step's result (or the exception it raised) is returned. :func:`savepoint_then_restore` writes
state at one parallelism, takes a savepoint, and reads it back at another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_checkpointing import Gate, wait_until

import streamflow as sf
from streamflow.common import Time, Types
from streamflow.datastream import EmbeddedRocksDBStateBackend
from streamflow.datastream.functions import AggregateFunction, KeyedProcessFunction
from streamflow.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from streamflow.state.key_groups import key_group_of, subtask_of_key_group
from streamflow.testing import ListSink

BACKENDS = ["heap", "rocksdb"]


class Average(AggregateFunction):
    """Flink's test aggregate, reduced: the running sum and count, read as their ratio."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value, accumulator[1] + 1)

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


def descriptors() -> dict[str, Any]:
    return {
        "value": ValueStateDescriptor("value", Types.INT()),
        "default": ValueStateDescriptor("default", Types.INT(), 42),
        "list": ListStateDescriptor("list", Types.INT()),
        "map": MapStateDescriptor("map", Types.INT(), Types.STRING()),
        "reducing": ReducingStateDescriptor("reducing", lambda a, b: a + b, Types.INT()),
        "aggregating": AggregatingStateDescriptor(
            "aggregating", Average(), Types.TUPLE([Types.INT(), Types.INT()])
        ),
    }


def open_states(ctx: Any, which: dict[str, Any]) -> dict[str, Any]:
    getters = {
        "value": ctx.get_state,
        "list": ctx.get_list_state,
        "map": ctx.get_map_state,
        "reducing": ctx.get_reducing_state,
        "aggregating": ctx.get_aggregating_state,
    }
    return {name: getters[d.kind](d) for name, d in which.items()}


def set_backend(env: sf.StreamExecutionEnvironment, backend: str, tmp_path: Path) -> None:
    if backend == "rocksdb":
        env.set_state_backend(
            EmbeddedRocksDBStateBackend(local_dir=str(tmp_path / "db"), cache_entries=3, flush_entries=2)
        )


class Raised:
    """What a step raised: its type and message."""

    def __init__(self, exc: BaseException) -> None:
        self.type, self.message = type(exc), str(exc)

    def __repr__(self) -> str:
        return f"Raised({self.type.__name__}: {self.message})"


Step = tuple[Any, Callable[[dict[str, Any]], Any]]


class _Script(KeyedProcessFunction):
    def __init__(self, steps: list[Step], ttl: bool = False) -> None:
        self.steps, self.ttl = steps, ttl

    def open(self, runtime_context: Any) -> None:
        which = descriptors()
        if self.ttl:  # a TTL far longer than the job: every state is a TTL state that never expires
            config = StateTtlConfig.new_builder(Time.hours(1)).build()
            for d in which.values():
                d.enable_time_to_live(config)
        self.states = open_states(runtime_context, which)

    def process_element(self, value, ctx):
        _key, i = value
        try:
            result = self.steps[i][1](self.states)
        except Exception as exc:
            result = Raised(exc)
        yield i, result


def run_steps(backend: str, tmp_path: Path, steps: list[Step], ttl: bool = False) -> list[Any]:
    """Step ``i`` runs under key ``steps[i][0]``; its result, or :class:`Raised`. With ``ttl``
    every state has a time-to-live."""
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    set_backend(env, backend, tmp_path)
    sink = ListSink()
    records = [(key, i) for i, (key, _) in enumerate(steps)]
    env.from_collection(records).key_by(lambda r: r[0]).process(_Script(steps, ttl)).sink_to(sink)
    env.execute("state-backend-steps")
    return [result for _i, result in sorted(sink.results, key=lambda r: r[0])]


def owner(key: Any, parallelism: int, max_parallelism: int = 128) -> int:
    """The subtask that owns ``key``'s key group (Flink's KeyGroupRangeAssignment)."""
    return subtask_of_key_group(key_group_of(key, max_parallelism), max_parallelism, parallelism)


async def savepoint_then_restore(
    tmp_path: Path,
    before: tuple[int, str],
    after: tuple[int, str],
    function: Callable[[], Any],
    writes: list[Any],
    reads: list[Any],
    key: Callable[[Any], Any],
    max_parallelism: tuple[int | None, int | None] = (None, None),
) -> list[Any]:
    """Run ``function`` on ``writes`` at ``before = (parallelism, backend)`` (one output per
    record), take a savepoint, cancel; run it again at ``after`` from the savepoint: the source
    resumes with ``reads``. Returns the outputs of the second run. ``max_parallelism``: set on
    the first and the second environment (None: not set)."""
    data = writes + reads
    gate = Gate(data, len(writes))
    env = sf.StreamExecutionEnvironment().set_parallelism(before[0])
    if max_parallelism[0] is not None:
        env.set_max_parallelism(max_parallelism[0])
    set_backend(env, before[1], tmp_path)
    out1: list = []
    env.from_async_iterable(gate.__aiter__).uid("src").key_by(key).process(function()).uid("fn").add_sink(
        out1.append
    )
    client = await env.execute_async("state-backend")
    await wait_until(lambda: len(out1) == len(writes), timeout=30)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)

    env2 = sf.StreamExecutionEnvironment().set_parallelism(after[0])
    if max_parallelism[1] is not None:
        env2.set_max_parallelism(max_parallelism[1])
    set_backend(env2, after[1], tmp_path / "after")
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    env2.from_collection(data).uid("src").key_by(key).process(function()).uid("fn").add_sink(out2.append)
    await (await env2.execute_async("state-backend")).get_job_execution_result()
    return out2


backend_param = pytest.mark.parametrize("backend", BACKENDS)
