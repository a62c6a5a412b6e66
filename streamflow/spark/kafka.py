"""Kafka on the Spark engine without the JVM connector: a Python streaming data source and a
sink committed per micro-batch.

Theory of operation
-------------------
**Source.** ``spark-sql-kafka`` cannot be installed here (no Maven), so a ``KafkaSource``
becomes a Python streaming data source (``pyspark.sql.datasource``, Spark 4) with the design
of Spark's own connector: the offset is ``{"topic:partition": next offset, ..., "eof": 0|1}``
and lives in Spark's checkpoint; ``latestOffset`` lists the end offsets (a bounded source's
stopping offsets are resolved once, at the first call; Trigger.AvailableNow's target, at
``prepareForTriggerAvailableNow``) and, under the ``ReadMaxRows`` limit of
``execution.spark.records-per-batch``, stops a micro-batch after that many records, shared out
by partition backlog (:func:`limit_offsets`); ``partitions(start, end)`` makes one
Spark input partition per Kafka partition range, read by an aiokafka consumer inside the
executor's Python worker (``assign`` + ``seek``, no group membership). Flink's starting offsets
and a bounded source's stopping offsets (``latest()``, ``offsets()``, ``timestamp()``) are
resolved once, at the query's first plan, into the offsets Spark's checkpoint keeps
(:mod:`.kafka_offsets`); a micro-batch is not planned past the records that exist. When every
partition has reached its stopping offset the offset's ``eof`` flips to 1 and that micro-batch
also carries the end-of-input marker row (see :mod:`.plan`). A partition started at
``earliest()``/``committed_offsets()`` and still unread when the query restarts resolves its
starting offset again, as Flink's restored split does (:mod:`.kafka_offsets`). Other stopping
offsets (a bounded source's ``committed_offsets()``, any of ``set_unbounded(stopping_offsets)``)
are refused when the job is translated: Spark would read past them. With Spark's JVM connector only
``earliest()``/``latest()`` are given to it (others are refused, naming the reason). The raw
records then pass one
``mapInArrow`` stage that runs the ``KafkaSource``'s own deserializer: the Kafka timestamp is
the element's timestamp (or the source's watermark strategy's timestamp assigner gives it, from
the record and that timestamp), and records that cannot be deserialized go to the ``DEAD_LETTER``
side output, as on the asyncio engine. With a watermark strategy (``from_source(kafka,
strategy)``) every partition known when the job is translated gets a watermark of its own and
the source's is their minimum, as on the asyncio engine and in Flink (:mod:`.watermarks`).
When Spark's JVM connector (``spark-sql-kafka``) is on the classpath, the same ``KafkaSource``
reads through ``format("kafka")`` instead (its offsets in Spark's checkpoint, in its own format:
a checkpoint of one kind does not restore the other).

**Sink.** A ``KafkaSink`` runs its own operator in the job's loop, with each micro-batch as
one checkpoint epoch: records of batch b go into one transaction whose commit marker (the
sink's ``.commits`` consumer group offset, written inside the transaction) is ``b + 1``. A
batch Spark replays after a driver crash is skipped when the marker shows it committed, and
re-written otherwise (its transaction was aborted by the fencing of the restarted producer).
The marker's token names the run of the query's checkpoint directory, so a marker written for
another checkpoint location (whose batch ids mean other records) is ignored.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

from ..connectors.kafka_sentinels import READER_HANDLED
from ..connectors.kafka_source import KafkaSource
from ..state.codec import Codec
from . import kafka_offsets
from .harness import EOF_ORDER, EOF_TS

_log = logging.getLogger(__name__)

RAW_DDL = "topic string, partition int, offset long, timestamp long, key binary, value binary, eof boolean"


def _tps(source_options: dict[str, str]) -> list[tuple[str, int]]:
    from aiokafka import AIOKafkaProducer

    async def run() -> list[tuple[str, int]]:
        # metadata through a producer: a consumer stopped before any assignment raises
        # CancelledError from its group coordinator (aiokafka 0.14)
        producer = AIOKafkaProducer(bootstrap_servers=source_options["bootstrap"])
        await producer.start()
        try:
            out: list[tuple[str, int]] = []
            for topic in source_options["topics"].split(","):
                found = await producer.partitions_for(topic)
                if not found:
                    where = source_options["bootstrap"]
                    raise ValueError(f"Kafka topic {topic!r} has no partitions at {where} (does it exist?)")
                out.extend((topic, p) for p in sorted(found))
            return out
        finally:
            await producer.stop()

    return asyncio.run(run())


def _offsets(source_options: dict[str, str], which: str) -> dict[str, int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    tps = [TopicPartition(t, p) for t, p in _tps(source_options)]

    async def run() -> dict[str, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=source_options["bootstrap"], enable_auto_commit=False,
                                    isolation_level="read_committed")
        await consumer.start()
        try:
            consumer.assign(tps)
            if which == "earliest":
                found = await consumer.beginning_offsets(tps)
            else:
                found = await consumer.end_offsets(tps)
            return {f"{tp.topic}:{tp.partition}": int(o) for tp, o in found.items()}
        finally:
            await consumer.stop()

    return asyncio.run(run())


def limit_offsets(start: dict[str, int], end: dict[str, int], max_rows: int | None) -> dict[str, int]:
    """The offsets one micro-batch reads up to: ``end``, or, when more than ``max_rows`` records
    lie between ``start`` and ``end``, ``max_rows`` of them shared out in proportion to each
    partition's backlog (as Spark's connector does with ``maxOffsetsPerTrigger``)."""
    begin = {k: int(start.get(k, 0)) for k in end}
    lag = {k: max(0, v - begin[k]) for k, v in end.items()}
    total = sum(lag.values())
    if max_rows is None or total <= max_rows:
        return {k: max(v, begin[k]) for k, v in end.items()}
    share = {k: n * max_rows // total for k, n in lag.items()}
    left = max_rows - sum(share.values())
    for k in sorted(lag, key=lambda k: (share[k] - lag[k], k)):  # the remainder: largest backlog first
        if left == 0:
            break
        if share[k] < lag[k]:
            share[k] += 1
            left -= 1
    return {k: begin[k] + share[k] for k in end}


def data_source_class() -> Any:
    """The ``streamflow_kafka`` Python data source (defined lazily: pyspark is optional)."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

    class _Range(InputPartition):
        def __init__(self, topic: str, partition: int, start: int, end: int, eof: bool) -> None:
            self.topic, self.partition, self.start, self.end, self.eof = topic, partition, start, end, eof

    class Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, options: dict[str, str]) -> None:
            self.options = options
            self._stop: dict[str, int] | None = None  # a bounded source's stopping offsets
            self._known_end: dict[str, int] = {}  # the end offsets last asked (bounded)
            self._available_now = False
            self._target: dict[str, int] | None = None  # Trigger.AvailableNow's end offsets
            self._planned = False  # initialOffset or a first latestOffset ran in this run

        def initialOffset(self) -> dict[str, Any]:
            """The starting offsets (and a bounded source's stopping offsets), resolved once:
            a restarted query starts from its checkpoint's offsets instead (kafka_offsets.py)."""
            if self.options.get("eof_only") == "true":
                return {"eof": 0}
            tps = _tps(self.options)
            start = kafka_offsets.resolve(self.options, self.options.get("starting", "earliest"), tps)
            if self.options.get("bounded") == "true":
                self._stop = kafka_offsets.resolve(self.options, self.options.get("stopping", "latest"), tps)
            _log.info("Kafka on Spark: %s starts at %s%s", self.options["topics"], start,
                      "" if self._stop is None else f", stops at {self._stop}")  # fmt: skip
            self._planned = True
            kind = kafka_offsets.initializer(self.options.get("starting", "earliest")).kind
            sentinels = {k: kind for k in start} if kind in READER_HANDLED else {}
            return kafka_offsets.with_unread(kafka_offsets.with_stops({**start, "eof": 0}, self._stop),
                                             sentinels)

        def _end(self, start: dict[str, Any]) -> dict[str, int]:
            """The offsets a micro-batch may read up to: a bounded source's stopping offsets, but
            not past the records that exist yet (else a read would wait for them)."""
            if self.options.get("bounded") != "true":
                return _offsets(self.options, "latest")
            if self._stop is None:  # planned from a checkpoint: its offsets carry the stops
                restored = kafka_offsets.stops(start)
                self._stop = restored if restored is not None else kafka_offsets.resolve(
                    self.options, self.options.get("stopping", "latest"), _tps(self.options))
            if any(v > self._known_end.get(k, -1) for k, v in self._stop.items()):
                self._known_end = _offsets(self.options, "latest")
            return {k: min(v, self._known_end.get(k, v)) for k, v in self._stop.items()}

        def prepareForTriggerAvailableNow(self) -> None:
            self._available_now = self.options.get("eof_only") != "true"

        def getDefaultReadLimit(self) -> Any:
            max_rows = int(self.options.get("max_records", 0))
            return ReadMaxRows(max_rows) if max_rows > 0 else ReadAllAvailable()

        def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict[str, int]:
            if self.options.get("eof_only") == "true":  # only the end marker (JVM connector beside it)
                return {"eof": 1}
            start = start or {}
            if self._available_now and self._target is None:
                self._target = self._end(start)
            end = self._target if self._target is not None else self._end(start)
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
            positions = kafka_offsets.positions(start)
            sentinels = kafka_offsets.unread(start)
            moved: dict[str, int] = {}
            if not self._planned:  # a restarted query: resolve its unread partitions again (module doc)
                self._planned = True
                moved = {k: v for k, v in kafka_offsets.resolve_unread(self.options, sentinels).items()
                         if v != positions.get(k)}
                if moved:
                    _log.info("Kafka on Spark: unread partitions of %s resolved again after the restart: "
                              "%s (saved: %s)", self.options["topics"], moved,
                              {k: positions.get(k) for k in moved})  # fmt: skip
                positions.update(moved)
            offsets = limit_offsets(positions, end, max_rows)
            stop = self._stop or {}
            done = self.options.get("bounded") == "true" and all(
                offsets.get(k, 0) >= v for k, v in stop.items())  # fmt: skip
            out = kafka_offsets.with_stops({**offsets, "eof": 1 if done else 0}, self._stop)
            out.update({kafka_offsets.FROM + k: v for k, v in moved.items()})
            return kafka_offsets.with_unread(out, {k: v for k, v in sentinels.items()
                                                   if offsets.get(k) == positions.get(k)})

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Any]:
            parts: list[Any] = []
            for name, stop in kafka_offsets.positions(end).items():
                topic, _, partition = name.rpartition(":")
                begin = kafka_offsets.begin(start, end, name)
                if stop > begin:
                    parts.append(_Range(topic, int(partition), begin, int(stop), False))
            if end.get("eof") and not start.get("eof"):
                parts.append(_Range("", -1, 0, 0, True))
            return parts

        def read(self, partition: Any) -> Iterator[tuple]:
            if partition.eof:
                yield ("", -1, -1, EOF_TS, None, None, True)
                return
            yield from _read_range(self.options["bootstrap"], partition.topic, partition.partition,
                                   partition.start, partition.end)

        def commit(self, end: dict[str, int]) -> None:
            return None  # offsets live in Spark's checkpoint; nothing to commit at the broker

    class KafkaDataSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "streamflow_kafka"

        def schema(self) -> str:
            return RAW_DDL

        def streamReader(self, schema: Any) -> Any:
            return Reader(dict(self.options))

    return KafkaDataSource


