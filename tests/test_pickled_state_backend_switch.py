"""``Types.PICKLED_BYTE_ARRAY()`` keyed state across heap <-> RocksDB savepoint switches.

Flink's state backend switch through a savepoint (StateBackendMigrationTestBase,
SavepointITCase#testStopWithSavepointFor...: a savepoint is backend-independent, the canonical
format) must give the job back the values it stored. A heap backend's snapshot holds a pickled
state's entries pickled (state/typed.py); the RocksDB backend wrote those bytes into its DB as
they were, so after the switch ``value()`` returned the pickled ``bytes`` (a map state's
``get`` failed on them: ``'bytes' object has no attribute 'get'``). Now they are restored as
``Pickled`` entries (the codec carries them as such) and unpickled when the job declares the
state pickled, as on the heap backend; a state never declared keeps them through a RocksDB
savepoint back to the heap; a state declared with another type is refused, as on the heap.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

from streamflow import RestartStrategies
from streamflow.common import Types
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.functions import KeyedProcessFunction
from streamflow.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from streamflow.testing import ListSink, ScriptedSource

PICKLED = Types.PICKLED_BYTE_ARRAY()
VALUE = {"nested": [1, (2, "b")], "n": 5}


class Stateful(KeyedProcessFunction):
    """``set`` stores VALUE in a value, a list and a map state (all pickled); every record
    emits what the three hold."""

    def __init__(self, value_type: Any = PICKLED) -> None:
        self.value_type = value_type

    def open(self, runtime_context: Any) -> None:
        self.value = runtime_context.get_state(ValueStateDescriptor("value", self.value_type))
        self.list = runtime_context.get_list_state(ListStateDescriptor("list", PICKLED))
        self.map = runtime_context.get_map_state(MapStateDescriptor("map", Types.STRING(), PICKLED))

    def process_element(self, record: Any, ctx: Any) -> Any:
        if record == "set":
            self.value.update(VALUE)
            self.list.add(VALUE)
            self.map.put("k", VALUE)
        yield record, self.value.value(), list(self.list.get()), self.map.get("k")


class Stateless(KeyedProcessFunction):
    """The same operator (uid) declaring none of the states: they stay as restored."""

    def process_element(self, record: Any, ctx: Any) -> Any:
        yield record, None, None, None


async def _run(
    tmp_path: Path, backend: str, function: Any, script: list[str], savepoint: str | None = None
) -> tuple[str, list]:
    """A job over ``script`` (the earlier jobs' records first: a restored source skips them);
    returns a savepoint taken after its records, and what it emitted."""
    source = ScriptedSource(script, end=False)
    env = StreamExecutionEnvironment().set_parallelism(1)
    env.configure({"state.backend.type": backend})
    if savepoint is not None:
        env.configure({"execution.savepoint.path": savepoint})
    sink = ListSink()
    stream = env.from_source(source, None, "records").uid("records")
    stream.key_by(lambda r: "key").process(function).uid("p").sink_to(sink)
    client = await env.execute_async("pickled-state")
    await wait_until(lambda: len(sink.results) >= 1)
    path = await client.trigger_savepoint(str(tmp_path / f"sp-{len(script)}-{backend}"))
    await client.cancel()
    return str(path), sink.results


@pytest.mark.parametrize(("first", "second"), [("hashmap", "rocksdb"), ("rocksdb", "hashmap")])
async def test_pickled_states_switch_backends(tmp_path: Path, first: str, second: str) -> None:
    path, out = await _run(tmp_path, first, Stateful(), ["set"])
    assert out == [("set", VALUE, [VALUE], VALUE)]
    _, out = await _run(tmp_path, second, Stateful(), ["set", "get"], path)
    assert out == [("get", VALUE, [VALUE], VALUE)]


async def test_undeclared_pickled_states_cross_rocksdb_back_to_the_heap(tmp_path: Path) -> None:
    """heap -> RocksDB (the states not declared: their entries stay Pickled in the DB and in
    its savepoint) -> heap, where the job declares them again."""
    path, _ = await _run(tmp_path, "hashmap", Stateful(), ["set"])
    path, _ = await _run(tmp_path, "rocksdb", Stateless(), ["set", "pass"], path)
    _, out = await _run(tmp_path, "hashmap", Stateful(), ["set", "pass", "get"], path)
    assert out == [("get", VALUE, [VALUE], VALUE)]


async def test_a_pickled_state_declared_with_another_type_after_the_switch_is_refused(
    tmp_path: Path,
) -> None:
    """As on the heap: the restore names the state and both types (Flink's
    StateMigrationException) instead of handing back bytes under a String declaration."""
    path, _ = await _run(tmp_path, "hashmap", Stateful(), ["set"])
    env = StreamExecutionEnvironment().set_parallelism(1)
    env.configure({"state.backend.type": "rocksdb", "execution.savepoint.path": path})
    env.set_restart_strategy(RestartStrategies.no_restart())
    stream = env.from_source(ScriptedSource(["set", "get"]), None, "records").uid("records")
    stream.key_by(lambda r: "key").process(Stateful(value_type=Types.STRING())).uid("p").sink_to(ListSink())
    client = await env.execute_async("pickled-state")
    with pytest.raises(Exception, match="'value' was checkpointed with type PickledByteArrayTypeInfo"):
        await asyncio.wait_for(client.get_job_execution_result(), 30)
