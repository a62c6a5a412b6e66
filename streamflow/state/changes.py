"""The log of writes to one heap keyed state table since the last checkpoint.

Theory of operation
-------------------
An incremental checkpoint of the heap backend (``incremental.py``) writes the
entries written since the last one. Every table the backend hands out *tracked*
comes with a :class:`Changes`: those writes, oldest first, read back by the next
capture (``columns``) and then cleared.

Two ways in:

* ``extend(keys, values)``: a record batch with its values (the keyed
  ``reduce``/``sum``, window panes, timers): a copy of both lists, no per-key
  hashing (keeping a dict of dirty keys cost more than a third of such a job's
  CPU with a million keys, a hash insert per record that misses the cache).
  ``patch``: the position of the only field that differs from the key's value
  before the batch, for a batch of tuples that all replaced an existing key's
  tuple keeping the other fields (the keyed ``sum`` of a tuple field): the log
  keeps that field of each value only, and the capture writes it as a patch
  frame (``heap_frames.py``). So the log keeps no replaced accumulator alive:
  the tuple it replaced is freed at once (the interpreter's tuple free list
  recycles it into the next one, which the collector does not count).
  ``keys=None``: a table whose values are tuples with their key as field 0, the
  very object (``key_first``: the keyed ``sum`` keyed by field 0): the log keeps
  the values only, whole, and reads keys (and a patch's field) from them when it
  is read. Logging the batch's keys kept every record's key alive until the next
  capture (the table holds the first record's key object, not later records'),
  with the patched fields: a million strings and ints more in memory, fresh
  pages and cache misses (the heap job, ``bench/state_checkpoints.py``); the
  values are the table's own tuples, alive anyway unless a key is written again
  before the capture (then the replaced tuple stays alive until it: a hot key's
  log is merged past twice the table's size, see Bounds).
* ``put``/``delete``: one write; it goes straight into a dict of merged writes
  while nothing is logged (so a key written a thousand times through a
  ``ListState`` is one entry), else into an open batch of :data:`BATCH` writes.

Logging keys only and reading their values from the table at the capture was
measured and not kept: it frees each replaced accumulator at once (the log no
longer defeats the interpreter's tuple free list; cachegrind counted fewer
instructions and D1 misses), but a lookup in a table of a million keys misses
the cache, and on the shared machine the job with checkpoints took more CPU,
not less (docs/performance.md, ``incr``, third session).

Paused. While the next capture writes a base whatever was logged (no checkpoint of the
chain confirmed and none pending: the job's start, after a restore), the backend pauses
its logs (``paused``): writes are not recorded, and the first capture clears the pause
(``clear``). A job's first interval then pays nothing for the log, neither the copies
nor the logged values kept alive until the base (which reads the table, not the log).

Bounds. When the log holds more than twice the table's size (hot keys), its
oldest batches are merged into the dict of merged writes, a bounded amount per
write; once that dict holds :data:`CHUNK` keys the writes are spread over much
of the table, not over a few hot keys, and the log gives up (``full``): it
records nothing more, and the next capture writes a base, which holds every
write and costs no more than the log's entries would.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from itertools import repeat
from operator import is_, itemgetter
from typing import Any

__all__ = ["BATCH", "CHUNK", "MISSING", "SLACK", "Changes"]

CHUNK = 16_384  # keys per slice: capture and encoding yield to the loop between slices
MISSING: Any = object()  # a dirty key whose value is gone: a deletion
SLACK = 4_096  # writes logged beyond twice the table's size before the oldest are merged
BATCH = 1_024  # single writes gathered into one logged batch
_FIELD_0 = itemgetter(0)

# keys (None: field 0 of each value), values (of a patch batch with keys: the patched field of
# each; whole values when the keys are None), patch (the field, or None)
Batch = tuple["Sequence[Any] | None", Sequence[Any], "int | None"]
Column = tuple[list[Any], list[Any], bool, "int | None"]  # keys, values, each key once, patch


class Changes:
    """The writes to one table since the last capture, oldest first (see the module doc).

    A logged batch is ``(keys, values, patch)``. When the log holds more than twice the table's
    size (plus :data:`SLACK`), its oldest batches are merged into ``merged`` (a dict: each
    key once), at most about twice what the write added, so no single write pays for all."""

    __slots__ = (
        "_open_keys", "_open_values", "batches", "deletes", "full", "key_first", "logged", "merged", "paused",
        "shape", "table",
    )  # fmt: skip

    def __init__(self, table: dict, paused: bool = False) -> None:
        self.table = table
        self.merged: dict[Any, Any] = {}  # older than every logged batch
        self.batches: deque[Batch] = deque()
        self.logged = 0  # entries in batches and in the open batch
        self.deletes = False  # a MISSING value may be among the writes
        # the log gave up (see _merge_oldest): writes are not recorded any more, and the next
        # capture writes the whole table (a base), which holds every write
        self.full = False
        # the next capture writes a base anyway (module doc): nothing is recorded until it clears
        self.paused = paused
        # every value of the table is a tuple of this length, its writer vouches (the keyed sum
        # of a tuple field): the capture reads no value's type nor length (heap_frames.py)
        self.shape: int | None = None
        # ... and field 0 of each is its key, the very object (the keyed sum keyed by field 0):
        # the capture writes the key once (heap_frames.py, "putk" frames)
        self.key_first = False
        self._open_keys: list[Any] = []
        self._open_values: list[Any] = []

    @property
    def recording(self) -> bool:
        """Whether writes are recorded now (callers may skip building what they would log)."""
        return not (self.full or self.paused)

    def extend(self, keys: list | None, values: list, patch: int | None = None) -> None:
        """Log a batch; ``patch`` and ``keys=None``: see the module doc (the caller vouches
        for them)."""
        if self.full or self.paused:
            return
        if self._open_keys:
            self._close()
        # tuples, not lists: once its values are untracked (the young collection at the next
        # pause untracks tuples of numbers and strings), the collector untracks the batch too,
        # so a full collection never walks a log of a million entries (30+ ms of CPU)
        if keys is None:
            self.batches.append((None, tuple(values), patch))
        else:
            kept = tuple(values) if patch is None else tuple(map(itemgetter(patch), values))
            self.batches.append((tuple(keys), kept, patch))
        self.logged += len(values)
        if self.logged > 2 * len(self.table) + SLACK:
            self._merge_oldest(2 * len(values))

    def put(self, key: Any, value: Any) -> None:
        if self.full or self.paused:
            return
        if not self.logged:  # nothing logged: the merged entries are the newest, keep it so
            self.merged[key] = value
            return
        self._open_keys.append(key)
        self._open_values.append(value)
        self.logged += 1
        if len(self._open_keys) >= BATCH:
            self._close()
            if self.logged > 2 * len(self.table) + SLACK:
                self._merge_oldest(2 * BATCH)

    def delete(self, key: Any) -> None:
        self.deletes = True
        self.put(key, MISSING)

    def _close(self) -> None:
        self.batches.append((tuple(self._open_keys), tuple(self._open_values), None))  # see extend
        self._open_keys, self._open_values = [], []

    def _merge_oldest(self, count: int) -> None:
        """Merge the ``count`` oldest logged writes into ``merged`` (a batch longer than that
        is split: a sealed dict of CHUNK keys merged back in one call held the loop 2-6 ms).
        Once ``merged`` holds :data:`CHUNK` keys the writes are not few hot keys but much of
        the table: the log gives up (``full``), since the next capture's base costs no more
        than the log's twice-the-table entries would (each key once), and merging a write per
        record cost a dict insert per record plus, per CHUNK keys, a seal and a merge back."""
        merged, batches = self.merged, self.batches
        done = 0
        while batches and done < count:
            keys, values, patch = batches[0]
            if keys is None:  # whole values, keyed by their field 0
                keys, patch = list(map(_FIELD_0, values)), None
            take = count - done
            if len(keys) > take:
                keys, values, rest = keys[:take], values[:take], (keys[take:], values[take:], patch)
                batches[0] = rest
            else:
                batches.popleft()
            if patch is not None:  # merged writes are whole values: see _whole
                values = self._whole(keys)
            merged.update(zip(keys, values, strict=True))
            done += len(keys)
        self.logged -= done
        if len(merged) >= CHUNK:
            self.full = True
            self.merged = {}  # CHUNK entries at most; the batches are freed by the capture, a part at a time

    def _whole(self, keys: Sequence[Any]) -> list[Any]:
        """The whole values of a patch batch's keys, to merge it: the table's values now (the
        patched field of each is this batch's or a later logged write's, which the capture
        applies after the merged writes; the other fields never changed). A key deleted since
        is a deletion (its later writes, if any, are logged after)."""
        values = list(map(self.table.get, keys, repeat(MISSING)))
        if any(map(is_, values, repeat(MISSING))):  # identity: a value's __eq__ is not asked
            self.deletes = True
        return values

    def seal(self) -> None:
        """Move the merged writes into the log, as its oldest batch, once they hold
        :data:`CHUNK` keys: a dict that grows to a million keys resizes in single C calls of
        30-40 ms on the loop (the task calls this between slices, see ``seal_dirty``)."""
        merged = self.merged
        if len(merged) >= CHUNK and not self.full:
            self.batches.appendleft((tuple(merged), tuple(merged.values()), None))  # see extend
            self.logged += len(merged)
            self.merged = {}

    def __len__(self) -> int:
        return len(self.merged) + self.logged

    def columns(self, consume: bool) -> Iterator[Column]:
        """The writes as (keys, values, each key once, patch) columns, oldest first: the
        merged ones, then the log, in columns of at least :data:`CHUNK` entries (apply them
        in order: a later write of a key wins), consecutive batches of one ``patch`` together.
        ``consume``: drop each batch once read, so the values it alone kept alive are freed
        a column at a time, not all at once in :meth:`clear` (a million frees is a long
        hold); call :meth:`clear` after."""
        if self.merged:
            yield list(self.merged), list(self.merged.values()), True, None
        if self._open_keys:
            self._close()
        column: list[list[Any]] = [[], []]  # the lists are handed out, not kept while paused
        patch: int | None = None
        for k, v, p in _drain(self.batches) if consume else self.batches:
            if p != patch and column[0]:
                yield _take(column, patch)
            patch = p
            if k is None:  # whole values keyed by their field 0 (module doc)
                column[0] += map(_FIELD_0, v)
                column[1] += v if p is None else map(itemgetter(p), v)
            else:
                column[0] += k
                column[1] += v
            if len(column[0]) >= CHUNK:
                yield _take(column, patch)
        if column[0]:
            yield _take(column, patch)

    def clear(self) -> None:
        self.merged = {}
        self.batches.clear()
        self._open_keys, self._open_values = [], []
        self.logged = 0
        self.deletes = False
        self.full = False
        self.paused = False  # a capture was taken: the next one may be a delta


def _take(column: list[list[Any]], patch: int | None) -> Column:
    keys, values = column
    column[:] = [], []
    return keys, values, False, patch


def _drain(batches: deque[Batch]) -> Iterator[Batch]:
    while batches:
        yield batches.popleft()