def _read_range(bootstrap: str, topic: str, partition: int, start: int, end: int) -> list[tuple]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[tuple]:
        tp = TopicPartition(topic, partition)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    isolation_level="read_committed", auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([tp])
            consumer.seek(tp, start)
            out: list[tuple] = []
            while True:
                position = await consumer.position(tp)
                if position >= end:
                    break
                batch = await consumer.getmany(tp, timeout_ms=1000, max_records=10_000)
                for m in batch.get(tp, []):
                    if m.offset >= end:
                        break
                    out.append((m.topic, m.partition, m.offset, m.timestamp, m.key, m.value, False))
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


class _Message:
    """What a ``KafkaRecordDeserializationSchema`` reads: aiokafka's ConsumerRecord fields."""

    __slots__ = ("headers", "key", "offset", "partition", "timestamp", "timestamp_type", "topic", "value")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int, key: Any, value: Any) -> None:
        self.topic, self.partition, self.offset, self.timestamp = topic, partition, offset, timestamp
        self.key, self.value, self.headers, self.timestamp_type = key, value, (), 0


class _Deserialize:
    """``mapInArrow``: raw Kafka rows to stage rows, with the source's own deserializer; a
    watermark strategy's timestamp assigner gives the rows' ``ts`` (it sees the Kafka timestamp,
    as on the asyncio engine); with ``splits`` (``"topic:partition"`` -> index), a ``split``
    column holds each row's (:func:`.watermarks.per_split`; -1: end of input, unknown)."""

    def __init__(self, source: KafkaSource, codec: Codec, splits: dict[str, int] | None = None) -> None:
        self.deserializer = source.deserializer
        self.codec = codec
        strategy = source.watermark_strategy
        self.assigner = strategy.create_timestamp_assigner() if strategy is not None else None
        self.splits = splits

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        from ..connectors.base import DEAD_LETTER
        from .encoding import rows_to_arrow

        encode = self.codec.encode
        for batch in batches:
            cols = batch.to_pydict()
            rows: list[tuple] = []
            msgs = []
            for i, eof in enumerate(cols["eof"]):
                if eof:
                    rows.append((EOF_ORDER, EOF_TS, None, True, b""))
                else:
                    msgs.append(_Message(cols["topic"][i], cols["partition"][i], cols["offset"][i],
                                         cols["timestamp"][i], cols["key"][i], cols["value"][i]))
            records, kept, letters = self.deserializer.deserialize_batch(msgs)
            extract = self.assigner.extract_timestamp if self.assigner is not None else None
            rows.extend(([m.offset, m.partition], m.timestamp if extract is None else extract(r, m.timestamp),
                         None, False, encode(r)) for r, m in zip(records, kept, strict=True))
            rows.extend(([m.offset, m.partition], None, DEAD_LETTER.tag_id, False, encode(m))
                        for m in letters)
            if rows:
                out = rows_to_arrow(rows)
                if self.splits is not None:
                    ends = len(rows) - len(kept) - len(letters)  # the end-of-input rows come first
                    out = self._with_splits(out, [*([None] * ends), *kept, *letters])
                yield out

    def _with_splits(self, batch: Any, messages: list[Any]) -> Any:
        """``batch`` with the ``split`` column: each row's partition index (``messages``: each
        row's message, None for an end-of-input row)."""
        import pyarrow as pa

        assert self.splits is not None
        index = self.splits
        split = [-1 if m is None else index.get(f"{m.topic}:{m.partition}", -1) for m in messages]
        return pa.RecordBatch.from_arrays([*batch.columns, pa.array(split, pa.int32())],
                                          schema=batch.schema.append(pa.field("split", pa.int32())))


