"""Compaction of a FileSink's small files (Flink's ``FileCompactStrategy`` and ``FileCompactor``,
its ``CompactCoordinator`` and ``CompactorOperator``), for ``FileSink.for_row_format(...)
.enable_compact(strategy, compactor)``.

Theory of operation
-------------------
Modelled on apache/flink flink-connector-files ``.../file/sink/compactor/``
(``operator/CompactCoordinator.java``, ``operator/CompactorOperator.java``,
``operator/CompactService.java``, ``ConcatFileCompactor.java``). With compaction on, no part file
the writer rolls becomes visible by itself: files are packed into groups, each group is
concatenated into one file, and only that file is published. A part file (``name``, see
``file_sink_parts.py``) and the compacted file of its group move through::

    .{name}.pending   --(its group's checkpoint completes: compact)-->  .{name}  (committed, hidden)
    .compacted-{first}.inprogress --(written, fsynced, renamed)-->  .compacted-{first}.pending
    .compacted-{first}.pending  --(the next checkpoint completes: publish)-->  compacted-{first}
    .{name} of every input  --(after the publish)-->  deleted

where ``first`` is the name of the group's first file (Flink's ``compacted-`` prefix on the first
uncompacted file's name). One :class:`BucketCompaction` per bucket of a sink subtask holds:

* ``packing``: rolled files not yet in a group. At the pre-barrier step of checkpoint ``n``
  the files rolled since the last checkpoint join it (Flink's writer emits its committables
  there); the :class:`CompactTrigger` fires when the packed size reaches ``size_threshold``
  (the file that crossed it included), and on checkpoint ``n`` when
  ``num_checkpoints_before_compaction`` checkpoints passed since the trigger started (Flink's
  ``onElement`` / ``onCheckpoint``). A fired group is a *request* of checkpoint ``n``.
* ``requests``: checkpoint id -> groups. A group is compacted only once the checkpoint that
  recorded it completed (Flink's ``submitUntil``), so every input is in a completed checkpoint
  before it is touched.
* ``submitted``: groups being compacted (in a worker thread, ``num_compact_threads`` at a time).
  A group still running at a checkpoint is recorded as submitted and compacted again after a
  restore: compaction is idempotent (a committed input stays committed, the output is written
  anew).
* ``compacted``: checkpoint id -> groups whose compacted file is written, attached at the
  pre-barrier step of the first checkpoint after they finished (Flink's ``emitCompacted``) and
  published when that checkpoint completes (Flink's committer): the compacted file is renamed
  visible and the group's inputs deleted. Publishing is idempotent too.

End of input compacts every packed file at once and waits (Flink's ``endInput``): with
checkpointing the final checkpoint publishes, without it the sink publishes directly. Its inputs
are committed before any checkpoint records their group, so a failure before the final
checkpoint completes restores a checkpoint that names them packed while they are committed: a
restore takes a packed file pending or committed (``file_sink_compaction._size``), as it takes a
group's inputs (Flink's ``commitAfterRecovery`` is idempotent the same way).

**One compaction per sink subtask.** Flink's coordinator runs at parallelism 1 and packs the
files of every writer subtask of a bucket together; here each subtask packs and compacts its own
files (the coordinator's triggers, per subtask). Every record still appears exactly once; at
parallelism p a checkpoint-count trigger makes up to p compacted files per bucket where Flink
makes one. The compactors are Flink's output-stream ones: ``concat_file_compactor(delimiter)``
(the delimiter written after every input file, as Flink's ``ConcatFileCompactor`` does) and
``identical_file_compactor()`` (a group of exactly one file, else the compaction fails, as
Flink's ``IdenticalFileCompactor``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any


class FileCompactStrategy:
    """When a FileSink compacts its files (Flink's ``FileCompactStrategy``): build with
    ``FileCompactStrategy.builder()...build()``."""

    def __init__(self, size_threshold: int, num_checkpoints_before_compaction: int, num_compact_threads: int):
        self.size_threshold = size_threshold
        self.num_checkpoints_before_compaction = num_checkpoints_before_compaction
        self.num_compact_threads = num_compact_threads

    def get_size_threshold(self) -> int:
        return self.size_threshold

    def get_num_checkpoints_before_compaction(self) -> int:
        return self.num_checkpoints_before_compaction

    def get_num_compact_threads(self) -> int:
        return self.num_compact_threads

    @staticmethod
    def builder() -> FileCompactStrategy.Builder:
        return FileCompactStrategy.Builder()

    def __repr__(self) -> str:
        return (
            f"FileCompactStrategy(size_threshold={self.size_threshold}, num_checkpoints_before_compaction="
            f"{self.num_checkpoints_before_compaction}, num_compact_threads={self.num_compact_threads})"
        )

    class Builder:
        def __init__(self) -> None:
            self._checkpoints, self._size, self._threads = -1, -1, -1

        def enable_compaction_on_checkpoint(
            self, num_checkpoints_before_compaction: int
        ) -> FileCompactStrategy.Builder:
            """Compact when this many checkpoints passed since the files' trigger started."""
            if _int(num_checkpoints_before_compaction, "num_checkpoints_before_compaction") <= 0:
                raise ValueError("Number of checkpoints before compaction should be more than 0.")
            self._checkpoints = num_checkpoints_before_compaction
            return self

        def set_size_threshold(self, size_threshold: int) -> FileCompactStrategy.Builder:
            """Compact when the packed files hold this many bytes (-1: no size trigger)."""
            self._size = _int(size_threshold, "size_threshold")
            return self

        def set_num_compact_threads(self, num_compact_threads: int) -> FileCompactStrategy.Builder:
            """How many groups a sink subtask compacts at once (default 1)."""
            if _int(num_compact_threads, "num_compact_threads") <= 0:
                raise ValueError("Compact threads should be more than 0.")
            self._threads = num_compact_threads
            return self

        def build(self) -> FileCompactStrategy:
            if self._size < 0 and self._checkpoints <= 0:
                raise ValueError("At least one trigger condition must be configured.")
            return FileCompactStrategy(self._size, self._checkpoints, self._threads)


def _int(value: Any, what: str) -> int:
    if type(value) is not int:
        raise TypeError(f"FileCompactStrategy: {what} must be an int, got {value!r}")
    return value


class FileCompactor:
    """How a group of files becomes one (Flink's output-stream ``FileCompactor``s)."""

    def __init__(self, file_delimiter: bytes | None = None, single: bool = False) -> None:
        if file_delimiter is not None and not isinstance(file_delimiter, (bytes, bytearray)):
            raise TypeError(f"concat_file_compactor: file_delimiter must be bytes, got {file_delimiter!r}")
        self.file_delimiter = bytes(file_delimiter) if file_delimiter else None
        self.single = single

    @staticmethod
    def concat_file_compactor(file_delimiter: bytes | None = None) -> FileCompactor:
        """Concatenate the files, writing ``file_delimiter`` (if given) after each one."""
        return FileCompactor(file_delimiter)

    @staticmethod
    def identical_file_compactor() -> FileCompactor:
        """Copy the group's only file (a group of more than one fails the compaction)."""
        return FileCompactor(single=True)

    def compact(self, inputs: list[str], out: IO[bytes]) -> None:
        """Write the files ``inputs`` (paths) to ``out`` (blocking)."""
        if self.single and len(inputs) != 1:
            raise ValueError(
                f"identical_file_compactor can only copy one input file, the group has "
                f"{len(inputs)}: {inputs}"
            )
        for path in inputs:
            with open(path, "rb") as f:
                shutil.copyfileobj(f, out, 4 << 20)
            if self.file_delimiter is not None:
                out.write(self.file_delimiter)

    def __repr__(self) -> str:
        kind = "identical" if self.single else f"concat, delimiter {self.file_delimiter!r}"
        return f"FileCompactor({kind})"


class CompactTrigger:
    """Flink's ``CompactCoordinator.CompactTrigger``: one per bucket from its first packed file
    until it fires."""

    def __init__(self, strategy: FileCompactStrategy) -> None:
        self.threshold = strategy.size_threshold
        self.checkpoints = strategy.num_checkpoints_before_compaction
        self.size = 0
        self.started_at = -1  # the checkpoint before the first one this trigger saw

    def on_file(self, size: int) -> bool:
        """Whether packing a file of ``size`` bytes fires the group."""
        if self.threshold < 0:
            return False
        self.size += size
        return self.size >= self.threshold

    def on_checkpoint(self, checkpoint_id: int) -> bool:
        if self.checkpoints < 0:
            return False
        if self.started_at < 0:
            self.started_at = checkpoint_id - 1
        return checkpoint_id - self.started_at >= self.checkpoints


@dataclass
class BucketCompaction:
    """The compaction state of one bucket of one sink subtask (the module doc): a plain state
    machine; the operator does the file work it asks for."""

    strategy: FileCompactStrategy
    packing: list[str] = field(default_factory=list)
    trigger: CompactTrigger | None = None
    collecting: list[list[str]] = field(default_factory=list)  # fired since the last snapshot
    requests: dict[int, list[list[str]]] = field(default_factory=dict)
    submitted: list[list[str]] = field(default_factory=list)
    finished: list[list[str]] = field(default_factory=list)  # compacted, not yet attached
    compacted: dict[int, list[list[str]]] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return bool(
            self.packing
            or self.collecting
            or self.requests
            or self.submitted
            or self.finished
            or self.compacted
        )

    def pack(self, name: str, size: int) -> None:
        """A rolled file joins the packing group (Flink's ``packAndTrigger``)."""
        if self.trigger is None:
            self.trigger = CompactTrigger(self.strategy)
        self.packing.append(name)
        if self.trigger.on_file(size):
            self._fire()

    def _fire(self) -> None:
        self.trigger = None
        if self.packing:
            self.collecting.append(self.packing)
            self.packing = []

    def prepare(self, checkpoint_id: int) -> None:
        """The pre-barrier step of ``checkpoint_id`` after this checkpoint's files were packed:
        the checkpoint trigger, then the fired groups become its requests and the finished
        compactions its compacted groups."""
        if self.trigger is not None and self.trigger.on_checkpoint(checkpoint_id):
            self._fire()
        if self.collecting:
            self.requests.setdefault(checkpoint_id, []).extend(self.collecting)
            self.collecting = []
        if self.finished:
            self.compacted.setdefault(checkpoint_id, []).extend(self.finished)
            self.finished = []

    def snapshot(self) -> dict[str, Any]:
        """Finished groups not yet attached are still submitted here (compacted again on
        restore); groups fired after the pre-barrier step are packed again on restore."""
        return {
            "packing": self.packing + [n for g in self.collecting for n in g],
            "requests": [[cid, [list(g) for g in gs]] for cid, gs in sorted(self.requests.items())],
            "submitted": [list(g) for g in self.submitted + self.finished],
            "compacted": [[cid, [list(g) for g in gs]] for cid, gs in sorted(self.compacted.items())],
        }

    def complete(self, checkpoint_id: int) -> tuple[list[list[str]], list[list[str]]]:
        """Checkpoint ``checkpoint_id`` completed: (groups to compact now, groups to publish)."""
        to_compact = [g for cid in sorted(self.requests) if cid <= checkpoint_id for g in self.requests[cid]]
        self.requests = {cid: gs for cid, gs in self.requests.items() if cid > checkpoint_id}
        self.submitted.extend(to_compact)
        to_publish = [
            g for cid in sorted(self.compacted) if cid <= checkpoint_id for g in self.compacted[cid]
        ]
        self.compacted = {cid: gs for cid, gs in self.compacted.items() if cid > checkpoint_id}
        return to_compact, to_publish

    def done(self, group: list[str]) -> None:
        """A group's compacted file is written and pending."""
        self.submitted.remove(group)
        self.finished.append(group)

    def end_of_input(self) -> list[list[str]]:
        """Every packed, fired and requested group, to compact now (Flink's ``endInput``)."""
        self._fire()
        groups = self.collecting + [g for cid in sorted(self.requests) for g in self.requests[cid]]
        self.collecting, self.requests = [], {}
        self.submitted.extend(groups)
        return groups

    def publish_all(self) -> list[list[str]]:
        """Without checkpointing, at the end: every compacted group, to publish now (kept until
        the caller published them: a failed publication is retried, ``SinkCompaction``)."""
        return [g for cid in sorted(self.compacted) for g in self.compacted[cid]] + self.finished

    @staticmethod
    def restored(
        strategy: FileCompactStrategy, states: list[dict[str, Any]], size_of: Callable[[str], int]
    ) -> tuple[BucketCompaction, list[list[str]], list[list[str]]]:
        """The bucket's compaction from the states of a completed checkpoint (one per old subtask
        taken): (the compaction, groups to compact now, groups to publish now). Every group the
        checkpoint holds was recorded by a checkpoint that completed, so all are compacted now;
        the packed files are packed again with their sizes (the trigger recomputed, as Flink's
        coordinator does)."""
        c = BucketCompaction(strategy)
        to_compact: list[list[str]] = []
        to_publish: list[list[str]] = []
        for state in states:
            to_compact.extend(g for _cid, gs in state["requests"] for g in gs)
            to_compact.extend(state["submitted"])
            to_publish.extend(g for _cid, gs in state["compacted"] for g in gs)
        c.submitted = [list(g) for g in to_compact]
        for state in states:
            for name in state["packing"]:
                c.pack(name, size_of(name))
        return c, to_compact, to_publish


def group_names(state: dict[str, Any]) -> list[str]:
    """Every part file name a restored bucket compaction state refers to (for validation);
    ValueError when its shape is not :meth:`BucketCompaction.snapshot`'s."""
    groups = [state["packing"], *state["submitted"]]
    for key in ("requests", "compacted"):
        for checkpoint_id, gs in state[key]:
            if type(checkpoint_id) is not int or type(gs) is not list:
                raise ValueError(f"{key} entry {[checkpoint_id, gs]!r} is not [checkpoint id, [group, ...]]")
            groups.extend(gs)
    names: list[str] = []
    for g in groups:
        if type(g) is not list or not all(type(n) is str for n in g):
            raise ValueError(f"{g!r} is not a list of part file names")
        names.extend(g)
    return names
