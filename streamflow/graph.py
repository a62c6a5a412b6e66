"""The logical dataflow graph, its validation, and operator chaining.

API calls append :class:`StreamNode` objects; nothing runs until the job is
executed. :func:`build_job_graph` then

1. keeps the nodes that lead to a sink (as Flink, a branch without a sink is
   not executed) and refuses a job without sinks;
2. resolves parallelism and validates: unique uids, forward edges between
   equal parallelism, parallelism within max parallelism, sources that cannot
   run in parallel;
3. *chains*: a node joins its upstream's chain when it has exactly one input
   edge and that edge is forward with equal parallelism (or connects two
   nodes of parallelism 1, where every partitioning is the identity, except in a batch
   job with blocking exchanges: there, as in Flink, only a forward edge chains, since every
   other edge is a blocking exchange between pipelined regions, ``runtime/regions.py``), and
   both are in the same slot sharing group (Flink's rule), unless chaining is
   disabled. A chain becomes one task per subtask; chained
   operators call each other directly, with no channel in between.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import StreamflowError
from .state.key_groups import default_max_parallelism as derived_max_parallelism

if TYPE_CHECKING:
    from .connectors.base import Source
    from .runtime.factory import OperatorFactory


class GraphError(StreamflowError, ValueError):
    """The dataflow cannot run as written; the message names the operator."""


class Partitioning(enum.Enum):
    FORWARD = "forward"
    HASH = "hash"
    REBALANCE = "rebalance"
    BROADCAST = "broadcast"
    SHUFFLE = "shuffle"  # a random channel per record
    RESCALE = "rescale"  # round robin over the channels of a pointwise group
    CUSTOM = "custom"  # the user's partitioner picks the channel from the record's key


class Chaining(enum.Enum):
    ALWAYS = "always"  # may join the upstream chain
    HEAD = "head"  # starts a new chain, downstream may join it
    NEVER = "never"  # neither joins nor is joined


@dataclass(eq=False)
class Edge:
    upstream: StreamNode
    partitioning: Partitioning
    side_tag: str | None = None  # read the upstream's side output instead of its main output
    key_selector: Callable[[Any], Any] | None = None
    explicit: bool = False  # partitioning chosen by the user (rebalance(), broadcast())
    input_index: int = 0  # which input of a two-input operator (connect()) this edge feeds
    partitioner: Callable[[Any, int], int] | None = None  # CUSTOM: (key, channels) -> channel


@dataclass(eq=False)
class StreamNode:
    id: int
    name: str
    operator_factory: OperatorFactory | None  # None for sources
    source: Source | None = None
    inputs: list[Edge] = field(default_factory=list)
    parallelism: int | None = None
    max_parallelism: int | None = None
    uid: str | None = None
    chaining: Chaining = Chaining.ALWAYS
    is_sink: bool = False
    keyed: bool = False
    # a non-keyed two-input operator with exactly one keyed input: that input's key selector
    # (the other None); a batch job sorts that input (runtime/half_sorted_input.py)
    half_keys: tuple[Any, Any] | None = None
    # batch mode: the input (0-based) read to its end before the other (a non-keyed broadcast
    # operator's broadcast input: runtime/input_selection.py), or None
    batch_reads_first: int | None = None
    description: str | None = None
    slot_sharing_group: str | None = None  # shown in the plan; breaks chains (one process has one slot)
    rescalable: bool = False  # non-keyed state any parallelism may restore (broadcast state)
    # the record type declared for the node's main output (key None) or a side output (its tag):
    # names the codec of its in-flight records in unaligned checkpoints (checkpoint/channel_types.py)
    declared_types: dict[str | None, Any] = field(default_factory=dict)
    # the type each side output was requested with (get_side_output): Flink refuses the same id
    # requested again with another type (SingleOutputStreamOperator#getSideOutput)
    requested_side_outputs: dict[str, Any] = field(default_factory=dict)
    # a source's watermark alignment (group, max drift ms, update interval ms), from from_source()'s
    # strategy (runtime/watermark_alignment.py)
    watermark_alignment: tuple[str, int, int] | None = None
    # a node from_source() appended after its source (the watermark strategy's operator, the
    # conversion to the declared type): part of Flink's source operator, so it runs at the
    # source's parallelism and max parallelism
    inside_source: StreamNode | None = None
    # unless its own parallelism is set, the node runs at this node's parallelism: Flink's
    # assignTimestampsAndWatermarks matches its input's parallelism (1:1 with a non-parallel source)
    parallelism_of: StreamNode | None = None
    has_committer: bool = False  # a two-phase sink: Flink's plan shows its Writer and Committer
    non_parallel: bool = False  # force_non_parallel() (window_all): set_parallelism(p != 1) refused
    # the environment's parallelism when the node was made, if one was set then: Flink's
    # transformations take env.getParallelism() when created, so a later env.set_parallelism()
    # leaves them (None: the parallelism the environment has at build)
    created_parallelism: int | None = None

    def can_be_parallel(self) -> bool:
        """Flink's Transformation.isParallel: False for forced non-parallel operators and sources
        that cannot run in parallel (OperatorValidationUtils.validateParallelism's second argument)."""
        if self.non_parallel:
            return False
        return self.source is None or self.source.supports_parallelism

    def __repr__(self) -> str:
        return f"<node {self.id} {self.name!r}>"


@dataclass(eq=False)
class JobVertex:
    """A chain: the nodes one task runs, head first, in topological order."""

    id: int
    nodes: list[StreamNode]
    parallelism: int
    max_parallelism: int
    # set by the user (env or operator): a restore refuses a checkpoint of another max
    # parallelism instead of adopting it (checkpoint/max_parallelism.py)
    max_parallelism_configured: bool = False

    @property
    def head(self) -> StreamNode:
        return self.nodes[0]

    @property
    def name(self) -> str:
        return " -> ".join(n.name for n in self.nodes)


@dataclass
class JobGraph:
    vertices: list[JobVertex]
    vertex_of: dict[int, JobVertex]  # node id -> vertex
    nodes: list[StreamNode]
    consumers: dict[int, list[tuple[StreamNode, Edge]]]  # node id -> (consumer, edge)
    parallelism: dict[int, int]  # node id -> resolved parallelism

    def uid_of(self, node: StreamNode) -> str:
        return node.uid or f"{_slug(node.name)}-{node.id}"


class StreamGraph:
    """The nodes the API appended, and the sinks to run."""

    def __init__(self) -> None:
        self.nodes: list[StreamNode] = []
        self._ids = itertools.count(1)
        self.parallelism: int | None = None  # the environment's, once set: new nodes take it

    def add(self, node_name: str, factory: OperatorFactory | None, **kw: Any) -> StreamNode:
        kw.setdefault("created_parallelism", self.parallelism)
        node = StreamNode(next(self._ids), node_name, factory, **kw)
        self.nodes.append(node)
        return node

    def remove(self, node: StreamNode) -> None:
        if node in self.nodes:
            self.nodes.remove(node)

    def clear(self) -> None:
        """Forget the nodes (after an execute); ids keep counting, so they stay unique."""
        self.nodes.clear()


def build_job_graph(
    stream_graph: StreamGraph,
    *,
    default_parallelism: int,
    default_max_parallelism: int,
    chaining_enabled: bool = True,
    max_parallelism_configured: bool = False,
    blocking_exchanges: bool = False,
) -> JobGraph:
    sinks = [n for n in stream_graph.nodes if n.is_sink]
    if not sinks:
        raise GraphError(
            "the job has no sink: add one with sink_to(), add_sink(), print() or "
            "execute_and_collect(); operators that lead to no sink are never run"
        )
    nodes = _reachable_from(sinks)
    parallelism = {n.id: _parallelism(n, default_parallelism) for n in nodes}
    # unset on the operator and the environment: derived from the parallelism, as Flink's
    # computeDefaultMaxParallelism (128 up to parallelism 85)
    def unset(n: StreamNode) -> int:
        if max_parallelism_configured:
            return default_max_parallelism
        return derived_max_parallelism(parallelism[n.id])

    max_par = {n.id: (n.inside_source or n).max_parallelism or unset(n) for n in nodes}
    consumers: dict[int, list[tuple[StreamNode, Edge]]] = {n.id: [] for n in nodes}
    for n in nodes:
        for e in n.inputs:
            consumers[e.upstream.id].append((n, e))
    _validate(nodes, parallelism, max_par)

    groups = _slot_sharing_groups(nodes)
    vertex_of: dict[int, JobVertex] = {}
    vertices: list[JobVertex] = []
    for n in nodes:  # topological: inputs are created before their consumers
        joined = _chain_target(n, parallelism, chaining_enabled, blocking_exchanges)
        if joined is not None and groups[joined.id] != groups[n.id]:
            joined = None  # Flink's isChainableInput: upStreamVertex.isSameSlotSharingGroup(down)
        if joined is not None:
            vertex = vertex_of[joined.id]
            vertex.nodes.append(n)
        else:
            configured = max_parallelism_configured or (n.inside_source or n).max_parallelism is not None
            vertex = JobVertex(len(vertices), [n], parallelism[n.id], max_par[n.id], configured)
            vertices.append(vertex)
        vertex_of[n.id] = vertex
    return JobGraph(vertices, vertex_of, nodes, consumers, parallelism)


def is_chained(graph: JobGraph, consumer: StreamNode, edge: Edge) -> bool:
    return graph.vertex_of[consumer.id] is graph.vertex_of[edge.upstream.id]


def _chain_target(
    n: StreamNode, parallelism: dict[int, int], enabled: bool, blocking: bool = False
) -> StreamNode | None:
    if not enabled or n.source is not None or len(n.inputs) != 1:
        return None
    if n.chaining is not Chaining.ALWAYS:
        return None
    e = n.inputs[0]
    up = e.upstream
    if up.chaining is Chaining.NEVER:
        return None
    p, up_p = parallelism[n.id], parallelism[up.id]
    if (p == up_p == 1 and not blocking) or (e.partitioning is Partitioning.FORWARD and p == up_p):
        return up
    return None


def _slot_sharing_groups(nodes: list[StreamNode]) -> dict[int, str]:
    """Each node's slot sharing group, resolved as Flink's StreamGraphGenerator.
    determineSlotSharingGroup: the group set on the operator; else the group of its inputs when
    they all share one; else ``"default"``. A node from_source() appended runs inside its source:
    it has the source's group, and a group set on it is the source's (PyFlink sets it on the
    source transformation). ``nodes`` is topological, so inputs resolve first."""
    declared = {n.id: n.slot_sharing_group for n in nodes}
    for n in nodes:
        if n.inside_source is not None and n.slot_sharing_group is not None:
            declared[n.inside_source.id] = declared.get(n.inside_source.id) or n.slot_sharing_group
    groups: dict[int, str] = {}
    for n in nodes:
        if n.inside_source is not None:
            groups[n.id] = groups.get(n.inside_source.id) or declared.get(n.inside_source.id) or DEFAULT_GROUP
            continue
        group = declared[n.id]
        if group is None:
            inherited = {groups[e.upstream.id] for e in n.inputs}
            group = inherited.pop() if len(inherited) == 1 else DEFAULT_GROUP
        groups[n.id] = group
    return groups


DEFAULT_GROUP = "default"  # Flink's StreamGraphGenerator.DEFAULT_SLOT_SHARING_GROUP


def _parallelism(n: StreamNode, default: int) -> int:
    n = n.inside_source or n  # (from_source()'s strategy and conversion run inside the source)
    if n.parallelism is not None:
        return n.parallelism
    if n.parallelism_of is not None:
        return _parallelism(n.parallelism_of, default)
    if n.source is not None and not n.source.supports_parallelism:
        return 1
    return default if n.created_parallelism is None else n.created_parallelism


def _reachable_from(sinks: list[StreamNode]) -> list[StreamNode]:
    seen: dict[int, StreamNode] = {}
    stack = list(sinks)
    while stack:
        n = stack.pop()
        if n.id not in seen:
            seen[n.id] = n
            stack.extend(e.upstream for e in n.inputs)
    return sorted(seen.values(), key=lambda n: n.id)


def _validate(nodes: list[StreamNode], parallelism: dict[int, int], max_par: dict[int, int]) -> None:
    uids: dict[str, StreamNode] = {}
    for n in nodes:
        p = parallelism[n.id]
        if p < 1:
            raise GraphError(f"operator {n.name!r}: parallelism must be >= 1, got {p}")
        if p > max_par[n.id]:
            raise GraphError(f"operator {n.name!r}: parallelism {p} exceeds max parallelism {max_par[n.id]}")
        if n.source is not None and p > 1 and not n.source.supports_parallelism:
            raise GraphError(f"source {n.name!r} cannot run in parallel (parallelism {p})")
        if n.uid is not None:
            other = uids.get(n.uid)
            if other is not None:
                raise GraphError(
                    f"uid {n.uid!r} is used by both {other.name!r} and {n.name!r}: uids must be unique"
                )
            uids[n.uid] = n
        for e in n.inputs:
            if e.partitioning is Partitioning.FORWARD and e.explicit and parallelism[e.upstream.id] != p:
                raise GraphError(  # Flink's StreamGraph.addEdgeInternal, word for word
                    "Forward partitioning does not allow change of parallelism. Upstream operation: "
                    f"{e.upstream.name!r} parallelism: {parallelism[e.upstream.id]}, downstream operation: "
                    f"{n.name!r} parallelism: {p} You must use another partitioning strategy, such as "
                    "broadcast, rebalance, shuffle or global."
                )


def effective_partitioning(edge: Edge, up_parallelism: int, parallelism: int) -> Partitioning:
    """A forward edge between different parallelisms becomes rebalance, as in Flink."""
    if edge.partitioning is Partitioning.FORWARD and up_parallelism != parallelism:
        return Partitioning.REBALANCE
    return edge.partitioning


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-") or "op"
