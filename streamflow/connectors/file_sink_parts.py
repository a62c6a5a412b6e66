"""A file sink subtask's part files on disk: their names, their three states, and the moves
between them (see ``file_sink.py`` for the protocol that drives them).

A part file is ``.{name}.inprogress`` while written, ``.{name}.pending`` once rolled, and
``{name}`` once committed, with ``name = {part_prefix}-{uid}-{subtask}-{n}{part_suffix}``. With
compaction (``file_compaction.py``) a part file is committed hidden, ``.{name}``, and the
compacted file of its group goes through the same three states as ``compacted-{first name}``. Every
rename is followed by an fsync of the directory, so a state reached is durable. The methods here
are blocking file operations: the operator runs the slow ones in a worker thread.

A name read from a restored checkpoint is trusted only after :meth:`PartFiles.check_name` (this
sink's own pattern for that subtask, no path separator, no ``..``), so a crafted checkpoint cannot
make the sink move, truncate or delete other files.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from .. import _faults as faults
from ..errors import StreamflowError
from .file_sink_policy import OutputFileConfig

COMPACTED = "compacted-"  # the prefix of a compacted file's name (Flink's CompactService)

log = logging.getLogger("streamflow.connectors.file_sink")

INPROGRESS = ".inprogress"
PENDING = ".pending"


class FileSinkError(StreamflowError, OSError):
    """A file sink I/O failure, or a restored state it refuses; the message names the file."""


@contextmanager
def io_errors(what: str) -> Iterator[None]:
    """Turn an OSError into a FileSinkError whose message says what failed on which path."""
    try:
        yield
    except FileSinkError:
        raise
    except OSError as exc:
        raise FileSinkError(f"file sink: cannot {what}: {exc}") from exc


def fsync_dir(path: str) -> None:
    with io_errors(f"fsync directory {path}"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class PartFiles:
    """The part files of one subtask (``subtask``) of the sink ``uid`` in directory ``base``."""

    def __init__(self, base: str, config: OutputFileConfig, uid: str, subtask: int) -> None:
        self.base, self.config, self.subtask = base, config, subtask
        self._uid = re.sub(r"[^A-Za-z0-9._-]", "_", uid)
        stem = f"{config.part_prefix}-{self._uid}-"
        self.pattern = re.compile(re.escape(stem) + r"(\d+)-(\d+)" + re.escape(config.part_suffix))
        """``(subtask, n)`` of this sink's part file names, any subtask."""

    # -- names ---------------------------------------------------------------
    def stem(self, subtask: int | str | None = None) -> str:
        sub = self.subtask if subtask is None else subtask
        return f"{self.config.part_prefix}-{self._uid}-{sub}-"

    def visible(self, n: int) -> str:
        return f"{self.stem()}{n}{self.config.part_suffix}"

    def path(self, name: str, state: str = "") -> str:
        return os.path.join(self.base, f".{name}{state}" if state else name)

    def hidden(self, name: str) -> str:
        """A part file committed for compaction: hidden until its group is published."""
        return os.path.join(self.base, f".{name}")

    def taken(self, name: str) -> bool:
        states = ("", INPROGRESS, PENDING)
        return os.path.lexists(self.hidden(name)) or any(
            os.path.lexists(self.path(n, s)) for n in (name, COMPACTED + name) for s in states
        )

    def check_name(self, name: Any, subtask: int | None, where: str) -> None:
        """Refuse a restored name that is not this sink's part file of ``subtask`` (None: of
        any subtask, as a compaction group may hold files of subtasks taken in a rescale)."""
        match = self.pattern.fullmatch(name) if type(name) is str else None
        if (
            match is None
            or (subtask is not None and int(match.group(1)) != subtask)
            or os.path.basename(name) != name
            or os.path.isabs(name)
            or ".." in name.split(os.sep)
        ):
            raise FileSinkError(
                f"{where} names the part file {name!r}, which is not one of this sink's files "
                f"({self.stem('<subtask>' if subtask is None else subtask)}<n>"
                f"{self.config.part_suffix} in {self.base}): "
                "refusing to restore a checkpoint that would touch other files"
            )

    # -- moves ---------------------------------------------------------------
    def commit(self, names: list[str], checkpoint_id: int) -> None:
        """Rename pending files to their visible names; already-visible ones count as committed."""
        renamed = False
        for name in names:
            src, dst = self.path(name, PENDING), self.path(name)
            src_exists, dst_exists = os.path.lexists(src), os.path.lexists(dst)
            if dst_exists and not src_exists:
                continue  # committed before (a restore or a repeated notification)
            if dst_exists:
                raise FileSinkError(f"file sink: cannot commit {src}: {dst} already exists")
            if not src_exists:
                raise FileSinkError(f"file sink: pending file {src} is missing (and {dst} does not exist)")
            with io_errors(f"commit {src} to {dst}"):
                os.rename(src, dst)
                if faults.ARMED:
                    faults.point("commit", checkpoint_id)
            renamed = True
        if renamed:
            fsync_dir(self.base)

    def commit_hidden(self, names: list[str]) -> None:
        """Compaction turned off: make files the restored checkpoint meant to compact visible as
        they are (pending or committed hidden; already visible ones count as committed)."""
        for name in names:
            dst = self.path(name)
            src = next((p for p in (self.path(name, PENDING), self.hidden(name)) if os.path.lexists(p)), None)
            if src is None:
                if os.path.lexists(dst):
                    continue
                raise FileSinkError(f"file sink: file {self.path(name, PENDING)} to publish is missing")
            with io_errors(f"commit {src} to {dst}"):
                os.rename(src, dst)
        if names:
            fsync_dir(self.base)

    def finish_restored(self, name: str, length: int) -> None:
        """Rescaled: make another subtask's in-progress file visible at its committed length."""
        dst = self.path(name)
        candidates = (self.path(name, INPROGRESS), self.path(name, PENDING))
        src = next((p for p in candidates if os.path.lexists(p)), None)
        if src is None:
            if os.path.lexists(dst):
                return  # finished by an earlier restore of the same checkpoint
            raise FileSinkError(f"file sink: in-progress file {self.path(name, INPROGRESS)} is missing")
        if os.path.lexists(dst):
            raise FileSinkError(f"file sink: cannot finish {src}: {dst} already exists")
        self.truncate(src, length)
        with io_errors(f"commit {src} to {dst}"):
            os.rename(src, dst)
        fsync_dir(self.base)

    def truncate(self, path: str, length: int) -> None:
        with io_errors(f"truncate {path} to {length} bytes"):
            size = os.path.getsize(path)
            if size < length:
                raise FileSinkError(
                    f"file sink: {path} holds {size} bytes, fewer than the {length} its checkpoint committed"
                )
            if size > length:
                log.info("file sink: truncating %s from %d to %d bytes (replayed records follow)",
                         path, size, length)  # fmt: skip
                with open(path, "r+b") as f:
                    f.truncate(length)
                    os.fsync(f.fileno())

    def clean(self, keep: set[str], subtasks: set[int]) -> int:
        """Delete the hidden files of ``subtasks`` the restored state does not name (part files
        in any state, compacted files in progress or pending); returns the highest part number
        of this subtask's visible files, compacted or not (-1: none)."""
        used, removed = -1, False
        with io_errors(f"list directory {self.base}"):
            entries = sorted(os.listdir(self.base))
        for entry in entries:
            hidden = entry.startswith(".")
            name = entry[1:] if hidden else entry
            if hidden and name.endswith((INPROGRESS, PENDING)):
                name = name[: name.rindex(".")]
            match = self.pattern.fullmatch(name.removeprefix(COMPACTED))
            if match is None or int(match.group(1)) not in subtasks:
                continue
            if not hidden:
                if int(match.group(1)) == self.subtask:
                    used = max(used, int(match.group(2)))
            elif name not in keep:
                path = os.path.join(self.base, entry)
                with io_errors(f"remove uncommitted file {path}"), suppress(FileNotFoundError):
                    os.remove(path)
                removed = True
        if removed:
            fsync_dir(self.base)
        return used
