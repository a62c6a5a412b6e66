"""Ports of Flink's keyed-state snapshot/restore tests onto streamflow: savepoints through the
public API, restored at the same or another parallelism, on the heap backend and on
EmbeddedRocksDBStateBackend.

Source (apache/flink): flink-runtime/src/test/java/org/apache/flink/runtime/state/
StateBackendTestBase.java.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from state_backend_harness import (
    BACKENDS,
    descriptors,
    open_states,
    owner,
    savepoint_then_restore,
    set_backend,
)
from test_checkpointing import Gate, wait_until

import streamflow as sf
from streamflow.common import Types
from streamflow.datastream.functions import KeyedProcessFunction
from streamflow.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

KEYS = [f"key-{i}" for i in range(60)]


class _WriteThenRead(KeyedProcessFunction):
    """``("w", key, i)`` writes state of every kind for ``key``; ``("r", key)`` emits what the
    key's state holds, with the subtask that holds it."""

    def open(self, runtime_context: Any) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.states = open_states(runtime_context, descriptors())

    def process_element(self, value, ctx):
        s = self.states
        if value[0] == "w":
            i = value[2]
            s["value"].update(i)
            s["default"].update(i + 1)
            s["list"].add_all([i, i + 1])
            s["map"].put_all({i: str(i)})
            s["reducing"].add(i)
            s["reducing"].add(1)
            s["aggregating"].add(i)
            s["aggregating"].add(i + 2)
            yield "written"
            return
        yield (
            value[1],
            self.subtask,
            s["value"].value(),
            s["default"].value(),
            list(s["list"].get()),
            sorted(s["map"].items()),
            s["reducing"].get(),
            s["aggregating"].get(),
        )


def _expected(key: str, i: int, parallelism: int) -> tuple:
    return (key, owner(key, parallelism), i, i + 1, [i, i + 1], [(i, str(i))], i + 1, i + 1.0)


@pytest.mark.parametrize(("backend_before", "backend_after"), [(b, b) for b in BACKENDS])
@pytest.mark.parametrize(("before", "after"), [(2, 2), (1, 4), (4, 1), (2, 3)])
async def test_key_group_snapshot_restore_and_rescale(
    tmp_path: Path, before: int, after: int, backend_before: str, backend_after: str
) -> None:
    """StateBackendTestBase.testKeyGroupSnapshotRestoreNoRescale / ScaleUp / ScaleDown and the
    restore half of testValueState, testListState, testMapState, testReducingState,
    testAggregatingState: after a savepoint at ``before`` subtasks, restored at ``after``, every
    key's state of every kind is back, on the subtask that owns its key group; keys never
    written read as unset (the default value)."""
    writes = [("w", key, i) for i, key in enumerate(KEYS)]
    reads = [("r", key) for key in KEYS] + [("r", "never-written")]
    out = await savepoint_then_restore(
        tmp_path,
        (before, backend_before),
        (after, backend_after),
        _WriteThenRead,
        writes,
        reads,
        key=lambda r: r[1],
    )
    want = [_expected(key, i, after) for i, key in enumerate(KEYS)]
    unset = ("never-written", owner("never-written", after), None, 42, [], [], None, None)
    assert sorted(out) == sorted([*want, unset])


@pytest.mark.parametrize(("backend_before", "backend_after"), [("heap", "rocksdb"), ("rocksdb", "heap")])
async def test_restore_across_backends(tmp_path: Path, backend_before: str, backend_after: str) -> None:
    """Flink 1.13+'s unified savepoint format (StateBackendTestBase's snapshot/restore, across
    backends): a savepoint of one backend restores on the other at another parallelism."""
    writes = [("w", key, i) for i, key in enumerate(KEYS)]
    reads = [("r", key) for key in KEYS]
    out = await savepoint_then_restore(
        tmp_path, (2, backend_before), (3, backend_after), _WriteThenRead, writes, reads, key=lambda r: r[1]
    )
    assert sorted(out) == sorted(_expected(key, i, 3) for i, key in enumerate(KEYS))


