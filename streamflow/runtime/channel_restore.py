"""Restoring in-flight data (unaligned checkpoints' channel state) into a job's tasks.

Theory of operation
-------------------
Every task knows its *channel layout* (:func:`channel_layout`): for each input
channel of its gate ``[consumer uid, input, producer uid, upstream subtask]``, and
for each writer ``[producer uid, consumer uid, input, consumer parallelism,
[downstream subtask of each channel]]``, ``input`` being the edge's index among
the consumer's inputs. A task that snapshots channel state records its layout
in its checkpoint entry.

:class:`InFlightRestore` compares, for every task of the checkpoint that holds
channel state, the recorded layout with the layout the same task has in the new
job:

* all equal (same parallelism and chaining wherever in-flight data is): each
  task takes its own channel state back as it was (``restored_in`` replayed into
  the chain's head before the gate's input, ``restored_out`` re-sent first on
  its output channels);
* any differs (a task at either end of a channel with in-flight data changed
  parallelism, or the chaining changed): every channel's records are
  redistributed over the new job by ``checkpoint/channel_rescale.py`` and
  replayed straight into their consuming operator (``Task.restored_replay``),
  downstream operators of a chain first, before the task reads input. Logged.

Refused with :class:`StateMismatchError`, naming what: in-flight data to an
operator the job no longer has (dropped with a warning when non-restored state is
allowed), an input that now comes from another operator, and channel state of an
older checkpoint without a layout when anything changed around it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..checkpoint.channel_rescale import Batch, ChannelKey, Replays, Route, redistribute
from ..checkpoint.channel_types import restored_channels
from ..checkpoint.restore import RestoredCheckpoint, StateMismatchError
from ..graph import Edge, JobGraph, Partitioning, StreamNode, effective_partitioning, is_chained
from ..state.key_groups import stable_hash, subtask_of_key_group
from .item_getters import item_getter
from .operator import StreamOperator

if TYPE_CHECKING:
    from .task import Task

__all__ = ["InFlightRestore", "channel_layout", "finished_on_restore"]

_log = logging.getLogger("streamflow")


def channel_layout(g: JobGraph, nodes: list[StreamNode], sub: int) -> dict[str, list[Any]]:
    """What the channels of subtask ``sub`` of the chain ``nodes`` join, in the order the
    task's gate and writers are built (``execution.Execution.build_task``)."""
    head = nodes[0]
    head_uid, p = g.uid_of(head), g.parallelism[head.id]
    inp: list[Any] = []
    if head.source is None:
        for k, edge in enumerate(head.inputs):
            up_p = g.parallelism[edge.upstream.id]
            forward = effective_partitioning(edge, up_p, p) is Partitioning.FORWARD
            inp += [[head_uid, k, g.uid_of(edge.upstream), j] for j in range(up_p) if not forward or j == sub]
    out: list[Any] = []
    for node in reversed(nodes):
        for consumer, edge in g.consumers[node.id]:
            if is_chained(g, consumer, edge):
                continue
            down_p = g.parallelism[consumer.id]
            forward = effective_partitioning(edge, p, down_p) is Partitioning.FORWARD
            targets = [sub] if forward else list(range(down_p))
            out.append([g.uid_of(node), g.uid_of(consumer), consumer.inputs.index(edge), down_p, targets])
    return {"in": inp, "out": out}


def finished_on_restore(
    g: JobGraph, restore: RestoredCheckpoint | None, nodes: list[StreamNode], sub: int,
    finished: dict[int, list[bool]],
) -> bool:
    """FLIP-147: the subtask had finished in the restored checkpoint (every operator of its
    chain, see ``RestoredCheckpoint.finished_on_restore``) and every task upstream of it is
    deployed finished too (so none can send it a record); logged when it runs again."""
    if restore is None or not restore.finished:
        return False
    p = g.parallelism[nodes[0].id]
    if not all(restore.finished_on_restore(g.uid_of(n), sub, p) for n in nodes):
        if any(g.uid_of(n) in restore.finished for n in nodes):
            _log.info(
                "%s[%d]: not every operator of its chain had finished in checkpoint %s (or it was "
                "rescaled while partly finished): it runs again", nodes[0].name, sub, restore.source,
            )  # fmt: skip
        return False
    for e in nodes[0].inputs:
        up = finished.get(g.vertex_of[e.upstream.id].nodes[0].id, [])
        up_p = g.parallelism[e.upstream.id]
        forward = effective_partitioning(e, up_p, p) is Partitioning.FORWARD
        if len(up) == up_p and (up[sub] if forward else all(up)):
            continue
        _log.info(
            "%s[%d] had finished in checkpoint %s, but a task upstream of it runs again: so does it",
            nodes[0].name, sub, restore.source,
        )  # fmt: skip
        return False
    return True


