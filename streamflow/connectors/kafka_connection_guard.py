"""A broker connection lost during a Kafka transaction is a task failure.

Theory of operation
-------------------
A transaction lives on the broker. A broker restart aborts it (Apache Kafka), and the test broker
even loses it while later sends and the commit report success; either way what the producer sent
into it before the loss cannot be trusted, and only a failover (which re-initialises the
transactional id and re-sends from the checkpoint) restores exactly-once. So the exactly-once sink
watches its producer's connections (:meth:`ConnectionGuard.watch`): the first one closed as
broken or timed out sets :attr:`ConnectionGuard.broken`, stops the producer's sender at once (its
retries would append the transaction's batches to a broker that forgot it) and wakes every
producer call awaited through :meth:`ConnectionGuard.call`, which then raises
:class:`BrokerConnectionLost` instead of waiting on a sender that will never answer.

A connection the client itself closes after ``connections.max.idle.ms`` without traffic
(``IDLE_DROP``; never while a request is in flight) is not a loss: the broker keys a transaction
by producer id and epoch, not by connection, so later sends and the commit on a new connection
continue it, as Kafka's protocol defines it (shown on the test broker:
``tests/test_kafka_idle_connections.py``).

aiokafka has no public hook for this; the client's close callback and the sender task are private
(pinned to aiokafka 0.14 in pyproject).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..errors import StreamflowError
from . import kafka_txn_admin as admin

__all__ = ["BrokerConnectionLost", "ConnectionGuard"]

log = logging.getLogger("streamflow.connectors.kafka_sink")


class BrokerConnectionLost(StreamflowError, ConnectionError):
    """A producer connection broke during a transaction: the transaction cannot be trusted."""


class ConnectionGuard:
    """The connection watch of one transactional producer (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.broken: BaseException | None = None
        self._lost = asyncio.Event()  # set with broken

    async def call(self, aw: Any) -> Any:
        """Await a producer call, but give up with the cause as soon as a connection is lost (the
        producer's sender is then stopped and the call might never end). The call runs as its own
        task, so a cancellation inside aiokafka never leaks into the operator's task as if the
        job were being cancelled."""
        if self.broken is not None:
            if asyncio.iscoroutine(aw):
                aw.close()
            raise self.broken
        call = asyncio.ensure_future(aw)
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            await asyncio.wait({call, lost}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            call.cancel()
            raise
        finally:
            lost.cancel()
        if not call.done():  # the connection was lost first
            call.cancel()
            await asyncio.wait({call})
            raise self.broken or BrokerConnectionLost(f"kafka sink {self.name!r}: connection lost")
        if call.cancelled():  # cancelled inside aiokafka (its sender stopped), not by the job
            raise self.broken or BrokerConnectionLost(f"kafka sink {self.name!r}: producer call cancelled")
        return call.result()

    def watch(self, producer: Any) -> None:
        """Fail on the first broken or timed-out connection of ``producer`` (call it before
        ``producer.start()``: connections take the close callback when created)."""
        from aiokafka.conn import CloseReason

        client = producer.client
        original = client._on_connection_closed
        lost = (CloseReason.CONNECTION_BROKEN, CloseReason.CONNECTION_TIMEOUT)

        def on_closed(conn: Any, reason: Any) -> None:
            original(conn, reason)
            if reason in lost and self.broken is None:
                log.warning("kafka sink %s: broker connection %s:%s lost (%s); failing the task",
                            self.name, conn.host, conn.port, reason)
                self.broken = BrokerConnectionLost(
                    f"kafka sink {self.name!r}: connection to {conn.host}:{conn.port} lost ({reason.name})"
                )
                self._lost.set()
                asyncio.get_running_loop().create_task(admin.abandon(producer, self.broken, self.name))

        client._on_connection_closed = on_closed
