"""Checkpoint storage wrappers for fault tests: a slow disk and a full one.

Pass one to ``env.get_checkpoint_config().set_checkpoint_storage(...)``.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path
from typing import Any

from ..checkpoint.storage import CheckpointStorageError, FileSystemCheckpointStorage


class SlowStorage(FileSystemCheckpointStorage):
    """Sleeps ``delay_s`` (wall clock: it stands for a slow device) before every file write
    and every directory fsync; ``writing`` is set while a checkpoint is being written."""

    def __init__(self, directory: str | Path, delay_s: float = 0.05, *, retain: int = 3) -> None:
        super().__init__(directory, retain=retain)
        self.delay_s = delay_s
        self.writing = threading.Event()

    def write_checkpoint(self, *args: Any, **kwargs: Any) -> Path:
        self.writing.set()
        try:
            return super().write_checkpoint(*args, **kwargs)
        finally:
            self.writing.clear()

    def _atomic_write(self, path: Path, data: bytes | bytearray | memoryview) -> None:
        time.sleep(self.delay_s)
        super()._atomic_write(path, data)

    def _fsync_dir(self, path: Path) -> None:
        time.sleep(self.delay_s)
        super()._fsync_dir(path)


class FullDiskStorage(FileSystemCheckpointStorage):
    """Every file write fails with ``OSError(ENOSPC)``, as on a full disk."""

    def _atomic_write(self, path: Path, data: bytes | bytearray | memoryview) -> None:
        error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        raise CheckpointStorageError(f"cannot write {path}: {error}", path) from error
