"""Full (non-incremental) heap keyed snapshots are taken in slices that yield (issue 12 item 4,
``state/full_snapshot.py``): the loop runs between the slices, the parts restore exactly at
parallelism 1 and 4 and across them, and records behind the barrier never leak into a
checkpoint captured while the job's other tasks run (exactly-once across a failover, with the
in-memory storage and with a directory).

No wall-clock timing: loop turns are counted, and the loop budget's clock says "the slice is
over" at every reading, so every ``yield_point`` pauses.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_checkpoint_codec import wait_until
from test_checkpointing import Gate
from test_loop_state import _turns_between

import streamflow as sf
from streamflow.checkpoint.storage import FileSystemCheckpointStorage
from streamflow.state import full_snapshot
from streamflow.state.codec import MsgpackCodec
from streamflow.state.key_groups import key_group_of, key_group_range
from streamflow.state.keyed import KeyedStateBackend, ValueStateDescriptor

CODEC = MsgpackCodec()
MAXP = 128


@pytest.fixture
def small_chunks(monkeypatch: Any) -> list[dict]:
    """Slices of 100 entries (so a few thousand keys need many), and every snapshot taken in
    parts recorded."""
    monkeypatch.setattr(full_snapshot, "CHUNK", 100)
    taken: list[dict] = []
    capture = full_snapshot.capture_full

    async def spy(*args: Any) -> dict:
        snap = await capture(*args)
        taken.append({**snap})  # with its parts (the snapshot itself names the file they go to)
        return snap

    monkeypatch.setattr(full_snapshot, "capture_full", spy)
    return taken


def test_a_big_full_snapshot_lets_the_loop_run_between_its_slices(small_chunks: list[dict]) -> None:
    b = KeyedStateBackend(MAXP, codec=CODEC, key_groups=range(0, MAXP))
    n = 2_050
    b.current_key = None
    state = b.get_state(ValueStateDescriptor("v"))
    for k in range(n):
        b.current_key = f"k{k}"
        state.update((k, "x"))

    async def take() -> tuple[dict, dict[str, bytes]]:
        upload = await b.capture(1, False)  # the parts become one shared file of the checkpoint
        assert isinstance(upload, full_snapshot.PartsUpload) and not upload.references
        snap = b.snapshot()
        return snap, await upload.produce()

    (snap, files), turns, pauses = asyncio.run(_turns_between(take()))
    assert turns - 1 >= n // 100  # the loop ran between every two slices (1: before the capture)
    assert len(snap["sizes"]) == 21 and snap["groups"] == {} and pauses >= 21
    # the operator snapshot holds no part: nothing large is encoded with it on the loop
    assert "parts" not in snap and list(files) == [snap["file"]] and len(CODEC.encode(snap)) < 500
    assert sum(snap["sizes"]) == len(files[snap["file"]])
    inline = small_chunks[-1]  # the former format, the parts in the snapshot: still restored
    assert len(inline["parts"]) == 21 and b"".join(inline["parts"]) == files[snap["file"]]
    for form, read_shared in [(snap, files.__getitem__), (inline, None)]:
        # restored whole (same range), and split by key group into two halves (a rescale)
        whole = KeyedStateBackend(MAXP, codec=CODEC)
        whole.restore_from([form], lambda g: True, read_shared=read_shared)
        assert whole._tables["v"] == b._tables["v"]
        halves = [KeyedStateBackend(MAXP, codec=CODEC) for _ in range(2)]
        for i, half in enumerate(halves):
            groups = key_group_range(i, MAXP, 2)
            half.restore_from([form], lambda g, groups=groups: g in groups, read_shared=read_shared)
            assert all(key_group_of(k, MAXP) in groups for k in half._tables["v"])
        assert {**halves[0]._tables["v"], **halves[1]._tables["v"]} == b._tables["v"]
        assert len(halves[0]._tables["v"]) + len(halves[1]._tables["v"]) == n
    with pytest.raises(ValueError, match="only restored from checkpoint storage"):
        KeyedStateBackend(MAXP, codec=CODEC).restore_from([snap], lambda g: True)


@pytest.mark.parametrize(("before", "after"), [(1, 1), (1, 4), (4, 1), (4, 4)])
async def test_parts_restore_exactly_at_parallelism_1_and_4_and_across(
    tmp_path: Path, small_chunks: list[dict], before: int, after: int
) -> None:
    keys = 3_000
    data = [(f"k{i % keys}", 1) for i in range(2 * keys)] + [(f"k{i}", 5) for i in range(0, keys, 7)]
    gate = Gate(data, 2 * keys)
    env = sf.StreamExecutionEnvironment().set_parallelism(before).enable_checkpointing(3_600_000)
    env.get_checkpoint_config().enable_incremental_checkpoints(False)
    out1: list = []
    env.from_async_iterable(gate.__aiter__).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(
        out1.append
    )
    client = await env.execute_async("sums")
    await wait_until(lambda: len(out1) == 2 * keys, 60)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)
    assert small_chunks and all(len(s["parts"]) > 1 for s in small_chunks)

    env2 = sf.StreamExecutionEnvironment().set_parallelism(after)
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    env2.from_collection(data).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(out2.append)
    await (await env2.execute_async("sums")).get_job_execution_result()
    assert len(out2) == len(data) - 2 * keys  # the source resumed after the savepoint
    final = {k: v for k, v in out1 + out2}
    assert final == {f"k{i}": 2 + (5 if i % 7 == 0 else 0) for i in range(keys)}


class FailOnce(sf.MapFunction):
    """Fails the job once, after a checkpoint taken in parts has completed."""

    armed: Any = None
    failed = False

    def map(self, value: Any) -> Any:
        if not FailOnce.failed and FailOnce.armed is not None and FailOnce.armed():
            FailOnce.failed = True
            raise RuntimeError("injected failure after a checkpoint in parts")
        return value


@pytest.mark.parametrize("storage", ["memory", "dir"])
async def test_records_during_a_sliced_capture_are_not_in_it_exactly_once_across_a_failover(
    tmp_path: Path, small_chunks: list[dict], storage: str, monkeypatch: Any
) -> None:
    """The source keeps emitting while the sum's task captures in slices (a separate task
    behind a key_by): a record behind the barrier that leaked into the checkpoint would be
    counted twice after the restore replays it, one missing would be lost."""
    keys, rounds = 2_000, 12
    restored: list[int] = []
    entries_of = full_snapshot.entries_of

    def spy(snap: dict, *args: Any) -> Any:
        restored.append(len(snap.get("sizes") or ()))  # the parts in the snapshot's shared file
        return entries_of(snap, *args)

    completed: list[int] = []

    async def records() -> Any:
        for r in range(rounds):
            if r == rounds // 2 and not FailOnce.failed:
                # the first run holds the rest back until a checkpoint in parts completed (then
                # the next record fails the job), however fast the machine ran the first half
                end = asyncio.get_running_loop().time() + 60
                while not FailOnce.armed() and asyncio.get_running_loop().time() < end:
                    await asyncio.sleep(0.005)
            for k in range(keys):
                yield (f"k{k}", r + 1)
                if k % 50 == 0:
                    await asyncio.sleep(0)

    env = sf.StreamExecutionEnvironment().enable_checkpointing(20)
    cfg = env.get_checkpoint_config()
    if storage == "dir":
        cfg.set_checkpoint_storage_dir(str(tmp_path))
    cfg.enable_incremental_checkpoints(False)  # full snapshots in parts, in memory or in a directory
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(1, 0))
    FailOnce.failed = False
    FailOnce.armed = lambda: len(small_chunks) >= 2 and bool(completed)
    last: dict[str, int] = {}

    def sink(v: Any) -> None:
        last[v[0]] = v[1]

    env.from_async_iterable(records).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").map(
        FailOnce()
    ).add_sink(sink)
    monkeypatch.setattr(full_snapshot, "entries_of", spy)
    client = await env.execute_async("exactly-once")
    driver = client.execution.driver

    finished = False

    async def watch() -> None:
        while not FailOnce.failed and not finished:
            completed.extend(driver.durations_ms)
            await asyncio.sleep(0.005)

    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait_for(client.get_job_execution_result(), 120)
    finally:
        finished = True
        await watcher
    assert FailOnce.failed and any(n > 1 for n in restored), restored  # restored from parts
    total = sum(range(1, rounds + 1))
    assert last == {f"k{k}": total for k in range(keys)}


def full_env(tmp_path: Path, parallelism: int) -> sf.StreamExecutionEnvironment:
    """test_window_incremental's environment with full (non-incremental) checkpoints."""
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    env.enable_checkpointing(3_600_000)  # only the checkpoints the test triggers
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    cfg.set_max_retained_checkpoints(2).enable_incremental_checkpoints(False)
    return env


