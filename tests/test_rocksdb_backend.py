"""EmbeddedRocksDBStateBackend through the public API, on a real RocksDB: every operator kind and
state kind gives the heap backend's answers (the differential rows of test_differential.py), with
a cache so small that every path (miss, eviction, deferred flush) runs on every few records."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.api.environment import set_default_configuration
from streamflow.common import Duration
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend
from streamflow.testing import ListSink

sys.path.insert(0, str(Path(__file__).parent))
from test_differential import ROWS, _per_key, key0, source

TINY = {"cache_entries": 3, "flush_entries": 2}


@pytest.fixture
def rocksdb_default() -> Any:
    """RocksDB for every environment the test creates (as ``state.backend.type`` in a config)."""
    set_default_configuration({"state.backend.type": "rocksdb"})
    yield
    set_default_configuration({})


def run(build: Any, parallelism: int, backend: Any = None) -> list[list[Any]]:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    if backend is not None:
        env.set_state_backend(backend)
    sinks = []
    for stream in build(env):
        sink = ListSink()
        stream.sink_to(sink)
        sinks.append(sink)
    env.execute(f"rocksdb-p{parallelism}")
    return [list(s.results) for s in sinks]


KEYED_ROWS = [
    name
    for name, (_, keyed) in ROWS.items()
    if keyed or "window" in name or "keyed" in name or "equal-keys" in name
]


@pytest.mark.parametrize("name", KEYED_ROWS)
def test_rocksdb_gives_the_heap_backends_results(name: str, tmp_path: Path) -> None:
    build, keyed = ROWS[name]
    heap = run(build, 1)
    rocks = run(build, 4, EmbeddedRocksDBStateBackend(local_dir=str(tmp_path), **TINY))
    assert any(heap)
    for a, b in zip(heap, rocks, strict=True):
        assert Counter(map(repr, a)) == Counter(map(repr, b))
        if keyed:
            assert _per_key(a) == _per_key(b)
    assert os.listdir(tmp_path) == []  # every working DB removed on close


class EveryStateKind(sf.KeyedProcessFunction):
    """Value, list, map, reducing and aggregating state per key, each read back every record."""

    def open(self, ctx: Any) -> None:
        from streamflow.datastream.state import (
            AggregatingStateDescriptor,
            ListStateDescriptor,
            MapStateDescriptor,
            ReducingStateDescriptor,
            ValueStateDescriptor,
        )

        self.value = ctx.get_state(ValueStateDescriptor("v"))
        self.list = ctx.get_list_state(ListStateDescriptor("l"))
        self.map = ctx.get_map_state(MapStateDescriptor("m"))
        self.reducing = ctx.get_reducing_state(ReducingStateDescriptor("r", lambda a, b: a + b))
        self.agg = ctx.get_aggregating_state(AggregatingStateDescriptor("a", Mean()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        key, v, _ts = value
        self.value.update((self.value.value() or 0) + v)
        self.list.add(v)
        if len(self.list.get()) > 4:
            self.list.update(self.list.get()[-2:])
        self.map.put(v % 3, self.map.get(v % 3) or 0 + 1)
        if v == 7:
            self.map.remove(1)
        self.reducing.add(v)
        self.agg.add(v)
        yield (
            key,
            self.value.value(),
            self.list.get(),
            sorted(self.map.items()),
            self.reducing.get(),
            self.agg.get(),
            1 in self.map,
        )


class Mean(sf.AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: int, acc: list[int]) -> list[int]:
        acc[0] += value  # in place, as user code does
        acc[1] += 1
        return acc

    def get_result(self, acc: list[int]) -> float:
        return acc[0] / acc[1]

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


@pytest.mark.parametrize("parallelism", [1, 3])
def test_every_state_kind_matches_the_heap(parallelism: int) -> None:
    def build(env: Any) -> list[Any]:
        return [source(env).key_by(key0).process(EveryStateKind())]

    heap = run(build, 1, HashMapStateBackend())
    rocks = run(build, parallelism, EmbeddedRocksDBStateBackend(**TINY))
    assert _per_key(heap[0]) == _per_key(rocks[0])


def test_working_directories_of_dead_processes_are_removed(tmp_path: Path) -> None:
    """A process killed right after creating its working directory (before writing anything in
    it) is still known as its owner: the pid is in the directory's name."""
    import subprocess

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    local = tmp_path / "dbs"
    killed_early = local / f"streamflow-rdb-0123456789-0-pid{dead.pid}-abcd1234"
    old_style = local / "streamflow-rdb-0123456789-1-efgh5678"  # an owner file, as before
    alive = local / f"streamflow-rdb-0123456789-2-pid{os.getpid()}-ijkl9012"
    foreign = local / "streamflow-rdb-not-ours"
    for d in (killed_early, old_style, alive, foreign):
        d.mkdir(parents=True)
    (old_style / "owner.pid").write_text(str(dead.pid))
    env = StreamExecutionEnvironment(
        {"state.backend.type": "rocksdb", "state.backend.rocksdb.localdir": str(local)}
    )
    env.from_collection([("a", 1)]).key_by(key0).sum(1).sink_to(ListSink())
    env.execute()
    assert sorted(p.name for p in local.iterdir()) == sorted([alive.name, foreign.name])


