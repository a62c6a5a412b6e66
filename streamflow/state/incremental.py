"""Incremental checkpoints of the heap keyed state backend: logged writes, deltas and chains.

Theory of operation
-------------------
Flink's changelog state backend is the model: a checkpoint writes only what
changed since the last one, and a periodic *materialisation* writes everything,
so a restore reads a bounded chain: the newest full file (the *base*) and the
deltas after it, in order.

The log of writes. Every keyed state table the backend hands out *tracked*
(``KeyedStateBackend.tracked_table``) comes with a :class:`Changes`: the writes
since the last capture, oldest first, with their values (``MISSING``: deleted).
Built-in operators that touch tables directly (``reduce``, ``sum``) log each
record batch as it is (``extend``: a copy of the batch's key and value lists, no
per-key hashing: keeping a dict of dirty keys cost more than a third of such a
job's CPU with a million keys, a hash insert per record that misses the cache);
state objects ``put`` one write, which goes straight into a dict of merged
writes while nothing is logged (so a key written a thousand times through a
``ListState`` is one entry). When the log holds more than twice the table's size
(hot keys), its oldest batches are merged into that dict, a bounded amount per
write; once that dict holds :data:`CHUNK` keys the writes are spread over much of
the table, not over a few hot keys, and the log gives up (``Changes.full``): it
records nothing more, and the next capture writes a base, which holds every write
and costs no more than the log's entries would. A table handed out untracked
(``backend.table``: TTL state with full-snapshot cleanup;
other TTL state logs its writes, ``ttl_state.py``) makes the backend take full
snapshots in the former format, so an operator that does not record what it
changes can never lose a change.

Capture (at the barrier, in the task, before the barrier is forwarded): the
dirty entries of each table (or, when materialising, all of them) are *encoded*
right away, in slices of :data:`CHUNK` keys that yield to the event loop
between them; the task itself waits, so its state cannot change in between, and
since the snapshot is bytes, no later in-place mutation can reach it. (Encoding
at once costs less than copying references, checking which values are
immutable and encoding later: measured in docs/performance.md.) A slice that
repeats a key is reduced to each key's last write only when it holds a deletion
or mutable values (a logged list is the same object each time). The logs are
cleared. After the barrier the upload only joins the frames
(:meth:`HeapUpload.produce`); hashing and writing run in the storage thread.

Format: a file is a MessagePack stream: a header (codec name, full or delta,
the writer's key-group range, the state kinds), then frames ``[state, "put",
keys, values]`` and ``[state, "del", keys]``, then ``["", "end", key kinds]``.
A column is packed by the cheapest exact encoding that accepts it (msgspec for
scalars and tuples of scalars, msgpack strict, column-wise tuples, the job's codec),
tagged so a restore knows which: see ``heap_columns.py``.

Chains. The backend remembers the chain of the last checkpoint confirmed
complete (``notify_checkpoint_complete``). Checkpoint n writes a delta holding
every key dirty since that checkpoint (including those of checkpoints still
pending or aborted since) and references that chain plus its own delta. It
materialises instead (a full base, chain of one) when there is no confirmed
chain (the first checkpoint, and the first after a restore, which may have
merged several old subtasks' chains), when the chain holds ``max_chain``
deltas, or when its deltas together are more than twice what a base would take
now (the state's entries times the chain's bytes per entry: a restore would
read more than three bases; a state that only grows is never written twice,
whereas measuring against the first, small base rewrote it again and again).
A savepoint's snapshot is a delta too (the storage copies the chain into the
savepoint) but leaves the logs and the chain alone: the checkpoints after it are based on checkpoints only.

Key groups are never computed at checkpoint time: every file records the
key-group range of the subtask that wrote it, and all its keys lie in that
range. A restore at the same parallelism applies whole files; one at another
parallelism applies the files whose range overlaps its own, computing the key
group only of keys in files that straddle its range.
"""

from __future__ import annotations

import hashlib
import secrets
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import compress, islice, repeat
from operator import is_
from pathlib import Path
from typing import Any

import msgpack

from .codec import Codec
from .heap_columns import pack_column, pack_column_typed, packb, types_of, unpack_column

