"""Restoring RocksDB keyed state: the files of a snapshot back into a working DB.

Theory of operation
-------------------
``materialise`` lays a snapshot's DB out in a directory: its SST files from
checkpoint storage (hard links, copies across file systems) and its small
files (CURRENT, MANIFEST, OPTIONS) from the snapshot itself. A missing or
damaged SST file raises :class:`~streamflow.checkpoint.storage.CorruptCheckpointError`
naming it, which the job treats as a damaged checkpoint (refused, or an older
one restored when fallback is enabled).

**Rescaling** follows Flink's ``RocksDBIncrementalRestoreOperation``: of the
old subtasks' DBs whose key-group ranges overlap the new subtask's, the one
with the largest overlap is the *base*: its files become the new subtask's DB
as on a restore at the same parallelism (hard links, nothing read but the
sha256 check), and ``clip`` deletes the key groups outside the new range with
one range tombstone on each side (RocksDB's ``DeleteRange``: no key is read;
compactions drop the deleted entries later). Scaling out (1 -> 4, 2 -> 4) is
therefore a link and two tombstones per subtask, whatever the state size.

Every other overlapping DB (scaling in: 4 -> 1 takes one base and three
others) goes through ``ingest_key_groups``: materialised in a scratch
directory, opened read-only, its entries of the new subtask's key groups are
read in key order and written into an SST file (``SstFileWriter``: no
memtable, no write-ahead log, no later flush or compaction of the copy), which
RocksDB then ingests (the file is moved in, under a new sequence number).
State ids are mapped by state name (two subtasks may have numbered their
states differently); when the mapping does not keep the ids' order, the source
is read one ``key group | state id`` prefix at a time, in the new ids' order,
so the file's keys stay sorted.

A heap backend's incremental chain (a job moving to RocksDB through a savepoint)
is read into dicts by :func:`read_heap_chain` and written like a full snapshot. A heap
snapshot's pickled states (``Types.PICKLED_BYTE_ARRAY()``, listed under ``"pickled"``) hold
pickled bytes: they are written as :class:`~streamflow.state.typed.Pickled` entries (the
codec keeps them apart from ``bytes``) and unpickled when the job declares the state pickled,
as the heap backend restores them (``typed.declare``).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import rocksdict

from ..checkpoint.storage import CorruptCheckpointError
from .codec import Codec
from .full_snapshot import entries_of
from .incremental import apply_file
from .key_groups import key_group_of
from .rocksdb_setup import options
from .typed import restored_entries

if TYPE_CHECKING:
    from .rocksdb_backend import RocksDBKeyedStateBackend

log = logging.getLogger(__name__)

_END = b"\xff"  # above every key: a key group is at most 0x7fff (max parallelism 32,768)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)  # another file system, or no hard links there


def materialise(snap: dict[str, Any], shared_path: Callable[[str], Path], target: Path) -> None:
    """Lay out the snapshot's DB in ``target`` (created)."""
    target.mkdir(parents=True, exist_ok=False)
    for local, name in snap["files"].items():
        try:
            src = shared_path(name)
            if not src.is_file():
                raise FileNotFoundError(f"{src} is missing")
            _link_or_copy(src, target / local)
        except CorruptCheckpointError:
            raise
        except (OSError, KeyError, ValueError) as e:
            raise CorruptCheckpointError(
                f"RocksDB state file {name} of the checkpoint cannot be restored: {e}", str(name)
            ) from e
    for local, data in snap["inline"].items():
        (target / local).write_bytes(data)


def open_checked(path: Path, snap: dict[str, Any], read_only: bool) -> rocksdict.Rdict:
    """Open a materialised DB; a damaged file is reported as a damaged checkpoint."""
    opts = options()
    opts.set_paranoid_checks(True)
    try:
        if read_only:
            return rocksdict.Rdict(str(path), opts, access_type=rocksdict.AccessType.read_only())
        return rocksdict.Rdict(str(path), opts)
    except Exception as e:
        names = ", ".join(sorted(snap["files"].values())[:5])
        raise CorruptCheckpointError(
            f"the RocksDB state restored from checkpoint files ({names}) cannot be opened: {e}", str(path)
        ) from e


def overlap(snap: dict[str, Any], key_groups: range) -> int:
    """How many of ``key_groups`` the snapshot's DB holds."""
    lo, hi = snap["key_groups"]
    return max(0, min(hi, key_groups.stop) - max(lo, key_groups.start))


