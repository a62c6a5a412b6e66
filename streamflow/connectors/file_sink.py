"""An exactly-once row-format file sink with PyFlink's names (``FileSink.for_row_format``).

Theory of operation
-------------------
Modelled on Flink's ``FileSink`` (apache/flink flink-connector-files
``.../file/sink/FileSink.java``, ``writer/FileWriterBucket.java``,
``committer/FileCommitter.java``, and the local ``RecoverableWriter``): a part
file moves through three states, and only the last one is visible to readers
(who skip names starting with ``.``)::

    .{name}.inprogress  --(roll: flush, fsync, close, rename)-->  .{name}.pending
    .{name}.pending     --(checkpoint complete: rename)------->  {name}

with ``name = {part_prefix}-{uid}-{subtask}-{n}{part_suffix}`` (``OutputFileConfig``).
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

* ``process_batch`` encodes the whole batch in one join and appends it to the
  in-progress file, opened lazily. Before each batch the rolling policy
  (``file_sink_policy.py``) may roll the file (size; time); a batch that would take
  the file past its size is written record by record, the policy asked before each
  (Flink asks before every element), so part files split where Flink's do; a processing-time
  timer every ``bucket_check_interval`` ms rolls an idle one (age, inactivity).
  A rolled file is pending at once and joins the next checkpoint.
* ``prepare_snapshot_pre_barrier(n)`` + ``snapshot_state(n)`` are the pre-commit. The
  in-progress file rolls if the
  policy says so at a checkpoint (``OnCheckpointRollingPolicy`` always, the
  default policy only when it is too large); otherwise it is flushed and
  fsynced and **stays in progress**, its committed length recorded (Flink's
  resumable). Both happen in ``prepare_snapshot_pre_barrier`` (in a thread); ``snapshot_state``
  only records, unless it is called without it (then it does them itself). Every pending
  file not yet assigned is recorded under ``n``.
  State: ``{"next_part": int, "pending": [[checkpoint_id, [name, ...]], ...],
  "in_progress": None | {"name", "length", "created_ms"}}``.
* ``notify_checkpoint_complete(n)`` commits the pending files of every
  checkpoint <= n (a completed checkpoint subsumes older ones). Committing is
  idempotent: a pending file that is missing while its visible name exists was committed.
* ``notify_checkpoint_aborted(n)`` keeps n's files, as Flink does: the next
  completed checkpoint subsumes n and commits them.
* ``initialize_state(restored)`` gets the state of a *completed* checkpoint (or
  None). Every name in it is validated first (a string matching this sink's own
  naming pattern for that subtask: no path separator, no ``..``, nothing outside
  the output directory), so a crafted checkpoint cannot make the sink move or
  truncate other files. Then it commits the pending files (the notification may
  have been lost in a crash), truncates the in-progress file to its recorded
  length (the bytes after it belong to records the sources replay) and resumes
  writing to it; finally it deletes every hidden file of its subtasks that the
  state does not name. Numbering continues at ``next_part``, skipping names
  taken on disk, so names never repeat across restarts.
* **Rescaling**: at another parallelism, subtask ``i`` takes the states of the
  old subtasks ``j`` with ``j % parallelism == i`` (Flink redistributes the
  writer's list state round-robin): it commits their pending files, and
  *finishes* their in-progress files (truncated to the recorded length, then
  made visible: the checkpoint that recorded them completed). It resumes only
  an in-progress file of its own index.
* ``finish`` (end of input) rolls the in-progress file; without checkpointing it
  commits everything directly (the output of a bounded job appears when it
  ends, and not at all if it fails). With checkpointing the final checkpoint
  after ``finish`` pre-commits and its notification commits.
* ``close``/``dispose`` only close handles; they never delete: cleaning
  uncommitted data is the restart's job, which knows what completed.

Limits: one directory (no bucket assigner); two jobs writing one directory
must use distinct uids. Subtasks share the directory but only touch their own files.
"""