def kafka_stream(
    spark: Any, source: KafkaSource, codec: Codec, records_per_batch: int = 0, per_partition: bool = True
) -> tuple[Any, int | None, bool]:
    """The stage rows of a ``KafkaSource`` on Spark, the watermark delay of its strategy (None:
    none), and whether they carry one watermark node per partition (``per_partition`` allows
    it: the query's watermark is then the minimum over them, :func:`.watermarks.per_split`); a
    micro-batch reads at most ``records_per_batch`` records (0: everything available)."""
    from .encoding import ROW_DDL
    from .watermarks import per_split, strategy_delay

    if source.topic_pattern is not None or source.partitions:
        raise ValueError("on the Spark engine a KafkaSource reads topics given by set_topics()")
    kind = source.starting_offsets.kind
    if kind not in kafka_offsets.STARTING:
        raise ValueError(f"on the Spark engine a KafkaSource cannot start at {kind}()")
    _check_stopping_offsets(source)
    strategy = source.watermark_strategy
    delay = None if strategy is None else strategy_delay(strategy, f"the Kafka source of {source.topics}")
    options = {
        "bootstrap": source.bootstrap_servers,
        "topics": ",".join(source.topics),
        "starting": kafka_offsets.spec(source.starting_offsets),
        "group": source.group_id or "",
        "bounded": "true" if source.bounded else "false",
        "max_records": str(max(0, records_per_batch)),
    }
    splits = None
    if delay is not None and per_partition:
        if strategy.idle_timeout_ms is not None:
            _log.warning("Kafka on Spark: the watermark strategy of %s has idleness, which Spark cannot "
                         "tell; its partitions share one watermark (the greatest event time minus %d ms), "
                         "so records of a partition lagging the others by more than that are late",
                         source.topics, delay)  # fmt: skip
        else:
            splits = {f"{t}:{p}": i for i, (t, p) in enumerate(_tps(options))}
            _log.info("Kafka on Spark: a watermark per partition of %s (%d), the minimum over them",
                      source.topics, len(splits))  # fmt: skip
    spark.dataSource.register(data_source_class())
    if source.stopping_offsets is not None:
        options["stopping"] = kafka_offsets.spec(source.stopping_offsets)
    if jvm_connector_available(spark):
        _check_jvm_offsets(source)
        raw = _jvm_kafka_stream(spark, source, kind, records_per_batch)
    else:
        _log.info("Kafka on Spark: %s", json.dumps(options))
        raw = spark.readStream.format("streamflow_kafka").options(**options).load()
    if splits is None:
        return raw.mapInArrow(_Deserialize(source, codec), ROW_DDL), delay, False
    assert delay is not None
    df = raw.mapInArrow(_Deserialize(source, codec, splits), ROW_DDL + ", split int")
    return per_split(df, len(splits), delay), delay, True


