"""The Kafka source reader's metrics, with the names and meaning of Flink's
``KafkaSourceReaderMetrics`` (apache/flink-connector-kafka ``.../source/metrics/``).

Under the reader's group ``KafkaSourceReader``:

* per partition, ``topic.<topic>.partition.<p>``: ``currentOffset``, the offset of the last
  record emitted; ``committedOffset``, the last offset committed to the group on a completed
  checkpoint (both ``INITIAL_OFFSET`` = -1 until there is one); ``pendingRecords``, the consumer
  lag (records between the next offset to emit and the partition's high watermark as last
  fetched; Flink's is the consumer's ``records-lag``);
* ``commitsSucceeded`` and ``commitsFailed``: the offset commits of completed checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["INITIAL_OFFSET", "KafkaSourceReaderMetrics"]

INITIAL_OFFSET = -1

Key = tuple[str, int]


class KafkaSourceReaderMetrics:
    """One reader's metrics (see the module docstring)."""

    def __init__(self, group: Any) -> None:
        self.group = group.add_group("KafkaSourceReader")
        self.current: dict[Key, int] = {}
        self.committed: dict[Key, int] = {}
        self.commits_succeeded = self.group.counter("commitsSucceeded")
        self.commits_failed = self.group.counter("commitsFailed")

    def register_partition(self, key: Key, pending: Callable[[], int]) -> None:
        self.current.setdefault(key, INITIAL_OFFSET)
        self.committed.setdefault(key, INITIAL_OFFSET)
        group = self.group.add_group("topic", key[0]).add_group("partition", str(key[1]))
        group.gauge("currentOffset", lambda: self.current[key])
        group.gauge("committedOffset", lambda: self.committed[key])
        group.gauge("pendingRecords", pending)

    def record_current_offset(self, key: Key, offset: int) -> None:
        self.current[key] = offset

    def record_committed(self, offsets: dict[Key, int]) -> None:
        self.committed.update(offsets)
        self.commits_succeeded.inc()

    def record_failed_commit(self) -> None:
        self.commits_failed.inc()
