"""Stop-with-savepoint and two-phase-commit sinks: the stop's savepoint commits (Flink 1.15+).

Flink notifies the tasks of a synchronous savepoint's completion (``CheckpointCoordinator``,
``StopWithSavepointTerminationHandlerImpl``) before they end: the exactly-once ``KafkaSink``
commits the transaction its savepoint pre-committed and the ``FileSink`` publishes its pending
part files, so everything processed before the stop is visible once the job has ended, and a job
resumed from the savepoint adds the rest exactly once (Flink's ``SavepointITCase``,
``KafkaSinkITCase#testRecoveryWithExactlyOnceGuarantee``-style checks, through the public API).
The old client cancelled the job after a savepoint that never notified: nothing of the last
epoch was committed when the job had ended.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from test_stop_with_savepoint import _Numbers, _wait_for

from streamflow.common import Encoder, Types
from streamflow.common.serialization import SimpleStringSchema
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.connectors.base import DeliveryGuarantee
from streamflow.datastream.connectors.file_system import FileSink
from streamflow.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from streamflow.runtime.job import JobStatus
from streamflow.testing.kafka_broker import create_topic, produce, read_topic

_ids = itertools.count()
COUNT = 20_000  # paced: 10 s at least, the stop comes after 0.1 s


def _env(tmp_path: Path, parallelism: int, restore: str | None = None) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.enable_checkpointing(600_000)  # no periodic checkpoint: only the stop's savepoint commits
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / f"chk{next(_ids)}"))
    env.set_default_savepoint_directory(str(tmp_path / f"sp{next(_ids)}"))
    if restore is not None:
        env.configure({"execution.savepoint.path": restore})
    return env


async def _stop_then_resume(
    tmp_path: Path, parallelism: int, sink: Any, visible: Any, drain: bool = False
) -> tuple[list[int], list[int], list[int]]:
    """Run, stop with a savepoint, read what the sink made visible, resume; returns
    (what reached the sink's side in run 1, visible after run 1, visible after run 2)."""
    async def run(source: _Numbers, seen: list, restore: str | None) -> Any:
        env = _env(tmp_path, parallelism, restore)
        stream = (env.from_source(source, None, "numbers").uid("numbers")
                  .map(lambda v: str(v[2]), output_type=Types.STRING()).uid("value"))  # fmt: skip
        stream.add_sink(seen.append).uid("seen")
        stream.sink_to(sink()).uid("sink")
        return await env.execute_async(f"stop-sink-{next(_ids)}")

    seen: list = []
    client = await run(_Numbers(COUNT, paced=True, hold=True), seen, None)
    await _wait_for(lambda: len(seen) >= 200, "records flowing")
    path = await asyncio.wait_for(client.stop_with_savepoint(drain), 60)
    assert (await asyncio.wait_for(client.get_job_execution_result(), 60)).status is JobStatus.FINISHED
    after_stop = await visible()
    resumed = await run(_Numbers(COUNT, paced=False), [], path)
    await asyncio.wait_for(resumed.get_job_execution_result(), 60)
    return sorted(int(v) for v in seen), sorted(after_stop), sorted(await visible())


@pytest.mark.parametrize("parallelism", [1, 4])
async def test_the_exactly_once_kafka_sink_commits_the_stop(
    kafka: Any, tmp_path: Path, parallelism: int
) -> None:
    bs, topic = kafka.bootstrap_servers, f"stop-eos-{next(_ids)}-{id(object())}"
    await create_topic(bs, topic, 2)
    prefix = f"tx-{topic}"  # the same in both runs: the resumed job owns the stopped one's ids

    def sink() -> KafkaSink:
        return (KafkaSink.builder().set_bootstrap_servers(bs)
                .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(topic)
                                       .set_value_serialization_schema(SimpleStringSchema()).build())
                .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .set_transactional_id_prefix(prefix).build())  # fmt: skip

    async def committed() -> list[int]:
        return [int(m.value) for m in await read_topic(bs, topic)]

    seen, after_stop, after_resume = await _stop_then_resume(tmp_path, parallelism, sink, committed)
    assert after_stop == seen and 200 <= len(seen) < COUNT  # the stop's transactions committed
    assert after_resume == list(range(COUNT))  # then the rest, exactly once


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("drain", [False, True])
async def test_the_file_sink_at_the_stop(tmp_path: Path, parallelism: int, drain: bool) -> None:
    """With drain the sink finishes before the savepoint (its in-progress files roll) and the
    savepoint's notification publishes everything written before the stop. Without drain the
    row format's in-progress file stays in progress, hidden, its length in the savepoint (Flink's
    ``DefaultRollingPolicy`` does not roll on a checkpoint); the resumed job goes on from there.
    Either way the resumed job's output holds every record exactly once."""
    out = tmp_path / "out"

    def sink() -> FileSink:
        return FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()

    async def published() -> list[int]:  # in-progress and pending files are hidden (".")
        files = [f for f in out.rglob("*") if f.is_file() and not f.name.startswith(".")]
        return [int(line) for f in files for line in f.read_text().splitlines()]

    seen, after_stop, after_resume = await _stop_then_resume(tmp_path, parallelism, sink, published, drain)
    assert 200 <= len(seen) < COUNT
    if drain:
        assert after_stop == seen  # finished, then published at the savepoint's notification
    else:
        assert set(after_stop) <= set(seen) and len(after_stop) == len(set(after_stop))
    assert after_resume == list(range(COUNT))