def _check_stopping_offsets(source: KafkaSource) -> None:
    """Refuses the stopping offsets Spark cannot honour (it would read past them, silently): a
    bounded source stops at latest() only (the data source resolves the end offsets once, at its
    first call), and an unbounded one has none: Flink's ``set_unbounded(stopping_offsets)`` stops
    each partition there while the source stays unbounded, which no Spark source does."""
    if source.stopping_offsets is None:
        return
    stop = source.stopping_offsets.kind
    if not source.bounded:
        raise ValueError(
            f"on the Spark engine a KafkaSource built with set_unbounded({stop}()) is refused: it stops "
            "each partition at its stopping offset while the source stays unbounded, which Spark cannot "
            "do (it would read past them); use set_bounded(KafkaOffsetsInitializer.latest()) or "
            "set_unbounded() without stopping offsets, or run the job on the asyncio engine")
    if stop not in kafka_offsets.STOPPING:
        raise ValueError(f"on the Spark engine a bounded KafkaSource (set_bounded) stops at latest(), "
                         f"offsets() or timestamp(), not {stop}(): run the job on the asyncio engine")


def _check_jvm_offsets(source: KafkaSource) -> None:
    """Spark's JVM connector is given earliest()/latest() only (its checkpoint keeps its own
    offsets; the others are resolved by the Python data source, which it replaces)."""
    start = source.starting_offsets.kind
    stop = None if source.stopping_offsets is None else source.stopping_offsets.kind
    if start not in ("earliest", "latest") or stop not in (None, "latest"):
        raise ValueError(
            f"on the Spark engine with Spark's Kafka connector (spark-sql-kafka) a KafkaSource starts at "
            f"earliest() or latest() and stops at latest(), not {start}()/{stop}(): the other offsets "
            "are honoured by streamflow's Python Kafka data source, used without that connector")