__all__ = [
    "CHUNK", "Capture", "Changes", "HeapChain", "HeapUpload", "apply_file", "apply_file_slices", "capture",
    "pack_column", "unpack_column",
]  # fmt: skip

CHUNK = 16_384  # keys per slice: capture and encoding yield to the loop between slices
FORMAT = "streamflow-heap-state"
MISSING: Any = object()  # a dirty key whose value is gone: a deletion

# ------------------------------------------------------------------ changes


SLACK = 4_096  # writes logged beyond twice the table's size before the oldest are merged
BATCH = 1_024  # single writes gathered into one logged batch


class Changes:
    """The writes to one table since the last capture, oldest first (see module doc).

    ``extend(keys, values)`` logs a batch (a copy of both lists: no per-key hashing),
    ``put``/``delete`` log one write. When the log holds more than twice the table's size
    (plus :data:`SLACK`), its oldest batches are merged into ``merged`` (a dict: each key
    once), at most about twice what the write added, so no single write pays for all."""

    __slots__ = ("_open_keys", "_open_values", "batches", "deletes", "full", "logged", "merged", "table")

    def __init__(self, table: dict) -> None:
        self.table = table
        self.merged: dict[Any, Any] = {}  # older than every logged batch
        self.batches: deque[tuple[Sequence, Sequence]] = deque()
        self.logged = 0  # entries in batches and in the open batch
        self.deletes = False  # a MISSING value may be among the writes
        # the log gave up (see _merge_oldest): writes are not recorded any more, and the next
        # capture writes the whole table (a base), which holds every write
        self.full = False
        self._open_keys: list[Any] = []
        self._open_values: list[Any] = []

    def extend(self, keys: list, values: list) -> None:
        if self.full:
            return
        if self._open_keys:
            self._close()
        # tuples, not lists: once its values are untracked (the young collection at the next
        # pause untracks tuples of numbers and strings), the collector untracks the batch too,
        # so a full collection never walks a log of a million entries (30+ ms of CPU)
        self.batches.append((tuple(keys), tuple(values)))
        self.logged += len(keys)
        if self.logged > 2 * len(self.table) + SLACK:
            self._merge_oldest(2 * len(keys))

    def put(self, key: Any, value: Any) -> None:
        if self.full:
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
        self.batches.append((tuple(self._open_keys), tuple(self._open_values)))  # see extend
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
            keys, values = batches[0]
            take = count - done
            if len(keys) > take:
                merged.update(zip(keys[:take], values[:take], strict=True))
                batches[0] = (keys[take:], values[take:])
                done += take
            else:
                batches.popleft()
                merged.update(zip(keys, values, strict=True))
                done += len(keys)
        self.logged -= done
        if len(merged) >= CHUNK:
            self.full = True
            self.merged = {}  # CHUNK entries at most; the batches are freed by the capture, a part at a time

    def seal(self) -> None:
        """Move the merged writes into the log, as its oldest batch, once they hold
        :data:`CHUNK` keys: a dict that grows to a million keys resizes in single C calls of
        30-40 ms on the loop (the task calls this between slices, see ``seal_dirty``)."""
        merged = self.merged
        if len(merged) >= CHUNK and not self.full:
            self.batches.appendleft((tuple(merged), tuple(merged.values())))  # see extend
            self.logged += len(merged)
            self.merged = {}

    def __len__(self) -> int:
        return len(self.merged) + self.logged

    def columns(self, consume: bool) -> Iterator[tuple[list, list, bool]]:
        """The writes as (keys, values, each key once) columns, oldest first: the merged
        ones, then the log, in columns of at least :data:`CHUNK` entries (apply them in
        order: a later write of a key wins). ``consume``: drop each batch once read, so the
        values it alone kept alive are freed a column at a time, not all at once in
        :meth:`clear` (a million frees is a long hold); call :meth:`clear` after."""
        if self.merged:
            yield list(self.merged), list(self.merged.values()), True
        if self._open_keys:
            self._close()
        keys: list[Any] = []
        values: list[Any] = []
        batches = self.batches
        for k, v in _drain(batches) if consume else batches:
            keys += k
            values += v
            if len(keys) >= CHUNK:
                yield keys, values, False
                keys, values = [], []
        if keys:
            yield keys, values, False

    def clear(self) -> None:
        self.merged = {}
        self.batches.clear()
        self._open_keys, self._open_values = [], []
        self.logged = 0
        self.deletes = False
        self.full = False


