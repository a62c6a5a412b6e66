"""Incremental checkpoints of the heap keyed state backend: logged writes, deltas and chains.

Theory of operation
-------------------
Flink's changelog state backend is the model: a checkpoint writes only what
changed since the last one, and a periodic *materialisation* writes everything,
so a restore reads a bounded chain: the newest full file (the *base*) and the
deltas after it, in order.

The log of writes. Every keyed state table the backend hands out *tracked*
(``KeyedStateBackend.tracked_table``) comes with a :class:`Changes` (``changes.py``):
the writes since the last capture, oldest first (``MISSING``: deleted). Built-in
operators that touch tables directly (``reduce``, ``sum``) log each record batch
(its keys and values), state objects one write at a time; a log that grows past
twice the table gives up, and the next capture writes a base. A table handed out
untracked (``backend.table``: TTL state with full-snapshot cleanup; other TTL
state logs its writes, ``ttl_state.py``) makes the backend take full snapshots in
the former format, so an operator that does not record what it changes can never
lose a change.

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
(:meth:`HeapUpload.produce`: past ``uploads.JOIN_ON_LOOP_MAX`` in a worker thread, as
17 MB at 1M keys took 2-48 ms on the loop); hashing and writing run in the storage thread.

Or, when ``heap_fork.wanted`` says a child costs the job less: the capture
forks (``snapshot_process.py``) and the child encodes the same frames from its
copy-on-write image of the state as of the barrier, into a file of its own;
the task clears its logs and goes on at once, and the upload hands the storage
that file once the child reported. A delta whose checkpoint is still pending is
repeated by the next capture from its child's file.

Format: a file is a MessagePack stream: a header (codec name, full or delta,
the writer's key-group range, the state kinds), then frames ``[state, "put",
keys, values]``, ``[state, "putk", keys, fields]`` (tuples whose field 0 is the key),
``[state, "del", keys]`` and ``[state, "patch", keys, fields, columns]`` (the changed
fields of tuples: ``heap_frames.py``), then ``["", "end",
key kinds]``. The logs pause while the next capture is a base anyway (``changes.py``).
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
import logging
import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

import msgpack

from ..checkpoint.shared_files import HashedFile
from ..checkpoint.uploads import join_parts
from . import heap_fork as _fork
from .changes import CHUNK, MISSING, SLACK, Changes, Column
from .codec import Codec
from .heap_columns import pack_column, packb, unpack_column
from .heap_frames import apply_patch, key_first_values, patch_frame, slice_frames
from .snapshot_process import SnapshotChild

__all__ = [
    "CHUNK", "MISSING", "SLACK", "Capture", "Changes", "HeapChain", "HeapUpload", "apply_file",
    "apply_file_slices", "capture", "pack_column", "unpack_column",
]  # fmt: skip

FORMAT = "streamflow-heap-state"
_log = logging.getLogger(__name__)

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
    child: SnapshotChild | None = None  # or: a child writes the file (heap_fork.py)
    path: Path | None = None  # where

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
    key_kinds: set[str]  # of its own frames
    child: SnapshotChild | None = None  # its child, until it reported (heap_fork.py)
    file: Path | None = None  # the child's file, which holds its frames
    span: tuple[int, int] = (0, 0)  # where, once the child reported


class HeapChain:
    """Which files the next checkpoint of one backend writes and references (see module doc)."""

    def __init__(self, owner: str, max_chain: int) -> None:
        self.prefix = f"heap-{hashlib.sha256(owner.encode()).hexdigest()[:12]}"
        self.max_chain = max_chain
        self.confirmed: list[str] = []  # the chain of the last confirmed checkpoint
        self.pending: dict[int, _Pending] = {}  # captured, not yet confirmed, by checkpoint id
        self.sizes: dict[str, int] = {}  # file -> bytes, once encoded
        self.entries: dict[str, int] = {}  # file -> the entries written into it
        self.staged: dict[int, Path] = {}  # checkpoint id -> its snapshot child's file (heap_fork.py)
        self.broken = False  # a snapshot child failed after its logs were cleared: write a base

    def base_next(self) -> bool:
        """Whether the next capture writes a base whatever was logged (nothing confirmed, nothing
        pending): the backend pauses its logs meanwhile (``Changes.paused``)."""
        return not self.confirmed and not self.pending

    def must_materialise(self, entries: int) -> bool:
        """Whether the next checkpoint writes a base; ``entries``: the state's size now."""
        if self.broken or not self.confirmed or len(self.confirmed) > self.max_chain:
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
        repeated = sum(sum(map(len, p.frames)) + p.span[1] - p.span[0] for p in self.pending.values())
        return sum(self.sizes.get(d, 0) for d in deltas) > 2 * full_size or repeated > full_size

    def new_name(self, checkpoint_id: int, full: bool, savepoint: bool) -> str:
        kind = "base" if full else "delta"
        return f"{self.prefix}-{checkpoint_id}-{kind}{'-sp' if savepoint else ''}-{secrets.token_hex(4)}"

    def confirm(self, checkpoint_id: int) -> None:
        _fork.remove_staged(self, checkpoint_id)
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
    """Encode, at the barrier, the writes since the last capture (or all entries) into a new
    file: in a forked child when that costs the job less (``heap_fork.py``), else here, one
    slice of :data:`CHUNK` keys at a time, yielding to the loop between slices.

    ``dirty`` holds each table's writes with their values (MISSING: deleted), so a delta is
    read sequentially from it, never looked up in the (much larger) table. Pauses go through
    the job's loop budget (``loop_budget.yield_point``). ``to_plain``: per table, what its
    values are written as (the window operator's windows become tuples), slice by slice."""
    from ..runtime.loop_budget import yield_point

    await _fork.settle(chain_state)  # earlier children's outcomes decide what this one repeats
    for table_name, table in tables.items():
        if table_name not in dirty:
            dirty[table_name] = Changes(table)
    entries = sum(map(len, tables.values()))
    # a log that gave up (Changes.full) holds only part of the writes: the table has them all
    full = any(c.full for c in dirty.values()) or chain_state.must_materialise(entries)
    if not full and any(c.paused for c in dirty.values()):  # a log paused wrongly: it holds nothing
        _log.error("heap capture %s: a paused log before a delta; writing a base instead", checkpoint_id)
        full = True
    name = chain_state.new_name(checkpoint_id, full, savepoint)
    chain_ = [name] if full else [*chain_state.confirmed, name]
    groups: range = settings.key_groups
    codec: Codec = settings.codec
    cap = Capture(name, full, chain_, dict(kinds), groups)
    header = packb({
        "format": FORMAT, "version": 1, "codec": codec.name, "full": full,
        "range": [groups.start, groups.stop], "kinds": cap.kinds,
    })  # fmt: skip
    earlier = [] if full else [p for _cid, p in sorted(chain_state.pending.items())]
    count = entries if full else sum(map(len, dirty.values()))
    tally = _Tally()
    encoded: Iterator[list[bytes]] | None = None
    cost = None  # a base's first slice, encoded here and timed: what an entry costs (heap_fork.py)
    if full and count > CHUNK and _fork.estimates(settings):
        encoded, cost = _fork.probe(_encoded(tables, dirty, full, False, to_plain, codec, tally), tally)
    if _fork.wanted(settings, count, full, cost):
        frames_ = encoded or _encoded(tables, dirty, full, False, to_plain, codec, tally)

        def work(out: BinaryIO) -> dict[str, Any]:  # in the child: see snapshot_process.py
            return _write(out, header, earlier, frames_, tally, key_kind)

        started = _fork.encode_in_child(chain_state, checkpoint_id, name, work, count, cost)
        if started is not None:
            cap.child, cap.path = started
            if not savepoint:
                chain_state.broken = chain_state.broken and not full
                chain_state.pending[checkpoint_id] = _Pending(chain_, full, [], set(), *started)
                await _clear(dirty)
            return cap
    if full and not savepoint:  # a savepoint's base is not in the chain: it mends nothing
        chain_state.broken = False
    frames: list[bytes] = []
    for out in encoded or _encoded(tables, dirty, full, not savepoint, to_plain, codec, tally):
        frames.extend(out)
        await yield_point()
    if not savepoint:
        await _clear(dirty)
    own_kinds = {key_kind(t) for t in tally.key_types}
    cap.parts = [
        header,
        *(f for p in earlier for f in _fork.frames_of(p)),  # repeated: their checkpoints may never complete
        *frames,
        packb(["", "end", sorted(own_kinds.union(*(p.key_kinds for p in earlier)))]),
    ]
    chain_state.entries[name] = tally.entries
    if not savepoint:
        chain_state.pending[checkpoint_id] = _Pending(chain_, full, [] if full else frames, own_kinds)
    return cap


