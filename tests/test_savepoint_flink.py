"""Savepoints taken while unaligned checkpoints run, ported from Flink's
``flink-tests/src/test/java/org/apache/flink/test/checkpointing/SavepointITCase.java``
(``testTriggerSavepointAndResumeWithFileBasedCheckpoints``'s trigger-then-resume, under
unaligned checkpointing as ``UnalignedCheckpointITCase``'s topologies run it) and
``UnalignedCheckpointRescaleITCase``'s rescale.

Flink's rule: a savepoint is always aligned (``CheckpointOptions.forConfig`` /
``SnapshotType.isSavepoint()``: unaligned checkpoints apply to checkpoints only), so it holds
no in-flight data and a job may resume from it with another parallelism and another
partitioning between the same operators. Theory of the check: the first job runs under
backpressure with unaligned checkpoints every 10 ms, a savepoint is triggered mid-stream
(concurrently with the periodic checkpoints) and the job is cancelled; the savepoint must
hold no channel state, and the second job, restored from it with another topology and
parallelism, must count every record exactly once (the sink's counts in the savepoint plus
the second run's).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_checkpointing import Gate, savepoint_of_sum_job, wait_until
from test_unaligned_checkpoint_flink import (
    KEYS,
    N,
    Progress,
    VerifyingSink,
    in_flight_batches,
    in_flight_batches_of,
    source_records,
)

import streamflow as sf
from streamflow.checkpoint.metadata import read_metadata


def job(
    tmp_path: Path, partitioning: str, parallelism: int, progress: Progress
) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(8)
    env.set_channel_capacity(32)
    env.enable_checkpointing(10)
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    cfg.set_max_retained_checkpoints(1_000).enable_unaligned_checkpoints()
    s = env.from_async_iterable(source_records("a", progress)).uid("src").set_parallelism(1)
    if partitioning == "keyed":
        s = s.key_by(lambda r: r[1]).map(lambda r: r).uid("pass").key_by(lambda r: r[1])
    else:
        s = s.rebalance().map(lambda r: r).uid("pass").rescale()
    s.sink_to(VerifyingSink(progress, partitioning == "keyed")).uid("sink").disable_chaining()
    return env


@pytest.mark.parametrize(
    ("first", "second", "new_p"),
    [("keyed", "keyed", 3), ("keyed", "rebalance", 2), ("rebalance", "keyed", 1)],
)
async def test_savepoint_under_unaligned_checkpoints_is_aligned(
    tmp_path: Path, first: str, second: str, new_p: int
) -> None:
    progress = Progress()
    progress.failed = True
    env = job(tmp_path, first, 2, progress)
    client = await env.execute_async("first")
    while progress.completed < 2:  # the source holds its second half until then
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.05)  # backpressured: data in flight while checkpoints keep coming
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)
    assert in_flight_batches(tmp_path / "chk") > 0, "no barrier overtook data: the test proves nothing"
    assert in_flight_batches_of(read_metadata(Path(path), None)) == 0, "the savepoint holds in-flight data"
    progress2 = Progress()
    progress2.failed, progress2.completed = True, 2
    env2 = job(tmp_path / "second", second, new_p, progress2)
    env2.configure({"execution.savepoint.path": path})
    await (await env2.execute_async("second")).get_job_execution_result()
    counts: dict[Any, int] = {}
    for state in progress2.final.values():
        for rid, n in state["seen"].items():
            counts[rid] = counts.get(rid, 0) + n
    assert counts == {("a", f"k{i % KEYS}", i): 1 for i in range(N)}


@pytest.mark.parametrize("form", ["file:///{}", "file:{}", "file://localhost{}", "{}/_metadata"])
async def test_resume_from_a_savepoint_uri(tmp_path: Path, form: str) -> None:
    """``SavepointITCase#testTriggerSavepointAndResumeWithFileBasedCheckpoints`` resumes from the
    path the savepoint trigger returns, which Flink gives as a URI (``file:/tmp/...``): the
    restore path ``execution.savepoint.path`` takes local ``file:`` URIs (Flink resolves it
    with ``Path.getFileSystem()``) and the ``_metadata`` file as well as its directory."""
    path = await savepoint_of_sum_job(tmp_path)
    env = sf.StreamExecutionEnvironment()
    absolute = str(Path(path).resolve())
    where = form.format(absolute.lstrip("/") if "///" in form else absolute)
    env.configure({"execution.savepoint.path": where})
    out: list = []
    data = [("a", 1), ("b", 2), ("a", 3), ("a", 10)]
    env.from_collection(data).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(out.append)
    await (await env.execute_async("resumed")).get_job_execution_result()
    assert out == [("a", 14)]  # the source resumed after its 3 records, the sum of "a" restored


@pytest.mark.parametrize("stop", [False, True], ids=["trigger", "stop"])
async def test_savepoint_into_a_file_uri(tmp_path: Path, stop: bool) -> None:
    """``SavepointITCase`` triggers savepoints into ``file:`` URI targets (Flink's savepoint
    directory is a URI): the savepoint is written into that local directory (streamflow wrote
    it to a relative directory named ``file:``), in a ``savepoint-*`` directory of its own."""
    gate = Gate([("a", 1), ("b", 2), ("a", 3), ("a", 0)], 3)
    env = sf.StreamExecutionEnvironment()
    out: list = []
    env.from_async_iterable(gate.__aiter__).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(
        out.append
    )
    client = await env.execute_async("sums")
    await wait_until(lambda: len(out) == 3)
    target = (tmp_path / "sp").resolve()
    if stop:
        path = await client.stop_with_savepoint(False, f"file://{target}")
    else:
        path = await client.trigger_savepoint(f"file://{target}")
        await asyncio.wait_for(client.cancel(), 30)
    assert Path(path).resolve().parent == target and Path(path).name.startswith("savepoint-")
    assert (Path(path) / "_metadata").is_file()
    assert not Path("file:").exists()


@pytest.mark.parametrize("how", ["setter", "state.savepoints.dir", "execution.checkpointing.savepoint-dir"])
async def test_the_default_savepoint_directory_takes_many_savepoints(tmp_path: Path, how: str) -> None:
    """Flink's ``state.savepoints.dir`` (PyFlink's default savepoint directory): each savepoint
    goes into its own ``savepoint-<job id>-<random>`` directory inside it
    (``AbstractFsCheckpointStorageAccess.initializeLocationForSavepoint``), so a second
    savepoint without a target succeeds (streamflow refused it: the directory was not empty),
    and each one restores."""
    gate = Gate([("a", 1), ("b", 2), ("a", 3), ("a", 0)], 3)
    env = sf.StreamExecutionEnvironment()
    if how == "setter":
        env.set_default_savepoint_directory(str(tmp_path / "sps"))
    else:
        env.configure({how: f"file://{tmp_path / 'sps'}"})
    out: list = []
    env.from_async_iterable(gate.__aiter__).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(
        out.append
    )
    client = await env.execute_async("sums")
    await wait_until(lambda: len(out) == 3)
    first = await client.trigger_savepoint()
    second = await client.trigger_savepoint()
    await asyncio.wait_for(client.cancel(), 30)
    assert first != second
    for path in (first, second):
        assert Path(path).parent == tmp_path / "sps" and Path(path).name.startswith("savepoint-")
        env2 = sf.StreamExecutionEnvironment()
        env2.configure({"execution.savepoint.path": path})
        out2: list = []
        data = [("a", 1), ("b", 2), ("a", 3), ("a", 10)]
        env2.from_collection(data).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(out2.append)
        await (await env2.execute_async("resumed")).get_job_execution_result()
        assert out2 == [("a", 14)]
