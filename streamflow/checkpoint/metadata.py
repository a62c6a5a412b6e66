"""Checkpoint metadata: what a ``_metadata`` file says, and the handle that reads a checkpoint.

``_metadata`` is JSON (orjson): format version, job name, checkpoint id,
timestamp, kind, and per entry its file name, size and sha256; a checkpoint
that needs shared files lists them too (``shared``, format version 2). See
``storage.py`` for how checkpoints are written and ``shared_files.py`` for
shared files.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from streamflow.checkpoint.events import CheckpointType

from . import shared_files
from ._fs import CheckpointStorageError, CorruptCheckpointError, check_entry_name
from .shared_files import SHARED_DIR, SharedInfo, job_key

__all__ = ["FORMAT_VERSION", "FORMAT_VERSION_SHARED", "METADATA_FILE", "CheckpointHandle", "EntryInfo"]

METADATA_FILE = "_metadata"
FORMAT_VERSION = 1
FORMAT_VERSION_SHARED = 2  # a checkpoint that lists shared files (older readers refuse it)
_VERSIONS = (FORMAT_VERSION, FORMAT_VERSION_SHARED)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_log = logging.getLogger(__name__)


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
    shared_info: Mapping[str, SharedInfo] = field(default_factory=dict, repr=False)

    @property
    def entries(self) -> tuple[str, ...]:
        return tuple(self.entry_info)

    @property
    def shared(self) -> tuple[str, ...]:
        """The names of every shared file this checkpoint needs."""
        return tuple(self.shared_info)

    @property
    def shared_dir(self) -> Path:
        """A checkpoint's shared files are its job's (``<directory>/shared/<job key>``); a
        savepoint's are its own (``<savepoint>/shared``)."""
        if self.kind is CheckpointType.SAVEPOINT:
            return self.path / SHARED_DIR
        return self.path.parent / SHARED_DIR / job_key(self.job_name)

    def _shared(self, name: str) -> SharedInfo:
        info = self.shared_info.get(name)
        if info is None:
            msg = f"checkpoint {self.path} lists no shared file {name!r} (shared: {', '.join(self.shared)})"
            raise CheckpointStorageError(msg, self.path)
        return info

    def read_shared(self, name: str) -> bytes:
        """A shared file's bytes, verified against its recorded size and sha256."""
        return shared_files.read_verified(self.shared_dir / name, self._shared(name))

    def shared_path(self, name: str, *, verify: bool = True) -> Path:
        """Where a shared file is, to copy or link it back (never modify it: other checkpoints
        use it too); verified first (its whole content is read) unless ``verify=False``."""
        info = self._shared(name)
        path = self.shared_dir / name
        if verify:
            shared_files.verify_file(path, info)
        return path

    def damaged_shared(self) -> str | None:
        """Why a shared file this checkpoint lists is missing or truncated (a stat each), or None."""
        for info in self.shared_info.values():
            why = shared_files.missing_or_truncated(self.shared_dir / info.name, info)
            if why is not None:
                return why
        return None

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
        """Read every entry and shared file, raising :class:`CorruptCheckpointError` on the
        first mismatch."""
        for name in self.entry_info:
            self.read(name)
        for name in self.shared_info:
            self.shared_path(name)


def try_read_metadata(path: Path, dir_id: int | None) -> CheckpointHandle | None:
    try:
        return read_metadata(path, dir_id)
    except CheckpointStorageError as e:
        _log.debug("ignoring %s: %s", path, e)
        return None


def read_metadata(path: Path, dir_id: int | None) -> CheckpointHandle:
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

    if not isinstance(meta, dict) or meta.get("format_version") not in _VERSIONS:
        raise bad(f"expected an object with format_version {FORMAT_VERSION} or {FORMAT_VERSION_SHARED}")
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
            check_entry_name(info.name)
            check_entry_name(info.file)
        except (TypeError, KeyError, ValueError) as e:
            raise bad(f"invalid entry {raw!r}: {e}") from None
        if type(info.size) is not int or info.size < 0 or not isinstance(info.sha256, str):
            raise bad(f"invalid size or sha256 in entry {raw!r}")
        if not _SHA256.fullmatch(info.sha256) or info.name in infos:
            raise bad(f"bad sha256 or duplicate name in entry {raw!r}")
        infos[info.name] = info
    shared = shared_files.parse_shared(meta.get("shared"), bad, lambda h: bool(_SHA256.fullmatch(h)))
    if bool(shared) != (meta["format_version"] == FORMAT_VERSION_SHARED):
        raise bad(f"format_version {FORMAT_VERSION_SHARED} goes with a non-empty shared list, and only it")
    return CheckpointHandle(cid, path, job, kind, ts, infos, shared)
