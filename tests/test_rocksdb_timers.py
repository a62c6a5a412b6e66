"""Timers in RocksDB (state/rocksdb_timers.py): the RocksDB timer service against the heap one as
a model (random registrations, deletions and pops, with heads so small that they overflow and
reload all the time), and through the public API: timers checkpointed in RocksDB's files,
restored at the same and at another parallelism, firing as on the heap backend."""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_checkpointing import wait_until

import streamflow as sf
from streamflow.common import Types
from streamflow.datastream.state_backend import EmbeddedRocksDBStateBackend
from streamflow.runtime.timers import TimerService
from streamflow.state import codec as _codec
from streamflow.state.key_groups import key_group_range
from streamflow.state.rocksdb_backend import RocksDBKeyedStateBackend
from streamflow.state.rocksdb_timers import RocksDBTimerService
from streamflow.testing import ListSink

sys.path.insert(0, str(Path(__file__).parent))  # the kill tests' helpers

MAXP = 128


def _backend(tmp_path: Path, subtask: int = 0, parallelism: int = 1) -> RocksDBKeyedStateBackend:
    return RocksDBKeyedStateBackend(
        MAXP,
        key_group_range(subtask, MAXP, parallelism),
        operator_id="op",
        subtask=subtask,
        codec=_codec.MsgpackCodec(),
        local_dir=str(tmp_path),
    )


def _service(backend: RocksDBKeyedStateBackend, head: int) -> RocksDBTimerService:
    service = RocksDBTimerService(backend, lambda ns: ns, lambda ns: ns)
    for q in service.queues:
        q.head_size = head
    return service


def _fired_by_time(timers: list[Any]) -> list[tuple[int, frozenset]]:
    """(timestamp, the set fired at it) in order: ties may fire in another order than the heap's."""
    out: list[tuple[int, set]] = []
    for t in timers:
        if out and out[-1][0] == t.timestamp:
            out[-1][1].add((t.key, t.namespace))
        else:
            out.append((t.timestamp, {(t.key, t.namespace)}))
    return [(ts, frozenset(s)) for ts, s in out]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("head", [1, 3, 128])
def test_rocksdb_timers_behave_as_the_heap_service(tmp_path: Path, seed: int, head: int) -> None:
    rng = random.Random(seed)
    backend = _backend(tmp_path)
    rocks, model = _service(backend, head), TimerService()
    keys = [f"k{i}" for i in range(40)] + list(range(20)) + [("t", 1)]
    watermark = -50
    try:
        for step in range(2500):
            op = rng.random()
            key, ns, ts = rng.choice(keys), rng.choice([None, 1, "w"]), rng.randrange(-40, 400)
            if op < 0.45:
                new = model.register_event_time_timer(key, ns, ts)
                assert rocks.register_event_time_timer(key, ns, ts) >= new  # True: "may be new"
            elif op < 0.6:
                gone = model.delete_event_time_timer(key, ns, ts)
                assert rocks.delete_event_time_timer(key, ns, ts) >= gone
            elif op < 0.7:
                assert rocks.has_event_time_timer(key, ns, ts) == model.has_event_time_timer(key, ns, ts)
            elif op < 0.8:
                rocks.register_processing_time_timer(key, ns, ts)
                model.register_processing_time_timer(key, ns, ts)
            elif op < 0.95:
                watermark += rng.randrange(0, 12)
                got = rocks.advance_watermark(watermark)
                want = model.advance_watermark(watermark)
                assert _fired_by_time(got) == _fired_by_time(want), step
                assert rocks.next_event_time() == model.next_event_time()
            else:
                now = rng.randrange(-40, 400)
                got = rocks.advance_processing_time(now)
                want = model.advance_processing_time(now)
                assert _fired_by_time(got) == _fired_by_time(want), step
                assert rocks.next_processing_time() == model.next_processing_time()
            if step % 500 == 0:  # the full scan agrees too, and the heads stay small
                assert rocks.num_timers == model.num_timers
                for q in rocks.queues:
                    assert all(len(h) <= head for h in q._heads.values())
        # a restore of the same DB: the heads are reloaded from RocksDB
        backend.flush()
        rocks.reset(restored=True)
        rest = model.advance_watermark(10**6)
        assert _fired_by_time(rocks.advance_watermark(10**6)) == _fired_by_time(rest)
        assert rocks.num_timers == model.num_timers
    finally:
        backend.close()


def test_many_timers_keep_a_small_head_and_fire_in_order(tmp_path: Path) -> None:
    backend = _backend(tmp_path)
    service = RocksDBTimerService(backend, lambda ns: ns, lambda ns: ns)
    try:
        n = 50_000
        order = list(range(n))
        random.Random(1).shuffle(order)
        for i in order:
            service.register_event_time_timer(i, None, i * 10 - 20_000)
        (event, _) = service.queues
        assert sum(len(h) for h in event._heads.values()) <= 128 * MAXP
        fired = [t.timestamp for t in service.advance_watermark(10**9)]
        assert fired == [i * 10 - 20_000 for i in range(n)]
        assert service.num_timers == 0
    finally:
        backend.close()


