"""Heap checkpoints encoded in forked snapshot children (``state/heap_fork.py``), through the
public API: chains written by children (bases, deltas, materialisations, at parallelism 1 and
4) restore exactly, also at another parallelism and from a savepoint; retention keeps what the
newest checkpoints need; a child that fails (a value the codec refuses) declines its
checkpoint with the child's cause logged, and the job goes on (the next checkpoint writes a
base) or fails, per the tolerable-failure setting; a child that hangs is ended by its watchdog,
its checkpoint declined, and the next checkpoint (a base, in the process) restores exactly; the
mode is configurable and validated; and the child itself: its report, its failure, its death
without a report, a wait given up, a child stuck on a lock held at the fork ended by its
watchdog, one past its deadline killed by the parent.
The kill tests with children are in ``test_kill_recovery.py``."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.state import heap_fork, incremental, snapshot_process

sys.path.insert(0, str(Path(__file__).parent))
from test_incremental_checkpoints import (
    DATA,
    EXPECTED,
    STOPS,
    Gates,
    Track,
    by_key,
    checkpointed_run,
    env_for,
    pipeline,
    restored_run,
    storage,
    wait_until,
)

FORK = {"state.backend.heap.snapshot-process": "on", "state.backend.heap.snapshot-process.min-entries": 1}
pytestmark = pytest.mark.skipif(snapshot_process.available() is not None, reason="no fork here")


@pytest.mark.parametrize(("before", "after"), [(1, 1), (4, 4), (1, 4), (4, 1)])
async def test_chains_written_by_children_restore_exactly(tmp_path: Path, before: int, after: int) -> None:
    forks = snapshot_process.forks
    first = await checkpointed_run(tmp_path, before, configure=FORK, max_chain=3)
    assert by_key(first) == by_key(EXPECTED[: STOPS[-1]])
    assert snapshot_process.forks - forks >= len(STOPS) * before  # every capture in a child
    latest = storage(tmp_path).restore_point("incremental")
    assert latest is not None
    # base, 3 deltas, then a new base (materialised) and 2 deltas: a base and deltas each
    assert len([n for n in latest.shared if "-base-" in n]) == before
    assert all(n.split("-")[2] == "5" for n in latest.shared if "-base-" in n)
    assert len([n for n in latest.shared if "-delta-" in n]) >= before
    # the restored state is exactly the state at the last checkpoint: every later output matches
    second = await restored_run(tmp_path, after, configure=FORK, max_chain=3)
    assert by_key(second) == by_key(EXPECTED[STOPS[-1] :])


async def test_retention_with_children_keeps_what_the_newest_need(tmp_path: Path) -> None:
    def check(stop: int) -> None:
        s = storage(tmp_path)
        for handle in s.complete_checkpoints("incremental"):
            handle.verify()  # every retained checkpoint is intact: none lost a file it needs

    await checkpointed_run(tmp_path, 2, after_each=check, retain=2, max_chain=2, configure=FORK)
    s = storage(tmp_path)
    assert [h.checkpoint_id for h in s.complete_checkpoints("incremental")] == [6, 7]
    assert set(p.name for p in s.shared_dir("incremental").iterdir()) == set(s.listed_shared("incremental"))
    second = await restored_run(tmp_path, 3, retain=2, max_chain=2)  # children off: auto, small state
    assert by_key(second) == by_key(EXPECTED[STOPS[-1] :])


async def test_savepoint_written_by_a_child_is_self_contained(tmp_path: Path) -> None:
    env = env_for(tmp_path, 2, configure=FORK)
    gates, out = Gates(STOPS[:3]), []
    env.from_async_iterable(gates.__aiter__).uid("src").key_by(lambda r: r[0]).process(Track()).uid(
        "track"
    ).add_sink(out.append)
    client = await env.execute_async("incremental")
    for stop in STOPS[:2]:
        await wait_until(lambda stop=stop: len(out) == stop)  # type: ignore[misc]
        await client.trigger_checkpoint()
        gates.release()
    await wait_until(lambda: len(out) == STOPS[2])
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)
    import shutil

    shutil.rmtree(tmp_path / "chk")  # the savepoint needs nothing of the checkpoints
    env2 = env_for(tmp_path, 3)
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    env2.from_collection(DATA).uid("src").key_by(lambda r: r[0]).process(Track()).uid("track").add_sink(
        out2.append
    )
    await (await env2.execute_async("incremental")).get_job_execution_result()
    assert by_key(out2) == by_key(EXPECTED[STOPS[2] :])


class Opaque:
    """A value the default codec refuses (not a dataclass, not registered)."""


class HoldOpaque(sf.KeyedProcessFunction):
    """Sums per key; key ``k0`` holds an :class:`Opaque` between records 100 and 400."""

    def open(self, ctx: sf.RuntimeContext) -> None:
        self.total = ctx.get_state(sf.ValueStateDescriptor("total"))
        self.odd = ctx.get_state(sf.ValueStateDescriptor("odd"))

    def process_element(self, value: tuple[str, int], ctx: Any) -> Any:
        key, i = value
        self.total.update((self.total.value() or 0) + i)
        if key == "k0":
            self.odd.update(Opaque() if 100 <= i < 400 else i)
        yield (key, self.total.value())


def sums(records: list[tuple[str, int]]) -> list[tuple[str, int]]:
    totals: dict[str, int] = {}
    out = []
    for key, i in records:
        totals[key] = totals.get(key, 0) + i
        out.append((key, totals[key]))
    return out


async def run_with_opaque(tmp_path: Path, tolerable: int) -> tuple[list, BaseException | None, list[bool]]:
    """Checkpoints at 350 (``k0`` holds an Opaque: the child fails) and at 650 (it does not);
    no restarts, so a job that fails stays failed (set: with checkpointing on, Flink's default
    strategy would restart it)."""
    env = env_for(tmp_path, 1, configure=FORK)
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    env.get_checkpoint_config().set_tolerable_checkpoint_failure_number(tolerable)
    gates, out = Gates([350, 650]), []
    env.from_async_iterable(gates.__aiter__).uid("src").key_by(lambda r: r[0]).process(HoldOpaque()).uid(
        "sum"
    ).add_sink(out.append)
    client = await env.execute_async("incremental")
    result = asyncio.ensure_future(client.get_job_execution_result())
    completed: list[bool] = []
    for stop in (350, 650):
        await wait_until(lambda stop=stop: len(out) == stop or result.done())  # type: ignore[misc]
        if result.done():
            break
        try:
            await client.trigger_checkpoint()
            completed.append(True)
        except Exception:
            completed.append(False)
        gates.release()
    error: BaseException | None = None
    try:
        await asyncio.wait_for(result, 60)
    except Exception as exc:  # the job failed: more checkpoint failures than tolerable
        error = exc
    return out, error, completed


async def test_a_failing_child_declines_its_checkpoint_and_the_job_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    out, error, completed = await run_with_opaque(tmp_path, tolerable=3)
    assert error is None and completed == [False, True]
    assert out == sums(DATA)
    causes = [r.getMessage() for r in caplog.records if "Opaque" in r.getMessage()]
    assert causes and "cannot encode" in causes[0]  # the child's own cause, logged by the parent
    # the checkpoint after the failure is a base (the failed delta's writes were cleared), and
    # it restores exactly
    handles = {h.checkpoint_id: h for h in storage(tmp_path).complete_checkpoints("incremental")}
    assert 1 not in handles and 2 in handles
    after = storage(tmp_path).load(str(handles[2].path))
    assert [n for n in after.shared if "-base-" in n] and not [n for n in after.shared if "-delta-" in n]
    env = env_for(tmp_path, 2)
    env.configure({"execution.savepoint.path": str(handles[2].path)})
    out2: list = []
    env.from_collection(DATA).uid("src").key_by(lambda r: r[0]).process(HoldOpaque()).uid("sum").add_sink(
        out2.append
    )
    await (await env.execute_async("incremental")).get_job_execution_result()
    assert sorted(out2) == sorted(sums(DATA)[650:])


async def test_a_failing_child_fails_the_job_when_no_failure_is_tolerable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    _out, error, completed = await run_with_opaque(tmp_path, tolerable=0)
    assert completed[:1] == [False]
    assert error is not None and "Opaque" in repr(error) + repr(error.__cause__)
    assert any("Opaque" in r.getMessage() for r in caplog.records)


async def test_a_hung_child_is_ended_and_the_next_checkpoint_restores_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Checkpoint 1's child waits for a lock held at the fork (as another thread's would be):
    its watchdog ends it, the checkpoint is declined with that cause, checkpoint 2 writes a base
    in the process, checkpoint 3 a delta in a child; the restore of 3 is exact."""
    caplog.set_level(logging.WARNING)
    lock, hang = threading.Lock(), [True]
    write = incremental._write

    def hanging_write(*args: Any) -> dict[str, Any]:  # in the child
        if hang:
            lock.acquire()  # held in the parent at the fork: never released in the child
        return write(*args)

    monkeypatch.setattr(incremental, "_write", hanging_write)
    floor = heap_fork.WATCHDOG_FLOOR_S
    monkeypatch.setattr(heap_fork, "WATCHDOG_FLOOR_S", 1.0)  # the hung child's deadline only
    env = env_for(tmp_path, 1, configure=FORK)
    env.get_checkpoint_config().set_tolerable_checkpoint_failure_number(3)
    gates, out = Gates(STOPS[:3]), []
    pipeline(env.from_async_iterable(gates.__aiter__), out)
    client = await env.execute_async("incremental")
    forks = snapshot_process.forks
    await wait_until(lambda: len(out) == STOPS[0])
    with lock, pytest.raises(RuntimeError, match="aborted"):  # the lock: held at the fork
        await asyncio.wait_for(client.trigger_checkpoint(), 120)  # generous: the deadline is 1 s
    hang.clear()
    monkeypatch.setattr(heap_fork, "WATCHDOG_FLOOR_S", floor)
    for stop in STOPS[1:3]:
        gates.release()
        await wait_until(lambda stop=stop: len(out) == stop)  # type: ignore[misc]
        await client.trigger_checkpoint()
    await asyncio.wait_for(client.cancel(), 30)
    assert snapshot_process.forks - forks == 2  # checkpoints 1 and 3; 2 in the process
    messages = [r.getMessage() for r in caplog.records]
    assert any("watchdog ended it after 1 s" in m for m in messages)  # the cause, logged
    assert any("ran past its deadline; encoding this one in the process" in m for m in messages)
    handles = {h.checkpoint_id: h for h in storage(tmp_path).complete_checkpoints("incremental")}
    assert 1 not in handles and {2, 3} <= handles.keys()
    second = storage(tmp_path).load(str(handles[2].path))
    assert [n for n in second.shared if "-base-" in n] and not [n for n in second.shared if "-delta-" in n]
    assert [n for n in storage(tmp_path).load(str(handles[3].path)).shared if "-delta-" in n]
    restored = await restored_run(tmp_path, 1)
    assert by_key(restored) == by_key(EXPECTED[STOPS[2] :])


