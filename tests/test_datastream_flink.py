"""Ports of Flink's ``DataStreamTest`` cases that apply to a Python user.

Source: flink-streaming-java/src/test/java/org/apache/flink/streaming/api/DataStreamTest.java
(and the validation it exercises: ``OperatorValidationUtils``, ``StreamGraph.addEdgeInternal``,
``DataStream.union``). Each test names the Flink test it ports. The graph is inspected through
``env.get_job_graph()`` and ``env.get_execution_plan()``, streamflow's counterparts of
``env.getStreamGraph()`` and ``env.getExecutionPlan()``.
"""

from __future__ import annotations

import json

import pytest

import streamflow as sf
from streamflow import GraphError
from streamflow.common import Types
from streamflow.datastream.data_stream import KeyedStream
from streamflow.datastream.functions import CoMapFunction
from streamflow.graph import Partitioning


class _Identity2(CoMapFunction):
    def map1(self, value: object) -> object:
        return value

    def map2(self, value: object) -> object:
        return value


def _env(parallelism: int = 4) -> sf.StreamExecutionEnvironment:
    return sf.StreamExecutionEnvironment().set_parallelism(parallelism)


def _in_edges(env: sf.StreamExecutionEnvironment, name: str) -> list[tuple[str, Partitioning]]:
    """(upstream name, partitioning) of the node called ``name`` (Flink: getInEdges())."""
    graph = env.get_job_graph()
    (node,) = [n for n in graph.nodes if n.name == name]
    return [(e.upstream.name, e.partitioning) for e in node.inputs]


def test_union_self_and_differing_parallelism_and_partitioning() -> None:
    """DataStreamTest.testUnion: a self-union has two forward in-edges; a self-union with one
    broadcast side has a forward and a broadcast edge; a union of inputs of parallelism 4 and 2
    into an operator of parallelism 4 keeps forward from the first (the second, forward between
    different parallelism, runs as rebalance: Flink's RebalancePartitioner)."""
    env = _env(4)
    src = env.from_collection([0], type_info=Types.LONG())
    in1 = src.map(lambda x: x).name("in1")
    in1.union(in1).map(lambda x: x).name("selfUnion").print()
    in6 = src.map(lambda x: x).name("in6")
    in6.broadcast().union(in6).map(lambda x: x).name("selfUnionDiff").print()
    in2 = src.map(lambda x: x).name("in2").set_parallelism(4)
    in3 = src.map(lambda x: x).name("in3").set_parallelism(2)
    in2.union(in3).map(lambda x: x).name("unionPar").set_parallelism(4).print()
    in4 = src.map(lambda x: x).name("in4").set_parallelism(2)
    in5 = src.map(lambda x: x).name("in5").set_parallelism(4)
    in4.broadcast().union(in5).map(lambda x: x).name("unionPart").set_parallelism(4).print()

    assert _in_edges(env, "selfUnion") == [("in1", Partitioning.FORWARD)] * 2
    assert sorted(p.value for _, p in _in_edges(env, "selfUnionDiff")) == ["broadcast", "forward"]
    plan = json.loads(env.get_execution_plan())
    (union_par,) = [n for n in plan["nodes"] if n["contents"] == "unionPar"]
    by_id = {n["id"]: n["contents"] for n in plan["nodes"]}
    ships = {by_id[p["id"]]: p["ship_strategy"] for p in union_par["predecessors"]}
    assert ships == {"in2": "FORWARD", "in3": "REBALANCE"}
    assert dict(_in_edges(env, "unionPart")) == {"in4": Partitioning.BROADCAST, "in5": Partitioning.FORWARD}


def test_union_of_streams_of_different_types_is_refused() -> None:
    """DataStream.union (exercised by DataStreamTest's union cases): Flink refuses a union of
    streams of different types with "Cannot union streams of different types: Integer and String"."""
    env = _env(1)
    ints = env.from_collection([1], type_info=Types.INT())
    strings = env.from_collection(["a"], type_info=Types.STRING())
    with pytest.raises(ValueError, match="Cannot union streams of different types"):
        ints.union(strings)
    assert ints.union(env.from_collection([2], type_info=Types.INT())).get_type() == Types.INT()


