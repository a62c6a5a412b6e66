"""A job's RocksDB instances are opened, restored and closed off the event loop
(``state/rocksdb_lifecycle.py``): at build time a backend touches no file; its task opens (and
restores) every backend it owns in worker threads before its operators open, and closes them
in worker threads at its end, after any thread work of theirs still running. A failing open
names the path and the cause and fails the job. (How long the loop is held is measured by
``bench/rocksdb_open_hold.py``, not here.)"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import rocksdict
from test_rocksdb_rescale import MAXP, Storage

import streamflow as sf
from streamflow.state import codec as _codec
from streamflow.state.backends import EmbeddedRocksDBStateBackend
from streamflow.state.rocksdb_backend import RocksDBKeyedStateBackend, RocksDBStateError
from streamflow.testing import ListSink


def _spy_opens(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Every RocksDB open: (path, on the main thread)."""
    real = rocksdict.Rdict
    seen: list[tuple[str, bool]] = []

    def spy(path: str, *args: Any, **kwargs: Any) -> Any:
        seen.append((path, threading.current_thread() is threading.main_thread()))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(rocksdict, "Rdict", spy)
    return seen


def _spy_closes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every backend's file work at its close: on the main thread?"""
    real = RocksDBKeyedStateBackend._close_files
    seen: list[bool] = []

    def spy(self: RocksDBKeyedStateBackend) -> None:
        if self.root is not None:  # (the operator's dispose closes again: nothing left to do)
            seen.append(threading.current_thread() is threading.main_thread())
        real(self)

    monkeypatch.setattr(RocksDBKeyedStateBackend, "_close_files", spy)
    return seen


def _job(parallelism: int, tmp_path: Path, records: Any, sink: ListSink) -> Any:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    env.set_state_backend(EmbeddedRocksDBStateBackend(local_dir=str(tmp_path / "db")))
    env.enable_checkpointing(3_600_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
    once = env.from_collection(lambda: iter(records)).uid("src").set_parallelism(1)
    once.key_by(lambda r: r[0]).sum(1).uid("sum").sink_to(sink)
    return env


async def _summing(
    tmp_path: Path, parallelism: int, keys: int, restore: bool, heap: bool = False
) -> dict[int, int]:
    """The build (``restore=False``): a collection sends one record per key, a second source
    stays open; once all are summed the job checkpoints and is cancelled. The restore: the
    collection is restored finished, the second source sends each key once more and ends.
    Returns the sums emitted."""
    from test_checkpointing import wait_until

    sink = ListSink()
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    if not heap:
        env.set_state_backend(EmbeddedRocksDBStateBackend(local_dir=str(tmp_path / "db")))
    env.enable_checkpointing(3_600_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))

    async def more() -> Any:
        if restore:
            for k in range(keys):
                yield (k, 1)
        else:
            await asyncio.Event().wait()  # open until the job is cancelled
            yield (0, 0)

    once = env.from_collection([(k, 1) for k in range(keys)]).uid("src").set_parallelism(1)
    hold = env.from_async_iterable(more).uid("more").set_parallelism(1)
    once.union(hold).key_by(lambda r: r[0]).sum(1).uid("sum").sink_to(sink)
    client = await env.execute_async("open")
    if restore:
        await client.get_job_execution_result()
    else:
        await wait_until(lambda: len(sink.results) == keys, timeout=30)
        await client.trigger_checkpoint()
        await client.cancel()
    return dict(sink.results)


