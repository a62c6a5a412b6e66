"""Batch execution of bounded DataStream jobs (``RuntimeExecutionMode.BATCH``).

Flink runs a DataStream job whose sources are all bounded with batch
semantics when the runtime mode is ``BATCH``, or ``AUTOMATIC`` and every
source is bounded (``RuntimeExecutionMode`` docs; FLIP-134/140):

* every keyed operator reads a **sorted input**: its whole input, then key by key, each
  key's records in timestamp order, and each key's timers fire when its records end
  (event time first, then processing time), after which its state is dropped
  (``runtime/sorting_input.py``, ``runtime/sort_buffer.py``; installed by ``Execution``);
  a non-keyed two-input operator with one keyed input (``keyed.connect(plain)``) sorts that
  input the same way and reads the other in full first (``runtime/half_sorted_input.py``);
* a broadcast input is read to its end before any regular record: the keyed broadcast
  operator's sorted input waits for the end anyway, the non-keyed one's task does not read
  the regular input until then (input selection, ``runtime/input_selection.py``), or, where
  that could deadlock, holds the regular records (``BroadcastProcessOperator.end_input``);
* keyed ``reduce`` and the rolling aggregations (``sum``/``min``/``max``/
  ``min_by``/``max_by``) emit **one final result per key**, at the key's end
  (:class:`BatchReduceOperator`, Flink's ``BatchGroupedReduceOperator``);
* **event time jumps to the end**: no watermark flows while input is read, so
  no record is late; the watermark is ``+inf`` while a key's timers fire;
* **processing-time timers fire at their key's end**, after its event-time ones, as
  Flink's ``BatchExecutionInternalTimeService`` fires them; the timer service is quiesced
  then, so a timer a callback registers is ignored, logged;
* **no checkpoints**: a configured checkpoint interval is ignored (logged).

A job's mode is resolved once, when it is built (:func:`resolve_batch`); the
operator factories read it then.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..eventtime import NoWatermarksGenerator, WatermarkStrategy
from ..execution_mode import RuntimeExecutionMode
from ..runtime.detach import detached
from ..runtime.events import MAX_WATERMARK, Watermark
from ..runtime.keyed_operators import ReduceOperator
from ..runtime.sorting_input import CoalescingOutput
from ..runtime.timers import Timer

if TYPE_CHECKING:
    from .environment import StreamExecutionEnvironment

__all__ = ["BatchReduceOperator", "batch_watermarks", "is_batch", "resolve_batch"]

log = logging.getLogger(__name__)
_MISSING = object()


def resolve_batch(env: StreamExecutionEnvironment) -> bool:
    """Decide (and remember on ``env``) whether the job about to be built runs as a batch job."""
    mode = getattr(env, "_runtime_mode", RuntimeExecutionMode.STREAMING)
    sources = [n.source for n in env._graph.nodes if n.source is not None]
    bounded = all(getattr(s, "bounded", True) for s in sources)
    if mode is RuntimeExecutionMode.BATCH and not bounded:
        unbounded = [type(s).__name__ for s in sources if not getattr(s, "bounded", True)]
        raise ValueError(f"RuntimeExecutionMode.BATCH needs bounded sources; unbounded: {unbounded}")
    batch = mode is RuntimeExecutionMode.BATCH or (mode is RuntimeExecutionMode.AUTOMATIC and bounded)
    env._batch = batch
    if batch and env.runtime.checkpoint.interval_ms:
        log.info(
            "batch execution: checkpointing (every %d ms) is disabled, as in Flink's batch mode",
            env.runtime.checkpoint.interval_ms,
        )
    return batch


def is_batch(env: StreamExecutionEnvironment) -> bool:
    return bool(getattr(env, "_batch", False))


def batch_watermarks(strategy: WatermarkStrategy | Any) -> Any:
    """The strategy's timestamps without its watermarks: in batch mode event time jumps to the end."""
    if isinstance(strategy, WatermarkStrategy):
        return WatermarkStrategy(NoWatermarksGenerator, strategy.timestamp_assigner, None)
    return strategy


class BatchReduceOperator(ReduceOperator):
    """Flink's ``BatchGroupedReduceOperator``: folds every record into its key's accumulator
    and registers a timer at the end of time for the key; when it fires (the key's end, as
    its sorted input moves to the next key: ``runtime/sorting_input.py``) the key's final
    value goes out, with the timestamp of the key's last record."""

    async def open(self) -> None:
        await super().open()
        self.last_ts: dict[Any, int] = {}

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if self._check_key_type:
            self.check_key_type(records)
        if self._specialize is not None and records:
            self.reduce, self._specialize = self._specialize(records[0]), None
        key_of, reduce, table, last_ts = self.key_selector, self.reduce, self.table, self.last_ts
        backend, register = self.backend, self.timers.register_event_time_timer
        get, missing = table.get, _MISSING
        record: Any = None
        if len(records) > 1:
            try:
                keys = list(map(key_of, records))
            except Exception:  # the loop below raises it again, naming the record
                keys = []
            if keys and keys.count(keys[0]) == len(keys):  # one key (a sorted input's chunk): one lookup
                key = backend.current_key = keys[0]  # a ReduceFunction may use keyed state too
                acc = get(key, missing)
                it = iter(records)
                if acc is missing:
                    acc = detached(next(it))  # the table's own copy (runtime/detach.py)
                    register(key, None, MAX_WATERMARK)
                try:
                    for record in it:
                        acc = reduce(acc, record)
                except Exception as exc:
                    raise self.failure(exc, record) from None
                table[key] = acc
                if timestamps is not None:
                    last_ts[key] = timestamps[-1]
                return
        try:
            for i, record in enumerate(records):
                key = key_of(record)
                backend.current_key = key  # a ReduceFunction may use keyed state too
                acc = get(key, missing)
                if acc is missing:
                    table[key] = detached(record)  # the table's own copy (runtime/detach.py)
                    register(key, None, MAX_WATERMARK)
                else:
                    table[key] = reduce(acc, record)
                if timestamps is not None:
                    last_ts[key] = timestamps[i]
        except Exception as exc:
            raise self.failure(exc, record) from None

    async def process_watermark(self, watermark: Watermark) -> None:
        """Without a sorted input (``execution.sorted-inputs.enabled`` false) every key's timer
        fires here, at the end of input: their results go out in batches, then the watermark."""
        output = self.output
        self.output = CoalescingOutput(output, 512)
        try:
            await super().process_watermark(watermark)
        finally:
            self.output = output

    async def on_event_timer(self, timer: Timer) -> None:
        key = timer.key
        value = self.table.pop(key, _MISSING)
        ts = self.last_ts.pop(key, None)
        if value is not _MISSING:
            await self.output.push([value], None if ts is None else [ts])


def reduce_operator_class(env: StreamExecutionEnvironment) -> type[ReduceOperator]:
    return BatchReduceOperator if is_batch(env) else ReduceOperator
