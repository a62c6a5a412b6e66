"""An exactly-once row-format file sink with PyFlink's names (``FileSink.for_row_format``).

Theory of operation
-------------------
Modelled on Flink's ``FileSink`` (apache/flink flink-connector-files
``.../file/sink/FileSink.java``, ``writer/FileWriterBucket.java``,
``committer/FileCommitter.java``): a part file moves through three states,
and only the last one is visible to readers (who skip names starting with ``.``)::

    .{name}.inprogress  --(barrier: flush, fsync, close, rename)-->  .{name}.pending
    .{name}.pending     --(checkpoint complete: rename)----------->  {name}

with ``name = {part_prefix}-{uid}-{subtask}-{n}{part_suffix}`` (``OutputFileConfig``).
Every rename is followed by an fsync of the directory, so a state reached is durable.

* ``process_batch`` encodes the whole batch in one join and appends it to the
  in-progress file, opened lazily. The rolling policy may close a file early
  (size, age, inactivity: checked before each batch, there is no timer); a
  rolled file becomes pending at once and joins the next checkpoint.
* ``snapshot_state(n)`` is the pre-commit: the in-progress file becomes pending
  and every pending file not yet assigned is recorded under checkpoint ``n``.
  The state is ``{"next_part": int, "pending": [[checkpoint_id, [name, ...]], ...]}``
  (visible names; all checkpoints not yet committed). Records after the barrier
  go to a new file, so a checkpoint's files hold exactly the records before it.
* ``notify_checkpoint_complete(n)`` commits the files of every checkpoint <= n
  (a completed checkpoint subsumes older ones). Committing is idempotent: a
  pending file that is missing while its visible name exists was committed.
* ``notify_checkpoint_aborted(n)`` keeps n's files, as Flink does: the next
  completed checkpoint subsumes n and commits them (no replay would restore them).
* ``initialize_state(state)`` gets the state of a *completed* checkpoint (or
  None): it commits that state's pending files (the notification may have been
  lost in a crash), then deletes every hidden file of this uid and subtask that
  the state does not name (never-completed checkpoints, in-progress at the crash:
  the sources replay those records). Numbering continues at ``next_part``,
  skipping names taken on disk, so names never repeat across restarts.
* ``finish`` without checkpointing commits everything directly (the output of
  a bounded job appears when it ends, and not at all if it fails). With
  checkpointing it does nothing: the final checkpoint after ``finish``
  pre-commits and its notification commits.
* ``close``/``dispose`` only close handles; they never delete: cleaning
  uncommitted data is the restart's job, which knows what completed.

Limits: one directory (no bucket assigner); two jobs writing one directory
must use distinct uids. Subtasks share the directory but only touch their own files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import IO, Any

import orjson

from .. import _faults as faults
from ..errors import StreamflowError
from ..runtime.operator import StreamOperator
from .base import Sink

__all__ = ["Encoder", "FileSink", "FileSinkError", "FileSinkOperator", "OutputFileConfig", "RollingPolicy"]

_INPROGRESS = ".inprogress"
_PENDING = ".pending"


class FileSinkError(StreamflowError, OSError):
    """A file sink I/O failure; the message names the file."""


class Encoder:
    """Turns a batch of records into the bytes of its lines (one call per batch)."""

    def __init__(self, encode_batch: Callable[[list], bytes], name: str) -> None:
        self.encode_batch = encode_batch
        self.name = name

    @staticmethod
    def simple_string_encoder(charset_name: str = "utf-8", *, charset: str | None = None) -> Encoder:
        """``str(record)`` and a newline per record (``charset`` is an alias of ``charset_name``)."""
        cs = charset or charset_name

        def encode(records: list) -> bytes:
            return ("\n".join(map(str, records)) + "\n").encode(cs)

        return Encoder(encode, f"simple_string({cs})")

    @staticmethod
    def json_lines_encoder() -> Encoder:
        """One JSON document per line (orjson)."""

        def encode(records: list) -> bytes:
            return b"\n".join(map(orjson.dumps, records)) + b"\n"

        return Encoder(encode, "json_lines")


@dataclass(frozen=True)
class OutputFileConfig:
    """Part file naming: ``{part_prefix}-{uid}-{subtask}-{n}{part_suffix}``."""

    part_prefix: str = "part"
    part_suffix: str = ""

    def __post_init__(self) -> None:
        for label, value in (("part_prefix", self.part_prefix), ("part_suffix", self.part_suffix)):
            if "/" in value or os.sep in value:
                raise ValueError(f"OutputFileConfig {label} {value!r} must not contain a path separator")
        if self.part_prefix.startswith("."):
            raise ValueError(f"OutputFileConfig part_prefix {self.part_prefix!r} must not start with '.'")

    @staticmethod
    def builder() -> OutputFileConfigBuilder:
        return OutputFileConfigBuilder()


class OutputFileConfigBuilder:
    def __init__(self) -> None:
        self._prefix, self._suffix = "part", ""

    def with_part_prefix(self, prefix: str) -> OutputFileConfigBuilder:
        self._prefix = prefix
        return self

    def with_part_suffix(self, suffix: str) -> OutputFileConfigBuilder:
        self._suffix = suffix
        return self

    def build(self) -> OutputFileConfig:
        return OutputFileConfig(self._prefix, self._suffix)


@dataclass(frozen=True)
class RollingPolicy:
    """When to close an in-progress file before the next checkpoint (None: never).

    Files always roll at a checkpoint barrier (exactly-once needs it). Sizes are
    bytes, intervals milliseconds of the operator's clock, checked at each batch.
    """

    part_size: int | None = None
    rollover_interval: int | None = None
    inactivity_interval: int | None = None

    @staticmethod
    def default_rolling_policy(
        part_size: int = 128 * 1024 * 1024, rollover_interval: int = 60_000, inactivity_interval: int = 60_000
    ) -> RollingPolicy:
        return RollingPolicy(part_size, rollover_interval, inactivity_interval)

    @staticmethod
    def on_checkpoint_rolling_policy() -> RollingPolicy:
        return RollingPolicy()

    def should_roll(self, size: int, opened_ms: int, last_write_ms: int, now_ms: int) -> bool:
        return (
            (self.part_size is not None and size >= self.part_size)
            or (self.rollover_interval is not None and now_ms - opened_ms >= self.rollover_interval)
            or (self.inactivity_interval is not None and now_ms - last_write_ms >= self.inactivity_interval)
        )


class FileSink(Sink):
    """Exactly-once row-format sink: build with ``FileSink.for_row_format(path, encoder)...build()``."""

    def __init__(
        self,
        base_path: str | os.PathLike[str],
        encoder: Encoder,
        output_file_config: OutputFileConfig | None = None,
        rolling_policy: RollingPolicy | None = None,
    ) -> None:
        self.base_path = os.fspath(base_path)
        self.encoder = encoder
        self.output_file_config = output_file_config or OutputFileConfig()
        self.rolling_policy = rolling_policy or RollingPolicy.default_rolling_policy()

    @staticmethod
    def for_row_format(base_path: str | os.PathLike[str], encoder: Encoder) -> RowFormatBuilder:
        return RowFormatBuilder(base_path, encoder)

    def create_operator(self, name: str) -> StreamOperator:
        return FileSinkOperator(name, self)


class RowFormatBuilder:
    def __init__(self, base_path: str | os.PathLike[str], encoder: Encoder) -> None:
        self._base_path, self._encoder = base_path, encoder
        self._config: OutputFileConfig | None = None
        self._policy: RollingPolicy | None = None

    def with_output_file_config(self, output_file_config: OutputFileConfig) -> RowFormatBuilder:
        self._config = output_file_config
        return self

    def with_rolling_policy(self, rolling_policy: RollingPolicy) -> RowFormatBuilder:
        self._policy = rolling_policy
        return self

    def build(self) -> FileSink:
        return FileSink(self._base_path, self._encoder, self._config, self._policy)


@contextmanager
def _io(what: str) -> Iterator[None]:
    """Turn an OSError into a FileSinkError whose message says what failed on which path."""
    try:
        yield
    except FileSinkError:
        raise
    except OSError as exc:
        raise FileSinkError(f"file sink: cannot {what}: {exc}") from exc


def _fsync_dir(path: str) -> None:
    with _io(f"fsync directory {path}"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class FileSinkOperator(StreamOperator):
    """One subtask of a :class:`FileSink` (see the module docstring)."""

    def __init__(self, name: str, sink: FileSink) -> None:
        super().__init__(name)
        self.sink = sink
        self.base = sink.base_path
        self.next_part = 0
        self._file: IO[bytes] | None = None
        self._current: str | None = None  # visible name of the in-progress file
        self._size = self._opened_ms = self._last_write_ms = 0
        self._unassigned: list[str] = []  # pending files not yet in a checkpoint
        self._pending: dict[int, list[str]] = {}  # checkpoint id -> pending files

    # -- names ---------------------------------------------------------------
    def _stem(self) -> str:
        uid = re.sub(r"[^A-Za-z0-9._-]", "_", self.uid)
        return f"{self.sink.output_file_config.part_prefix}-{uid}-{self.ctx.subtask_index}-"

    def _visible(self, n: int) -> str:
        return f"{self._stem()}{n}{self.sink.output_file_config.part_suffix}"

    def _path(self, name: str, state: str = "") -> str:
        return os.path.join(self.base, f".{name}{state}" if state else name)

    def _taken(self, name: str) -> bool:
        return any(os.path.lexists(self._path(name, s)) for s in ("", _INPROGRESS, _PENDING))

    # -- lifecycle -----------------------------------------------------------
    def initialize_state(self, restored: Any | None) -> None:
        """``restored``: an ``OperatorRestore`` (its ``own`` state is this subtask's) or None."""
        with _io(f"create directory {self.base}"):
            os.makedirs(self.base, exist_ok=True)
        self._pending, self._unassigned = {}, []
        keep: set[str] = set()
        restored = getattr(restored, "own", restored)
        if restored is not None:
            self.next_part = int(restored["next_part"])
            for _cid, names in restored["pending"]:
                self._commit(list(names))
                keep.update(names)
        pattern = re.compile(
            re.escape(self._stem()) + r"(\d+)" + re.escape(self.sink.output_file_config.part_suffix)
        )
        used = -1
        removed = False
        with _io(f"list directory {self.base}"):
            entries = sorted(os.listdir(self.base))
        for entry in entries:
            hidden = entry.startswith(".") and entry.endswith((_INPROGRESS, _PENDING))
            name = entry[1 : entry.rindex(".")] if hidden else entry
            match = pattern.fullmatch(name)
            if match is None:
                continue
            if not hidden:
                used = max(used, int(match.group(1)))
            elif name not in keep:
                path = os.path.join(self.base, entry)
                with _io(f"remove uncommitted file {path}"), suppress(FileNotFoundError):
                    os.remove(path)
                removed = True
        if removed:
            _fsync_dir(self.base)
        self.next_part = max(self.next_part, used + 1)

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if not records:
            return
        try:
            data = self.sink.encoder.encode_batch(records)
        except Exception as exc:
            raise self._encode_failure(exc, records) from None
        now = self.ctx.clock.now_ms()
        p = self.sink.rolling_policy
        if self._file is not None and p.should_roll(self._size, self._opened_ms, self._last_write_ms, now):
            self._roll()
        f = self._file or self._open_new(now)
        with _io(f"write {f.name}"):
            f.write(data)
        self._size += len(data)
        self._last_write_ms = now

    def snapshot_state(self, checkpoint_id: int) -> Any:
        self._roll()
        if self._unassigned:
            self._pending.setdefault(checkpoint_id, []).extend(self._unassigned)
            self._unassigned = []
        return {
            "next_part": self.next_part,
            "pending": [[cid, list(names)] for cid, names in sorted(self._pending.items())],
        }

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self._committing = checkpoint_id
        for cid in sorted(self._pending):
            if cid > checkpoint_id:
                break
            self._commit(self._pending[cid])
            del self._pending[cid]

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Keep the files: the next completed checkpoint subsumes this one and commits them."""

    async def finish(self) -> None:
        if self.ctx.checkpointing:
            return  # the final checkpoint after finish() pre-commits, its notification commits
        self._roll()
        for cid in sorted(self._pending):
            self._commit(self._pending.pop(cid))
        self._commit(self._unassigned)
        self._unassigned = []

    async def close(self) -> None:
        self._close_handle()

    def dispose(self) -> None:
        self._close_handle()

    # -- file moves ----------------------------------------------------------
    def _open_new(self, now: int) -> IO[bytes]:
        while self._taken(self._visible(self.next_part)):
            self.next_part += 1
        name = self._visible(self.next_part)
        self.next_part += 1
        path = self._path(name, _INPROGRESS)
        with _io(f"open {path}"):
            f = self._file = open(path, "ab")  # noqa: SIM115 (held across batches)
        self._current, self._size, self._opened_ms, self._last_write_ms = name, 0, now, now
        return f

    def _roll(self) -> None:
        """Pre-commit the in-progress file: flush, fsync, close, rename to pending."""
        f, name = self._file, self._current
        if f is None or name is None:
            return
        src, dst = self._path(name, _INPROGRESS), self._path(name, _PENDING)
        with _io(f"flush {src}"):
            f.flush()
            os.fsync(f.fileno())
        self._close_handle()
        with _io(f"rename {src} to {dst}"):
            os.rename(src, dst)
        _fsync_dir(self.base)
        self._unassigned.append(name)

    def _commit(self, names: list[str]) -> None:
        """Rename pending files to their visible names; already-visible ones count as committed."""
        renamed = False
        for name in names:
            src, dst = self._path(name, _PENDING), self._path(name)
            src_exists, dst_exists = os.path.lexists(src), os.path.lexists(dst)
            if dst_exists and not src_exists:
                continue  # committed before (a restore or a repeated notification)
            if dst_exists:
                raise FileSinkError(f"file sink: cannot commit {src}: {dst} already exists")
            if not src_exists:
                raise FileSinkError(f"file sink: pending file {src} is missing (and {dst} does not exist)")
            with _io(f"commit {src} to {dst}"):
                os.rename(src, dst)
                if faults.ARMED:
                    faults.point("commit", getattr(self, "_committing", 0))
            renamed = True
        if renamed:
            _fsync_dir(self.base)

    def _close_handle(self) -> None:
        f, self._file, self._current = self._file, None, None
        if f is not None:  # never fails a job: unflushed in-progress data is discarded on restart
            with suppress(OSError):
                f.close()

    def _encode_failure(self, exc: Exception, records: list) -> BaseException:
        """Find the record that does not encode (slow path, on failure only) and name it."""
        where = self._path(self._current or self._visible(self.next_part), _INPROGRESS)
        exc.add_note(f"streamflow: file sink {self.sink.encoder.name} encoder failed writing to {where}")
        for record in records:
            try:
                self.sink.encoder.encode_batch([record])
            except Exception:
                return self.failure(exc, record)
        return self.failure(exc)