def _drain(batches: deque[tuple[Sequence, Sequence]]) -> Iterator[tuple[Sequence, Sequence]]:
    while batches:
        yield batches.popleft()


# ------------------------------------------------------------------ capture


@dataclass
class Capture:
    """One backend's state at a barrier: per table, keys and their values (MISSING: deleted)."""

    name: str  # the new shared file
    full: bool
    chain: list[str]  # the checkpoint's chain, the new file last
    kinds: dict[str, str]
    key_groups: range
    parts: list[bytes] = field(default_factory=list)  # the file, encoded frame by frame

    def descriptor(self) -> dict[str, Any]:
        """What the operator state holds in place of the keyed state itself."""
        return {
            "incremental": 1,
            "chain": list(self.chain),
            "kinds": dict(self.kinds),
            "range": [self.key_groups.start, self.key_groups.stop],
        }


@dataclass
class _Pending:
    """A captured checkpoint not yet confirmed: its chain, and its frames if it was a delta
    (the next checkpoint repeats them, in case this one never completes)."""

    chain: list[str]
    full: bool
    frames: list[bytes]
    key_types: set[type]


class HeapChain:
    """Which files the next checkpoint of one backend writes and references (see module doc)."""

    def __init__(self, owner: str, max_chain: int) -> None:
        self.prefix = f"heap-{hashlib.sha256(owner.encode()).hexdigest()[:12]}"
        self.max_chain = max_chain
        self.confirmed: list[str] = []  # the chain of the last confirmed checkpoint
        self.pending: dict[int, _Pending] = {}  # captured, not yet confirmed, by checkpoint id
        self.sizes: dict[str, int] = {}  # file -> bytes, once encoded
        self.entries: dict[str, int] = {}  # file -> the entries written into it

    def must_materialise(self, entries: int) -> bool:
        """Whether the next checkpoint writes a base; ``entries``: the state's size now."""
        if not self.confirmed or len(self.confirmed) > self.max_chain:
            return True
        if any(p.full for p in self.pending.values()):  # a base not yet confirmed: another one
            return True
        base, deltas = self.confirmed[0], self.confirmed[1:]
        base_size = self.sizes.get(base, 1 << 62)
        # what a base would take now, at the chain's bytes per entry: the state may have grown
        # since the base (one written early holds few keys; measuring the deltas against it
        # would rewrite a growing state again and again)
        chain_bytes = sum(self.sizes.get(f, 0) for f in self.confirmed)
        per_entry = chain_bytes / max(1, sum(self.entries.get(f, 0) for f in self.confirmed))
        full_size = max(base_size, entries * per_entry)
        # checkpoints that keep failing would repeat ever more frames: a base ends that too
        repeated = sum(len(f) for p in self.pending.values() for f in p.frames)
        return sum(self.sizes.get(d, 0) for d in deltas) > 2 * full_size or repeated > full_size

    def new_name(self, checkpoint_id: int, full: bool, savepoint: bool) -> str:
        kind = "base" if full else "delta"
        return f"{self.prefix}-{checkpoint_id}-{kind}{'-sp' if savepoint else ''}-{secrets.token_hex(4)}"

    def confirm(self, checkpoint_id: int) -> None:
        entry = self.pending.get(checkpoint_id)
        if entry is None:
            return  # a savepoint, a full-format snapshot, or already subsumed
        self.confirmed = entry.chain
        for cid in [c for c in self.pending if c <= checkpoint_id]:
            del self.pending[cid]
        live = set(self.confirmed).union(*(p.chain for p in self.pending.values()))
        for name in [n for n in self.sizes if n not in live]:
            del self.sizes[name]
        for name in [n for n in self.entries if n not in live]:
            del self.entries[name]

    def reset(self) -> None:
        """After a restore: the next checkpoint materialises."""
        self.confirmed, self.pending = [], {}


