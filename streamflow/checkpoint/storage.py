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

Retention, after each checkpoint written (never for savepoints, which live
outside ``directory`` and are never deleted): keep the newest ``retain``
complete checkpoints *of the job just written* and delete its older ones, plus
every incomplete or corrupt ``chk-*`` directory older than the newest complete
one (debris of crashed writes). Other jobs' complete checkpoints are left alone.
A deletion removes ``_metadata`` first, so a deletion interrupted halfway leaves
an incomplete directory, never a complete-looking one with missing files.
Retention failures are logged, not raised: the new checkpoint is already durable.

Writing a ``chk-<id>`` that already holds a complete checkpoint is an error
(another job shares the directory, or ids were reused); an incomplete one (or
one with corrupt metadata), left by a crash, is replaced. Calls must be serialized (one writer at a time).
Every failure raises :class:`CheckpointStorageError` naming the path involved;
a checksum or size mismatch raises :class:`CorruptCheckpointError`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from streamflow import _faults as faults
from streamflow.checkpoint.events import CheckpointType
from streamflow.clock import SYSTEM_CLOCK, Clock
from streamflow.errors import StreamflowError

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
]

METADATA_FILE = "_metadata"
INDEX_PREFIX = "_completed-"
FORMAT_VERSION = 1
_CHK_DIR = re.compile(r"chk-(\d+)")
_BAD_NAME_CHARS = re.compile(r'[/\\:*?"<>|\x00-\x1f]')
_SHA256 = re.compile(r"[0-9a-f]{64}")
_log = logging.getLogger(__name__)


class CheckpointStorageError(StreamflowError):
    """Reading or writing checkpoint data failed; ``path`` is the file or directory involved."""

    def __init__(self, message: str, path: Path | str) -> None:
        super().__init__(message)
        self.path = Path(path)


class CorruptCheckpointError(CheckpointStorageError):
    """An entry file does not match the size or sha256 recorded in ``_metadata``."""


class DamagedCheckpointError(CheckpointStorageError):
    """The job's latest completed checkpoint (or its index) is missing or damaged: refused
    rather than silently restoring an older one or starting fresh."""


class CheckpointWriteStoppedError(CheckpointStorageError):
    """A write was stopped before its ``_metadata`` (the job ended); its directory is gone."""


@dataclass(frozen=True, slots=True)
class EntryInfo:
    name: str
    file: str
    size: int
    sha256: str