from __future__ import annotations

import logging
import os
from contextlib import suppress
from dataclasses import dataclass
from functools import cached_property
from typing import IO, Any

import anyio

from ..runtime.operator import StreamOperator
from .base import Sink
from .file_options import BucketAssigner, SinkOptions
from .file_sink_parts import INPROGRESS, PENDING, FileSinkError, PartFiles, fsync_dir, io_errors
from .file_sink_policy import (
    DefaultRollingPolicy,
    Encoder,
    OnCheckpointRollingPolicy,
    OutputFileConfig,
    OutputFileConfigBuilder,
    PartFileInfo,
    RollingPolicy,
)
from .rescale import taken_states

__all__ = [
    "DefaultRollingPolicy",
    "Encoder",
    "FileSink",
    "FileSinkError",
    "FileSinkOperator",
    "OnCheckpointRollingPolicy",
    "OutputFileConfig",
    "OutputFileConfigBuilder",
    "RollingPolicy",
]

log = logging.getLogger(__name__)


class FileSink(Sink):
    """Exactly-once row-format sink: build with ``FileSink.for_row_format(path, encoder)...build()``."""

    def __init__(
        self,
        base_path: str | os.PathLike[str],
        encoder: Encoder,
        output_file_config: OutputFileConfig | None = None,
        rolling_policy: RollingPolicy | None = None,
        bucket_check_interval: int = 60_000,
    ) -> None:
        self.base_path = os.fspath(base_path)
        self.encoder = self._declared_encoder = encoder
        self.output_file_config = output_file_config or OutputFileConfig()
        self.rolling_policy = rolling_policy or RollingPolicy.default_rolling_policy()
        if bucket_check_interval < 1:
            raise ValueError(f"bucket check interval must be >= 1 ms, got {bucket_check_interval}")
        self.bucket_check_interval = bucket_check_interval
        #: where part files go: always the base path (``with_bucket_assigner`` accepts only it)
        self.bucket_assigner = BucketAssigner.base_path_bucket_assigner()

    @staticmethod
    def for_row_format(base_path: str | os.PathLike[str], encoder: Encoder) -> RowFormatBuilder:
        return RowFormatBuilder(base_path, encoder)

    def set_input_type(self, type_info: Any, execution_config: Any) -> None:
        """Flink's InputTypeConfigurable: a typed stream's records are written as their type
        formats them (``Encoder.for_type``); an untyped stream's as ``str(record)``."""
        from ..types.typeinfo import TypeInformation

        if isinstance(type_info, TypeInformation):
            self.encoder = self._declared_encoder.for_type(type_info)
        else:
            self.encoder = self._declared_encoder

    def create_operator(self, name: str) -> StreamOperator:
        return FileSinkOperator(name, self)


class StreamingFileSink(FileSink):
    """PyFlink's legacy ``StreamingFileSink`` (for ``add_sink``): the same exactly-once
    row-format sink as :class:`FileSink` (bulk formats are not implemented)."""

    @staticmethod
    def for_row_format(base_path: str | os.PathLike[str], encoder: Encoder) -> RowFormatBuilder:
        return RowFormatBuilder(base_path, encoder, StreamingFileSink)


class RowFormatBuilder(SinkOptions):
    def __init__(
        self, base_path: str | os.PathLike[str], encoder: Encoder, sink_class: type[FileSink] = FileSink
    ) -> None:
        self._base_path, self._encoder, self._sink_class = base_path, encoder, sink_class
        self._config: OutputFileConfig | None = None
        self._policy: RollingPolicy | None = None
        self._check_interval = 60_000

    def with_output_file_config(self, output_file_config: OutputFileConfig) -> RowFormatBuilder:
        self._config = output_file_config
        return self

    def with_rolling_policy(self, rolling_policy: RollingPolicy) -> RowFormatBuilder:
        self._policy = rolling_policy
        return self

    def with_bucket_check_interval(self, interval: int) -> RowFormatBuilder:
        """How often (ms of processing time) the rolling policy looks at an idle file."""
        self._check_interval = interval
        return self

    def build(self) -> FileSink:
        self._warn_default_bucket_assigner(self._base_path)
        cls = self._sink_class
        return cls(self._base_path, self._encoder, self._config, self._policy, self._check_interval)


