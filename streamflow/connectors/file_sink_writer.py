"""The writer of a :class:`~streamflow.connectors.file_sink.FileSink`: one subtask's part files
(Flink's ``FileWriter``); the sink itself and its builder are in ``file_sink.py``.

Theory of operation
-------------------
Modelled on Flink's ``FileSink`` (apache/flink flink-connector-files
``.../file/sink/FileSink.java``, ``writer/FileWriterBucket.java``,
``committer/FileCommitter.java``, and the local ``RecoverableWriter``): a part
file moves through three states, and only the last one is visible to readers
(who skip names starting with ``.``)::

    .{name}.inprogress  --(roll: flush, fsync, close, rename)-->  .{name}.pending
    .{name}.pending     --(checkpoint complete: rename)------->  {name}

with ``name = {part_prefix}-{uid}-{subtask}-{n}{part_suffix}`` (``OutputFileConfig``), in the
directory of its *bucket* (``file_buckets.py``): the base path itself (the default,
``base_path_bucket_assigner()``) or a sub-directory named by the processing time
(``date_time_bucket_assigner(format_str, timezone_id)``). As Flink's ``Buckets``, a subtask keeps
one in-progress part file per bucket (``file_sink_bucket.py``), each rolled by the rolling policy
on its own; the part counter ``n`` is the subtask's, shared by its buckets.
Every rename is followed by an fsync of the directory, so a state reached is durable.
Flink's names are ``{part_prefix}-{random id}-{n}{part_suffix}``, the id drawn anew for every
bucket and restore (``FileWriterBucket.assembleNewPartPath``), and Flink leaves a crash's orphan
in-progress files behind. streamflow keeps a deterministic name on purpose: the sink ``uid`` and
subtask in it are what let a restore delete the orphans of exactly its own subtasks (files made
after the last checkpoint are named in no state), validate restored names, and continue the
numbering after the committed parts; readers still match ``{part_prefix}-*``.

**Off the event loop**: the slow file operations (flush + fsync, rolls, commits: renames and
directory fsyncs) run in a worker thread (``anyio.to_thread``), never in one block on the
caller's loop; the task awaits them, so nothing else calls into the operator meanwhile and its
state needs no lock. Appending a batch to the open file stays on the loop (a buffered write).
Restore (``initialize_state``, once when the job is built) runs where the job is built.

* ``process_batch`` asks the bucket assigner for the batch's bucket (once per batch, from the
  operator's clock), encodes the whole batch in one join and appends it to that bucket's
  in-progress file, opened lazily (a new bucket's directory is made first, in a thread).
  Before each batch the rolling policy (``file_sink_policy.py``) may roll the file (size:
  ``should_roll_on_event``, as Flink's ``FileWriterBucket.write``); a batch that would take
  the file past its size is written record by record, the policy asked before each (Flink
  asks before every element), so part files split where
  Flink's do; only a processing-time timer every ``bucket_check_interval`` ms rolls by
  time, in any bucket (age, inactivity), as Flink's ``onProcessingTime``.
  A rolled file is pending at once and joins the next checkpoint.
* ``prepare_snapshot_pre_barrier(n)`` + ``snapshot_state(n)`` are the pre-commit. The
  in-progress file rolls if the
  policy says so at a checkpoint (``OnCheckpointRollingPolicy`` always, the
  default policy only when it is too large); otherwise it is flushed and
  fsynced and **stays in progress**, its committed length recorded (Flink's
  resumable). Both happen in ``prepare_snapshot_pre_barrier`` (in a thread); ``snapshot_state``
  only records, unless it is called without it (then it does them itself). Every pending
  file not yet assigned is recorded under ``n``.
  Every bucket does this. State: ``{"next_part": int, "pending": [[checkpoint_id, [name, ...]],
  ...], "in_progress": None | {"name", "length", "created_ms"}}`` for the base path's bucket,
  plus ``"buckets": {bucket_id: {"pending": ..., "in_progress": ...}}`` for the others (absent
  without them: a sink without buckets keeps its state format).
* ``notify_checkpoint_complete(n)`` commits the pending files of every
  checkpoint <= n in every bucket (a completed checkpoint subsumes older ones); a bucket
  left with nothing open or pending is dropped (Flink's inactive bucket). Committing is
  idempotent: a pending file that is missing while its visible name exists was committed.
* ``notify_checkpoint_aborted(n)`` keeps n's files, as Flink does: the next
  completed checkpoint subsumes n and commits them.
* ``initialize_state(restored)`` gets the state of a *completed* checkpoint (or
  None). Every name in it is validated first (a string matching this sink's own
  naming pattern for that subtask: no path separator, no ``..``, nothing outside
  the output directory; every bucket id a sub-directory of the base path), so a crafted
  checkpoint cannot make the sink move or truncate other files. Then, in every bucket, it
  commits the pending files (the notification may have been lost in a crash), truncates
  the in-progress file to its recorded length (the bytes after it belong to records the
  sources replay) and resumes writing to it; finally it deletes every hidden file of its
  subtasks that the state does not name, in the base path, the restored buckets and (with a
  date-time assigner) every non-hidden directory under the base path (a bucket opened after
  the checkpoint is named in no state). Numbering continues
  at ``next_part``, skipping names taken on disk, so names never repeat across restarts.
* **Rescaling**: at another parallelism, subtask ``i`` takes the states of the
  old subtasks ``j`` with ``j % parallelism == i`` (Flink redistributes the
  writer's list state round-robin): it commits their pending files, and
  *finishes* their in-progress files (truncated to the recorded length, then
  made visible: the checkpoint that recorded them completed). It resumes only
  an in-progress file of its own index.
* ``finish`` (end of input) rolls the in-progress file; without checkpointing (batch mode)
  everything is committed once *every task of the job* has finished (``ctx.job_end``; at once
  outside a job), so a job that fails after some sink subtasks finished, and restarts from
  scratch, does not publish their records twice (Flink's batch failover re-runs no finished
  region: ``BatchExecutionFileSinkITCase``). With checkpointing the final checkpoint
  after ``finish`` pre-commits and its notification commits.
* **Metrics** (``sink_metrics.py``, Flink's ``SinkWriterMetricGroup``): every batch written
  counts its records in ``numRecordsSend``/``numRecordsOut`` and its encoded bytes in
  ``numBytesSend``/``numBytesOut``, once per batch; a batch that fails to encode or write counts
  in ``numRecordsSendErrors``. ``currentSendTime`` stays 0: a buffered file write has no
  acknowledgement to time.
* ``close``/``dispose`` only close handles; they never delete: cleaning
  uncommitted data is the restart's job, which knows what completed.

**Compaction** (``enable_compact(strategy, compactor)``, ``file_compaction.py`` and
``file_sink_compaction.py``): the files a checkpoint's pre-barrier step finds rolled are packed
instead of recorded as pending; a fired group is compacted once its checkpoint completed and its
compacted file published when the next one completes. The bucket's state then holds a
``"compaction"`` entry; a restore validates it (``file_sink_state.py``), publishes what it holds,
compacts its groups again and keeps their files from the clean-up.

Limits: two jobs writing one directory (or one tree, with buckets) must use distinct uids.
Subtasks share the directories but only touch their own files.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import anyio

from ..runtime.operator import StreamOperator
from .file_buckets import bucket_directories, check_bucket_id, make_bucket_directory
from .file_sink_bucket import Bucket
from .file_sink_compaction import SinkCompaction, restore_without_compaction
from .file_sink_parts import INPROGRESS, FileSinkError, PartFiles, io_errors
from .file_sink_policy import PartFileInfo
from .file_sink_state import Taken, validated_state
from .rescale import taken_states
from .sink_metrics import SinkWriterMetrics

if TYPE_CHECKING:
    from .file_sink import FileSink

__all__ = ["FileSinkOperator"]


class FileSinkOperator(StreamOperator):
    """One subtask of a :class:`FileSink` (see the module docstring)."""

    def __init__(self, name: str, sink: FileSink) -> None:
        super().__init__(name)
        self.sink = sink
        self.base = sink.base_path
        self.next_part = 0
        self._buckets: dict[str, Bucket] = {}  # the active buckets
        self._parts: dict[str, PartFiles] = {}
        self._timer_armed = False
        self._ended = False
        self._synced_for: int | None = None  # the checkpoint prepare_snapshot_pre_barrier synced for
        self.compaction: SinkCompaction | None = None  # the compactions (enable_compact), or None
        #: Flink's sink writer metrics (numRecordsSend/Out, numBytesSend/Out, errors), counted per
        #: batch written. currentSendTime stays 0: a file write is acknowledged by nothing (it is
        #: a buffered write; durability comes at the checkpoint's fsync, not per write), as
        #: Flink's FileWriter does not set it either.
        self.writer_metrics = SinkWriterMetrics()

    def parts_of(self, bucket_id: str) -> PartFiles:
        """This subtask's part files in bucket ``bucket_id`` (names, states, moves)."""
        parts = self._parts.get(bucket_id)
        if parts is None:
            directory = os.path.join(self.base, bucket_id) if bucket_id else self.base
            parts = PartFiles(directory, self.sink.output_file_config, self.uid, self.ctx.subtask_index)
            self._parts[bucket_id] = parts
        return parts

    def _bucket(self, bucket_id: str) -> Bucket:
        bucket = self._buckets.get(bucket_id)
        if bucket is None:
            bucket = self._buckets[bucket_id] = Bucket(bucket_id, self.parts_of(bucket_id))
        return bucket

    # -- restore -------------------------------------------------------------
    def initialize_state(self, restored: Any | None) -> None:
        """``restored``: an ``OperatorRestore`` (every old subtask's state), a state, or None."""
        self.writer_metrics.attach(self.ctx.metrics)
        with io_errors(f"create directory {self.base}"):
            os.makedirs(self.base, exist_ok=True)
        self._buckets = {}
        sink = self.sink
        if sink.compact_strategy is not None and sink.file_compactor is not None:
            self.compaction = SinkCompaction(sink.compact_strategy, sink.file_compactor, self.parts_of)
        me = self.ctx.subtask_index
        taken = [validated_state(j, s, self.uid, self.parts_of) for j, s in
                 taken_states(restored, me, self.ctx.parallelism, f"file sink {self.uid}")]
        keep: dict[str, set[str]] = {}
        resume: dict[str, tuple[str, int, int]] = {}
        self._restore_compactions(taken, keep)
        for t in taken:
            if t.subtask == me:
                self.next_part = max(self.next_part, t.next_part)
            for bucket_id, (pending, in_progress) in t.buckets.items():
                parts = self.parts_of(bucket_id)
                parts.commit(pending, 0)
                kept = keep.setdefault(bucket_id, set())
                kept.update(pending)
                if in_progress is None:
                    continue
                kept.add(in_progress[0])
                if t.subtask == me and bucket_id not in resume:
                    resume[bucket_id] = in_progress
                else:
                    parts.finish_restored(*in_progress[:2])
        now = self.ctx.clock.now_ms()
        for bucket_id, in_progress in resume.items():
            if not self._bucket(bucket_id).recover(*in_progress, now):
                del self._buckets[bucket_id]
        subtasks = {me} | {t.subtask for t in taken}
        # a bucket opened after the checkpoint is named in no state: a sink with buckets lists
        # every directory under its base path (its own files only are touched); without, the
        # base path and the restored buckets are where its files can be
        dirs = set(keep) | {""}
        if self.sink.bucket_assigner.kind != "base-path":
            dirs.update(bucket_directories(self.base))
        for bucket_id in sorted(dirs):
            used = self.parts_of(bucket_id).clean(keep.get(bucket_id, set()), subtasks)
            self.next_part = max(self.next_part, used + 1)
        self._parts = {bid: p for bid, p in self._parts.items() if bid in self._buckets}
        self._arm_timer()

    def _restore_compactions(self, taken: list[Taken], keep: dict[str, set[str]]) -> None:
        """Every bucket's compaction state of the taken subtasks: published or restored (with
        compaction off, its files made visible as they are); the names it keeps go to ``keep``."""
        by_bucket: dict[str, list[dict[str, Any]]] = {}
        for t in taken:
            for bucket_id, state in t.compactions.items():
                by_bucket.setdefault(bucket_id, []).append(state)
        for bucket_id, states in by_bucket.items():
            if self.compaction is not None:
                keep.setdefault(bucket_id, set()).update(self.compaction.restore(bucket_id, states))
            else:
                restore_without_compaction(self.parts_of(bucket_id), states)

    async def open(self) -> None:
        await super().open()
        if self.compaction is not None:
            self.compaction.start_restored()

    # -- records -------------------------------------------------------------
    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if not records:
            return
        if self.compaction is not None:
            self.compaction.check()
        now = self.ctx.clock.now_ms()
        bucket_id = self.sink.bucket_assigner.bucket_id(now)
        bucket = self._buckets.get(bucket_id)
        if bucket is None:
            if bucket_id:
                try:
                    check_bucket_id(bucket_id, f"file sink {self.uid!r}")
                except ValueError as e:
                    raise FileSinkError(str(e)) from None
                await anyio.to_thread.run_sync(make_bucket_directory, self.base, bucket_id)
            bucket = self._bucket(bucket_id)
        try:
            data = self.sink.encoder.encode_batch(records)
        except Exception as exc:
            self.writer_metrics.failed(len(records))
            raise self._encode_failure(exc, records, bucket) from None
        try:
            nbytes = await self._write(bucket, records, data, now)
        except BaseException:
            self.writer_metrics.failed(len(records))
            raise
        self.writer_metrics.wrote(len(records), nbytes)

    async def _write(self, bucket: Bucket, records: list, data: bytes, now: int) -> int:
        """Write the batch ``records`` (encoded: ``data``) to ``bucket``; returns the bytes written."""
        p = self.sink.rolling_policy
        if bucket.file is not None and p.should_roll_on_event(bucket.info()):  # time: _on_timer only
            await anyio.to_thread.run_sync(bucket.roll)
        grown = PartFileInfo(bucket.size + len(data), bucket.created_ms, now)
        if len(records) > 1 and p.should_roll_on_event(grown):
            return await self._write_rolling(bucket, records, now)  # the batch crosses the roll point
        self._append(bucket, data, now)
        return len(data)

    def _append(self, bucket: Bucket, data: bytes, now: int) -> None:
        if bucket.file is None:
            self._open_new(bucket, now)
        bucket.append(data, now)

    async def _write_rolling(self, bucket: Bucket, records: list, now: int) -> int:
        """Record by record, asking the policy before each one, as Flink's bucket does
        (``shouldRollOnEvent`` before every element): a part file holds the records up to the
        first that takes it past ``part_size``, wherever a batch boundary falls. Only a batch
        that crosses the roll point takes this path (once per part file, at most)."""
        p, encode, written = self.sink.rolling_policy, self.sink.encoder.encode_batch, 0
        for record in records:
            if bucket.file is not None and p.should_roll_on_event(bucket.info()):
                await anyio.to_thread.run_sync(bucket.roll)
            data = encode([record])
            self._append(bucket, data, now)
            written += len(data)
        return written

    def _arm_timer(self) -> None:
        pts = self.ctx.processing_time
        if self._timer_armed or pts is None or not any(b.file is not None for b in self._buckets.values()):
            return
        self._timer_armed = True
        pts.register(self.ctx.clock.now_ms() + self.sink.bucket_check_interval, self._on_timer)

    async def _on_timer(self, _at: int) -> None:
        """Every bucket's in-progress file is asked whether to roll (Flink's ``Buckets.onProcessingTime``)."""
        self._timer_armed = False
        if self._ended:
            return
        now, policy = self.ctx.clock.now_ms(), self.sink.rolling_policy
        for bucket in list(self._buckets.values()):
            if bucket.file is not None and policy.should_roll_on_processing_time(bucket.info(), now):
                await anyio.to_thread.run_sync(bucket.roll)
        self._arm_timer()

    # -- checkpoints ---------------------------------------------------------
    async def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        """Roll or sync every bucket's in-progress file for checkpoint ``checkpoint_id``, in a thread."""
        self._synced_for = None
        if any(b.file is not None for b in self._buckets.values()):
            await anyio.to_thread.run_sync(self._roll_or_sync)
        if self.compaction is not None:
            self.compaction.prepare(checkpoint_id, self._buckets)
        self._synced_for = checkpoint_id

    def _roll_or_sync(self) -> None:
        for bucket in self._buckets.values():
            bucket.roll_or_sync(self.sink.rolling_policy)

    def snapshot_state(self, checkpoint_id: int) -> Any:
        """The base path's bucket at the top level (the state of a sink without buckets), the
        others under ``"buckets"``, by id."""
        if self._synced_for != checkpoint_id:  # not prepared (a direct call): sync here
            self._roll_or_sync()
            if self.compaction is not None:
                self.compaction.prepare(checkpoint_id, self._buckets)
        self._synced_for = None
        buckets = {bid: self._bucket_state(bid, checkpoint_id) for bid in self._state_bucket_ids()}
        state: dict[str, Any] = {
            "subtask": self.ctx.subtask_index,
            "rescalable": True,  # the sink redistributes its own state (see initialize_state)
            "next_part": self.next_part,
            **buckets.pop("", {"pending": [], "in_progress": None}),
        }
        if buckets:
            state["buckets"] = buckets
        return state

    def _state_bucket_ids(self) -> list[str]:
        ids = set(self._buckets)
        if self.compaction is not None:
            ids.update(bid for bid, c in self.compaction.buckets.items() if c.active)
        return sorted(ids)

    def _bucket_state(self, bucket_id: str, checkpoint_id: int) -> dict[str, Any]:
        bucket = self._buckets.get(bucket_id)
        state = bucket.snapshot(checkpoint_id) if bucket is not None else {"pending": [], "in_progress": None}
        compaction = self.compaction.snapshot(bucket_id) if self.compaction is not None else None
        if compaction is not None:
            state["compaction"] = compaction
        return state

    async def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Commit (in a thread) the pending files of every checkpoint up to ``checkpoint_id`` in
        every bucket; a bucket left with nothing open or pending is dropped (Flink's inactive bucket)."""
        for bucket_id, bucket in list(self._buckets.items()):
            if bucket.committable(checkpoint_id):
                await anyio.to_thread.run_sync(bucket.commit_up_to, checkpoint_id)
            if not bucket.active:
                del self._buckets[bucket_id]
                self._parts.pop(bucket_id, None)  # (an hourly bucket a day: nothing kept of old ones)
        if self.compaction is not None:
            await self.compaction.complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Keep the files: the next completed checkpoint subsumes this one and commits them."""

    async def finish(self) -> None:
        self._ended = True
        for bucket in self._buckets.values():
            await anyio.to_thread.run_sync(bucket.roll)
        if self.compaction is not None:  # compact everything now; published as below
            await self.compaction.end_of_input(self._buckets, publish=False)
        if self.ctx.checkpointing:
            return  # the final checkpoint after finish() pre-commits, its notification commits
        if self.ctx.job_end is None:
            await self._publish_all()
        else:  # once the whole job has finished: a restart of a failed job re-writes everything
            self.ctx.job_end.append(self._publish_all)

    async def _publish_all(self) -> None:
        if self.compaction is not None:
            await self.compaction.publish_all()
        for bucket in self._buckets.values():
            await anyio.to_thread.run_sync(bucket.commit_all)

    async def close(self) -> None:
        self._close_handles()
        if self.compaction is not None:
            await self.compaction.stop()

    def dispose(self) -> None:
        self._close_handles()
        if self.compaction is not None:
            self.compaction.cancel()  # close() waited for them, unless it never ran

    # -- file moves ----------------------------------------------------------
    def _open_new(self, bucket: Bucket, now: int) -> None:
        parts = bucket.parts
        while parts.taken(parts.visible(self.next_part)):
            self.next_part += 1
        name = parts.visible(self.next_part)
        self.next_part += 1
        bucket.open(name, now)
        header = getattr(self.sink.encoder, "header", b"")
        if header:  # a bulk writer's preamble (CSV header): once, at the start of each part file
            bucket.append(header, now)
        self._arm_timer()

    def _close_handles(self) -> None:
        for bucket in self._buckets.values():
            bucket.close_handle()

    def _encode_failure(self, exc: Exception, records: list, bucket: Bucket) -> BaseException:
        """Find the record that does not encode (slow path, on failure only) and name it."""
        parts = bucket.parts
        where = parts.path(bucket.current or parts.visible(self.next_part), INPROGRESS)
        exc.add_note(f"streamflow: file sink {self.sink.encoder.name} encoder failed writing to {where}")
        for record in records:
            try:
                self.sink.encoder.encode_batch([record])
            except Exception:
                return self.failure(exc, record)
        return self.failure(exc)
