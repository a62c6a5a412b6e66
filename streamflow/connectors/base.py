"""The source and sink contracts (Flink's FLIP-27 split into its essentials).

A :class:`Source` describes *what* to read and creates one
:class:`SourceReader` per subtask. The source task drives the reader without
ever blocking inside it: ``poll_batch`` returns a batch, ``None`` (nothing
available now: the reader calls ``wake()`` when there is) or ``END``. So the
task can react to timers and checkpoint triggers while a source is quiet.

A reader's *position* (``snapshot_position``) goes into every checkpoint and
is handed back through ``restore_position`` before ``start``.

A :class:`Sink` creates the operator that writes; sinks with transactional
semantics (files, Kafka) hook into checkpoints through that operator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..runtime.operator import StreamOperator

END = object()


class SourceReader:
    async def start(self, wake: Callable[[], None]) -> None:
        """Begin reading; call ``wake()`` whenever data becomes available after a ``None``."""

    def poll_batch(self, max_records: int) -> list | object | None:
        """Up to ``max_records`` records, ``None`` if none are ready now, or ``END``."""
        raise NotImplementedError

    def snapshot_position(self) -> Any:
        return None

    def restore_position(self, position: Any) -> None:
        pass

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        pass

    async def close(self) -> None:
        pass


class Source:
    supports_parallelism = False
    bounded = True

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        raise NotImplementedError


class Sink:
    def create_operator(self, name: str) -> StreamOperator:
        raise NotImplementedError
