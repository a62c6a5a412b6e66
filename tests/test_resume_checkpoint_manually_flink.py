"""Resuming retained checkpoints by hand, job after job, ported from Flink's
``flink-tests/src/test/java/org/apache/flink/test/checkpointing/ResumeCheckpointManuallyITCase.java``
(``testExternalized{Full,Incremental}RocksDBCheckpoints...``, ``testExternalizedFSCheckpoints...``:
run, cancel retaining the checkpoint, resume from it, cancel again, resume from the newer one),
with the rescale of ``RescalingITCase#testCheckpointRescaling*`` between the resumes.

Flink's rules checked: a job resumed from a retained checkpoint (default restore mode
NO_CLAIM) does not take ownership of it: its own checkpoints are self-contained in its own
right, so the user may delete the checkpoint it resumed from once it completed one
checkpoint, and a later job resumes from the newer checkpoint alone. Theory: a keyed running
sum per key over three phases of input; each job resumes where the previous checkpoint left
the source and the sums, whatever the backend (heap incremental or full, RocksDB), the
storage directory (shared with the first job or its own) and the parallelism.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_checkpointing import Gate, wait_until

import streamflow as sf
from streamflow.checkpoint.storage import FileSystemCheckpointStorage
from streamflow.datastream.window import TumblingEventTimeWindows

KEYS = 9
PHASE = 90  # records per phase: 10 per key


def data() -> list[tuple[str, int]]:
    return [(f"k{i % KEYS}", i) for i in range(3 * PHASE)]


def env_for(directory: Path, backend: str, parallelism: int) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    if backend == "rocksdb":
        env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    env.enable_checkpointing(60_000)  # checkpoints are triggered by the test
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(directory)
    cfg.enable_incremental_checkpoints(backend != "heap-full")  # RocksDB: always incremental
    return env


async def run_phase(
    directory: Path, backend: str, parallelism: int, stop: int, restore: Path | None
) -> tuple[list, Path]:
    """Runs the job until the source reached ``stop`` records, checkpoints, cancels: the
    sums it emitted and the checkpoint it retained."""
    env = env_for(directory, backend, parallelism)
    if restore is not None:
        env.configure({"execution.savepoint.path": str(restore)})
    out: list = []
    gate = Gate(data(), stop)
    env.from_async_iterable(gate.__aiter__).uid("src").set_parallelism(1).key_by(lambda r: r[0]).sum(1).uid(
        "sum"
    ).add_sink(out.append)
    client = await env.execute_async("resume")
    before = 0 if restore is None else stop - PHASE
    if stop == len(data()):  # the last job runs to the end
        await client.get_job_execution_result()
        return out, directory
    await wait_until(lambda: len(out) == stop - before, timeout=20.0)
    await client.trigger_checkpoint()
    await asyncio.wait_for(client.cancel(), 30)
    try:
        await client.get_job_execution_result()
    except BaseException:  # cancelled on purpose
        pass
    return out, FileSystemCheckpointStorage(directory).complete_checkpoints()[-1].path


def expected_sums(upto: int) -> dict[str, int]:
    sums: dict[str, int] = {}
    for k, v in data()[:upto]:
        sums[k] = sums.get(k, 0) + v
    return sums


@pytest.mark.parametrize("own_directories", [False, True], ids=["shared-dir", "own-dirs"])
@pytest.mark.parametrize("backend", ["heap", "heap-full", "rocksdb"])
async def test_resume_retained_checkpoints_by_hand(
    tmp_path: Path, backend: str, own_directories: bool
) -> None:
    dirs = [tmp_path / (f"chk{i}" if own_directories else "chk") for i in range(3)]
    out: list[Any] = []
    restore: Path | None = None
    for phase, parallelism in enumerate([2, 3, 1]):
        emitted, restore = await run_phase(dirs[phase], backend, parallelism, (phase + 1) * PHASE, restore)
        out += emitted
        final = dict(out)
        assert final == expected_sums((phase + 1) * PHASE), f"after phase {phase + 1}"
        if own_directories and phase == 1:
            # NO_CLAIM: once the second job completed a checkpoint the first job's may go
            shutil.rmtree(dirs[0])
    assert len(out) == 3 * PHASE


def apply_sum(key: int, window: Any, inputs: Any) -> Any:
    values = [r[1] for r in inputs]
    yield (key, window.start, window.end, sum(values), len(values))


def _fired(stop: int) -> int:
    """The windows (per key) that the first ``stop`` records fire: those ending by the largest
    timestamp, ``(stop - 1) // 3``."""
    return 0 if stop == 0 else ((stop - 1) // 3 + 1) // 100


async def run_window_phase(
    directory: Path, backend: str, parallelism: int, stop: int, restore: Path | None, start: int
) -> tuple[list, Path]:
    """``ResumeCheckpointManuallyITCase``'s own job: keyed event-time tumbling windows (of
    100 ms over ``(key, i, time i)``), resumed job after job, from the checkpoint the job that
    read ``start`` records took."""
    env = env_for(directory, backend, parallelism)
    if restore is not None:
        env.configure({"execution.savepoint.path": str(restore)})
    records = [(k, i, i) for i in range(300) for k in range(3)]
    out: list = []
    gate = Gate(records, stop)
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r: r[2])
    (
        env.from_async_iterable(gate.__aiter__)
        .uid("src")
        .set_parallelism(1)
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(100))
        .apply(apply_sum)
        .uid("window")
        .add_sink(out.append)
    )
    client = await env.execute_async("resume windows")
    if stop == len(records):
        await client.get_job_execution_result()
        return out, directory
    # Every window this phase fires must fire before the checkpoint: one fired after it is fired
    # again by the next job (the list sink is not transactional), as Flink's would be. A window
    # fires once the watermark (the largest timestamp so far, less 1) reaches its end - 1.
    await wait_until(lambda: len(out) == 3 * (_fired(stop) - _fired(start)), timeout=20.0)
    await client.trigger_checkpoint()
    await asyncio.wait_for(client.cancel(), 30)
    try:
        await client.get_job_execution_result()
    except BaseException:  # cancelled on purpose
        pass
    return out, FileSystemCheckpointStorage(directory).complete_checkpoints()[-1].path


