"""A FileSink subtask's compactions: the per-bucket state machines of ``file_compaction.py``
driven through the sink's checkpoints, and the file work they ask for (compacting a group,
publishing its compacted file) in worker threads.

The operator (``file_sink.py``) calls :meth:`SinkCompaction.prepare` at every pre-barrier step
(on the loop: it only moves names), :meth:`snapshot` in ``snapshot_state``, :meth:`complete`
when a checkpoint completes (publishes in a thread, then starts the compactions it allows),
:meth:`end_of_input` in ``finish`` and :meth:`restore` in ``initialize_state``. A compaction
runs as an asyncio task around a worker thread (at most ``num_compact_threads`` at once); its
end is recorded on the loop, so the state machines are only ever touched there. A compaction
that fails fails the job at the sink's next call (a batch, a checkpoint step, the end of input)
with the error naming the group; the restart compacts the group again from the checkpoint.
Closing the sink (also on a failure) waits for the compaction threads still running
(:meth:`SinkCompaction.stop`), so a restore never races one of them for the same files.
"""

from __future__ import annotations

import asyncio
import logging
import os
from contextlib import suppress
from typing import Any

import anyio

from .. import _faults as faults
from .file_compaction import BucketCompaction, FileCompactor, FileCompactStrategy, group_names
from .file_sink_bucket import Bucket
from .file_sink_parts import COMPACTED, INPROGRESS, PENDING, FileSinkError, PartFiles, fsync_dir, io_errors

log = logging.getLogger("streamflow.connectors.file_sink")


def compact_group(parts: PartFiles, group: list[str], compactor: FileCompactor, checkpoint_id: int) -> None:
    """Commit the group's inputs (hidden) and write its compacted file as pending (blocking,
    idempotent: a restore may run it again)."""
    target = COMPACTED + group[0]
    if os.path.lexists(parts.path(target)):
        # published already: only a restore of a checkpoint older than the output gets here
        log.warning(
            "file sink: compacted file %s was published since the restored checkpoint (it is "
            "older than the committed output); not compacting its group again",
            parts.path(target),
        )
        return
    inputs = []
    for name in group:
        pending, hidden = parts.path(name, PENDING), parts.hidden(name)
        if os.path.lexists(pending):
            with io_errors(f"commit {pending} to {hidden} for compaction"):
                os.replace(pending, hidden)
        elif not os.path.lexists(hidden):
            raise FileSinkError(
                f"file sink: file {pending} to compact is missing (and {hidden} does not exist)"
            )
        inputs.append(hidden)
    fsync_dir(parts.base)
    if faults.ARMED:
        faults.point("compact", checkpoint_id)
    tmp, out = parts.path(target, INPROGRESS), parts.path(target, PENDING)
    with io_errors(f"compact {len(inputs)} files into {tmp}"), open(tmp, "wb") as f:
        compactor.compact(inputs, f)
        f.flush()
        os.fsync(f.fileno())
    with io_errors(f"rename {tmp} to {out}"):
        os.replace(tmp, out)
    fsync_dir(parts.base)


def publish_groups(parts: PartFiles, groups: list[list[str]], checkpoint_id: int) -> None:
    """Make each group's compacted file visible, then delete its inputs (blocking, idempotent)."""
    for group in groups:
        parts.commit([COMPACTED + group[0]], checkpoint_id)
        for name in group:
            with io_errors(f"remove compacted input {parts.hidden(name)}"), suppress(FileNotFoundError):
                os.remove(parts.hidden(name))
    if groups:
        fsync_dir(parts.base)


def restore_without_compaction(parts: PartFiles, states: list[dict[str, Any]]) -> None:
    """A checkpoint taken with compaction restored into a sink without it (blocking): its
    compacted groups are published, its other files become visible as they are."""
    compacted = [g for s in states for _cid, gs in s["compacted"] for g in gs]
    publish_groups(parts, compacted, 0)
    published = {n for g in compacted for n in g}
    names = [n for s in states for n in group_names(s) if n not in published]
    if names:
        log.warning("file sink: compaction is off; publishing %d uncompacted files of the restored "
                    "checkpoint as they are in %s", len(names), parts.base)  # fmt: skip
        parts.commit_hidden(names)


