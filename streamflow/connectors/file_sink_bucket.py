"""One bucket of a file sink subtask: its in-progress part file and its pending ones (Flink's
``FileWriterBucket``); the protocol that drives the buckets is in ``file_sink.py``.

A subtask writes at most one in-progress part file per bucket (Flink's ``Buckets``: a bucket
per id, each with its own rolling). A bucket is a directory (``file_buckets.py``); its part files
are a :class:`.PartFiles` of that directory. Its state in a checkpoint is
``{"pending": [[checkpoint_id, [name, ...]], ...], "in_progress": None | {"name", "length",
"created_ms"}}``. The blocking methods (``roll``, ``roll_or_sync``, ``commit_up_to``) are run
in a worker thread by the operator; ``append`` and ``open`` stay on the loop (a buffered write,
an open).
"""

from __future__ import annotations

import logging
import os
from contextlib import suppress
from typing import IO, Any

from .file_sink_parts import INPROGRESS, PENDING, FileSinkError, PartFiles, fsync_dir, io_errors
from .file_sink_policy import PartFileInfo, RollingPolicy

log = logging.getLogger("streamflow.connectors.file_sink")


class Bucket:
    """The part files of one bucket (``bucket_id``, a directory) of one subtask."""

    def __init__(self, bucket_id: str, parts: PartFiles) -> None:
        self.id, self.parts = bucket_id, parts
        self.file: IO[bytes] | None = None
        self.current: str | None = None  # visible name of the in-progress file
        self.size = self.created_ms = self.last_write_ms = 0
        self.unassigned: list[str] = []  # pending files not yet in a checkpoint
        self._rolled_sizes: dict[str, int] = {}  # their sizes (compaction packs by size)
        self.pending: dict[int, list[str]] = {}  # checkpoint id -> pending files

    def info(self) -> PartFileInfo:
        return PartFileInfo(self.size, self.created_ms, self.last_write_ms)

    @property
    def active(self) -> bool:
        """Whether it has anything open or uncommitted (an inactive bucket is dropped)."""
        return self.file is not None or bool(self.unassigned) or bool(self.pending)

    # -- writing -------------------------------------------------------------
    def open(self, name: str, now: int) -> IO[bytes]:
        path = self.parts.path(name, INPROGRESS)
        with io_errors(f"open {path}"):
            f = self.file = open(path, "ab")  # noqa: SIM115 (held across batches)
        self.current, self.size, self.created_ms, self.last_write_ms = name, 0, now, now
        return f

    def append(self, data: bytes, now: int) -> None:
        f = self.file
        assert f is not None
        with io_errors(f"write {f.name}"):
            f.write(data)
        self.size += len(data)
        self.last_write_ms = now

    def roll(self) -> None:
        """Close the in-progress file: flush, fsync, close, rename to pending."""
        f, name = self.file, self.current
        if f is None or name is None:
            return
        src, dst = self.parts.path(name, INPROGRESS), self.parts.path(name, PENDING)
        with io_errors(f"flush {src}"):
            f.flush()
            os.fsync(f.fileno())
        self.close_handle()
        with io_errors(f"rename {src} to {dst}"):
            os.rename(src, dst)
        fsync_dir(self.parts.base)
        self.unassigned.append(name)
        self._rolled_sizes[name] = self.size

    def roll_or_sync(self, policy: RollingPolicy) -> None:
        """At a checkpoint: roll if the policy says so, else make the written bytes durable."""
        f = self.file
        if f is None:
            return
        if policy.should_roll_on_checkpoint(self.info()):
            self.roll()
        else:
            with io_errors(f"flush {f.name}"):
                f.flush()
                os.fsync(f.fileno())

    def take_rolled(self) -> list[tuple[str, int]]:
        """The files rolled since the last call, with their sizes (compaction packs them
        instead of this bucket committing them)."""
        names, self.unassigned = self.unassigned, []
        return [(n, self._rolled_sizes.pop(n)) for n in names]

    def close_handle(self) -> None:
        f, self.file, self.current = self.file, None, None
        if f is not None:  # never fails a job: unflushed in-progress data is discarded on restart
            with suppress(OSError):
                f.close()

    # -- checkpoints ---------------------------------------------------------
    def snapshot(self, checkpoint_id: int) -> dict[str, Any]:
        if self.unassigned:
            self.pending.setdefault(checkpoint_id, []).extend(self.unassigned)
            self.unassigned, self._rolled_sizes = [], {}
        in_progress = None
        if self.file is not None and self.current is not None:
            in_progress = {"name": self.current, "length": self.size, "created_ms": self.created_ms}
        return {
            "pending": [[cid, list(names)] for cid, names in sorted(self.pending.items())],
            "in_progress": in_progress,
        }

    def committable(self, checkpoint_id: int) -> list[int]:
        return [cid for cid in sorted(self.pending) if cid <= checkpoint_id]

    def commit_up_to(self, checkpoint_id: int) -> None:
        """Commit the pending files of every checkpoint up to ``checkpoint_id`` (blocking)."""
        done = self.committable(checkpoint_id)
        self.parts.commit([n for cid in done for n in self.pending[cid]], checkpoint_id)
        for cid in done:
            del self.pending[cid]

    def commit_all(self) -> None:
        """End of input without checkpointing: everything rolled becomes visible (blocking)."""
        names = [n for cid in sorted(self.pending) for n in self.pending[cid]] + self.unassigned
        self.parts.commit(names, 0)
        self.pending, self.unassigned, self._rolled_sizes = {}, [], {}

    # -- restore -------------------------------------------------------------
    def recover(self, name: str, length: int, created_ms: int, now: int) -> bool:
        """Resume this subtask's in-progress file at its committed length (Flink's recoverable
        writer); False when it was committed since (a restore of an older checkpoint)."""
        parts = self.parts
        path, pending = parts.path(name, INPROGRESS), parts.path(name, PENDING)
        if not os.path.lexists(path) and os.path.lexists(pending):
            with io_errors(f"reopen {pending} as {path}"):  # rolled after the checkpoint, before the crash
                os.rename(pending, path)
        if not os.path.lexists(path):
            if os.path.lexists(parts.path(name)):
                # only a restore from a checkpoint older than the committed output (an explicit
                # fallback or an old savepoint) gets here: its records after that checkpoint are
                # written again, as with any restore of an older checkpoint
                log.warning(
                    "file sink: in-progress file %s of the restored checkpoint was committed since "
                    "(the checkpoint is older than the committed output): writing to a new part "
                    "file; records after that checkpoint will appear twice",
                    path,
                )
                return False
            raise FileSinkError(f"file sink: in-progress file {path} of the restored checkpoint is missing")
        parts.truncate(path, length)
        with io_errors(f"open {path}"):
            self.file = open(path, "ab")  # noqa: SIM115 (held across batches)
        self.current, self.size, self.created_ms, self.last_write_ms = name, length, created_ms, now
        return True
