"""Shared files that a task's snapshot writes after its barrier (incremental checkpoints).

A keyed state backend that checkpoints incrementally captures, at the barrier,
what changed (``capture(checkpoint_id, savepoint)``, awaited by the task right
before its synchronous snapshot) and returns a :class:`SharedUpload`; so does a
heap backend's large full snapshot (its encoded parts become one shared file of
the checkpoint, ``state/full_snapshot.py``). The task
forwards the barrier and goes on processing records while the upload produces
its new shared files (encoding in slices that yield, or naming files to link);
only then does the task acknowledge, with the files and the names of the
earlier shared files its snapshot references. The driver hands both to
``FileSystemCheckpointStorage.write_checkpoint(shared=..., references=...)``.
A restore gives operators ``read_shared``/``shared_path`` to read them back
(``restore.OperatorRestore``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from .shared_files import HashedFile

__all__ = ["JOIN_ON_LOOP_MAX", "SharedUpload", "join_parts", "produce_all"]

JOIN_ON_LOOP_MAX = 1 << 20  # bytes: larger parts are joined in a worker thread


class SharedUpload(Protocol):
    """What one backend's snapshot adds to the checkpoint's shared files."""

    @property
    def references(self) -> frozenset[str]:
        """Shared files of earlier checkpoints this snapshot needs."""
        ...

    async def produce(self) -> Mapping[str, bytes | Path | HashedFile]:
        """The new shared files, by name (bytes, or a file to hard-link or copy: a
        ``HashedFile`` when its writer hashed it as it wrote it)."""
        ...


async def produce_all(
    uploads: Iterable[SharedUpload],
) -> tuple[dict[str, bytes | Path | HashedFile], list[str]]:
    """Every upload's new files, and the references that are not among them (sorted)."""
    shared: dict[str, bytes | Path | HashedFile] = {}
    references: set[str] = set()
    for upload in uploads:
        references |= upload.references
        for name, data in (await upload.produce()).items():
            if name in shared:
                raise ValueError(f"two snapshots of one task write the shared file {name!r}")
            shared[name] = data
    return shared, sorted(references - shared.keys())


async def join_parts(parts: list[bytes]) -> bytes:
    """One file's encoded parts joined: in a worker thread past :data:`JOIN_ON_LOOP_MAX` (a
    join of 25 MB holds the loop ~10 ms; ``bytes.join`` drops the GIL past 1 MiB)."""
    if sum(map(len, parts)) < JOIN_ON_LOOP_MAX:
        return b"".join(parts)
    return await asyncio.to_thread(b"".join, parts)
