"""Record a Kafka topic to a file, replay it into a broker, or read it as a bounded source.

The recording format (JSON lines, documented in docs/kafka.md):

* line 1, the header: ``{"format": "streamflow-kafka-recording", "version": 1, "topic": T,
  "partitions": N}``;
* then one line per record, partition by partition in offset order:
  ``{"p": partition, "o": offset, "ts": timestamp ms, "k": key, "v": value, "h": headers}`` where
  key and value are base64 strings or null and headers a list of ``[name, base64]``.

Base64 keeps every byte exact; JSON lines keep the file readable with standard tools.

* :func:`record_topic` reads a topic up to its end offsets (read_committed by default) into a file;
* :func:`replay_file` produces a recording into a topic with the same partitions, keys, values,
  headers and timestamps (creating the topic with the recorded partition count if needed);
* :class:`ReplaySource` re-emits a recording in a job as a bounded source: the same partitions
  (assigned to subtasks as the KafkaSource does), the recorded timestamps as element timestamps,
  per-partition watermarks like the KafkaSource's (``from_source(src, strategy)``), as fast as
  possible or paced by the recorded timestamps (``speed``: 1.0 real time, 10.0 ten times faster).
  Positions (per partition: the next recorded offset) live in checkpoints.

``record_cli`` / ``replay_cli`` are what ``streamflow kafka record|replay`` call.
"""

from __future__ import annotations

import asyncio
import binascii
import heapq
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .base import END, Source, SourceReader
from .kafka_common import KafkaRecordDeserializationSchema, KafkaTopicPartition
from .kafka_source import split_owner
from .serialization import DeserializationSchema

__all__ = ["RecordedRecord", "ReplaySource", "read_recording", "record_topic", "replay_file"]

log = logging.getLogger(__name__)
FORMAT = "streamflow-kafka-recording"


@dataclass(frozen=True)
class RecordedRecord:
    """One recorded record; it has the attributes of aiokafka's ``ConsumerRecord`` that matter."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = field(default=())


def _b64(data: bytes | None) -> str | None:
    return None if data is None else binascii.b2a_base64(data, newline=False).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else binascii.a2b_base64(text)


def read_recording(path: str | Path) -> tuple[dict[str, Any], list[RecordedRecord]]:
    """(header, records) of a recording file."""
    with open(path, "rb") as f:
        lines = f.read().splitlines()
    if not lines:
        raise ValueError(f"{path}: empty file, not a Kafka recording")
    header = orjson.loads(lines[0])
    if header.get("format") != FORMAT:
        raise ValueError(f"{path}: not a Kafka recording (header {lines[0][:100]!r})")
    topic = header["topic"]
    records = []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            d = orjson.loads(line)
            records.append(RecordedRecord(topic, int(d["p"]), int(d["o"]), int(d["ts"]), _unb64(d.get("k")),
                                          _unb64(d.get("v")),
                                          tuple((h, _unb64(v) or b"") for h, v in d.get("h") or ())))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: malformed recording line: {exc}") from exc
    return header, records


async def record_topic(bootstrap_servers: str, topic: str, path: str | Path, *, committed: bool = True,
                       timeout: float = 60.0) -> int:
    """Write every record of ``topic`` (up to the end offsets seen at the start) to ``path``;
    returns the number of records."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False, group_id=None,
                                isolation_level="read_committed" if committed else "read_uncommitted")
    await consumer.start()
    try:
        await consumer.topics()
        parts = consumer.partitions_for_topic(topic)
        if parts is None:
            raise ValueError(f"kafka record: topic {topic!r} does not exist at {bootstrap_servers}")
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        got: dict[Any, list] = {tp: [] for tp in tps}
        deadline = time.monotonic() + timeout
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka record: {topic!r} not read to its end offsets {ends} "
                                   f"within {timeout}s")
            batch = await consumer.getmany(timeout_ms=200)
            for tp, msgs in batch.items():
                got[tp].extend(m for m in msgs if m.offset < ends[tp])
    finally:
        await consumer.stop()
    lines = [orjson.dumps({"format": FORMAT, "version": 1, "topic": topic, "partitions": len(tps)})]
    count = 0
    for tp in tps:
        for m in got[tp]:
            lines.append(orjson.dumps({"p": m.partition, "o": m.offset, "ts": m.timestamp, "k": _b64(m.key),
                                       "v": _b64(m.value),
                                       "h": [[h, _b64(v)] for h, v in (m.headers or ())]}))
            count += 1
    Path(path).write_bytes(b"\n".join(lines) + b"\n")
    log.info("kafka record: %d records of %r (%d partitions) written to %s", count, topic, len(tps), path)
    return count