class InFlightRestore:
    """The channel state of ``restore`` placed into the tasks of ``graph`` (module doc)."""

    def __init__(self, restore: RestoredCheckpoint, graph: JobGraph, allow_non_restored: bool) -> None:
        self.restore = restore
        self.graph = graph
        self.allow_non_restored = allow_non_restored
        self._by_uid = {graph.uid_of(n): n for n in graph.nodes}
        self.replays: dict[tuple[int, int], list[tuple[int, list[Batch]]]] | None = None
        if restore.channels and self._changed():
            self.replays = self._redistributed()

    # -- deciding --------------------------------------------------------------
    def _changed(self) -> bool:
        """Whether any task's channels with in-flight data differ from the new job's."""
        g, changed = self.graph, False
        heads = {g.uid_of(v.nodes[0]): v for v in g.vertices}
        for task_id, state in self.restore.channels.items():
            uid, sub = _split_task_id(task_id)
            vertex = heads.get(uid)
            now = channel_layout(g, vertex.nodes, sub) if vertex and sub < vertex.parallelism else None
            if state.get("layout") is None:  # written before layouts: only the same job restores it
                if now is None or any(
                    uid in self._by_uid and g.parallelism[self._by_uid[uid].id] != p
                    for uid, p in self._old_parallelism().items()
                ):
                    raise self._no_layout(task_id)
            elif state["layout"] != now:
                changed = True
        return changed

    def _old_parallelism(self) -> dict[str, int]:
        return {_split_task_id(t)[0]: p for t, p in self.restore.task_parallelism.items()}

    def _no_layout(self, task_id: str) -> StateMismatchError:
        return StateMismatchError(
            f"checkpoint {self.restore.source} holds in-flight data (unaligned channel state) of task "
            f"{task_id!r}, written without its channel layout (an older streamflow), and the job's "
            "parallelism or graph changed around it: it cannot be redistributed; restore it at the "
            "parallelism it was taken with, or from an aligned savepoint"
        )

    # -- redistributing --------------------------------------------------------
    def _redistributed(self) -> dict[tuple[int, int], list[tuple[int, list[Batch]]]]:
        channels: dict[ChannelKey, list[Batch]] = {}
        ins: list[tuple[ChannelKey, list[Any]]] = []
        outs: list[tuple[ChannelKey, list[Any]]] = []
        for task_id, state in sorted(self.restore.channels.items()):
            layout = state.get("layout")
            if layout is None:
                raise self._no_layout(task_id)
            uid, sub = _split_task_id(task_id)
            p = self.restore.task_parallelism[task_id]
            inp, out = _decoded(
                task_id,
                state,
                [self._declared_type(cons, k, prod) for cons, k, prod, _j in layout["in"]],
                [self._declared_type(cons, k, prod) for prod, cons, k, _p, _t in layout["out"]],
            )
            for c, batches in inp.items():
                cons, k, prod, j = layout["in"][c]
                ins.append((ChannelKey(cons, k, prod, j, sub, p), batches))
            for w, per_channel in out.items():
                prod, cons, k, down_p, targets = layout["out"][w]
                outs.extend(
                    (ChannelKey(cons, k, prod, sub, targets[c], down_p), b) for c, b in per_channel.items()
                )
        for key, batches in ins + outs:  # a channel's queued records before its producer's
            channels.setdefault(key, []).extend((b[0], b[1]) for b in batches)
        dropped = {key.consumer for key in channels if key.consumer not in self._by_uid}
        for uid in sorted(dropped):
            _log.warning(
                "checkpoint %s: in-flight records to operator uid %r are dropped: the job has no such "
                "operator (non-restored state is allowed)", self.restore.source, uid,
            )  # fmt: skip
        kept = {key: b for key, b in channels.items() if key.consumer not in dropped}
        replays: Replays = redistribute(kept, self._route)
        _log.info(
            "checkpoint %s: in-flight data of %d channels redistributed to the job's new parallelism "
            "or chaining (%d records)", self.restore.source, len(kept),
            sum(len(r) for parts in replays.values() for _i, batches in parts for r, _t in batches),
        )  # fmt: skip
        return {(self._by_uid[uid].id, sub): parts for (uid, sub), parts in replays.items()}

    def _edge(self, consumer: str, k: int, producer: str) -> tuple[StreamNode, Edge]:
        node = self._by_uid.get(consumer)
        if node is None:
            raise StateMismatchError(
                f"checkpoint {self.restore.source} holds in-flight data (unaligned channel state) to "
                f"operator uid {consumer!r}, which is not in this job: set the same uid() on the "
                "operator, or allow non-restored state (execution.savepoint.ignore-unclaimed-state)"
            )
        if k >= len(node.inputs) or self.graph.uid_of(node.inputs[k].upstream) != producer:
            raise StateMismatchError(
                f"checkpoint {self.restore.source} holds in-flight data from operator uid {producer!r} "
                f"to input {k} of {consumer!r}, but in this job that input comes from elsewhere: the "
                "graph changed; restore from an aligned savepoint"
            )
        return node, node.inputs[k]

    def _declared_type(self, consumer: str, k: int, producer: str) -> Any:
        if consumer not in self._by_uid and self.allow_non_restored:
            return None
        _node, edge = self._edge(consumer, k, producer)
        return edge.upstream.declared_types.get(edge.side_tag)

    def _route(self, key: ChannelKey) -> Route:
        node, edge = self._edge(key.consumer, key.input, key.producer)
        g = self.graph
        p, maxp = g.parallelism[node.id], g.vertex_of[node.id].max_parallelism
        pick: Callable[[Any], int] | None = None
        if edge.partitioning is Partitioning.HASH and edge.key_selector is not None:
            key_of = item_getter(edge.key_selector) or edge.key_selector
            pick = lambda r: subtask_of_key_group(stable_hash(key_of(r)) % maxp, maxp, p)  # noqa: E731
        elif edge.partitioning is Partitioning.CUSTOM and edge.partitioner is not None:
            partitioner, key_selector = edge.partitioner, edge.key_selector or (lambda r: r)
            pick = lambda r: int(partitioner(key_selector(r), p))  # noqa: E731
        return Route(p, edge.input_index, pick, edge.partitioning is Partitioning.BROADCAST)

    # -- placing ---------------------------------------------------------------
    def apply(self, task: Task, task_id: str, nodes: list[StreamNode], sub: int,
              operators: dict[tuple[int, int], StreamOperator]) -> None:  # fmt: skip
        """Hand subtask ``sub`` of the chain ``nodes`` (running as ``task``) its in-flight data."""
        if self.replays is not None:
            task.restored_replay = [
                (operators[(node.id, sub)], input_index, batches)
                for node in reversed(nodes)  # downstream first: their records are the older ones
                for input_index, batches in self.replays.get((node.id, sub), ())
            ]
            return
        state = self.restore.channels.get(task_id)
        if state is not None:
            self._restore_own(task, task_id, state)

    def _restore_own(self, task: Task, task_id: str, state: dict[str, Any]) -> None:
        inp, out = _decoded(task_id, state, getattr(task, "input_types", ()), task.writer_types)
        try:
            task.restored_out = out
            for w, chs in out.items():
                for c in chs:
                    task.writers[w].channels[c]
            if inp:
                gate = task.gate  # type: ignore[attr-defined]
                for c in inp:
                    gate.channels[c]
                task.restored_in = inp  # type: ignore[attr-defined]
        except (IndexError, KeyError, AttributeError):
            raise StateMismatchError(
                f"checkpoint {self.restore.source} holds in-flight data (unaligned channel state) for "
                f"task {task_id!r} that does not match this job's channels: restore from an aligned "
                "savepoint to change the graph or parallelism"
            ) from None


def _decoded(
    task_id: str, state: dict[str, Any], input_types: Sequence[Any], writer_types: Sequence[Any]
) -> tuple[dict[int, list[Any]], dict[int, dict[int, list[Any]]]]:
    """A task entry's ``in``/``out`` channel state by int channel (and writer) index, its
    pickled channels unpickled where the running job declares them so (``channel_types.py``)."""
    return restored_channels(
        task_id,
        {int(c): b for c, b in state["in"].items()},
        {int(w): {int(c): b for c, b in chs.items()} for w, chs in state["out"].items()},
        state.get("pickled"),
        input_types,
        writer_types,
    )


def _split_task_id(task_id: str) -> tuple[str, int]:
    uid, _, sub = task_id.rpartition("#")
    return uid, int(sub)