def clip(backend: RocksDBKeyedStateBackend, base: dict[str, Any]) -> None:
    """Delete the key groups of ``base`` (restored as ``backend``'s DB) that ``backend`` does not
    own: a range tombstone below its range and one above, nothing read."""
    from .rocksdb_backend import RocksDBStateError

    lo, hi = base["key_groups"]
    mine = backend.key_groups
    spans = []
    if lo < mine.start:
        spans.append((b"\x00\x00", mine.start.to_bytes(2, "big")))
    if hi > mine.stop:
        spans.append((mine.stop.to_bytes(2, "big"), _END))
    if not spans:
        return
    db = backend.db
    for begin, end in spans:
        try:
            db.delete_range(begin, end)
        except Exception as e:
            raise RocksDBStateError(
                f"deleting key groups {begin.hex()}-{end.hex()} from RocksDB at {backend.db_path} failed: {e}"
            ) from e
    log.info(
        "rescaled RocksDB state: the checkpoint files of key groups %d-%d linked, key groups outside "
        "%d-%d deleted by range",
        lo,
        hi - 1,
        mine.start,
        mine.stop - 1,
    )


def _spans(remap: dict[bytes, bytes], start: int, stop: int) -> list[tuple[bytes, bytes, bytes | None]]:
    """``(from, to, new state id or None)`` source key ranges to read, in the order their keys
    take in the target: one contiguous range when the mapping keeps the ids' order (None: keep
    the key's own id, mapped per key if it changed), else one per key group and state."""
    olds = sorted(remap)
    if [remap[o] for o in olds] == sorted(remap.values()):
        return [(start.to_bytes(2, "big"), stop.to_bytes(2, "big"), None)]
    by_new = sorted(remap.items(), key=lambda item: item[1])
    out: list[tuple[bytes, bytes, bytes | None]] = []
    for kg in range(start, stop):
        g = kg.to_bytes(2, "big")
        for old, new in by_new:
            sid = int.from_bytes(old, "big")
            out.append((g + old, g + (sid + 1).to_bytes(2, "big"), new))
    return out


