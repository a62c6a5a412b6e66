"""Sorted input for a two-input operator with exactly one keyed input, in a batch job.

Theory of operation
-------------------
``keyed.connect(plain)`` (or ``plain.connect(keyed)``) builds a non-keyed two-input
operator (``CoProcessFunction``, ``CoMapFunction``, ``CoFlatMapFunction``), but Flink's
``ConnectedStreams#doTransform`` still gives the transformation the keyed input's state key
selector. In ``RuntimeExecutionMode.BATCH`` that input is therefore *sorted* and the other
one is *pass-through* (``BatchExecutionUtils#applyBatchExecutionSettings``), and
``MultiInputSortingDataInput`` reads every pass-through input in full before it hands out
the sorted one key by key, each key's records in timestamp order
(``DataStreamBatchExecutionITCase.batchKeyedNonKeyedTwoInputOperator`` and
``batchNonKeyedKeyedTwoInputOperator``).

:func:`install_half_sorted_input` gives an operator that behaviour by putting
:class:`HalfSortedInput` in front of its class (as ``sorting_input.py`` does for keyed
operators; the operator keeps no keyed state, so no per-key timers are involved):

* records of the keyed input go into a :class:`~streamflow.runtime.sort_buffer.SortBuffer`
  (the same sorter, key order and memory budget as keyed operators);
* records of the other input pass straight through to the operator, so it sees all of them
  before any keyed record (the keyed ones wait for the end of input);
* watermarks below the end of input, and watermark statuses, are dropped (a batch job's
  event time jumps to the end); at the maximum watermark, which comes once both inputs have
  ended, the buffer drains into the operator's own ``process_batch``/``process_batch2``,
  key by key, through a :class:`~streamflow.runtime.sorting_input.CoalescingOutput`, and
  the watermark then goes on as before.

Streaming jobs never get here: ``Execution`` installs it only in batch mode with sorted
inputs enabled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..state.codec import Codec
from ..state.hashable_keys import probe
from .events import MAX_WATERMARK, Watermark, WatermarkStatus
from .item_getters import failed_record
from .loop_budget import yield_point
from .operator import StreamOperator
from .sort_buffer import DEFAULT_SORT_MEMORY, SortBuffer
from .sorting_input import CoalescingOutput, put_in_front

__all__ = ["HalfSortedInput", "install_half_sorted_input"]

_WORK_SLICE = 2048  # records fed between yield points while draining


def install_half_sorted_input(
    op: StreamOperator,
    key_selectors: tuple[Callable[[Any], Any] | None, Callable[[Any], Any] | None],
    memory: int = DEFAULT_SORT_MEMORY,
    batch_size: int = 512,
    spill: tuple[Codec, str | None, set[str]] | None = None,
) -> None:
    """Sort the keyed input of ``op`` (the one whose entry of ``key_selectors`` is set) and
    pass the other through first (module doc)."""
    if sum(k is not None for k in key_selectors) != 1:
        raise ValueError(f"operator {op.name!r}: exactly one input must be keyed, got {key_selectors!r}")
    put_in_front(op, HalfSortedInput, "HalfSorted", memory, batch_size, spill)._half_keys = key_selectors


class HalfSortedInput(StreamOperator):
    """The front of a two-input operator with one keyed input in a batch job (module doc).
    Only ever a base of a class made by :func:`install_half_sorted_input`."""

    _half_keys: tuple[Callable[[Any], Any] | None, Callable[[Any], Any] | None] = (None, None)
    _sort_memory = DEFAULT_SORT_MEMORY
    _sort_chunk = 512
    _sort_spill: tuple[Codec | None, str | None, set[str] | None] = (None, None, None)
    _sorter: SortBuffer | None = None
    _half_probed = False

    def _half_buffer(self) -> SortBuffer:
        sorter = self._sorter
        if sorter is None:
            codec, pickle_reason, logged = self._sort_spill
            sorter = self._sorter = SortBuffer(
                f"operator {self.name!r} (uid {self.uid!r})", self._sort_memory,
                codec=codec, pickle_reason=pickle_reason, logged=logged,
            )  # fmt: skip
        return sorter

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        key_of = self._half_keys[0]
        if key_of is None:
            await super().process_batch(records, timestamps)
        elif records:
            self._half_add(0, key_of, records, timestamps)

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        key_of = self._half_keys[1]
        if key_of is None:
            await super().process_batch2(records, timestamps)  # type: ignore[misc]
        elif records:
            self._half_add(1, key_of, records, timestamps)

    def _half_add(self, input_index: int, key_of: Any, records: list, timestamps: list[int] | None) -> None:
        if not self._half_probed:  # an unhashable first key (a list): hashable stand-ins, as keyed
            self._half_probed = True  # operators get (TimerOperator.check_key_type)
            try:
                key_of, _key = probe(key_of, records[0], repr(self.name))
            except Exception as exc:
                raise self.failure(exc, records[0]) from None
            keys = list(self._half_keys)
            keys[input_index] = key_of
            self._half_keys = (keys[0], keys[1])
        it = iter(records)
        try:
            keys = list(map(key_of, it))
        except Exception as exc:
            raise self.failure(exc, failed_record(records, it)) from None
        try:
            self._half_buffer().add(input_index, keys, records, timestamps)
        except Exception as exc:
            raise self.failure(exc) from None

    async def process_watermark(self, watermark: Watermark) -> None:
        if watermark.timestamp < MAX_WATERMARK:
            return  # as a sorted input: no watermark before the end
        await self._half_drain()
        await super().process_watermark(watermark)

    async def process_watermark_status(self, status: WatermarkStatus) -> None:
        pass

    async def _half_drain(self) -> None:
        sorter, self._sorter = self._sorter, None
        if sorter is None:
            return
        first = super().process_batch
        second: Any = super().process_batch2  # type: ignore[misc]
        output = self.output
        coalescing = self.output = CoalescingOutput(output, self._sort_chunk)
        try:
            work = 0
            for _kid, _key, input_index, records, timestamps in sorter.drain(self._sort_chunk):
                await (first if input_index == 0 else second)(records, timestamps)
                work += len(records)
                if work >= _WORK_SLICE:
                    work = 0
                    await yield_point()
            await coalescing.flush()
        finally:
            sorter.close()
            self.output = output

    def dispose(self) -> None:
        sorter, self._sorter = self._sorter, None
        if sorter is not None:  # a failed or cancelled job: its spill files go
            sorter.close()
        super().dispose()