def _one_state(descriptor: Any, write: Any, read: Any) -> type:
    class OneState(KeyedProcessFunction):
        def open(self, runtime_context: Any) -> None:
            getter = {
                "value": runtime_context.get_state,
                "list": runtime_context.get_list_state,
                "map": runtime_context.get_map_state,
            }
            self.state = getter[descriptor.kind](descriptor)

        def process_element(self, value, ctx):
            yield (write if value[0] == "w" else read)(self.state)

    return OneState


async def _restore_with(tmp_path: Path, backend: str, first: type, second: type) -> list:
    """A savepoint of ``first`` (which wrote one key), restored into ``second``."""
    data = [("w", "k"), ("r", "k")]
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    set_backend(env, backend, tmp_path)
    out1: list = []
    env.from_async_iterable(Gate(data, 1).__aiter__).uid("src").key_by(lambda r: r[1]).process(first()).uid(
        "fn"
    ).add_sink(out1.append)
    client = await env.execute_async("state-type")
    await wait_until(lambda: len(out1) == 1, timeout=30)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()
    env2 = sf.StreamExecutionEnvironment().set_parallelism(1)
    set_backend(env2, backend, tmp_path / "after")
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    env2.from_collection(data).uid("src").key_by(lambda r: r[1]).process(second()).uid("fn").add_sink(
        out2.append
    )
    await (await env2.execute_async("state-type")).get_job_execution_result()
    return out2


@pytest.mark.parametrize("backend", BACKENDS)
async def test_restore_with_a_different_state_kind_is_refused(tmp_path: Path, backend: str) -> None:
    """StateBackendTestBase.testValueStateRestoreWithWrongSerializers' sibling for the state kind
    (Flink: registering a restored state under another kind fails, "Incompatible state types"):
    a value state restored as a list state of the same name fails the job naming the state."""
    first = _one_state(ValueStateDescriptor("s", Types.INT()), lambda s: s.update(1), lambda s: s.value())
    second = _one_state(ListStateDescriptor("s", Types.INT()), lambda s: s.add(1), lambda s: s.get())
    with pytest.raises(Exception, match=r"state 's' is already registered as value state, not list"):
        await _restore_with(tmp_path, backend, first, second)


_WRONG_TYPES = {
    "value": (ValueStateDescriptor("s", Types.INT()), ValueStateDescriptor("s", Types.STRING())),
    "list": (ListStateDescriptor("s", Types.INT()), ListStateDescriptor("s", Types.STRING())),
    "map": (
        MapStateDescriptor("s", Types.STRING(), Types.INT()),
        MapStateDescriptor("s", Types.STRING(), Types.STRING()),
    ),
}
_WRITE = {"value": lambda s: s.update(1), "list": lambda s: s.add(1), "map": lambda s: s.put("a", 1)}


@pytest.mark.parametrize("kind", list(_WRONG_TYPES))
@pytest.mark.parametrize("backend", BACKENDS)
async def test_restore_with_an_incompatible_serializer_is_refused(
    tmp_path: Path, backend: str, kind: str
) -> None:
    """StateBackendTestBase.testValueStateRestoreWithWrongSerializers, testListStateRestoreWith
    WrongSerializers, testMapStateRestoreWithWrongSerializers: a state restored with a type that
    cannot read what was stored (Integer written, read as String) is refused naming the state and
    both types (Flink: StateMigrationException, "The new state serializer ... must not be
    incompatible with the old state serializer"). Before, the values came back as stored: ints
    where String is declared. The same declared type restores (the other tests of this file)."""
    old, new = _WRONG_TYPES[kind]
    first = _one_state(old, _WRITE[kind], lambda s: None)
    second = _one_state(new, lambda s: None, lambda s: None)
    with pytest.raises(
        Exception, match=r"state 's' was checkpointed with type .*Integer.* declares .*String"
    ):
        await _restore_with(tmp_path, backend, first, second)


class _Untouched(KeyedProcessFunction):
    """Registers no state: the restored state is never accessed."""

    def process_element(self, value, ctx):
        yield "passed"