def test_the_mode_is_validated() -> None:
    env = sf.StreamExecutionEnvironment()
    env.configure({"state.backend.heap.snapshot-process": "false"})
    assert env.get_checkpoint_config().snapshot_process == "off"
    with pytest.raises(ValueError, match="auto, on or off"):
        env.configure({"state.backend.heap.snapshot-process": "sometimes"})


# ---------------------------------------------------------------- the child itself


async def test_a_child_reports_its_result_and_is_reaped() -> None:
    child = snapshot_process.start(lambda: {"pid": os.getpid(), "big": b"x" * 200_000})
    report = await child.result()
    assert report["pid"] == child.pid != os.getpid()
    assert len(report["big"]) == 200_000  # more than a pipe holds at once
    await wait_until(lambda: child.pid not in snapshot_process._LIVE)  # reaped without blocking the loop
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)


async def test_a_child_reports_its_failure_with_the_cause() -> None:
    def fail() -> dict:
        raise ValueError("no such value")

    with pytest.raises(snapshot_process.SnapshotChildError, match="ValueError: no such value"):
        await snapshot_process.start(fail).result()


async def test_a_child_that_dies_without_a_report_is_an_error_naming_how() -> None:
    with pytest.raises(snapshot_process.SnapshotChildError, match=r"without a report.*exit status 7"):
        await snapshot_process.start(lambda: os._exit(7)).result()