async def capture(
    tables: dict[str, dict],
    dirty: dict[str, Changes],
    kinds: dict[str, str],
    chain_state: HeapChain,
    settings: Any,
    checkpoint_id: int,
    savepoint: bool,
    key_kind: Callable[[type], str],
    to_plain: dict[str, Callable[[Any], Any]] | None = None,
) -> Capture:
    """Encode, at the barrier, the writes since the last capture (or all entries) into the
    frames of a new file, one slice of :data:`CHUNK` keys at a time, yielding to the loop
    between slices.

    ``dirty`` holds each table's writes with their values (MISSING: deleted), so a delta is
    read sequentially from it, never looked up in the (much larger) table. Pauses go through
    the job's loop budget (``loop_budget.yield_point``). ``to_plain``: per table, what its
    values are written as (the window operator's windows become tuples), slice by slice."""
    from ..runtime.loop_budget import yield_point

    entries = sum(map(len, tables.values()))
    # a log that gave up (Changes.full) holds only part of the writes: the table has them all
    full = any(c.full for c in dirty.values()) or chain_state.must_materialise(entries)
    name = chain_state.new_name(checkpoint_id, full, savepoint)
    chain_ = [name] if full else [*chain_state.confirmed, name]
    groups: range = settings.key_groups
    codec: Codec = settings.codec
    cap = Capture(name, full, chain_, dict(kinds), groups)
    header = {
        "format": FORMAT, "version": 1, "codec": codec.name, "full": full,
        "range": [groups.start, groups.stop], "kinds": cap.kinds,
    }  # fmt: skip
    frames: list[bytes] = []
    key_types: set[type] = set()
    written = 0
    for table_name, table in tables.items():
        changes = dirty.get(table_name)
        if changes is None:
            changes = dirty[table_name] = Changes(table)
        deletes = not full and changes.deletes
        # a base reads the table through iterators (a list of a million keys is a long hold);
        # the task waits for its capture, so nothing writes the table meanwhile (a write would
        # fail the capture loudly: 'dictionary changed size during iteration')
        source: Iterable[tuple[list, list, bool]] = (
            _table_slices(table) if full else changes.columns(consume=not savepoint)
        )
        for keys, values, unique in source:
            # a column of the log (CHUNK entries plus the rest of its last batch) is one slice,
            # not copied again; a longer one (the merged writes, batches larger than a
            # quarter of CHUNK) is cut into slices of CHUNK, so no slice holds the loop longer
            parts = (
                [(keys, values)]
                if len(keys) <= CHUNK + CHUNK // 4
                else [(keys[i : i + CHUNK], values[i : i + CHUNK]) for i in range(0, len(keys), CHUNK)]
            )
            plain = None if to_plain is None else to_plain.get(table_name)
            for part, vals in parts:
                written += len(part)
                if plain is not None:
                    vals = [v if v is MISSING else plain(v) for v in vals]
                frames.extend(_slice_frames(table_name, part, vals, deletes, unique, codec, key_types))
                await yield_point()
        if not savepoint:
            while changes.batches:  # a base leaves the log unread: freed a part at a time
                for _ in range(min(64, len(changes.batches))):
                    changes.batches.popleft()
                await yield_point()
            changes.clear()
    earlier = [] if full else [p for _cid, p in sorted(chain_state.pending.items())]
    all_types = key_types.union(*(p.key_types for p in earlier))
    cap.parts = [
        packb(header),
        *(f for p in earlier for f in p.frames),  # repeated: their checkpoints may never complete
        *frames,
        packb(["", "end", sorted({key_kind(t) for t in all_types})]),
    ]
    chain_state.entries[name] = written
    if not savepoint:
        chain_state.pending[checkpoint_id] = _Pending(chain_, full, [] if full else frames, key_types)
    return cap


def _table_slices(table: dict) -> Iterator[tuple[list, list, bool]]:
    kit, vit = iter(table), iter(table.values())
    while part := list(islice(kit, CHUNK)):
        yield part, list(islice(vit, CHUNK)), True


# ------------------------------------------------------------------ encoding

_MUTABLE = frozenset({list, dict, set, bytearray})


