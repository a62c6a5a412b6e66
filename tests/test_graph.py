"""Logical graph: validation errors and chaining decisions."""

from __future__ import annotations

import pytest

import streamflow as sf
from streamflow import GraphError


def test_job_without_sink_is_refused() -> None:
    env = sf.StreamExecutionEnvironment()
    env.from_collection([1, 2]).map(lambda x: x)
    with pytest.raises(GraphError, match="no sink"):
        env.execute()


def chains(env: sf.StreamExecutionEnvironment) -> list[list[str]]:
    return [[n.name for n in v.nodes] for v in env.get_job_graph().vertices]


def test_forward_operators_fuse_into_one_task() -> None:
    env = sf.StreamExecutionEnvironment()
    env.from_collection([1]).map(str).name("m").filter(bool).name("f").print()
    assert chains(env) == [["collection", "m", "f", "Print"]]


def test_key_by_between_parallelism_one_operators_is_chained() -> None:
    env = sf.StreamExecutionEnvironment()
    env.from_collection([("a", 1)]).key_by(lambda e: e[0]).sum(1).print()
    assert len(chains(env)) == 1


def test_key_by_with_parallelism_breaks_the_chain() -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    env.from_collection([("a", 1)]).map(lambda e: e).key_by(lambda e: e[0]).sum(1).print()
    graph = env.get_job_graph()
    assert [[n.name for n in v.nodes] for v in graph.vertices] == [
        ["collection"],  # a collection source cannot run in parallel
        ["Map"],
        ["Keyed Sum(1)", "Print"],
    ]
    assert [v.parallelism for v in graph.vertices] == [1, 2, 2]


def test_union_consumer_heads_a_new_task() -> None:
    env = sf.StreamExecutionEnvironment()
    a = env.from_collection([1])
    b = env.from_collection([2])
    a.union(b).map(lambda x: x).print()
    assert chains(env) == [["collection"], ["collection"], ["Map", "Print"]]


def test_disable_chaining_everywhere_and_per_operator() -> None:
    env = sf.StreamExecutionEnvironment().disable_operator_chaining()
    env.from_collection([1]).map(str).print()
    assert chains(env) == [["collection"], ["Map"], ["Print"]]
    env = sf.StreamExecutionEnvironment()
    env.from_collection([1]).map(str).start_new_chain().filter(bool).print()
    assert chains(env) == [["collection"], ["Map", "Filter", "Print"]]


def test_duplicate_uid_is_refused_naming_both() -> None:
    env = sf.StreamExecutionEnvironment()
    env.from_collection([1]).map(str).name("first").uid("x").map(str).name("second").uid("x").print()
    with pytest.raises(GraphError, match="'x' is used by both 'first' and 'second'"):
        env.execute()


def test_explicit_forward_needs_equal_parallelism() -> None:
    env = sf.StreamExecutionEnvironment()
    env.from_collection([1]).forward().map(str).set_parallelism(2).print()
    with pytest.raises(GraphError, match="Forward partitioning does not allow change of parallelism"):
        env.execute()


def test_parallelism_beyond_max_parallelism() -> None:
    env = sf.StreamExecutionEnvironment().set_max_parallelism(4)
    env.from_collection([1]).map(str).set_parallelism(5).print()
    with pytest.raises(GraphError, match="exceeds max parallelism 4"):
        env.execute()


def test_branches_without_sink_are_not_run() -> None:
    env = sf.StreamExecutionEnvironment()
    seen: list[int] = []
    src = env.from_collection([1, 2])
    src.map(lambda x: seen.append(x))  # no sink: never runs, as in Flink
    assert list(src.execute_and_collect()) == [1, 2]
    assert seen == []


def test_generated_uids_are_stable_and_explicit_uids_win() -> None:
    def build() -> list[str]:
        env = sf.StreamExecutionEnvironment()
        env.from_collection([1]).map(str).uid("my-map").filter(bool).print()
        g = env.get_job_graph()
        return [g.uid_of(n) for n in g.nodes]

    assert build() == build()
    assert "my-map" in build()


@pytest.mark.parametrize(
    ("parallelism", "expected"),
    [(1, 128), (85, 128), (86, 256), (100, 256), (200, 512), (1000, 2048), (30000, 32768)],
)
def test_an_unset_max_parallelism_is_derived_from_the_parallelism(parallelism: int, expected: int) -> None:
    """Flink's KeyGroupRangeAssignment.computeDefaultMaxParallelism, used when neither the
    environment nor the operator sets one: min(max(roundUpToPowerOfTwo(p + p / 2), 128), 32768).
    Max parallelism was 128 whatever the parallelism, so a job at parallelism 200 was refused
    ("exceeds max parallelism 128") where Flink runs it with 512 key groups."""
    from streamflow.state.key_groups import default_max_parallelism

    assert default_max_parallelism(parallelism) == expected
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    env.from_collection([1]).map(str).name("m").print()
    graph = env.get_job_graph()
    (vertex,) = [v for v in graph.vertices if any(n.name == "m" for n in v.nodes)]
    assert vertex.max_parallelism == expected and not vertex.max_parallelism_configured
    assert env.get_max_parallelism() == env.get_config().get_max_parallelism() == -1  # Flink's unset


def test_get_max_parallelism_answers_what_was_set() -> None:
    """StreamExecutionEnvironment.getMaxParallelism: -1 until set (PipelineOptions.MAX_PARALLELISM's
    default), then the value set, through the environment or its ExecutionConfig."""
    env = sf.StreamExecutionEnvironment()
    assert env.get_max_parallelism() == -1
    env.get_config().set_max_parallelism(256)
    assert env.get_max_parallelism() == 256


def test_a_set_max_parallelism_is_kept_whatever_the_parallelism() -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(100).set_max_parallelism(100)
    env.from_collection([1]).map(str).name("m").rebalance().map(str).name("n").set_max_parallelism(300).print()
    graph = env.get_job_graph()
    by_name = {v.head.name: v for v in graph.vertices}
    assert by_name["m"].max_parallelism == 100 and by_name["n"].max_parallelism == 300
