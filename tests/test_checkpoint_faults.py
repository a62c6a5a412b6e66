"""Checkpoints under faults, in-process (issue 9): the job's end settles what is in flight,
failures are loud and counted, restarts are logged, and the exactly-once FileSink's output
holds every record exactly once whatever point of a checkpoint's life fails.

The storage wrappers of ``streamflow.testing.storage`` stand for a slow disk (sleeps in
every write and fsync) and a full one (ENOSPC); ``streamflow.testing.faults.inject`` raises
at a named point of a checkpoint's life.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from child_env import child_env
from test_checkpointing import wait_until

import streamflow as sf
from streamflow.checkpoint.driver import CheckpointFailureError
from streamflow.checkpoint.storage import FileSystemCheckpointStorage
from streamflow.runtime.job import JobStatus, RestartsExhaustedError
from streamflow.testing import faults
from streamflow.testing.storage import FullDiskStorage, SlowStorage

DATA = [(f"{'a' if i < 150 else 'b'}{i % 5}", i) for i in range(300)]


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    faults.clear()


def committed_lines(directory: Path) -> list[str]:
    if not directory.exists():
        return []
    out: list[str] = []
    for f in sorted(directory.iterdir()):
        if f.is_file() and not f.name.startswith("."):
            out.extend(f.read_text().splitlines())
    return out


def expected_running_sums(data: list[tuple[str, int]]) -> Counter[str]:
    sums: dict[str, int] = {}
    out: Counter[str] = Counter()
    for key, value in data:
        sums[key] = sums.get(key, 0) + value
        out[str((key, sums[key]))] += 1
    return out


def assert_no_half_valid_checkpoint(directory: Path) -> None:
    """Every chk-* directory is complete (its _metadata and entries verify), none half-written."""
    storage = FileSystemCheckpointStorage(directory)
    for d in directory.glob("chk-*"):
        handle = storage.load(d)
        handle.verify()


async def slow(record: Any) -> Any:
    if record[1] % 3 == 0:  # about 200 ms per source: several checkpoints happen meanwhile
        await asyncio.sleep(0.004)
    return record


def sum_job(
    tmp_path: Path,
    storage: FileSystemCheckpointStorage,
    *,
    data: list = DATA,
    interval_ms: int = 10,
    restarts: int = 0,
    tolerable: int = 0,
    bucket_assigner: Any = None,
    compact: tuple | None = None,
    gate: Callable[[], bool] | None = None,
    roll: bool = False,
) -> sf.StreamExecutionEnvironment:
    """Two throttled sources, a union, a keyed running sum at parallelism 2, an exactly-once
    FileSink; every key comes from one source, so its running sums do not depend on timing.
    ``gate``: each source's last record is held until it answers True (10 s at most)."""
    env = sf.StreamExecutionEnvironment().set_parallelism(2).set_batch_size(8)
    env.enable_checkpointing(interval_ms)
    cfg = env.get_checkpoint_config()
    cfg.set_checkpoint_storage(storage)
    cfg.set_tolerable_checkpoint_failure_number(tolerable)
    env.set_restart_strategy(
        sf.RestartStrategies.fixed_delay_restart(restarts, 0)
        if restarts
        else sf.RestartStrategies.no_restart()
    )
    half = len(data) // 2
    last = {data[half - 1], data[-1]}

    async def gated(record: Any) -> Any:
        if gate is not None and record in last:
            end = asyncio.get_running_loop().time() + 10.0
            while not gate() and asyncio.get_running_loop().time() < end:
                await asyncio.sleep(0.002)
        return await slow(record)

    a = (
        env.from_collection(data[:half])
        .uid("src-a")
        .map(gated, concurrency=1)
        .uid("slow-a")
        .set_parallelism(1)
    )
    b = (
        env.from_collection(data[half:])
        .uid("src-b")
        .map(gated, concurrency=1)
        .uid("slow-b")
        .set_parallelism(1)
    )
    sink = sf.FileSink.for_row_format(str(tmp_path / "out"), sf.Encoder.simple_string_encoder())
    if bucket_assigner is not None:
        sink = sink.with_bucket_assigner(bucket_assigner)
    if roll:  # a part file per checkpoint, published when the checkpoint completes
        sink = sink.with_rolling_policy(sf.RollingPolicy.on_checkpoint_rolling_policy())
    if compact is not None:  # (strategy, compactor): a file rolled per checkpoint, compacted
        sink = sink.with_rolling_policy(sf.RollingPolicy.on_checkpoint_rolling_policy())
        sink = sink.enable_compact(*compact)
    a.union(b).key_by(lambda r: r[0]).sum(1).uid("sum").sink_to(sink.build()).uid("sink")
    return env