# -- through the public API ------------------------------------------------------------------------


class Expire(sf.KeyedProcessFunction):
    """Counts a key's records (emitting the count); an event-time timer 50 after each record
    emits the key and the timestamp (the count at firing time depends on how far the periodic
    watermark lags, so only its presence is compared)."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(sf.ValueStateDescriptor("n", Types.INT()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        ctx.timer_service().register_event_time_timer(value[1] + 50)
        yield (value[0], "count", n)  # keyed state restored: the counts go on

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield (ctx.get_current_key(), timestamp, self.count.value() > 0)


def _records() -> list[tuple[int, int]]:
    return [(i % 37, i * 3) for i in range(400)]


def _pipeline(env: Any, data: Any) -> Any:
    return (
        env.from_async_iterable(data)
        .uid("src")
        .set_parallelism(1)
        .assign_timestamps_and_watermarks(
            sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _: r[1])
        )
        .uid("wm")
        .set_parallelism(1)  # one watermark for every keyed subtask (no idle channel holds it back)
        .key_by(lambda r: r[0])
        .process(Expire())
        .uid("expire")
    )


async def _reference() -> list:
    env = sf.StreamExecutionEnvironment()
    sink = ListSink()

    async def data() -> Any:
        for r in _records():
            yield r

    _pipeline(env, data).sink_to(sink)
    await (await env.execute_async()).get_job_execution_result()
    return sink.results


@pytest.mark.parametrize(("before", "after"), [(1, 1), (1, 4), (4, 1), (4, 4), (2, 3)])
async def test_timers_checkpointed_in_rocksdb_restore_and_rescale(
    tmp_path: Path, before: int, after: int
) -> None:
    """A savepoint while timers are pending holds no timer list (they are in the SST files); the
    job restored from it at parallelism ``after`` fires every timer once, as on the heap."""
    from streamflow.checkpoint.restore import RestoredCheckpoint
    from streamflow.checkpoint.storage import FileSystemCheckpointStorage

    want = await _reference()
    env = sf.StreamExecutionEnvironment().set_parallelism(before)
    env.set_state_backend(EmbeddedRocksDBStateBackend(local_dir=str(tmp_path / "db")))
    path, first = await _savepoint_mid_run(env, tmp_path)
    handle = FileSystemCheckpointStorage(tmp_path / "sp").load(Path(path))
    restored = RestoredCheckpoint.load(handle, _codec.MsgpackCodec())
    snaps = [s for s in restored.ops["expire"].values() if s is not None]
    assert snaps and all(s["timers"] == {"event_time": [], "processing_time": []} for s in snaps)
    assert any(s["keyed"].get("rocksdb") for s in snaps)

    env2 = sf.StreamExecutionEnvironment().set_parallelism(after)
    env2.set_state_backend(EmbeddedRocksDBStateBackend(local_dir=str(tmp_path / "db")))
    second = await _resumed_run(env2, path)
    assert any(r[1] != "count" for r in first), "no timer fired before the savepoint"
    assert Counter(first + second) == Counter(want)


@pytest.mark.parametrize("checkpoints", ["off", "incremental", "full"])
@pytest.mark.parametrize("after", [1, 3])
async def test_heap_savepoint_restored_on_rocksdb(
    tmp_path: Path, after: int, checkpoints: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job moves from the heap backend to RocksDB through a savepoint: its keyed state and its
    timers come along, whatever form the heap wrote: a full snapshot in parts (a shared file;
    without checkpointing, or with full checkpoints), or a chain of shared files (incremental
    checkpoints, the default; before, this failed the restore with KeyError 'groups')."""
    from streamflow.state import full_snapshot

    monkeypatch.setattr(full_snapshot, "CHUNK", 4)  # ~18 keys a subtask: a full one in parts
    want = await _reference()
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    if checkpoints != "off":
        env.enable_checkpointing(3_600_000)  # the savepoint only
        env.get_checkpoint_config().enable_incremental_checkpoints(checkpoints == "incremental")
    path, first = await _savepoint_mid_run(env, tmp_path)
    files = (Path(path) / "shared").glob("heap-*")
    forms = {"full" if f.name.startswith("heap-full-") else "chain" for f in files}
    assert forms == ({"chain"} if checkpoints == "incremental" else {"full"})

    env2 = sf.StreamExecutionEnvironment().set_parallelism(after)
    env2.set_state_backend(EmbeddedRocksDBStateBackend(local_dir=str(tmp_path / "db")))
    second = await _resumed_run(env2, path)
    assert Counter(first + second) == Counter(want)


