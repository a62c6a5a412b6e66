"""A batch job's two-input operator with one keyed input on Spark (``keyed.connect(plain)``).

Theory of operation
-------------------
``keyed.connect(plain)`` (or ``plain.connect(keyed)``) builds a non-keyed two-input operator,
but in ``RuntimeExecutionMode.BATCH`` Flink sorts its keyed input and passes the other
through first (``MultiInputSortingDataInput``; the asyncio engine's
``runtime/half_sorted_input.py``): the operator sees every record of the plain input, then
the keyed input key by key, each key's records in timestamp order. A stateless Spark stage
would feed both inputs as they arrive, so an operator whose answer depends on that order (a
function counting in ``self``, or one expecting a key's records in time order) answered
differently on Spark: the "half-keyed sort" it ignored.

Here the operator runs as a stage with one group per subtask of the operator
(``groupBy(subtask).applyInPandasWithState``, as broadcast state does, :mod:`.broadcast`): a
keyed row goes to the subtask owning its key's key group, a plain row to one spread by its
encoded record. In a batch job every group keeps its rows in its group state until the end
of input (:class:`~.keyed.KeyedRunner`'s batch path); then :class:`HalfSortedRunner` builds the
operator of that subtask with the asyncio engine's own :class:`HalfSortedInput` in front
(``install_half_sorted_input``: the same sorter, key order and timestamp order), feeds it
every row in input order (plain ones reach the operator at once, keyed ones wait in the
sorter) and hands it the maximum watermark, which drains the sorter key by key. The outputs
are numbered in the order the operator emitted them (``[subtask, i]``), so a sink sees them in
the asyncio engine's order at parallelism 1.

Which subtask reads a plain row differs from the asyncio engine's round-robin at parallelism
> 1 (a hash of the record), as for a non-keyed broadcast operator: a function whose answer
depends on which plain records one subtask saw has no engine-independent answer there.
Streaming jobs (and batch jobs with ``execution.sorted-inputs.enabled: false``) keep the
stateless stage: neither engine sorts then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..graph import StreamNode
from ..runtime.half_sorted_input import install_half_sorted_input
from ..state.codec import Codec
from .broadcast import BroadcastRunner, _group_keys, _SpreadRecord, _SubtaskOfKey
from .encoding import KEYED_DDL, ROW_DDL, STATE_DDL
from .harness import NodeSpec, _Stage
from .key_column import KeyColumn
from .keyed import KeyedRunner
from .watermarks import stage_event_time

if TYPE_CHECKING:
    from .plan import Stream, Translation

__all__ = ["HalfSortedRunner", "half_sorted", "half_sorted_stage"]


def half_sorted(node: StreamNode, batch: bool, sorted_inputs: bool) -> bool:
    """``node`` is a non-keyed two-input operator with one keyed input whose input a batch job
    sorts (module doc)."""
    return batch and sorted_inputs and node.half_keys is not None and not node.keyed


class HalfSortedRunner(BroadcastRunner):
    """One subtask of a half-keyed operator per call, fed through the asyncio engine's
    :class:`HalfSortedInput` (module doc). Only ever runs in a batch job."""

    def __init__(self, spec: NodeSpec, codec: Codec, parallelism: int,
                 half_keys: tuple[Callable[[Any], Any] | None, Callable[[Any], Any] | None]) -> None:
        super().__init__(spec, codec, False, True, False, parallelism)  # (input order: _batch_order)
        self.half_keys = half_keys

    def _stage(self) -> tuple[_Stage, bool]:
        stage, cached = super()._stage()
        install_half_sorted_input(stage.head, self.half_keys)
        return stage, cached

    def _rows(self, frames: list[Any]) -> tuple[list[list[int]], list[int | None], list[Any], list[bool]]:
        return KeyedRunner._rows(self, frames)  # (no broadcast rows: none first, orders as they are)

    def _batch_order(self, row: tuple) -> tuple:
        return (row[0],)  # input order: the operator's sorted front does the sorting


def half_sorted_stage(translation: Translation, node: StreamNode) -> Stream:
    """The stage of a half-keyed two-input operator in a batch job (module doc)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    from .plan import Stream

    t = translation
    assert node.half_keys is not None
    stream = t._input_of(node)  # the union of both inputs, each row's ``tag`` its input ("0"/"1")
    if stream.stateful:  # (an upstream stateful stage exchanges its output: see Translation._output)
        stream = t._exchange(stream, f"{t.graph.uid_of(node)}-input", f"the input of {node.name!r}")
    spec = t.spec(node, t._side_tags(node))
    p = t.graph.parallelism[node.id]
    subtask_of: list[Callable[[Any], int]] = [
        _SubtaskOfKey(k, spec.max_parallelism, p) if k is not None else _SpreadRecord(t.codec.encode, p)
        for k in node.half_keys
    ]
    column = KeyColumn(subtask_of, t.codec, layout=stream.layout, group_keys=_group_keys)
    keyed = stage_event_time(stream.df.mapInArrow(column, KEYED_DDL), True, stream.delay_ms)
    runner = HalfSortedRunner(spec, t.codec, p, node.half_keys)
    df = keyed.groupBy("key").applyInPandasWithState(runner, ROW_DDL, STATE_DDL, "append",
                                                     GroupStateTimeout.EventTimeTimeout)
    return Stream(df, False, stream.delay_ms, stateful=1, reads=stream.reads)