JVM_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def jvm_connector_available(spark: Any) -> bool:
    """Whether ``spark-sql-kafka`` is on the classpath (``--packages
    org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>`` on a cluster)."""
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(JVM_PROVIDER)
    except Exception as exc:  # py4j wraps ClassNotFoundException
        _log.debug("Kafka on Spark: no JVM connector (%s); using the Python data source", type(exc).__name__)
        return False
    return True


def _jvm_kafka_stream(spark: Any, source: KafkaSource, kind: str, records_per_batch: int) -> Any:
    """Spark's own Kafka source, in the raw layout of the Python one; a bounded source gets
    its end-of-input marker from the Python data source (which then reads nothing else)."""
    from pyspark.sql import functions as F

    _log.info("Kafka on Spark: the JVM connector (format kafka) reads %s", source.topics)
    reader = spark.readStream.format("kafka")
    if records_per_batch > 0:
        reader = reader.option("maxOffsetsPerTrigger", records_per_batch)
    raw = (
        reader
        .option("kafka.bootstrap.servers", source.bootstrap_servers)
        .option("subscribe", ",".join(source.topics))
        .option("startingOffsets", kind)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select(
            "topic", "partition", "offset", F.unix_millis("timestamp").alias("timestamp"), "key", "value",
            F.lit(False).alias("eof"),
        )
    )
    if not source.bounded:
        return raw
    marker = spark.readStream.format("streamflow_kafka").option("eof_only", "true").load()
    return raw.unionByName(marker)