def test_naming_shows_in_the_execution_plan() -> None:
    """DataStreamTest.testNaming: names given with name() appear in the execution plan."""
    env = _env(1)
    s1 = env.from_collection([0]).name("testSource1").map(lambda x: x).name("testMap")
    s2 = env.from_collection([0]).name("testSource2").map(lambda x: x).name("testMap")
    s1.connect(s2).map(_Identity2()).name("testCoFlatMap").print()
    plan = env.get_execution_plan()
    for name in ("testSource1", "testSource2", "testMap", "testCoFlatMap"):
        assert name in plan


def test_partitioning_methods_set_their_partitioner() -> None:
    """DataStreamTest.testPartitioning / testChannelSelectors: key_by gives a hash edge and a keyed
    stream, partition_custom a custom edge and a non-keyed stream; shuffle, rebalance, rescale,
    broadcast and forward set their partitioner (Flink's ShufflePartitioner, RebalancePartitioner,
    RescalePartitioner, BroadcastPartitioner, ForwardPartitioner)."""
    env = _env(1)
    src = env.from_collection([(0, 0)]).name("src")
    src.key_by(lambda t: t[0]).map(lambda x: x).name("keyed").print()
    src.partition_custom(lambda key, n: 0, lambda t: t[0]).map(lambda x: x).name("custom").print()
    for method in ("shuffle", "rebalance", "rescale", "broadcast", "forward"):
        getattr(src, method)().map(lambda x: x).name(method).print()
    assert _in_edges(env, "keyed") == [("src", Partitioning.HASH)]
    assert _in_edges(env, "custom") == [("src", Partitioning.CUSTOM)]
    for method in ("shuffle", "rebalance", "rescale", "broadcast", "forward"):
        assert _in_edges(env, method) == [("src", Partitioning(method))]
    assert isinstance(src.key_by(lambda t: t[0]), KeyedStream)
    assert not isinstance(src.partition_custom(lambda key, n: 0, lambda t: t[0]), KeyedStream)


def test_set_parallelism_zero_is_refused() -> None:
    """DataStreamTest.testParallelism (OperatorValidationUtils.validateParallelism): "The
    parallelism of an operator must be at least 1." on the operator and the environment."""
    env = _env(1)
    mapped = env.from_collection([1]).map(lambda x: x)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="parallelism"):
            mapped.set_parallelism(bad)
        with pytest.raises(ValueError, match="parallelism"):
            env.set_parallelism(bad)


@pytest.mark.parametrize("bad", [0, -1, 32769])
def test_operator_max_parallelism_out_of_bounds_is_refused(bad: int) -> None:
    """DataStreamTest.testMaxParallelism (OperatorValidationUtils.validateMaxParallelism): an
    operator's max parallelism must be in 1..32768 (KeyGroupRangeAssignment.UPPER_BOUND_MAX_
    PARALLELISM); Flink refuses at the call, as env.set_max_parallelism already does."""
    env = _env(1)
    mapped = env.from_collection([1]).map(lambda x: x)
    with pytest.raises(ValueError, match="maximum parallelism"):
        mapped.set_max_parallelism(bad)
    with pytest.raises(ValueError, match="max parallelism"):
        env.set_max_parallelism(bad)
    assert mapped.set_max_parallelism(32768) is mapped


def test_parallelism_above_max_parallelism_is_refused() -> None:
    """DataStreamTest.testParallelism with setMaxParallelism: an operator whose parallelism
    exceeds its max parallelism cannot run (Flink's ExecutionJobVertex: "The vertex's
    parallelism (4) is higher than the max parallelism (2)")."""
    env = _env(1)
    env.from_collection([1]).map(lambda x: x).set_max_parallelism(2).set_parallelism(4).print()
    with pytest.raises(GraphError, match="exceeds max parallelism 2"):
        env.get_job_graph()