def test_configuration_key_selects_the_backend(tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(
        {"state.backend.type": "rocksdb", "state.backend.rocksdb.localdir": str(tmp_path / "dbs")}
    )
    backend = env.get_state_backend()
    assert isinstance(backend, EmbeddedRocksDBStateBackend)
    assert backend.get_db_storage_paths() == [str(tmp_path / "dbs")]
    seen: list[str] = []

    def peek(r: Any) -> Any:
        seen.extend(os.listdir(tmp_path / "dbs"))
        return r

    sink = ListSink()
    env.from_collection([("a", 1), ("a", 2)]).key_by(key0).sum(1).map(peek).sink_to(sink)
    env.execute()
    assert sink.results == [("a", 1), ("a", 3)]
    assert seen and all(s.startswith("streamflow-rdb-") for s in seen)  # the DB lived there
    assert os.listdir(tmp_path / "dbs") == []
    assert isinstance(StreamExecutionEnvironment({"state.backend.type": "hashmap"}).get_state_backend(),
                      HashMapStateBackend)  # fmt: skip
    with pytest.raises(ValueError, match=r"state\.backend\.type"):
        StreamExecutionEnvironment({"state.backend.type": "leveldb"})
    assert sf.EmbeddedRocksDBStateBackend is EmbeddedRocksDBStateBackend


def test_ttl_on_rocksdb() -> None:
    """The TTL job of test_state_ttl.py, with RocksDB as the default backend."""
    from test_state_ttl import test_ttl_through_a_job_with_the_jobs_clock

    set_default_configuration({"state.backend.type": "rocksdb"})
    try:
        test_ttl_through_a_job_with_the_jobs_clock()
    finally:
        set_default_configuration({})


@pytest.mark.parametrize(("resume_at", "expected"), [(500, ("a", 3)), (2_000, ("a", 1))])
async def test_ttl_timestamps_survive_a_savepoint_on_rocksdb(
    tmp_path: Path, resume_at: int, expected: tuple, rocksdb_default: Any
) -> None:
    from test_state_ttl import test_ttl_survives_a_savepoint

    await test_ttl_survives_a_savepoint(tmp_path, resume_at, expected)


def test_keys_equal_in_python_share_one_entry() -> None:
    from streamflow.state.backends import EmbeddedRocksDBStateBackend as Backend
    from streamflow.state.codec import MsgpackCodec

    backend: Any = Backend(**TINY).create_keyed_backend(128, range(128), "op", 0, MsgpackCodec())
    try:
        t = backend.table("t", "value")
        t[1] = "one"
        t[(True, 2.0)] = "pair"
        backend.flush()
        backend.current_key = None
        for k in list(t._cache):
            t._cache.pop(k)  # read RocksDB, not the cache
        assert t.get(1.0) == "one" and t[True] == "one" and (1, 2) in t
        assert sorted(map(repr, t.keys())) == ["(1, 2)", "1"]
        t.pop(1.0)
        assert 1 not in t and len(t) == 1
    finally:
        backend.close()


# -- checkpoints: RocksDB's own checkpoint files, shared between checkpoints ----------------------


def _windowed_and_summed(source_stream: Any) -> tuple[Any, Any]:
    keyed = source_stream.uid("src").key_by(key0)
    sums = keyed.process(EveryStateKind()).uid("kinds")
    from streamflow.windowing import EventTimeSessionWindows

    windows = (
        source_stream.assign_timestamps_and_watermarks(
            # _data()'s timestamps step back by at most 10: with a bound of 20 no record meets a
            # session the watermark already closed, so the sessions do not depend on when the
            # periodic watermark ticks (with monotonous timestamps a tick in the middle of the
            # reference run, or of the gated first job, made some records late: a flaky test)
            sf.WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(20))
            .with_timestamp_assigner(lambda r, _: r[2])
        )
        .uid("wm")
        .key_by(key0)
        .window(EventTimeSessionWindows.with_gap(4))
        .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])))
        .uid("sessions")
    )
    return sums, windows