@dataclass(frozen=True)
class CheckpointHandle:
    """A complete checkpoint or savepoint on disk, described by its ``_metadata``."""

    checkpoint_id: int
    path: Path
    job_name: str
    kind: CheckpointType
    timestamp_ms: int
    entry_info: Mapping[str, EntryInfo] = field(repr=False)

    @property
    def entries(self) -> tuple[str, ...]:
        return tuple(self.entry_info)

    def read(self, name: str) -> bytes:
        """The entry's bytes, verified against its recorded size and sha256."""
        info = self.entry_info.get(name)
        if info is None:
            known = ", ".join(self.entries)
            msg = f"checkpoint {self.path} has no entry {name!r} (entries: {known})"
            raise CheckpointStorageError(msg, self.path)
        file = self.path / info.file
        try:
            data = file.read_bytes()
        except OSError as e:
            raise CorruptCheckpointError(f"cannot read checkpoint entry {file}: {e}", file) from e
        if len(data) != info.size:
            raise CorruptCheckpointError(
                f"checkpoint entry {file} is corrupt: {len(data)} bytes, metadata says {info.size}",
                file,
            )
        if hashlib.sha256(data).hexdigest() != info.sha256:
            raise CorruptCheckpointError(
                f"checkpoint entry {file} is corrupt: sha256 does not match the metadata", file
            )
        return data

    def verify(self) -> None:
        """Read every entry, raising :class:`CorruptCheckpointError` on the first mismatch."""
        for name in self.entry_info:
            self.read(name)


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
    ) -> Path:
        """Write a complete checkpoint (or savepoint) and return its directory.

        ``stats`` (durations, alignment) is kept in ``_metadata`` for ``streamflow checkpoints
        inspect``, with ``async_ms``: the time taken to write and sync the entries.

        ``should_stop`` is asked before each file and before ``_metadata``: once it says
        True the write stops (:class:`CheckpointWriteStoppedError`). A write that fails or
        stops removes what it wrote, so no half-written ``chk-<id>`` accumulates (a full
        disk fails every checkpoint at once and leaves nothing behind)."""
        if type(checkpoint_id) is not int or checkpoint_id < 0:
            raise ValueError(f"checkpoint_id must be an int >= 0, got {checkpoint_id!r}")
        if not isinstance(job_name, str) or not job_name:
            raise ValueError(f"job_name must be a non-empty str, got {job_name!r}")
        for name, data in entries.items():
            _check_entry_name(name)
            if not isinstance(data, bytes | bytearray | memoryview):
                raise TypeError(f"entry {name!r} must be bytes, got {type(data).__name__}")
        kind = CheckpointType.CHECKPOINT if savepoint_path is None else CheckpointType.SAVEPOINT
        if savepoint_path is None:
            target = self.directory / f"chk-{checkpoint_id}"
            self._prepare_checkpoint_dir(target, job_name)
        else:
            target = Path(savepoint_path)
            _prepare_savepoint_dir(target)
        written: list[Path] = []
        try:
            infos = []
            started = self._clock.monotonic()
            for name, data in entries.items():
                _check_stop(should_stop, checkpoint_id, target)
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
            if stats is not None:
                metadata["stats"] = {**stats, "async_ms": round((self._clock.monotonic() - started) * 1000)}
            _check_stop(should_stop, checkpoint_id, target)  # the last moment to stop
            if faults.ARMED:
                faults.point("metadata", checkpoint_id)
            written.append(target / METADATA_FILE)
            self._atomic_write(target / METADATA_FILE, orjson.dumps(metadata, option=orjson.OPT_INDENT_2))
            self._fsync_dir(target)
        except BaseException:
            _discard(target, written, whole=savepoint_path is None)
            raise
        if faults.ARMED:
            faults.point("metadata_written", checkpoint_id)
        if kind is CheckpointType.CHECKPOINT:
            self._write_index(job_name, checkpoint_id)  # the commit point
            self._apply_retention(job_name)
        return target

    def _index_path(self, job_name: str) -> Path:
        return self.directory / f"{INDEX_PREFIX}{hashlib.sha256(job_name.encode()).hexdigest()[:16]}.json"

    def _write_index(self, job_name: str, checkpoint_id: int) -> None:
        index = {"format_version": FORMAT_VERSION, "job_name": job_name, "latest": checkpoint_id}
        self._atomic_write(self._index_path(job_name), orjson.dumps(index, option=orjson.OPT_INDENT_2))
        self._fsync_dir(self.directory)

    def _read_index(self, job_name: str) -> int | None:
        """The id of the job's latest completed checkpoint, None if it never completed one."""
        path = self._index_path(job_name)
        try:
            index: Any = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, orjson.JSONDecodeError) as e:
            raise DamagedCheckpointError(f"the checkpoint index {path} is damaged: {e}", path) from e
        latest = index.get("latest") if isinstance(index, dict) else None
        if (
            not isinstance(index, dict)
            or index.get("job_name") != job_name
            or type(latest) is not int
            or latest < 0
        ):
            raise DamagedCheckpointError(f"the checkpoint index {path} is damaged: {index!r:.200}", path)
        return latest

    # Overridable for tests (slow or failing disks): write a file atomically, fsync a directory.
    def _atomic_write(self, path: Path, data: bytes | bytearray | memoryview) -> None:
        _atomic_write(path, data)

    def _fsync_dir(self, path: Path) -> None:
        _fsync_dir(path)

    def _prepare_checkpoint_dir(self, target: Path, job_name: str) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            existing = _try_read_metadata(target, None) if target.exists() else None
            if existing is not None and existing.job_name == job_name:
                latest = self._read_index(job_name)
                if latest is None or existing.checkpoint_id > latest:
                    # its _metadata is durable but the index never named it: an interrupted write
                    _log.info("replacing %s: written, but never committed to the index", target)
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
        _fsync_dir(self.directory)

    # ---------------------------------------------------------------- reading

    def complete_checkpoints(self, job_name: str | None = None) -> list[CheckpointHandle]:
        """Every complete checkpoint under ``directory`` (of ``job_name`` if given), by id."""
        found = []
        for cid, path in self._checkpoint_dirs():
            handle = _try_read_metadata(path, cid)
            if handle is not None and (job_name is None or handle.job_name == job_name):
                found.append(handle)
        return found

    def latest_complete(self, job_name: str | None = None) -> CheckpointHandle | None:
        """The complete checkpoint with the highest id (of ``job_name`` if given), or None."""
        for cid, path in reversed(self._checkpoint_dirs()):
            handle = _try_read_metadata(path, cid)
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
                h for h in self.complete_checkpoints(job_name) if latest is None or h.checkpoint_id < latest
            ]
            chosen = older[-1] if older else None
            _log.warning(
                "FALLBACK to an older checkpoint (enable_fallback_to_older_checkpoint): %s; restoring %s "
                "instead, so output committed after it may be written again",
                e, chosen.path if chosen else "nothing (a fresh start)",
            )  # fmt: skip
            return chosen

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
        return _read_metadata(path, int(match.group(1)) if match else None)

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
            complete: list[int] = []
            debris: list[tuple[int, Path]] = []
            latest = self._read_index(job_name)
            for cid, path in self._checkpoint_dirs():
                handle = _try_read_metadata(path, cid)
                if handle is None:
                    debris.append((cid, path))
                elif handle.job_name == job_name and (latest is None or cid <= latest):
                    complete.append(cid)
            if not complete:
                return
            newest = complete[-1]
            doomed = [self.directory / f"chk-{cid}" for cid in complete[: -self.retain]]
            doomed += [path for cid, path in debris if cid < newest]
            for path in doomed:
                (path / METADATA_FILE).unlink(missing_ok=True)
                shutil.rmtree(path)
        except (OSError, CheckpointStorageError) as e:
            _log.warning("checkpoint retention in %s failed: %s", self.directory, e)