def test_forward_with_different_parallelism_is_refused_with_flinks_message() -> None:
    """DataStreamTest.testForwardFailsLowToHighParallelism / testForwardFailsHighToLowParallelism
    (StreamGraph.addEdgeInternal): "Forward partitioning does not allow change of parallelism.
    Upstream operation: ... parallelism: 2, downstream operation: ... parallelism: 4 You must use
    another partitioning strategy, such as broadcast, rebalance, shuffle or global."."""
    for up, down in ((2, 4), (4, 2)):
        env = _env(1)
        src = env.from_collection([1])
        src.map(lambda x: x).name("up").set_parallelism(up).forward().map(lambda x: x).name(
            "down").set_parallelism(down).print()
        with pytest.raises(GraphError) as err:
            env.execute()
        message = str(err.value)
        assert "Forward partitioning does not allow change of parallelism" in message
        assert f"parallelism: {up}, downstream operation: 'down' parallelism: {down}" in message
        assert "such as broadcast, rebalance, shuffle or global" in message


def test_forward_with_equal_parallelism_runs() -> None:
    """DataStreamTest.testForwardFailsLowToHighParallelism's counterpart: forward() between equal
    parallelism is accepted and keeps every record."""
    env = _env(2)
    out = env.from_collection([1, 2, 3]).rebalance().map(lambda x: x * 10).forward().map(
        lambda x: x + 1).execute_and_collect()
    assert sorted(out) == [11, 21, 31]


def test_duplicate_uid_is_refused() -> None:
    """StreamGraphGenerator's uid check (DataStreamTest / StreamGraphGeneratorTest
    testDuplicateUid...): two operators with the same uid cannot form a job."""
    env = _env(1)
    src = env.from_collection([1])
    src.map(lambda x: x).uid("same").map(lambda x: x).uid("same").print()
    with pytest.raises(GraphError, match="'same' is used by both"):
        env.execute()


def test_empty_uid_is_refused() -> None:
    """Transformation.setUid: Flink's Preconditions refuse an empty uid."""
    env = _env(1)
    with pytest.raises(ValueError, match="uid"):
        env.from_collection([1]).map(lambda x: x).uid("")


def test_slot_sharing_group_is_kept_on_the_operator() -> None:
    """DataStreamTest.testSlotSharingGroup... (StreamGraphGeneratorTest): the group set on an
    operator is reported for it; an operator without one is not assigned that group by name."""
    env = _env(1)
    env.from_collection([1]).map(lambda x: x).name("m").slot_sharing_group("group1").print()
    plan = json.loads(env.get_execution_plan())
    groups = {n["contents"]: n.get("slot_sharing_group") for n in plan["nodes"]}
    assert groups["m"] == "group1"


@pytest.mark.parametrize(
    "key_type",
    [
        Types.PRIMITIVE_ARRAY(Types.INT()),  # DataStreamTest.testPrimitiveArrayKeyRejection
        Types.BASIC_ARRAY(Types.INT()),  # DataStreamTest.testBasicArrayKeyRejection
        Types.OBJECT_ARRAY(Types.STRING()),  # DataStreamTest.testObjectArrayKeyRejection
        Types.TUPLE([Types.INT(), Types.PRIMITIVE_ARRAY(Types.INT())]),  # testTupleNestedArrayKeyRejection
        Types.ROW([Types.STRING(), Types.BASIC_ARRAY(Types.LONG())]),  # (a Row is Flink's TupleTypeInfoBase)
    ],
)
def test_key_types_flink_cannot_hash_are_refused(key_type: object) -> None:
    """DataStreamTest.test*ArrayKeyRejection (KeyedStream.validateKeyType): an array type, also
    nested in a tuple or row key, "cannot be used as key. Contained UNSUPPORTED key types: ..."."""
    env = _env(1)
    with pytest.raises(ValueError, match=r"cannot be used as key\. Contained UNSUPPORTED key types"):
        env.from_collection([1]).key_by(lambda x: x, key_type=key_type)


