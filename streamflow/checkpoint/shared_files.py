"""Shared files: checkpoint data that several checkpoints of one job use.

Theory of operation
-------------------
An incremental checkpoint writes only what changed since an earlier one: its
new data goes into *shared files*, and it lists, besides them, the shared files
of earlier checkpoints it still needs (a heap backend's base and deltas, a
RocksDB backend's SST files). Flink keeps such files in ``shared/`` beside the
``chk-<id>`` directories and counts references to them; so does this module.

Layout: ``<directory>/shared/<job key>/<name>``, the job key being the one in
the job's index file name (16 hex digits of the job name's sha256), so jobs that
share a checkpoint directory never see each other's files. A savepoint is
self-contained: its shared files are copied into ``<savepoint>/shared/<name>``.

Writing (:class:`SharedWriter`, used by ``FileSystemCheckpointStorage.write_checkpoint``
before any entry): a new file given as bytes is written atomically like an
entry (temporary name, fsync, rename); one given as a ``Path`` is hard-linked
(``os.link``; immutable files such as SST files cost no copy) or, when linking
fails (another filesystem, no permission), copied atomically, which is logged
with its cause; a ``HashedFile`` (a ``Path`` with the size and sha256 its writer computed as
it wrote it: a snapshot child's) likewise, with that digest instead of a second read of the
file, and its size checked. The shared directory is fsynced before the entries are written,
so once ``_metadata`` is durable every file it lists is too. ``_metadata`` lists
every shared file the checkpoint needs, new or referenced, with its size and
sha256 (format version 2; a checkpoint without shared files keeps version 1,
so older readers refuse what they cannot restore instead of missing state).

Reading: sizes are checked when a restore point is chosen (a missing or
truncated shared file makes the checkpoint damaged: refused, or skipped by the
user's explicit fallback like a damaged ``_metadata``); checksums are verified
lazily on read, like entries (:class:`CorruptCheckpointError` naming the file).

Retention (reference counting by scanning): after the old checkpoints are
deleted (``_metadata`` first), every file in the job's shared directory that no
remaining ``chk-*`` metadata of the job lists is deleted. Since a file is
deleted only when no parseable metadata lists it, an interruption at any point
leaves at worst unreferenced files, deleted by the next retention; a file a
complete checkpoint lists is never deleted, so removing an old checkpoint never
breaks a newer one. Writes are serialized (one writer per directory), so no
half-written checkpoint's files can be collected under its feet.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._fs import (
    CheckpointStorageError,
    CorruptCheckpointError,
    check_entry_name,
    fsync_file,
    hash_file,
    tmp_name,
)

__all__ = ["SHARED_DIR", "HashedFile", "SharedInfo", "SharedWriter", "collect_garbage", "job_key"]

SHARED_DIR = "shared"
_log = logging.getLogger(__name__)


def job_key(job_name: str) -> str:
    """16 hex digits naming a job in file names (its index and its shared directory)."""
    return hashlib.sha256(job_name.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class SharedInfo:
    name: str
    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True, slots=True)
class HashedFile:
    """A finished file to hard-link (or copy) into a checkpoint, with the size and sha256 of
    the bytes its writer wrote, hashed as it wrote them (a snapshot child: ``heap_fork.py``).
    The storage takes that digest instead of reading the file again, and checks only its
    size (a stat: a truncated or missing file fails the write). The digest describes the
    file as written, not as the disk holds it later: a file damaged after it was written
    fails its verification at restore, as any damaged shared file does."""

    path: Path
    size: int
    sha256: str

    def __post_init__(self) -> None:
        if type(self.size) is not int or self.size < 0 or not _is_sha256(self.sha256):
            raise ValueError(f"a hashed file needs a size and a sha256 hex digest, got {self!r}")

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()


def _is_sha256(text: object) -> bool:
    return isinstance(text, str) and len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def parse_shared(
    raw_list: Any, bad: Callable[[str], Exception], is_sha: Callable[[str], bool]
) -> dict[str, SharedInfo]:
    """The ``shared`` list of a ``_metadata`` (absent: none)."""
    if raw_list is None:
        return {}
    if not isinstance(raw_list, list):
        raise bad("shared must be a list")
    out: dict[str, SharedInfo] = {}
    for raw in raw_list:
        try:
            info = SharedInfo(raw["name"], raw["size"], raw["sha256"])
            check_entry_name(info.name, "shared file")
        except (TypeError, KeyError, ValueError) as e:
            raise bad(f"invalid shared file {raw!r}: {e}") from None
        if type(info.size) is not int or info.size < 0 or not isinstance(info.sha256, str):
            raise bad(f"invalid size or sha256 in shared file {raw!r}")
        if not is_sha(info.sha256) or info.name in out:
            raise bad(f"bad sha256 or duplicate name in shared file {raw!r}")
        out[info.name] = info
    return out


def read_verified(path: Path, info: SharedInfo) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CorruptCheckpointError(f"cannot read shared checkpoint file {path}: {e}", path) from e
    _check(path, info, len(data), hashlib.sha256(data).hexdigest())
    return data


def verify_file(path: Path, info: SharedInfo) -> None:
    try:
        size, digest = hash_file(path)
    except OSError as e:
        raise CorruptCheckpointError(f"cannot read shared checkpoint file {path}: {e}", path) from e
    _check(path, info, size, digest)


def _check(path: Path, info: SharedInfo, size: int, digest: str) -> None:
    if size != info.size:
        raise CorruptCheckpointError(
            f"shared checkpoint file {path} is corrupt: {size} bytes, metadata says {info.size}", path
        )
    if digest != info.sha256:
        raise CorruptCheckpointError(
            f"shared checkpoint file {path} is corrupt: sha256 does not match the metadata", path
        )


def missing_or_truncated(path: Path, info: SharedInfo) -> str | None:
    """Why a listed shared file is unusable at a glance (a stat, no read), or None."""
    try:
        size = path.stat().st_size
    except OSError as e:
        return f"shared file {path} is missing ({e.strerror})"
    if size != info.size:
        return f"shared file {path} has {size} bytes, its metadata says {info.size}"
    return None


class SharedWriter:
    """The shared files of one checkpoint write, into ``directory`` (created on first use).

    ``known`` maps the names that complete checkpoints of the job already list to their
    info: a reference must be one of them; a new file under a known name must have the
    same content (it is then not written again). ``source`` is the job's shared
    directory, where a savepoint copies its references from."""

    def __init__(
        self,
        directory: Path,
        known: dict[str, SharedInfo],
        source: Path,
        atomic_write: Callable[[Path, bytes | bytearray | memoryview], None],
    ) -> None:
        self.directory = directory
        self.known = known
        self.source = source
        self._atomic_write = atomic_write
        self.infos: dict[str, SharedInfo] = {}
        self.written: list[Path] = []
        self.created = False  # the directory is new: its parent must be fsynced too

    def _mkdir(self) -> None:
        if self.created or self.directory.is_dir():
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.created = True
        except OSError as e:
            raise CheckpointStorageError(f"cannot create {self.directory}: {e}", self.directory) from e

    def add_new(self, name: str, data: bytes | bytearray | memoryview | Path | HashedFile) -> None:
        check_entry_name(name, "shared file")
        if name in self.infos:
            raise ValueError(f"shared file {name!r} is given twice")
        self._mkdir()
        target = self.directory / name
        if isinstance(data, HashedFile):  # hashed by its writer as it wrote it: a stat, no read
            size, digest = _stat_size(data.path), data.sha256
            if size != data.size:
                why = f"shared file source {data.path} has {size} bytes, its writer wrote {data.size}"
                raise CheckpointStorageError(why, data.path)
            data = data.path
        elif isinstance(data, Path):
            try:
                size, digest = hash_file(data)
            except OSError as e:
                raise CheckpointStorageError(f"cannot read shared file source {data}: {e}", data) from e
        elif isinstance(data, bytes | bytearray | memoryview):
            size, digest = len(data), hashlib.sha256(data).hexdigest()
        else:
            raise TypeError(f"shared file {name!r} must be bytes or a Path, got {type(data).__name__}")
        info = SharedInfo(name, size, digest)
        known = self.known.get(name)
        if known is not None and self.directory == self.source:
            if known != info:
                raise CheckpointStorageError(
                    f"shared file {target} already belongs to a complete checkpoint with other content; "
                    "shared file names must be unique",
                    target,
                )
            if missing_or_truncated(target, known) is None:
                self.infos[name] = info  # the same file again: nothing to write
                return
        self.written.append(target)
        if isinstance(data, Path):
            _link_or_copy(data, target)
        else:
            self._atomic_write(target, data)
        self.infos[name] = info

    def add_reference(self, name: str) -> None:
        if name in self.infos:
            return
        info = self.known.get(name)
        path = self.source / name
        if info is None:
            raise CheckpointStorageError(
                f"shared file {path} is referenced but no complete checkpoint of the job lists it "
                "(deleted by retention, or never written)",
                path,
            )
        why = missing_or_truncated(path, info)
        if why is not None:
            raise CheckpointStorageError(f"cannot reference {why}", path)
        if self.directory != self.source:  # a savepoint: a verified copy of its own
            self._mkdir()
            target = self.directory / name
            self.written.append(target)
            _copy_verified(path, target, info)
        self.infos[name] = info

    def discard(self) -> None:
        for path in self.written:
            try:
                path.unlink(missing_ok=True)
            except OSError as e:
                _log.warning("could not remove shared file %s of a failed checkpoint write: %s", path, e)


def _stat_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError as e:
        raise CheckpointStorageError(f"cannot read shared file source {path}: {e}", path) from e


def _link_or_copy(source: Path, target: Path) -> None:
    tmp = tmp_name(target)
    try:
        try:
            os.link(source, tmp)
        except OSError as e:
            _log.info("cannot hard-link %s into the checkpoint (%s); copying it", source, e)
            with open(source, "rb") as src, open(tmp, "xb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        fsync_file(tmp)
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise CheckpointStorageError(f"cannot write shared file {target} from {source}: {e}", target) from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _copy_verified(source: Path, target: Path, info: SharedInfo) -> None:
    tmp = tmp_name(target)
    digest = hashlib.sha256()
    size = 0
    try:
        with open(source, "rb") as src, open(tmp, "xb") as dst:
            while chunk := src.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
                dst.write(chunk)
            dst.flush()
            os.fsync(dst.fileno())
        _check(source, info, size, digest.hexdigest())
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise CheckpointStorageError(f"cannot copy shared file {source} to {target}: {e}", target) from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def collect_garbage(directory: Path, keep: Iterable[str]) -> list[str]:
    """Delete every file in a job's shared ``directory`` not named in ``keep``; their names."""
    keep = set(keep)
    try:
        children = list(directory.iterdir())
    except FileNotFoundError:
        return []
    deleted = []
    for child in children:
        if child.name not in keep and not child.is_dir():
            child.unlink(missing_ok=True)
            deleted.append(child.name)
    return sorted(deleted)