# -------------------------------------------------------------------- helpers


def _check_entry_name(name: object) -> None:
    if (
        not isinstance(name, str)
        or not name
        or len(name) > 200
        or name[0] in "._"
        or _BAD_NAME_CHARS.search(name)
    ):
        raise ValueError(
            f"invalid checkpoint entry name {name!r}: use a non-empty file name without path "
            "separators or control characters, not starting with '.' or '_' (reserved)"
        )


def _check_stop(should_stop: Callable[[], bool] | None, checkpoint_id: int, target: Path) -> None:
    if should_stop is not None and should_stop():
        raise CheckpointWriteStoppedError(
            f"writing checkpoint {checkpoint_id} to {target} was stopped: the job ended", target
        )


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


def _prepare_savepoint_dir(target: Path) -> None:
    try:
        if target.exists():
            if not target.is_dir():
                raise CheckpointStorageError(f"savepoint path {target} is not a directory", target)
            if any(target.iterdir()):
                raise CheckpointStorageError(
                    f"savepoint path {target} is not empty; choose a new path per savepoint",
                    target,
                )
        else:
            target.mkdir(parents=True)
    except OSError as e:
        raise CheckpointStorageError(f"cannot create savepoint directory {target}: {e}", target) from e
    _fsync_dir(target.parent)


def _atomic_write(path: Path, data: bytes | bytearray | memoryview) -> None:
    """Temp name, write, flush, fsync, rename; the caller fsyncs the directory."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise CheckpointStorageError(f"cannot write {path}: {e}", path) from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _fsync_dir(path: Path) -> None:
    if os.name == "nt":  # directories cannot be opened for fsync on Windows
        return
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise CheckpointStorageError(f"cannot fsync directory {path}: {e}", path) from e


def _try_read_metadata(path: Path, dir_id: int | None) -> CheckpointHandle | None:
    try:
        return _read_metadata(path, dir_id)
    except CheckpointStorageError as e:
        _log.debug("ignoring %s: %s", path, e)
        return None


def _read_metadata(path: Path, dir_id: int | None) -> CheckpointHandle:
    """Parse and validate ``path/_metadata``; ``dir_id`` is the id in a ``chk-<id>`` name."""
    meta_path = path / METADATA_FILE
    try:
        meta: Any = orjson.loads(meta_path.read_bytes())
    except FileNotFoundError as e:
        raise CheckpointStorageError(f"{meta_path} is missing", meta_path) from e
    except (OSError, orjson.JSONDecodeError) as e:
        raise CheckpointStorageError(f"cannot read {meta_path}: {e}", meta_path) from e

    def bad(why: str) -> CheckpointStorageError:
        return CheckpointStorageError(f"corrupt checkpoint metadata {meta_path}: {why}", meta_path)

    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        raise bad(f"expected an object with format_version {FORMAT_VERSION}")
    cid, job, ts = meta.get("checkpoint_id"), meta.get("job_name"), meta.get("timestamp_ms")
    if type(cid) is not int or cid < 0 or not isinstance(job, str) or type(ts) is not int:
        raise bad("checkpoint_id, job_name or timestamp_ms missing or of the wrong type")
    if dir_id is not None and cid != dir_id:
        raise bad(f"it names checkpoint {cid} but sits in chk-{dir_id}")
    try:
        kind = CheckpointType(meta.get("kind"))
    except ValueError:
        raise bad(f"unknown kind {meta.get('kind')!r}") from None
    infos: dict[str, EntryInfo] = {}
    raw_entries = meta.get("entries")
    if not isinstance(raw_entries, list):
        raise bad("entries must be a list")
    for raw in raw_entries:
        try:
            info = EntryInfo(raw["name"], raw["file"], raw["size"], raw["sha256"])
            _check_entry_name(info.name)
            _check_entry_name(info.file)
        except (TypeError, KeyError, ValueError) as e:
            raise bad(f"invalid entry {raw!r}: {e}") from None
        if type(info.size) is not int or info.size < 0 or not isinstance(info.sha256, str):
            raise bad(f"invalid size or sha256 in entry {raw!r}")
        if not _SHA256.fullmatch(info.sha256) or info.name in infos:
            raise bad(f"bad sha256 or duplicate name in entry {raw!r}")
        infos[info.name] = info
    return CheckpointHandle(cid, path, job, kind, ts, infos)
