"""File primitives and errors shared by checkpoint storage (``storage.py``, ``shared_files.py``).

Every file is written under a hidden temporary name (``.<name>.<random>.tmp``),
flushed, fsynced and renamed onto its final name, so a final name only ever
holds complete content; the caller fsyncs the directory.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path

from streamflow.errors import StreamflowError

__all__ = [
    "CheckpointStorageError",
    "CheckpointWriteStoppedError",
    "CorruptCheckpointError",
    "DamagedCheckpointError",
    "atomic_write",
    "check_entry_name",
    "check_stop",
    "fsync_dir",
    "fsync_file",
    "hash_file",
    "prepare_savepoint_dir",
    "tmp_name",
]

_BAD_NAME_CHARS = re.compile(r'[/\\:*?"<>|\x00-\x1f]')
_CHUNK = 1 << 20


class CheckpointStorageError(StreamflowError):
    """Reading or writing checkpoint data failed; ``path`` is the file or directory involved."""

    def __init__(self, message: str, path: Path | str) -> None:
        super().__init__(message)
        self.path = Path(path)


class CorruptCheckpointError(CheckpointStorageError):
    """An entry (or shared) file does not match the size or sha256 recorded in ``_metadata``."""


class DamagedCheckpointError(CheckpointStorageError):
    """The job's latest completed checkpoint (or its index) is missing or damaged: refused
    rather than silently restoring an older one or starting fresh."""


class CheckpointWriteStoppedError(CheckpointStorageError):
    """A write was stopped before its ``_metadata`` (the job ended); its directory is gone."""


def check_entry_name(name: object, what: str = "checkpoint entry") -> None:
    if (
        not isinstance(name, str)
        or not name
        or len(name) > 200
        or name[0] in "._"
        or _BAD_NAME_CHARS.search(name)
    ):
        raise ValueError(
            f"invalid {what} name {name!r}: use a non-empty file name without path "
            "separators or control characters, not starting with '.' or '_' (reserved)"
        )


def tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")


def atomic_write(path: Path, data: bytes | bytearray | memoryview) -> None:
    """Temp name, write, flush, fsync, rename; the caller fsyncs the directory."""
    tmp = tmp_name(path)
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


def fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
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


def hash_file(path: Path) -> tuple[int, str]:
    """``(size, sha256 hex)`` of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def check_stop(should_stop: Callable[[], bool] | None, checkpoint_id: int, target: Path) -> None:
    if should_stop is not None and should_stop():
        raise CheckpointWriteStoppedError(
            f"writing checkpoint {checkpoint_id} to {target} was stopped: the job ended", target
        )


def prepare_savepoint_dir(target: Path) -> bool:
    """Make ``target`` ready for a savepoint's files: an existing empty directory, or a new one
    (with its parents); True if it was created here (a failed write then removes it whole, as
    Flink disposes a failed savepoint's location). A file, or a directory holding anything
    (an earlier savepoint), is refused: savepoints never share or overwrite files."""
    created = False
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
            created = True
    except OSError as e:
        raise CheckpointStorageError(f"cannot create savepoint directory {target}: {e}", target) from e
    fsync_dir(target.parent)
    return created
