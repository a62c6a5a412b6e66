"""Where a subtask's RocksDB lives, and starting and closing a task's RocksDB backends off the
event loop.

Theory of operation
-------------------
Opening a RocksDB (creating its files, fsyncs), restoring one (linking or copying a
checkpoint's files, clipping, ingesting) and closing one (flushing its memtable, removing its
working directory) each take tens of milliseconds of file system work. A job is built in the
caller's event loop, and a microservice that embeds a job must keep being served while the
job starts, restores or restarts (the loop budget: ``runtime/loop_budget.py``). So a job's
RocksDB backends are created without touching the file system (``defer_open``): at build
time, ``initialize_state`` only records what to restore. The task that owns them starts them
before its operators open: :func:`start_all` runs every backend's open and restore in worker
threads at once and waits for all of them
(the task processes nothing before: no operator reads a DB that is not open). A failure
names the DB's path, the cause and the operator subtask, and fails the task (which logs it).
(rocksdict 0.3.29 keeps the GIL through an open or a close, 30-60 ms of fsyncs: while a
thread runs one, the loop thread waits for the GIL, so a hold is one open instead of all of
them in a row; ``bench/rocksdb_open_hold.py --gil``.) At the task's end :func:`close_all`
closes them in worker threads; each backend's lock makes
a close wait for its own thread work still running (an open, a restore, a checkpoint the task
stopped waiting for when it was cancelled).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .rocksdb_setup import PID_MARK, remove_abandoned


def make_working_dir(local_dir: str | None, name_prefix: str) -> Path:
    """A fresh working directory under ``local_dir`` (the system temp dir by default); working
    directories of dead processes there are removed (``rocksdb_setup.remove_abandoned``)."""
    root = Path(local_dir) if local_dir else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    # the owner's pid is in the name, so a process killed right after creating it is
    # still known as its owner (an owner file would leave a window without one)
    prefix = f"streamflow-{name_prefix}-{PID_MARK}{os.getpid()}-"
    mine = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    remove_abandoned(root, mine)
    return mine


async def start_all(backends: Iterable[Any]) -> None:
    """Start (open, restore) every backend not started yet, at once, in worker threads; the
    first failure is raised once all have ended, the others attached as notes."""
    pending = [b for b in backends if getattr(b, "start_pending", False)]
    await _all([b.start() for b in pending], "started")


async def close_all(backends: Iterable[Any]) -> None:
    """Close every backend that closes off the loop, at once."""
    await _all([b.aclose() for b in backends if hasattr(b, "aclose")], "closed")


async def _all(steps: list[Any], what: str) -> None:
    if not steps:
        return
    results = await asyncio.gather(*steps, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        first = errors[0]
        for other in errors[1:]:
            first.add_note(f"streamflow: another RocksDB state backend of the task was not {what}: {other!r}")
        raise first
