"""State TTL (Flink's TTL decorators): table tests of the rules, and one job through the API."""

from __future__ import annotations

import pytest

from streamflow.common import Time, Types
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.functions import KeyedProcessFunction
from streamflow.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from streamflow.state.keyed import KeyedStateBackend
from streamflow.state.ttl_state import ttl_state
from streamflow.testing import ListSink, ManualClock

UT, SV = StateTtlConfig.UpdateType, StateTtlConfig.StateVisibility


def _state(descriptor, update=UT.OnCreateAndWrite, visibility=SV.NeverReturnExpired):
    """The access rules alone: no background cleanup (test_state_ttl_cleanup.py has it)."""
    descriptor.enable_time_to_live(
        StateTtlConfig.new_builder(Time.milliseconds(100))
        .set_update_type(update)
        .set_state_visibility(visibility)
        .disable_cleanup_in_background()
        .build()
    )
    clock, backend = ManualClock(), KeyedStateBackend(128)
    backend.current_key = "k"
    return ttl_state(backend, descriptor, clock.now_ms), clock, backend


# steps: (time, op, argument, expected value read or None for a write)
@pytest.mark.parametrize(
    ("update", "visibility", "steps"),
    [
        # written at 0, expires at 100: visible at 99, gone at 100 (ts + ttl <= now)
        (
            UT.OnCreateAndWrite,
            SV.NeverReturnExpired,
            [(0, "update", 1, None), (99, "value", None, 1), (100, "value", None, None)],
        ),
        # a read does not extend the life with OnCreateAndWrite ...
        (
            UT.OnCreateAndWrite,
            SV.NeverReturnExpired,
            [(0, "update", 1, None), (90, "value", None, 1), (150, "value", None, None)],
        ),
        # ... it does with OnReadAndWrite
        (
            UT.OnReadAndWrite,
            SV.NeverReturnExpired,
            [
                (0, "update", 1, None),
                (90, "value", None, 1),
                (150, "value", None, 1),
                (251, "value", None, None),
            ],
        ),
        # ReturnExpiredIfNotCleanedUp: the expired value is seen once, and removed by that read
        (
            UT.OnCreateAndWrite,
            SV.ReturnExpiredIfNotCleanedUp,
            [(0, "update", 1, None), (200, "value", None, 1), (201, "value", None, None)],
        ),
        # a write renews the timestamp
        (
            UT.OnCreateAndWrite,
            SV.NeverReturnExpired,
            [
                (0, "update", 1, None),
                (80, "update", 2, None),
                (150, "value", None, 2),
                (180, "value", None, None),
            ],
        ),
    ],
)
def test_value_state_ttl(update, visibility, steps) -> None:
    state, clock, backend = _state(ValueStateDescriptor("v", Types.INT()), update, visibility)
    for at, op, arg, expected in steps:
        clock.set(at)
        if op == "update":
            state.update(arg)
        else:
            assert state.value() == expected, (at, op)
    if steps[-1][3] is None:
        assert "k" not in backend.table("v", "value")  # expired state is removed, not only hidden


def test_list_and_map_state_expire_per_element() -> None:
    lst, clock, backend = _state(ListStateDescriptor("l", Types.INT()))
    lst.add(1)
    clock.set(60)
    lst.add(2)
    clock.set(120)
    assert lst.get() == [2]
    clock.set(160)
    assert lst.get() == [] and "k" not in backend.table("l", "list")

    m, clock, _ = _state(MapStateDescriptor("m", Types.STRING(), Types.INT()))
    m.put("a", 1)
    clock.set(60)
    m["b"] = 2
    clock.set(120)
    assert m.items() == [("b", 2)] and "a" not in m and m.get("a") is None


