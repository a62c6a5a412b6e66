"""A checkpoint directory's layout, and what reading it finds (synchronous I/O; call it
from a thread).

Theory of operation
-------------------
Layout: one directory per checkpoint, ``<directory>/chk-<id>/``, holding one file
per entry (the entry's name is its file name) and a ``_metadata`` file: JSON
(orjson) with the format version, job name, checkpoint id, timestamp, kind and,
per entry, its file name, size and sha256 (``metadata.py``). A savepoint has the
same layout in the directory the user names. Shared files (incremental
checkpoints) live in ``<directory>/shared/<job key>/`` and are listed in the
``_metadata`` of every checkpoint that needs them (``shared_files.py``).

The job's index (``_completed-<hash>.json``, ``job_index.py``) names its latest
completed checkpoint and lists the retained completed ones; the storage writes it
right after a checkpoint's ``_metadata``, as the commit point. A ``chk-<id>`` of the
job with intact ``_metadata`` that the index never listed was written by an attempt
killed before its commit: it is debris, never restored, listed or retained.

Reading: :meth:`CheckpointDirectory.latest_complete` scans ``chk-*``, highest id
first, and returns the first directory whose metadata parses, agrees with the
directory name and matches the job name filter; missing or corrupt metadata is
skipped. :meth:`CheckpointDirectory.restore_point` is the one a job restores: the
latest checkpoint its index names, refused (:class:`DamagedCheckpointError`) when
that one is damaged, unless the user allowed a fallback to an older one. Entry
checksums are verified lazily, on :meth:`CheckpointHandle.read` (or all at once
with :meth:`CheckpointHandle.verify`).

Writing, commit and retention: :class:`~streamflow.checkpoint.storage.FileSystemCheckpointStorage`,
a ``CheckpointDirectory``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from . import job_index
from ._fs import CheckpointStorageError, DamagedCheckpointError
from .metadata import METADATA_FILE, CheckpointHandle, read_metadata, try_read_metadata
from .shared_files import SHARED_DIR, SharedInfo, job_key
from .storages import local_path

__all__ = ["CheckpointDirectory"]

_CHK_DIR = re.compile(r"chk-(\d+)")
_log = logging.getLogger(__name__)


class CheckpointDirectory:
    """The checkpoints under ``directory``, as read; see the module docstring."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

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
        """A named checkpoint or savepoint: its directory, its ``_metadata`` file, or a handle;
        a path or a local ``file:`` URI (Flink hands savepoint paths out as URIs,
        ``file:/tmp/sp``, and resolves the restore path through its file system).

        A relative path that does not exist is also looked up under ``directory``
        (``load("chk-7")``).
        """
        if isinstance(path_or_handle, CheckpointHandle):
            path = path_or_handle.path
        else:
            path = local_path(path_or_handle, "checkpoint or savepoint path")
            if not path.exists() and not path.is_absolute() and (self.directory / path).exists():
                path = self.directory / path
        if path.name == METADATA_FILE and path.is_file():
            path = path.parent
        if not path.is_dir():
            raise CheckpointStorageError(f"no checkpoint or savepoint directory at {path}", path)
        if not (path / METADATA_FILE).is_file():
            held = sorted(p.name for p in path.iterdir() if (p / METADATA_FILE).is_file())
            if held:  # a savepoints' target directory: a savepoint is a directory inside it
                raise CheckpointStorageError(
                    f"{path} is not a checkpoint or savepoint but holds {', '.join(held)}: "
                    "restore from one of them (a savepoint's path is the directory it returned)",
                    path,
                )
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
