"""Working directories of processes that died without removing them (SIGKILL, a crash).

A process names the directories it works in (a RocksDB's working directory, the staging
directory of snapshot children) with its pid; one whose process is gone holds nothing a
checkpoint does not, so the next process that makes one in the same place removes it
(logged, and so is a removal that fails, with its cause).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["pid_alive", "remove_abandoned"]

_log = logging.getLogger(__name__)


def remove_abandoned(
    root: Path, pattern: str, owner: Callable[[Path], int | None], what: str, mine: Path | None = None
) -> list[Path]:
    """Remove the directories ``root.glob(pattern)`` (but ``mine``) whose owner process is gone:
    ``owner(path)`` is its pid, or None for a directory that is not one of ours. ``what`` names
    such a directory in the log. Returns those removed."""
    removed = []
    for path in root.glob(pattern):
        if path == mine:
            continue
        pid = owner(path)
        if pid is None or pid == os.getpid() or pid_alive(pid):
            continue
        _log.info("removing %s, the %s of process %d, which is gone", path, what, pid)

        def failed(_fn: Any, failed_path: str, exc_info: Any, path: Path = path) -> None:
            _log.warning("could not remove %s of %s: %s", failed_path, path, exc_info[1])

        shutil.rmtree(path, onerror=failed)
        removed.append(path)
    return removed


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, another user's
    return True
