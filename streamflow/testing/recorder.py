"""A sink that records what it receives and every checkpoint call it gets, in order."""

from __future__ import annotations

from typing import Any

from ..connectors.base import Sink
from ..runtime.operator import StreamOperator


class CheckpointRecorder(Sink):
    """``events`` lists ``("record", value)``, ``("snapshot", id)``, ``("complete", id)``,
    ``("aborted", id)`` as the sink's operator saw them (all subtasks share the list)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def checkpoints(self, kind: str) -> list[int]:
        return [cid for event, cid in self.events if event == kind]

    def create_operator(self, name: str) -> StreamOperator:
        events = self.events

        class _Recording(StreamOperator):
            async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
                events.extend(("record", r) for r in records)

            def snapshot_state(self, checkpoint_id: int) -> Any:
                events.append(("snapshot", checkpoint_id))
                return None

            def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
                events.append(("complete", checkpoint_id))

            def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
                events.append(("aborted", checkpoint_id))

        return _Recording(name)
