"""The sort buffer of a batch job's keyed input: every record, then key by key.

Theory of operation
-------------------
Flink's BATCH runtime puts a sorter in front of every keyed operator
(``SortingDataInput``, and ``MultiInputSortingDataInput`` for two keyed inputs,
in ``flink-streaming-java/.../streaming/api/operators/sort``): it reads the
whole bounded input, sorts it by the serialized key and then by the record's
timestamp (a record without one counts as ``Long.MIN_VALUE``), and hands the
operator one key's records after another. :class:`SortBuffer` is that sorter,
a plain synchronous object the operator side (``sorting_input.py``) feeds and
drains:

* ``add(input, keys, records, timestamps)`` files each record under its key.
  Keys are grouped by Python equality (a dict), as keyed state is, so keys that
  are equal (``1`` and ``1.0``) are one key, as they share state.
* ``drain(batch_size)`` yields ``(key_id, key, input, records, timestamps)``
  chunks: all of one key's records before the next key's, each key's in
  timestamp order (on equal timestamps input 1 before input 2, then arrival
  order: a stable sort), a chunk never longer than ``batch_size``, never mixing
  the two inputs nor records with and without a timestamp.

**Key order.** Flink orders keys by their serialized bytes; Python keys have no
such canonical bytes (PyFlink pickles them), so keys come in the order of
their stable 32-bit hash (``state/key_groups.stable_hash``, the hash that also
picks a key's key group), and keys with equal hashes in the order they first
arrived. The order is deterministic for a given input and, keys with equal
hashes aside, independent of the parallelism (a subtask sees the order
restricted to its keys). A key the hash
refuses (a type without a stable hash) fails the job, naming the operator.

**Memory.** Records are kept in memory until their estimated size
(``record_size.batch_size`` plus a per-record overhead) passes the budget
(``execution.sorted-inputs.memory``, 128 MiB by default, as Flink's); then the
buffer spills them to a temporary file as one sorted *run* (``sort_runs.py``:
columns of key ids, timestamps, inputs and records, written with the job's
records codec and its exact round-trip, as checkpoints write them; a record the
codec refuses fails the job unless it opted in to pickling) and starts over.
``drain`` merges the runs and what is still in memory with ``heapq.merge``
(stable: runs in the order they were written, so arrival order breaks ties
across runs as within one), reading each run a frame at a time. So the records
held in memory stay within the budget whatever the input's size; what stays in
memory besides is one entry per distinct key (the key, its hash and id), as
Flink's sorter keeps no per-key entry but a Python key has no bytes to sort by,
and, while the records in memory are sorted, two lists of positions as long as
they are. The temporary files are deleted when the buffer is closed (or garbage
collected).
"""

from __future__ import annotations

import heapq
import logging
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import repeat
from operator import itemgetter
from typing import Any

from ..state.codec import Codec
from ..state.key_groups import stable_hash
from .record_size import OBJECT_OVERHEAD, batch_size
from .sort_runs import CHUNK, NO_TIMESTAMP, Run, RunCodec

__all__ = ["DEFAULT_SORT_MEMORY", "NO_TIMESTAMP", "SortBuffer"]

_log = logging.getLogger(__name__)

DEFAULT_SORT_MEMORY = 128 * 2**20  # Flink's execution.sorted-inputs.memory default
_ENTRY_OVERHEAD = 4 * 8 + OBJECT_OVERHEAD  # slots: record, timestamp, key id, input; an int
_ROW_ORDER = itemgetter(0, 1, 2, 3)  # hash, key id, timestamp key, input
_SECOND = itemgetter(1)


def _ts_key(ts: int | None) -> int:
    return NO_TIMESTAMP if ts is None else ts


