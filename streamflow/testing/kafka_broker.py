"""A Kafka broker for tests and examples: noida-db on a free loopback port, or ``STREAMFLOW_KAFKA_BOOTSTRAP``.

``KafkaBroker`` starts the test broker (PyPI ``noida-db``, a single static
binary speaking the Kafka protocol, installed by the ``dev`` extra) in the
foreground as a child process on 127.0.0.1, waits until its port accepts
connections, and stops it with SIGTERM. ``restart()`` stops and starts it on
the same port and data directory (its state survives), for failover tests.

If ``STREAMFLOW_KAFKA_BOOTSTRAP`` is set, no process is started: the broker
named there (for example an Apache Kafka cluster) is used, and ``stop`` /
``restart`` raise (a test that needs them must be skipped by its author
explicitly, it never is here silently).

Known gaps of the test broker (see docs/kafka.md): no transaction timeout,
SIGKILLed group members never expire, a broker restart aborts open
transactions, its state is one JSON file (keep volumes small).
"""

from __future__ import annotations

import importlib.resources
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "BOOTSTRAP_ENV", "KafkaBroker", "create_topic", "kafka_broker", "open_transactions", "produce",
    "read_topic",
]

log = logging.getLogger(__name__)
BOOTSTRAP_ENV = "STREAMFLOW_KAFKA_BOOTSTRAP"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _binary() -> str:
    override = os.environ.get("NOIDA_BIN")
    if override:
        return override
    return str(importlib.resources.files("noida_db") / "noida-db")


class KafkaBroker:
    """One broker: ``start()``, ``bootstrap_servers``, ``restart()``, ``stop()``."""

    def __init__(self, data_dir: str | None = None, port: int | None = None) -> None:
        self.external = os.environ.get(BOOTSTRAP_ENV) or None
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="streamflow-kafka-")
        self.port = port or _free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self.log_path = os.path.join(self.data_dir, "broker.log")

    @property
    def bootstrap_servers(self) -> str:
        return self.external or f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> KafkaBroker:
        if self.external:
            log.info("using the Kafka broker at %s (%s)", self.external, BOOTSTRAP_ENV)
            return self
        cmd = [_binary(), "start", "--data-dir", self.data_dir, "--only", "kafka",
               "--kafka-port", str(self.port)]
        with open(self.log_path, "ab") as logf:
            self._proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"test broker exited with {self._proc.returncode}; log: {self.log_path}")
            with socket.socket() as s:
                s.settimeout(0.2)
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    log.info("test broker up at %s (pid %d)", self.bootstrap_servers, self._proc.pid)
                    return self
            time.sleep(0.01)
        self._kill()
        raise RuntimeError(f"test broker did not accept connections within {timeout}s; log: {self.log_path}")

    def stop(self, timeout: float = 10.0) -> None:
        if self.external:
            raise RuntimeError(f"cannot stop the external broker named by {BOOTSTRAP_ENV}")
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("test broker pid %d ignored SIGTERM for %.0fs; killing it", proc.pid, timeout)
            proc.kill()
            proc.wait(timeout)

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the broker (if started here) and delete its data directory (if created here)."""
        if not self.external:
            self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def kafka_broker(data_dir: str | None = None) -> Iterator[KafkaBroker]:
    """``with kafka_broker() as broker: ... broker.bootstrap_servers ...``"""
    broker = KafkaBroker(data_dir).start()
    try:
        yield broker
    finally:
        broker.close()


# -- small async helpers for tests and examples ------------------------------------------------
async def create_topic(bootstrap: str, topic: str, partitions: int = 1, *,
                       config: dict[str, str] | None = None) -> bool:
    """Create ``topic`` with topic ``config``; False if it existed (it is left as it is).

    Test topics are created with time-based retention off (``retention.ms=-1``) unless ``config``
    says otherwise: tests write records with small event timestamps (1970), which a broker's
    retention (7 days by default) deletes at its next cleanup pass, so a topic would read back
    empty some of the time."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError, for_code

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        # aiokafka reports per-topic errors in the response, it does not raise them
        response = await admin.create_topics(
            [NewTopic(topic, partitions, 1, topic_configs={"retention.ms": "-1", **(config or {})})])
    finally:
        await admin.close()
    for _name, code, *rest in response.topic_errors:
        if code == TopicAlreadyExistsError.errno:
            log.info("topic %r exists already", topic)
            return False
        if code:
            raise for_code(code)(f"cannot create topic {topic!r} at {bootstrap}: {rest[-1] if rest else ''}")
    return True


async def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    """Grow ``topic`` to ``total`` partitions (a source's discovery, a sink's routing find them)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_partitions({topic: NewPartitions(total)})
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, values: list[bytes], *, keys: list[bytes | None] | None = None,
                  partition: int | None = None, timestamps: list[int] | None = None) -> None:
    """Write ``values`` (plain, not transactional) and wait until all are acknowledged."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    await producer.start()
    try:
        futures = [
            await producer.send(topic, v, key=keys[i] if keys else None, partition=partition,
                                timestamp_ms=timestamps[i] if timestamps else None)
            for i, v in enumerate(values)
        ]
        for fut in futures:
            await fut
    finally:
        await producer.stop()


async def read_topic(bootstrap: str, topic: str, *, committed: bool = True, timeout: float = 20.0) -> list:
    """Every record of ``topic`` (aiokafka ``ConsumerRecord`` objects, partition by partition), read by a
    fresh consumer up to the end offsets seen at the start (the last stable offsets when ``committed``)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                                isolation_level="read_committed" if committed else "read_uncommitted")
    await consumer.start()
    try:
        parts = consumer.partitions_for_topic(topic)
        if parts is None:
            await consumer.topics()
            parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        if not tps:
            return []
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        out: dict[Any, list] = {tp: [] for tp in tps}
        deadline = time.monotonic() + timeout
        while True:
            todo = [tp for tp in tps if await consumer.position(tp) < ends[tp]]
            if not todo:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"read_topic({topic!r}): positions stuck short of {ends} after {timeout}s")
            batch = await consumer.getmany(*todo, timeout_ms=200)
            for tp, msgs in batch.items():
                out[tp].extend(m for m in msgs if m.offset < ends[tp])
        return [m for tp in tps for m in out[tp]]
    finally:
        await consumer.stop()


async def open_transactions(bootstrap: str, topic: str) -> dict[int, int]:
    """Partitions of ``topic`` whose last stable offset is below the high watermark (LSO < HW means a
    transaction is still open there): ``{partition: high watermark - last stable offset}``."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    out: dict[int, int] = {}
    consumers = [AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, isolation_level=level)
                 for level in ("read_committed", "read_uncommitted")]
    for c in consumers:
        await c.start()
    try:
        await consumers[0].topics()
        parts = consumers[0].partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        lso = await consumers[0].end_offsets(tps)
        hw = await consumers[1].end_offsets(tps)
        for tp in tps:
            if lso[tp] < hw[tp]:
                out[tp.partition] = hw[tp] - lso[tp]
        return out
    finally:
        for c in consumers:
            await c.stop()
