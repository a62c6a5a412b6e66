"""Full (non-incremental) heap keyed-state snapshots taken in slices that yield.

Theory of operation
-------------------
A heap backend's snapshot is *full* when its checkpoints are not incremental: incremental
checkpoints turned off (``state.backend.incremental: false``), or a table handed out untracked.
(Without a checkpoint storage directory, the in-memory ``JobManagerCheckpointStorage``,
checkpoints were full too until 2026-11-28; they are incremental now, the chain kept in memory:
``checkpoint/shared_files.MemorySharedFiles``.) Such a snapshot must hold every entry in a form
a restore at any parallelism can split by key group.

Built in one piece at the barrier (``keyed.snapshot_tables``: ``{"groups": {key_group:
{state: {key: value}}}}``) and encoded in one piece with the operator snapshot, that cost
~1.8 s of CPU on the event loop at 1M keys: the key group of every key and two dict inserts
(~1.2 us a key), then the state codec's encoding of the whole dict (~0.36 us a key).

:func:`capture_full` cuts the work into *slices* of :data:`CHUNK` entries at the barrier,
with the task's loop-budget ``yield_point`` between them (as the incremental capture does).
A slice copies its entries (``dict(islice(...))``, C speed) and encodes ``{state: {key:
value}}`` with the checkpoint's state codec into one *part* (bytes): 0.14 s a million
entries in all, against 1.8 s. The parts become one *shared file* of the checkpoint
(:func:`to_shared_file`, :class:`PartsUpload`, as an incremental capture's file does:
``checkpoint/uploads.py``): joined after the barrier, in a worker thread when large, and
hashed and written by the storage's thread (kept in memory without a storage directory). The
operator snapshot holds only the file's name and the parts' sizes (``"file"``, ``"sizes"``),
an empty ``"groups"`` and the writer's key-group range (``"range": [start, stop]``), so
nothing large is encoded on the loop. (Until 2026-11-28 it held the parts themselves,
``"parts": [bytes, ...]``, which restores still read: at 1M keys the task's snapshot encoding
and the checkpoint entry's each copied their ~25 MB in one C call, holding the loop 38-73 ms.)
The file is the checkpoint's own: it references nothing, and retention removes it with the
checkpoint. A table with a plain form (``KeyedStateBackend.tracked_table``'s
``to_plain``: a window operator's contents, trigger state and merging sets, windows as
tuples) is written in that form, converted per slice, in slices 16 times smaller (the
conversion is a Python call per entry); a restore gives it back in that form, as from an
incremental checkpoint.

Key groups are no longer computed at each checkpoint but at a restore, and only when they
matter: :func:`entries_of` gives a restoring subtask whole parts when it owns the writer's
whole range (a restore at the same parallelism: no hashing at all), else each part's entries
filtered by ``key_group_of`` (a rescale: each subtask keeps its key groups, as before).

Consistency: the capture runs inside the task's barrier step (``Task.capture_state``):
while it pauses, other tasks and the caller's coroutines run, but this task processes no
record, timer or mail, and nothing else writes its tables, so the slices read exactly the
state as of the barrier; records behind the barrier are processed after the capture. A table
that changes size across a pause anyway (a bug) fails the iteration (``RuntimeError`` from
the dict iterator), never a silently mixed snapshot. Each part is encoded in the slice that
read it, before the task resumes, so a value mutated in place later is not seen.

A state that fits in one slice is still written in one piece, in the operator snapshot (the
former format, which every earlier version reads; restores read every form). A RocksDB
backend restoring a heap snapshot (a job moving to RocksDB through a savepoint) reads these
forms and incremental chains alike (``rocksdb_backend._heap_entries``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Iterator
from itertools import islice
from typing import Any

from ..checkpoint.uploads import join_parts
from .codec import Codec
from .key_groups import key_group_of

CHUNK = 4096  # entries a slice copies and encodes (~0.15-0.5 us each)


def wanted(tables: dict[str, dict]) -> bool:
    """Whether a full snapshot of ``tables`` is big enough to take in slices."""
    return sum(map(len, tables.values())) > CHUNK


async def capture_full(
    tables: dict[str, dict],
    kinds: dict[str, str],
    key_groups: range | None,
    codec: Codec,
    prepare: Callable[[str, dict], dict],
    key_kind: Callable[[type], str],
    heavy: Collection[str] = (),
) -> dict[str, Any]:
    """Every entry of ``tables`` as a full snapshot in parts (see the module doc).
    ``key_groups``: the writer's range (None: unknown, a restore then filters every part).
    ``prepare(name, entries)``: the entries as stored (TTL filtering, pickling, a plain form),
    per slice. ``heavy``: tables whose entries ``prepare`` converts one by one in Python (a
    window operator's, ~10 us an entry): sliced 16 times finer, so no slice holds the loop long."""
    from ..runtime.loop_budget import yield_point

    parts: list[bytes] = []
    types: set[type] = set()
    for name, table in list(tables.items()):
        items = iter(table.items())
        step = max(1, CHUNK // 16) if name in heavy else CHUNK
        while chunk := dict(islice(items, step)):
            types.update(map(type, chunk))
            parts.append(codec.encode({name: prepare(name, chunk)}))
            await yield_point()
    snap: dict[str, Any] = {
        "kinds": dict(kinds),
        "key_types": sorted(set(map(key_kind, types))),
        "groups": {},
        "parts": parts,
    }
    if key_groups is not None:
        snap["range"] = [key_groups.start, key_groups.stop]
    return snap


class PartsUpload:
    """A full snapshot's parts as one shared file of its checkpoint (a ``SharedUpload``, see
    the module doc): joined after the barrier (in a worker thread when large) and written by the
    storage's thread; no earlier file is referenced."""

    references: frozenset[str] = frozenset()

    def __init__(self, name: str, parts: list[bytes]) -> None:
        self.name = name
        self.parts = parts

    async def produce(self) -> dict[str, bytes]:
        parts, self.parts = self.parts, []
        return {self.name: await join_parts(parts)}


def to_shared_file(snap: dict[str, Any], checkpoint_id: int, savepoint: bool) -> PartsUpload:
    """Move ``snap``'s parts into a new shared file: ``snap`` keeps its name and the parts'
    sizes (``"file"``, ``"sizes"``)."""
    parts = snap.pop("parts")
    name = f"heap-full-{checkpoint_id}{'-sp' if savepoint else ''}-{secrets.token_hex(8)}"
    snap["file"], snap["sizes"] = name, list(map(len, parts))
    return PartsUpload(name, parts)


def _parts(snap: dict[str, Any], read_shared: Callable[[str], bytes] | None) -> Iterator[bytes]:
    """A snapshot's parts: inline (``"parts"``) or in a shared file (``"file"``, ``"sizes"``)."""
    yield from snap.get("parts") or ()
    name = snap.get("file")
    if name is None:
        return
    if read_shared is None:
        raise ValueError(f"keyed state in the shared file {name!r} is only restored from checkpoint storage")
    data = read_shared(name)
    at = 0
    for size in snap["sizes"]:
        yield data[at : at + size]
        at += size
    if at != len(data):
        raise ValueError(f"shared file {name!r} holds {len(data)} bytes, its parts {at}")


def entries_of(
    snap: dict[str, Any],
    owns: Callable[[int], bool],
    max_parallelism: int,
    codec: Codec | None,
    read_shared: Callable[[str], bytes] | None = None,
) -> Iterator[tuple[str, dict]]:
    """``(state name, {key: value})`` of a full snapshot, only the key groups ``owns`` accepts:
    its ``groups``, then its parts (whole when ``owns`` accepts the writer's whole range)."""
    for group, states in snap["groups"].items():
        if owns(int(group)):
            yield from states.items()
    if not snap.get("parts") and "file" not in snap:
        return
    if codec is None:
        raise ValueError("this keyed state snapshot was written in parts: restoring it needs the state codec")
    written = snap.get("range")
    whole = written is not None and all(map(owns, range(*written)))
    for part in _parts(snap, read_shared):
        decoded: Any = codec.decode(part)
        for name, entries in decoded.items():
            if whole:
                yield name, entries
            else:
                yield name, {k: v for k, v in entries.items() if owns(key_group_of(k, max_parallelism))}