def _sessions_closed(data: list, stop: int, windows: list) -> int:
    """How many of the reference's ``windows`` the first ``stop`` records fire: the watermark
    operator runs at the source's parallelism (one subtask, as Flink's matches its input), and
    its periodic watermark reaches ``max timestamp - 20 - 1``; a session fires once it reaches
    the session's end - 1 (``last timestamp + gap 4 - 1``). A session fired then is whole: a
    later record is at most 10 older than the largest, far past it."""
    wm = max(r[2] for r in data[:stop]) - 21
    return sum(1 for w in windows if w[2] + 3 <= wm)


def _data() -> list[tuple[str, int, int]]:
    return [(f"k{(i * 7) % 23}", i % 11, i * 2 + (i % 5) * 3) for i in range(300)]


async def _reference() -> tuple[list, list]:
    env = sf.StreamExecutionEnvironment()
    a, b = ListSink(), ListSink()
    sums, windows = _windowed_and_summed(env.from_collection(_data()))
    sums.sink_to(a)
    windows.sink_to(b)
    await (await env.execute_async()).get_job_execution_result()
    return a.results, b.results


@pytest.mark.parametrize("backend_after", ["rocksdb", "heap"])
@pytest.mark.parametrize(("before", "after"), [(2, 2), (1, 4), (4, 1), (3, 2), (2, 3)])
async def test_savepoint_restore_and_rescale(
    tmp_path: Path, before: int, after: int, backend_after: str
) -> None:
    """A savepoint at parallelism ``before``, restored at ``after`` (same: the SST files are
    linked back; other: the largest overlap linked back and clipped, the rest ingested): the
    results are the heap's. Restored with the heap backend (``state/rocksdb_to_heap.py``: a job
    moving back from RocksDB), the session windows' contents, merging sets and timers and the
    sums come along the same way."""
    from test_checkpointing import Gate, wait_until

    data = _data()
    want_sums, want_windows = await _reference()
    gate = Gate(data, 150)
    env = sf.StreamExecutionEnvironment().set_parallelism(before)
    env.set_state_backend(EmbeddedRocksDBStateBackend(local_dir=str(tmp_path / "db"), **TINY))
    s1, w1 = ListSink(), ListSink()
    sums, windows = _windowed_and_summed(env.from_async_iterable(gate.__aiter__))
    sums.sink_to(s1)
    windows.sink_to(w1)
    client = await env.execute_async("rocks")
    await wait_until(lambda: len(s1.results) == 150, timeout=30)
    # every session the first 150 records close fires before the savepoint (one fired after it
    # would fire again in the restored job: the list sink is not transactional)
    fired = _sessions_closed(data, 150, want_windows)
    await wait_until(lambda: len(w1.results) == fired, timeout=30)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()
    assert any(p.name.endswith(".sst") for p in (Path(path) / "shared").iterdir())

    env2 = sf.StreamExecutionEnvironment().set_parallelism(after)
    if backend_after == "rocksdb":
        env2.set_state_backend(EmbeddedRocksDBStateBackend(local_dir=str(tmp_path / "db"), **TINY))
    env2.configure({"execution.savepoint.path": path})
    env2.enable_checkpointing(50)  # its checkpoints store the savepoint's SST files again
    env2.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
    s2, w2 = ListSink(), ListSink()
    sums, windows = _windowed_and_summed(env2.from_collection(data))
    sums.sink_to(s2)
    windows.sink_to(w2)
    await (await env2.execute_async("rocks")).get_job_execution_result()
    from streamflow.checkpoint.storage import FileSystemCheckpointStorage

    final = FileSystemCheckpointStorage(tmp_path / "chk").restore_point("rocks")
    assert final is not None
    final.verify()  # every file it lists is there, intact
    # the final checkpoint of the finished job marks its operators finished and keeps no keyed
    # state of theirs (FLIP-147): no SST file
    assert not any(n.endswith(".sst") for n in final.shared)
    assert _per_key(s1.results + s2.results) == _per_key(want_sums)
    # each window fires once, before or after the savepoint
    assert Counter(map(repr, w1.results + w2.results)) == Counter(map(repr, want_windows))
    assert os.listdir(tmp_path / "db") == []


