"""Ports of Flink's operator-chaining rules and their tests.

Sources: flink-streaming-java/src/main/java/org/apache/flink/streaming/api/graph/
StreamingJobGraphGenerator.java (``isChainable``: one input edge; ``isChainableInput``: same slot
sharing group, chainable strategies, ForwardPartitioner, equal parallelism, chaining enabled) and
flink-streaming-java/src/test/java/org/apache/flink/streaming/api/graph/
StreamingJobGraphGeneratorTest.java. A chain is one task, named as Flink names its job vertex:
the operator names joined by ``" -> "``.
"""

from __future__ import annotations

import pytest

import streamflow as sf
from streamflow.datastream.functions import CoMapFunction


class _Both(CoMapFunction):
    def map1(self, value: object) -> object:
        return value

    def map2(self, value: object) -> object:
        return value


def _chains(env: sf.StreamExecutionEnvironment) -> list[str]:
    """The job vertices' names, sources first (Flink: getVerticesSortedTopologicallyFromSources)."""
    return [v.name for v in env.get_job_graph().vertices]


def _env(parallelism: int) -> sf.StreamExecutionEnvironment:
    return sf.StreamExecutionEnvironment().set_parallelism(parallelism)


def test_chain_start_end_setting() -> None:
    """StreamingJobGraphGeneratorTest.testChainStartEndSetting: at parallelism 2, fromElements
    (non-parallel) -> CHAIN(Map -> Print); the source is a chain of its own."""
    env = _env(2)
    env.from_collection([1, 2, 3]).map(lambda x: x).print()
    assert _chains(env) == ["collection", "Map -> Print"]


def test_task_names_are_the_chained_operator_names() -> None:
    """StreamingJobGraphGeneratorTest.testChainStartEndSetting, observed at run time: the task
    of the chain (Flink's job vertex name "Map -> Print") names its metrics."""
    env = _env(2)
    env.from_collection([1, 2, 3]).map(lambda x: x).print()
    metrics = env.execute().metrics
    assert metrics["Map -> Print (1/2).numRecordsIn"] + metrics["Map -> Print (2/2).numRecordsIn"] == 3


def test_source_map_filter_chain_and_keyed_reduce_sink_chain() -> None:
    """StreamingJobGraphGeneratorTest.testResourcesForChainedSourceSink's topology:
    CHAIN(Source -> Map -> Filter) and, after key_by (a hash edge), CHAIN(Keyed Reduce -> Sink)."""
    env = _env(2)
    env.from_collection([(0, 1)]).map(lambda t: t).set_parallelism(1).filter(bool).set_parallelism(
        1).key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).print()
    assert _chains(env) == ["collection -> Map -> Filter", "Keyed Reduce -> Print"]


def test_forward_then_rescale_to_other_parallelism() -> None:
    """StreamingJobGraphGeneratorTest.testShuffleModePipelined: fromElements -> forward -> map
    (parallelism 1) chain; rescale to print at parallelism 2 starts another chain."""
    env = _env(1)
    env.from_collection([1, 2, 3]).forward().map(lambda x: x).set_parallelism(1).rescale().print(
        ).set_parallelism(2)
    assert _chains(env) == ["collection -> Map", "Print"]


@pytest.mark.xfail(
    strict=True,
    reason="divergence kept by design (graph.py): streamflow chains over a hash/rebalance edge "
    "between two operators of parallelism 1 (the partitioning is the identity), saving a channel; "
    "Flink's isChainableInput requires a ForwardPartitioner, so Flink has two tasks here",
)
def test_parallelism_one_not_chained() -> None:
    """StreamingJobGraphGeneratorTest.testParallelismOneNotChained: at parallelism 1,
    CHAIN(Source -> Map) and, after keyBy, CHAIN(Map -> Sink): two vertices, not one."""
    env = _env(1)
    env.from_collection(["a", "b"]).map(lambda v: (v, v)).key_by(lambda t: t[0]).map(
        lambda t: t).print()
    assert _chains(env) == ["collection -> Map", "Map -> Print"]


def test_non_forward_edge_at_equal_parallelism_is_not_chained() -> None:
    """StreamingJobGraphGenerator.isChainableInput: only a ForwardPartitioner chains; rebalance,
    shuffle, rescale and broadcast between equal parallelism (2) keep separate tasks."""
    for method in ("rebalance", "shuffle", "rescale", "broadcast"):
        env = _env(2)
        mapped = env.from_collection([1]).map(lambda x: x).name("a")
        getattr(mapped, method)().map(lambda x: x).name("b").print()
        assert _chains(env) == ["collection", "a", "b -> Print"], method


def test_different_parallelism_is_not_chained() -> None:
    """StreamingJobGraphGenerator.isChainableInput: upStreamVertex.getParallelism() ==
    downStreamVertex.getParallelism(); the implicit forward edge becomes rebalance."""
    env = _env(2)
    env.from_collection([1]).map(lambda x: x).name("a").map(lambda x: x).name("b").set_parallelism(
        3).print()
    assert _chains(env) == ["collection", "a", "b", "Print"]


