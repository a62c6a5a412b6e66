"""The source and sink contracts (Flink's FLIP-27 split into its essentials).

A :class:`Source` describes *what* to read and creates one
:class:`SourceReader` per subtask. The source task drives the reader without
ever blocking inside it: ``poll_batch`` returns a batch, ``None`` (nothing
available now: the reader calls ``wake()`` when there is) or ``END``. So the
task can react to timers and checkpoint triggers while a source is quiet.

A reader's *position* (``snapshot_position``) goes into every checkpoint and
is handed back through ``restore_position`` before ``start``. A reader whose
positions any parallelism can restore (a Kafka partition's offset belongs to
whichever subtask owns the partition) sets ``rescalable_position``: it then gets
every former subtask's position through ``restore_positions`` (Flink's union
list state) and keeps those it owns.

A reader that can skip records it cannot decode declares it through
``take_dead_letters``: the source task routes what it returns to the
``DEAD_LETTER`` side output (or fails naming the first one when nothing
consumes that output). The runtime knows only this contract, no connector.

A :class:`Sink` creates the operator that writes; sinks with transactional
semantics (files, Kafka) hook into checkpoints through that operator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import StreamflowError
from ..functions import OutputTag

if TYPE_CHECKING:
    from ..runtime.operator import StreamOperator

END = object()

DEAD_LETTER = OutputTag("dead-letter")
"""The side output of records a source could not read (``stream.get_side_output(DEAD_LETTER)``)."""


@dataclass(frozen=True)
class DeadLetter:
    """A record that could not be read: where it was, what it was, what went wrong."""

    source: str
    location: str
    raw: bytes
    error: str


class MalformedRecordError(StreamflowError, ValueError):
    """A source read a record it cannot decode and nothing consumes ``DEAD_LETTER``."""


_NO_LETTERS: tuple[DeadLetter, ...] = ()


class SourceReader:
    async def start(self, wake: Callable[[], None]) -> None:
        """Begin reading; call ``wake()`` whenever data becomes available after a ``None``."""

    def poll_batch(self, max_records: int) -> list | object | None:
        """Up to ``max_records`` records, ``None`` if none are ready now, or ``END``."""
        raise NotImplementedError

    def snapshot_position(self) -> Any:
        return None

    def snapshot_for_checkpoint(self, checkpoint_id: int) -> Any:
        """The position stored in checkpoint ``checkpoint_id`` (Flink's ``snapshotState(id)``):
        ``snapshot_position()``. A reader that acts when that checkpoint completes (the Kafka
        reader commits its offsets) overrides this to remember which position went where."""
        return self.snapshot_position()

    def restore_position(self, position: Any) -> None:
        pass

    rescalable_position = False
    """Whether a checkpoint of this reader restores at another parallelism (module doc)."""

    def restore_positions(self, positions: list[Any]) -> None:
        """With ``rescalable_position``: the positions of every subtask of the checkpoint
        (whatever its parallelism was), called instead of ``restore_position``."""
        raise NotImplementedError(f"{type(self).__name__} sets rescalable_position without restore_positions")

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        pass

    def align_splits(self, max_allowed_watermark: int) -> None:
        """Watermark alignment of the splits inside one reader (Flink's FLIP-217
        ``pauseOrResumeSplits``), called by an aligned source's task before each poll: a reader
        of several splits with a watermark each (Kafka partitions) stops fetching those whose
        watermark is above ``max_allowed_watermark`` and resumes the others. The default reads
        one stream of records: the task aligns it as a whole."""

    def take_dead_letters(self) -> Sequence[DeadLetter]:
        """The records that could not be decoded since the last call (called after every
        batch). A reader that never skips a record keeps this default: none."""
        return _NO_LETTERS

    async def close(self) -> None:
        pass


class Source:
    supports_parallelism = False
    bounded = True

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        raise NotImplementedError


class Sink:
    has_committer = False
    """A two-phase sink (pre-commit at a barrier, commit when the checkpoint completes): one
    operator here, Flink's ``Writer`` and ``Committer`` in the plan it shows."""

    def create_operator(self, name: str) -> StreamOperator:
        raise NotImplementedError