async def replay_file(path: str | Path, bootstrap_servers: str, topic: str | None = None) -> int:
    """Produce a recording into ``topic`` (default: the recorded one) with the same partitions,
    keys, values, headers and timestamps; returns the number of records."""
    from aiokafka import AIOKafkaProducer

    from ..testing.kafka_broker import create_topic

    header, records = read_recording(path)
    target = topic or header["topic"]
    # a missing topic is created with time retention off: the records keep their recorded
    # timestamps, and a broker's time retention would delete those older than it at once
    created = await create_topic(bootstrap_servers, target, int(header["partitions"]),
                                 config={"retention.ms": "-1"})
    oldest = min((r.timestamp for r in records if r.timestamp is not None and r.timestamp >= 0), default=None)
    if not created and oldest is not None and time.time() * 1000 - oldest > 86_400_000:
        log.warning("kafka replay: %s holds records with timestamps back to %d ms (%s UTC) and topic %r "
                    "exists: if its retention.ms is shorter, the broker deletes them at its next cleanup",
                    path, oldest, time.strftime("%Y-%m-%d", time.gmtime(oldest / 1000)), target)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(target, r.value, key=r.key, partition=r.partition,
                                       timestamp_ms=r.timestamp, headers=list(r.headers) or None)
                   for r in records]
        for fut in futures:
            await fut
    finally:
        await producer.stop()
    log.info("kafka replay: %d records from %s produced into %r", len(records), path, target)
    return len(records)


def record_cli(args: Any) -> int:
    """``streamflow kafka record``: ``args.bootstrap_servers``, ``args.topic``, ``args.file``."""
    n = asyncio.run(record_topic(args.bootstrap_servers, args.topic, args.file))
    print(f"recorded {n} records of {args.topic} to {args.file}")
    return 0


def replay_cli(args: Any) -> int:
    """``streamflow kafka replay``: ``args.bootstrap_servers``, ``args.topic``, ``args.file``."""
    n = asyncio.run(replay_file(args.file, args.bootstrap_servers, args.topic))
    print(f"replayed {n} records from {args.file} into {args.topic}")
    return 0


class ReplaySource(Source):
    """A recording as a bounded source (see the module docstring)."""

    supports_parallelism = True
    bounded = True

    def __init__(self, path: str | Path, deserializer: DeserializationSchema | Callable[[bytes], Any]
                 | KafkaRecordDeserializationSchema, *, speed: float | None = None) -> None:
        self.path = Path(path)
        if not isinstance(deserializer, KafkaRecordDeserializationSchema):
            deserializer = KafkaRecordDeserializationSchema.value_only(deserializer)
        self.deserializer = deserializer
        if speed is not None and speed <= 0:
            raise ValueError(f"ReplaySource speed must be > 0, got {speed}")
        self.speed = speed
        self.watermark_strategy: Any = None
        self.watermark_interval_ms = 200

    def with_watermark_strategy(self, strategy: Any, interval_ms: int = 200) -> ReplaySource:
        import copy

        source = copy.copy(self)
        source.watermark_strategy, source.watermark_interval_ms = strategy, interval_ms
        return source

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        return _ReplayReader(self, subtask_index, parallelism)


