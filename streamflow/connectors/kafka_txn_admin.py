"""The producer and admin steps of the exactly-once Kafka sink outside its data path.

* :func:`committed_marker` reads the token a subtask's marker group last committed, which
  :func:`.kafka_txn.recovery_plan` compares with the restored epochs.
* :func:`abandon` drops a transactional producer without flushing its open transaction
  (the sink's close and a lost connection: the module doc of :mod:`.kafka_sink`).
* :func:`abort_open_transaction` ends a transaction a former subtask left open, when a
  rescale leaves no subtask of that index to do it by initialising its own producer: it
  initialises a producer with that transactional id (``InitProducerId`` fences the former
  producer and aborts its transaction, Flink's ``TransactionAborter``) and stops it. Until
  then a ``read_committed`` consumer could not read past the open transaction.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["abandon", "abort_open_transaction", "committed_marker"]

log = logging.getLogger("streamflow.connectors.kafka_sink")


async def committed_marker(bootstrap_servers: str, group: str, topic: str | None) -> str | None:
    """The token committed in ``group`` for the marker partition ``topic``-0, or None."""
    if topic is None:
        return None
    from aiokafka import TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    meta = offsets.get(TopicPartition(topic, 0))
    return meta.metadata if meta is not None else None


async def abort_open_transaction(producer_kw: dict[str, Any]) -> None:
    """Initialise and stop a producer with ``producer_kw`` (which names the transactional id)."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**producer_kw)
    await producer.start()
    await producer.stop()
    log.info("kafka sink: transactional id %s initialised to abort what its former subtask left open",
             producer_kw["transactional_id"])


async def abandon(producer: Any, cause: BaseException, name: str) -> None:
    """Drop a transactional producer: stop its sender without flushing, fail what is queued
    with ``cause``, close its connections. Never raises (logged)."""
    import asyncio

    try:
        sender = getattr(producer, "_sender", None)
        task = getattr(sender, "sender_task", None)
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})
        producer._message_accumulator.fail_all(cause)
        producer._closed = True
        await producer.client.close()
    except Exception as exc:  # cleanup of a producer that is failing anyway
        log.warning("kafka sink %s: abandoning the producer failed: %r", name, exc)