async def test_checkpoints_share_unchanged_sst_files(tmp_path: Path) -> None:
    """Checkpoint 2 after no change stores no new SST file: it references checkpoint 1's; after
    a change it stores only the new file. Retention keeps what the retained ones list."""
    from test_checkpointing import Gate, wait_until

    from streamflow.checkpoint.storage import FileSystemCheckpointStorage

    data = [(f"k{i}", 1, i) for i in range(400)]
    gate = Gate(data, 200)
    end = asyncio.Event()

    async def records() -> Any:  # the gate's, then it stays open (a finished source ends checkpoints)
        async for r in gate:
            yield r
        await end.wait()

    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    env.set_state_backend(EmbeddedRocksDBStateBackend())
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk"))
    out = ListSink()
    env.from_async_iterable(records).uid("src").key_by(key0).sum(1).uid("sum").sink_to(out)
    client = await env.execute_async("share")
    await wait_until(lambda: len(out.results) == 200, timeout=30)
    storage = FileSystemCheckpointStorage(tmp_path / "chk")
    await client.trigger_checkpoint()
    first = storage.latest_complete("share")
    assert first is not None and first.shared
    await client.trigger_checkpoint()
    second = storage.latest_complete("share")
    assert second is not None and second.checkpoint_id > first.checkpoint_id
    assert set(second.shared) == set(first.shared)  # nothing changed: the same files, referenced
    gate.release.set()
    await wait_until(lambda: len(out.results) == 400, timeout=30)
    await client.trigger_checkpoint()
    third = storage.latest_complete("share")
    assert third is not None
    assert set(first.shared) < set(third.shared)  # a new SST beside the old one
    await client.trigger_checkpoint()
    await client.trigger_checkpoint()  # retention (3) drops the first two checkpoints
    await client.cancel()
    kept = storage.complete_checkpoints("share")
    listed = set().union(*(h.shared for h in kept))
    on_disk = {p.name for p in storage.shared_dir("share").iterdir()}
    assert listed == on_disk


# -- SIGKILL: the kill tests' job (tests/kill_job.py) on RocksDB -----------------------------------


