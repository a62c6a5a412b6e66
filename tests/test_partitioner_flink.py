"""Flink's ``PartitionerITCase``, end to end through PyFlink's partitioning methods.

Source: apache/flink, ``flink-tests/src/test/java/org/apache/flink/test/streaming/runtime/
PartitionerITCase.java`` (``partitionerTest``, ``testForwardFailsLowToHighParallelism``,
``testForwardFailsHightToLowParallelism``). Seven one-field tuples from a one-subtask source
go to a map at parallelism 3 that tags each with its subtask index, through each
partitioning: hash (``key_by``) keeps a key on one subtask, a custom partitioner's answer is
the subtask, broadcast reaches every subtask, rebalance (and forward after a rebalancing map)
deals the records round robin from some first subtask on. Flink's ``global()`` has no PyFlink
name, so it is not ported; ``shuffle`` and ``rescale`` (which PyFlink has) are checked for
their contract (every record once; rescale from one subtask round robin).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import streamflow as sf
from streamflow.graph import GraphError

PARALLELISM = 3
INPUT = list("abcdefg")


class SubtaskIndexAssigner(sf.MapFunction):
    def open(self, runtime_context: Any) -> None:
        self.index = runtime_context.get_index_of_this_subtask()

    def map(self, value: tuple) -> tuple:
        return (self.index, value[0])


def _run(partition: Callable[[Any], Any]) -> list:
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(PARALLELISM)
    src = env.from_collection([(x,) for x in INPUT]).set_parallelism(1)
    return sorted(partition(src).map(SubtaskIndexAssigner()).execute_and_collect(), key=lambda t: t[1])


def _round_robin(result: list) -> None:
    """PartitionerITCase.verifyRebalancePartitioning: in input order, subtasks offset, offset+1, ..."""
    offset = result[0][0]
    assert result == [((offset + i) % PARALLELISM, x) for i, x in enumerate(INPUT)]


def test_hash_partitioning() -> None:
    """partitionerTest, ``keyBy(0)``: a key is on one subtask (here each key once: in range)."""
    result = _run(lambda s: s.key_by(lambda t: t[0]))
    assert [x for _, x in result] == INPUT and all(0 <= i < PARALLELISM for i, _ in result)
    env = sf.StreamExecutionEnvironment()  # every record of a key on one subtask
    env.set_parallelism(PARALLELISM)
    twice = env.from_collection([(x,) for x in INPUT * 3]).key_by(lambda t: t[0]).map(SubtaskIndexAssigner())
    seen: dict[str, set] = {}
    for index, key in twice.execute_and_collect():
        seen.setdefault(key, set()).add(index)
    assert sorted(seen) == INPUT and all(len(s) == 1 for s in seen.values())


def test_custom_partitioning() -> None:
    """partitionerTest, ``partitionCustom``: "c" to subtask 2, everything else to subtask 0."""
    result = _run(lambda s: s.partition_custom(lambda key, n: 2 if key == "c" else 0, lambda t: t[0]))
    assert result == [(2 if x == "c" else 0, x) for x in INPUT]


def test_broadcast_partitioning() -> None:
    """partitionerTest, ``broadcast()``: every record on every subtask, once."""
    result = _run(lambda s: s.broadcast())
    assert sorted(result) == sorted((i, x) for i in range(PARALLELISM) for x in INPUT)


@pytest.mark.parametrize(
    "partition",
    [lambda s: s.rebalance(), lambda s: s.map(lambda v: v).forward(), lambda s: s.rescale()],
    ids=["rebalance", "forward-after-rebalancing-map", "rescale"],
)
def test_round_robin_partitioning(partition: Callable[[Any], Any]) -> None:
    """partitionerTest, ``rebalance()`` and ``map().forward()`` (the map at parallelism 3
    after the one-subtask source is a rebalance; forward keeps its subtasks)."""
    _round_robin(_run(partition))


def test_shuffle_partitioning() -> None:
    """``shuffle()``: every record once, on some subtask."""
    result = _run(lambda s: s.shuffle())
    assert [x for _, x in result] == INPUT and all(0 <= i < PARALLELISM for i, _ in result)


@pytest.mark.parametrize("direction", ["low-to-high", "high-to-low"])
def test_forward_fails_on_a_change_of_parallelism(direction: str) -> None:
    """testForwardFailsLowToHighParallelism / testForwardFailsHightToLowParallelism: forward
    between operators of different parallelism is refused."""
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(PARALLELISM)
    with pytest.raises(GraphError, match="Forward partitioning does not allow change of parallelism"):
        if direction == "low-to-high":
            src = env.from_collection([1, 2, 3]).set_parallelism(1)
            list(src.forward().map(lambda v: v).execute_and_collect())
        else:
            src = env.from_collection([1, 2, 3]).map(lambda v: v)
            list(src.forward().map(lambda v: v).set_parallelism(1).execute_and_collect())
