"""Keyed state rescaled across savepoints, ported from Flink's
``flink-tests/src/test/java/org/apache/flink/test/checkpointing/RescalingITCase.java``:
``testSavepointRescalingInKeyedState``, ``testSavepointRescalingOutKeyedState``,
``testSavepointRescalingInKeyedStateDerivedMaxParallelism``,
``testSavepointRescalingOutKeyedStateDerivedMaxParallelism`` (42 keys, max parallelism 13,
parallelism 4 <-> 2; volumes scaled down), plus the max parallelism rule of
``StateAssignmentOperation.checkParallelismPreconditions`` the derived cases rely on.

Flink's ``SubtaskIndexFlatMapper`` keeps per key a counter and a sum in keyed ``ValueState``
and emits ``(subtask index, sum)`` once the key's count reaches the target; the expected
subtask is the one owning the key's key group (``KeyGroupRangeAssignment``), so the test
proves both that the state moved and that it moved to the subtask owning its key group.
The operator list state variants (``CHECKPOINTED_FUNCTION``, ``LIST_CHECKPOINTED``) are not
ported: streamflow, like PyFlink, has no user-facing ``CheckpointedFunction``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_checkpointing import Gate, wait_until

import streamflow as sf
from streamflow.common import Types
from streamflow.state.key_groups import key_group_of, subtask_of_key_group

KEYS = 42
MAX_PARALLELISM = 13
N1, N2 = 20, 10


class SubtaskIndexFlatMapper(sf.KeyedProcessFunction):
    """Flink's ``SubtaskIndexFlatMapper``: sums the key's values; at ``target`` records of the
    key emits ``(subtask index, sum)``."""

    def __init__(self, target: int) -> None:
        self.target = target

    def open(self, ctx: sf.RuntimeContext) -> None:
        self.index = ctx.get_index_of_this_subtask()
        self.count = ctx.get_state(sf.ValueStateDescriptor("count", Types.INT()))
        self.sum = ctx.get_state(sf.ValueStateDescriptor("sum", Types.INT()))

    def process_element(self, value: int, ctx: Any) -> Any:
        count = (self.count.value() or 0) + 1
        total = (self.sum.value() or 0) + value
        self.count.update(count)
        self.sum.update(total)
        if count == self.target:
            yield (self.index, total)


def data() -> list[int]:
    return [key for _ in range(N1 + N2) for key in range(KEYS)]


def expected(parallelism: int, per_key: int) -> set[tuple[int, int]]:
    return {
        (subtask_of_key_group(key_group_of(k, MAX_PARALLELISM), MAX_PARALLELISM, parallelism), per_key * k)
        for k in range(KEYS)
    }


def keyed_job(
    env: sf.StreamExecutionEnvironment, source: sf.DataStream, target: int, max_parallelism: int | None
) -> list:
    out: list = []
    keyed = source.uid("src").key_by(lambda k: k).process(SubtaskIndexFlatMapper(target)).uid("flatmap")
    if max_parallelism is not None:
        keyed.set_max_parallelism(max_parallelism)
    keyed.add_sink(out.append)
    return out


def environment(parallelism: int, backend: str) -> sf.StreamExecutionEnvironment:
    """Flink's parameters ``filesystem`` and ``rocksdb``: the heap and the RocksDB backend."""
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    if backend == "rocksdb":
        env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    return env


async def savepoint_of_first_job(tmp_path: Path, parallelism: int, backend: str = "heap") -> tuple[str, list]:
    env = environment(parallelism, backend)
    gate = Gate(data(), N1 * KEYS)
    out = keyed_job(env, env.from_async_iterable(gate.__aiter__).set_parallelism(1), N1, MAX_PARALLELISM)
    client = await env.execute_async("rescaling")
    await wait_until(lambda: len(out) == KEYS, timeout=20.0)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)
    return path, out


@pytest.mark.parametrize("derive_max_parallelism", [False, True], ids=["explicit", "derived"])
@pytest.mark.parametrize("scale_out", [False, True], ids=["in", "out"])
@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
async def test_savepoint_rescaling_keyed_state(
    tmp_path: Path, backend: str, scale_out: bool, derive_max_parallelism: bool
) -> None:
    """``testSavepointRescaling{In,Out}KeyedState[DerivedMaxParallelism]``."""
    p1, p2 = (2, 4) if scale_out else (4, 2)
    path, out1 = await savepoint_of_first_job(tmp_path, p1, backend)
    assert set(out1) == expected(p1, N1)
    env = environment(p2, backend)
    env.configure({"execution.savepoint.path": path})
    out2 = keyed_job(
        env,
        env.from_collection(data()).set_parallelism(1),
        N1 + N2,
        None if derive_max_parallelism else MAX_PARALLELISM,
    )
    await (await env.execute_async("rescaled")).get_job_execution_result()
    assert set(out2) == expected(p2, N1 + N2)
    assert len(out2) == KEYS


async def test_an_explicit_other_max_parallelism_is_refused(tmp_path: Path) -> None:
    """Flink's ``StateAssignmentOperation.checkParallelismPreconditions``: keyed state of max
    parallelism 13 cannot restore into an operator configured with another max parallelism
    (its key groups would mean other keys)."""
    path, _ = await savepoint_of_first_job(tmp_path, 2)
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    env.configure({"execution.savepoint.path": path})
    keyed_job(env, env.from_collection(data()).set_parallelism(1), N1 + N2, 17)
    with pytest.raises(sf.StateMismatchError, match="flatmap"):
        await (await env.execute_async("rescaled")).get_job_execution_result()


async def test_a_parallelism_above_the_restored_max_parallelism_is_refused(tmp_path: Path) -> None:
    """``checkParallelismPreconditions``: the new parallelism may not exceed the max
    parallelism the state was written with (some subtask would own no key group)."""
    path, _ = await savepoint_of_first_job(tmp_path, 2)
    env = sf.StreamExecutionEnvironment().set_parallelism(MAX_PARALLELISM + 1)
    env.configure({"execution.savepoint.path": path})
    keyed_job(env, env.from_collection(data()).set_parallelism(1), N1 + N2, None)
    with pytest.raises(sf.StateMismatchError):
        await (await env.execute_async("rescaled")).get_job_execution_result()
