"""The producer and admin steps of the exactly-once Kafka sink outside its data path.

* :func:`committed_marker` reads the metadata a subtask's marker group last committed (the
  :class:`.kafka_txn.CommitHistory` that :func:`.kafka_txn.recovery_plan` checks restored epochs against).
* :func:`abandon` drops a transactional producer without flushing its open transaction
  (the sink's close and a lost connection: the module doc of :mod:`.kafka_sink`);
  :func:`drop_queued` fails the batches its sender has not taken yet (before the abort at close).
* :func:`abort_open_transaction` ends a transaction a former subtask left open, when a
  rescale leaves no subtask of that index to do it by initialising its own producer: it
  initialises a producer with that transactional id (``InitProducerId`` fences the former
  producer and aborts its transaction, Flink's ``TransactionAborter``) and stops it. Until
  then a ``read_committed`` consumer could not read past the open transaction.
* :func:`former_id`: the id a restored state was written under, whose open transaction a
  restored subtask aborts and whose marker group its recovery reads and writes when the
  transactional id prefix changed since.
* :func:`abort_lingering_transactions` ends the transactions of subtasks that no checkpoint
  names: a run at a higher parallelism that failed (or was cancelled) before its first
  checkpoint left ``{prefix}-{uid}-{j}`` open for ``j`` beyond today's parallelism, and no
  restored state tells who they were. As Flink's ``TransactionAborter`` does, subtask ``i``
  of ``p`` initialises the ids of subtasks ``i + p``, ``i + 2p``, ... and stops at the first
  one never used before (``InitProducerId`` gives it epoch 0): ids are taken by consecutive
  subtask indexes, so none above it was used either. Every id ``j >= p`` is some subtask's
  ``i = j % p``, so together the subtasks reach all of them. The probe itself registers the
  id it stops at, so each start lengthens a subtask's chain by one id (one more
  ``InitProducerId`` at the next start), as in Flink where the probed ids carry checkpoint ids.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = [
    "abandon", "abort_lingering_transactions", "abort_open_transaction", "committed_marker", "drop_queued",
    "former_id",
]

log = logging.getLogger("streamflow.connectors.kafka_sink")


def former_id(state: dict[str, Any], default: str) -> str:
    """The transactional id a restored state's subtask wrote under: its prefix may differ from
    today's (Flink keeps the prefix in the writer state and aborts the old prefix's transactions
    too); ``default`` (today's id of that subtask) for states written before it was kept."""
    return str(state.get("transactional_id") or default)


async def committed_marker(bootstrap_servers: str, group: str, topic: str | None) -> str | None:
    """The metadata committed in ``group`` for the marker partition ``topic``-0, or None."""
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


async def abort_open_transaction(producer_kw: dict[str, Any]) -> int:
    """Initialise and stop a producer with ``producer_kw`` (which names the transactional id);
    the epoch the broker gave it (0: the id was never used before)."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**producer_kw)
    await producer.start()
    try:
        epoch = int(producer._txn_manager.producer_epoch)
    finally:
        await producer.stop()
    if epoch > 0:
        log.info("kafka sink: transactional id %s initialised to abort what its former subtask left open",
                 producer_kw["transactional_id"])
    return epoch


async def abort_lingering_transactions(producer_kw: dict[str, Any], id_of: Callable[[int], str],
                                       subtask: int, parallelism: int) -> list[str]:
    """Initialise the ids ``id_of(subtask + k * parallelism)``, k = 1, 2, ..., up to the first
    one never used (module doc); the ids that had been used (their open transactions are now
    aborted)."""
    aborted: list[str] = []
    j = subtask + parallelism
    while True:
        txn_id = id_of(j)
        if await abort_open_transaction({**producer_kw, "transactional_id": txn_id}) == 0:
            return aborted
        aborted.append(txn_id)
        j += parallelism


def drop_queued(producer: Any, cause: BaseException) -> int:
    """Fail (with ``cause``) and remove the batches ``producer``'s sender has not taken yet, so
    that an abort that follows sends none of them; the number of records dropped. (aiokafka's
    accumulator: private, pinned to aiokafka 0.14.)"""
    accumulator = producer._message_accumulator
    dropped = 0
    for tp in list(accumulator._batches):
        for batch in accumulator._batches.pop(tp):
            dropped += batch.record_count
            batch.failure(cause)
            for waiter in (batch.future, batch._drain_waiter):
                if waiter.done() and not waiter.cancelled():
                    waiter.exception()  # retrieved: asyncio would log it as never retrieved
    return dropped


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
        accumulator = producer._message_accumulator
        accumulator.fail_all(cause)
        producer._closed = True
        await producer.client.close()
        # the failures of the producer's own waiters are this one (or the error that failed the
        # task, raised already): retrieved here, else asyncio logs each as never retrieved when it
        # is collected, and a finalizer that logs while CPython 3.11.7 builds an AST (pytest's
        # assertion rewriting) fails that build with "AST constructor recursion depth mismatch"
        batches = [b for queue in accumulator._batches.values() for b in queue]
        waiters = [w for b in [*batches, *accumulator._pending_batches] for w in (b.future, b._drain_waiter)]
        txn = getattr(producer, "_txn_manager", None)
        for waiter in [*waiters, getattr(txn, "_transaction_waiter", None)]:
            if waiter is not None and waiter.done() and not waiter.cancelled():
                waiter.exception()
    except Exception as exc:  # cleanup of a producer that is failing anyway
        log.warning("kafka sink %s: abandoning the producer failed: %r", name, exc)
