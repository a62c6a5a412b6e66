"""A restart that restores the same checkpoint a second time (the attempt before it failed before
completing a checkpoint of its own) restores it as it was written, not as the failed attempt left
its decoded state: each restore decodes the checkpoint afresh.

Found by tests/test_random_faults.py (seed 206 with ``STREAMFLOW_RANDOM_FAULTS=300``: the heap
backend, checkpoints kept in memory, a second failure before the restarted attempt's first
checkpoint): the running counts of the second restore were ahead of the sums.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.testing import faults

DATA = [(f"k{i % 5}", i) for i in range(300)]


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    faults.clear()


class Sums(sf.KeyedProcessFunction):
    def open(self, runtime_context: Any) -> None:
        self.sum = runtime_context.get_state(sf.ValueStateDescriptor("sum", None))
        self.counts = runtime_context.get_map_state(sf.MapStateDescriptor("counts", None, None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        total = (self.sum.value() or 0) + value[1]
        self.sum.update(total)
        n = (self.counts.get("n") or 0) + 1
        self.counts.put("n", n)
        yield f"{value[0]},{total},{n}"


def expected(data: list[tuple[str, int]]) -> Counter[str]:
    sums: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    out: Counter[str] = Counter()
    for key, value in data:
        sums[key] += value
        counts[key] += 1
        out[f"{key},{sums[key]},{counts[key]}"] += 1
    return out


def committed(tmp: Path) -> Counter[str]:
    out: Counter[str] = Counter()
    for f in sorted((tmp / "out").iterdir()):
        if f.is_file() and not f.name.startswith("."):
            out.update(f.read_text().splitlines())
    return out


async def slow(record: Any) -> Any:
    if faults.hits("trigger") < 2 or record[1] % 3 == 0:  # slow until both failures happened
        await asyncio.sleep(0.002)
    return record


class FailTwice(sf.MapFunction):
    """Fails the first two attempts at their 40th record (long before their first checkpoint)."""

    def open(self, runtime_context: Any) -> None:
        self.attempt, self.seen = runtime_context.get_attempt_number(), 0

    def map(self, value: Any) -> Any:
        self.seen += 1
        if self.attempt < 2 and self.seen == 40:
            raise RuntimeError(f"injected failure in attempt {self.attempt}")
        return value


def job(
    tmp: Path, data: list[tuple[str, int]], *, storage: bool, backend: str = "heap", fail: bool = False
) -> Any:
    env = sf.StreamExecutionEnvironment().set_parallelism(2).set_batch_size(8)
    env.enable_checkpointing(60_000 if fail else 10)
    if storage:
        env.get_checkpoint_config().set_checkpoint_storage_dir(tmp / "chk")
    if backend == "rocksdb":
        env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    elif backend == "heap full":
        env.get_checkpoint_config().enable_incremental_checkpoints(False)
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(3, 0))
    sink = sf.FileSink.for_row_format(str(tmp / "out"), sf.Encoder.simple_string_encoder()).build()
    (
        env.from_collection(data).uid("src")
        .map(slow, concurrency=1).uid("slow").set_parallelism(1)  # a key's records stay in order
        .map(FailTwice() if fail else (lambda r: r)).uid("fail").set_parallelism(1)
        .key_by(lambda r: r[0])
        .process(Sums()).uid("sums")
        .sink_to(sink).uid("sink")
    )  # fmt: skip
    return env


@pytest.mark.parametrize("backend", ["heap", "heap full", "rocksdb"])
def test_a_second_restore_of_a_checkpoint_kept_in_memory_restores_it_as_written(
    tmp_path: Path, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """No storage directory: the latest checkpoint is kept in memory. Checkpoint 1 completes,
    the trigger of 2 fails (restart 1 restores 1); the restarted attempt's first trigger fails
    too (restart 2 restores 1 again)."""
    faults.inject("trigger", min_checkpoint_id=2, times=2)
    caplog.set_level(logging.INFO, logger="streamflow")
    result = job(tmp_path, DATA, storage=False, backend=backend).execute("sums")
    assert faults.hits("trigger") == 2 and result.metrics["job.numRestarts"] == 2
    assert caplog.text.count("restarted from memory") == 2
    assert committed(tmp_path) == expected(DATA)


def test_a_second_restore_of_a_savepoint_restores_it_as_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A job resumed from a savepoint (full snapshots of heap state) fails twice before its first
    checkpoint completes: both restarts restore the savepoint (the storage directory holds no
    checkpoint of the job)."""

    async def take_savepoint() -> str:
        client = await job(tmp_path, DATA, storage=False, backend="heap full").execute_async("sums")
        while client.execution.driver.num_completed < 2:
            await asyncio.sleep(0.005)
        return await client.stop_with_savepoint(False, str(tmp_path / "sp"))

    path = asyncio.run(take_savepoint())
    caplog.set_level(logging.INFO, logger="streamflow")
    env = job(tmp_path, DATA, storage=True, backend="heap full", fail=True)
    env.configure({"execution.savepoint.path": path})
    result = env.execute("sums")
    assert result.metrics["job.numRestarts"] == 2
    assert caplog.text.count(f"restarted from {path}") == 2
    assert committed(tmp_path) == expected(DATA)