def _slice_frames(
    table: str, keys: list, values: list, deletes: bool, unique: bool, codec: Codec, key_types: set[type]
) -> list[bytes]:
    """The frames of one slice of writes, oldest first. A key written more than once in the
    slice is written once (its last value) when the slice holds a deletion (a ``del`` and a
    ``put`` frame are not ordered against each other) or mutable values (each logged write
    refers to the same object, which holds its latest value: encoding it once per write
    would cost the square of a growing list's length)."""
    value_types = types_of(values)
    has_deletes = deletes and any(map(is_, values, repeat(MISSING, len(values))))
    if not unique and (has_deletes or not _MUTABLE.isdisjoint(value_types)):
        last = dict(zip(keys, values, strict=True))
        keys, values = list(last), list(last.values())
        value_types = types_of(values)
    frames = []
    if has_deletes:
        present = [v is not MISSING for v in values]
        dels = [k for k, p in zip(keys, present, strict=True) if not p]
        frames.append(packb([table, "del", pack_column(dels, codec)]))
        keys, values = list(compress(keys, present)), list(compress(values, present))
        value_types.discard(type(MISSING))
    if keys:
        packed_keys, types = pack_column_typed(keys, codec)
        key_types |= types
        frames.append(packb([table, "put", packed_keys, pack_column_typed(values, codec, value_types)[0]]))
    return frames


class HeapUpload:
    """The shared file of one captured backend (a ``SharedUpload``): encoded at the barrier
    already, it is only joined here."""

    def __init__(self, cap: Capture, chain_state: HeapChain) -> None:
        self.capture = cap
        self.chain_state = chain_state
        self.references = frozenset(cap.chain[:-1])

    async def produce(self) -> dict[str, bytes | Path]:
        cap = self.capture
        data = b"".join(cap.parts)
        cap.parts = []
        self.chain_state.sizes[cap.name] = len(data)
        return {cap.name: data}


# ------------------------------------------------------------------ restore


def _frames(data: bytes) -> Iterator[Any]:
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, use_list=True, max_buffer_size=0)
    unpacker.feed(data)
    yield from unpacker


def apply_file(
    data: bytes,
    tables: Callable[[str, str], dict],
    codec: Codec,
    groups: range,
    key_group_of: Callable[[Any], int],
) -> set[str]:
    """Apply one base or delta to ``tables(name, kind)``, keeping the keys in ``groups``;
    returns the key kinds it holds. Raises ValueError when the file is not one."""
    kinds: set[str] = set()
    for _ in apply_file_slices(data, tables, codec, groups, key_group_of, kinds):
        pass
    return kinds


def apply_file_slices(
    data: bytes,
    tables: Callable[[str, str], dict],
    codec: Codec,
    groups: range,
    key_group_of: Callable[[Any], int],
    key_kinds: set[str],
) -> Iterator[None]:
    """:func:`apply_file` one frame (at most :data:`CHUNK` keys) per step, adding the file's key
    kinds to ``key_kinds`` at the end: a restore decodes between loop pauses. The first step
    only checks the header (a wrong codec or format raises there, before any frame applies)."""
    frames = _frames(data)
    header = next(frames, None)
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("version") != 1:
        raise ValueError("not a heap state file of a known version")
    if header["codec"] != codec.name:
        raise ValueError(
            f"written with the {header['codec']!r} state codec, but this job uses {codec.name!r}: "
            "configure the same codec (set_state_codec) to restore it"
        )
    yield
    start, stop = header["range"]
    if stop <= groups.start or start >= groups.stop:
        return
    keep_all = groups.start <= start and stop <= groups.stop
    kinds: dict[str, str] = header["kinds"]
    for frame in frames:
        name, op = frame[0], frame[1]
        if op == "end":
            key_kinds.update(frame[2])
            return
        table = tables(name, kinds[name])
        keys = unpack_column(frame[2], codec)
        if op == "put":
            values = unpack_column(frame[3], codec)
            if len(values) != len(keys):
                raise ValueError(f"{len(keys)} keys but {len(values)} values")
            if keep_all:
                table.update(zip(keys, values, strict=True))
            else:
                table.update((k, v) for k, v in zip(keys, values, strict=True) if key_group_of(k) in groups)
        elif op == "del":
            for k in keys:
                table.pop(k, None)
        else:
            raise ValueError(f"unknown frame {op!r}")
        yield
    raise ValueError("truncated: no end frame")
