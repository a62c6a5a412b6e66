"""A sink writer's metrics: Flink's ``SinkWriterMetricGroup``, in the operator's metric group.

A sink operator emits nothing downstream, so the runtime's own ``numRecordsOut`` of it is 0;
what a user watches is what the sink wrote to the external system. As Flink's
``InternalSinkWriterMetricGroup`` does, a writer counts in its operator's group
(``<uid>[<subtask>]``):

* ``numRecordsSend`` / ``numBytesSend``: records (and their serialized bytes) handed to the
  external system; ``numRecordsOut`` / ``numBytesOut`` show the same counts (FLIP-33: a sink's
  records out are the records it writes);
* ``numRecordsSendErrors`` (and Flink's deprecated ``numRecordsOutErrors``): records whose
  write failed;
* ``currentSendTime``: milliseconds the last write took until the system acknowledged it.

Counting is per write call (a batch of records), never per record.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..runtime.metrics import MetricGroup

__all__ = ["SinkWriterMetrics"]


class SinkWriterMetrics:
    """The counts of one sink subtask (module doc); :meth:`attach` shows them in its group."""

    __slots__ = ("bytes", "errors", "records", "send_time_ms")

    def __init__(self) -> None:
        self.records = self.bytes = self.errors = 0
        self.send_time_ms = 0.0

    def attach(self, group: MetricGroup) -> None:
        for name, read in (("numRecordsSend", self._records), ("numRecordsOut", self._records),
                           ("numBytesSend", self._bytes), ("numBytesOut", self._bytes),
                           ("numRecordsSendErrors", self._errors), ("numRecordsOutErrors", self._errors),
                           ("currentSendTime", self._send_time)):
            group.gauge(name, read)

    def _records(self) -> int:
        return self.records

    def _bytes(self) -> int:
        return self.bytes

    def _errors(self) -> int:
        return self.errors

    def _send_time(self) -> float:
        return self.send_time_ms

    def sent(self, values: list[bytes], keys: list[bytes | None] | None) -> None:
        """``values`` (with ``keys``) were handed to the external system."""
        self.records += len(values)
        self.bytes += sum(map(len, values)) + (sum(len(k) for k in keys if k) if keys else 0)

    def wrote(self, records: int, nbytes: int) -> None:
        """A write of ``records`` records, ``nbytes`` bytes in all, succeeded (a sink that writes
        synchronously, as the file sink: no delivery to watch)."""
        self.records += records
        self.bytes += nbytes

    def failed(self, records: int) -> None:
        """A write of ``records`` records failed."""
        self.errors += records

    def watch(self, delivery: asyncio.Future[Any], records: int) -> asyncio.Future[Any]:
        """Time ``delivery`` (the write of ``records`` records), count them as errors if it fails;
        returns ``delivery``."""
        loop = asyncio.get_running_loop()
        started = loop.time()

        def done(fut: asyncio.Future[Any]) -> None:
            if fut.cancelled() or fut.exception() is not None:
                self.errors += records
            else:
                self.send_time_ms = (loop.time() - started) * 1000.0

        delivery.add_done_callback(done)
        return delivery
