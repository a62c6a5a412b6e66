"""Broadcast state on Spark: ``connect(rules.broadcast(descriptor)).process(...)``.

Theory of operation
-------------------
In the asyncio engine (``runtime/broadcast_operators.py``) each of the operator's ``p``
subtasks sees every element of the broadcast input and its share of the other input (its
keys, for a ``KeyedBroadcastProcessFunction``); each keeps its own copy of the broadcast
state, and ``process_broadcast_element`` runs once per subtask (so whatever it emits comes
out ``p`` times, and ``apply_to_keyed_state`` reaches that subtask's keys).

Spark runs the stage as ``groupBy(subtask).applyInPandasWithState`` with one group per
subtask of the operator, which plays that subtask exactly:

* the other input's rows go to the group of the subtask that owns them: a keyed row to the
  subtask of its key's key group (``key_group_of``, ``subtask_of_key_group``: where the asyncio
  engine routes it), a non-keyed row to one spread by its encoded record (which subtask reads
  it does not change what it produces: every subtask holds the same broadcast state);
* every broadcast row goes to every group (``explode``), end-of-input and watermark marker rows
  to the markers' group as in a keyed stage (:mod:`.key_column`);
* a group's state is its subtask's operator snapshot (keyed state of all its keys, timers,
  broadcast state), restored and saved by :class:`BroadcastRunner` around each call as
  :class:`~.keyed.KeyedRunner` does for one key; its event-time timeout is the earliest timer
  of any of its keys.

Within a micro-batch a group processes the broadcast rows first (in input order), then the
other input's rows: the asyncio engine interleaves the two inputs as they arrive, so a job
whose answer depends on that interleaving has none defined; with rules that arrive before
the data they govern (or are looked up by event time) both engines agree.

A batch job (``KeyedRunner``'s batch path: a group keeps its rows until the end of input)
feeds the broadcast input in full first, then the other input in input order, to an operator
built as the asyncio engine builds it: a keyed one with its sorted input in front
(``runtime/sorting_input.py``'s ``install_sorted_input``), which drains it key by key, each
key's records in timestamp order and its timers at its end; a non-keyed one reads its regular
input as it arrives (as the asyncio engine's input selection does). The outputs are numbered
in the order the operator emitted them (``[subtask, i]``). The cost: a
group's whole state is decoded and encoded once per micro-batch in which it has rows or a
timer, so this suits the broadcast pattern's usual shape, modest keyed state per subtask.
"""

from __future__ import annotations

import dataclasses
import uuid
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..graph import Partitioning, StreamNode
from ..runtime.sorting_input import install_sorted_input
from ..state.codec import Codec
from ..state.key_groups import key_group_of, subtask_of_key_group
from .encoding import KEYED_DDL, ROW_DDL, STATE_DDL
from .harness import NodeSpec, _Stage
from .key_column import KeyColumn
from .keyed import KeyedRunner
from .sources import SparkTranslationError
from .watermarks import stage_event_time

if TYPE_CHECKING:
    from .plan import Stream, Translation

__all__ = ["BroadcastRunner", "broadcast_stage", "is_broadcast_stage"]

_EVERY_SUBTASK = -1  # what the group selector gives a broadcast row: it goes to every group


def is_broadcast_stage(node: StreamNode) -> bool:
    """``node`` is a two-input operator whose second input is broadcast (and only that one)."""
    return any(e.partitioning is Partitioning.BROADCAST for e in node.inputs) and all(
        (e.partitioning is Partitioning.BROADCAST) == (e.input_index == 1) for e in node.inputs
    )


class _SubtaskOfKey:
    """A keyed row's subtask: the one owning its key's key group."""

    def __init__(self, key_selector: Callable[[Any], Any], max_parallelism: int, parallelism: int) -> None:
        self.key_selector, self.max_parallelism, self.parallelism = key_selector, max_parallelism, parallelism

    def __call__(self, record: Any) -> int:
        group = key_group_of(self.key_selector(record), self.max_parallelism)
        return subtask_of_key_group(group, self.max_parallelism, self.parallelism)


class _SpreadRecord:
    """A non-keyed row's subtask: spread by a stable hash of its encoded record."""

    def __init__(self, encode: Callable[[Any], bytes], parallelism: int) -> None:
        self.encode, self.parallelism = encode, parallelism

    def __call__(self, record: Any) -> int:
        return zlib.crc32(self.encode(record)) % self.parallelism


def _every_subtask(record: Any) -> int:
    return _EVERY_SUBTASK


def _group_keys(subtasks: list[int]) -> list[bytes]:
    return [str(s).encode() for s in subtasks]


