"""Checkpoint storage on the local filesystem (synchronous I/O; call it from a thread).

Theory of operation
-------------------
Layout: one directory per checkpoint, ``<directory>/chk-<id>/``, holding one file
per entry (the entry's name is its file name) and a ``_metadata`` file: JSON
(orjson) with the format version, job name, checkpoint id, timestamp, kind and,
per entry, its file name, size and sha256. A savepoint has the same layout in
the directory the user names.

Atomicity: every file is written under a hidden temporary name (``.<name>.<random>.tmp``),
flushed, fsynced and renamed onto its final name (``os.replace``: atomic on POSIX
and Windows), so a final name only ever holds complete content. Entries go
first; the checkpoint directory is fsynced so their names are durable; then
``_metadata`` is written the same way and the directory fsynced again. **A
checkpoint exists only once ``_metadata`` exists**: a crash at any earlier point
leaves a directory that every reader ignores. (The directory is fsynced once
after all entry renames rather than after each: the same guarantee, since
nothing is complete before the metadata, for one fsync instead of n.)

Reading: :meth:`FileSystemCheckpointStorage.latest_complete` scans ``chk-*``,
highest id first, and returns the first directory whose metadata parses, agrees
with the directory name and matches the job name filter; missing or corrupt
metadata is skipped. Entry checksums are verified lazily, on
:meth:`CheckpointHandle.read` (or all at once with :meth:`CheckpointHandle.verify`).

The job's index (``_completed-<hash>.json``, written atomically after a checkpoint's
``_metadata``: the commit point) names its latest completed checkpoint and lists the
retained completed ones. A ``chk-<id>`` of the job with intact ``_metadata`` that the
index never listed was written by an attempt killed before its commit: it is debris,
never restored, listed or retained.

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
import re
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
from .job_index import INDEX_PREFIX
from .metadata import (
    FORMAT_VERSION,
    FORMAT_VERSION_SHARED,
    METADATA_FILE,
    CheckpointHandle,
    EntryInfo,
    read_metadata,
    try_read_metadata,
)
from .shared_files import SHARED_DIR, SharedInfo, SharedWriter, job_key

__all__ = [
    "INDEX_PREFIX",
    "METADATA_FILE",
    "CheckpointHandle",
    "CheckpointStorageError",
    "CheckpointWriteStoppedError",
    "CorruptCheckpointError",
    "DamagedCheckpointError",
    "EntryInfo",
    "FileSystemCheckpointStorage",
    "SharedInfo",
]

_CHK_DIR = re.compile(r"chk-(\d+)")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_log = logging.getLogger(__name__)


class FileSystemCheckpointStorage:
    """Checkpoints under ``directory``; see the module docstring."""

    def __init__(self, directory: str | Path, *, retain: int = 3, clock: Clock = SYSTEM_CLOCK) -> None:
        if retain < 1:
            raise ValueError(f"retain must be >= 1, got {retain}")
        self.directory = Path(directory)
        self.retain = retain
        self._clock = clock

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
        shared: Mapping[str, bytes | bytearray | memoryview | Path] | None = None,
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
        if savepoint_path is None:
            target = self.directory / f"chk-{checkpoint_id}"
            self.begin_job(job_name)
            self._prepare_checkpoint_dir(target, job_name)
        else:
            target = Path(savepoint_path)
            prepare_savepoint_dir(target)
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
            _discard(target, written, whole=savepoint_path is None)
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
        shared: Mapping[str, bytes | bytearray | memoryview | Path],
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

    def shared_dir(self, job_name: str) -> Path:
        """Where the job's checkpoints keep their shared files."""
        return self.directory / SHARED_DIR / job_key(job_name)

    def listed_shared(self, job_name: str) -> dict[str, SharedInfo]:
        """Every shared file that a ``chk-*`` metadata of the job lists (complete or not yet
        committed: retention never deletes these)."""
        listed: dict[str, SharedInfo] = {}
        for cid, path in self._checkpoint_dirs():
            handle = try_read_metadata(path, cid)
            if handle is not None and handle.job_name == job_name:
                listed.update(handle.shared_info)
        return listed

    def _index_path(self, job_name: str) -> Path:
        return job_index.path(self.directory, job_name)

    def _write_index(self, job_name: str, checkpoint_id: int, completed: list[int] | None = None) -> None:
        data = job_index.encode(job_name, checkpoint_id, [] if completed is None else completed)
        self._atomic_write(self._index_path(job_name), data)
        self._fsync_dir(self.directory)

    def _read_index(self, job_name: str) -> int | None:
        """The id of the job's latest completed checkpoint, None if it never completed one."""
        index = self._read_index_entry(job_name)
        return None if index is None else index[0]

    def _read_index_entry(self, job_name: str) -> tuple[int, list[int] | None] | None:
        """``(latest, the retained completed ids)`` from the job's index (``None`` for the ids: an
        index written before it listed them); ``None``: the job has no index."""
        return job_index.read(self._index_path(job_name), job_name)

    def _completed_ids(self, job_name: str) -> list[int] | None:
        """The ids of the job's completed checkpoints as its index lists them (None: no index).
        An index from before the list: every complete ``chk-<id>`` of the job up to ``latest``."""
        index = self._read_index_entry(job_name)
        if index is None:
            return None
        latest, completed = index
        if completed is not None:
            return completed
        return [
            cid for cid, path in self._checkpoint_dirs()
            if cid <= latest and (h := try_read_metadata(path, cid)) is not None and h.job_name == job_name
        ]  # fmt: skip

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

    # ---------------------------------------------------------------- reading

    def complete_checkpoints(self, job_name: str | None = None) -> list[CheckpointHandle]:
        """Every complete checkpoint under ``directory`` by id. With ``job_name``: those of the job
        its index lists as completed (a ``chk-<id>`` whose write was interrupted before the index
        named it is not one, even with its ``_metadata`` intact)."""
        listed = set(self._completed_ids(job_name) or ()) if job_name is not None else None
        found = []
        for cid, path in self._checkpoint_dirs():
            if listed is not None and cid not in listed:
                continue
            handle = try_read_metadata(path, cid)
            if handle is not None and (job_name is None or handle.job_name == job_name):
                found.append(handle)
        return found

    def latest_complete(self, job_name: str | None = None) -> CheckpointHandle | None:
        """The complete checkpoint with the highest id (of ``job_name`` if given), or None."""
        for cid, path in reversed(self._checkpoint_dirs()):
            handle = try_read_metadata(path, cid)
            if handle is not None and (job_name is None or handle.job_name == job_name):
                return handle
        return None

    def restore_point(self, job_name: str, *, fallback: bool = False) -> CheckpointHandle | None:
        """The job's latest *completed* checkpoint, as its index names it; None if it has none.

        A completed checkpoint exists once its ``_metadata`` is durable *and* the job's index
        (``_completed-<hash>.json``, written last) names it; a ``chk-<id>`` the index does not
        name is debris of an interrupted write. If the one the index names is missing or
        damaged (its directory deleted or replaced by a file, its ``_metadata`` missing or
        garbage), or the index itself is damaged, or complete checkpoints of the job exist
        without an index, this raises :class:`DamagedCheckpointError` naming it: restoring an
        older checkpoint would commit output twice. ``fallback=True`` (the user's explicit
        ``enable_fallback_to_older_checkpoint()``) restores the newest intact older one
        instead, with a WARNING naming both."""
        latest: int | None = None
        try:
            latest = self._read_index(job_name)
            if latest is None:
                found = self.latest_complete(job_name)
                if found is None:
                    return None
                raise DamagedCheckpointError(
                    f"{self.directory} holds completed checkpoints of job {job_name!r} (the newest is "
                    f"{found.path}) but not its index {self._index_path(job_name).name}: the index was "
                    "deleted, or an older version wrote them",
                    self._index_path(job_name),
                )
            if latest == 0:  # the job began here (begin_job) and never completed a checkpoint: a
                return None  # complete-looking chk-<id> is a first write killed before the index
            path = self.directory / f"chk-{latest}"
            try:
                handle = self.load(path)
            except CheckpointStorageError as e:
                raise DamagedCheckpointError(
                    f"the latest completed checkpoint of job {job_name!r}, {path}, is damaged: {e}", path
                ) from e
            if handle.job_name != job_name or handle.checkpoint_id != latest:
                raise DamagedCheckpointError(
                    f"the latest completed checkpoint of job {job_name!r}, {path}, holds checkpoint "
                    f"{handle.checkpoint_id} of job {handle.job_name!r}",
                    path,
                )
            why = handle.damaged_shared()
            if why is not None:
                raise DamagedCheckpointError(
                    f"the latest completed checkpoint of job {job_name!r}, {path}, is damaged: {why}", path
                )
            return handle
        except DamagedCheckpointError as e:
            if not fallback:
                raise DamagedCheckpointError(
                    f"{e}. Refusing to restore: an older checkpoint would commit output twice, a fresh "
                    "start would redo it all. Repair or remove it, or allow restoring an older one "
                    "with get_checkpoint_config().enable_fallback_to_older_checkpoint()",
                    e.path,
                ) from e
            older = [
                h
                for h in self.complete_checkpoints(job_name)
                if (latest is None or h.checkpoint_id < latest) and h.damaged_shared() is None
            ]
            chosen = older[-1] if older else None
            _log.warning(
                "FALLBACK to an older checkpoint (enable_fallback_to_older_checkpoint): %s; restoring %s "
                "instead, so output committed after it may be written again",
                e, chosen.path if chosen else "nothing (a fresh start)",
            )  # fmt: skip
            return chosen

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

    def first_free_id(self, job_name: str) -> int:
        """An id above every checkpoint id the directory holds or the job's index names: a job
        that starts fresh or falls back to an older checkpoint writes no id a complete (even if
        damaged) checkpoint still occupies."""
        try:
            latest = self._read_index(job_name) or 0
        except DamagedCheckpointError:
            latest = 0
        return max([latest, *(cid for cid, _ in self._checkpoint_dirs())]) + 1

    def load(self, path_or_handle: str | Path | CheckpointHandle) -> CheckpointHandle:
        """A named checkpoint or savepoint: its directory, its ``_metadata`` file, or a handle.

        A relative path that does not exist is also looked up under ``directory``
        (``load("chk-7")``).
        """
        if isinstance(path_or_handle, CheckpointHandle):
            path = path_or_handle.path
        else:
            path = Path(path_or_handle)
            if not path.exists() and not path.is_absolute() and (self.directory / path).exists():
                path = self.directory / path
        if path.name == METADATA_FILE and path.is_file():
            path = path.parent
        if not path.is_dir():
            raise CheckpointStorageError(f"no checkpoint or savepoint directory at {path}", path)
        if not (path / METADATA_FILE).is_file():
            raise CheckpointStorageError(
                f"{path} is not a complete checkpoint: {path / METADATA_FILE} is missing "
                "(an interrupted write leaves no metadata)",
                path,
            )
        match = _CHK_DIR.fullmatch(path.name)
        return read_metadata(path, int(match.group(1)) if match else None)

    def _checkpoint_dirs(self) -> list[tuple[int, Path]]:
        try:
            children = list(self.directory.iterdir())
        except FileNotFoundError:
            return []
        except OSError as e:
            raise CheckpointStorageError(
                f"cannot list checkpoint directory {self.directory}: {e}", self.directory
            ) from e
        dirs = []
        for child in children:
            match = _CHK_DIR.fullmatch(child.name)
            if match and child.is_dir():
                dirs.append((int(match.group(1)), child))
        return sorted(dirs)

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
            doomed = [self.directory / f"chk-{cid}" for cid in complete[: -self.retain]]
            doomed += [path for cid, path in debris if cid < newest]
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
    """Remove a failed write: the whole ``chk-<id>`` directory, or a savepoint's files."""
    try:
        if whole:
            (target / METADATA_FILE).unlink(missing_ok=True)
            shutil.rmtree(target, ignore_errors=False)
        else:
            for path in written:
                path.unlink(missing_ok=True)
    except OSError as e:  # the original error is what matters; this one is only logged
        _log.warning("could not remove the failed checkpoint write %s: %s", target, e)