class _Tally:
    """What encoding a capture found: the entries written, the keys' types."""

    __slots__ = ("entries", "key_types")

    def __init__(self) -> None:
        self.entries = 0
        self.key_types: set[type] = set()


def _encoded(
    tables: dict[str, dict],
    dirty: dict[str, Changes],
    full: bool,
    consume: bool,
    to_plain: dict[str, Callable[[Any], Any]] | None,
    codec: Codec,
    tally: _Tally,
) -> Iterator[list[bytes]]:
    """The frames of a capture, one slice of at most about :data:`CHUNK` keys per step, oldest
    first. ``consume``: drop each logged batch once read (see ``Changes.columns``)."""
    for table_name, table in tables.items():
        changes = dirty[table_name]
        # a base reads the table through iterators (a list of a million keys is a long hold);
        # the task waits for its capture, so nothing writes the table meanwhile (a write would
        # fail the capture loudly: 'dictionary changed size during iteration')
        source: Iterable[Column] = _table_slices(table) if full else changes.columns(consume=consume)
        plain = None if to_plain is None else to_plain.get(table_name)
        for keys, values, unique, patch in source:
            # a column of the log (CHUNK entries plus the rest of its last batch) is one slice,
            # not copied again; a longer one (the merged writes, batches larger than a
            # quarter of CHUNK) is cut into slices of CHUNK, so no slice holds the loop longer
            parts = (
                [(keys, values)]
                if len(keys) <= CHUNK + CHUNK // 4
                else [
                    (keys[i : i + CHUNK], values[i : i + CHUNK]) for i in reversed(range(0, len(keys), CHUNK))
                ]
            )
            del keys, values
            deletes = not full and changes.deletes  # reading the log may have found one
            while parts:
                part, vals = parts.pop()  # oldest first: the slices are listed newest first
                tally.entries += len(part)
                if plain is not None:
                    vals = [v if v is MISSING else plain(v) for v in vals]
                if patch is not None and plain is None:  # the changed fields only (heap_frames.py)
                    out = [patch_frame(table_name, part, vals, patch, codec, tally.key_types)]
                else:
                    shape, first = (None, False) if plain is not None else (changes.shape, changes.key_first)
                    out = slice_frames(
                        table_name, part, vals, deletes, unique, codec, tally.key_types, shape, first
                    )
                # nothing refers to the slice's lists during the pause: the young collection
                # a pause may run does not walk them (their elements are old)
                del part, vals
                yield out