@pytest.mark.parametrize("after", [2, 3, 1])
async def test_a_job_opens_restores_and_closes_its_rocksdb_in_worker_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    """Built, checkpointed at parallelism 2, restored at ``after`` (same: files linked back;
    3: clipped; 1: one linked, one ingested): every RocksDB open (working DBs and, at a scale-in,
    the old DB read for ingestion) and every close ran in a worker thread, none on the loop's,
    and the restored sums are right (each key's state was read after its DB was open)."""
    opens = _spy_opens(monkeypatch)
    closes = _spy_closes(monkeypatch)
    keys = 500
    await _summing(tmp_path, 2, keys, restore=False)
    built = list(opens)
    assert len(built) == 2 and not any(main for _path, main in built)
    sums = await _summing(tmp_path, after, keys, restore=True)
    assert sums == {k: 2 for k in range(keys)}
    restored = opens[len(built) :]
    assert len(restored) >= after and not any(main for _path, main in restored), restored
    assert closes and not any(closes)
    assert os.listdir(tmp_path / "db") == []  # every working directory removed


async def test_a_failing_open_names_the_path_and_the_cause_and_fails_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = rocksdict.Rdict

    def broken(path: str, *args: Any, **kwargs: Any) -> Any:
        if path.endswith(os.sep + "db"):
            raise OSError("IO error: the disk is on fire")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(rocksdict, "Rdict", broken)
    sink = ListSink()
    env = _job(2, tmp_path, [(k, 1) for k in range(10)], sink)
    # every open fails: Flink's default (exponential delay with checkpointing on) would restart it forever
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    with caplog.at_level(logging.WARNING), pytest.raises(Exception) as info:
        await (await env.execute_async("broken")).get_job_execution_result()
    text = "".join(str(e) + " ".join(getattr(e, "__notes__", [])) for e in _chain(info.value))
    assert "cannot open RocksDB at" in text and "the disk is on fire" in text, text
    assert str(tmp_path / "db") in text  # the path: under the configured local directory
    assert "operator 'sum" in text or 'operator "sum' in text or "subtask" in text, text
    failed = [r for r in caplog.records if "failed" in r.getMessage() and "disk is on fire" in r.getMessage()]
    assert failed, [r.getMessage() for r in caplog.records]
    assert sink.results == []
    assert os.listdir(tmp_path / "db") == []  # the working directories are removed all the same


def _chain(exc: BaseException) -> list[BaseException]:
    out, seen = [], set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        out.append(e)
        todo.extend(getattr(e, "exceptions", ()))
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    return out


def _deferred(tmp_path: Path) -> RocksDBKeyedStateBackend:
    return RocksDBKeyedStateBackend(
        MAXP,
        range(MAXP),
        operator_id="op",
        subtask=0,
        codec=_codec.MsgpackCodec(),
        local_dir=str(tmp_path / "work"),
        defer_open=True,
    )


async def test_a_restore_at_build_touches_no_file_and_is_applied_when_the_backend_starts(
    tmp_path: Path,
) -> None:
    store = Storage(tmp_path / "shared")
    old = _deferred(tmp_path)
    await old.start()
    try:
        t = old.table("t", "value")
        for k in range(100):
            old.current_key = k
            t[k] = k * 3
        snap = store.snapshot(old, 1)
    finally:
        await old.aclose()
    new = _deferred(tmp_path)
    try:
        new.restore([snap], lambda g: True, store.path)
        assert new.start_pending and new.root is None  # nothing on disk yet
        assert os.listdir(tmp_path / "work") == []
        await new.start()
        assert dict(new.table("t", "value").items()) == {k: k * 3 for k in range(100)}
    finally:
        await new.aclose()
    assert os.listdir(tmp_path / "work") == []