class BroadcastRunner(KeyedRunner):
    """A broadcast stage: the operator of one subtask per call (module doc)."""

    def __init__(self, spec: NodeSpec, codec: Codec, event_time: bool, batch: bool, sorted_input: bool,
                 parallelism: int) -> None:
        super().__init__(spec, codec.encode, codec.decode, codec.encode, codec.decode, event_time,
                         uuid.uuid4().hex, None, batch, sorted_input, two_input=True)
        self.parallelism = parallelism
        self._subtask = 0

    def __call__(self, key: tuple[bytes], pdfs: Any, state: Any) -> Any:
        if key[0]:  # (the markers' group has b"" or None)
            self._subtask = int(key[0])
        return super().__call__(key, pdfs, state)

    def _stage(self) -> tuple[_Stage, bool]:
        """A fresh operator playing this call's subtask (never the worker's cached one: its
        context names one subtask)."""
        spec = dataclasses.replace(self.spec, subtask_index=self._subtask, parallelism=self.parallelism)
        stage = _Stage([spec])
        if self.batch and self.sorted_input and spec.keyed:  # key by key, as the asyncio engine
            install_sorted_input(stage.head)
        return stage, False

    def _rows(self, frames: list[Any]) -> tuple[list[list[int]], list[int | None], list[Any], list[bool]]:
        """The broadcast rows first (input order), then the other input's; a broadcast row's
        outputs come out of every subtask, so its order gains the subtask (unique orders)."""
        orders, tss, values, seconds = super()._rows(frames)
        idx = sorted(range(len(orders)), key=lambda i: not seconds[i])  # stable: input order kept
        orders = [[*orders[i], self._subtask] if seconds[i] else orders[i] for i in idx]
        return orders, [tss[i] for i in idx], [values[i] for i in idx], [seconds[i] for i in idx]

    def _batch_order(self, row: tuple) -> tuple:
        """A batch job reads the broadcast input in full first (runtime/sorting_input.py), then
        the other in input order (a keyed operator's sorted front sorts it: :meth:`_stage`)."""
        return (not row[3], row[0])

    def _run_batch(self, frames: list[Any], state: Any) -> tuple[list, list, list, list]:
        """As a keyed stage's, the outputs numbered in the order the operator emitted them."""
        orders, tss, tags, values = super()._run_batch(frames, state)
        return [[self._subtask, i] for i in range(len(orders))], tss, tags, values


def broadcast_stage(translation: Translation, node: StreamNode) -> Stream:
    """The broadcast stage of ``node`` (module doc)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from .plan import Stream

    t = translation
    stream = t._input_of(node)  # the union of both inputs, each row's ``tag`` its input ("0"/"1")
    if stream.stateful:  # (an upstream stateful stage exchanges its output: see Translation._output)
        stream = t._exchange(stream, f"{t.graph.uid_of(node)}-input", f"the input of {node.name!r}")
    spec = t.spec(node, t._side_tags(node))
    p = t.graph.parallelism[node.id]
    main: Callable[[Any], int]
    if node.keyed:
        selectors = {id(e.key_selector): e.key_selector for e in node.inputs if e.input_index == 0}
        (selector, *others) = selectors.values()
        if others or selector is None:
            raise SparkTranslationError(
                f"operator {node.name!r}: the Spark engine needs one key selector for the keyed input "
                "of a broadcast connect()"
            )
        main = _SubtaskOfKey(selector, spec.max_parallelism, p)
    else:
        main = _SpreadRecord(t.codec.encode, p)
    column = KeyColumn([main, _every_subtask], t.codec, layout=stream.layout, group_keys=_group_keys)
    keyed = stream.df.mapInArrow(column, KEYED_DDL)
    everyone = F.array(*[F.lit(str(s).encode()) for s in range(p)])
    groups = F.when(F.col("key") == F.lit(str(_EVERY_SUBTASK).encode()), everyone).otherwise(F.array("key"))
    keyed = keyed.select(*[c for c in keyed.columns if c != "key"], F.explode(groups).alias("key"))
    event_time = stream.delay_ms is not None
    keyed = stage_event_time(keyed, t.batch, stream.delay_ms)
    runner = BroadcastRunner(spec, t.codec, event_time, t.batch, t.sorted_inputs, p)
    timeout = GroupStateTimeout.EventTimeTimeout if event_time or t.batch else GroupStateTimeout.NoTimeout
    df = keyed.groupBy("key").applyInPandasWithState(runner, ROW_DDL, STATE_DDL, "append", timeout)
    return Stream(df, False, stream.delay_ms, stateful=1, reads=stream.reads)

