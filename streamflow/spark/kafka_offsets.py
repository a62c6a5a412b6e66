"""Flink's Kafka ``OffsetsInitializer``\\ s on the Spark engine's Python Kafka data source.

Theory of operation
-------------------
A ``KafkaSource``'s starting offsets (``earliest()``, ``latest()``, ``offsets({...})``,
``timestamp(ms)``, ``committed_offsets(reset)``) and a bounded source's stopping offsets
(``latest()``, ``offsets({...})``, ``timestamp(ms)``) travel to the data source as a JSON spec
(:func:`spec`) in its string options, and are resolved by the asyncio engine's own
``KafkaOffsetsInitializer.resolve`` (:func:`resolve`), so both engines give the same offsets:
``timestamp(ms)`` is aiokafka's ``offsets_for_times`` (a partition without a record at or after
the time: its end offset); ``committed_offsets`` reads the group's committed offsets
(``set_group_id``), the reset strategy for a partition without one; ``offsets({...})`` the
given offsets, the reset strategy for a partition not named.

Both are resolved **once**, when the query first plans (the data source's ``initialOffset``),
as Flink resolves them once at the start. The starting offsets are that first offset, which
Spark writes to its checkpoint's offset log; the stopping offsets ride along in every offset
as ``"stop:topic:partition"`` entries (:func:`with_stops`, :func:`stops`), so a query restarted
from its checkpoint reads both back from Spark's offset log and never re-resolves them (a
timestamp resolved again could name other offsets once more records arrive). A restarted
query never calls ``initialOffset``: Spark starts it from the offsets in its log.

**Unread partitions** follow Flink's split sentinels (:mod:`streamflow.connectors.kafka_sentinels`):
a partition started at ``earliest()`` or ``committed_offsets()`` carries an
``"unread:topic:partition": "earliest"|"committed"`` entry in every offset until a micro-batch
reads past its starting offset (:func:`with_unread`, :func:`unread`). A restarted query resolves
the sentinel of each partition still unread again at its first plan (:func:`resolve_unread`:
the earliest offset now, the group's committed offset now), as Flink does when a restored split
is added; the micro-batch then reads that partition from the new offset, named in its end offset
as ``"from:topic:partition"`` (:func:`begin`), so Spark replays the same range after a crash.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from ..connectors.kafka_common import KafkaOffsetResetStrategy, KafkaOffsetsInitializer, KafkaTopicPartition
from ..connectors.kafka_sentinels import READER_HANDLED

_log = logging.getLogger(__name__)

STOP = "stop:"  # the prefix of a stopping offset's key in the data source's offset dict
UNREAD = "unread:"  # ... of an unread partition's sentinel (module doc)
FROM = "from:"  # ... of where a micro-batch reads a partition re-resolved from (module doc)
STARTING = ("earliest", "latest", "offsets", "timestamp", "committed")
STOPPING = ("latest", "offsets", "timestamp")


def spec(initializer: KafkaOffsetsInitializer) -> str:
    """The initializer as the JSON string the data source's options carry."""
    return json.dumps({
        "kind": initializer.kind,
        "timestamp": initializer.timestamp_ms,
        "offsets": {f"{tp.topic}:{tp.partition}": int(o) for tp, o in initializer.given.items()},
        "reset": initializer.reset.name,
    })  # fmt: skip


def initializer(text: str) -> KafkaOffsetsInitializer:
    """The initializer of a :func:`spec` (a bare ``earliest``/``latest``: that one)."""
    if text in ("earliest", "latest"):
        return getattr(KafkaOffsetsInitializer, text)()
    data = json.loads(text)
    given = {}
    for name, offset in data["offsets"].items():
        topic, _, partition = name.rpartition(":")
        given[KafkaTopicPartition(topic, int(partition))] = int(offset)
    return KafkaOffsetsInitializer(data["kind"], timestamp=data["timestamp"], offsets=given,
                                   reset=KafkaOffsetResetStrategy[data["reset"]])  # fmt: skip


