"""Incremental checkpoints of the heap keyed state backend: dirty keys, deltas and chains.

Theory of operation
-------------------
Flink's changelog state backend is the model: a checkpoint writes only what
changed since the last one, and a periodic *materialisation* writes everything,
so a restore reads a bounded chain: the newest full file (the *base*) and the
deltas after it, in order.

Dirty keys. Every keyed state table the backend hands out *tracked*
(``KeyedStateBackend.tracked_table``) comes with a ``set`` of the keys written
since the last capture: state objects add ``current_key`` on each write, and
built-in operators that touch tables directly (``reduce``, ``sum``) add a
batch's keys once per batch (``set.update``, one C call). A key whose value is
gone when captured is recorded as a deletion. A table handed out untracked
(``backend.table``: the window operator, TTL state) makes the backend take full
snapshots in the former format, so an operator that does not mark what it
changes can never lose a change.

Capture (at the barrier, in the task, before the barrier is forwarded): the
dirty entries of each table (or, when materialising, all of them) are *encoded*
right away, in slices of :data:`CHUNK` keys that yield to the event loop
between them; the task itself waits, so its state cannot change in between, and
since the snapshot is bytes, no later in-place mutation can reach it. (Encoding
at once costs less than copying references, checking which values are
immutable and encoding later: measured in docs/performance.md.) The dirty sets
are cleared. After the barrier the upload only joins the frames
(:meth:`HeapUpload.produce`); hashing and writing run in the storage thread.

Format: a file is a MessagePack stream: a header (codec name, full or delta,
the writer's key-group range, the state kinds), then frames ``[state, "put",
keys, values]`` and ``[state, "del", keys]``, then ``["", "end", key kinds]``.
A column is packed by msgpack's C packer in strict mode when every value is a
plain type (``P``); a column of same-length tuples is packed column-wise (``T``:
one C call, no per-tuple Python hook; 2.7x faster than the codec's tuple hook
and 3x faster to decode); anything else goes through the job's state codec
(``C``). All three round-trip exactly (tuples stay tuples, ``True`` stays bool).

Chains. The backend remembers the chain of the last checkpoint confirmed
complete (``notify_checkpoint_complete``). Checkpoint n writes a delta holding
every key dirty since that checkpoint (including those of checkpoints still
pending or aborted since) and references that chain plus its own delta. It
materialises instead (a full base, chain of one) when there is no confirmed
chain (the first checkpoint, and the first after a restore, which may have
merged several old subtasks' chains), when the chain holds ``max_chain``
deltas, or when its deltas together are more than twice its base (a restore
would read more than three bases; when most keys change every interval, the
deltas are as large as a base, which then costs nothing extra). A savepoint's snapshot is a delta too (the
storage copies the chain into the savepoint) but leaves the dirty sets and the
chain alone: the checkpoints after it are based on checkpoints only.

Key groups are never computed at checkpoint time: every file records the
key-group range of the subtask that wrote it, and all its keys lie in that
range. A restore at the same parallelism applies whole files; one at another
parallelism applies the files whose range overlaps its own, computing the key
group only of keys in files that straddle its range.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import secrets
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import compress, islice, repeat
from operator import is_, itemgetter
from pathlib import Path
from typing import Any

import msgpack

from .codec import Codec

__all__ = ["CHUNK", "Capture", "HeapChain", "HeapUpload", "apply_file", "apply_file_slices", "capture"]

CHUNK = 16_384  # keys per slice: capture and encoding yield to the loop between slices
FORMAT = "streamflow-heap-state"
MISSING: Any = object()  # a dirty key whose value is gone: a deletion

_IMMUTABLE = frozenset(
    {int, float, str, bytes, bool, type(None), complex, decimal.Decimal, uuid.UUID, object}
    | {datetime.datetime, datetime.date, datetime.time, datetime.timedelta, frozenset}
)
_PLAIN_ERRORS = (TypeError, ValueError, OverflowError)


def _refuse(obj: Any) -> Any:
    raise TypeError(type(obj).__name__)


def _packb(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True, strict_types=True, default=_refuse)


def _unpackb(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True)


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

    def must_materialise(self) -> bool:
        if not self.confirmed or len(self.confirmed) > self.max_chain:
            return True
        if any(p.full for p in self.pending.values()):  # a base not yet confirmed: another one
            return True
        base, deltas = self.confirmed[0], self.confirmed[1:]
        base_size = self.sizes.get(base, 1 << 62)
        # checkpoints that keep failing would repeat ever more frames: a base ends that too
        repeated = sum(len(f) for p in self.pending.values() for f in p.frames)
        return sum(self.sizes.get(d, 0) for d in deltas) > 2 * base_size or repeated > base_size

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

    def reset(self) -> None:
        """After a restore: the next checkpoint materialises."""
        self.confirmed, self.pending = [], {}


async def capture(
    tables: dict[str, dict],
    dirty: dict[str, dict[Any, Any]],
    kinds: dict[str, str],
    chain_state: HeapChain,
    settings: Any,
    checkpoint_id: int,
    savepoint: bool,
    key_kind: Callable[[type], str],
    sealed: dict[str, list[dict[Any, Any]]] | None = None,
) -> Capture:
    """Encode, at the barrier, the dirty entries (or all of them) into the frames of a new
    file, one slice of :data:`CHUNK` keys at a time, pausing through the job's loop budget
    between slices (``loop_budget.yield_point``).

    ``dirty`` maps each table's written keys to their values (MISSING: deleted), so a delta
    is read sequentially from it, never looked up in the (much larger) table; ``sealed``
    holds older dirty dicts of a table moved aside (``KeyedStateBackend.seal_dirty``), written
    before the live one, oldest first. The tables and dicts are read through iterators across
    slices: the task waits for its capture, so nothing writes them meanwhile (a write would
    fail the capture loudly: 'dictionary changed size during iteration')."""
    from ..runtime.loop_budget import yield_point

    full = chain_state.must_materialise()
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
    sealed = {} if sealed is None else sealed
    for table_name, table in tables.items():
        d = dirty.setdefault(table_name, {})
        older = sealed.get(table_name, [])
        for source in [table] if full else [*older, d]:
            kit, vit = iter(source), iter(source.values())
            while part := list(islice(kit, CHUNK)):
                vals = list(islice(vit, CHUNK))
                if not full and any(map(is_, vals, repeat(MISSING, len(vals)))):
                    present = [v is not MISSING for v in vals]
                    dels = [k for k, p in zip(part, present, strict=True) if not p]
                    frames.append(_packb([table_name, "del", pack_column(dels, codec)]))
                    part, vals = list(compress(part, present)), list(compress(vals, present))
                if part:
                    key_types.update(map(type, part))
                    columns = [pack_column(part, codec), pack_column(vals, codec)]
                    frames.append(_packb([table_name, "put", *columns]))
                await yield_point()
        if not savepoint:
            d.clear()
            while older:  # one sealed dict at a time: dropping a million entries at once is long too
                older.pop()
                await yield_point()
    earlier = [] if full else [p for _cid, p in sorted(chain_state.pending.items())]
    all_types = key_types.union(*(p.key_types for p in earlier))
    cap.parts = [
        _packb(header),
        *(f for p in earlier for f in p.frames),  # repeated: their checkpoints may never complete
        *frames,
        _packb(["", "end", sorted({key_kind(t) for t in all_types})]),
    ]
    if not savepoint:
        chain_state.pending[checkpoint_id] = _Pending(chain_, full, [] if full else frames, key_types)
    return cap


# ------------------------------------------------------------------ encoding


def pack_column(values: list[Any], codec: Codec) -> bytes:
    types = set(map(type, values))
    if types == {tuple}:
        lengths = set(map(len, values))
        if len(lengths) == 1 and 0 not in lengths:
            try:
                (arity,) = lengths  # columns by itemgetter: 3x faster than zip(*values)
                return b"T" + _packb([list(map(itemgetter(i), values)) for i in range(arity)])
            except _PLAIN_ERRORS:
                pass  # a column plain msgpack cannot pack: the job's codec below packs it (no loss)
    elif tuple not in types:
        try:
            return b"P" + _packb(values)
        except _PLAIN_ERRORS:
            pass  # as above: the codec's general encoding is the fallback, tagged "C"
    return b"C" + codec.encode(values)


def unpack_column(data: bytes, codec: Codec) -> list[Any]:
    tag, body = data[:1], data[1:]
    if tag == b"P":
        values = _unpackb(body)
    elif tag == b"T":
        values = list(zip(*_unpackb(body), strict=True))
    elif tag == b"C":
        values = codec.decode(body)
    else:
        raise ValueError(f"unknown column tag {tag!r}")
    if not isinstance(values, list):
        raise ValueError(f"a column decoded to {type(values).__name__}, not a list")
    return values


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