@dataclass
class _Taken:
    """One restored subtask state this subtask is responsible for."""

    subtask: int
    next_part: int
    pending: list[str]
    in_progress: tuple[str, int, int] | None  # name, committed length, created ms


class FileSinkOperator(StreamOperator):
    """One subtask of a :class:`FileSink` (see the module docstring)."""

    def __init__(self, name: str, sink: FileSink) -> None:
        super().__init__(name)
        self.sink = sink
        self.base = sink.base_path
        self.next_part = 0
        self._file: IO[bytes] | None = None
        self._current: str | None = None  # visible name of the in-progress file
        self._size = self._created_ms = self._last_write_ms = 0
        self._unassigned: list[str] = []  # pending files not yet in a checkpoint
        self._pending: dict[int, list[str]] = {}  # checkpoint id -> pending files
        self._timer_armed = False
        self._ended = False
        self._synced_for: int | None = None  # the checkpoint prepare_snapshot_pre_barrier synced for

    @cached_property
    def parts(self) -> PartFiles:
        """This subtask's part files (names, states, moves)."""
        return PartFiles(self.base, self.sink.output_file_config, self.uid, self.ctx.subtask_index)

    def _part_info(self) -> PartFileInfo:
        return PartFileInfo(self._size, self._created_ms, self._last_write_ms)

    # -- restore -------------------------------------------------------------
    def initialize_state(self, restored: Any | None) -> None:
        """``restored``: an ``OperatorRestore`` (every old subtask's state), a state, or None."""
        with io_errors(f"create directory {self.base}"):
            os.makedirs(self.base, exist_ok=True)
        self._pending, self._unassigned = {}, []
        me = self.ctx.subtask_index
        taken = [self._validated(j, s) for j, s in
                 taken_states(restored, me, self.ctx.parallelism, f"file sink {self.uid}")]
        keep: set[str] = set()
        resume: tuple[str, int, int] | None = None
        for t in taken:
            self.parts.commit(t.pending, 0)
            keep.update(t.pending)
            if t.subtask == me:
                self.next_part = max(self.next_part, t.next_part)
            if t.in_progress is not None:
                keep.add(t.in_progress[0])
                if t.subtask == me and resume is None:
                    resume = t.in_progress
                else:
                    self.parts.finish_restored(*t.in_progress[:2])
        if resume is not None:
            self._recover(*resume)
        used = self.parts.clean(keep, {me} | {t.subtask for t in taken})
        self.next_part = max(self.next_part, used + 1)

    def _validated(self, subtask: int, state: Any) -> _Taken:
        """Parse one restored state, refusing any name that is not this sink's own part file."""
        where = f"file sink {self.uid!r}: restored state of subtask {subtask}"
        try:
            next_part = state["next_part"]
            pending = [name for _cid, names in state["pending"] for name in names]
            raw = state.get("in_progress")
            in_progress = None if raw is None else (raw["name"], raw["length"], raw["created_ms"])
        except (TypeError, KeyError, ValueError) as e:
            raise FileSinkError(f"{where} is malformed: {e!r}") from None
        if type(next_part) is not int or next_part < 0:
            raise FileSinkError(f"{where} has a bad next_part {next_part!r}")
        for name in pending + ([in_progress[0]] if in_progress else []):
            self.parts.check_name(name, subtask, where)
        if in_progress is not None and not all(type(v) is int and v >= 0 for v in in_progress[1:]):
            raise FileSinkError(f"{where} has a bad in-progress length or time {in_progress!r}")
        return _Taken(subtask, next_part, pending, in_progress)

    def _recover(self, name: str, length: int, created_ms: int) -> None:
        """Resume this subtask's in-progress file at its committed length (Flink's recoverable writer)."""
        path, pending = self.parts.path(name, INPROGRESS), self.parts.path(name, PENDING)
        if not os.path.lexists(path) and os.path.lexists(pending):
            with io_errors(f"reopen {pending} as {path}"):  # rolled after the checkpoint, before the crash
                os.rename(pending, path)
        if not os.path.lexists(path):
            if os.path.lexists(self.parts.path(name)):
                # only a restore from a checkpoint older than the committed output (an explicit
                # fallback or an old savepoint) gets here: its records after that checkpoint are
                # written again, as with any restore of an older checkpoint
                log.warning(
                    "file sink: in-progress file %s of the restored checkpoint was committed since "
                    "(the checkpoint is older than the committed output): writing to a new part "
                    "file; records after that checkpoint will appear twice",
                    path,
                )
                return
            raise FileSinkError(f"file sink: in-progress file {path} of the restored checkpoint is missing")
        self.parts.truncate(path, length)
        with io_errors(f"open {path}"):
            self._file = open(path, "ab")  # noqa: SIM115 (held across batches)
        now = self.ctx.clock.now_ms()
        self._current, self._size, self._created_ms, self._last_write_ms = name, length, created_ms, now
        self._arm_timer()

    # -- records -------------------------------------------------------------
    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if not records:
            return
        try:
            data = self.sink.encoder.encode_batch(records)
        except Exception as exc:
            raise self._encode_failure(exc, records) from None
        now = self.ctx.clock.now_ms()
        p = self.sink.rolling_policy
        if self._file is not None:
            info = self._part_info()
            if p.should_roll_on_event(info) or p.should_roll_on_processing_time(info, now):
                await anyio.to_thread.run_sync(self._roll)
        if len(records) > 1 and p.should_roll_on_event(
            PartFileInfo(self._size + len(data), self._created_ms, now)
        ):
            await self._write_rolling(records, now)  # the batch crosses the roll point
            return
        self._append(data, now)

    def _append(self, data: bytes, now: int) -> None:
        f = self._file or self._open_new(now)
        with io_errors(f"write {f.name}"):
            f.write(data)
        self._size += len(data)
        self._last_write_ms = now

    async def _write_rolling(self, records: list, now: int) -> None:
        """Record by record, asking the policy before each one, as Flink's bucket does
        (``shouldRollOnEvent`` before every element): a part file holds the records up to the
        first that takes it past ``part_size``, wherever a batch boundary falls. Only a batch
        that crosses the roll point takes this path (once per part file, at most)."""
        p, encode = self.sink.rolling_policy, self.sink.encoder.encode_batch
        for record in records:
            if self._file is not None and p.should_roll_on_event(self._part_info()):
                await anyio.to_thread.run_sync(self._roll)
            self._append(encode([record]), now)

    def _arm_timer(self) -> None:
        pts = self.ctx.processing_time
        if self._timer_armed or pts is None or self._file is None:
            return
        self._timer_armed = True
        pts.register(self.ctx.clock.now_ms() + self.sink.bucket_check_interval, self._on_timer)

    async def _on_timer(self, _at: int) -> None:
        self._timer_armed = False
        if self._file is None or self._ended:
            return
        if self.sink.rolling_policy.should_roll_on_processing_time(
            self._part_info(), self.ctx.clock.now_ms()
        ):
            await anyio.to_thread.run_sync(self._roll)
        self._arm_timer()

    # -- checkpoints ---------------------------------------------------------
    async def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        """Roll or sync the in-progress file for checkpoint ``checkpoint_id``, in a thread."""
        self._synced_for = None
        if self._file is not None and self._current is not None:
            await anyio.to_thread.run_sync(self._roll_or_sync)
        self._synced_for = checkpoint_id

    def _roll_or_sync(self) -> None:
        f = self._file
        if f is None:
            return
        if self.sink.rolling_policy.should_roll_on_checkpoint(self._part_info()):
            self._roll()
        else:
            with io_errors(f"flush {f.name}"):
                f.flush()
                os.fsync(f.fileno())

    def snapshot_state(self, checkpoint_id: int) -> Any:
        in_progress = None
        if self._synced_for != checkpoint_id:  # not prepared (a direct call): sync here
            self._roll_or_sync()
        self._synced_for = None
        if self._file is not None and self._current is not None:
            in_progress = {"name": self._current, "length": self._size, "created_ms": self._created_ms}
        if self._unassigned:
            self._pending.setdefault(checkpoint_id, []).extend(self._unassigned)
            self._unassigned = []
        return {
            "subtask": self.ctx.subtask_index,
            "rescalable": True,  # the sink redistributes its own state (see initialize_state)
            "next_part": self.next_part,
            "pending": [[cid, list(names)] for cid, names in sorted(self._pending.items())],
            "in_progress": in_progress,
        }

    async def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Commit (in a thread) the pending files of every checkpoint up to ``checkpoint_id``."""
        done = [cid for cid in sorted(self._pending) if cid <= checkpoint_id]
        if not done:
            return
        names = [n for cid in done for n in self._pending[cid]]
        await anyio.to_thread.run_sync(self.parts.commit, names, checkpoint_id)
        for cid in done:
            del self._pending[cid]

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Keep the files: the next completed checkpoint subsumes this one and commits them."""

    async def finish(self) -> None:
        self._ended = True
        await anyio.to_thread.run_sync(self._roll)
        if self.ctx.checkpointing:
            return  # the final checkpoint after finish() pre-commits, its notification commits
        names = [n for cid in sorted(self._pending) for n in self._pending[cid]] + self._unassigned
        await anyio.to_thread.run_sync(self.parts.commit, names, 0)
        self._pending, self._unassigned = {}, []

    async def close(self) -> None:
        self._close_handle()

    def dispose(self) -> None:
        self._close_handle()

    # -- file moves ----------------------------------------------------------
    def _open_new(self, now: int) -> IO[bytes]:
        while self.parts.taken(self.parts.visible(self.next_part)):
            self.next_part += 1
        name = self.parts.visible(self.next_part)
        self.next_part += 1
        path = self.parts.path(name, INPROGRESS)
        with io_errors(f"open {path}"):
            f = self._file = open(path, "ab")  # noqa: SIM115 (held across batches)
        self._current, self._size, self._created_ms, self._last_write_ms = name, 0, now, now
        self._arm_timer()
        return f

    def _roll(self) -> None:
        """Close the in-progress file: flush, fsync, close, rename to pending."""
        f, name = self._file, self._current
        if f is None or name is None:
            return
        src, dst = self.parts.path(name, INPROGRESS), self.parts.path(name, PENDING)
        with io_errors(f"flush {src}"):
            f.flush()
            os.fsync(f.fileno())
        self._close_handle()
        with io_errors(f"rename {src} to {dst}"):
            os.rename(src, dst)
        fsync_dir(self.base)
        self._unassigned.append(name)

    def _close_handle(self) -> None:
        f, self._file, self._current = self._file, None, None
        if f is not None:  # never fails a job: unflushed in-progress data is discarded on restart
            with suppress(OSError):
                f.close()

    def _encode_failure(self, exc: Exception, records: list) -> BaseException:
        """Find the record that does not encode (slow path, on failure only) and name it."""
        where = self.parts.path(self._current or self.parts.visible(self.next_part), INPROGRESS)
        exc.add_note(f"streamflow: file sink {self.sink.encoder.name} encoder failed writing to {where}")
        for record in records:
            try:
                self.sink.encoder.encode_batch([record])
            except Exception:
                return self.failure(exc, record)
        return self.failure(exc)
