"""Writing checkpoints to the local filesystem: atomic files, the commit, retention
(synchronous I/O; call it from a thread).

Theory of operation
-------------------
The directory's layout, the job's index and how a job finds the checkpoint it
restores are :class:`~streamflow.checkpoint.directory.CheckpointDirectory`'s
(``directory.py``); :class:`FileSystemCheckpointStorage` is one that also writes.

Atomicity: every file is written under a hidden temporary name (``.<name>.<random>.tmp``),
flushed, fsynced and renamed onto its final name (``os.replace``: atomic on POSIX
and Windows), so a final name only ever holds complete content. Entries go
first; the checkpoint directory is fsynced so their names are durable; then
``_metadata`` is written the same way and the directory fsynced again. **A
checkpoint exists only once ``_metadata`` exists**: a crash at any earlier point
leaves a directory that every reader ignores. (The directory is fsynced once
after all entry renames rather than after each: the same guarantee, since
nothing is complete before the metadata, for one fsync instead of n.)

Commit: the job's index (``_completed-<hash>.json``) is written atomically after a
checkpoint's ``_metadata``, naming it the latest completed checkpoint and listing the
retained completed ones; a ``chk-<id>`` the index never listed is debris.

Retention, after each checkpoint written (never for savepoints, which live
outside ``directory`` and are never deleted): keep the newest ``retain``
completed checkpoints *of the job just written* (the index's list) and delete its
older ones, plus every incomplete, corrupt or never-committed ``chk-*`` directory
older than the newest complete one (debris of crashed writes). Other jobs' complete
checkpoints are left alone.
A deletion removes ``_metadata`` first, so a deletion interrupted halfway leaves
an incomplete directory, never a complete-looking one with missing files.
Retention failures are logged, not raised: the new checkpoint is already durable.

Shared files (incremental checkpoints: a heap backend's deltas, a RocksDB backend's
SST files) live in ``<directory>/shared/<job key>/`` and are listed in the
``_metadata`` of every checkpoint that needs them; retention deletes those no
remaining checkpoint lists. See :mod:`streamflow.checkpoint.shared_files`.

Writing a ``chk-<id>`` that already holds a complete checkpoint is an error
(another job shares the directory, or ids were reused); an incomplete one (or
one with corrupt metadata), left by a crash, is replaced. Calls must be serialized (one writer at a time).
Every failure raises :class:`CheckpointStorageError` naming the path involved;
a checksum or size mismatch raises :class:`CorruptCheckpointError`.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from streamflow import _faults as faults
from streamflow.checkpoint.events import CheckpointType
from streamflow.clock import SYSTEM_CLOCK, Clock

from . import job_index, shared_files
from ._fs import (
    CheckpointStorageError,
    CheckpointWriteStoppedError,
    CorruptCheckpointError,
    DamagedCheckpointError,
    atomic_write,
    check_entry_name,
    check_stop,
    fsync_dir,
    prepare_savepoint_dir,
)
from .directory import _CHK_DIR, CheckpointDirectory
from .job_index import INDEX_PREFIX
from .metadata import (
    FORMAT_VERSION,
    FORMAT_VERSION_SHARED,
    METADATA_FILE,
    CheckpointHandle,
    EntryInfo,
    try_read_metadata,
)
from .shared_files import SHARED_DIR, HashedFile, SharedInfo, SharedWriter
from .storages import local_path

__all__ = [
    "INDEX_PREFIX",
    "METADATA_FILE",
    "CheckpointDirectory",
    "CheckpointHandle",
    "CheckpointStorageError",
    "CheckpointWriteStoppedError",
    "CorruptCheckpointError",
    "DamagedCheckpointError",
    "EntryInfo",
    "FileSystemCheckpointStorage",
    "SharedInfo",
]

_log = logging.getLogger(__name__)


class FileSystemCheckpointStorage(CheckpointDirectory):
    """Checkpoints under ``directory``, read and written; see the module docstring."""

    def __init__(self, directory: str | Path, *, retain: int = 3, clock: Clock = SYSTEM_CLOCK) -> None:
        if retain < 1:
            raise ValueError(f"retain must be >= 1, got {retain}")
        super().__init__(directory)
        self.retain = retain
        self._clock = clock
        self._protected: set[int] = set()  # ids of checkpoints a job here was resumed from

    def protect(self, path: Path) -> None:
        """Never delete ``path`` by retention if it is a ``chk-<id>`` of this directory: the job
        was resumed from it explicitly (``execution.savepoint.path``), and as in Flink's default
        restore mode NO_CLAIM that checkpoint stays the user's (it can be resumed again); its
        shared files stay too, as retention keeps every file a ``chk-*`` metadata lists."""
        match = _CHK_DIR.fullmatch(path.name)
        if match is not None and path.resolve().parent == self.directory.resolve():
            self._protected.add(int(match.group(1)))

    # ---------------------------------------------------------------- writing

    def write_checkpoint(
        self,
        checkpoint_id: int,
        job_name: str,
        entries: Mapping[str, bytes],
        *,
        savepoint_path: str | Path | None = None,
        timestamp_ms: int | None = None,
        stats: Mapping[str, Any] | None = None,
        should_stop: Callable[[], bool] | None = None,
        shared: Mapping[str, bytes | bytearray | memoryview | Path | HashedFile] | None = None,
        references: Iterable[str] = (),
    ) -> Path:
        """Write a complete checkpoint (or savepoint) and return its directory.

        ``stats`` (durations, alignment) is kept in ``_metadata`` for ``streamflow checkpoints
        inspect``, with ``async_ms``: the time taken to write and sync the entries.

        ``should_stop`` is asked before each file and before ``_metadata``: once it says
        True the write stops (:class:`CheckpointWriteStoppedError`). A write that fails or
        stops removes what it wrote, so no half-written ``chk-<id>`` accumulates (a full
        disk fails every checkpoint at once and leaves nothing behind).

        ``shared`` are new shared files (bytes, or a ``Path`` to hard-link or copy) and
        ``references`` the names of shared files earlier checkpoints of the job wrote that this
        one needs too (see :mod:`streamflow.checkpoint.shared_files`); a savepoint gets a copy
        of each. Referencing a file no complete checkpoint of the job lists is an error."""
        if type(checkpoint_id) is not int or checkpoint_id < 0:
            raise ValueError(f"checkpoint_id must be an int >= 0, got {checkpoint_id!r}")
        if not isinstance(job_name, str) or not job_name:
            raise ValueError(f"job_name must be a non-empty str, got {job_name!r}")
        for name, data in entries.items():
            check_entry_name(name)
            if not isinstance(data, bytes | bytearray | memoryview):
                raise TypeError(f"entry {name!r} must be bytes, got {type(data).__name__}")
        kind = CheckpointType.CHECKPOINT if savepoint_path is None else CheckpointType.SAVEPOINT
        whole = savepoint_path is None  # a failed write removes the directory it created
        if savepoint_path is None:
            target = self.directory / f"chk-{checkpoint_id}"
            self.begin_job(job_name)
            self._prepare_checkpoint_dir(target, job_name)
        else:
            target = local_path(savepoint_path, "savepoint directory")  # a path or a file: URI
            whole = prepare_savepoint_dir(target)
        written: list[Path] = []
        sharing: SharedWriter | None = None
        references = list(references)
        try:
            infos = []
            started = self._clock.monotonic()
            if shared or references:
                sharing = self._write_shared(
                    checkpoint_id, job_name, target, kind, shared or {}, references, should_stop
                )
            for name, data in entries.items():
                check_stop(should_stop, checkpoint_id, target)
                digest = hashlib.sha256(data).hexdigest()
                written.append(target / name)
                self._atomic_write(target / name, data)
                infos.append({"name": name, "file": name, "size": len(data), "sha256": digest})
            self._fsync_dir(target)
            metadata = {
                "format_version": FORMAT_VERSION,
                "job_name": job_name,
                "checkpoint_id": checkpoint_id,
                "timestamp_ms": self._clock.now_ms() if timestamp_ms is None else timestamp_ms,
                "kind": kind.value,
                "entries": infos,
            }
            if sharing is not None:
                metadata["format_version"] = FORMAT_VERSION_SHARED
                metadata["shared"] = [info.to_json() for info in sharing.infos.values()]
            if stats is not None:
                metadata["stats"] = {**stats, "async_ms": round((self._clock.monotonic() - started) * 1000)}
            check_stop(should_stop, checkpoint_id, target)  # the last moment to stop
            if faults.ARMED:
                faults.point("metadata", checkpoint_id)
            written.append(target / METADATA_FILE)
            self._atomic_write(target / METADATA_FILE, orjson.dumps(metadata, option=orjson.OPT_INDENT_2))
            self._fsync_dir(target)
        except BaseException:
            _discard(target, written, whole=whole)
            if sharing is not None:
                sharing.discard()
            raise
        if faults.ARMED:
            faults.point("metadata_written", checkpoint_id)
        if kind is CheckpointType.CHECKPOINT:
            listed = [c for c in self._completed_ids(job_name) or () if c != checkpoint_id]
            kept = [*listed, checkpoint_id][-self.retain:]
            self._write_index(job_name, checkpoint_id, kept)  # the commit point
            self._apply_retention(job_name)
        return target

    def _write_shared(
        self,
        checkpoint_id: int,
        job_name: str,
        target: Path,
        kind: CheckpointType,
        shared: Mapping[str, bytes | bytearray | memoryview | Path | HashedFile],
        references: list[str],
        should_stop: Callable[[], bool] | None,
    ) -> SharedWriter:
        """Write (or, for a savepoint, copy) the checkpoint's shared files; fsync their directory."""
        source = self.shared_dir(job_name)
        directory = source if kind is CheckpointType.CHECKPOINT else target / SHARED_DIR
        sharing = SharedWriter(directory, self.listed_shared(job_name), source, self._atomic_write)
        try:
            for name, data in shared.items():
                check_stop(should_stop, checkpoint_id, target)
                sharing.add_new(name, data)
            for name in references:
                sharing.add_reference(name)
            if sharing.written:
                self._fsync_dir(directory)
            if sharing.created:  # and shared/ itself, for a checkpoint's first shared file
                self._fsync_dir(directory.parent)
                if kind is CheckpointType.CHECKPOINT:
                    self._fsync_dir(directory.parent.parent)
        except BaseException:
            sharing.discard()
            raise
        return sharing

    def _write_index(self, job_name: str, checkpoint_id: int, completed: list[int] | None = None) -> None:
        data = job_index.encode(job_name, checkpoint_id, [] if completed is None else completed)
        self._atomic_write(self._index_path(job_name), data)
        self._fsync_dir(self.directory)

    # Overridable for tests (slow or failing disks): write a file atomically, fsync a directory.
    def _atomic_write(self, path: Path, data: bytes | bytearray | memoryview) -> None:
        atomic_write(path, data)

    def _fsync_dir(self, path: Path) -> None:
        fsync_dir(path)

    def _prepare_checkpoint_dir(self, target: Path, job_name: str) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            existing = try_read_metadata(target, None) if target.exists() else None
            if existing is not None and existing.job_name == job_name:
                latest = self._read_index(job_name)
                if latest is None or existing.checkpoint_id > latest:
                    # its _metadata is durable but the index never named it: an interrupted write
                    _log.info("replacing %s: written, but never committed to the index", target)
                    existing = None
            if existing is not None and (why := existing.damaged_shared()) is not None:
                _log.warning("replacing the damaged checkpoint %s: %s", target, why)
                existing = None
            if existing is not None:
                raise CheckpointStorageError(
                    f"{target} already holds a complete checkpoint of job {existing.job_name!r}; use one "
                    "checkpoint directory per job, and resume from its latest checkpoint",
                    target,
                )
            if target.exists():  # debris of a crashed write of the same id
                shutil.rmtree(target)
            target.mkdir()
        except OSError as e:
            raise CheckpointStorageError(f"cannot create checkpoint directory {target}: {e}", target) from e
        fsync_dir(self.directory)

    def begin_job(self, job_name: str) -> None:
        """Before a job's first checkpoint: its index is written naming no checkpoint (``latest``
        0), so a process killed after that checkpoint's ``_metadata`` but before the index names
        it restarts fresh instead of finding completed checkpoints without an index (which means
        a deleted index, and is refused)."""
        if self._read_index(job_name) is None:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise CheckpointStorageError(f"cannot create checkpoint directory {self.directory}: {e}",
                                             self.directory) from e
            self._write_index(job_name, 0)

    # ---------------------------------------------------------------- retention

    def _apply_retention(self, job_name: str) -> None:
        try:
            listed = set(self._completed_ids(job_name) or ())
            complete: list[int] = []
            debris: list[tuple[int, Path]] = []  # incomplete, corrupt, or never named by the index
            for cid, path in self._checkpoint_dirs():
                handle = try_read_metadata(path, cid)
                if handle is None or (handle.job_name == job_name and cid not in listed):
                    debris.append((cid, path))
                elif handle.job_name == job_name:
                    complete.append(cid)
            if not complete:
                return
            newest = complete[-1]
            kept = self._protected
            doomed = [self.directory / f"chk-{cid}" for cid in complete[: -self.retain] if cid not in kept]
            doomed += [path for cid, path in debris if cid < newest and cid not in kept]
            for path in doomed:
                (path / METADATA_FILE).unlink(missing_ok=True)
                shutil.rmtree(path)
            shared = self.shared_dir(job_name)
            if shared.exists():  # only once every doomed metadata is gone
                deleted = shared_files.collect_garbage(shared, self.listed_shared(job_name))
                if deleted:
                    _log.debug("retention deleted %d shared file(s) of job %r", len(deleted), job_name)
        except (OSError, CheckpointStorageError) as e:
            _log.warning("checkpoint retention in %s failed: %s", self.directory, e)


def _discard(target: Path, written: list[Path], whole: bool) -> None:
    """Remove a failed write: the whole directory (a ``chk-<id>``, or a savepoint's new
    directory), or the files it wrote into a directory it found empty."""
    try:
        if whole:
            (target / METADATA_FILE).unlink(missing_ok=True)
            shutil.rmtree(target, ignore_errors=False)
        else:
            for path in written:
                path.unlink(missing_ok=True)
    except OSError as e:  # the original error is what matters; this one is only logged
        _log.warning("could not remove the failed checkpoint write %s: %s", target, e)
