"""One path from the API to an operator: every operator kind gets per-subtask copies of the
user's objects through OperatorFactory (issue 8, item 2), and a factory cannot bypass it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

import streamflow as sf
from streamflow.runtime.basic_operators import MapOperator
from streamflow.runtime.execution import Execution, RuntimeConfig
from streamflow.runtime.factory import OperatorFactory
from streamflow.windowing import CountEvictor, CountTrigger, GlobalWindows, TumblingEventTimeWindows


class Fn(
    sf.MapFunction,
    sf.FlatMapFunction,
    sf.FilterFunction,
    sf.ProcessFunction,
    sf.KeyedProcessFunction,
    sf.ReduceFunction,
    sf.ProcessWindowFunction,
    sf.WindowFunction,
    sf.CoMapFunction,
    sf.CoFlatMapFunction,
    sf.KeyedCoProcessFunction,
    sf.SinkFunction,
):
    """Every function interface at once, so one object fits every API method."""

    def invoke(self, value: Any) -> None:  # (a SinkFunction must write something: sink_to() checks)
        pass


class Agg(sf.AggregateFunction):
    pass


def _key(v: Any) -> Any:
    return v


def _keyed(e: sf.StreamExecutionEnvironment) -> sf.KeyedStream:
    return e.from_collection([1]).key_by(_key)


def _window(e: sf.StreamExecutionEnvironment) -> Any:
    return _keyed(e).window(TumblingEventTimeWindows.of(10))


BUILDERS: dict[str, Callable[[sf.StreamExecutionEnvironment, Any], Any]] = {
    "map": lambda e, f: e.from_collection([1]).map(f),
    "flat_map": lambda e, f: e.from_collection([1]).flat_map(f),
    "filter": lambda e, f: e.from_collection([1]).filter(f),
    "process": lambda e, f: e.from_collection([1]).process(f),
    "keyed map": lambda e, f: _keyed(e).map(f),
    "keyed flat_map": lambda e, f: _keyed(e).flat_map(f),
    "keyed filter": lambda e, f: _keyed(e).filter(f),
    "keyed process": lambda e, f: _keyed(e).process(f),
    "keyed reduce": lambda e, f: _keyed(e).reduce(f),
    "window reduce": lambda e, f: _window(e).reduce(f),
    "window reduce+process": lambda e, f: _window(e).reduce(f, f),
    "window aggregate+apply": lambda e, f: _window(e).aggregate(Agg(), f),
    "window process": lambda e, f: _window(e).process(f),
    "window apply": lambda e, f: _window(e).apply(f),
    "window evictor": lambda e, f: (
        _keyed(e)
        .window(GlobalWindows.create())
        .trigger(CountTrigger.of(2))
        .evictor(CountEvictor.of(1))
        .process(f)
    ),
    "co-map": lambda e, f: e.from_collection([1]).connect(e.from_collection([2])).map(f),
    "co-flat_map": lambda e, f: e.from_collection([1]).connect(e.from_collection([2])).flat_map(f),
    "co-process": lambda e, f: e.from_collection([1]).connect(e.from_collection([2])).process(f),
    "keyed co-process": lambda e, f: _keyed(e).connect(_keyed(e)).process(f),
    "sink": lambda e, f: e.from_collection([1]).sink_to(f),
}


def _operators(build: Callable[[sf.StreamExecutionEnvironment, Any], Any], fn: Any) -> list[Any]:
    e = sf.StreamExecutionEnvironment().set_parallelism(3)
    out = build(e, fn)
    if not isinstance(out, sf.DataStreamSink):
        out.sink_to(sf.CollectSink())
    execution = Execution("t", e.get_job_graph(), RuntimeConfig(), e.clock)
    return [
        [op for (node_id, sub), op in sorted(execution.operators.items()) if sub == s and op.functions]
        for s in range(3)
    ]


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_every_operator_kind_copies_user_functions_per_subtask(kind: str) -> None:
    fn = Fn()
    per_subtask = _operators(BUILDERS[kind], fn)
    user_fns = [[f for op in ops for f in op.functions if isinstance(f, Fn)] for ops in per_subtask]
    assert all(user_fns), f"{kind}: an operator does not declare its user function"
    assert all(f is fn for f in user_fns[0])  # subtask 0 runs the user's own object
    seen = {id(fn)}
    for fns in user_fns[1:]:
        assert len({id(f) for f in fns}) == 1  # one copy per subtask, shared within it
        assert id(fns[0]) not in seen
        seen.add(id(fns[0]))


def test_a_factory_that_bypasses_the_copy_is_refused() -> None:
    fn = Fn()
    sneaky = OperatorFactory("Map", lambda f: MapOperator("Map", fn), fn)
    assert sneaky.create(0).functions == (fn,)
    with pytest.raises(AssertionError, match="build\\(\\) must take its user objects as arguments"):
        sneaky.create(1)


class Locked(sf.MapFunction):
    def __init__(self) -> None:
        self.lock = threading.Lock()

    def map(self, value: Any) -> Any:
        return value


def test_an_uncopyable_function_is_shared_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    fn = Locked()
    factory = OperatorFactory("Map", lambda f: MapOperator("Map", f), fn)
    with caplog.at_level(logging.WARNING, logger="streamflow.runtime.factory"):
        op = factory.create(1)
    assert op.functions == (fn,)
    assert "cannot copy" in caplog.text and "Locked" in caplog.text


class CountsInSelf(sf.MapFunction):
    """Keeps a plain counter in ``self`` (not in state) and fails once at record 5."""

    opened_with: list[int] = []
    failed = False

    def __init__(self) -> None:
        self.seen = 0

    def open(self, runtime_context: sf.RuntimeContext) -> None:
        CountsInSelf.opened_with.append(self.seen)

    def map(self, value: int) -> int:
        self.seen += 1
        if value == 5 and not CountsInSelf.failed:
            CountsInSelf.failed = True
            raise RuntimeError("injected failure")
        return value


def test_a_restarted_execution_gets_fresh_copies_not_the_failed_attempts_objects() -> None:
    CountsInSelf.opened_with, CountsInSelf.failed = [], False
    e = sf.StreamExecutionEnvironment().set_batch_size(1)
    e.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(1, 0))
    sink = sf.CollectSink()
    e.from_collection(list(range(10))).map(CountsInSelf()).sink_to(sink)
    result = e.execute("restart")
    assert result.metrics["job.numRestarts"] == 1
    # as a Flink subtask deserializes its function again on failover: the counter starts over
    assert CountsInSelf.opened_with == [0, 0]
    assert sink.results[-5:] == [5, 6, 7, 8, 9]
