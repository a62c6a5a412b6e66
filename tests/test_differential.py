"""Results do not depend on parallelism: every operator kind at parallelism 1 and 4.

Each row builds the same pipeline twice from scripted sources (parallelism 1,
in timestamp order, with watermarks between the records, so nothing is late)
and runs it at parallelism 1 and at 4. The outputs must be the same multiset;
where Flink promises an order (records of one key through a keyed operator,
fed by one source subtask) the per-key sequences must be equal too.

The user functions are written as PyFlink users write them: state handles
taken in ``open()`` and kept on ``self``, ``yield`` in process functions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from stable_ids import stable_repr  # tests/stable_ids.py

import streamflow as sf
from streamflow.state.key_groups import stable_hash
from streamflow.state.keyed import KeyedStateBackend
from streamflow.testing import ListSink, ManualClock, Record, ScriptedSource
from streamflow.windowing import (
    CountEvictor,
    EventTimeSessionWindows,
    ProcessingTimeSessionWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)

KEYS = ["a", "b", "c", "d", "e", "f", "g"]


def script(n: int = 56, keys: list[Any] = KEYS, salt: int = 0) -> list[Any]:
    """Records (key, value, ts), ts strictly increasing, a watermark after every 8 records."""
    items: list[Any] = []
    for i in range(n):
        ts = 3 * i + salt
        items.append(Record((keys[(i * 5 + salt) % len(keys)], (i * 37 + salt) % 11, ts), ts))
        if i % 8 == 7:
            items.append(sf.Watermark(ts))
    return items


def source(env: sf.StreamExecutionEnvironment, salt: int = 0, keys: list[Any] = KEYS) -> sf.DataStream:
    return env.from_source(ScriptedSource(script(keys=keys, salt=salt)), None, f"scripted-{salt}")


def key0(r: tuple) -> Any:
    return r[0]


# -- user functions, PyFlink style -------------------------------------------------------------


class CountPerKey(sf.KeyedProcessFunction):
    """Running count per key in ValueState (handle kept on self); an event-time timer 5 ms
    after each record reports the count at that time."""

    def open(self, runtime_context: sf.RuntimeContext) -> None:
        self.count = runtime_context.get_state(sf.ValueStateDescriptor("count"))

    def process_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 5)
        yield (value[0], "seen", n)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Any]:
        yield (ctx.get_current_key(), "timer", timestamp, self.count.value())


class CountPerKeyReturning(CountPerKey):
    """The same, returning lists (no generator)."""

    def process_element(self, value: Any, ctx: Any) -> list:  # type: ignore[override]
        return list(super().process_element(value, ctx))

    def on_timer(self, timestamp: int, ctx: Any) -> list:  # type: ignore[override]
        return list(super().on_timer(timestamp, ctx))


class Tagged(sf.ProcessFunction):
    ODD = sf.OutputTag("odd")

    def process_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        if value[1] % 2:
            yield (self.ODD, ("odd", value[0], value[1]))
        else:
            yield ("even", value[0], value[1], ctx.timestamp())


class Sum(sf.AggregateFunction):
    """(key, sum, count): the key leads, so per-key order can be compared."""

    def create_accumulator(self) -> tuple[Any, int, int]:
        return (None, 0, 0)

    def add(self, value: Any, acc: tuple[Any, int, int]) -> tuple[Any, int, int]:
        return (value[0], acc[1] + value[1], acc[2] + 1)

    def get_result(self, acc: tuple[Any, int, int]) -> tuple[Any, int, int]:
        return acc

    def merge(self, a: tuple[Any, int, int], b: tuple[Any, int, int]) -> tuple[Any, int, int]:
        return (a[0] if a[0] is not None else b[0], a[1] + b[1], a[2] + b[2])


class WindowSummary(sf.ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Iterator[Any]:
        w = context.window()
        items = list(elements)
        yield (key, getattr(w, "start", None), getattr(w, "end", None), len(items), repr(items))


def apply_fn(key: Any, window: Any, inputs: Any) -> list:
    return [(key, window.start, window.end, sorted(i[1] for i in inputs))]


def add(a: tuple, b: tuple) -> tuple:
    return (a[0], a[1] + b[1], max(a[2], b[2]))


class Join(sf.KeyedCoProcessFunction):
    """Keyed co-process, state handles on self (the issue's failing pattern). The two inputs
    interleave in no promised order, so each side keeps its own running total."""

    def open(self, runtime_context: sf.RuntimeContext) -> None:
        self.left = runtime_context.get_state(sf.ValueStateDescriptor("left"))
        self.right = runtime_context.get_state(sf.ValueStateDescriptor("right"))

    def process_element1(self, value: Any, ctx: Any) -> Iterator[Any]:
        t = (self.left.value() or 0) + value[1]
        self.left.update(t)
        yield ("left", value[0], t)

    def process_element2(self, value: Any, ctx: Any) -> Iterator[Any]:
        t = (self.right.value() or 0) + value[1]
        self.right.update(t)
        yield ("right", value[0], t)


class CoMap(sf.CoMapFunction):
    def map1(self, value: Any) -> Any:
        return ("one", value[0], value[1])

    def map2(self, value: Any) -> Any:
        return ("two", value[0], value[1] * 10)


class CoFlatMap(sf.CoFlatMapFunction):
    def flat_map1(self, value: Any) -> Iterator[Any]:
        yield from [("one", value[0])] * (value[1] % 3)

    def flat_map2(self, value: Any) -> Iterator[Any]:
        yield ("two", value[0], value[2])


class CoProcess(sf.CoProcessFunction):
    def process_element1(self, value: Any, ctx: Any) -> Iterator[Any]:
        yield ("one", value[0], ctx.timestamp())

    def process_element2(self, value: Any, ctx: Any) -> Iterator[Any]:
        yield ("two", value[0], ctx.timestamp())


# -- the table ---------------------------------------------------------------------------------

Build = Callable[[sf.StreamExecutionEnvironment], list[sf.DataStream]]


def windowed(assigner: Any) -> Callable[[sf.StreamExecutionEnvironment], Any]:
    return lambda env: source(env).key_by(key0).window(assigner)


TUMBLING = TumblingEventTimeWindows.of(20)
SLIDING = SlidingEventTimeWindows.of(30, 10)
SESSION = EventTimeSessionWindows.with_gap(20)


def _keyed_reductions() -> dict[str, tuple[Build, bool]]:
    rows: dict[str, tuple[Build, bool]] = {}
    for kind in ("sum", "min", "max", "min_by", "max_by"):
        rows[kind] = (lambda env, k=kind: [getattr(source(env).key_by(key0), k)(1)], True)
    return rows


def _windows() -> dict[str, tuple[Build, bool]]:
    rows: dict[str, tuple[Build, bool]] = {}
    for wname, assigner in (("tumbling", TUMBLING), ("sliding", SLIDING), ("session", SESSION)):
        w = windowed(assigner)
        rows[f"{wname}-reduce"] = (lambda env, w=w: [w(env).reduce(add)], True)
        rows[f"{wname}-aggregate"] = (lambda env, w=w: [w(env).aggregate(Sum())], True)
        rows[f"{wname}-process"] = (lambda env, w=w: [w(env).process(WindowSummary())], True)
        rows[f"{wname}-apply"] = (lambda env, w=w: [w(env).apply(apply_fn)], True)
        rows[f"{wname}-reduce+process"] = (lambda env, w=w: [w(env).reduce(add, WindowSummary())], True)
        rows[f"{wname}-aggregate+process"] = (
            lambda env, w=w: [w(env).aggregate(Sum(), WindowSummary())],
            True,
        )
        rows[f"{wname}-evictor-process"] = (
            lambda env, w=w: [w(env).evictor(CountEvictor.of(2)).process(WindowSummary())],
            True,
        )
        rows[f"{wname}-evictor-reduce"] = (
            lambda env, w=w: [w(env).evictor(CountEvictor.of(2, do_evict_after=True)).reduce(add)],
            True,
        )
        rows[f"{wname}-lateness-side-output"] = (
            lambda env, w=w: [
                w(env).allowed_lateness(10).side_output_late_data(sf.OutputTag("late")).reduce(add)
            ],
            True,
        )
    rows["count-window-reduce"] = (lambda env: [source(env).key_by(key0).count_window(3).reduce(add)], True)
    rows["count-window-process"] = (
        lambda env: [source(env).key_by(key0).count_window(3).process(WindowSummary())],
        True,
    )
    rows["count-window-evictor-apply"] = (
        lambda env: [
            source(env)
            .key_by(key0)
            .count_window(4)
            .evictor(CountEvictor.of(2))
            .process(lambda key, ctx, els: [(key, [e[1] for e in els])])
        ],
        True,
    )
    return rows


def _side_outputs(env: sf.StreamExecutionEnvironment) -> list[sf.DataStream]:
    main = source(env).process(Tagged())
    return [main, main.get_side_output(Tagged.ODD)]


def _window_late_side(env: sf.StreamExecutionEnvironment) -> list[sf.DataStream]:
    late = sf.OutputTag("late")
    main = source(env).key_by(key0).window(TUMBLING).side_output_late_data(late).reduce(add)
    return [main, main.get_side_output(late)]


# name -> (build, keyed: per-key order is compared); the key of an output is its first field
ROWS: dict[str, tuple[Build, bool]] = {
    "map": (lambda env: [source(env).map(lambda r: (r[0], r[1] * 2))], False),
    "flat_map": (lambda env: [source(env).flat_map(lambda r: [r, r] if r[1] % 2 == 0 else [])], False),
    "filter": (lambda env: [source(env).filter(lambda r: r[1] > 4)], False),
    "process": (lambda env: [source(env).process(Tagged())], False),
    "side-outputs": (_side_outputs, False),
    "keyed-map-chain": (lambda env: [source(env).key_by(key0).map(lambda r: (r[0], r[1] + 1))], True),
    "keyed-process-timers-yield": (lambda env: [source(env).key_by(key0).process(CountPerKey())], True),
    "keyed-process-timers-return": (
        lambda env: [source(env).key_by(key0).process(CountPerKeyReturning())],
        True,
    ),
    "reduce": (lambda env: [source(env).key_by(key0).reduce(add)], True),
    **_keyed_reductions(),
    **_windows(),
    "window-late-side-output": (_window_late_side, False),
    "union": (lambda env: [source(env).union(source(env, salt=1)).map(lambda r: (r[0], r[1], r[2]))], False),
    # the two inputs of a union interleave in no promised order: a window makes the result final
    "union-keyed-window": (
        lambda env: [source(env).union(source(env, salt=1)).key_by(key0).window(TUMBLING).aggregate(Sum())],
        True,
    ),
    "connect-co-map": (lambda env: [source(env).connect(source(env, salt=1)).map(CoMap())], False),
    "connect-co-flat-map": (
        lambda env: [source(env).connect(source(env, salt=1)).flat_map(CoFlatMap())],
        False,
    ),
    "connect-co-process": (
        lambda env: [source(env).connect(source(env, salt=1)).process(CoProcess())],
        False,
    ),
    "connect-keyed-co-process": (
        lambda env: [source(env).key_by(key0).connect(source(env, salt=1).key_by(key0)).process(Join())],
        False,
    ),
    # keys equal in Python, hashed differently before (1, 1.0, True): one key either way
    "equal-keys-of-different-types": (
        lambda env: [source(env, keys=[1, 1.0, True, 2, 2.0, 0, 0.0, False, -0.0]).key_by(key0).sum(1)],
        False,
    ),
}


def run(build: Build, parallelism: int) -> list[list[Any]]:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    sinks = []
    for stream in build(env):
        sink = ListSink()
        stream.sink_to(sink)
        sinks.append(sink)
    env.execute(f"differential-p{parallelism}")
    return [list(s.results) for s in sinks]


def _per_key(results: list[Any]) -> dict[str, list[str]]:
    by_key: dict[str, list[str]] = defaultdict(list)
    for r in results:
        by_key[repr(r[0])].append(repr(r))
    return dict(by_key)


# Known failures whose outcome depends on how the subtasks' batches interleave: not strict
# (a strict mark would make the suite flaky); removed once their owner's fix lands.
KNOWN_NONDETERMINISTIC: dict[str, str] = {
    "connect-keyed-co-process": "issue 8 item 2 (corr-core): the co-function is shared by the subtasks, "
    "so the state handle kept on self belongs to the last subtask opened",
}


@pytest.mark.parametrize("name", list(ROWS))
def test_same_results_at_parallelism_1_and_4(name: str) -> None:
    build, keyed = ROWS[name]
    one, four = run(build, 1), run(build, 4)
    assert any(one), "the row produces output"
    for a, b in zip(one, four, strict=True):
        assert Counter(map(repr, a)) == Counter(map(repr, b))
        if keyed:
            assert _per_key(a) == _per_key(b)


class Colour(enum.IntEnum):
    RED = 1


class Name(enum.StrEnum):
    X = "x"


@dataclasses.dataclass(frozen=True)
class Point:
    x: Any
    y: Any


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1, 1.0),
        (True, 1),
        (True, 1.0),
        (0, -0.0),
        (False, 0.0),
        (2**40, float(2**40)),
        ((1, "a"), (1.0, "a")),
        ((True, (0, "b")), (1, (0.0, "b"))),
        (Colour.RED, 1),
        (Name.X, "x"),
        (Point(1, 2), Point(1.0, 2.0)),
    ],
    ids=stable_repr,
)
def test_keys_equal_in_python_share_a_key_group(a: Any, b: Any) -> None:
    assert a == b and hash(a) == hash(b)
    assert stable_hash(a) == stable_hash(b)


def test_unequal_numbers_keep_distinct_hashes() -> None:
    assert len({stable_hash(k) for k in (1, 2, 1.5, -1, 0.1, float("inf"), "1")}) == 7


def test_restore_key_type_check_treats_numbers_as_one_kind() -> None:
    backend = KeyedStateBackend(128)
    backend.restored_key_types = {"int"}  # as checkpoints before key kinds stored it
    backend.check_key_type(1.0, "'op'")  # 1.0 == 1: the same keys
    backend.restored_key_types = {"float"}
    backend.check_key_type(True, "'op'")
    backend.restored_key_types = {"number"}
    backend.check_key_type(7, "'op'")
    backend.restored_key_types = {"int"}
    with pytest.raises(TypeError, match="restored with keys of type int"):
        backend.check_key_type("1", "'op'")


# -- processing-time windows: the clock stands still while the input flows, then jumps -------

PT_WINDOWS = {
    "tumbling": TumblingProcessingTimeWindows.of(100),
    "sliding": SlidingProcessingTimeWindows.of(200, 100),
    "session": ProcessingTimeSessionWindows.with_gap(50),
}
PT_FUNCTIONS: dict[str, Callable[[Any], sf.DataStream]] = {
    "reduce": lambda ws: ws.reduce(add),
    "aggregate": lambda ws: ws.aggregate(Sum()),
    "process": lambda ws: ws.process(WindowSummary()),
    "evictor-process": lambda ws: ws.evictor(CountEvictor.of(2)).process(WindowSummary()),
}


async def run_processing_time(assigner: Any, apply: Callable[[Any], sf.DataStream], parallelism: int) -> list:
    clock = ManualClock(1_000)
    env = sf.StreamExecutionEnvironment(clock=clock).set_parallelism(parallelism)
    records = [item.value for item in script() if isinstance(item, Record)]
    seen: list[int] = []

    def count(r: Any) -> Any:
        seen.append(1)
        return r

    sink = ListSink()
    keyed = env.from_source(ScriptedSource(records, end=False), None, "scripted").key_by(key0).map(count)
    apply(keyed.key_by(key0).window(assigner)).sink_to(sink)
    client = await env.execute_async(f"processing-time-p{parallelism}")
    try:
        async with asyncio.timeout(30):
            while len(seen) < len(records):
                await asyncio.sleep(0.001)
        for _ in range(100):  # the last records reach the windows
            await asyncio.sleep(0)
        clock.advance(10_000)  # every window's end passes
        async with asyncio.timeout(30):
            while True:
                before = len(sink.results)
                for _ in range(100):
                    await asyncio.sleep(0)
                if sink.results and len(sink.results) == before:
                    break
    finally:
        await asyncio.wait_for(client.cancel(), 30)
    return list(sink.results)


@pytest.mark.parametrize("function", list(PT_FUNCTIONS))
@pytest.mark.parametrize("window", list(PT_WINDOWS))
async def test_processing_time_windows_same_at_parallelism_1_and_4(window: str, function: str) -> None:
    assigner, apply = PT_WINDOWS[window], PT_FUNCTIONS[function]
    one = await run_processing_time(assigner, apply, 1)
    four = await run_processing_time(assigner, apply, 4)
    assert one
    assert Counter(map(repr, one)) == Counter(map(repr, four))
    assert _per_key(one) == _per_key(four)