async def _savepoint(
    tmp_path: Path, name: str, parallelism: int, backend: str, data: list, stop: int, function: Any
) -> str:
    """Run ``function`` at ``parallelism`` until ``stop`` records passed; take a savepoint."""
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    set_backend(env, backend, tmp_path / name)
    out: list = []
    env.from_async_iterable(Gate(data, stop).__aiter__).uid("src").key_by(lambda r: r[1]).process(
        function()
    ).uid("fn").add_sink(out.append)
    client = await env.execute_async("non-accessed")
    await wait_until(lambda: len(out) == stop, timeout=30)
    sp = await client.trigger_savepoint(str(tmp_path / f"sp-{name}"))
    await client.cancel()
    return sp


@pytest.mark.parametrize("backend", BACKENDS)
async def test_snapshot_of_non_accessed_restored_state(tmp_path: Path, backend: str) -> None:
    """StateBackendTestBase.testSnapshotNonAccessedState: state restored but never accessed by
    the new job (here: a job that registers no state, at another parallelism) is in its next
    snapshot, and a third job (at yet another parallelism) reads it back."""
    writes = [("w", key, i) for i, key in enumerate(KEYS)]
    passes = [("p", key) for key in KEYS[:10]]
    reads = [("r", key) for key in KEYS]
    data = writes + passes + reads
    first = await _savepoint(tmp_path, "a", 2, backend, data, len(writes), _WriteThenRead)
    # the second job resumes the source after the writes; it outputs one record per pass
    env = sf.StreamExecutionEnvironment().set_parallelism(3)
    set_backend(env, backend, tmp_path / "b")
    env.configure({"execution.savepoint.path": first})
    out: list = []
    gate = Gate(data, len(writes) + len(passes))
    env.from_async_iterable(gate.__aiter__).uid("src").key_by(lambda r: r[1]).process(_Untouched()).uid(
        "fn"
    ).add_sink(out.append)
    client = await env.execute_async("non-accessed")
    await wait_until(lambda: len(out) == len(passes), timeout=30)
    second = await client.trigger_savepoint(str(tmp_path / "sp-b"))
    await client.cancel()

    env3 = sf.StreamExecutionEnvironment().set_parallelism(1)
    set_backend(env3, backend, tmp_path / "c")
    env3.configure({"execution.savepoint.path": second})
    out3: list = []
    env3.from_collection(data).uid("src").key_by(lambda r: r[1]).process(_WriteThenRead()).uid("fn").add_sink(
        out3.append
    )
    await (await env3.execute_async("non-accessed")).get_job_execution_result()
    assert sorted(out3) == sorted(_expected(key, i, 1) for i, key in enumerate(KEYS))


def _rescale(tmp_path: Path, backend: str, before: int, after: int, max_parallelism: tuple) -> Any:
    writes = [("w", key, i) for i, key in enumerate(KEYS)]
    reads = [("r", key) for key in KEYS]
    return savepoint_then_restore(
        tmp_path,
        (before, backend),
        (after, backend),
        _WriteThenRead,
        writes,
        reads,
        key=lambda r: r[1],
        max_parallelism=max_parallelism,
    )


@pytest.mark.parametrize("backend", BACKENDS)
async def test_key_group_restore_with_max_parallelism_10(tmp_path: Path, backend: str) -> None:
    """StateBackendTestBase.testKeyGroupSnapshotRestoreScaleUp's setting (max parallelism 10,
    Flink's KeyGroupRange 0..9) at 2 -> 3: keys reach the subtask owning their group of 10."""
    out = await _rescale(tmp_path, backend, 2, 3, (10, 10))
    assert sorted(out) == sorted(
        (key, owner(key, 3, 10), *_expected(key, i, 3)[2:]) for i, key in enumerate(KEYS)
    )