async def test_a_wait_given_up_kills_the_child() -> None:
    child = snapshot_process.start(lambda: time.sleep(600) or {})  # type: ignore[func-returns-value]
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(child.result(), 0.3)
    await wait_until(lambda: child.pid not in snapshot_process._LIVE)  # killed, reaped without blocking
    assert not Path(f"/proc/{child.pid}").exists() or "Z" in Path(f"/proc/{child.pid}/stat").read_text()


async def test_after_a_failed_child_a_savepoint_does_not_mend_the_chain() -> None:
    """The failed child's checkpoint had its writes cleared from the log: the next checkpoint
    must be a base, even when a savepoint (a base too, but not in the chain) came in between."""
    from streamflow.state.codec import MsgpackCodec
    from streamflow.state.key_groups import key_group_range
    from streamflow.state.keyed import IncrementalSettings, KeyedStateBackend

    settings = IncrementalSettings("op#0", key_group_range(0, 128, 1), MsgpackCodec(), 8, "on", 1)
    backend = KeyedStateBackend(128, settings)
    table, log = backend.tracked_table("v", "value")
    assert log is not None

    def write(key: str, value: Any) -> None:
        table[key] = value
        log.put(key, value)

    async def take(cid: int, savepoint: bool = False) -> str:
        upload = await backend.capture(cid, savepoint)
        assert upload is not None
        name = backend.snapshot()["chain"][-1]
        await upload.produce()
        if not savepoint:
            backend.checkpoint_complete(cid)
        return name

    write("a", 1)
    assert "-base-" in await take(1)
    write("b", Opaque())
    with pytest.raises(snapshot_process.SnapshotChildError, match="Opaque"):
        await take(2)
    write("b", 2)
    write("c", 3)
    assert "-base-" in await take(3, savepoint=True)
    assert "-base-" in await take(4)  # not a delta of the log since checkpoint 3's savepoint
    write("d", 4)
    assert "-delta-" in await take(5)


