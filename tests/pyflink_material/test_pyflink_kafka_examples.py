"""The Kafka examples of the apache-flink 2.3.0 wheel that use PyFlink's (new) Kafka connector,
run on streamflow's native ``KafkaSource``/``KafkaSink`` against the test broker.

``examples/connectors/kafka_bytearray_format.py``, ``kafka_json_format.py``,
``kafka_csv_format.py`` and ``kafka_row_field_extractor_example.py`` are Flink's files,
unchanged except that ``pyflink`` reads ``streamflow`` (the JSON and CSV ones use
``streamflow.datastream.formats``, PyFlink's row formats in Python). They expect a Kafka broker at
``localhost:9092`` with their topics created ("make sure ... the topic ... is created");
the harness starts the test broker (``streamflow.testing.kafka_broker``) on port 9092 and
creates the topics. If port 9092 is taken on this machine, the harness runs the files with
the broker's address in place of ``localhost:9092`` (the only change, logged). Each file runs
as a script in its own process, as a user runs it: the format examples write their
records, then read the topic forever (an unbounded source, as in PyFlink), so the harness
stops each once its records are printed.

The other connector examples stay out (docs/pyflink.md): ``kafka_avro_format.py`` (Avro
needs Flink's Java format jar), ``elasticsearch.py`` and ``pulsar.py`` (JVM-only connectors).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamflow.testing.kafka_broker import KafkaBroker, create_topic, read_topic

EXAMPLES = Path(__file__).parent / "examples" / "connectors"
ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger(__name__)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def broker() -> Iterator[KafkaBroker]:
    b = KafkaBroker(port=9092 if _port_free(9092) else None)
    b.start()
    try:
        yield b
    finally:
        b.close()


def _script(name: str, broker: KafkaBroker, tmp_path: Path) -> Path:
    """The example itself, or (port 9092 taken) a copy naming the test broker's address."""
    path = EXAMPLES / name
    if broker.bootstrap_servers.endswith(":9092"):
        return path
    log.warning(
        "port 9092 is taken: %s runs with localhost:9092 replaced by %s", name, broker.bootstrap_servers
    )
    copy = tmp_path / name
    copy.write_text(path.read_text().replace("localhost:9092", broker.bootstrap_servers))
    return copy


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_kafka_row_field_extractor_example(broker: KafkaBroker, tmp_path: Path) -> None:
    asyncio.run(create_topic(broker.bootstrap_servers, "row-extractor-example", 3))
    script = _script("kafka_row_field_extractor_example.py", broker, tmp_path)
    done = subprocess.run(
        [sys.executable, str(script)], env=_env(), capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    sent = "Sending: User=user-001, Event={'type': 'purchase', 'item': 'laptop', 'price': 999.99}"
    assert sent in done.stdout
    records = asyncio.run(read_topic(broker.bootstrap_servers, "row-extractor-example"))
    got = sorted(((r.key.decode(), json.loads(r.value)) for r in records), key=repr)
    assert got == sorted(
        [
            ("user-001", {"type": "purchase", "item": "laptop", "price": 999.99}),
            ("user-002", {"type": "view", "item": "phone", "timestamp": "2024-01-07T10:30:00"}),
            ("user-001", {"type": "add_to_cart", "item": "mouse", "quantity": 2}),
            ("user-003", {"type": "purchase", "item": "keyboard", "price": 79.99}),
        ],
        key=repr,
    )
    by_user: dict[str, set[int]] = {}
    for r in records:  # the key partitions: one user's events in one partition
        by_user.setdefault(r.key.decode(), set()).add(r.partition)
    assert all(len(parts) == 1 for parts in by_user.values())


ROWS = ["+I[1, hi]", "+I[2, hello]", "+I[3, hi]", "+I[4, hello]", "+I[5, hi]", "+I[6, hello]", "+I[6, hello]"]
BYTES = [
    json.dumps({"id": 1, "country": "USA"}),
    json.dumps({"id": 2, "country": "Canada"}),
    json.dumps({"id": 3, "country": "Germany"}),
]


@pytest.mark.parametrize(
    ("name", "topic", "expected"),
    [
        ("kafka_bytearray_format.py", "test_bytearray_topic", BYTES),
        ("kafka_json_format.py", "test_json_topic", ROWS),
        ("kafka_csv_format.py", "test_csv_topic", ROWS),
    ],
)
def test_write_then_read_examples(
    broker: KafkaBroker, tmp_path: Path, name: str, topic: str, expected: list
) -> None:
    """Each writes its records, then prints what it reads back from the topic, forever (an
    unbounded source, as in PyFlink): the harness stops it once every record is printed."""
    asyncio.run(create_topic(broker.bootstrap_servers, topic))
    script = _script(name, broker, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, str(script)], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, cwd=tmp_path, start_new_session=True,
    )  # fmt: skip
    printed: list[str] = []

    def records() -> list[str]:
        return [p for p in printed if p.startswith(("{", "+I["))]

    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        os.set_blocking(proc.stdout.fileno(), False)
        while time.monotonic() < deadline and len(records()) < len(expected):
            line = proc.stdout.readline()
            if line:
                printed.append(line.strip())
            elif proc.poll() is not None:
                break
            else:
                time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the reading job runs until stopped, as in PyFlink
        proc.wait(30)
    assert "start writing data to kafka" in printed, printed[-40:]
    assert "start reading data from kafka" in printed, printed[-40:]
    assert sorted(records()) == sorted(expected), printed[-40:]


def test_builders_take_bootstrap_servers_and_group_id_as_properties() -> None:
    """As Flink's builders: ``bootstrap.servers`` and ``group.id`` properties are what
    ``set_bootstrap_servers``/``set_group_id`` set (the bytearray example configures them so)."""
    from streamflow.common import SimpleStringSchema
    from streamflow.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink, KafkaSource

    source = (
        KafkaSource.builder()
        .set_topics("t")
        .set_value_only_deserializer(SimpleStringSchema())
        .set_properties({"bootstrap.servers": "host:1", "group.id": "g"})
        .build()
    )
    assert (source.bootstrap_servers, source.group_id, source.properties) == ("host:1", "g", {})
    serializer = (
        KafkaRecordSerializationSchema.builder()
        .set_topic("t")
        .set_value_serialization_schema(SimpleStringSchema())
    ).build()
    sink = KafkaSink.builder().set_property("bootstrap.servers", "host:2").set_record_serializer(serializer)
    assert sink.build().bootstrap_servers == "host:2"