def test_ttl_through_a_job_with_the_jobs_clock() -> None:
    """The job's clock is the TTL's: a key silent for longer than the TTL starts over."""
    clock = ManualClock()
    descriptor = ValueStateDescriptor("count", Types.INT())
    descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(1)).build())

    class Count(KeyedProcessFunction):
        def open(self, ctx):
            self.count = ctx.get_state(descriptor)

        def process_element(self, value, ctx):
            clock.set(value[0])  # processing time reaches the record's scripted instant
            self.count.update((self.count.value() or 0) + 1)
            yield value[1], self.count.value()

    script = [(0, "a"), (500, "a"), (1400, "a"), (3000, "a"), (3100, "b")]
    env = StreamExecutionEnvironment(clock=clock)
    sink = ListSink()
    env.from_collection(script).key_by(lambda r: r[1]).process(Count()).sink_to(sink)
    env.execute()
    assert sink.results == [("a", 1), ("a", 2), ("a", 3), ("a", 1), ("b", 1)]


@pytest.mark.parametrize(("resume_at", "expected"), [(500, ("a", 3)), (2_000, ("a", 1))])
async def test_ttl_survives_a_savepoint(tmp_path, resume_at, expected) -> None:
    from test_checkpointing import Gate, wait_until

    clock = ManualClock()
    descriptor = ValueStateDescriptor("count", Types.INT())
    descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(1)).build())

    class Count(KeyedProcessFunction):
        def open(self, ctx):
            self.count = ctx.get_state(descriptor)

        def process_element(self, value, ctx):
            clock.set(value[0])
            self.count.update((self.count.value() or 0) + 1)
            yield value[1], self.count.value()

    data = [(0, "a"), (0, "a"), (resume_at, "a")]

    def build(env, source, sink) -> None:
        source.uid("src").key_by(lambda r: r[1]).process(Count()).uid("count").sink_to(sink)

    env, sink1, gate = StreamExecutionEnvironment(clock=clock), ListSink(), Gate(data, 2)
    build(env, env.from_async_iterable(gate.__aiter__), sink1)
    client = await env.execute_async("ttl")
    await wait_until(lambda: len(sink1.results) == 2)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()
    env2, sink2 = StreamExecutionEnvironment(clock=clock), ListSink()
    env2.configure({"execution.savepoint.path": path})
    build(env2, env2.from_collection(data), sink2)
    await (await env2.execute_async("ttl")).get_job_execution_result()
    assert sink2.results == [expected]  # the restored value kept its write time


