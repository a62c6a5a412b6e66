"""Input selection of a two-input task: one input read to its end before the other.

Theory of operation
-------------------
In batch mode Flink's non-keyed broadcast operator (``BatchCoBroadcastWithNonKeyedOperator``)
is ``InputSelectable``: it selects only the broadcast input until that input has ended, so
every regular record sees the complete broadcast state. The task does not read the regular
input's channels at all meanwhile: they fill up to their capacity and their producers are
backpressured; nothing is held in memory beyond the channels' bounded queues.

streamflow does the same with the input gate's per-channel pause, the mechanism aligned
checkpoint barriers use (``channel.InputGate``): :class:`InputSelection` *deselects* the
channels of every other input when the task is built (``InputGate.deselect``; a barrier
alignment's ``resume`` never reads a deselected channel), and selects them again when the
last channel of the input read first delivers its end of input. The head operator's
``end_input(input_id)`` then runs before any record of the other input is polled.

Deadlock: Flink's batch exchanges are blocking (a producer's whole result is written before a
consumer reads it), streamflow's channels are pipelined. So a producer blocked on a full
deselected channel stops everything it produces, and if the input read first depends on such
a producer (both inputs fed by one source, by one chain, or through another selecting
operator's stalled input), that input never ends. :func:`plan_input_selection` decides per
job, conservatively: the nodes that may block are every ancestor (inclusive) of any input
that a candidate would deselect; an operator selects only if no ancestor of its first input
is one of them (then, in topological order, every task feeding its first input can always
write and finish). Otherwise it falls back to holding the other input's batches in the
operator (``BroadcastProcessOperator``), logged with the reason.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..graph import StreamNode
    from .channel import InputGate

__all__ = ["InputSelection", "plan_input_selection"]

log = logging.getLogger(__name__)


def _ancestors(nodes: list[StreamNode]) -> set[int]:
    """The ids of ``nodes`` and of every node upstream of them."""
    seen: set[int] = set()
    todo = list(nodes)
    while todo:
        node = todo.pop()
        if node.id not in seen:
            seen.add(node.id)
            todo.extend(edge.upstream for edge in node.inputs)
    return seen


def _input(node: StreamNode, index: int) -> list[StreamNode]:
    return [edge.upstream for edge in node.inputs if edge.input_index == index]


def plan_input_selection(nodes: list[StreamNode]) -> dict[int, int]:
    """For a batch job: node id -> the input (0-based) its task reads to the end first, for
    every node that asks for it (``StreamNode.batch_reads_first``) and cannot deadlock (module
    doc); a node refused is logged and keeps buffering."""
    wanted = {n.id: n.batch_reads_first for n in nodes if n.batch_reads_first is not None}
    if not wanted:
        return {}
    by_id = {n.id: n for n in nodes}
    may_block: set[int] = set()
    for node_id, first in wanted.items():
        node = by_id[node_id]
        may_block |= _ancestors([e.upstream for e in node.inputs if e.input_index != first])
    plan: dict[int, int] = {}
    for node_id, first in wanted.items():
        node = by_id[node_id]
        stalled = sorted(by_id[i].name for i in _ancestors(_input(node, first)) & may_block)
        if stalled:
            log.warning(
                "operator %r: input %d is not read first by input selection (batch mode) but "
                "held in memory until it ends: %s also feed%s an input that is not read meanwhile, "
                "so pausing it could stop input %d from ending (deadlock)",
                node.uid or node.name, first + 1, ", ".join(repr(s) for s in stalled),
                "s" if len(stalled) == 1 else "", first + 1,
            )  # fmt: skip
            continue
        plan[node_id] = first
    return plan


class InputSelection:
    """Which channels of a task's gate are read: all, or only those of one input until it has
    ended (module doc). Also counts each input's open channels for ``end_input``."""

    __slots__ = ("_first", "_gate", "_input_of_channel", "_open")

    def __init__(self, gate: InputGate, input_of_channel: list[int]) -> None:
        self._gate, self._input_of_channel = gate, input_of_channel
        self._open = [input_of_channel.count(i) for i in (0, 1)]
        self._first: int | None = None

    def read_first(self, first: int | None) -> None:
        """Read only input ``first`` (0-based) until its last channel ends; None: read all."""
        if first is None or not self._open[first]:
            return
        self._first = first
        for channel, i in enumerate(self._input_of_channel):
            if i != first:
                self._gate.deselect(channel)

    def channel_ended(self, channel: int) -> int | None:
        """``channel`` delivered its end of input: the input (1-based, Flink's ``endInput(inputId)``)
        whose last channel it was, or None. The end of the input read first selects all others."""
        ended = self._input_of_channel[channel]
        self._open[ended] -= 1
        if self._open[ended]:
            return None
        if ended == self._first:
            self._first = None
            for other, i in enumerate(self._input_of_channel):
                if i != ended:
                    self._gate.select(other)
        return ended + 1
