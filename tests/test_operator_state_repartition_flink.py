"""Ports of Flink's operator-state redistribution rules onto streamflow's broadcast state.

Sources (apache/flink): flink-runtime/src/main/java/org/apache/flink/runtime/checkpoint/
RoundRobinOperatorStateRepartitioner.java (``repartitionBroadcastState``) and its tests in
flink-runtime/src/test/java/org/apache/flink/runtime/checkpoint/StateAssignmentOperationTest.java.

Flink's rule for BROADCAST operator state: at any new parallelism, new subtask ``i`` restores
the copy of old subtask ``i % old_parallelism``. Every copy is normally the same (the broadcast
side writes the same state everywhere), but a function may write per-subtask values (Flink
leaves that to the user); the rule decides which copy each new subtask sees.

Flink's SPLIT_DISTRIBUTE (``ListState``) and UNION (``UnionListState``) modes have no user-facing
counterpart in streamflow (Java's ``CheckpointedFunction``, which PyFlink does not expose either;
docs/architecture.md): only broadcast state is ported here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_broadcast_flink import STATE, BroadcastHarness
from test_checkpointing import Gate, wait_until

from streamflow.datastream.functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction


class _PerSubtaskCopy(KeyedBroadcastProcessFunction):
    """The broadcast side stores the value it receives (a different one per old subtask); the
    data side emits the copy its subtask holds."""

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(STATE).put("copy", value)

    def process_element(self, value, ctx):
        yield ctx.get_broadcast_state(STATE).get("copy")


class _NonKeyedPerSubtaskCopy(BroadcastProcessFunction):
    process_broadcast_element = _PerSubtaskCopy.process_broadcast_element
    process_element = _PerSubtaskCopy.process_element


async def _copies_after_restore(keyed: bool, old: int, new: int) -> list[int]:
    function = _PerSubtaskCopy if keyed else _NonKeyedPerSubtaskCopy
    snapshots = {}
    for subtask in range(old):
        h = await BroadcastHarness(function(), keyed=keyed, parallelism=old, subtask=subtask).open()
        await h.element2(100 + subtask)  # old subtask s holds copy 100 + s
        snapshots[subtask] = h.snapshot()
        await h.close()
    seen = []
    for subtask in range(new):
        h = BroadcastHarness(function(), keyed=keyed, parallelism=new, subtask=subtask, restored=snapshots)
        await h.open()
        await h.element1(h.key_of_this_subtask())
        [(copy, _ts)] = h.main.events
        seen.append(copy)
        await h.close()
    return seen


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "non-keyed"])
@pytest.mark.parametrize(("old", "new"), [(2, 4), (2, 3), (1, 3), (4, 2), (3, 2), (3, 3)])
async def test_repartition_broadcast_state(keyed: bool, old: int, new: int) -> None:
    """StateAssignmentOperationTest.testRepartitionBroadcastState (2 -> 4) and
    RoundRobinOperatorStateRepartitioner.repartitionBroadcastState's rule at other parallelisms
    (scale up, scale down, unchanged): new subtask ``i`` restores old subtask ``i % old``'s copy
    (streamflow gave every subtask beyond the old parallelism subtask 0's copy)."""
    assert await _copies_after_restore(keyed, old, new) == [100 + i % old for i in range(new)]


class _SubtaskCopy(BroadcastProcessFunction):
    """Through the public API: each subtask stores its own index as its copy on the broadcast
    element; data elements emit ``(subtask, copy)``."""

    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(STATE).put("copy", self.subtask)
        yield ("stored", self.subtask)

    def process_element(self, value, ctx):
        yield (self.subtask, ctx.get_broadcast_state(STATE).get("copy"))


@pytest.mark.parametrize(("old", "new"), [(2, 4), (3, 2)])
async def test_broadcast_state_copies_through_a_savepoint(tmp_path: Path, old: int, new: int) -> None:
    """RoundRobinOperatorStateRepartitioner.repartitionBroadcastState through a savepoint of a
    running job (the public API): at the new parallelism, subtask ``i`` holds old subtask
    ``i % old``'s copy."""
    import streamflow as sf

    data = list(range(4 * new))

    def build(env: sf.StreamExecutionEnvironment, events: sf.DataStream, out: list) -> None:
        rules = env.from_collection(["rule"]).uid("rules").broadcast(STATE)
        events.connect(rules).process(_SubtaskCopy()).uid("copies").add_sink(out.append)

    env = sf.StreamExecutionEnvironment().set_parallelism(old)
    out1: list = []
    build(env, env.from_async_iterable(Gate(data, 0).__aiter__).uid("events").rebalance(), out1)
    client = await env.execute_async("copies")
    await wait_until(lambda: len(out1) == old, timeout=30)  # every subtask stored its copy
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()

    env2 = sf.StreamExecutionEnvironment().set_parallelism(new)
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    build(env2, env2.from_collection(data).uid("events").rebalance(), out2)
    await (await env2.execute_async("copies")).get_job_execution_result()
    assert set(out2) == {(i, i % old) for i in range(new)}


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "non-keyed"])
async def test_repartition_broadcast_state_with_null_subtask_state(keyed: bool) -> None:
    """StateAssignmentOperationTest.testRepartitionBroadcastStateWithNullSubtaskState (2 -> 4,
    only subtask 0 reports state): every new subtask restores subtask 0's copy; an old subtask
    without state is not counted (before, new subtasks 1 and 3 took its nothing)."""
    function = _PerSubtaskCopy if keyed else _NonKeyedPerSubtaskCopy
    h = await BroadcastHarness(function(), keyed=keyed, parallelism=2, subtask=0).open()
    await h.element2(100)
    snapshots = {0: h.snapshot(), 1: None}
    await h.close()
    for subtask in range(4):
        h = BroadcastHarness(function(), keyed=keyed, parallelism=4, subtask=subtask, restored=snapshots)
        await h.open()
        await h.element1(h.key_of_this_subtask())
        assert [copy for copy, _ts in h.main.events] == [100], f"subtask {subtask}"
        await h.close()


async def test_broadcast_state_is_not_repartitioned_at_the_same_parallelism() -> None:
    """RoundRobinOperatorStateRepartitioner.repartitionState: at the same parallelism (and no
    union state) the previous subtask states are returned as they are: subtask 1, which stored
    no broadcast state, restores none (it does not borrow subtask 0's)."""
    h = await BroadcastHarness(_NonKeyedPerSubtaskCopy(), keyed=False, parallelism=2, subtask=0).open()
    await h.element2(100)
    snapshots = {0: h.snapshot(), 1: None}
    await h.close()
    seen = []
    for subtask in range(2):
        h = BroadcastHarness(
            _NonKeyedPerSubtaskCopy(), keyed=False, parallelism=2, subtask=subtask, restored=snapshots
        )
        await h.open()
        await h.element1("x")
        seen.extend(copy for copy, _ts in h.main.events)
        await h.close()
    assert seen == [100, None]