def test_ttl_must_be_positive_when_built() -> None:
    """flink-core StateTtlConfig's constructor (``checkArgument(ttl > 0, "TTL is expected to be
    positive")``, run by ``Builder#build``): a TTL set to zero with ``set_ttl`` is refused too (it
    was accepted, and every value expired as written), and the builder's first TTL may be
    replaced before ``build``."""
    with pytest.raises(ValueError, match="a state TTL must be positive"):
        StateTtlConfig.new_builder(Time.seconds(1)).set_ttl(Time.seconds(0)).build()
    with pytest.raises(ValueError, match="a state TTL must be positive"):
        StateTtlConfig.new_builder(Time.milliseconds(-5)).build()
    assert StateTtlConfig.new_builder(Time.seconds(0)).set_ttl(Time.seconds(2)).build().get_ttl() == 2000


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_per_window_state_with_a_ttl(backend: str, tmp_path) -> None:
    """TtlStateTestBase#testMultipleNamespaces through the public API: a ProcessWindowFunction's
    window_state() value, reducing and aggregating states with a TTL expire per window, on the
    job's clock, as keyed TTL state does (they were refused with NotImplementedError). A count
    trigger fires the key's global window at every element without purging it."""
    from state_backend_harness import Average, set_backend

    from streamflow.datastream.functions import ProcessWindowFunction
    from streamflow.datastream.state import AggregatingStateDescriptor, ReducingStateDescriptor
    from streamflow.datastream.window import CountTrigger, GlobalWindows

    clock = ManualClock()
    config = StateTtlConfig.new_builder(Time.seconds(1)).build()
    count = ValueStateDescriptor("count", Types.INT())
    total = ReducingStateDescriptor("total", lambda a, b: a + b, Types.INT())
    mean = AggregatingStateDescriptor("mean", Average(), Types.TUPLE([Types.INT(), Types.INT()]))
    for d in (count, total, mean):
        d.enable_time_to_live(config)

    class PerWindow(ProcessWindowFunction):
        def process(self, key, context, elements):
            *_, (at, _key, n) = elements  # the element just added
            clock.set(at)
            ws = context.window_state()
            c, t, m = ws.get_state(count), ws.get_reducing_state(total), ws.get_aggregating_state(mean)
            c.update((c.value() or 0) + 1)
            t.add(n)
            m.add(n)
            yield c.value(), t.get(), m.get()

    script = [(0, "a", 2), (500, "a", 4), (1400, "a", 6), (3000, "a", 8)]
    env = StreamExecutionEnvironment(clock=clock).set_parallelism(1)
    set_backend(env, backend, tmp_path)
    stream = env.from_collection(script).key_by(lambda r: r[1]).window(GlobalWindows.create())
    out = list(stream.trigger(CountTrigger.of(1)).process(PerWindow()).execute_and_collect())
    assert out == [(1, 2, 2.0), (2, 6, 3.0), (3, 12, 4.0), (1, 8, 8.0)]


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_per_window_list_and_map_state_with_a_ttl(backend: str, tmp_path) -> None:
    """TtlStateTestBase#testMultipleNamespaces through the public API: a ProcessWindowFunction's
    window_state() list and map with a TTL expire element by element, as Flink's TtlListState
    and TtlMapState in the window's namespace (they were refused with NotImplementedError). A
    count trigger fires the key's global window at every element without purging it."""
    from state_backend_harness import set_backend

    from streamflow.datastream.functions import ProcessWindowFunction
    from streamflow.datastream.window import CountTrigger, GlobalWindows

    clock = ManualClock()
    config = StateTtlConfig.new_builder(Time.seconds(1)).build()
    listed, mapped = ListStateDescriptor("l", Types.INT()), MapStateDescriptor("m", Types.INT(), Types.INT())
    for d in (listed, mapped):
        d.enable_time_to_live(config)

    class PerWindow(ProcessWindowFunction):
        def process(self, key, context, elements):
            *_, (at, _key, n) = elements  # the element just added
            clock.set(at)
            ws = context.window_state()
            lst, m = ws.get_list_state(listed), ws.get_map_state(mapped)
            lst.add(n)
            m.put(n, at)
            yield list(lst.get()), sorted(m.items())

    script = [(0, "a", 2), (500, "a", 4), (1400, "a", 6), (3000, "a", 8)]
    env = StreamExecutionEnvironment(clock=clock).set_parallelism(1)
    set_backend(env, backend, tmp_path)
    stream = env.from_collection(script).key_by(lambda r: r[1]).window(GlobalWindows.create())
    out = list(stream.trigger(CountTrigger.of(1)).process(PerWindow()).execute_and_collect())
    assert out == [
        ([2], [(2, 0)]),
        ([2, 4], [(2, 0), (4, 500)]),
        ([4, 6], [(4, 500), (6, 1400)]),  # the element written at 0 expired at 1000
        ([8], [(8, 3000)]),
    ]


@pytest.mark.parametrize("kind", ["list", "map"])
def test_per_window_list_and_map_state_migrate_each_element_when_the_ttl_is_switched(kind: str) -> None:
    """A per-window list or map restored with its TTL switched on has each window's elements
    stamped with the restore's time, and switched off has them unwrapped (Flink's
    TtlAwareSerializer#migrateValueFromPriorSerializer, per element in the window's namespace):
    the window map state holds window -> list or map, not one value per window."""
    from streamflow.state.ttl_cleanup import registry
    from streamflow.state.ttl_migration import on_register

    plain = {"list": [5, 7], "map": {1: "a"}}[kind]
    stamped = {"list": [(5, 50), (7, 50)], "map": {1: ("a", 50)}}[kind]
    for before, after, enabled in ((plain, stamped, True), (stamped, plain, False)):
        backend = KeyedStateBackend(128)
        backend.table("window-state:s", "map")["k"] = {"w1": before, "w2": before}
        registry(backend).restored = {"window-state:s": not enabled}
        on_register(backend, MapStateDescriptor("window-state:s"), enabled, lambda: 50, per_window=kind)
        assert backend.table("window-state:s", "map")["k"] == {"w1": after, "w2": after}