def sum_job_failing_once(tmp_path: Path, point: str, *, gate: bool = False, **kw: Any) -> Any:
    """:func:`sum_job` (restarts allowed, slow storage) with an in-process failure at ``point``
    from checkpoint 2 on: the job passed the point once and restarted once; its result.
    ``gate``: each source's last record waits (in the async map, so checkpoints go on) until
    the job passed ``point``, so a short job cannot end first (at most 10 s)."""
    faults.inject(point, min_checkpoint_id=2)
    try:
        storage = SlowStorage(tmp_path / "chk", delay_s=0.003)
        until = (lambda: faults.hits(point) >= 1) if gate else None
        result = sum_job(tmp_path, storage, restarts=5, gate=until, **kw).execute("sums")
        assert faults.hits(point) == 1, f"the job never passed {point!r}"
    finally:
        faults.clear()
    assert result.metrics["job.numRestarts"] == 1
    return result


class Endless:
    """An async source that yields ``("k", i)`` forever, slowly (the job keeps running)."""

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        i = 0
        while True:
            yield ("k", i)
            i += 1
            await asyncio.sleep(0.001)


def endless_job(storage: FileSystemCheckpointStorage, **kw: Any) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(kw.pop("interval_ms", 10))
    cfg = env.get_checkpoint_config().set_checkpoint_storage(storage)
    cfg.set_tolerable_checkpoint_failure_number(kw.pop("tolerable", 0))
    env.set_restart_strategy(kw.pop("strategy", sf.RestartStrategies.no_restart()))
    env.from_async_iterable(Endless().__aiter__).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(
        lambda r: None
    )
    return env