def resolve(options: dict[str, str], text: str, tps: list[tuple[str, int]]) -> dict[str, int]:
    """``{"topic:partition": offset}`` of the initializer ``text`` for ``tps``, asked of the
    broker now (as the asyncio engine's reader resolves it)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    init = initializer(text)
    group = options.get("group") or None

    async def run() -> dict[str, int]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=options["bootstrap"], enable_auto_commit=False,
            isolation_level="read_committed",
            group_id=group if init.uses_group() else None,
        )  # fmt: skip
        await consumer.start()
        try:
            wanted = [TopicPartition(t, p) for t, p in tps]
            consumer.assign(wanted)
            found = await init.resolve(consumer, wanted, group)
            return {f"{tp.topic}:{tp.partition}": int(o) for tp, o in found.items()}
        finally:
            await _stop(consumer)

    return asyncio.run(run())


async def _stop(consumer: Any) -> None:
    """``consumer.stop()``; aiokafka 0.14 raises the CancelledError of its coordinator's
    committed-offset task, cancelled by the stop itself, when partitions were assigned but
    never read: logged and dropped (a cancellation of this task is re-raised)."""
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        _log.debug("Kafka on Spark: aiokafka's consumer.stop() raised its own CancelledError (ignored)")


def with_stops(offset: dict[str, Any], stop: dict[str, int] | None) -> dict[str, Any]:
    """``offset`` carrying the stopping offsets ``stop`` (none: as it is)."""
    if not stop:
        return offset
    return {**offset, **{STOP + k: v for k, v in stop.items()}}


def stops(offset: dict[str, Any] | None) -> dict[str, int] | None:
    """The stopping offsets an offset carries (None: it carries none)."""
    found = {k[len(STOP):]: int(v) for k, v in (offset or {}).items() if k.startswith(STOP)}
    return found or None


def positions(offset: dict[str, Any]) -> dict[str, int]:
    """The ``"topic:partition"`` read positions of an offset (without ``eof`` and the marks)."""
    return {k: int(v) for k, v in offset.items() if k != "eof" and not k.startswith((STOP, UNREAD, FROM))}


def unread(offset: dict[str, Any] | None) -> dict[str, str]:
    """``{"topic:partition": sentinel}`` of the partitions an offset marks unread (module doc)."""
    return {k[len(UNREAD):]: str(v) for k, v in (offset or {}).items() if k.startswith(UNREAD)}


def with_unread(offset: dict[str, Any], sentinels: dict[str, str]) -> dict[str, Any]:
    """``offset`` marking the partitions of ``sentinels`` unread."""
    return {**offset, **{UNREAD + k: v for k, v in sentinels.items()}}


def begin(start: dict[str, Any], end: dict[str, Any], name: str) -> int:
    """Where the micro-batch ``start`` -> ``end`` reads partition ``name`` from: its re-resolved
    offset when ``end`` names one (module doc), else its position in ``start``."""
    return int(end.get(FROM + name, start.get(name, 0)))


def resolve_unread(options: dict[str, str], sentinels: dict[str, str]) -> dict[str, int]:
    """The offsets of the unread partitions ``sentinels`` resolved again by their sentinel, as
    Flink's split reader resolves a restored split's: ``earliest`` the earliest offset now,
    ``committed`` the group's committed offset now (the starting initializer's reset strategy
    when it has none; only ``committed_offsets()`` starts a partition at that sentinel here)."""
    out: dict[str, int] = {}
    for kind in sorted(set(sentinels.values())):
        if kind not in READER_HANDLED:
            raise ValueError(f"Kafka on Spark: the checkpoint's offset marks partitions unread with "
                             f"{kind!r}, not earliest or committed: not an offset of this source")
        text = options.get("starting", "earliest") if kind == "committed" else "earliest"
        tps = [(topic, int(partition)) for name, k in sorted(sentinels.items()) if k == kind
               for topic, _, partition in [name.rpartition(":")]]
        out.update(resolve(options, text, tps))
    return out