def ingest_key_groups(
    backend: RocksDBKeyedStateBackend, snap: dict[str, Any], shared_path: Callable[[str], Path]
) -> None:
    """Write the entries of the key groups ``backend`` owns in the snapshot's DB into an SST file
    and ingest it into ``backend``'s DB."""
    from .rocksdb_backend import RocksDBStateError

    scratch = Path(tempfile.mkdtemp(prefix="rescale-", dir=backend.root))
    try:
        src_path = scratch / "db"
        materialise(snap, shared_path, src_path)
        src = open_checked(src_path, snap, read_only=True)
        sst = scratch / "ingest.sst"
        lo, hi = snap["key_groups"]
        start, stop = max(lo, backend.key_groups.start), min(hi, backend.key_groups.stop)
        try:
            kinds = snap["kinds"]
            remap = {
                sid.to_bytes(2, "big"): backend.sid_of(name, kinds.get(name, "internal")).to_bytes(2, "big")
                for name, sid in snap["state_ids"].items()
            }
            same = all(old == new for old, new in remap.items())
            writer = rocksdict.SstFileWriter(options())
            writer.open(str(sst))
            n = 0
            try:
                for begin, end, new in _spans(remap, start, stop):
                    ro = rocksdict.ReadOptions()
                    ro.set_iterate_upper_bound(end)
                    items = src.items(from_key=begin, read_opt=ro)
                    if new is not None:
                        for k, raw in items:
                            rk = cast(bytes, k)
                            writer[rk[:2] + new + rk[4:]] = raw
                            n += 1
                    elif same:
                        for k, raw in items:
                            writer[k] = raw
                            n += 1
                    else:
                        for k, raw in items:
                            rk = cast(bytes, k)
                            sid = remap.get(rk[2:4])
                            if sid is not None:
                                writer[rk[:2] + sid + rk[4:]] = raw
                                n += 1
                if n:
                    writer.finish()
            except Exception as e:
                raise CorruptCheckpointError(
                    f"reading RocksDB state of key groups {start}-{stop - 1} from checkpoint files "
                    f"failed: {e}",
                    str(src_path),
                ) from e
        finally:
            src.close()
            del src
        if n:
            opts = rocksdict.IngestExternalFileOptions()
            opts.set_move_files(True)
            try:
                backend.db.ingest_external_file([str(sst)], opts)
            except Exception as e:
                raise RocksDBStateError(
                    f"ingesting {n} entries of key groups {start}-{stop - 1} into RocksDB at "
                    f"{backend.db_path} failed: {e}"
                ) from e
        log.info(
            "rescaled RocksDB state: %d entries of key groups %d-%d read from checkpoint files and ingested",
            n,
            start,
            stop - 1,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def read_heap_chain(
    chain: list[str],
    read_shared: Callable[[str], bytes],
    codec: Codec,
    groups: range,
    key_group_of: Callable[[Any], int],
) -> tuple[dict[str, dict], set[str]]:
    """A heap backend's chain: its entries in ``groups`` by state (the base, then each delta
    applied) and its key kinds."""
    tables: dict[str, dict] = {}
    kinds: set[str] = set()

    def table(name: str, _kind: str) -> dict:
        return tables.setdefault(name, {})

    for name in chain:
        kinds |= apply_file(read_shared(name), table, codec, groups, key_group_of)
    return tables, kinds


def restore_into(
    backend: RocksDBKeyedStateBackend,
    snaps: list[dict[str, Any]],
    owns: Callable[[int], bool],
    shared_path: Callable[[str], Path] | None,
    read_shared: Callable[[str], bytes] | None,
) -> None:
    """Restore ``snaps`` (old subtasks' snapshots) into ``backend``'s DB, of its key groups: the
    RocksDB ones by their files (see the module doc), a heap backend's by its entries."""
    from .rocksdb_backend import RocksDBStateError

    mine = [backend.key_groups.start, backend.key_groups.stop]
    for snap in snaps:
        for name, kind in snap.get("kinds", {}).items():
            backend.table(name, kind)
        stored = snap.get("key_types") or ([snap["key_type"]] if snap.get("key_type") else [])
        if stored:
            backend.restored_key_types = (backend.restored_key_types or set()) | set(stored)
    rocks = [s for s in snaps if s.get("rocksdb") and backend._overlaps(s)]
    if rocks and shared_path is None:
        raise RocksDBStateError("this checkpoint holds RocksDB state but its files cannot be found")
    if rocks:
        assert shared_path is not None
        # the largest overlap becomes this DB (its files linked); a stable choice on ties
        base = max(rocks, key=lambda s: (overlap(s, backend.key_groups), -s["key_groups"][0]))
        _restore_files(backend, base, shared_path)
        if list(base["key_groups"]) != mine:
            clip(backend, base)
        for snap in rocks:
            if snap is not base:
                ingest_key_groups(backend, snap, shared_path)
    for snap in snaps:
        if not snap.get("rocksdb"):  # a heap backend's (a job moving to RocksDB)
            pickled = set(snap.get("pickled", ()))
            for name, entries in _heap_entries(backend, snap, owns, read_shared):
                if name in pickled:  # Pickled until the job declares the state pickled (typed.py)
                    entries = restored_entries(entries, True, name in backend.pickled)
                    backend.restored_pickled.add(name)
                t = backend._rtables[name]
                conv = t._from_plain
                t.update(entries if conv is None else {k: conv(v) for k, v in entries.items()})
    backend.flush()


def _heap_entries(
    backend: RocksDBKeyedStateBackend,
    snap: dict[str, Any],
    owns: Callable[[int], bool],
    read_shared: Callable[[str], bytes] | None,
) -> Iterable[tuple[str, dict]]:
    """``(state, {key: value})`` of this subtask's key groups in a heap backend's snapshot:
    a full one (inline or in a shared file), or an incremental chain of shared files."""
    if "incremental" not in snap:
        return entries_of(snap, owns, backend.max_parallelism, backend.codec, read_shared)
    if read_shared is None:
        from .rocksdb_backend import RocksDBStateError

        raise RocksDBStateError("this checkpoint's heap state is in shared files, which cannot be read")
    maxp = backend.max_parallelism
    tables, kinds = read_heap_chain(
        snap["chain"], read_shared, backend.codec, backend.key_groups, lambda k: key_group_of(k, maxp)
    )
    if kinds:
        backend.restored_key_types = (backend.restored_key_types or set()) | kinds
    return tables.items()


def _restore_files(
    backend: RocksDBKeyedStateBackend, snap: dict[str, Any], shared_path: Callable[[str], Path]
) -> None:
    """Same key groups: the old DB's files become this one's (hard links when possible)."""
    backend.close_db()
    shutil.rmtree(backend.db_path, ignore_errors=True)
    materialise(snap, shared_path, backend.db_path)
    # the files keep their names, but the first checkpoint of this run gives them again
    # (a savepoint's, or another job's, are not in this job's shared files; storage links a
    # file it already holds under that name only once)
    backend._shared_names.update(snap["files"])
    backend._open()
    backend.name_table_ids(snap["state_ids"])
