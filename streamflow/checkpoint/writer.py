"""Writing a completed checkpoint: the driver's ``CompleteCheckpoint`` action, carried out.

Theory of operation
-------------------
Once every task acknowledged checkpoint n, the coordinator hands the driver the tasks'
states. :meth:`CheckpointWriter.write` encodes one entry per task (``restore.encode_entry``)
and gathers the shared files the tasks' incremental snapshots produced: a file the latest
completed checkpoint already stores becomes a reference (a finished task's final state is in
every later checkpoint). Then either

* without storage, the entries are kept in memory (the latest completed checkpoint, enough
  for in-process failover), with their shared files in :class:`MemorySharedFiles`; or
* the storage writes the checkpoint atomically in a worker thread. The write is stoppable:
  :meth:`stop_all` asks every write in progress to stop (storage checks between files and
  before ``_metadata``) and awaits each, reporting whether it stopped (its directory is gone)
  or had already made its ``_metadata`` durable (it is a completed checkpoint). The driver's
  ``settle`` uses this so nothing writes behind a cancelled job or a new attempt.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import CheckpointConfig
from .restore import encode_entry
from .shared_files import HashedFile, MemorySharedFiles
from .storage import FileSystemCheckpointStorage


class CheckpointWriter:
    def __init__(
        self,
        job_name: str,
        config: CheckpointConfig,
        storage: FileSystemCheckpointStorage | None,
        parallelism_of: Callable[[str], int],
        max_parallelism_of: Callable[[str], int | None] = lambda _task: None,
    ) -> None:
        self.job_name = job_name
        self.config = config
        self.storage = storage
        self._parallelism_of = parallelism_of
        self._max_parallelism_of = max_parallelism_of
        self.persisted_bytes = 0  # the size of the latest checkpoint written
        self.latest_in_memory: tuple[int, dict[str, bytes]] | None = None
        self.memory_shared = MemorySharedFiles()  # without storage: the latest one's shared files
        self.writes: dict[int, tuple[asyncio.Future[Path], threading.Event]] = {}
        self._stored_shared: set[str] = set()  # shared files the latest completed checkpoint lists

    async def write(
        self, cid: int, states: dict[str, Any], target: str | None, duration_ms: int | None
    ) -> str:
        """Write checkpoint ``cid`` (or a savepoint to ``target``); return its path."""
        entries = {
            f"task-{i}": encode_entry(
                self.config.codec,
                task_id,
                states[task_id],
                self._parallelism_of(task_id),
                self.config.get_records_codec(),
                self._max_parallelism_of(task_id),
            )
            for i, task_id in enumerate(sorted(states))
        }
        shared, references = self._shared_files(states)
        self.persisted_bytes = sum(len(e) for e in entries.values()) + sum(
            _size(d) if isinstance(d, Path) else d.size if isinstance(d, HashedFile) else len(d)
            for d in shared.values()
        )
        timings = {t: task_timings(s) for t, s in states.items()}
        stats = {
            "duration_ms": duration_ms,
            "alignment_ms_max": max((t.get("alignment_ms", 0) for t in timings.values()), default=0),
            "sync_ms_max": max((t.get("sync_ms", 0) for t in timings.values()), default=0),
            "tasks": timings,
        }
        if target is None and self.storage is None:
            loop = asyncio.get_running_loop()
            added = await loop.run_in_executor(None, self.memory_shared.add, shared) if shared else {}
            # the entries and their files become the kept checkpoint together, with no await
            # between (a failover meanwhile restores the previous one, with its files)
            stale = self.memory_shared.commit(added, references)
            self.latest_in_memory = (cid, entries)
            if stale:
                await loop.run_in_executor(None, self.memory_shared.remove, stale)
            return f"memory:chk-{cid}"
        if self.storage is None and references:
            # a savepoint without checkpoint storage: the files it refers to are the ones kept in
            # memory with the latest checkpoint (a storage's references name its own shared
            # directory), so the savepoint takes copies of them as files of its own
            shared = {**shared, **{name: self.memory_shared.path(name) for name in references}}
            references = []
        storage = self.storage or FileSystemCheckpointStorage(Path(target or ".").parent)
        stop = threading.Event()
        write = functools.partial(
            storage.write_checkpoint,
            cid,
            self.job_name,
            entries,
            savepoint_path=target,
            stats=stats,
            should_stop=stop.is_set,
            shared=shared,
            references=references,
        )
        fut = asyncio.get_running_loop().run_in_executor(None, write)
        self.writes[cid] = (fut, stop)
        try:
            path = await asyncio.shield(fut)
        except asyncio.CancelledError:
            raise  # the job ends: the write goes on until stop_all() stops it and awaits it
        except BaseException:
            del self.writes[cid]
            raise
        del self.writes[cid]
        if target is None:
            self._stored_shared = set(shared) | set(references)
        return str(path)

    async def stop_all(self) -> list[tuple[int, Path | Exception]]:
        """Stop every write in progress and await it: (checkpoint id, its path if it completed
        anyway, or the exception that stopped it), in id order."""
        outcomes: list[tuple[int, Path | Exception]] = []
        for cid, (fut, stop) in sorted(self.writes.items()):
            stop.set()
            try:
                outcomes.append((cid, await fut))
            except Exception as exc:
                outcomes.append((cid, exc))
        self.writes.clear()
        return outcomes

    def _shared_files(self, states: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The tasks' shared files: new ones, and references to those an earlier checkpoint stored.
        A new file that the latest completed checkpoint already holds (a finished task's final
        state is in every later checkpoint) becomes a reference."""
        shared: dict[str, Any] = {}
        references: set[str] = set()
        for state in states.values():
            if isinstance(state, dict):
                shared.update(state.get("shared") or {})
                references.update(state.get("refs") or ())
        for name in [n for n in shared if n in self._stored_shared]:
            references.add(name)
            del shared[name]
        return shared, sorted(references - shared.keys())


def task_timings(state: Any) -> dict[str, int]:
    """A task's checkpoint timings, carried next to its state in the acknowledgement."""
    if not isinstance(state, dict):
        return {}
    return {k: int(state[k]) for k in ("alignment_ms", "sync_ms") if k in state}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
