"""Incremental checkpoints through the public API: a job checkpoints a chain (a base, then deltas
holding updates and deletions), is cancelled, and is restored from the chain, at the same or
another parallelism; retention drops old checkpoints and their files while the job runs; a
damaged base or delta is refused naming the file (or skipped by the explicit fallback)."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.checkpoint.storage import (
    CorruptCheckpointError,
    DamagedCheckpointError,
    FileSystemCheckpointStorage,
)

KEYS = 300
DATA = [(f"k{i % KEYS}", i) for i in range(1_200)]
STOPS = [150, 300, 420, 600, 700, 850, 1_000]  # a checkpoint at each: base, then deltas


def deleted(i: int) -> bool:
    return i % 7 == 3


class Track(sf.KeyedProcessFunction):
    """Value, map and list state; every seventh record clears all three (deletions)."""

    def open(self, ctx: sf.RuntimeContext) -> None:
        self.total = ctx.get_state(sf.ValueStateDescriptor("total"))
        self.seen = ctx.get_map_state(sf.MapStateDescriptor("seen"))
        self.recent = ctx.get_list_state(sf.ListStateDescriptor("recent"))

    def process_element(self, value: tuple[str, int], ctx: Any) -> Any:
        key, i = value
        if deleted(i):
            self.total.clear()
            self.seen.clear()
            self.recent.clear()
        else:
            self.total.update((self.total.value() or 0) + i)
            self.seen.put(i % 3, (self.seen.get(i % 3) or 0) + 1)
            self.recent.add(i)
            self.recent.update(list(self.recent.get())[-3:])
        yield (key, i, self.total.value(), sorted(self.seen.items()), self.recent.get())


def simulate() -> list[tuple]:
    total: dict[str, int] = {}
    seen: dict[str, dict[int, int]] = defaultdict(dict)
    recent: dict[str, list[int]] = defaultdict(list)
    out = []
    for key, i in DATA:
        if deleted(i):
            total.pop(key, None)
            seen.pop(key, None)
            recent.pop(key, None)
        else:
            total[key] = total.get(key, 0) + i
            seen[key][i % 3] = seen[key].get(i % 3, 0) + 1
            recent[key] = [*recent[key], i][-3:]
        out.append((key, i, total.get(key), sorted(seen.get(key, {}).items()), list(recent.get(key, []))))
    return out


EXPECTED = simulate()


class Gates:
    """Async source: stops before each index in ``stops`` until ``release()``."""

    def __init__(self, stops: list[int]) -> None:
        self.stops = stops
        self.released = asyncio.Event()

    def release(self) -> None:
        self.released.set()

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for i, r in enumerate(DATA):
            if i in self.stops:
                await self.released.wait()
                self.released = asyncio.Event()
            yield r


def env_for(
    tmp_path: Path, parallelism: int, *, retain: int = 3, max_chain: int = 8, configure: dict | None = None
) -> sf.StreamExecutionEnvironment:
    """``configure``: more configuration keys (test_snapshot_process.py forces snapshot children)."""
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    if configure:
        env.configure(configure)
    env.enable_checkpointing(3_600_000)  # only the checkpoints the test triggers
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    cfg.set_max_retained_checkpoints(retain).enable_incremental_checkpoints(True, max_chain=max_chain)
    return env


def pipeline(source: Any, out: list) -> None:
    source.uid("src").key_by(lambda r: r[0]).process(Track()).uid("track").add_sink(out.append)


async def wait_until(cond: Any, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "condition not reached in time"
        await asyncio.sleep(0.002)


async def checkpointed_run(tmp_path: Path, parallelism: int, after_each: Any = None, **kw: Any) -> list:
    """Phase 1: run to the last stop, checkpointing at every stop, then cancel."""
    env = env_for(tmp_path, parallelism, **kw)
    gates, out = Gates(STOPS), []
    pipeline(env.from_async_iterable(gates.__aiter__), out)
    client = await env.execute_async("incremental")
    for stop in STOPS:
        await wait_until(lambda stop=stop: len(out) == stop)  # type: ignore[misc]
        await client.trigger_checkpoint()
        if after_each is not None:
            after_each(stop)
        if stop != STOPS[-1]:
            gates.release()
    await asyncio.wait_for(client.cancel(), 30)
    return out


async def restored_run(tmp_path: Path, parallelism: int, **kw: Any) -> list:
    """Phase 2: the same job restores the latest checkpoint and runs to the end."""
    env = env_for(tmp_path, parallelism, **kw)
    out: list = []
    pipeline(env.from_collection(DATA), out)
    await (await env.execute_async("incremental")).get_job_execution_result()
    return out


def by_key(records: list) -> dict[str, list]:
    grouped: dict[str, list] = defaultdict(list)
    for r in records:
        grouped[r[0]].append(r)
    return dict(grouped)


def storage(tmp_path: Path) -> FileSystemCheckpointStorage:
    return FileSystemCheckpointStorage(tmp_path / "chk")


@pytest.mark.parametrize(("before", "after"), [(1, 1), (1, 4), (4, 1), (2, 3)])
async def test_restore_from_a_chain_at_any_parallelism(tmp_path: Path, before: int, after: int) -> None:
    first = await checkpointed_run(tmp_path, before)
    assert by_key(first) == by_key(EXPECTED[: STOPS[-1]])
    latest = storage(tmp_path).restore_point("incremental")
    assert latest is not None
    bases = [n for n in latest.shared if "-base-" in n]
    deltas = [n for n in latest.shared if "-delta-" in n]
    assert len(bases) == before and len(deltas) >= before  # one chain per subtask
    second = await restored_run(tmp_path, after)
    # the restored state is exactly the state at the last checkpoint: every later output matches
    assert by_key(second) == by_key(EXPECTED[STOPS[-1] :])


async def test_parallelism_1_and_4_give_the_same_answers(tmp_path: Path) -> None:
    outs = []
    for p in (1, 4):
        d = tmp_path / str(p)
        await checkpointed_run(d, p)
        outs.append(by_key(await restored_run(d, 5 - p)))
    assert outs[0] == outs[1] == by_key(EXPECTED[STOPS[-1] :])


async def test_retention_drops_old_chains_while_the_job_runs(tmp_path: Path) -> None:
    seen_files: set[str] = set()

    def check(stop: int) -> None:
        s = storage(tmp_path)
        on_disk = {p.name for p in s.shared_dir("incremental").iterdir()}
        seen_files.update(on_disk)
        listed = set(s.listed_shared("incremental"))
        assert on_disk == listed, f"at {stop}: unreferenced {on_disk - listed}, missing {listed - on_disk}"
        for handle in s.complete_checkpoints("incremental"):
            handle.verify()  # every retained checkpoint is intact: none lost a file it needs

    await checkpointed_run(tmp_path, 2, after_each=check, retain=2, max_chain=2)
    s = storage(tmp_path)
    assert [h.checkpoint_id for h in s.complete_checkpoints("incremental")] == [6, 7]
    assert len(seen_files - set(s.listed_shared("incremental"))) >= 4  # old bases and deltas deleted
    second = await restored_run(tmp_path, 3, retain=2, max_chain=2)
    assert by_key(second) == by_key(EXPECTED[STOPS[-1] :])


async def test_incremental_off_writes_full_snapshots_and_restores_them(tmp_path: Path) -> None:
    env = env_for(tmp_path, 2)
    env.configure({"state.backend.incremental": False})
    gates, out = Gates([STOPS[0]]), []
    pipeline(env.from_async_iterable(gates.__aiter__), out)
    client = await env.execute_async("incremental")
    await wait_until(lambda: len(out) == STOPS[0])
    await client.trigger_checkpoint()
    await asyncio.wait_for(client.cancel(), 30)
    latest = storage(tmp_path).restore_point("incremental")
    assert latest is not None and latest.shared == ()
    assert not (tmp_path / "chk" / "shared").exists()
    second = await restored_run(tmp_path, 3)  # incremental on again: it restores a full snapshot
    assert by_key(second) == by_key(EXPECTED[STOPS[0] :])


def latest_files(tmp_path: Path) -> tuple[Path, list[Path]]:
    s = storage(tmp_path)
    handle = s.restore_point("incremental")
    assert handle is not None
    return handle.path, [handle.shared_dir / n for n in handle.shared]


async def test_damaged_delta_is_refused_naming_it(tmp_path: Path) -> None:
    await checkpointed_run(tmp_path, 2)
    _, files = latest_files(tmp_path)
    delta = next(f for f in files if "-delta-" in f.name)
    data = delta.read_bytes()
    delta.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same size: caught by the checksum
    with pytest.raises(CorruptCheckpointError) as info:
        await restored_run(tmp_path, 2)
    assert str(delta) in str(info.value)


async def test_missing_base_is_refused_and_the_fallback_is_loud(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await checkpointed_run(tmp_path, 1, max_chain=3)
    path, files = latest_files(tmp_path)
    newest_delta = max((f for f in files if "-delta-" in f.name), key=lambda f: int(f.name.split("-")[2]))
    newest_delta.unlink()  # only the latest checkpoint needs it
    with pytest.raises(DamagedCheckpointError, match="missing") as info:
        await restored_run(tmp_path, 1, max_chain=3)
    assert str(path) in str(info.value) and newest_delta.name in str(info.value)
    caplog.set_level(logging.WARNING)
    env = env_for(tmp_path, 1, max_chain=3)
    env.get_checkpoint_config().enable_fallback_to_older_checkpoint()
    out: list = []
    pipeline(env.from_collection(DATA), out)
    result = await (await env.execute_async("incremental")).get_job_execution_result()
    restored_id = result.metrics["job.restoredCheckpointId"]
    assert restored_id == len(STOPS) - 1
    assert any("FALLBACK" in r.getMessage() for r in caplog.records)
    assert by_key(out) == by_key(EXPECTED[STOPS[restored_id - 1] :])


async def test_savepoint_of_an_incremental_job_is_self_contained(tmp_path: Path) -> None:
    env = env_for(tmp_path, 2)
    gates, out = Gates(STOPS[:3]), []
    pipeline(env.from_async_iterable(gates.__aiter__), out)
    client = await env.execute_async("incremental")
    for stop in STOPS[:2]:
        await wait_until(lambda stop=stop: len(out) == stop)  # type: ignore[misc]
        await client.trigger_checkpoint()
        gates.release()
    await wait_until(lambda: len(out) == STOPS[2])
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)
    savepoint = storage(tmp_path).load(path)
    assert any("-sp-" in n for n in savepoint.shared) and any("-base-" in n for n in savepoint.shared)
    import shutil

    shutil.rmtree(tmp_path / "chk")  # the savepoint needs nothing of the checkpoints
    env2 = env_for(tmp_path, 3)
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    pipeline(env2.from_collection(DATA), out2)
    await (await env2.execute_async("incremental")).get_job_execution_result()
    assert by_key(out2) == by_key(EXPECTED[STOPS[2] :])