class _ReplayReader(SourceReader):
    def __init__(self, source: ReplaySource, subtask: int, parallelism: int) -> None:
        self.source = source
        self.subtask, self.parallelism = subtask, parallelism
        self.positions: dict[int, int] = {}  # partition -> next offset to emit
        self._restored: dict[int, int] = {}
        self._queue: list[tuple[int, int, int, RecordedRecord]] = []  # (ts, partition, offset, record)
        self.dead_letters: list[Any] = []
        self.watermarks: Any = None
        self._index: dict[int, int] = {}
        self._left: dict[int, int] = {}  # partition -> its records not yet emitted
        self._start_wall = 0.0
        self._first_ts = 0
        self._wake: Callable[[], None] = lambda: None
        self._timer: asyncio.TimerHandle | None = None

    def snapshot_position(self) -> list[list[int]]:
        return [[p, o] for p, o in sorted(self.positions.items())]

    rescalable_position = True  # as the Kafka source's: a partition's offset goes to its owner now

    def restore_positions(self, positions: list[Any]) -> None:
        self._restored = {int(p): int(o) for position in positions for p, o in position or ()}

    async def start(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        header, records = await asyncio.to_thread(read_recording, self.source.path)
        topic = header["topic"]
        mine = {p for p in range(int(header["partitions"]))
                if split_owner(KafkaTopicPartition(topic, p), self.parallelism) == self.subtask}
        if self.source.watermark_strategy is not None:
            from ..clock import SystemClock
            from .kafka_watermarks import PartitionWatermarks

            self.watermarks = PartitionWatermarks(self.source.watermark_strategy, SystemClock(),
                                                  self.source.watermark_interval_ms)
        for i, p in enumerate(sorted(mine)):
            self._index[p] = i
            self.positions[p] = self._restored.get(p, 0)
            if self.watermarks is not None:
                self.watermarks.add_partition(i)
        for r in records:
            if r.partition in mine and r.offset >= self.positions[r.partition]:
                self._queue.append((r.timestamp, r.partition, r.offset, r))
                self._left[r.partition] = self._left.get(r.partition, 0) + 1
        heapq.heapify(self._queue)  # the recorded interleaving across partitions: by timestamp
        self._first_ts = self._queue[0][0] if self._queue else 0
        self._start_wall = time.monotonic()

    def poll_batch(self, max_records: int) -> Any:
        wm = self.watermarks
        if wm is not None:
            wm.on_periodic()
            event = wm.take()
            if event is not None:
                return event
        if not self._queue:
            return END
        partition = self._queue[0][1]
        limit = None
        if self.source.speed is not None:
            limit = self._first_ts + (time.monotonic() - self._start_wall) * 1000 * self.source.speed
            if self._queue[0][0] > limit:
                self._schedule((self._queue[0][0] - limit) / 1000 / self.source.speed)
                return None
        batch: list[RecordedRecord] = []
        while self._queue and len(batch) < max_records and self._queue[0][1] == partition and (
                limit is None or self._queue[0][0] <= limit):
            batch.append(heapq.heappop(self._queue)[3])
        self.positions[partition] = batch[-1].offset + 1
        values, kept, letters = self.source.deserializer.deserialize_batch(batch)
        self.dead_letters.extend(letters)
        timestamps = [r.timestamp for r in kept]
        if wm is not None:
            timestamps = wm.timestamps(values, timestamps)
            wm.on_batch(self._index[partition], values, timestamps)
        self._left[partition] -= len(batch)
        if not self._left[partition] and wm is not None:  # read to its end (Flink's splitFinished)
            wm.finish_partition(self._index[partition])
        return (values, timestamps)

    def _schedule(self, delay_s: float) -> None:
        # one pending timer; it clears itself when it fires (asyncio may run it up to a clock
        # resolution early, so "when() < time()" cannot tell whether it has fired)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(max(delay_s, 0.001), self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._wake()

    def take_dead_letters(self) -> list[Any]:
        out, self.dead_letters = self.dead_letters, []
        return out

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
