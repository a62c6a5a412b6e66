"""The broadcast state pattern: read-only on the data side, restored from a savepoint at
another parallelism, and ``apply_to_keyed_state`` over every key (Flink's
``CoBroadcastWithKeyedOperatorTest`` scenarios, reduced)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_checkpointing import Gate, wait_until

import streamflow as sf
from streamflow.common import Types
from streamflow.datastream.functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction
from streamflow.datastream.state import MapStateDescriptor, ValueStateDescriptor

RULES = MapStateDescriptor("rules", Types.STRING(), Types.STRING())


class Tagger(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        state = ctx.get_broadcast_state(RULES)
        with pytest.raises(AttributeError):
            state.put("x", "y")  # read-only on the data side
        yield value, state.get("rule")

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put("rule", value)


async def test_broadcast_state_survives_a_savepoint_at_another_parallelism(tmp_path: Path) -> None:
    events = list(range(40))
    gate = Gate(events, 20)

    def build(env: sf.StreamExecutionEnvironment, source: sf.DataStream, out: list) -> None:
        rules = env.from_collection(["r1"]).uid("rules").broadcast(RULES)
        source.uid("events").connect(rules).process(Tagger()).uid("tagger").add_sink(out.append)

    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    out1: list = []
    build(env, env.from_async_iterable(gate.__aiter__), out1)
    client = await env.execute_async("tag")
    await wait_until(lambda: len(out1) == 20)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()

    env2 = sf.StreamExecutionEnvironment().set_parallelism(3)
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    build(env2, env2.from_collection(events), out2)  # the rules source resumes after its one rule
    await (await env2.execute_async("tag")).get_job_execution_result()
    assert sorted(v for v, _ in out2) == list(range(20, 40))
    assert {rule for _, rule in out2} == {"r1"}  # every new subtask restored the broadcast state


async def test_apply_to_keyed_state_visits_every_key() -> None:
    from streamflow.testing import ListSink

    counts = ValueStateDescriptor("count", Types.INT())

    class Counter(KeyedBroadcastProcessFunction):
        processed = 0

        def open(self, ctx):
            self.count = ctx.get_state(counts)

        def process_element(self, value, ctx):
            self.count.update((self.count.value() or 0) + 1)
            Counter.processed += 1
            return ()

        def process_broadcast_element(self, value, ctx):
            seen: list = []
            ctx.apply_to_keyed_state(counts, lambda key, state: seen.append((key, state.value())))
            yield from sorted(seen)

    env = sf.StreamExecutionEnvironment()
    marker_gate = Gate(["go"], 0)  # the broadcast element waits until the words are counted
    out = ListSink()
    marker = env.from_async_iterable(marker_gate.__aiter__).broadcast(RULES)
    env.from_collection(["a", "b", "a"]).key_by(lambda w: w).connect(marker).process(Counter()).add_sink(out)
    client = await env.execute_async("counts")
    await wait_until(lambda: Counter.processed == 3)
    marker_gate.release.set()
    await client.get_job_execution_result()
    assert out.results == [("a", 2), ("b", 1)]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("use", ["write", "read", "timer"])
def test_keyed_state_on_the_broadcast_side_fails_instead_of_using_a_made_up_key(
    backend: str, use: str
) -> None:
    """Flink's processBroadcastElement has no current key ("No key set"); the state was kept
    under the key None before, which apply_to_keyed_state and checkpoints then saw."""
    counts = ValueStateDescriptor("count", Types.INT())

    class Misuse(KeyedBroadcastProcessFunction):
        def open(self, ctx):
            self.count = ctx.get_state(counts)

        def process_element(self, value, ctx):
            self.count.update(1)
            return ()

        def process_broadcast_element(self, value, ctx):
            if use == "write":
                self.count.update(99)
            elif use == "read":
                yield self.count.value()
            else:
                ctx.timer_service().register_event_time_timer(5)
            return ()

    env = sf.StreamExecutionEnvironment()
    env.configure({"state.backend.type": backend})
    rules = env.from_collection(["go"]).broadcast(RULES)
    env.from_collection(["a"]).key_by(lambda w: w).connect(rules).process(Misuse()).add_sink(lambda v: None)
    with pytest.raises(RuntimeError, match=r"No key set: .* in process_broadcast_element"):
        env.execute()


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("ttl", [False, True])
async def test_add_all_of_nothing_gives_a_key_no_list_state(backend: str, ttl: bool) -> None:
    """Flink's ListState.addAll([]) stores nothing, so apply_to_keyed_state does not visit a
    key that only ever added an empty list (it was visited, with [], before)."""
    from streamflow.common import Time
    from streamflow.datastream.state import ListStateDescriptor, StateTtlConfig
    from streamflow.testing import ListSink

    items = ListStateDescriptor("items", Types.INT())
    if ttl:
        items.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(3600)).build())

    class Collect(KeyedBroadcastProcessFunction):
        processed = 0

        def open(self, ctx):
            self.items = ctx.get_list_state(items)

        def process_element(self, value, ctx):
            self.items.add_all([] if value == "empty" else [1])
            Collect.processed += 1
            return ()

        def process_broadcast_element(self, value, ctx):
            seen: list = []
            ctx.apply_to_keyed_state(items, lambda key, state: seen.append((key, list(state.get()))))
            yield from sorted(seen)

    env = sf.StreamExecutionEnvironment()
    env.configure({"state.backend.type": backend})
    marker_gate = Gate(["go"], 0)
    out = ListSink()
    marker = env.from_async_iterable(marker_gate.__aiter__).broadcast(RULES)
    words = ["full", "empty", "full"]
    env.from_collection(words).key_by(lambda w: w).connect(marker).process(Collect()).add_sink(out)
    client = await env.execute_async("lists")
    await wait_until(lambda: Collect.processed == 3)
    marker_gate.release.set()
    await client.get_job_execution_result()
    assert out.results == [("full", [1, 1])]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
async def test_apply_to_keyed_state_sees_state_with_a_time_to_live_as_the_function_does(backend: str) -> None:
    """The state apply_to_keyed_state hands out is the one get_state gives (Flink applies the
    TTL decorator to it): values, not the stored (value, timestamp) entries, and a write there
    is read back by process_element."""
    from streamflow.common import Time
    from streamflow.datastream.state import StateTtlConfig
    from streamflow.testing import ListSink

    counts = ValueStateDescriptor("count", Types.INT())
    counts.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(3600)).build())

    class Bump(KeyedBroadcastProcessFunction):
        processed = 0

        def open(self, ctx):
            self.count = ctx.get_state(counts)

        def process_element(self, value, ctx):
            if value.endswith("?"):  # a read, after the broadcast element
                yield ctx.get_current_key(), self.count.value()
                return
            self.count.update((self.count.value() or 0) + 1)
            Bump.processed += 1

        def process_broadcast_element(self, value, ctx):
            seen: list = []

            def visit(key, state):
                seen.append((key, state.value()))
                state.update(state.value() + 100)

            ctx.apply_to_keyed_state(counts, visit)
            yield from sorted(seen)

    env = sf.StreamExecutionEnvironment()
    env.configure({"state.backend.type": backend})
    marker_gate, reads_gate = Gate(["go"], 0), Gate(["a?", "b?"], 0)
    out = ListSink()
    marker = env.from_async_iterable(marker_gate.__aiter__).broadcast(RULES)
    words = env.from_collection(["a", "b", "a"]).union(env.from_async_iterable(reads_gate.__aiter__))
    words.key_by(lambda w: w[0]).connect(marker).process(Bump()).add_sink(out)
    client = await env.execute_async("ttl")
    await wait_until(lambda: Bump.processed == 3)
    marker_gate.release.set()
    await wait_until(lambda: len(out.results) == 2)
    reads_gate.release.set()
    await client.get_job_execution_result()
    assert out.results[:2] == [("a", 2), ("b", 1)]
    assert sorted(out.results[2:]) == [("a", 102), ("b", 101)]
