"""The Kafka source's reader: one subtask's partitions, their offsets, and the fetch loop.

Theory of operation
-------------------
Modelled on Flink's FLIP-27 ``KafkaSource`` (apache/flink-connector-kafka
``.../source/KafkaSource.java``, ``enumerator/KafkaSourceEnumerator.java``,
``reader/KafkaPartitionSplitReader.java``), without consumer-group membership:

* **Assignment.** Each subtask's reader lists the subscribed partitions (a
  topic list, a regex pattern, or fixed partitions) and keeps the ones it owns
  by Flink's rule ``(start(topic) + partition) % parallelism`` with
  ``start(topic) = (topic.hashCode() * 31 & 0x7FFFFFFF) % parallelism``, Java's
  ``String.hashCode`` (``KafkaSourceEnumerator.getSplitOwner``, :mod:`.kafka_assignment`), so a
  partition lands on the subtask Flink gives it. Every subtask computes the same
  answer, so no coordinator is needed. It ``assign()``s them to a plain
  aiokafka consumer; a group id, if given, only receives committed offsets for
  monitoring (and serves ``committed_offsets()``). Discovery repeats every
  ``partition.discovery.interval.ms`` (unbounded only; a non-positive interval
  disables it, as in Flink): the partitions of the first listing start at the
  starting-offsets initializer's offsets, partitions found later (and, after a
  restore, any not in the checkpoint) at their earliest (Flink's FLIP-288).
* **Fetching.** One asyncio task per reader (in the job's loop) calls
  ``getmany`` and deserializes each partition's batch in one comprehension
  into a chunk ``(partition, records, timestamps, next_offset)``; chunks wait
  in a queue bounded by record count (backpressure: the fetch task waits).
  ``poll_batch`` never blocks: it hands out queued chunks (or ``None``).
* **Positions.** The position of a partition is the offset after the last
  record *emitted* (not fetched), so a checkpoint's position is exact; restore
  seeks there. A subtask's position holds only the partitions it owns, so the
  positions of all subtasks are disjoint: a restore at any parallelism hands
  each reader all of them and it keeps those the owner rule gives it now
  (``restore_positions``; Flink redistributes restored splits as list state
  instead, so after a rescale a partition may sit on another subtask than in
  Flink, still read once: a strict xfail in tests/test_kafka_enumerator.py). A
  partition's stopping offset, once resolved, is part of its position (Flink's
  split keeps it: ``KafkaPartitionSplitState#toKafkaPartitionSplit``), so a
  bounded job restored in the middle stops where it would have stopped.
* **Offset commits.** On checkpoint completion the checkpoint's offsets are
  committed to the group (best effort, logged on failure: Flink's
  ``commit.offsets.on.checkpoint``, on by default when a group id is set),
  except those of *unread* partitions: Flink's reader commits a split's offset
  only when it is a real one (``KafkaSourceReader#snapshotState``: ``startingOffset
  >= 0``), and a split started at ``earliest()`` or ``committed_offsets()`` (and
  every partition discovered later, started at earliest) carries a sentinel
  until its first record is emitted. Here the position is the resolved offset,
  and the sentinel's name marks it unread until a record was emitted; it is
  checkpointed with it, and on restore an unread partition resolves its
  sentinel again while a read one resumes at its exact position
  (:mod:`.kafka_sentinels`).
* **Bounded mode.** Stopping offsets are resolved when a partition is first
  assigned (``latest()``: the end offsets then) and restored with its
  position; a partition is done when its position reaches its stop offset;
  the reader ends when all its partitions are done and the queue is
  empty. A reader that owns no partition ends at once (bounded) or marks
  itself idle (unbounded), so downstream watermarks never wait for it; when
  discovery gives it a partition it marks itself active before its first record.
* **Bad records** (deserialization raised) become :class:`KafkaDeadLetter`
  entries (raw bytes, topic, partition, offset, reason), routed by the task
  to the ``DEAD_LETTER`` side output and counted in ``numRecordsMalformed``;
  without a consumer of that side output the job fails, naming the record.
* **Event time** per partition lives in :mod:`.kafka_watermarks`; the Kafka
  record timestamp is each element's timestamp.

The source itself (its settings and PyFlink's builder) is :class:`~.kafka_source.KafkaSource`;
``KafkaSource.create_reader`` makes one :class:`KafkaSourceReader` per subtask.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import END, SourceReader
from .kafka_assignment import split_owner, subscribed_partitions
from .kafka_common import KafkaOffsetsInitializer, KafkaTopicPartition, consumer_config
from .kafka_reader_metrics import KafkaSourceReaderMetrics
from .kafka_sentinels import READER_HANDLED, resolve_again

if TYPE_CHECKING:
    from .kafka_source import KafkaSource

__all__ = ["QUEUE_LIMIT", "KafkaSourceReader", "split_owner"]

log = logging.getLogger("streamflow.connectors.kafka_source")  # the name users configure

QUEUE_LIMIT = 20_000  # records fetched ahead of the task, per reader


@dataclass
class _Split:
    """One partition owned by this reader."""

    tp: Any  # aiokafka TopicPartition
    index: int  # stable slot for per-partition watermarks
    position: int  # next offset to emit
    fetched: int  # next offset to fetch
    stop: int | None = None
    done: bool = False
    queued: int = 0  # fetched batches of it not yet emitted
    aligned_out: bool = False  # paused by watermark alignment (align_splits)
    # Flink's sentinel ("earliest"/"committed") while nothing was emitted from it (not committed);
    # None once a record was
    unread: str | bool | None = None


class KafkaSourceReader(SourceReader):
    """One subtask of a :class:`KafkaSource` (see the module docstring)."""

    def __init__(self, source: KafkaSource, subtask: int, parallelism: int) -> None:
        self.source = source
        self.subtask = subtask
        self.parallelism = parallelism
        self.splits: dict[tuple[str, int], _Split] = {}
        self.dead_letters: list[Any] = []
        self._restored: dict[tuple[str, int], int] = {}
        self._restored_stops: dict[tuple[str, int], int] = {}  # the stopping offsets restored with them
        # restored partitions still unread: their sentinel (True: an older checkpoint's, unnamed)
        self._restored_unread: dict[tuple[str, int], str | bool] = {}
        self._initial_discovery_done = False  # a restored reader's first listing is not its initial one
        self._queue: deque[tuple[_Split, list, list[int], list[int], int]] = deque()
        self._queued = 0
        self._space = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._consumer: Any = None
        self._wake: Callable[[], None] = lambda: None
        self._idle_sent = False
        # the offsets of each checkpoint taken and not yet completed (committed when it completes)
        self._to_commit: dict[int, dict[tuple[str, int], int]] = {}
        self._commit_task: asyncio.Task[None] | None = None
        self._commit_next: tuple[int, dict[tuple[str, int], int]] | None = None  # after the running one
        self.watermarks: Any = None  # kafka_watermarks.PartitionWatermarks when a strategy is set
        self._metrics: KafkaSourceReaderMetrics | None = None  # set_metric_group

    # -- metrics -------------------------------------------------------------
    def set_metric_group(self, group: Any) -> None:
        """Called by the job before ``start``: Flink's KafkaSourceReader metrics
        (:mod:`.kafka_reader_metrics`)."""
        self._metrics = KafkaSourceReaderMetrics(group)

    def _pending_records(self, split: _Split) -> int:
        consumer = self._consumer
        try:
            high = consumer.highwater(split.tp) if consumer is not None else None
        except AssertionError:  # aiokafka asserts the partition is assigned; a finished one is not
            high = None
        return max(0, high - split.position) if high is not None else 0

    # -- positions -----------------------------------------------------------
    def _positions(self) -> dict[tuple[str, int], int]:
        pos = {key: s.position for key, s in self.splits.items()}
        for key, off in self._restored.items():
            pos.setdefault(key, off)
        return pos

    def _unread(self, key: tuple[str, int]) -> str | bool | None:
        """The partition's sentinel while it is unread (module doc: offset commits), else None."""
        split = self.splits.get(key)
        return split.unread if split is not None else self._restored_unread.get(key)

    def _entries(self, pos: dict[tuple[str, int], int]) -> list[list[Any]]:
        """``[topic, partition, offset]``, with the partition's stopping offset appended when it
        has one (module doc: a restored split keeps it), and ``[topic, partition, offset, stop or
        None, sentinel]`` for an unread partition (module doc: offset commits)."""
        out: list[list[Any]] = []
        for (t, p), off in sorted(pos.items()):
            split = self.splits.get((t, p))
            stop = split.stop if split is not None else self._restored_stops.get((t, p))
            sentinel = self._unread((t, p))
            if sentinel:
                out.append([t, p, off, stop, sentinel])
            else:
                out.append([t, p, off] if stop is None else [t, p, off, stop])
        return out

    def snapshot_position(self) -> list[list[Any]]:
        return self._entries(self._positions())

    def snapshot_for_checkpoint(self, checkpoint_id: int) -> list[list[Any]]:
        pos = self._positions()
        if self.source.commit_offsets_on_checkpoint:  # Flink commits no unread partition (module doc)
            self._to_commit[checkpoint_id] = {key: off for key, off in pos.items() if not self._unread(key)}
        return self._entries(pos)

    rescalable_position = True

    def restore_positions(self, positions: list[Any]) -> None:
        """Every former subtask's ``[[topic, partition, offset(, stopping offset(, sentinel))], ...]``
        (``_entries``); keeps the partitions this subtask owns at its parallelism (module doc)."""
        restored: dict[tuple[str, int], int] = {}
        stops: dict[tuple[str, int], int] = {}
        unread: dict[tuple[str, int], str | bool] = {}
        for position in positions:
            for t, p, off, *rest in position or ():
                key = (str(t), int(p))
                if key in restored:
                    raise ValueError(
                        f"kafka source: the checkpoint holds two positions for partition {t}-{p} "
                        f"({restored[key]} and {off}): it is not a checkpoint of this source"
                    )
                restored[key] = int(off)
                if rest and rest[0] is not None:
                    stops[key] = int(rest[0])
                if len(rest) > 1 and rest[1]:
                    unread[key] = rest[1]  # checked by resolve_again
        self._initial_discovery_done = True  # Flink keeps initialDiscoveryFinished in its state
        self._restored = {
            key: off for key, off in restored.items()
            if split_owner(KafkaTopicPartition(*key), self.parallelism) == self.subtask
        }  # fmt: skip
        if self.source.stopping_offsets is None and stops:
            log.info("kafka source subtask %d: the checkpoint holds stopping offsets; this source has "
                     "none: reading on past them", self.subtask)
            stops = {}
        self._restored_stops = {key: off for key, off in stops.items() if key in self._restored}
        self._restored_unread = {key: s for key, s in unread.items() if key in self._restored}
        if len(positions) != self.parallelism:
            log.info("kafka source subtask %d: restored %d of %d partitions' offsets from %d subtasks",
                     self.subtask, len(self._restored), len(restored), len(positions))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Commits the offsets of checkpoint ``checkpoint_id`` itself, as Flink's KafkaSourceReader
        does: a later checkpoint's, taken while this one was in flight, may never complete; the
        entries of earlier checkpoints are dropped (this one subsumes them)."""
        offsets = self._to_commit.pop(checkpoint_id, None)
        for older in [c for c in self._to_commit if c < checkpoint_id]:
            del self._to_commit[older]
        if not offsets or self._consumer is None:
            return
        # Flink's fetcher commits every completed checkpoint's offsets in turn; one commit runs at a
        # time here, and the newest checkpoint completed meanwhile is committed after it (it
        # subsumes any other that completed during the running commit)
        self._commit_next = (checkpoint_id, offsets)
        if self._commit_task is None or self._commit_task.done():
            self._commit_task = asyncio.get_running_loop().create_task(self._commit())

    async def _commit(self) -> None:
        from aiokafka import TopicPartition
        from aiokafka.structs import OffsetAndMetadata

        while self._commit_next is not None:
            (checkpoint_id, offsets), self._commit_next = self._commit_next, None
            try:
                await self._consumer.commit(
                    {TopicPartition(t, p): OffsetAndMetadata(off, "") for (t, p), off in offsets.items()}
                )
            except Exception as exc:  # monitoring only: the offsets that matter are in the checkpoint
                log.warning("kafka source: committing offsets of checkpoint %d to group %r failed: %r",
                            checkpoint_id, self.source.group_id, exc)
                if self._metrics is not None:
                    self._metrics.record_failed_commit()
            else:
                if self._metrics is not None:
                    self._metrics.record_committed(offsets)

    # -- lifecycle -----------------------------------------------------------
    async def start(self, wake: Callable[[], None]) -> None:
        from aiokafka import AIOKafkaConsumer

        self._wake = wake
        src = self.source
        if src.watermark_strategy is not None:
            from ..clock import SystemClock
            from .kafka_watermarks import PartitionWatermarks

            self.watermarks = PartitionWatermarks(src.watermark_strategy, SystemClock(),
                                                  src.watermark_interval_ms)
        self._consumer = AIOKafkaConsumer(
            **consumer_config(src.bootstrap_servers, src.group_id, src.properties,
                              f"{src.client_id_prefix}-{self.subtask}",
                              src.starting_offsets.auto_offset_reset())
        )
        await self._consumer.start()
        await self._discover()
        self._task = asyncio.get_running_loop().create_task(self._fetch_loop())

    async def close(self) -> None:
        for task in (self._task, self._commit_task):
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except BaseException as exc:
                    if not isinstance(exc, asyncio.CancelledError):
                        log.warning("kafka source: background task ended with %r", exc)
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            await consumer.stop()

    # -- discovery -----------------------------------------------------------
    async def _subscribed(self) -> list[KafkaTopicPartition]:
        """The subscribed partitions (:func:`.kafka_assignment.subscribed_partitions`), from fresh
        metadata of every topic: the consumer's own (``partitions_for_topic``) follows only the
        assigned topics, so it would never show a partition added to one, nor a topic created
        since that matches the pattern (aiokafka's ``topics()`` does not update it)."""
        return subscribed_partitions(self.source, await self._consumer._client.fetch_all_metadata())

    async def _discover(self) -> None:
        from aiokafka import TopicPartition

        owned = [tp for tp in await self._subscribed() if split_owner(tp, self.parallelism) == self.subtask]
        new = [tp for tp in owned if (tp.topic, tp.partition) not in self.splits]
        initial, self._initial_discovery_done = not self._initial_discovery_done, True
        if not new:
            return
        consumer = self._consumer
        new_tps = [TopicPartition(tp.topic, tp.partition) for tp in new]
        fresh = [t for t in new_tps if (t.topic, t.partition) not in self._restored]
        # Flink (FLIP-288): the starting offsets apply to the partitions of the first listing only;
        # a partition found later (added to a topic, a new topic matching the pattern, or one not
        # in the restored checkpoint) is read from its earliest offset, so no record written to it
        # before discovery saw it is skipped
        starting = self.source.starting_offsets if initial else KafkaOffsetsInitializer.earliest()
        if fresh and not initial:
            log.info("kafka source subtask %d: partitions %s discovered after the start: reading them "
                     "from the earliest offset", self.subtask, [f"{t.topic}-{t.partition}" for t in fresh])
        starts = await starting.resolve(consumer, fresh, self.source.group_id)
        again = await resolve_again(consumer, self.source, {
            t: self._restored_unread[(t.topic, t.partition)] for t in new_tps
            if (t.topic, t.partition) in self._restored_unread}, self._restored, self.subtask)
        # a restored partition keeps the stopping offset of its checkpoint (module doc)
        unresolved = [t for t in new_tps if (t.topic, t.partition) not in self._restored_stops]
        stops = (await self.source.stopping_offsets.resolve(consumer, unresolved, self.source.group_id)
                 if self.source.stopping_offsets is not None else {})
        stops.update({t: self._restored_stops[(t.topic, t.partition)] for t in new_tps
                      if (t.topic, t.partition) in self._restored_stops})
        for t in new_tps:
            key = (t.topic, t.partition)
            pos = again.get(t, self._restored.get(key, starts.get(t)))
            if pos is None:
                raise ValueError(f"kafka source: no starting offset for {t.topic}-{t.partition}")
            # Flink's EARLIEST_OFFSET and COMMITTED_OFFSET splits: the reader, not the enumerator,
            # resolves them, so their offset is committed only once a record was read (module doc)
            restored_sentinel = self._restored_unread.get(key)
            unread = (restored_sentinel or None if key in self._restored
                      else starting.kind if starting.kind in READER_HANDLED else None)
            split = _Split(t, len(self.splits), pos, pos, stops.get(t), unread=unread)
            split.done = split.stop is not None and pos >= split.stop
            self.splits[key] = split
            if self._metrics is not None:
                self._metrics.register_partition(key, functools.partial(self._pending_records, split))
            log.info("kafka source subtask %d: assigned %s-%d from offset %d%s", self.subtask, t.topic,
                     t.partition, pos, "" if split.stop is None else f" to {split.stop}")
            if self.watermarks is not None:
                self.watermarks.add_partition(split.index)
        active = [s for s in self.splits.values() if not s.done]
        consumer.assign([s.tp for s in active])
        for s in active:
            consumer.seek(s.tp, s.fetched)

    # -- fetching ------------------------------------------------------------
    async def _fetch_loop(self) -> None:
        try:
            await self._fetch()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self._error = exc
            self._wake()

    async def _fetch(self) -> None:
        loop = asyncio.get_running_loop()
        consumer = self._consumer
        interval = self.source.discovery_interval_ms / 1000
        next_discovery = loop.time() + interval if interval else None
        while True:
            while self._queued >= QUEUE_LIMIT:
                self._space.clear()
                await self._space.wait()
            if next_discovery is not None and loop.time() >= next_discovery:
                await self._discover()
                next_discovery = loop.time() + interval
            if not any(not s.done for s in self.splits.values()):
                if self.source.bounded or next_discovery is None:
                    self._wake()
                    return
                await asyncio.sleep(max(0.0, next_discovery - loop.time()))
                continue
            fetched = await consumer.getmany(timeout_ms=100, max_records=QUEUE_LIMIT - self._queued)
            for tp, msgs in fetched.items():
                split = self.splits.get((tp.topic, tp.partition))
                if split is None or split.done or not msgs:
                    continue
                if split.stop is not None and msgs[-1].offset >= split.stop:
                    msgs = [m for m in msgs if m.offset < split.stop]
                    split.done = True
                    consumer.pause(tp)
                if msgs:
                    split.fetched = msgs[-1].offset + 1
                    self._enqueue(split, msgs)
                else:
                    self._finished(split)
            if not fetched and self.source.stopping_offsets is not None:
                await self._check_stops()
            if fetched or self.watermarks is not None:  # periodic watermarks and idleness need polls
                self._wake()

    async def _check_stops(self) -> None:
        """With stopping offsets: a partition whose consumer position passed its stop offset (control
        records) is done."""
        for split in self.splits.values():
            if split.done or split.stop is None:
                continue
            if await self._consumer.position(split.tp) >= split.stop:
                split.done = True
                self._consumer.pause(split.tp)
                self._finished(split)

    def _finished(self, split: _Split) -> None:
        """A bounded partition done and emitted: its watermark holds no one back."""
        if split.done and not split.queued and self.watermarks is not None:
            self.watermarks.finish_partition(split.index)

    def _enqueue(self, split: _Split, msgs: list) -> None:
        records, kept, letters = self.source.deserializer.deserialize_batch(msgs)
        if letters:
            self.dead_letters.extend(letters)
        timestamps = [m.timestamp for m in kept]
        offsets = [m.offset for m in kept]
        self._queue.append((split, records, timestamps, offsets, msgs[-1].offset + 1))
        self._queued += len(records)
        split.queued += 1

    # -- the task's side -----------------------------------------------------
    def poll_batch(self, max_records: int) -> Any:
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        if self._idle_sent and self.splits:  # discovery gave it a partition: active again first
            from ..runtime.events import WatermarkStatus

            self._idle_sent = False
            return WatermarkStatus.ACTIVE
        wm = self.watermarks
        if wm is not None:
            wm.on_periodic()
            pending = wm.take()
            if pending is not None:
                return pending
        if not self._queue:
            if self._task is not None and self._task.done() and not self.dead_letters:
                return END
            if not self.splits and not self._idle_sent and not self.source.bounded:
                self._idle_sent = True  # no partition at all: never hold back downstream watermarks
                from ..runtime.events import WatermarkStatus

                return WatermarkStatus.IDLE
            return None
        split, records, timestamps, offsets, next_offset = self._queue[0]
        if len(records) > max_records:
            self._queue[0] = (split, records[max_records:], timestamps[max_records:], offsets[max_records:],
                              next_offset)
            records, timestamps = records[:max_records], timestamps[:max_records]
            offsets = offsets[:max_records]
            split.position = offsets[-1] + 1
        else:
            self._queue.popleft()
            split.position = next_offset
            split.queued -= 1
        split.unread = None
        if self._metrics is not None and offsets:
            self._metrics.record_current_offset((split.tp.topic, split.tp.partition), offsets[-1])
        self._queued -= len(records)
        if self._queued < QUEUE_LIMIT:
            self._space.set()
        if wm is not None:
            timestamps = wm.timestamps(records, timestamps)
            wm.on_batch(split.index, records, timestamps)
            self._finished(split)  # after its last batch's timestamps: then it leaves the combination
        return (records, timestamps)

    def align_splits(self, max_allowed_watermark: int) -> None:
        """FLIP-217: partitions whose watermark is above ``max_allowed_watermark`` stop fetching
        (what was fetched is still emitted); their idleness clock stops (FLIP-471, ``pause``)."""
        wm = self.watermarks
        if wm is None:
            return
        for split in self.splits.values():
            emitter = wm.emitters.get(split.index)
            if split.done or emitter is None:
                continue
            ahead = emitter.current_watermark > max_allowed_watermark
            if ahead != split.aligned_out:
                split.aligned_out = ahead
                (self._consumer.pause if ahead else self._consumer.resume)(split.tp)
                (wm.pause if ahead else wm.resume)(split.index)
                log.debug("%s-%d %s: its watermark %d, the group's max allowed %d", split.tp.topic,
                          split.tp.partition, "paused" if ahead else "resumed", emitter.current_watermark,
                          max_allowed_watermark)  # fmt: skip

    def take_dead_letters(self) -> list[Any]:
        out, self.dead_letters = self.dead_letters, []
        return out