async def _clear(dirty: dict[str, Changes]) -> None:
    """Empty the logs after a capture, a part at a time (a million frees at once is a long hold)."""
    from ..runtime.loop_budget import yield_point

    for changes in dirty.values():
        while changes.batches:
            for _ in range(min(64, len(changes.batches))):
                changes.batches.popleft()
            await yield_point()
        changes.clear()


def _write(
    out: BinaryIO,
    header: bytes,
    earlier: list[_Pending],
    frames: Iterator[list[bytes]],
    tally: _Tally,
    key_kind: Callable[[type], str],
) -> dict[str, Any]:
    """Write a whole file to ``out`` (in a snapshot child); what the parent needs to know of it."""
    digest = hashlib.sha256()

    def put(data: bytes) -> None:
        out.write(data)
        digest.update(data)

    put(header)
    for p in earlier:
        for frame in _fork.frames_of(p):
            put(frame)
    start = out.tell()
    for part in frames:
        for frame in part:
            put(frame)
    end = out.tell()
    own = sorted({key_kind(t) for t in tally.key_types})
    put(packb(["", "end", sorted(set(own).union(*(p.key_kinds for p in earlier)))]))
    return {"size": out.tell(), "sha256": digest.hexdigest(), "span": [start, end], "kinds": own,
            "entries": tally.entries}  # fmt: skip


def _table_slices(table: dict) -> Iterator[Column]:
    kit, vit = iter(table), iter(table.values())
    for _ in range(0, len(table), CHUNK):  # holds no slice while paused (see capture)
        yield list(islice(kit, CHUNK)), list(islice(vit, CHUNK)), True, None
    list(islice(kit, 1))  # a table written meanwhile raises here at the latest (see capture)


class HeapUpload:
    """The shared file of one captured backend (a ``SharedUpload``): encoded at the barrier
    already, it is only joined here."""

    def __init__(self, cap: Capture, chain_state: HeapChain) -> None:
        self.capture = cap
        self.chain_state = chain_state
        self.references = frozenset(cap.chain[:-1])

    async def produce(self) -> dict[str, bytes | HashedFile]:
        cap = self.capture
        if cap.child is not None and cap.path is not None:
            # the child's failure (with its cause) fails the checkpoint: the driver declines it
            report = await cap.child.result()
            pending = next((p for p in self.chain_state.pending.values() if p.file == cap.path), None)
            _fork.note(self.chain_state, pending, report)
            return {cap.name: HashedFile(cap.path, report["size"], report["sha256"])}  # hashed as written
        parts, cap.parts = cap.parts, []
        data = await join_parts(parts)
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
        if op == "put" or op == "putk":  # putk: the key once, as field 0 of each value (heap_frames.py)
            values = unpack_column(frame[3], codec) if op == "put" else key_first_values(keys, frame)
            if len(values) != len(keys):
                raise ValueError(f"{len(keys)} keys but {len(values)} values")
            if keep_all:
                table.update(zip(keys, values, strict=True))
            else:
                table.update((k, v) for k, v in zip(keys, values, strict=True) if key_group_of(k) in groups)
        elif op == "del":
            for k in keys:
                table.pop(k, None)
        elif op == "patch":  # heap_frames.py
            keep = None if keep_all else (lambda k: key_group_of(k) in groups)
            apply_patch(table, keys, frame, codec, keep)
        else:
            raise ValueError(f"unknown frame {op!r}")
        yield
    raise ValueError("truncated: no end frame")