@pytest.mark.parametrize("after", [1, 3])
async def test_rocksdb_savepoint_restored_on_the_heap(tmp_path: Path, after: int) -> None:
    """The way back: a job moves from RocksDB to the heap backend through a savepoint
    (``state/rocksdb_to_heap.py``): its keyed state and its pending timers come along, at the same
    or another parallelism (before: KeyError 'groups')."""
    want = await _reference()
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    env.set_state_backend(EmbeddedRocksDBStateBackend(local_dir=str(tmp_path / "db")))
    path, first = await _savepoint_mid_run(env, tmp_path)
    env2 = sf.StreamExecutionEnvironment().set_parallelism(after)  # the heap backend
    second = await _resumed_run(env2, path)
    assert any(r[1] != "count" for r in first), "no timer fired before the savepoint"
    assert any(r[1] != "count" for r in second), "no restored timer fired"
    assert Counter(first + second) == Counter(want)


def test_the_heap_backend_itself_refuses_rocksdb_state() -> None:
    """RocksDB state reaches the heap backend converted by the operator; handed over as it is, it
    is refused by name (not a KeyError on a missing field)."""
    from streamflow.state.keyed import KeyedStateBackend

    with pytest.raises(sf.StreamflowError, match="RocksDB state backend"):
        KeyedStateBackend(MAXP).restore_from([{"rocksdb": 1, "kinds": {}}], lambda g: True)


async def test_a_failed_restore_names_the_operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error while an operator takes its restored state carries a note naming the operator, its
    uid and subtask (the error alone, a codec's or a file's, would not say whose state it was)."""
    from streamflow.runtime.timer_operator import TimerOperator

    path, _ = await _savepoint_mid_run(sf.StreamExecutionEnvironment().set_parallelism(2), tmp_path)

    def broken(self: Any, restored: Any) -> None:
        raise ValueError("injected: the state cannot be read")

    monkeypatch.setattr(TimerOperator, "initialize_state", broken)
    env = sf.StreamExecutionEnvironment()
    env.configure({"execution.savepoint.path": path})
    _pipeline(env, lambda: _gated([])).sink_to(ListSink())
    with pytest.raises(ValueError, match="injected") as failed:
        await (await env.execute_async("timers")).get_job_execution_result()
    assert "while restoring operator 'KeyedProcess' (uid 'expire'), subtask 0" in failed.value.__notes__


async def _resumed_run(env: Any, path: str) -> list:
    """The timers pipeline on every record, restored from the savepoint at ``path`` (the source's
    restored position skips the records before it): what it emits."""
    env.configure({"execution.savepoint.path": path})
    out = ListSink()
    _pipeline(env, lambda: _gated(_records())).sink_to(out)
    await (await env.execute_async("timers")).get_job_execution_result()
    return list(out.results)


async def _gated(data: list, release: asyncio.Event | None = None) -> Any:
    for r in data:
        yield r
    if release is not None:
        await release.wait()


async def _savepoint_mid_run(env: Any, tmp_path: Path) -> tuple[str, list]:
    """Run the timers pipeline on the first 200 records, wait until the timers their watermark
    passes have fired, take a savepoint and cancel: (the savepoint's path, what the job emitted).

    A timer fired after the savepoint would fire again in the job restored from it (the list
    sink is not transactional), so the wait is exact: one count per record, and one firing per
    timer (``timestamp + 50``) at or below the periodic watermark of the 200 records, ``max
    timestamp - 1`` (monotonous timestamps; the one watermark subtask sets every keyed one's)."""
    data = _records()[:200]
    release = asyncio.Event()  # never set: the source stays open (a finished one ends checkpoints)
    first = ListSink()
    _pipeline(env, lambda: _gated(data, release)).sink_to(first)
    client = await env.execute_async("timers")
    wm = max(r[1] for r in data) - 1
    emitted = len(data) + sum(1 for r in data if r[1] + 50 <= wm)
    await wait_until(lambda: len(first.results) == emitted, timeout=30)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()
    return path, list(first.results)


# -- SIGKILL: the kill tests' job with its sums held for timers, on RocksDB --------------------------


@pytest.mark.parametrize(("mode", "point"), [("aligned", "snapshot"), ("unaligned", "complete")])
def test_kill_with_timers_at_chosen_point_on_rocksdb(
    tmp_path: Path, mode: str, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/kill_job.py with STREAMFLOW_KILL_TIMERS: every output record waits in list state for a
    timer (processing time, and event time at the end), so a lost timer or a timer fired twice
    across a SIGKILL shows in the exactly-once output."""
    import test_kill_recovery as k

    monkeypatch.setenv("STREAMFLOW_KILL_BACKEND", "rocksdb")
    monkeypatch.setenv("STREAMFLOW_KILL_TIMERS", "1")
    k.test_kill_at_chosen_point_then_recover(tmp_path, mode, point)


def test_kill_with_timers_at_random_moments_on_rocksdb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import test_kill_recovery as k

    monkeypatch.setenv("STREAMFLOW_KILL_BACKEND", "rocksdb")
    monkeypatch.setenv("STREAMFLOW_KILL_TIMERS", "1")
    k.test_kill_at_random_moments(tmp_path, "aligned")