def test_disable_chaining_isolates_the_operator() -> None:
    """StreamingJobGraphGenerator.areOperatorsChainable with ChainingStrategy.NEVER
    (disableChaining()): the operator joins no chain and nothing joins it."""
    env = _env(2)
    env.from_collection([1]).map(lambda x: x).name("a").map(lambda x: x).name(
        "b").disable_chaining().map(lambda x: x).name("c").print()
    assert _chains(env) == ["collection", "a", "b", "c -> Print"]


def test_start_new_chain_begins_a_chain_that_others_join() -> None:
    """StreamingJobGraphGenerator.areOperatorsChainable with ChainingStrategy.HEAD
    (startNewChain()): the operator does not join its input's chain; its consumer joins it."""
    env = _env(2)
    env.from_collection([1]).map(lambda x: x).name("a").map(lambda x: x).name(
        "b").start_new_chain().map(lambda x: x).name("c").print()
    assert _chains(env) == ["collection", "a", "b -> c -> Print"]


def test_env_disable_operator_chaining() -> None:
    """StreamingJobGraphGenerator.isChainableInput: streamGraph.isChainingEnabled();
    env.disableOperatorChaining() makes every operator a task of its own."""
    env = _env(1)
    env.disable_operator_chaining()
    env.from_collection([1]).map(lambda x: x).name("a").filter(bool).name("b").print()
    assert _chains(env) == ["collection", "a", "b", "Print"]
    env2 = _env(1)
    assert env2.is_chaining_enabled()


def test_two_input_operator_is_not_chained_to_its_inputs() -> None:
    """StreamingJobGraphGenerator.isChainable: downStreamVertex.getInEdges().size() == 1; a
    connect()ed operator heads its own chain, its consumer joins it."""
    env = _env(2)
    a = env.from_collection([1]).map(lambda x: x).name("a")
    b = env.from_collection([2]).map(lambda x: x).name("b")
    a.connect(b).map(_Both()).name("co").map(lambda x: x).name("after").print()
    assert _chains(env) == ["collection", "a", "collection", "b", "co -> after -> Print"]


def test_union_consumer_is_not_chained_even_to_a_self_union() -> None:
    """StreamingJobGraphGenerator.isChainable: a union's consumer has two in-edges (a self-union
    too, DataStreamTest.testUnion), so it is not chained to either input."""
    env = _env(2)
    a = env.from_collection([1]).map(lambda x: x).name("a")
    a.union(a).map(lambda x: x).name("u").print()
    assert _chains(env) == ["collection", "a", "u -> Print"]
    out = _env(2)
    s = out.from_collection([1, 2]).map(lambda x: x)
    assert sorted(s.union(s).map(lambda x: x * 10).execute_and_collect()) == [10, 10, 20, 20]


def test_different_slot_sharing_group_breaks_the_chain() -> None:
    """StreamingJobGraphGenerator.isChainableInput: upStreamVertex.isSameSlotSharingGroup(
    downStreamVertex). An operator without a group takes its input's (StreamGraphGenerator.
    determineSlotSharingGroup), so it still chains to an operator of another group."""
    env = _env(2)
    env.from_collection([1]).map(lambda x: x).name("a").map(lambda x: x).name(
        "b").slot_sharing_group("other").map(lambda x: x).name("c").print()
    assert _chains(env) == ["collection", "a", "b -> c -> Print"]


def test_same_explicit_slot_sharing_group_chains() -> None:
    """StreamingJobGraphGeneratorTest (slot sharing cases): operators set to the same group chain
    as without groups; a record still flows through every operator."""
    env = _env(2)
    env.from_collection([1]).map(lambda x: x).name("a").slot_sharing_group("g").map(
        lambda x: x + 1).name("b").slot_sharing_group("g").print()
    assert _chains(env) == ["collection", "a -> b -> Print"]
    env2 = _env(2)
    out = env2.from_collection([1, 2]).map(lambda x: x).slot_sharing_group("g").map(
        lambda x: x + 1).slot_sharing_group("h").execute_and_collect()
    assert sorted(out) == [2, 3]


def test_input_groups_that_differ_give_the_default_group() -> None:
    """StreamGraphGenerator.determineSlotSharingGroup: inputs in different groups leave the
    operator in "default"; its consumer in "default" chains to it, one in the inputs' group not."""
    env = _env(2)
    a = env.from_collection([1]).map(lambda x: x).name("a").slot_sharing_group("x")
    b = env.from_collection([2]).map(lambda x: x).name("b").slot_sharing_group("y")
    a.connect(b).map(_Both()).name("co").map(lambda x: x).name("d").map(lambda x: x).name(
        "e").slot_sharing_group("x").print()
    assert _chains(env)[-2:] == ["co -> d", "e -> Print"]