async def test_close_waits_for_a_checkpoint_still_running_in_its_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task cancelled while it waited for its RocksDB checkpoint (a worker thread) closes its
    backend: the close waits for the checkpoint to end, which saw its DB open throughout."""
    backend = _deferred(tmp_path)
    await backend.start()
    backend.table("t", "value")[1] = 1
    real = rocksdict.Checkpoint
    seen: list[bool] = []
    running = threading.Event()

    class Slow:
        def __init__(self, db: Any) -> None:
            self._real = real(db)

        def create_checkpoint(self, path: str) -> None:
            running.set()
            time.sleep(0.3)
            self._real.create_checkpoint(path)
            seen.append(backend._db is not None)

    monkeypatch.setattr(rocksdict, "Checkpoint", Slow)
    checkpoint = asyncio.ensure_future(asyncio.to_thread(backend.prepare(1)))
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    while not running.is_set():  # the checkpoint is running in its thread
        assert loop.time() < end, "the checkpoint never started"
        await asyncio.sleep(0.002)
    await backend.aclose()
    assert seen == [True]
    await checkpoint
    assert backend.root is None


async def test_a_table_taken_before_the_restore_is_the_one_restored_and_checkpointed(
    tmp_path: Path,
) -> None:
    """An operator takes its tables at setup, before the restore (the window operator): the
    restore numbers that same table by the checkpoint's state ids, so what the operator writes
    after it is flushed and in the next checkpoint. (The restore used to replace the table
    objects: the operator's writes stayed in a table no flush or checkpoint saw.)"""
    store = Storage(tmp_path / "shared")
    old = _deferred(tmp_path)
    await old.start()
    old.table("other", "value")[0] = 0  # state ids: other 1, w 2
    old.table("w", "value")[1] = "one"
    snap = store.snapshot(old, 1)
    await old.aclose()
    new = _deferred(tmp_path)
    w = new.table("w", "value")  # taken first: id 1 until the restore
    new.restore([snap], lambda g: True, store.path)
    await new.start()
    assert w.get(1) == "one"
    new.current_key = 2
    w[2] = "two"
    snap2 = store.snapshot(new, 2)
    await new.aclose()
    last = _deferred(tmp_path)
    last.restore([snap2], lambda g: True, store.path)
    await last.start()
    try:
        assert dict(last.table("w", "value").items()) == {1: "one", 2: "two"}
    finally:
        await last.aclose()


def test_a_backend_used_before_its_task_started_it_opens_first(tmp_path: Path) -> None:
    """Whoever reads the DB before the task started it (a tool, a test) opens it first."""
    backend = _deferred(tmp_path)
    try:
        assert backend.start_pending
        t = backend.table("t", "value")
        t[1] = 1
        backend.flush()
        assert not backend.start_pending and backend.db_get(t.rkey(1)) is not None
    finally:
        backend.close()
    with pytest.raises(RocksDBStateError, match="closed"):
        backend.db  # noqa: B018


async def test_a_restart_reopens_and_restores_its_rocksdb_in_worker_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Flink's OnceFailingIdentityMapFunction job (tests/test_udf_operator_checkpointing_flink.py)
    on RocksDB at parallelism 4: the job fails once after two checkpoints and restarts from the
    latest; every RocksDB open (build and restart) and close ran in a worker thread, and the
    sums are exactly once."""
    from test_udf_operator_checkpointing_flink import KEYS, N, _job
    from test_window_checkpointing_flink import Progress

    opens = _spy_opens(monkeypatch)
    closes = _spy_closes(monkeypatch)
    progress = Progress()
    env = _job(tmp_path, progress, 4, "rocksdb", "sum")
    await (await env.execute_async("restart")).get_job_execution_result()
    assert progress.failed, "the failure was not injected"
    counts: dict[Any, int] = {}
    for seen in progress.final.values():
        for result, n in seen.items():
            counts[result] = counts.get(result, 0) + n
    assert counts == {(k, n * (n + 1) // 2): 1 for k in range(KEYS) for n in range(1, N + 1)}
    assert len(opens) > 4 and not any(main for _path, main in opens)  # the build's 4, then the restart's
    assert closes and not any(closes)


async def test_rocksdb_state_restored_onto_the_heap_is_read_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job moving from RocksDB to the heap (state/rocksdb_to_heap.py): the scratch RocksDB that
    reads the checkpoint is opened in a worker thread, and the sums come along."""
    opens = _spy_opens(monkeypatch)
    await _summing(tmp_path, 2, 300, restore=False)
    built = len(opens)
    assert await _summing(tmp_path, 3, 300, restore=True, heap=True) == {k: 2 for k in range(300)}
    moved = opens[built:]
    assert moved and not any(main for _path, main in moved), moved