async def wait_for(cond: Any, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "condition not reached in time"
        await asyncio.sleep(0.002)


def listing(directory: Path) -> dict[str, list[str]]:
    return {d.name: sorted(os.listdir(d)) for d in sorted(directory.glob("chk-*"))}


# ---------------------------------------------------------------- defect 1: settle on the job's end


async def test_cancel_settles_the_checkpoint_being_written(tmp_path: Path) -> None:
    storage = SlowStorage(tmp_path / "chk", delay_s=0.05)
    client = await endless_job(storage).execute_async("endless")
    await wait_for(storage.writing.is_set)
    await client.cancel()
    assert client.get_job_status() is JobStatus.CANCELED
    after_cancel = listing(tmp_path / "chk")
    await asyncio.sleep(0.4)  # a write going on behind the cancelled job would show here
    assert listing(tmp_path / "chk") == after_cancel
    assert not storage.writing.is_set()
    assert_no_half_valid_checkpoint(tmp_path / "chk")
    driver = client.execution.driver
    assert not driver.writer.writes and not driver._requests and not driver._request_of_checkpoint
    assert driver.coordinator.stats.in_flight == ()


async def test_failover_settles_then_restores_the_newest_and_never_reuses_an_id(tmp_path: Path) -> None:
    storage = SlowStorage(tmp_path / "chk", delay_s=0.01)
    faults.inject("persist", min_checkpoint_id=2)
    env = sum_job(tmp_path, storage, restarts=3, tolerable=0)
    result = await (await env.execute_async("sums")).get_job_execution_result()
    assert faults.hits("persist") == 1 and result.metrics["job.numRestarts"] == 1
    assert Counter(committed_lines(tmp_path / "out")) == expected_running_sums(DATA)
    assert_no_half_valid_checkpoint(tmp_path / "chk")


# ---------------------------------------------------------------- defect 8: lifecycle


async def test_cancel_right_after_execute_async_is_canceled(tmp_path: Path) -> None:
    client = await endless_job(FileSystemCheckpointStorage(tmp_path / "chk")).execute_async("endless")
    await client.cancel()
    assert client.get_job_status() is JobStatus.CANCELED
    result = await asyncio.wait_for(client.get_job_execution_result(), 5)
    assert result.status is JobStatus.CANCELED


async def test_driver_keeps_no_per_checkpoint_history(tmp_path: Path) -> None:
    storage = FileSystemCheckpointStorage(tmp_path / "chk", retain=1)
    client = await endless_job(storage, interval_ms=10).execute_async("endless")
    await wait_for(lambda: client.execution.driver.num_completed >= 40)
    driver = client.execution.driver
    assert driver.durations_ms.maxlen is not None and not hasattr(driver, "completed")
    assert len(driver._request_of_checkpoint) == 0 and len(driver._requests) == 0
    assert len(driver.writer.writes) <= 1
    await client.cancel()


def test_sigterm_is_a_graceful_shutdown(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from pathlib import Path
        import streamflow as sf
        from streamflow.testing.storage import SlowStorage

        class Marking(sf.MapFunction):
            def map(self, value):
                return value
            def close(self):
                Path({str(tmp_path / "closed")!r}).write_text("closed")

        async def endless():
            i = 0
            while True:
                yield ("k", i)
                i += 1
                await asyncio.sleep(0.001)

        env = sf.StreamExecutionEnvironment()
        env.enable_checkpointing(10)
        env.get_checkpoint_config().set_checkpoint_storage(SlowStorage({str(tmp_path / "chk")!r}, 0.02))
        env.from_async_iterable(endless).map(Marking()).print()
        print("started", flush=True)
        env.execute("endless")
        """
    )
    env = child_env(PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"started"
        deadline = 10.0
        while not list((tmp_path / "chk").glob("chk-*/_metadata")) and deadline > 0:
            deadline -= 0.02
            import time

            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err.decode()[-2000:]
    assert b"SIGTERM: cancelling job" in err
    assert (tmp_path / "closed").read_text() == "closed"  # close() ran
    assert_no_half_valid_checkpoint(tmp_path / "chk")  # the checkpoint in flight was settled


# ---------------------------------------------------------------- defect 4: failures are loud


async def test_full_disk_fails_fast_and_leaves_no_directories(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    client = await endless_job(FullDiskStorage(tmp_path / "chk")).execute_async("endless")
    try:
        with pytest.raises(CheckpointFailureError, match="tolerable") as info:
            await asyncio.wait_for(client.get_job_execution_result(), 10)
    finally:
        await client.cancel()
    assert "No space left on device" in str(info.value)
    assert list((tmp_path / "chk").glob("chk-*")) == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        m.startswith("checkpoint 1 failed: persist_failed") and "No space left" in m and "0 tolerated" in m
        for m in warnings
    )


async def test_tolerable_failures_then_restarts_then_an_exhausted_strategy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    env = endless_job(
        FullDiskStorage(tmp_path / "chk"),
        tolerable=1,
        strategy=sf.RestartStrategies.fixed_delay_restart(2, 0),
    )
    client = await env.execute_async("endless")
    try:
        with pytest.raises(RestartsExhaustedError, match=r"exhausted after 2 restart\(s\)") as info:
            await asyncio.wait_for(client.get_job_execution_result(), 20)
    finally:
        await client.cancel()
    assert isinstance(info.value.__cause__, CheckpointFailureError)
    assert client.get_job_status() is JobStatus.FAILED
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    failed = [m for m in messages if "failed: persist_failed" in m]
    restarts = [m for m in messages if "; restart " in m]
    assert len(failed) == 3 * 2  # two failures per attempt (1 tolerated), three attempts
    assert len(restarts) == 2 and all("CheckpointFailureError" in m for m in restarts)


# ---------------------------------------------------------------- the proof: every point fails once


# "committed" is the Kafka sink's own point (tests/test_kafka_kill.py kills there); this job writes files
@pytest.mark.parametrize("point", [p for p in faults.POINTS if p != "committed"])
def test_a_failure_at_any_point_of_a_checkpoint_keeps_exactly_once(tmp_path: Path, point: str) -> None:
    sum_job_failing_once(tmp_path, point)
    assert Counter(committed_lines(tmp_path / "out")) == expected_running_sums(DATA)
    assert_no_half_valid_checkpoint(tmp_path / "chk")
    assert not [f for f in (tmp_path / "out").iterdir() if f.name.startswith(".")]


async def test_repeated_cancel_and_restart_from_an_embedding_loop(tmp_path: Path) -> None:
    rng = random.Random(7)
    storage = SlowStorage(tmp_path / "chk", delay_s=0.01)
    for _ in range(5):
        client = await sum_job(tmp_path, storage).execute_async("sums")
        await asyncio.sleep(rng.uniform(0.03, 0.15))
        await client.cancel()
        assert client.get_job_status() in (JobStatus.CANCELED, JobStatus.FINISHED)
        assert_no_half_valid_checkpoint(tmp_path / "chk")
    result = await (await sum_job(tmp_path, storage).execute_async("sums")).get_job_execution_result()
    assert result.status is JobStatus.FINISHED
    assert Counter(committed_lines(tmp_path / "out")) == expected_running_sums(DATA)
    assert_no_half_valid_checkpoint(tmp_path / "chk")


async def test_a_queued_manual_checkpoint_completes(tmp_path: Path) -> None:
    storage = SlowStorage(tmp_path / "chk", delay_s=0.01)
    client = await endless_job(storage, interval_ms=60_000).execute_async("endless")
    try:
        first, second = await asyncio.wait_for(
            asyncio.gather(client.trigger_checkpoint(), client.trigger_checkpoint()), 10
        )  # the second waits for a free slot (max 1 concurrent)
        assert Path(first).name == "chk-1" and Path(second).name == "chk-2"
    finally:
        await client.cancel()


def test_a_restart_whose_restore_fails_is_one_more_failure_and_restarts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A failover whose read of the latest checkpoint fails (a transient I/O error) is one more
    failure of the job, counted by the restart strategy and restarted again (Flink: a failure
    while restoring state fails the tasks over again); it ended the job with restarts left.
    Found by tests/test_random_faults.py (fault "restore")."""
    from streamflow.runtime.job import JobClient

    original, left = JobClient._latest_restore, [2]

    def failing(self: JobClient) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise OSError("injected: reading the checkpoint failed")
        return original(self)

    monkeypatch.setattr(JobClient, "_latest_restore", failing)
    caplog.set_level(logging.WARNING)
    result = sum_job_failing_once_with_restarts(tmp_path, "complete", restarts=5)
    assert left == [0] and result.metrics["job.numRestarts"] == 3
    assert Counter(committed_lines(tmp_path / "out")) == expected_running_sums(DATA)
    restores = [m for m in caplog.messages if "restoring its latest completed checkpoint failed" in m]
    assert len(restores) == 2 and all("OSError: injected" in m for m in restores)


def test_a_restore_that_keeps_failing_exhausts_the_restart_strategy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamflow.runtime.job import JobClient

    def failing(self: JobClient) -> Any:
        raise OSError("injected: reading the checkpoint failed")

    monkeypatch.setattr(JobClient, "_latest_restore", failing)
    faults.inject("complete", min_checkpoint_id=2)
    env = sum_job(tmp_path, SlowStorage(tmp_path / "chk", delay_s=0.003), restarts=3)

    async def run() -> JobStatus:
        client = await env.execute_async("sums")
        with pytest.raises(RestartsExhaustedError, match=r"exhausted after 3 restart\(s\)") as info:
            await asyncio.wait_for(client.get_job_execution_result(), 20)
        assert isinstance(info.value.__cause__, OSError)
        return client.get_job_status()

    assert asyncio.run(run()) is JobStatus.FAILED


def sum_job_failing_once_with_restarts(tmp_path: Path, point: str, restarts: int) -> Any:
    faults.inject(point, min_checkpoint_id=2)
    storage = SlowStorage(tmp_path / "chk", delay_s=0.003)
    return sum_job(tmp_path, storage, restarts=restarts).execute("sums")


async def test_a_failure_committing_a_stop_with_savepoint_fails_the_job_naming_the_savepoint(
    tmp_path: Path,
) -> None:
    """The stop-with-savepoint's savepoint completed and a sink failed while committing it (part
    of its output visible): restarting from the latest checkpoint, older than the savepoint,
    wrote that output twice. As Flink (FLINK-26783) the job fails instead, naming the savepoint;
    resuming from it commits the rest: every record exactly once. Found by
    tests/test_random_kafka_faults.py (seed 67 with ``STREAMFLOW_RANDOM_KAFKA_FAULTS=90``)."""
    from streamflow.runtime.job import SavepointCommitError

    storage = FileSystemCheckpointStorage(tmp_path / "chk")
    env = sum_job(tmp_path, storage, interval_ms=60_000, restarts=3, roll=True)
    client = await env.execute_async("sums")
    out = tmp_path / "out"
    # a part file in progress: records came before the checkpoint a failover would restore,
    await wait_until(lambda: any(out.rglob("*.inprogress")))
    await client.trigger_checkpoint()
    # and after it (the checkpoint rolled every part file), so the savepoint has one to commit;
    # the checkpoint's own part files committed (none pending), so the fault hits the savepoint's
    await wait_until(lambda: any(out.rglob("*.inprogress")) and not any(out.rglob("*.pending")))
    faults.inject("commit")  # the savepoint's commit: its first file visible, then the failure
    with pytest.raises(SavepointCommitError, match="resume it from the savepoint") as info:
        await client.stop_with_savepoint(False, str(tmp_path / "sp"))
    path = info.value.savepoint_path
    assert Path(path).parent == tmp_path / "sp" and (Path(path) / "_metadata").is_file()
    with pytest.raises(SavepointCommitError):
        await client.get_job_execution_result()
    assert client.get_job_status() is JobStatus.FAILED and client.restarts == 0
    faults.clear()
    resumed = sum_job(tmp_path, storage, restarts=0, roll=True)
    resumed.configure({"execution.savepoint.path": path})
    await (await resumed.execute_async("sums")).get_job_execution_result()
    assert Counter(committed_lines(tmp_path / "out")) == expected_running_sums(DATA)