class MemorySharedFiles:
    """Without checkpoint storage, the shared files of the latest checkpoint kept in memory are
    hard links (or copies) in a temporary directory, so a failover restores them after the tasks
    removed their own files.

    Two steps, so that the checkpoint kept and its files change together: :meth:`add` links or
    writes a new checkpoint's files (in a worker thread; the kept checkpoint's files are left
    alone), then :meth:`commit`, on the loop together with the entries the writer keeps, makes
    them the kept files and returns those no longer needed. A failover while ``add`` runs (the
    job failed mid-write) restores the previous checkpoint with all its files; the new files that
    ``add`` left behind are in no kept checkpoint, and the next :meth:`commit` returns them too
    (a long-running job that fails over many times does not collect them until it ends)."""

    def __init__(self) -> None:
        self.directory: Path | None = None
        self._files: dict[str, Path] = {}

    def add(self, shared: dict[str, Any]) -> dict[str, Path]:
        """Link (or copy, or write) the new files of a checkpoint into the directory."""
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="streamflow-memory-checkpoint-"))
            weakref.finalize(self, shutil.rmtree, str(self.directory), True)
        added: dict[str, Path] = {}
        for name, data in shared.items():
            path = self.directory / name
            if isinstance(data, HashedFile):
                data = data.path
            if not path.exists():
                if isinstance(data, Path):
                    try:
                        os.link(data, path)
                    except OSError as e:
                        _log.info("cannot hard-link %s to keep it in memory (%s); copying it", data, e)
                        shutil.copyfile(data, path)
                else:
                    path.write_bytes(data)
            added[name] = path
        return added

    def commit(self, added: dict[str, Path], references: list[str]) -> list[Path]:
        """Keep ``added`` and the ``references`` (files kept already) as the checkpoint's files;
        the files no kept checkpoint needs any more, for the caller to remove."""
        files = {name: self.path(name) for name in references}
        files.update(added)
        # every file of the directory that ``files`` does not name: the previous checkpoint's
        # that this one dropped, and what a failed ``add`` left (writes are sequential, so no
        # other ``add`` is under way but one of a failed attempt, whose files are in no
        # checkpoint either); a listing of about one checkpoint's files, on the loop
        directory = self.directory
        stale = [] if directory is None else [directory / n for n in os.listdir(directory) if n not in files]
        self._files = files
        return stale

    @staticmethod
    def remove(stale: list[Path]) -> None:
        """Delete the files :meth:`commit` returned (a worker thread's job)."""
        for path in stale:
            path.unlink(missing_ok=True)

    def path(self, name: str) -> Path:
        try:
            return self._files[name]
        except KeyError:
            raise FileNotFoundError(f"the checkpoint kept in memory has no shared file {name!r}") from None