@pytest.mark.parametrize(("mode", "point"), [("aligned", "snapshot"), ("unaligned", "complete")])
def test_kill_at_chosen_point_then_recover_on_rocksdb(
    tmp_path: Path, mode: str, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import test_kill_recovery as k

    monkeypatch.setenv("STREAMFLOW_KILL_BACKEND", "rocksdb")
    k.test_kill_at_chosen_point_then_recover(tmp_path, mode, point)


def test_kill_at_random_moments_on_rocksdb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILLs at random moments (tests/kill_moments.py); checkpoints every 30 ms, retention (3)
    deleting old ones and their unreferenced SST files all along: every restart restores the latest."""
    import test_kill_recovery as k

    monkeypatch.setenv("STREAMFLOW_KILL_BACKEND", "rocksdb")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "local"))  # the working DBs
    (tmp_path / "local").mkdir()
    k.test_kill_at_random_moments(tmp_path, "aligned")
    shared = [p for p in (tmp_path / "chk" / "shared").rglob("*") if p.is_file()]
    assert shared and all(p.name.endswith(".sst") for p in shared)
    # the killed processes' working DBs were removed by the next run (and the last one's on close)
    assert list((tmp_path / "local").glob("streamflow-rdb-*")) == []


# -- damaged checkpoint files: refused naming the file, or a loud fallback --------------------------


def _interrupted_job(tmp_path: Path) -> Counter[str]:
    """Run the recovery tests' job until every retained checkpoint holds RocksDB files (its sums
    still running), then cancel it (the final checkpoint of a finished job holds none: its
    operators are finished, FLIP-147); what it committed."""
    from test_checkpoint_recovery import committed, job

    from streamflow.checkpoint.storage import FileSystemCheckpointStorage

    release = asyncio.Event()

    async def records() -> Any:  # 40 records, then nothing until cancelled: checkpoints go on
        for i in range(40):
            yield (f"k{i % 4}", i)
        await release.wait()

    async def run() -> None:
        client = await job(tmp_path, records=records).execute_async("sums")
        storage = FileSystemCheckpointStorage(tmp_path / "chk")
        try:
            for _ in range(3_000):
                await asyncio.sleep(0.005)
                handles = storage.complete_checkpoints("sums")  # every retained one
                if len(handles) >= 2 and all(any(n.endswith(".sst") for n in h.shared) for h in handles):
                    return
            pytest.fail("no checkpoint with RocksDB files")
        finally:
            await client.cancel()
            try:
                await client.get_job_execution_result()
            except BaseException:  # cancelled on purpose
                pass

    asyncio.run(run())
    return committed(tmp_path)


def _latest_sst(tmp_path: Path) -> Path:
    from test_checkpoint_recovery import latest_dir

    from streamflow.checkpoint.storage import FileSystemCheckpointStorage

    handle = FileSystemCheckpointStorage(tmp_path / "chk").load(latest_dir(tmp_path))
    return handle.shared_path(sorted(handle.shared)[0], verify=False)


def test_damaged_sst_is_refused_naming_it(tmp_path: Path, rocksdb_default: Any) -> None:
    from test_checkpoint_recovery import committed, job

    from streamflow.checkpoint.storage import CorruptCheckpointError
    from streamflow.common import RestartStrategies

    before = _interrupted_job(tmp_path)
    sst = _latest_sst(tmp_path)
    data = bytearray(sst.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size: found by its sha256 when restored
    sst.unlink()  # (a hard link shared with nothing now: the job's files are gone)
    sst.write_bytes(bytes(data))
    env = job(tmp_path)  # the damage is permanent: Flink's default would restart it forever
    env.set_restart_strategy(RestartStrategies.no_restart())
    with pytest.raises(CorruptCheckpointError) as info:
        env.execute("sums")
    assert sst.name in str(info.value)
    assert committed(tmp_path) == before


def test_truncated_sst_is_refused_naming_it(tmp_path: Path, rocksdb_default: Any) -> None:
    """A missing or truncated SST file makes the checkpoint damaged (a stat when the restore
    point is chosen), refused like a damaged ``_metadata``."""
    from test_checkpoint_recovery import committed, job

    from streamflow.checkpoint.storage import DamagedCheckpointError

    before = _interrupted_job(tmp_path)
    sst = _latest_sst(tmp_path)
    data = sst.read_bytes()
    sst.unlink()
    sst.write_bytes(data[: len(data) // 2])
    with pytest.raises(DamagedCheckpointError, match="enable_fallback_to_older_checkpoint") as info:
        job(tmp_path).execute("sums")
    assert sst.name in str(info.value)
    assert committed(tmp_path) == before


def test_fallback_past_every_damaged_checkpoint_starts_fresh_above_their_ids(
    tmp_path: Path, rocksdb_default: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Every retained checkpoint shares the truncated SST file: with the fallback allowed the job
    starts fresh (loudly) and its new checkpoints take ids above the damaged ones, which still
    occupy their directories."""
    from test_checkpoint_recovery import job

    from streamflow.checkpoint.storage import FileSystemCheckpointStorage

    storage = FileSystemCheckpointStorage(tmp_path / "chk")
    _interrupted_job(tmp_path)
    ids = [h.checkpoint_id for h in storage.complete_checkpoints("sums")]
    for cid in ids:
        handle = storage.load(tmp_path / "chk" / f"chk-{cid}")
        for name in handle.shared:
            sst = handle.shared_path(name, verify=False)
            if sst.exists() and sst.stat().st_size:
                data = sst.read_bytes()
                sst.unlink()
                sst.write_bytes(data[: len(data) // 2])
    caplog.set_level(logging.WARNING)
    result = job(tmp_path, fallback=True).execute("sums")
    assert result.metrics["job.restoredCheckpointId"] == 0  # a fresh start
    assert any("FALLBACK" in r.getMessage() and "fresh start" in r.getMessage() for r in caplog.records)
    after = storage.restore_point("sums")
    assert after is not None and after.checkpoint_id > max(ids)


@pytest.mark.parametrize("storage", [True, False])
def test_in_process_failover_on_rocksdb(tmp_path: Path, storage: bool, rocksdb_default: Any) -> None:
    """A failure after a checkpoint: the job restarts in process from it, from checkpoint storage
    or (without storage) from the SST files the driver keeps for the checkpoint held in memory."""
    from test_checkpoint_codec import test_mixed_key_types_survive_in_process_failover

    test_mixed_key_types_survive_in_process_failover(tmp_path, storage)