async def test_a_child_stuck_on_a_lock_held_at_the_fork_is_ended_by_its_watchdog() -> None:
    lock, held, release = threading.Lock(), threading.Event(), threading.Event()

    def other() -> None:  # another thread of the process holds the lock across the fork
        with lock:
            held.set()
            release.wait()

    thread = threading.Thread(target=other)
    thread.start()
    held.wait()
    try:
        child = snapshot_process.start(lambda: lock.acquire() and {}, deadline_s=0.5)
    finally:
        release.set()
        thread.join()
    with pytest.raises(snapshot_process.SnapshotChildError, match=r"watchdog ended it after 0\.5 s"):
        await asyncio.wait_for(child.result(), 60)  # generous: the watchdog ends it, not this
    assert child.hung and child.pid not in snapshot_process._LIVE


async def test_a_child_past_its_deadline_is_killed_by_the_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_process, "KILL_GRACE_S", 0.2)

    def stuck() -> dict:
        signal.setitimer(signal.ITIMER_REAL, 0)  # its watchdog disarmed: only the parent ends it
        time.sleep(600)
        return {}

    child = snapshot_process.start(stuck, deadline_s=0.2)
    with pytest.raises(snapshot_process.SnapshotChildError, match="killed by the parent"):
        await asyncio.wait_for(child.result(), 60)
    assert child.hung
    await wait_until(lambda: child.pid not in snapshot_process._LIVE)  # reaped without blocking the loop


async def test_a_child_within_its_deadline_is_not_hung() -> None:
    child = snapshot_process.start(lambda: {"ok": 1}, deadline_s=60)
    assert (await child.result()) == {"ok": 1} and not child.hung


def test_the_watchdog_is_sized_from_the_expected_work_with_a_floor() -> None:
    assert heap_fork.watchdog_s(0) == heap_fork.WATCHDOG_FLOOR_S
    assert heap_fork.watchdog_s(1_000_000) == heap_fork.WATCHDOG_FLOOR_S  # ~0.45 s of work
    big = 100_000_000  # ~45 s of work at ENCODE_NS
    expected_s = big * heap_fork.ENCODE_NS / 1e9
    assert heap_fork.watchdog_s(big) == pytest.approx(heap_fork.WATCHDOG_FACTOR * expected_s)
    assert heap_fork.watchdog_s(big, cost=10.0) == heap_fork.WATCHDOG_FLOOR_S  # the measured cost
