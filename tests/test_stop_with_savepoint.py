"""Stop-with-savepoint with Flink's semantics (FLIP-34 synchronous savepoints; Flink 1.15+).

Flink's ``JobClient.stopWithSavepoint(advanceToEndOfEventTime, dir)``: the sources halt at the
savepoint's barrier, so no record after it is processed anywhere; with
``advanceToEndOfEventTime`` (drain) they first emit ``MAX_WATERMARK``, so every event-time window
fires before the barrier, without it (suspend) none fires; the sinks are notified of the
savepoint's completion (two-phase-commit sinks commit) and the job ends FINISHED; a failed
savepoint leaves a suspended job running. Ported from Flink's ``SavepointITCase``
(``testStopWithSavepointForFlip27SourceWithDrain``, ``...WithoutDrain``,
``testStopWithSavepointFailsOverToSavepoint``-style abort cases) and ``StopWithSavepointITCase``
(flink-tests, ``test/checkpointing``), through the public API.

The old client took a savepoint and then cancelled the job: records processed between the two
reached the sinks and came again after a resume from the savepoint (duplicates), the job ended
CANCELED, and drain was only logged.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.common import WatermarkStrategy
from streamflow.common.watermark_strategy import TimestampAssigner
from streamflow.connectors.base import SourceReader
from streamflow.connectors.collection import AsyncIterableSource
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.window import TumblingEventTimeWindows
from streamflow.runtime.job import JobStatus

_ids = itertools.count()


class _Ts(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


class _Numbers(AsyncIterableSource):
    """Subtask ``i`` of ``p`` yields ``(key, ts, n)`` for ``n`` in ``range(i, count, p)``: paced
    (a few records a millisecond, so records flow when the job is stopped), then, if ``hold``,
    it waits forever (an unbounded source); replayable (its position is the count emitted)."""

    supports_parallelism = True

    def __init__(self, count: int, paced: bool, hold: bool = False) -> None:
        super().__init__(self._numbers)
        self.count, self.paced, self.hold = count, paced, hold

    async def _numbers(self, i: int = 0, p: int = 1) -> AsyncIterator[Any]:
        for n in range(i, self.count, p):
            yield (f"k{n % 3}", n * 10, n)
            if self.paced and n % 4 == i % 4:
                await asyncio.sleep(0.002)
        if self.hold:
            await asyncio.sleep(3600)

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        make: Callable[[], AsyncIterator[Any]] = lambda: self._numbers(subtask_index, parallelism)  # noqa: E731
        return AsyncIterableSource(make).create_reader(subtask_index, parallelism)


def _env(tmp_path: Path, parallelism: int, restore: str | None = None) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_default_savepoint_directory(str(tmp_path / f"sp{next(_ids)}"))
    if restore is not None:
        env.configure({"execution.savepoint.path": restore})
    return env


async def _wait_for(condition: Callable[[], bool], what: str) -> None:
    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _numbers_job(env: StreamExecutionEnvironment, source: _Numbers, out: list) -> None:
    (env.from_source(source, None, "numbers").uid("numbers").map(lambda v: v[2]).uid("value")
        .add_sink(out.append).uid("sink"))  # fmt: skip


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("drain", [False, True])
async def test_no_record_after_the_savepoint_reaches_a_sink(
    tmp_path: Path, parallelism: int, drain: bool
) -> None:
    """Records flow while the job stops; after a resume from its savepoint a plain
    (non-transactional) sink has seen every record exactly once: nothing after the barrier was
    processed in the first run. The stopped job ends FINISHED (Flink: FINISHED, not CANCELED)."""
    count = 20_000  # paced: 10 s at least, the stop comes after 0.1 s
    first: list = []
    env = _env(tmp_path, parallelism)
    _numbers_job(env, _Numbers(count, paced=True, hold=True), first)
    client = await env.execute_async("stop-dup")
    await _wait_for(lambda: len(first) >= 200, "records in the sink")
    path = await asyncio.wait_for(client.stop_with_savepoint(drain), 60)
    result = await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert result.status is JobStatus.FINISHED and client.get_job_status() is JobStatus.FINISHED
    latest = client.checkpoint_stats.latest_savepoint
    assert latest is not None and latest.to_json()["checkpoint_type"] == "SYNC_SAVEPOINT"  # Flink's REST name
    seen = len(first)
    await asyncio.sleep(0.1)
    assert len(first) == seen  # nothing after the stop
    assert seen < count
    second: list = []
    env2 = _env(tmp_path, parallelism, restore=path)
    _numbers_job(env2, _Numbers(count, paced=False), second)
    await asyncio.wait_for((await env2.execute_async("stop-dup-2")).get_job_execution_result(), 60)
    assert sorted(first + second) == list(range(count))


def _windows_job(env: StreamExecutionEnvironment, source: _Numbers, out: list, seen: list) -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Ts())
    stream = env.from_source(source, strategy, "numbers").uid("numbers")
    stream.map(lambda v: v).uid("seen").add_sink(seen.append).uid("seen-sink")
    (stream.key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(1000))
        .reduce(lambda a, b: (a[0], max(a[1], b[1]), a[2] + b[2])).uid("windows")
        .add_sink(out.append).uid("sink"))  # fmt: skip


class _Gated(_Numbers):
    """The first ``count`` records at once, then (``hold``) nothing: the stop comes when the
    job has processed them all, with their windows open."""

    def __init__(self, count: int, hold: bool) -> None:
        super().__init__(count, paced=False, hold=hold)


@pytest.mark.parametrize("parallelism", [1, 4])
async def test_drain_fires_the_open_windows_and_suspend_does_not(tmp_path: Path, parallelism: int) -> None:
    """Flink's ``--drain``: MAX_WATERMARK before the savepoint, every open window fires and its
    output is in the first run; without drain no open window fires, and the windows restored
    from the savepoint fire after the resume (here when the resumed input ends): the union of
    both runs is then the result of one uninterrupted run."""
    count = 150  # timestamps 0..1490: windows [0, 1000) and [1000, 2000), three keys each
    expected: dict[tuple[str, int], int] = {}
    for n in range(count):
        key = (f"k{n % 3}", n * 10 // 1000)
        expected[key] = expected.get(key, 0) + n

    def sums(out: list) -> dict[tuple[str, int], int]:
        return {(k, ts // 1000): total for k, ts, total in out}

    for drain in (True, False):
        out: list = []
        seen: list = []
        read, fired = (lambda seen=seen: len(seen) >= count), (lambda out=out: len(out) >= 3)
        env = _env(tmp_path, parallelism)
        _windows_job(env, _Gated(count, hold=True), out, seen)
        client = await env.execute_async(f"windows-{drain}")
        await _wait_for(read, "every record read")
        # the periodic watermark (1490 - 1) closes the windows [0, 1000) in the run
        await _wait_for(fired, "the windows [0, 1000) fired")
        path = await asyncio.wait_for(client.stop_with_savepoint(drain), 60)
        assert (await asyncio.wait_for(client.get_job_execution_result(), 60)).status is JobStatus.FINISHED
        if drain:
            assert sums(out) == expected  # every window fired at the drain
            continue
        # suspend: no MAX_WATERMARK; only the windows the watermark had passed fired, the open
        # ones [1000, 2000) did not
        assert {window for _, window in sums(out)} == {0} and len(out) == 3
        resumed: list = []
        env2 = _env(tmp_path, parallelism, restore=path)
        _windows_job(env2, _Gated(count, hold=False), resumed, [])
        await asyncio.wait_for((await env2.execute_async("windows-2")).get_job_execution_result(), 60)
        assert {window for _, window in sums(resumed)} == {1}  # the restored windows fired
        assert sums(out) | sums(resumed) == expected and len(out) + len(resumed) == len(expected)


async def test_a_failed_savepoint_leaves_a_suspended_job_running(tmp_path: Path) -> None:
    """Flink: when the savepoint of a stop-with-savepoint fails the job continues (the halted
    sources resume); the request raises, and a later stop succeeds, without duplicates."""
    count = 20_000  # paced: 10 s at least, the stop comes after 0.1 s
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    first: list = []
    env = _env(tmp_path, 2)
    _numbers_job(env, _Numbers(count, paced=True, hold=True), first)
    client = await env.execute_async("stop-fails")
    await _wait_for(lambda: len(first) >= 100, "records in the sink")
    with pytest.raises(Exception):  # noqa: B017 - the write error, whatever the platform names it
        await asyncio.wait_for(client.stop_with_savepoint(False, str(blocker / "sp")), 60)
    assert client.get_job_status() is JobStatus.RUNNING
    before = len(first)
    await _wait_for(lambda: len(first) > before + 100, "records after the failed stop")  # resumed
    path = await asyncio.wait_for(client.stop_with_savepoint(False), 60)
    assert (await asyncio.wait_for(client.get_job_execution_result(), 60)).status is JobStatus.FINISHED
    second: list = []
    env2 = _env(tmp_path, 2, restore=path)
    _numbers_job(env2, _Numbers(count, paced=False), second)
    await asyncio.wait_for((await env2.execute_async("stop-fails-2")).get_job_execution_result(), 60)
    assert sorted(first + second) == list(range(count))


async def test_a_failed_drained_savepoint_fails_the_job_over(tmp_path: Path) -> None:
    """Flink (``SavepointITCase#testStopWithSavepointWithDrainGlobalFailoverIfSavepointAborted``):
    a drained stop whose savepoint is aborted fails the job over, its sources having advanced
    event time to the end; without a restart strategy the job fails, naming the cause."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    first: list = []
    env = _env(tmp_path, 1)
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    _numbers_job(env, _Numbers(20_000, paced=True, hold=True), first)
    client = await env.execute_async("drain-fails")
    await _wait_for(lambda: len(first) >= 50, "records in the sink")
    with pytest.raises(Exception):  # noqa: B017
        await asyncio.wait_for(client.stop_with_savepoint(True, str(blocker / "sp")), 60)
    with pytest.raises(Exception, match="stop-with-savepoint with drain was aborted"):
        await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert client.get_job_status() is JobStatus.FAILED


async def test_a_held_processing_time_service_runs_no_callback_until_released() -> None:
    """After a stop-with-savepoint's barrier a task runs no processing-time callback (a periodic
    watermark or a timer would emit after the barrier: a window fired then would fire again
    after the resume); when the savepoint is aborted the callbacks due meanwhile run."""
    from streamflow.runtime.processing_time import ProcessingTimeService
    from streamflow.testing import ManualClock

    clock, wakes, ran = ManualClock(0), [], []
    service = ProcessingTimeService(clock, lambda: wakes.append(clock.now_ms()))

    async def callback(at: int) -> None:
        ran.append(at)

    service.register(100, callback)
    service.hold()
    clock.advance(150)
    assert (service.has_due(), wakes) == (False, [])  # the alarm found it held: no wake-up
    await service.run_due()
    assert ran == []
    service.release()
    assert (service.has_due(), wakes) == (True, [150])  # woken at the release
    await service.run_due()
    assert ran == [100]


async def test_no_watermark_after_a_suspended_stop_barrier(tmp_path: Path) -> None:
    """The source's periodic watermark is a processing-time callback: held from the barrier on,
    it cannot advance event time while the savepoint completes (a window fired after the barrier
    was sent to the sink, then fired again after the resume). Here the watermark would fire the
    window [0, 1000) 300 ms after the last record, while the savepoint's completion is held
    back as long: nothing fires in the first run, the window fires once, after the resume."""
    from streamflow.checkpoint import driver as driver_module

    slow = driver_module.CheckpointDriver._notify_stop

    def late_notify(self: Any, cid: int, tasks: list) -> None:
        asyncio.get_running_loop().call_later(0.6, slow, self, cid, tasks)

    count = 150
    out: list = []
    seen: list = []
    env = _env(tmp_path, 1)
    env.get_config().set_auto_watermark_interval(300)
    _windows_job(env, _Gated(count, hold=True), out, seen)
    client = await env.execute_async("late-watermark")
    await _wait_for(lambda: len(seen) >= count, "every record read")
    driver_module.CheckpointDriver._notify_stop = late_notify  # type: ignore[method-assign]
    try:
        path = await asyncio.wait_for(client.stop_with_savepoint(False), 60)
    finally:
        driver_module.CheckpointDriver._notify_stop = slow  # type: ignore[method-assign]
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    first = list(out)
    resumed: list = []
    env2 = _env(tmp_path, 1, restore=path)
    _windows_job(env2, _Gated(count, hold=False), resumed, [])
    await asyncio.wait_for((await env2.execute_async("late-watermark-2")).get_job_execution_result(), 60)
    windows = sorted((k, ts // 1000) for k, ts, _ in first + resumed)
    assert windows == sorted({(k, ts // 1000) for k, ts, _ in first + resumed})  # each fired once
    assert len(windows) == 6


@pytest.mark.parametrize("drain", [False, True])
async def test_stop_over_rest_as_flinks_stop_endpoint(tmp_path: Path, drain: bool) -> None:
    """Flink's ``POST /jobs/<id>/stop`` ``{"targetDirectory", "drain"}`` (``flink stop [--drain]``),
    its status at ``/jobs/<id>/savepoints/<request-id>``: through streamflow's REST client (what
    ``streamflow stop`` calls); the job ends FINISHED and the savepoint resumes without
    duplicates."""
    from streamflow.tools.rest_client import stop_with_savepoint

    count = 20_000  # paced: 10 s at least, the stop comes after 0.1 s
    first: list = []
    env = _env(tmp_path, 2)
    env.configure({"rest.port": 0})
    _numbers_job(env, _Numbers(count, paced=True, hold=True), first)
    client = await env.execute_async("stop-rest")
    await _wait_for(lambda: len(first) >= 100, "records in the sink")
    target = str(tmp_path / "stops")
    location = await asyncio.to_thread(stop_with_savepoint, client.rest.url, target, drain, 60.0)
    assert Path(location).parent == Path(target)
    assert (await asyncio.wait_for(client.get_job_execution_result(), 60)).status is JobStatus.FINISHED
    second: list = []
    env2 = _env(tmp_path, 2, restore=location)
    _numbers_job(env2, _Numbers(count, paced=False), second)
    await asyncio.wait_for((await env2.execute_async("stop-rest-2")).get_job_execution_result(), 60)
    assert sorted(first + second) == list(range(count))


async def test_the_spark_engine_refuses_a_stop_with_savepoint_naming_why() -> None:
    """Spark has no savepoints: the Spark engine's client refuses, as it refuses
    ``trigger_savepoint`` (the PyFlink-style client used to fall back to a savepoint request)."""
    from streamflow.spark.client import SparkJobClient

    client = object.__new__(SparkJobClient)  # (no Spark session: the refusal needs none)
    with pytest.raises(RuntimeError, match="not supported on the Spark engine"):
        await client.stop_with_savepoint(True, "/tmp/never")


@pytest.mark.parametrize("checkpointing", [False, True])
async def test_a_stop_after_a_bounded_pipeline_finished(tmp_path: Path, checkpointing: bool) -> None:
    """FLIP-147 with a stop (Flink's ``SavepointITCase`` with finished tasks): a bounded source
    that finished before the stop is in the savepoint as finished, so after the resume it emits
    nothing again, while the unbounded pipeline goes on from its position, each once."""
    count = 20_000  # paced: 10 s at least, the stop comes after 0.1 s

    def job(env: StreamExecutionEnvironment, source: _Numbers, bounded: list, unbounded: list) -> None:
        if checkpointing:
            env.enable_checkpointing(600_000)
            env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / f"chk{next(_ids)}"))
        (env.from_collection(list(range(50))).uid("bounded").map(lambda v: v).uid("b-map")
            .add_sink(bounded.append).uid("b-sink"))  # fmt: skip
        _numbers_job(env, source, unbounded)

    bounded: list = []
    first: list = []
    env = _env(tmp_path, 2)
    job(env, _Numbers(count, paced=True, hold=True), bounded, first)
    client = await env.execute_async("finished-then-stop")
    await _wait_for(lambda: len(bounded) == 50 and len(first) >= 200, "the bounded pipeline done")
    path = await asyncio.wait_for(client.stop_with_savepoint(False), 60)
    assert (await asyncio.wait_for(client.get_job_execution_result(), 60)).status is JobStatus.FINISHED
    again: list = []
    second: list = []
    env2 = _env(tmp_path, 2, restore=path)
    job(env2, _Numbers(count, paced=False), again, second)
    await asyncio.wait_for((await env2.execute_async("finished-then-stop-2")).get_job_execution_result(), 60)
    assert sorted(bounded) == list(range(50)) and again == []
    assert sorted(first + second) == list(range(count))


async def test_a_barrier_read_after_its_savepoints_abort_halts_nothing() -> None:
    """A task may be told of a stop's abort (another task declined) before it reads the
    savepoint's barrier, queued behind data: it must not halt then, or its processing-time
    callbacks would stay held while the job runs on."""
    from streamflow.runtime.processing_time import ProcessingTimeService
    from streamflow.runtime.task_state import ChainState
    from streamflow.testing import ManualClock

    class Chain(ChainState):
        def __init__(self) -> None:
            self.name, self.operators = "chain", []
            self.processing_time = ProcessingTimeService(ManualClock(0), lambda: None)

    async def tick(at: int) -> None:
        pass

    chain = Chain()
    chain.processing_time.register(0, tick)
    await chain.notify_checkpoint_aborted(5)
    assert await chain.halt_for_savepoint(5, drain=False) is False
    assert chain.halted_for is None and chain.processing_time.has_due()
    assert await chain.halt_for_savepoint(6, drain=False) is True
    assert chain.halted_for == 6 and not chain.processing_time.has_due()
    await chain.notify_checkpoint_aborted(6)
    assert chain.halted_for is None and chain.processing_time.has_due()


async def test_async_results_completing_after_the_barrier_are_not_emitted(tmp_path: Path) -> None:
    """An ``async def`` map's requests in flight at a suspended stop are in the savepoint (Flink's
    ``AsyncWaitOperator`` state); their results, completing after the barrier, are not emitted
    (the operator's drain is a processing-time mail, held): the resumed job re-issues them, and
    a plain sink sees each result once."""
    count = 20_000
    delay = [0.2]

    async def slow(v: Any) -> int:
        await asyncio.sleep(delay[0])
        return int(v[2])

    def job(env: StreamExecutionEnvironment, source: _Numbers, out: list) -> None:
        (env.from_source(source, None, "numbers").uid("numbers").map(slow).uid("async")
            .add_sink(out.append).uid("sink"))  # fmt: skip

    first: list = []
    env = _env(tmp_path, 2)
    job(env, _Numbers(count, paced=True, hold=True), first)
    client = await env.execute_async("stop-async")
    await _wait_for(lambda: len(first) >= 50, "async results")
    path = await asyncio.wait_for(client.stop_with_savepoint(False), 60)
    assert (await asyncio.wait_for(client.get_job_execution_result(), 60)).status is JobStatus.FINISHED
    delay[0] = 0
    second: list = []
    env2 = _env(tmp_path, 2, restore=path)
    job(env2, _Numbers(count, paced=False), second)
    await asyncio.wait_for((await env2.execute_async("stop-async-2")).get_job_execution_result(), 60)
    assert sorted(first + second) == list(range(count))


async def test_streamflow_stop_command(tmp_path: Path) -> None:
    """``streamflow stop JOB_URL DIR --drain`` (Flink's ``flink stop --drain``) stops the job
    with a savepoint and prints its location; the job ends FINISHED."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    first: list = []
    env = _env(tmp_path, 1)
    env.configure({"rest.port": 0})
    _numbers_job(env, _Numbers(20_000, paced=True, hold=True), first)
    client = await env.execute_async("stop-cli")
    await _wait_for(lambda: len(first) >= 50, "records in the sink")
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "streamflow", "stop", client.rest.url, str(tmp_path / "stops"),
                         "--drain", "--timeout", "60"],
        capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "job finished" in done.stdout and str(tmp_path / "stops") in done.stdout
    assert (await asyncio.wait_for(client.get_job_execution_result(), 60)).status is JobStatus.FINISHED
