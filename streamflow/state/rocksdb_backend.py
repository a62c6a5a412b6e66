"""The RocksDB keyed state backend of one operator subtask (``EmbeddedRocksDBStateBackend``).

Theory of operation
-------------------
**Working state.** Each keyed operator subtask opens its own RocksDB (through
``rocksdict``, raw bytes mode) in a fresh directory under the configured local
directory (``state.backend.rocksdb.localdir``, the system temp dir by
default), removed on close. Every state of the operator is a
:class:`~streamflow.state.rocksdb_table.RocksTable` (a write-back cache over
the key space ``key group | state id | key``). The write-ahead log is off:
durability comes from checkpoints, as in Flink.

**Checkpoints** (Flink's incremental RocksDB snapshot). The synchronous part,
at the barrier: the caches' dirty entries go into RocksDB (one WriteBatch),
then a RocksDB checkpoint: the memtable is flushed to a new SST file and every
live SST file is hard-linked into a local checkpoint directory (the costly
part, the memtable flush, runs in a worker thread when the task can wait for
it: ``prepare``; rocksdict keeps the GIL there, so the loop waits for that one call). SST files are immutable,
so each has a stable *shared name* (``rdb-<operator>-<subtask>-<session>-
<file>``): the snapshot lists ``{local file: shared name}`` and carries the
few small non-SST files (CURRENT, MANIFEST, OPTIONS) inline. The task hands
the SST paths to checkpoint storage as shared files; one already stored by an
earlier completed checkpoint is only referenced, so a checkpoint writes the
SST files created since the last one: what changed.

**Restore.** With the same key-group range (same parallelism), the SST files
of the snapshot are hard-linked (copied across file systems) into the new
working directory with the small files, and the DB opens on them; their shared
names are kept, so the next checkpoint references them instead of storing
them again. With another range (rescale, ``rocksdb_restore.py``), the old DB
with the largest overlap is restored so and the key groups outside the new
range are deleted by range; the other overlapping DBs' entries of this
subtask's key groups are written into an SST file and ingested. A
heap backend's snapshot (full, or an incremental chain) is also read, so a job
can move to RocksDB through a savepoint (and back: ``rocksdb_to_heap.py``).

**Timers** of the operator are states of this DB too (``rocksdb_timers.py``): their pending
writes join the flush's WriteBatch, so a checkpoint's files hold them.

A new *session* id is drawn on every open (restored or not), so a file created
after a restore never takes a shared name that an abandoned run used for
other content.

**Off the event loop** (``rocksdb_lifecycle.py``). Creating the working directory, opening
the DB, a restore (linking or copying files, clipping, ingesting), a RocksDB checkpoint and
closing (the memtable flush, the directory's removal) each cost file system work and fsyncs,
tens of milliseconds: a job built in an embedding service's loop must not hold it that long.
A backend created for a job (``defer_open``) does none of it at build: ``restore`` only
records what to restore, and the task that owns the backend runs :meth:`start` (the open
and the restore in a worker thread, every backend of the task at once) before its operators
open; :meth:`aclose` closes in a worker thread too. One lock (``_io``) serialises the
thread work of a backend, so a close waits for an open, a restore or a checkpoint still
running (a task cancelled while it waited for one). Whoever touches the DB before
:meth:`start` ran (a tool, a test) opens it synchronously first (:attr:`db`): nothing reads
a DB that is not open.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import rocksdict

from ..errors import StreamflowError
from . import codec as _codec
from .keyed import KeyedStateBackend, _key_kind
from .no_key import NO_KEY
from .rocksdb_lifecycle import make_working_dir
from .rocksdb_setup import options, write_options
from .rocksdb_table import RocksTable, fast_decoder
from .rocksdb_ttl_cleanup import RocksTtlCleanup

log = logging.getLogger(__name__)

_SCAN_BATCH = 20_000
_SST = ".sst"


class RocksDBStateError(StreamflowError, RuntimeError):
    """RocksDB could not be opened, written or restored; the message names the path."""


class RocksDBKeyedStateBackend(KeyedStateBackend):
    """Keyed state of one operator subtask in RocksDB; see the module docstring."""

    is_rocksdb = True

    def __init__(
        self,
        max_parallelism: int,
        key_groups: range,
        *,
        operator_id: str,
        subtask: int,
        codec: Any,
        local_dir: str | None = None,
        cache_entries: int = 100_000,
        flush_entries: int = 4096,
        defer_open: bool = False,
    ) -> None:
        self._flush_pending = False
        self._evict_pending = False
        self._current_key: Any = NO_KEY  # (no_key.py)
        super().__init__(max_parallelism)
        self.key_groups = key_groups
        self.codec = codec
        self.decode: Callable[[bytes], Any] = fast_decoder(codec)
        self.cache_entries = cache_entries
        self.flush_entries = flush_entries
        self._rtables: dict[str, RocksTable] = {}
        self.timer_queues: list[Any] = []  # rocksdb_timers.RocksTimerQueue: their writes flush here too
        self._key_types: set[type] = set()
        self._name_prefix = f"rdb-{hashlib.sha1(operator_id.encode()).hexdigest()[:10]}-{subtask}"
        self._session = secrets.token_hex(4)
        self._shared_names: dict[str, str] = {}  # local SST file -> shared name (restored or stored)
        self._checkpoints: dict[int, Path] = {}  # checkpoint id -> local checkpoint directory
        self._pending_shared: dict[int, dict[str, Path]] = {}
        self._confirmed: set[str] = set()  # shared names a completed checkpoint holds
        self._ever_referenced: dict[int, set[str]] = {}
        self.what = f"operator {operator_id!r} subtask {subtask}"
        self._local_dir = local_dir
        self.root: Path | None = None  # the working directory, once created
        self._db: rocksdict.Rdict | None = None
        self._write_opts = write_options()
        self._io = threading.Lock()  # the thread work of this backend, one at a time
        self._pending_restore: tuple[Any, ...] | None = None  # restore() before start()
        self._closed = False
        self.ttl_cleanup: RocksTtlCleanup | None = None
        self.start_pending = True  # not open yet: start() (the task) or the first use of db
        if not defer_open:
            self._start()

    # -- the DB --------------------------------------------------------------
    @property
    def db_path(self) -> Path:
        if self.root is not None:
            return self.root / "db"
        base = Path(self._local_dir) if self._local_dir else Path(tempfile.gettempdir())
        return base / f"streamflow-{self._name_prefix}-(not created yet)" / "db"

    def _start(self) -> None:
        """Create the working directory, open the DB and run a pending restore (in a worker
        thread when the task starts the backend: :meth:`start`)."""
        with self._io:
            if not self.start_pending or self._closed:
                return  # started meanwhile, or closed before it started (a job cancelled at once)
            try:
                self.root = make_working_dir(self._local_dir, self._name_prefix)
            except OSError as e:
                raise RocksDBStateError(
                    f"cannot create the RocksDB working directory under {self._local_dir}: {e}"
                ) from e
            pending, self._pending_restore = self._pending_restore, None
            if pending is None or not any(s.get("rocksdb") and self._overlaps(s) for s in pending[0]):
                self._open()  # (a restore of RocksDB files opens the DB on them: _restore_files)
            self.start_pending = False
            if pending is not None:
                self._restore_now(*pending)

    async def start(self) -> None:
        """Open the DB and restore its state in a worker thread (see the module doc); a failure
        names the path and the cause, and this operator subtask."""
        if not self.start_pending:
            return
        try:
            await asyncio.to_thread(self._start)
        except Exception as exc:
            exc.add_note(f"while opening the RocksDB state of {self.what} at {self.db_path}")
            raise

    def _open(self) -> None:
        try:
            self._db = rocksdict.Rdict(str(self.db_path), options())
        except Exception as e:
            raise RocksDBStateError(f"cannot open RocksDB at {self.db_path}: {e}") from e
        self._db.set_write_options(self._write_opts)

    @property
    def db(self) -> rocksdict.Rdict:
        if self._db is None and self.start_pending and not self._closed:
            log.debug("RocksDB state of %s used before its task started it: opened now", self.what)
            self._start()
        if self._db is None:
            raise RocksDBStateError(f"the RocksDB state backend at {self.db_path} is closed")
        return self._db

    def db_get(self, rkey: bytes) -> bytes | None:
        return cast("bytes | None", self.db.get(rkey))

    def db_multi_get(self, rkeys: list[bytes]) -> list[bytes | None]:
        return cast("list[bytes | None]", self.db.get(cast(Any, rkeys)))

    # -- the current key: between two records is a safe point to flush -------
    @property
    def current_key(self) -> Any:
        return self._current_key

    @current_key.setter
    def current_key(self, key: Any) -> None:
        self._current_key = key
        if self._flush_pending:
            self._safe_point()

    def request_flush(self, evict: bool) -> None:
        self._flush_pending = True
        if evict:
            self._evict_pending = True

    def _safe_point(self) -> None:
        self.flush()
        if self._evict_pending:
            self._evict_pending = False
            keep = self.cache_entries // 2
            for t in self._rtables.values():
                t.evict(keep)

    def flush(self) -> int:
        """Write every table's dirty entries to RocksDB in one WriteBatch; returns how many."""
        self._flush_pending = False
        tables = self._rtables.values()
        batch = rocksdict.WriteBatch(raw_mode=True)
        n = 0
        try:
            if type(self.codec) is not _codec.MsgpackCodec:
                raise _SlowPath
            pack = _codec._PACKER.pack  # the codec's packer itself: no call per value in between
            with _codec._gc_paused():
                for t in tables:
                    n += t.flush_into(batch, pack, self._key_types)
        except Exception:  # another codec, or a value the packer refuses: the codec names it
            batch, n = rocksdict.WriteBatch(raw_mode=True), 0
            for t in tables:
                n += t.flush_into(batch, self.codec.encode, self._key_types)
        for q in self.timer_queues:
            n += q.flush_into(batch)
        if n:
            self.write_batch(batch, f"{n} state entries")
        for t in tables:
            t.clean()
        if self.ttl_cleanup is not None:  # expired TTL entries: rocksdb_ttl_cleanup.py
            self.ttl_cleanup.tick()
        return n

    def rocks_ttl_cleanup(self) -> RocksTtlCleanup:
        """This backend's cleanup of expired TTL state (made when a TTL state registers)."""
        if self.ttl_cleanup is None:
            self.ttl_cleanup = RocksTtlCleanup(self)
        return self.ttl_cleanup

    def write_batch(self, batch: rocksdict.WriteBatch, what: str) -> None:
        try:
            self.db.write(batch)
        except Exception as e:
            raise RocksDBStateError(f"writing {what} to RocksDB at {self.db_path} failed: {e}") from e

    # -- tables --------------------------------------------------------------
    def table(
        self,
        name: str,
        kind: str = "internal",
        to_plain: Callable[[Any], Any] | None = None,
        from_plain: Callable[[Any], Any] | None = None,
    ) -> dict:
        known = self._kinds.get(name)
        if known is not None and known != kind:
            raise ValueError(f"state {name!r} is already registered as {known} state, not {kind}")
        self._kinds[name] = kind
        t = self._rtables.get(name)
        if t is None:
            if len(self._rtables) >= 0xFFFF:
                raise ValueError("too many states in one operator (65535)")
            t = self._rtables[name] = RocksTable(self, name, len(self._rtables) + 1)
        if to_plain is not None or from_plain is not None:
            t.set_value_transform(to_plain, from_plain)
        return cast(dict, t)  # the dict methods operators use (rocksdb_table.py)

    def keys(self) -> set:
        out: set = set()
        for name, t in self._rtables.items():
            if self._kinds.get(name) != "timer":  # timers (rocksdb_timers.py) are not keyed state
                out.update(t.keys())
        return out

    def scan(self, sid: int) -> Iterator[tuple[bytes, Any, bytes]]:
        """``(rocksdb key, decoded key, raw value)`` of state ``sid`` in this subtask's key groups."""
        sid_bytes = sid.to_bytes(2, "big")
        db = self.db
        for kg in self.key_groups:
            start = kg.to_bytes(2, "big") + sid_bytes
            for k, raw in db.items(from_key=start):
                rk = cast(bytes, k)
                if not rk.startswith(start):
                    break
                yield rk, _codec.decode(rk[4:]), raw

    # -- checkpoints ---------------------------------------------------------
    def prepare(self, checkpoint_id: int) -> Callable[[], None]:
        """Flush the caches now; return the RocksDB checkpoint to run (in a worker thread while the
        task waits: no record is processed in between) before :meth:`snapshot`."""
        self.flush()
        target = cast(Path, self.root) / f"chk-{checkpoint_id}"
        db = self.db

        def create() -> None:
            if target.exists():
                shutil.rmtree(target)
            rocksdict.Checkpoint(db).create_checkpoint(str(target))

        def run() -> None:
            with self._io:  # a close waits for it
                if self._db is not db:
                    raise RocksDBStateError(f"RocksDB checkpoint into {target}: the DB was closed meanwhile")
                try:
                    if self.ttl_cleanup is not None:  # cleanup_full_snapshot: none in the files
                        self.ttl_cleanup.before_snapshot()
                    create()
                except Exception as e:
                    raise RocksDBStateError(f"RocksDB checkpoint into {target} failed: {e}") from e
            self._checkpoints[checkpoint_id] = target

        return run

    def snapshot(self, checkpoint_id: int | None = None) -> dict[str, Any]:
        cid = -1 if checkpoint_id is None else checkpoint_id
        if cid not in self._checkpoints:
            self.prepare(cid)()  # not prepared (a final snapshot): on the loop, synchronously
        else:
            self.flush()  # nothing can be dirty since prepare; a guard
        target = self._checkpoints[cid]
        files: dict[str, str] = {}
        inline: dict[str, bytes] = {}
        shared: dict[str, Path] = {}
        for entry in sorted(os.listdir(target)):
            path = target / entry
            if entry.endswith(_SST):
                name = self._shared_names.get(entry)
                if name is None:
                    name = self._shared_names[entry] = f"{self._name_prefix}-{self._session}-{entry}"
                files[entry] = name
                shared[name] = path
            else:
                inline[entry] = path.read_bytes()
        self._pending_shared[cid] = shared
        self._ever_referenced[cid] = set(files.values())
        return {
            "rocksdb": 1,
            "kinds": dict(self._kinds),
            "state_ids": {name: t.sid for name, t in self._rtables.items()},
            "key_types": sorted({_key_kind(t) for t in self._key_types} | set(self.restored_key_types or ())),
            "key_groups": [self.key_groups.start, self.key_groups.stop],
            "files": files,
            "inline": inline,
        }

    def take_shared(self, checkpoint_id: int) -> tuple[dict[str, Path], list[str]]:
        """The SST files of checkpoint ``checkpoint_id``: new ones (paths to store) and the names of
        those a completed checkpoint already stored (references)."""
        files = self._pending_shared.pop(checkpoint_id, {})
        new = {n: p for n, p in files.items() if n not in self._confirmed}
        return new, [n for n in files if n in self._confirmed]

    def checkpoint_complete(self, checkpoint_id: int) -> None:
        """Its files are in storage now: later checkpoints reference them; older local
        checkpoint directories are no longer needed."""
        names = self._ever_referenced.pop(checkpoint_id, None)
        if names is not None:
            self._confirmed = names  # only what the latest completed checkpoint holds is safe
        for cid in [c for c in self._checkpoints if c <= checkpoint_id]:
            self._drop_checkpoint(cid)
        for cid in [c for c in self._ever_referenced if c < checkpoint_id]:
            del self._ever_referenced[cid]
        if self.ttl_cleanup is not None:
            self.ttl_cleanup.tick()

    def checkpoint_aborted(self, checkpoint_id: int) -> None:
        self._pending_shared.pop(checkpoint_id, None)
        self._ever_referenced.pop(checkpoint_id, None)
        self._drop_checkpoint(checkpoint_id)

    def _drop_checkpoint(self, cid: int) -> None:
        path = self._checkpoints.pop(cid, None)
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)

    # -- restore -------------------------------------------------------------
    def restore(
        self,
        snapshots: Iterable[dict[str, Any]],
        owns: Callable[[int], bool],
        shared_path: Callable[[str], Path] | None = None,
        read_shared: Callable[[str], bytes] | None = None,
    ) -> None:
        """Restore the snapshots' state of this subtask's key groups: now if the DB is open,
        else when it opens (:meth:`start`, in a worker thread)."""
        if self.start_pending:
            self._pending_restore = (list(snapshots), owns, shared_path, read_shared)
            return
        self._restore_now(snapshots, owns, shared_path, read_shared)

    def _restore_now(
        self,
        snapshots: Iterable[dict[str, Any]],
        owns: Callable[[int], bool],
        shared_path: Callable[[str], Path] | None,
        read_shared: Callable[[str], bytes] | None,
    ) -> None:
        from .rocksdb_restore import restore_into

        restore_into(self, list(snapshots), owns, shared_path, read_shared)

    def _overlaps(self, snap: dict[str, Any]) -> bool:
        start, stop = snap["key_groups"]
        return bool(stop > self.key_groups.start and start < self.key_groups.stop)

    def name_table_ids(self, state_ids: dict[str, int]) -> None:
        """Adopt a restored DB's state ids (the same names keep their ids; the others get free
        ones). The tables keep their objects: an operator holds on to the tables it took at
        setup (a window operator's), which must stay the ones flushed and checkpointed."""
        ids = dict(state_ids)
        used = set(ids.values())
        for name in self._rtables:
            if name not in ids:
                ids[name] = sid = next(i for i in range(1, 0x10000) if i not in used)
                used.add(sid)
        tables = {}
        for name, sid in ids.items():
            t = self._rtables.get(name)
            if t is None:
                t = RocksTable(self, name, sid)
            else:
                t.renumber(sid)
            tables[name] = t
        self._rtables = tables

    def table_names(self, prefix: str = "") -> list[str]:
        """The names of the tables registered (restored ones too), those starting with ``prefix``."""
        return [name for name in self._rtables if name.startswith(prefix)]

    def sid_of(self, name: str, kind: str) -> int:
        self.table(name, kind)
        return self._rtables[name].sid

    # -- the end -------------------------------------------------------------
    def close_db(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(Exception):
                db.close()
            del db

    def close(self) -> None:
        """Close the DB and remove the working directory (state lives on in checkpoints), after
        any thread work still running (:meth:`aclose`: in a worker thread)."""
        self._closing()
        self._close_files()

    async def aclose(self) -> None:
        """:meth:`close` with the file work in a worker thread."""
        self._closing()
        await asyncio.to_thread(self._close_files)

    def _closing(self) -> None:
        self._closed = True
        for t in self._rtables.values():
            t.drop_cache()

    def _close_files(self) -> None:
        with self._io:
            self.close_db()
            root, self.root = self.root, None
            if root is not None:
                shutil.rmtree(root, ignore_errors=True)


class _SlowPath(Exception):
    """Not the default msgpack codec: values go through ``codec.encode``."""