class SinkCompaction:
    """Every bucket's compaction of one sink subtask (see the module doc)."""

    def __init__(self, strategy: FileCompactStrategy, compactor: FileCompactor, parts_of: Any) -> None:
        self.strategy, self.compactor, self._parts_of = strategy, compactor, parts_of
        self.buckets: dict[str, BucketCompaction] = {}
        threads = max(1, min(strategy.num_compact_threads, os.cpu_count() or 1))
        self._limiter = anyio.CapacityLimiter(threads)
        self._tasks: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None
        self._stopped = False  # closing: compactions not yet in a thread do not start
        self._to_start: list[tuple[str, list[str]]] = []  # restored groups, started by open()

    def of(self, bucket_id: str) -> BucketCompaction:
        c = self.buckets.get(bucket_id)
        if c is None:
            c = self.buckets[bucket_id] = BucketCompaction(self.strategy)
        return c

    def check(self) -> None:
        """Raise the first compaction failure (the job fails; its restart compacts again)."""
        if self._failure is not None:
            raise self._failure

    # -- the checkpoint's steps ------------------------------------------------
    def prepare(self, checkpoint_id: int, buckets: dict[str, Bucket]) -> None:
        """Pack the files every bucket rolled since the last checkpoint, then the checkpoint
        trigger; fired groups become this checkpoint's requests (on the loop)."""
        self.check()
        self._pack_rolled(buckets)
        for c in self.buckets.values():
            c.prepare(checkpoint_id)

    def _pack_rolled(self, buckets: dict[str, Bucket]) -> None:
        for bucket_id, bucket in buckets.items():
            for name, size in bucket.take_rolled():
                self.of(bucket_id).pack(name, size)

    def snapshot(self, bucket_id: str) -> dict[str, Any] | None:
        c = self.buckets.get(bucket_id)
        return c.snapshot() if c is not None and c.active else None

    async def complete(self, checkpoint_id: int) -> None:
        """Publish what ``checkpoint_id`` holds (in a thread), then start the compactions of the
        groups it recorded; drop the buckets left with nothing."""
        self.check()
        for bucket_id, c in list(self.buckets.items()):
            to_compact, to_publish = c.complete(checkpoint_id)
            if to_publish:
                parts = self._parts_of(bucket_id)
                await anyio.to_thread.run_sync(publish_groups, parts, to_publish, checkpoint_id)
            for group in to_compact:
                self._start(bucket_id, group, checkpoint_id)
            if not c.active:
                del self.buckets[bucket_id]

    async def end_of_input(self, buckets: dict[str, Bucket], publish: bool) -> None:
        """Compact every packed file now and wait (Flink's ``endInput``); without checkpointing
        (``publish``) make the compacted files visible at once."""
        self._pack_rolled(buckets)
        for bucket_id, c in self.buckets.items():
            for group in c.end_of_input():
                self._start(bucket_id, group, 0)
        await self.wait()
        if publish:
            await self.publish_all()

    async def publish_all(self) -> None:
        """Without checkpointing, after :meth:`end_of_input`: every compacted file becomes visible."""
        for bucket_id, c in list(self.buckets.items()):
            groups = c.publish_all()
            if groups:  # idempotent: a retry after a failure part way publishes the rest
                await anyio.to_thread.run_sync(publish_groups, self._parts_of(bucket_id), groups, 0)
            del self.buckets[bucket_id]

    async def wait(self) -> None:
        while self._tasks:
            await asyncio.wait(set(self._tasks))
        self.check()

    # -- compactions -----------------------------------------------------------
    def start_restored(self) -> None:
        for bucket_id, group in self._to_start:
            self._start(bucket_id, group, 0)
        self._to_start = []

    def _start(self, bucket_id: str, group: list[str], checkpoint_id: int) -> None:
        task = asyncio.get_running_loop().create_task(self._compact(bucket_id, group, checkpoint_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _compact(self, bucket_id: str, group: list[str], checkpoint_id: int) -> None:
        parts = self._parts_of(bucket_id)
        try:
            ran = await anyio.to_thread.run_sync(self._compact_unless_stopped, parts, group,
                                                 checkpoint_id, limiter=self._limiter)  # fmt: skip
        except Exception as exc:
            exc.add_note(f"streamflow: file sink compaction of {group} in {parts.base} failed")
            log.error("file sink: compaction of %d files in %s failed: %r", len(group), parts.base, exc)
            if self._failure is None:
                self._failure = exc
            return
        if ran:
            self.of(bucket_id).done(group)

    def _compact_unless_stopped(self, parts: PartFiles, group: list[str], checkpoint_id: int) -> bool:
        if self._stopped:  # queued behind the thread limit when the sink closed
            return False
        compact_group(parts, group, self.compactor, checkpoint_id)
        return True

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def stop(self) -> None:
        """Let no queued compaction start and wait until the running ones ended: a thread
        cannot be stopped mid-copy, and cancelling its task would leave it running while the
        next attempt's restore moves the same files. Shielded: it runs while a failed job is
        being cancelled."""
        self._stopped = True
        running = set(self._tasks)
        if not running:
            return
        log.info("file sink: waiting for %d compactions to end before closing", len(running))
        with anyio.CancelScope(shield=True):
            await asyncio.wait(running)

    # -- restore ---------------------------------------------------------------
    def restore(self, bucket_id: str, states: list[dict[str, Any]]) -> set[str]:
        """A bucket's compaction from a completed checkpoint's states (blocking: where the job is
        built): publishes the compacted groups it holds, keeps the rest for :meth:`start_restored`.
        Returns the part file names to keep."""
        parts = self._parts_of(bucket_id)
        c, to_compact, to_publish = BucketCompaction.restored(
            self.strategy, states, lambda name: _size(parts, name)
        )
        publish_groups(parts, to_publish, 0)
        if c.active:
            self.buckets[bucket_id] = c
        self._to_start.extend((bucket_id, g) for g in to_compact)
        return {n for g in to_compact for n in g} | set(c.packing) | {n for g in c.collecting for n in g}


def _size(parts: PartFiles, name: str) -> int:
    """The size of a packed file the restored checkpoint names: pending, or committed (hidden).

    A packed file is not in any group of a completed checkpoint, yet it may have been committed
    since: the end of input compacts every packed file at once (Flink's
    ``CompactorOperator.endInput``), committing its inputs, and a failure before the final
    checkpoint completes (another subtask failing, a fault in that compaction) restores the
    checkpoint that still names them packed. Committing is idempotent in Flink
    (``commitAfterRecovery`` of a pending file already committed); here the committed input
    holds the same bytes, stays until a published group deletes it (only once a later checkpoint
    completed that names it in its compacted groups, not as packed), and :func:`compact_group`
    takes it as it is. Neither form: the file is gone, the restore fails naming both."""
    pending, committed = parts.path(name, PENDING), parts.hidden(name)
    for path in (pending, committed):
        try:
            return os.path.getsize(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise FileSinkError(f"file sink: cannot read the size of {path}: {exc}") from exc
    raise FileSinkError(
        f"file sink: packed file {pending} of the restored checkpoint is missing (and {committed}, "
        "its committed form, does not exist)"
    )