def test_hashable_declared_key_types_are_accepted() -> None:
    """KeyedStream.validateKeyType accepts basic, tuple, row, list and map key types; the records
    are keyed by them."""
    env = _env(2)
    for key_type in (Types.INT(), Types.TUPLE([Types.INT(), Types.STRING()]), Types.LIST(Types.INT()),
                     Types.MAP(Types.INT(), Types.INT()), Types.ROW([Types.INT()])):
        env.from_collection([1]).key_by(lambda x: x, key_type=key_type)
    out = env.from_collection([(1, "a"), (1, "b")]).key_by(
        lambda t: (t[0],), key_type=Types.TUPLE([Types.INT()])).reduce(
        lambda a, b: (a[0], a[1] + b[1])).execute_and_collect()
    assert sorted(out) == [(1, "a"), (1, "ab")]


def test_uid_hash_must_be_32_hex_characters() -> None:
    """Transformation.setUidHash (DataStreamTest / StreamGraphHasherV2Test's user hash cases):
    "Node hash must be a 32 character String that describes a hex code. Found: ..."; on an
    operator and on a sink. A valid hash is kept as the operator's state id."""
    env = _env(1)
    mapped = env.from_collection([1]).map(lambda x: x)
    sink = mapped.print()
    for bad in ("h", "0" * 31, "g" * 32, "0" * 33):
        with pytest.raises(ValueError, match="Node hash must be a 32 character String"):
            mapped.set_uid_hash(bad)
        with pytest.raises(ValueError, match="Node hash must be a 32 character String"):
            sink.set_uid_hash(bad)
    good = "0123456789abcdefABCDEF0123456789"
    assert mapped.set_uid_hash(good) is mapped
    assert sink.set_uid_hash(good.lower()) is sink
    assert env.get_job_graph().uid_of(mapped._node) == good


def test_non_parallel_operators_refuse_another_parallelism() -> None:
    """DataStreamTest.testParallelism (OperatorValidationUtils.validateParallelism(p, false)): a
    non-parallel source (fromElements), a window_all result and an operator after
    force_non_parallel() refuse set_parallelism(3) at the call: "The parallelism of non parallel
    operator must be 1."; set_parallelism(1) is accepted."""
    env = _env(10)
    src = env.from_collection([1, 2, 3])
    mapped = src.map(lambda x: x)
    windowed = mapped.count_window_all(2).reduce(lambda a, b: a + b)
    forced = mapped.map(lambda x: x).force_non_parallel()
    for stream in (src, windowed, forced):
        with pytest.raises(ValueError, match="The parallelism of non parallel operator must be 1"):
            stream.set_parallelism(3)
        assert stream.set_parallelism(1) is stream
    assert mapped.set_parallelism(3) is mapped


def test_operator_parallelism_is_fixed_when_created() -> None:
    """DataStreamTest.testParallelism: after env.setParallelism(10) the map gets 10; a later
    env.setParallelism(7) does not change it."""
    env = _env(10)
    mapped = env.from_collection([1]).map(lambda x: x).name("m")
    mapped.print()
    env.set_parallelism(7)
    graph = env.get_job_graph()
    (node,) = [n for n in graph.nodes if n.name == "m"]
    assert graph.parallelism[node.id] == 10


def test_custom_partitioner_routes_by_key_and_out_of_range_channel_fails_the_job() -> None:
    """DataStreamTest.testPartitioning's custom partitioner (CustomPartitionerWrapper.selectChannel:
    partitioner.partition(key, numberOfChannels)): the chosen channel receives the record; a
    partitioner returning 100 of 2 channels fails the job (Flink's record writer cannot emit to
    a channel that does not exist), naming the channel."""
    env = _env(2)
    out = env.from_collection([1, 2, 3, 4]).partition_custom(lambda key, n: key % n, lambda x: x).map(
        lambda x: x * 10).execute_and_collect()
    assert sorted(out) == [10, 20, 30, 40]
    env2 = _env(2)
    stream = env2.from_collection([1]).partition_custom(lambda key, n: 100, lambda x: x).map(lambda x: x)
    with pytest.raises(Exception, match="channel 100"):
        list(stream.execute_and_collect())