@pytest.mark.parametrize("backend", BACKENDS)
async def test_restore_adopts_the_checkpoints_max_parallelism_when_none_is_configured(
    tmp_path: Path, backend: str
) -> None:
    """StateAssignmentOperation.checkParallelismPreconditions: a job vertex whose max parallelism
    the user did not configure takes the checkpoint's (canRescaleMaxParallelism); the state of
    every key is back at 3 subtasks of 10 key groups (before, streamflow used its default of 128
    key groups and selected the stored groups by the wrong numbers: state was lost)."""
    out = await _rescale(tmp_path, backend, 2, 3, (10, None))
    assert sorted(out) == sorted(
        (key, owner(key, 3, 10), *_expected(key, i, 3)[2:]) for i, key in enumerate(KEYS)
    )


@pytest.mark.parametrize("backend", BACKENDS)
async def test_restore_refuses_a_configured_max_parallelism_that_differs(
    tmp_path: Path, backend: str
) -> None:
    """StateAssignmentOperation.checkParallelismPreconditions: a configured max parallelism other
    than the checkpoint's is refused, naming the operator and both values (before, streamflow
    restored and silently lost the keys' state: StateBackendTestBase's key groups no longer
    matched)."""
    with pytest.raises(Exception, match=r"maximum parallelism \(128\).*uid 'fn'.*\(10\)"):
        await _rescale(tmp_path, backend, 2, 3, (None, 10))


@pytest.mark.parametrize("backend", BACKENDS)
async def test_restore_refuses_a_parallelism_above_the_checkpoints_max_parallelism(
    tmp_path: Path, backend: str
) -> None:
    """StateAssignmentOperation.checkParallelismPreconditions: the restored state's max
    parallelism below the new parallelism is refused (Flink: "The maximum parallelism (2) of the
    restored state is lower than the configured parallelism (3)")."""
    with pytest.raises(Exception, match=r"maximum parallelism \(2\) of the restored state is lower"):
        await _rescale(tmp_path, backend, 2, 3, (2, None))


@pytest.mark.parametrize("backend", BACKENDS)
async def test_empty_state_checkpointing(tmp_path: Path, backend: str) -> None:
    """StateBackendTestBase.testEmptyStateCheckpointing: a keyed operator that holds no state
    snapshots, and restores at another parallelism, with every key unset."""
    writes = [("p", key) for key in KEYS]
    reads = [("r", key) for key in KEYS]

    class Passing(_WriteThenRead):
        def process_element(self, value, ctx):
            if value[0] == "p":
                yield "passed"
            else:
                yield from super().process_element(value, ctx)

    out = await savepoint_then_restore(
        tmp_path, (2, backend), (3, backend), Passing, writes, reads, key=lambda r: r[1]
    )
    assert sorted(out) == sorted((key, owner(key, 3), None, 42, [], [], None, None) for key in KEYS)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_restore_with_a_wrong_key_serializer_is_refused(tmp_path: Path, backend: str) -> None:
    """StateBackendTestBase.testRestoreWithWrongKeySerializer: state written under str keys,
    restored by a job whose keys are ints, is refused naming the stored key type (Flink:
    StateMigrationException for the key serializer)."""
    first = _one_state(ValueStateDescriptor("s", Types.INT()), lambda s: s.update(1), lambda s: s.value())
    data = [("w", "k"), ("r", 7)]
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    set_backend(env, backend, tmp_path)
    out1: list = []
    env.from_async_iterable(Gate(data, 1).__aiter__).uid("src").key_by(lambda r: r[1]).process(first()).uid(
        "fn"
    ).add_sink(out1.append)
    client = await env.execute_async("key-type")
    await wait_until(lambda: len(out1) == 1, timeout=30)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()
    env2 = sf.StreamExecutionEnvironment().set_parallelism(1)
    set_backend(env2, backend, tmp_path / "after")
    env2.configure({"execution.savepoint.path": path})
    env2.from_collection(data).uid("src").key_by(lambda r: r[1]).process(first()).uid("fn").add_sink(
        lambda v: None
    )
    with pytest.raises(TypeError, match="restored with keys of type str"):
        await (await env2.execute_async("key-type")).get_job_execution_result()