class SortBuffer:
    """Buffers a keyed operator's records and gives them back key by key (module doc).

    In memory the records, their timestamps, their key ids and (once a second input is seen)
    their inputs are columns in arrival order, extended a batch at a time (no Python loop per
    record). To hand them out, one stable sort of the positions by their key's rank (a C-level
    key: ``ranks.__getitem__``) groups each key's records in arrival order, and each key's
    group is sorted by timestamp (``stamps.__getitem__`` when it has one input and
    timestamps)."""

    def __init__(
        self,
        where: str,
        memory: int = DEFAULT_SORT_MEMORY,
        spill_dir: str | None = None,
        codec: Codec | None = None,
        pickle_reason: str | None = None,
        logged: set[str] | None = None,
    ) -> None:
        """``codec``: the job's records codec (None: the default one); ``pickle_reason``: why
        the job may pickle a record the codec refuses (None: it may not); ``logged``: shared by
        a job's subtasks (``sort_runs.RunCodec``)."""
        self.where = where
        self.memory = memory
        self.spill_dir = spill_dir
        self.run_codec = RunCodec(where, memory, codec, pickle_reason, logged)
        self._ids: dict[Any, int] = {}
        self._keys: list[Any] = []  # key id -> key
        self._hashes: list[int] = []  # key id -> stable hash
        self._records: list = []
        self._kids: list[int] = []
        self._stamps: list = []
        self._inputs: list[int] | None = None  # None: every record so far is of input 0
        self._bytes = 0
        self._runs: list[Run] = []
        self.records = 0  # added in all
        self.spilled_bytes = 0  # estimated bytes written to runs

    # -- filling -------------------------------------------------------------
    def add(self, input_index: int, keys: list, records: list, timestamps: list[int] | None) -> None:
        n = len(records)
        base = len(self._records)
        self._records.extend(records)
        self._stamps.extend(repeat(None, n) if timestamps is None else timestamps)
        if input_index or self._inputs is not None:
            if self._inputs is None:
                self._inputs = [0] * base
            self._inputs.extend(repeat(input_index, n))
        get = self._ids.get
        kids: list[Any] = list(map(get, keys))
        if None in kids:
            for i, kid in enumerate(kids):
                if kid is None:
                    key = keys[i]
                    found = get(key)
                    kids[i] = self._new_key(key) if found is None else found
        self._kids.extend(kids)
        self.records += n
        self._bytes += batch_size(records) + n * _ENTRY_OVERHEAD
        if self._bytes > self.memory:
            self._spill()

    def _new_key(self, key: Any) -> int:
        try:
            h = stable_hash(key)
        except TypeError as exc:
            raise TypeError(f"{self.where}: cannot sort key {key!r} in batch mode: {exc}") from None
        kid = len(self._keys)
        self._ids[key] = kid
        self._keys.append(key)
        self._hashes.append(h)
        return kid

    def _key_order(self, kids: Iterable[int]) -> list[int]:
        """These key ids in key order (hash, then first arrival): C-level tuple compares."""
        kids = list(kids)
        return list(map(_SECOND, sorted(zip(map(self._hashes.__getitem__, kids), kids, strict=True))))

    def _groups(self) -> Iterator[tuple[int, list[int], list]]:
        """``(key id, positions, timestamps)`` for every key with records in memory, in key
        order, each key's positions (and their timestamps) in timestamp order (:meth:`_by_time`)."""
        kids = self._kids
        if not kids:
            return
        counts = Counter(kids)
        order_of_keys = self._key_order(counts)  # only the keys with records in memory (a spill)
        rank = [0] * len(self._keys)
        for r, kid in enumerate(order_of_keys):
            rank[kid] = r
        ranks = list(map(rank.__getitem__, kids))
        order = sorted(range(len(kids)), key=ranks.__getitem__)  # stable: arrival within a key
        del ranks
        start = 0
        for kid in order_of_keys:
            n = counts[kid]
            yield (kid, *self._by_time(order[start : start + n]))
            start += n

    def _by_time(self, at: list[int]) -> tuple[list[int], list]:
        """One key's positions by timestamp (``None`` first), then input, then arrival (a
        stable sort), and their timestamps. The key's timestamps are gathered once (the
        positions are scattered over the columns: every gather is a pass of cache misses) and
        sorted locally, with a C-level key for one input with timestamps."""
        inputs = self._inputs
        key_stamps = list(map(self._stamps.__getitem__, at))
        if inputs is None and None not in key_stamps:
            order = sorted(range(len(at)), key=key_stamps.__getitem__)
        elif inputs is None:
            order = sorted(range(len(at)), key=lambda j: _ts_key(key_stamps[j]))
        else:
            key_inputs = list(map(inputs.__getitem__, at))
            order = sorted(range(len(at)), key=lambda j: (_ts_key(key_stamps[j]), key_inputs[j]))
        return list(map(at.__getitem__, order)), list(map(key_stamps.__getitem__, order))

    def _reset_memory(self) -> None:
        self._records, self._stamps, self._kids = [], [], []
        self._inputs = None
        self._bytes = 0

    # -- spilling ------------------------------------------------------------
    def _spill(self) -> None:
        """Write everything in memory to a new sorted run (module doc; ``sort_runs.py``)."""
        file = tempfile.TemporaryFile(prefix="streamflow-sort-", dir=self.spill_dir)  # noqa: SIM115 (kept open: a run)
        rows = 0
        try:
            for kids, stamps, inputs, records in self._memory_columns():
                file.write(self.run_codec.frame(kids, stamps, inputs, records))
                rows += len(kids)
        except BaseException:
            file.close()
            raise
        file.flush()
        if not self._runs:
            _log.info(
                "%s: the sorted input passed execution.sorted-inputs.memory (%d bytes): spilling "
                "sorted runs to %s", self.where, self.memory, self.spill_dir or tempfile.gettempdir(),
            )  # fmt: skip
        self._runs.append(Run(file, rows, self.run_codec))
        self.spilled_bytes += self._bytes
        self._reset_memory()

    def _memory_columns(self) -> Iterator[tuple[list[int], list, list[int] | None, list]]:
        """The rows in memory in sort order as columns ``(key ids, timestamps, inputs or None,
        records)`` of ``CHUNK`` rows (the last one shorter), gathered a key at a time."""
        records, inputs = self._records, self._inputs
        kids: list[int] = []
        stamps: list = []
        ins: list[int] | None = None if inputs is None else []
        recs: list = []
        for kid, at, key_stamps in self._groups():
            kids.extend(repeat(kid, len(at)))
            stamps.extend(key_stamps)
            recs.extend(map(records.__getitem__, at))
            if ins is not None and inputs is not None:
                ins.extend(map(inputs.__getitem__, at))
            if len(kids) >= CHUNK:
                full = len(kids) - len(kids) % CHUNK
                for start in range(0, full, CHUNK):
                    end = start + CHUNK
                    yield (
                        kids[start:end],
                        stamps[start:end],
                        None if ins is None else ins[start:end],
                        recs[start:end],
                    )
                del kids[:full], stamps[:full], recs[:full]
                if ins is not None:
                    del ins[:full]
        if kids:
            yield kids, stamps, ins, recs

    def _memory_rows(self) -> Iterator[tuple]:
        hashes, records, inputs = self._hashes, self._records, self._inputs
        for kid, at, key_stamps in self._groups():
            h = hashes[kid]
            for i, ts in zip(at, key_stamps, strict=True):
                yield (h, kid, _ts_key(ts), 0 if inputs is None else inputs[i], ts, records[i])

    # -- draining ------------------------------------------------------------
    def drain(self, chunk: int) -> Iterator[tuple[int, Any, int, list, list | None]]:
        """``(key id, key, input, records, timestamps)`` chunks, key by key (module doc);
        ``timestamps`` is None for a chunk of records without any."""
        if self._runs:
            yield from self._drain_merged(chunk)
        else:
            yield from self._drain_memory(chunk)
        self.close()

    def _drain_memory(self, chunk: int) -> Iterator[tuple[int, Any, int, list, list | None]]:
        keys, records, inputs = self._keys, self._records, self._inputs
        for kid, at, key_stamps in self._groups():
            key = keys[kid]
            nones = key_stamps.count(None)
            if inputs is None and (nones == 0 or nones == len(at)):  # one input, one kind: slices
                key_records = list(map(records.__getitem__, at))
                for start in range(0, len(at), chunk):
                    part = key_stamps[start : start + chunk] if not nones else None
                    yield kid, key, 0, key_records[start : start + chunk], part
                continue
            entries = (
                (0 if inputs is None else inputs[i], ts, records[i])
                for i, ts in zip(at, key_stamps, strict=True)
            )
            yield from _chunks(kid, key, entries, chunk)
        self._reset_memory()

    def _drain_merged(self, chunk: int) -> Iterator[tuple[int, Any, int, list, list | None]]:
        keys = self._keys
        hashes = self._hashes
        streams = [run.read(hashes) for run in self._runs]
        streams.append(self._memory_rows())
        merged = heapq.merge(*streams, key=_ROW_ORDER)
        current = -1
        group: list[tuple[int, int | None, Any]] = []
        for row in merged:
            kid = row[1]
            if kid != current:
                if group:
                    yield from _chunks(current, keys[current], group, chunk)
                current, group = kid, []
            group.append((row[3], row[4], row[5]))
            if len(group) >= chunk:  # a long key: hand out what is there (one input per chunk)
                yield from _chunks(current, keys[current], group, chunk)
                group = []
        if group:
            yield from _chunks(current, keys[current], group, chunk)

    def close(self) -> None:
        runs, self._runs = self._runs, []
        for run in runs:
            run.file.close()

    def __len__(self) -> int:
        return self.records


def _chunks(
    kid: int, key: Any, entries: Any, chunk: int
) -> Iterator[tuple[int, Any, int, list, list | None]]:
    """Consecutive ``(input, timestamp, record)`` entries of one key as chunks of one input,
    each with timestamps or without (records without one come first in a key: a union of a
    stream with timestamps and one without)."""
    records: list = []
    stamps: list = []
    current = -1
    bare = False
    for input_index, ts, record in entries:
        if records and (input_index != current or len(records) >= chunk or (ts is None) != bare):
            yield kid, key, current, records, None if bare else stamps
            records, stamps = [], []
        current, bare = input_index, ts is None
        records.append(record)
        stamps.append(ts)
    if records:
        yield kid, key, current, records, None if bare else stamps