@pytest.mark.parametrize("backend", ["heap", "heap-full", "rocksdb"])
async def test_resume_window_state_by_hand_twice(tmp_path: Path, backend: str) -> None:
    """Window contents written after a resume are in the next checkpoint: the third job
    fires every window with all its elements (RocksDB lost what the resumed job wrote:
    its window tables were stale objects the checkpoints never flushed)."""
    out: list[Any] = []
    restore: Path | None = None
    start = 0
    for stop, parallelism in [(30, 2), (450, 2), (750, 3), (900, 1)]:
        emitted, restore = await run_window_phase(
            tmp_path / "chk", backend, parallelism, stop, restore, start
        )
        out += emitted
        start = stop
    expected = [
        (k, s, s + 100, sum(range(s, s + 100)), 100) for k in range(3) for s in (0, 100, 200)
    ]
    assert sorted(out) == sorted(expected)


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
async def test_the_checkpoint_resumed_from_is_not_deleted_by_the_resumed_job(
    tmp_path: Path, backend: str
) -> None:
    """``ResumeCheckpointManuallyITCase`` with Flink's default ``RestoreMode.NO_CLAIM``: the
    resumed job (same storage directory, retention 1) checkpoints past its retention; the
    checkpoint it resumed from stays, and can be resumed again."""
    directory = tmp_path / "chk"
    _, first = await run_phase(directory, backend, 2, PHASE, None)
    env = env_for(directory, backend, 2)
    env.get_checkpoint_config().set_max_retained_checkpoints(1)
    env.configure({"execution.savepoint.path": str(first)})
    out: list = []
    gate = Gate(data(), 2 * PHASE)
    env.from_async_iterable(gate.__aiter__).uid("src").set_parallelism(1).key_by(lambda r: r[0]).sum(1).uid(
        "sum"
    ).add_sink(out.append)
    client = await env.execute_async("resume")
    await wait_until(lambda: len(out) == PHASE, timeout=20.0)
    for _ in range(3):
        await client.trigger_checkpoint()
    await asyncio.wait_for(client.cancel(), 30)
    try:
        await client.get_job_execution_result()
    except BaseException:  # cancelled on purpose
        pass
    assert (first / "_metadata").is_file(), f"the resumed job deleted {first}"
    # and it resumes again (its shared files kept too)
    emitted, _ = await run_phase(directory, backend, 3, 2 * PHASE, first)
    assert dict(emitted) == {k: v for k, v in expected_sums(2 * PHASE).items()}


@pytest.mark.parametrize(
    "plan",
    [
        [("heap", 1), ("rocksdb", 1)],
        [("rocksdb", 2), ("heap", 3), ("rocksdb", 1), ("heap", 2)],
    ],
    ids=["heap-to-rocksdb", "switching"],
)
async def test_resume_window_state_switching_backends(tmp_path: Path, plan: list[tuple[str, int]]) -> None:
    """Flink's savepoints are in the canonical format, so a job resumes with the other state
    backend (``SavepointFormatITCase``, ``TimersSavepointITCase``'s switch): the open windows
    of a heap job (its tumbling windows' fast-path panes) fire with all their elements under
    RocksDB (they were lost: RocksDB never read the restored panes), and back."""
    stops = [450, 900] if len(plan) == 2 else [30, 450, 750, 900]
    out: list[Any] = []
    restore: Path | None = None
    start = 0
    for (backend, parallelism), stop in zip(plan, stops, strict=True):
        emitted, restore = await run_window_phase(
            tmp_path / "chk", backend, parallelism, stop, restore, start
        )
        out += emitted
        start = stop
    expected = [(k, s, s + 100, sum(range(s, s + 100)), 100) for k in range(3) for s in (0, 100, 200)]
    assert sorted(out) == sorted(expected)
