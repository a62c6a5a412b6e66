"""More of Flink's Kafka source tests, ported at the reader level on the session's test broker.

Sources (apache/flink-connector-kafka, flink-connector-kafka/src/test/java/org/apache/flink/
connector/kafka/source/): ``reader/KafkaSourceReaderTest``, ``KafkaSourceITCase``, and the rule of
``split/KafkaPartitionSplitState#toKafkaPartitionSplit`` (a split's stopping offset is part of
its checkpointed state). Volumes are small (the test broker rewrites one JSON file per change).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from test_kafka_flink import RECORDS_PER_SPLIT, committed, source, two_partitions

from streamflow.connectors.base import END
from streamflow.datastream.connectors.kafka import KafkaOffsetsInitializer
from streamflow.testing.kafka_broker import produce


async def read_until(reader: Any, count: int | None) -> list:
    """Poll ``reader`` (one record per poll) until ``count`` records (None: until its END)."""
    out: list = []
    async with asyncio.timeout(20):
        while count is None or len(out) < count:
            batch = reader.poll_batch(1)
            if batch is END:
                assert count is None, f"the reader ended after {out}"
                return out
            if isinstance(batch, tuple):
                out.extend(batch[0])
            else:
                await asyncio.sleep(0.01)
    return out


FAR_FUTURE_MS = 4_000_000_000_000  # no record has a timestamp at or after it: stop at the end


@pytest.mark.parametrize("stopping", ["latest", "timestamp"])
async def test_a_bounded_split_keeps_its_stopping_offset_across_a_restore(kafka, stopping):
    """Flink resolves ``latest()`` and ``timestamp(t)`` stopping offsets once, when a partition is
    first assigned (``KafkaSourceEnumerator.initializePartitionSplits``), and the split keeps that
    offset in every checkpoint (``KafkaPartitionSplitState#toKafkaPartitionSplit``). A bounded job
    restored in the middle therefore ends where it would have ended without the failure: records
    appended to the topic since its start are not read (KafkaSourceITCase's bounded reads, with
    a restore in the middle)."""
    bs = kafka.bootstrap_servers
    topic = await two_partitions(bs, f"stop-{stopping}")
    stop = (KafkaOffsetsInitializer.latest() if stopping == "latest"
            else KafkaOffsetsInitializer.timestamp(FAR_FUTURE_MS))
    src = source(bs, topic).set_bounded(stop).build()
    reader = src.create_reader(0, 1)
    await reader.start(lambda: None)
    try:
        first = await read_until(reader, 3)
        position = reader.snapshot_for_checkpoint(1)
    finally:
        await reader.close()
    for p in range(2):  # written after the bounded job started: beyond its stopping offsets
        await produce(bs, topic, [f"{p}:late{i}".encode() for i in range(2)], partition=p)
    restored = src.create_reader(0, 1)
    restored.restore_positions([position])
    await restored.start(lambda: None)
    try:
        rest = await read_until(restored, None)
    finally:
        await restored.close()
    expected = [f"{p}:{i}" for p in range(2) for i in range(RECORDS_PER_SPLIT)]
    assert sorted(first + rest) == expected


async def test_a_checkpoint_completing_during_an_earlier_commit_is_committed_too(kafka):
    """KafkaSourceReaderTest#testOffsetCommitOnCheckpointComplete, with the notifications close
    together: Flink's reader hands every completed checkpoint's offsets to its fetcher, which
    commits them in turn (``KafkaSourceFetcherManager#commitOffsets``); none is dropped because an
    earlier commit is still running, so the group ends at the last completed checkpoint."""
    bs = kafka.bootstrap_servers
    topic = await two_partitions(bs, "commit-overlap")
    group = f"g-{topic}"
    reader = source(bs, topic).set_group_id(group).build().create_reader(0, 1)
    await reader.start(lambda: None)
    try:
        await read_until(reader, 2)
        reader.snapshot_for_checkpoint(1)
        await read_until(reader, 2 * RECORDS_PER_SPLIT - 2)
        reader.snapshot_for_checkpoint(2)
        reader.notify_checkpoint_complete(1)
        reader.notify_checkpoint_complete(2)  # checkpoint 1's commit has not even started
        expected = {0: RECORDS_PER_SPLIT, 1: RECORDS_PER_SPLIT}
        deadline = time.monotonic() + 5
        while (got := await committed(bs, group, topic)) != expected and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert got == expected
    finally:
        await reader.close()