@pytest.mark.parametrize("kind", ["session", "sliding", "tumbling"])
@pytest.mark.parametrize(("before", "after"), [(1, 1), (4, 2)])
async def test_window_state_in_full_snapshots_taken_in_parts_restores_exactly(
    tmp_path: Path, small_chunks: list[dict], monkeypatch: Any, kind: str, before: int, after: int
) -> None:
    """A window operator's tables (the general path's contents, trigger state and merging sets,
    windows in their plain form; the fast path's panes) in full snapshots taken in slices: the
    run restored at the same or another parallelism emits, with the first, exactly what one run
    emits. (A session window's MergingWindowSet reached the codec as itself: the first
    checkpoint of a session-window job above a slice of keys failed the job.)"""
    import test_window_incremental as win

    monkeypatch.setattr(full_snapshot, "CHUNK", 8)  # 40 keys: several slices per table
    monkeypatch.setattr(win, "env_for", full_env)
    first = await win.checkpointed_run(tmp_path, kind, before, win.STOPS)
    captured = {name for snap in small_chunks for part in snap["parts"] for name in CODEC.decode(part)}
    assert captured, "no full snapshot in parts was taken"
    # each checkpoint's parts are a shared file of its own, removed with it by retention (2 kept)
    storage = FileSystemCheckpointStorage(tmp_path / "chk")
    kept = storage.complete_checkpoints("win")
    listed = {name for handle in kept for name in handle.shared}
    assert len(kept) == 2 and listed and all(name.startswith("heap-full-") for name in listed)
    assert {p.name for p in storage.shared_dir("win").iterdir()} == listed
    # the general path's tables (tumbling windows run on the fast path: panes)
    general = {"session": {"window-contents", "window-merging"}, "sliding": {"window-contents"}}
    assert general.get(kind, set()) <= captured
    second = await win.restored_run(tmp_path, kind, after)
    assert Counter(first) + Counter(second) == await win.reference(kind)
    assert second, "the restored run emitted nothing: the test would not see lost state"
