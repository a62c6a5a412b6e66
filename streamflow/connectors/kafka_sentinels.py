"""The starting offsets a Kafka source's reader resolves itself: Flink's split sentinels.

Theory of operation
-------------------
Flink's enumerator resolves ``latest()``, ``timestamp()`` and ``offsets()`` starting offsets to
real offsets, but hands ``earliest()`` and ``committed_offsets()`` splits to the reader with a
sentinel (``KafkaPartitionSplit.EARLIEST_OFFSET`` / ``COMMITTED_OFFSET``;
``ReaderHandledOffsetsInitializer``); every partition discovered after the first listing starts
at ``EARLIEST_OFFSET`` too (FLIP-288). The split keeps its sentinel until its first record is
emitted (``KafkaPartitionSplitState``), so:

* its offset is not committed to the group on checkpoint completion
  (``KafkaSourceReader#snapshotState`` commits ``startingOffset >= 0`` only);
* a checkpoint holds the sentinel, and **after a restore** the reader resolves it again when
  the restored split is added (``KafkaPartitionSplitReader#handleSplitsChanges``): ``earliest``
  seeks to the beginning *now* (records deleted since by retention or ``DeleteRecords`` are
  skipped), ``committed`` takes the group's committed offset *now* (another consumer of the
  group may have committed meanwhile) and, when the group has none, the consumer's
  ``auto.offset.reset``, which Flink's builder sets from the starting initializer's reset
  strategy (``getAutoOffsetResetStrategy``; ``none`` fails).

Here a split resolves its offset at once (its position) and carries its sentinel's name
(``"earliest"`` / ``"committed"``) beside it while unread; :func:`resolve_again` is the
restore step. A partition that was read restores its exact position, as in Flink.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .kafka_common import KafkaOffsetResetStrategy, KafkaOffsetsInitializer

if TYPE_CHECKING:
    from .kafka_source import KafkaSource

__all__ = ["READER_HANDLED", "resolve_again"]

log = logging.getLogger("streamflow.connectors.kafka_source")

# the starting offsets the reader resolves (Flink's sentinels); latest, timestamp and given offsets
# are resolved to real offsets by Flink's enumerator (``LatestOffsetsInitializer`` since FLINK-28303)
READER_HANDLED = ("earliest", "committed")


async def resolve_again(consumer: Any, source: KafkaSource, sentinels: Mapping[Any, str | bool],
                        saved: Mapping[tuple[str, int], int], subtask: int) -> dict[Any, int]:
    """The starting offsets of restored unread partitions (aiokafka ``TopicPartition`` ->
    sentinel), resolved again by their sentinel (module doc). ``True`` is the mark of a
    checkpoint of an earlier version, which names no sentinel: that partition is left out
    (it resumes at its ``saved`` offset, logged)."""
    by_kind: dict[str, list[Any]] = {}
    for tp, sentinel in sentinels.items():
        if sentinel is True:
            log.info("kafka source subtask %d: %s-%d restored unread without its starting sentinel (a "
                     "checkpoint of an earlier version): resuming at its saved offset %d", subtask,
                     tp.topic, tp.partition, saved[(tp.topic, tp.partition)])
        elif sentinel in READER_HANDLED:
            by_kind.setdefault(str(sentinel), []).append(tp)
        else:
            raise ValueError(f"kafka source: partition {tp.topic}-{tp.partition} restored unread with "
                             f"{sentinel!r}, not one of {READER_HANDLED}: not a checkpoint of this source")
    out: dict[Any, int] = {}
    for kind, tps in sorted(by_kind.items()):
        if kind == "committed" and not source.group_id:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in tps)
            raise ValueError(f"kafka source: partitions {names} restored unread at the group's committed "
                             "offset (committed_offsets()), and this source has no group id: set_group_id()")
        initializer = (KafkaOffsetsInitializer.earliest() if kind == "earliest" else
                       KafkaOffsetsInitializer.committed_offsets(
                           KafkaOffsetResetStrategy(source.starting_offsets.auto_offset_reset())))
        found = await initializer.resolve(consumer, tps, source.group_id)
        for tp, offset in found.items():
            before = saved[(tp.topic, tp.partition)]
            if offset != before:
                log.info("kafka source subtask %d: %s-%d restored unread (%s): starting at offset %d, "
                         "not its saved %d", subtask, tp.topic, tp.partition, kind, offset, before)
        out.update(found)
    return out