@pytest.mark.parametrize("parallelism", [1, 2])
async def test_a_kafka_source_stopped_while_records_arrive_resumes_exactly_once(
    kafka: Any, tmp_path: Path, parallelism: int
) -> None:
    """An unbounded KafkaSource halts at the stop's barrier with its partitions' offsets in the
    savepoint: the resumed job (bounded to the latest offsets) reads on from there, so a plain
    sink sees every record once, while records kept arriving during the stop."""
    bs, topic = kafka.bootstrap_servers, f"stop-src-{next(_ids)}-{id(object())}"
    await create_topic(bs, topic, 2)

    def job(env: StreamExecutionEnvironment, out: list, bounded: bool) -> None:
        builder = (KafkaSource.builder().set_bootstrap_servers(bs).set_topics(topic)
                   .set_group_id(f"g-{topic}").set_starting_offsets(KafkaOffsetsInitializer.earliest())
                   .set_value_only_deserializer(SimpleStringSchema()))  # fmt: skip
        if bounded:
            builder = builder.set_bounded(KafkaOffsetsInitializer.latest())
        (env.from_source(builder.build(), None, "kafka").uid("kafka").map(int).uid("value")
            .add_sink(out.append).uid("sink"))  # fmt: skip

    async def keep_producing(stop: asyncio.Event) -> int:
        n = 0
        while not stop.is_set() or n < 600:
            await produce(bs, topic, [str(i).encode() for i in range(n, n + 20)])
            n += 20
        return n

    done = asyncio.Event()
    producer = asyncio.create_task(keep_producing(done))
    first: list = []
    env = _env(tmp_path, parallelism)
    job(env, first, bounded=False)
    client = await env.execute_async(f"stop-kafka-src-{next(_ids)}")
    await _wait_for(lambda: len(first) >= 100, "records read")
    path = await asyncio.wait_for(client.stop_with_savepoint(False), 60)
    assert (await asyncio.wait_for(client.get_job_execution_result(), 60)).status is JobStatus.FINISHED
    done.set()
    total = await asyncio.wait_for(producer, 60)
    second: list = []
    env2 = _env(tmp_path, parallelism, restore=path)
    job(env2, second, bounded=True)
    await asyncio.wait_for((await env2.execute_async("stop-kafka-src-2")).get_job_execution_result(), 60)
    assert 0 < len(first) < total
    assert sorted(first + second) == list(range(total))
