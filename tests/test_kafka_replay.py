"""Kafka replay: a topic recorded to a file, replayed into another topic exactly, and read back
as a bounded source with the recorded partitions and timestamps."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import orjson
from child_env import child_env

import streamflow as sf
from streamflow.common.serialization import SimpleStringSchema
from streamflow.connectors.base import END
from streamflow.connectors.kafka_replay import ReplaySource, read_recording, record_topic, replay_file
from streamflow.runtime.events import Watermark
from streamflow.testing.kafka_broker import create_topic, produce, read_topic
from streamflow.windowing import TumblingEventTimeWindows


def _fingerprint(records: list) -> list:
    return [(m.partition, m.offset, m.timestamp, m.key, m.value, tuple(m.headers or ())) for m in records]


async def _recorded_topic(bs: str, name: str) -> None:
    await create_topic(bs, name, 2)
    for p in (0, 1):
        await produce(bs, name, [f"v{p}-{i}".encode() for i in range(5)], keys=[None, b"k"] * 2 + [b""],
                      partition=p, timestamps=[1000 * i + p for i in range(5)])


async def test_record_then_replay_round_trips_a_topic_exactly(kafka, tmp_path):
    bs = kafka.bootstrap_servers
    src, dst = f"rec-{id(tmp_path)}", f"rep-{id(tmp_path)}"
    await _recorded_topic(bs, src)
    path = tmp_path / "topic.jsonl"
    assert await record_topic(bs, src, path) == 10
    header, records = read_recording(path)
    assert header["partitions"] == 2
    assert _fingerprint(records) == _fingerprint(await read_topic(bs, src))
    assert await replay_file(path, bs, dst) == 10
    assert _fingerprint(await read_topic(bs, dst)) == _fingerprint(records)


async def test_the_cli_records_and_replays(kafka, tmp_path):
    bs = kafka.bootstrap_servers
    src, dst = f"clirec-{id(tmp_path)}", f"clirep-{id(tmp_path)}"
    await _recorded_topic(bs, src)
    path = tmp_path / "t.jsonl"
    env = child_env()
    for args in (["record", "--bootstrap-servers", bs, "--topic", src, str(path)],
                 ["replay", "--bootstrap-servers", bs, "--topic", dst, str(path)]):
        cmd = [sys.executable, "-m", "streamflow.cli", "kafka", *args]
        proc = await asyncio.to_thread(subprocess.run, cmd, env=env, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert _fingerprint(await read_topic(bs, dst)) == _fingerprint(await read_topic(bs, src))


async def test_replaying_old_records_into_an_existing_topic_warns_of_retention(kafka, tmp_path, caplog):
    """Replayed records keep their (here 1970) timestamps: a broker's time retention would delete
    them, so a topic replay creates has retention off, and an existing one gets a warning."""
    bs = kafka.bootstrap_servers
    src, dst = f"oldrec-{id(tmp_path)}", f"oldrep-{id(tmp_path)}"
    await _recorded_topic(bs, src)
    path = tmp_path / "t.jsonl"
    await record_topic(bs, src, path)
    with caplog.at_level("WARNING", logger="streamflow.connectors.kafka_replay"):
        await replay_file(path, bs, dst)
        assert "retention" not in caplog.text  # created here, with retention.ms=-1
        await replay_file(path, bs, dst)
    assert f"topic {dst!r} exists" in caplog.text and "1970-01-01" in caplog.text
    assert len(await read_topic(bs, dst)) == 20


def test_a_recording_is_a_bounded_source_with_partitions_timestamps_and_watermarks(tmp_path):
    path = tmp_path / "r.jsonl"
    lines = [{"format": "streamflow-kafka-recording", "version": 1, "topic": "t", "partitions": 2}]
    for p in (0, 1):
        for i in range(6):
            lines.append({"p": p, "o": i, "ts": 1000 * i, "k": None, "v": "eA==", "h": []})  # value b"x"
    path.write_bytes(b"\n".join(map(orjson.dumps, lines)) + b"\n")
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    sink = sf.CollectSink()
    (
        env.from_source(ReplaySource(path, SimpleStringSchema()),
                        sf.WatermarkStrategy.for_monotonous_timestamps(), "replay")
        .map(lambda v: (v, 1))
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(2000))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(sink)
    )
    env.execute("replay")
    assert sorted(sink.results) == [("x", 4), ("x", 4), ("x", 4)]  # 2 partitions x 2 per window


def test_replay_paced_by_recorded_timestamps(tmp_path):
    path = tmp_path / "r.jsonl"
    lines = [{"format": "streamflow-kafka-recording", "version": 1, "topic": "t", "partitions": 1}]
    lines += [{"p": 0, "o": i, "ts": 100 * i, "k": None, "v": "eA==", "h": []} for i in range(5)]
    path.write_bytes(b"\n".join(map(orjson.dumps, lines)) + b"\n")
    env = sf.StreamExecutionEnvironment()
    sink = sf.CollectSink()
    env.from_source(ReplaySource(path, SimpleStringSchema(), speed=2.0), None, "replay").sink_to(sink)
    import time

    started = time.monotonic()
    env.execute("paced")
    assert sink.results == ["x"] * 5
    assert time.monotonic() - started >= 0.2  # 400 ms of recorded time at twice the speed


async def test_replay_positions_restore_at_another_parallelism(tmp_path):
    """As the Kafka source's: readers stopped partway at parallelism 2, restored at 3 and then
    at 1, read every recorded record exactly once."""
    import base64

    path = tmp_path / "r.jsonl"
    lines = [{"format": "streamflow-kafka-recording", "version": 1, "topic": "t", "partitions": 4}]
    for p in range(4):
        values = [base64.b64encode(f"{p}:{i}".encode()).decode() for i in range(30)]
        lines += [{"p": p, "o": i, "ts": 10 * i, "k": None, "v": v, "h": []} for i, v in enumerate(values)]
    path.write_bytes(b"\n".join(map(orjson.dumps, lines)) + b"\n")
    source = ReplaySource(path, SimpleStringSchema(), speed=None)
    read: list = []
    positions: list = []
    for stage, parallelism in enumerate((2, 3, 1)):
        restored, positions = positions, []
        for sub in range(parallelism):
            reader = source.create_reader(sub, parallelism)
            if restored:
                reader.restore_positions(restored)
            await reader.start(lambda: None)
            for _ in range(1000 if stage == 2 else 1 + sub):
                batch = reader.poll_batch(7)
                if batch is sf.connectors.base.END:
                    break
                if isinstance(batch, tuple):
                    read += batch[0]
                elif isinstance(batch, list):
                    read += batch
            positions.append(reader.snapshot_position())
            await reader.close()
    assert sorted(read) == sorted(f"{p}:{i}" for p in range(4) for i in range(30))


class _EveryRecord(sf.WatermarkGenerator):
    def on_event(self, event, event_timestamp, output):
        output.emit_watermark(Watermark(event_timestamp))

    def on_periodic_emit(self, output):
        pass


async def test_a_partition_replayed_to_its_end_holds_the_watermark_back_no_more(tmp_path):
    """Flink's finished split: once partition 0's records are all out, partition 1 alone moves
    the watermark (before, partition 0's last timestamp held it until the end of input)."""
    path = tmp_path / "r.jsonl"
    lines = [{"format": "streamflow-kafka-recording", "version": 1, "topic": "t", "partitions": 2}]
    lines += [{"p": 0, "o": i, "ts": 1000 * i, "k": None, "v": "eA==", "h": []} for i in range(2)]
    lines += [{"p": 1, "o": i, "ts": 1000 * i, "k": None, "v": "eA==", "h": []} for i in range(10)]
    path.write_bytes(b"\n".join(map(orjson.dumps, lines)) + b"\n")
    source = ReplaySource(path, SimpleStringSchema()).with_watermark_strategy(
        sf.WatermarkStrategy.for_generator(_EveryRecord)
    )
    reader = source.create_reader(0, 1)
    await reader.start(lambda: None)
    watermarks = []
    while (event := reader.poll_batch(1)) is not END:
        if isinstance(event, Watermark):
            watermarks.append(event.timestamp)
    assert watermarks[-1] == 9000
