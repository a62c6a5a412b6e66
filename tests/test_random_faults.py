"""Seeded random fault combinations against a model: exactly-once output, restored state.

Each seed draws a setup (aligned, unaligned or alternating checkpoints; the heap backend with
incremental or full checkpoints, or RocksDB; a parallelism for the first run and another for a
resume) and a fault: an in-process ``faults.inject`` point of a checkpoint's life (armed from a
checkpoint id, or when a source reads its last record, so it lands on the job's end and its
final checkpoint; sometimes a second point too), a user function that raises, a restart whose
read of the checkpoint fails, a restored subtask failing in ``open()``. Then a scenario:

* ``failover``: the job fails (once or twice) and its restart strategy restores its latest
  completed checkpoint (from storage, or kept in memory without a storage directory);
* ``rescale``: a first run fails with no restart allowed; a second run resumes its latest
  checkpoint at another parallelism, with the fault armed;
* ``damaged``: as ``rescale``, but the newest checkpoint's files are damaged before the resume:
  a damaged ``_metadata`` or a truncated shared file falls back to an older checkpoint (allowed,
  logged with its cause), a corrupt entry or shared file is refused naming the file (a corrupt
  shared file is found when its operator reads it, after the sinks committed the checkpoint's
  output: no record twice, none wrong); never a wrong state;
* ``savepoint``: stop-with-savepoint (suspending or draining; it may fail at the armed point and
  is retried), then a resume from the savepoint at another parallelism.

The job: two throttled sources of disjoint keys, a union, a keyed map that may fail, a keyed
process function keeping a running sum in value state and a count in map state, an exactly-once
FileSink (one in-progress file per subtask, resumed on a restore; or a part file per checkpoint,
published when the checkpoint completes). Each key's records come from one source in order, so
the output lines ``key,sum,count`` are a function of the input alone, and show the restored state.
``STREAMFLOW_RANDOM_FAULTS=200`` (or ``=200:400``) runs more seeds, and
``STREAMFLOW_RANDOM_FAULTS_LOG=<file>`` records what each exercised (the suite runs 8, one of each
scenario; 0-400 passed when this was written).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from savepoint_retry import stop_with_savepoint_retrying

import streamflow as sf
from streamflow.checkpoint.storage import CorruptCheckpointError, DamagedCheckpointError
from streamflow.runtime.job import SavepointCommitError
from streamflow.testing import faults

N = 240
DATA = [(f"{'a' if i < N // 2 else 'b'}{i % 7}", i) for i in range(N)]
POINTS = [p for p in faults.POINTS if p != "committed"]  # "committed": the Kafka sink's own
FAULTS = (*POINTS, "function", "function", "restore", "open")
SCENARIOS = ("failover", "failover", "rescale", "damaged", "savepoint")
DAMAGES = ("metadata garbage", "metadata deleted", "entry truncated", "entry flipped", "shared truncated",
           "shared flipped")  # fmt: skip


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    faults.clear()
    _Failing.armed.clear()
    _Failing.before.clear()
    _Failing.fired.clear()
    _Sum.failing_opens.clear()


def draw(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    return {
        "scenario": rng.choice(SCENARIOS),
        "mode": rng.choice(("aligned", "unaligned", "alternating")),
        "backend": rng.choice(("heap", "heap full", "rocksdb")),
        "p1": rng.randrange(1, 4),
        "p2": rng.randrange(1, 4),
        "fault": rng.choice(FAULTS),
        "min_id": rng.randrange(1, 5),
        "late": rng.random() < 0.3,  # the point is armed when a source reads its last record
        "second": rng.choice((None, None, *POINTS)),  # a second point armed in the same run
        "drain": rng.random() < 0.3,  # stop-with-savepoint advancing to the end of event time
        "times": rng.choice((1, 1, 2)),
        "at": rng.randrange(20, N // 2 - 20),  # the function fault's record (of either source)
        "damage": rng.choice(DAMAGES),
        "live": rng.random() < 0.5,  # damaged: while the job runs, right before a failure
        "memory": rng.random() < 0.25,  # failover: no storage directory (restored from memory)
        "tolerable": rng.choice((0, 0, 1)),  # checkpoint failures tolerated before a failover
        "roll": rng.random() < 0.5,  # a part file per checkpoint, published when it completes
        "fork": rng.random() < 0.2,  # heap checkpoints encoded in a forked snapshot child
    }


def expected() -> Counter[str]:
    sums: dict[str, int] = {}
    counts: Counter[str] = Counter()
    out: Counter[str] = Counter()
    for key, value in DATA:
        sums[key] = sums.get(key, 0) + value
        counts[key] += 1
        out[f"{key},{sums[key]},{counts[key]}"] += 1
    return out


def committed(tmp: Path) -> Counter[str]:
    out: Counter[str] = Counter()
    directory = tmp / "out"
    if directory.exists():
        for f in sorted(directory.rglob("*")):
            if f.is_file() and not f.name.startswith("."):
                out.update(f.read_text().splitlines())
    return out


class _Sum(sf.KeyedProcessFunction):
    failing_opens: dict[str, int] = {}  # tag -> how many restored subtasks still fail in open()

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def open(self, runtime_context: Any) -> None:
        if runtime_context.get_attempt_number() > 0 and _Sum.failing_opens.get(self.tag, 0) > 0:
            _Sum.failing_opens[self.tag] -= 1
            raise RuntimeError("injected failure in open() of a restored subtask")
        self.sum = runtime_context.get_state(sf.ValueStateDescriptor("sum", None))
        self.counts = runtime_context.get_map_state(sf.MapStateDescriptor("counts", None, None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        total = (self.sum.value() or 0) + value[1]
        self.sum.update(total)
        n = (self.counts.get("n") or 0) + 1
        self.counts.put("n", n)
        yield f"{value[0]},{total},{n}"


class _Failing(sf.MapFunction):
    """Raises at a record ``(_, i)``, ``i >= at`` in its source, while armed (``times`` times),
    once a checkpoint has completed in ``chk`` (so the restart restores one)."""

    armed: dict[str, int] = {}
    before: dict[str, Any] = {}  # tag -> called before it raises (damages the newest checkpoint)
    fired: Counter[str] = Counter()

    def __init__(self, tag: str, at: int, chk: Path, need: int = 1) -> None:
        self.tag, self.at, self.chk, self.need = tag, at, chk, need

    def map(self, value: Any) -> Any:
        due = value[1] % (N // 2) >= self.at and _Failing.armed.get(self.tag, 0) > 0
        if due and (self.need == 0 or len(list(self.chk.glob("chk-*/_metadata"))) >= self.need):
            _Failing.armed[self.tag] -= 1
            _Failing.fired[self.tag] += 1
            if self.tag in _Failing.before:
                _Failing.before.pop(self.tag)()
            raise RuntimeError(f"injected function failure at record {value}")
        return value


def job(
    tmp: Path, cfg: dict[str, Any], parallelism: int, *, restarts: int, gate: Any = None, strategy: Any = None
) -> Any:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(8)
    env.enable_checkpointing(10)
    cc = env.get_checkpoint_config()
    memory = cfg["memory"] and cfg["scenario"] == "failover"
    if not memory:  # else the latest checkpoint is kept in memory, for the in-process failover
        cc.set_checkpoint_storage_dir(tmp / "chk")
        cc.set_max_retained_checkpoints(3)
    cc.set_tolerable_checkpoint_failure_number(cfg["tolerable"])
    if cfg["mode"] == "unaligned":
        cc.enable_unaligned_checkpoints()
    elif cfg["mode"] == "alternating":
        cc.enable_unaligned_checkpoints()
        cc.set_aligned_checkpoint_timeout(0 if cfg["seed"] % 2 else 1)
    if cfg["backend"] == "rocksdb":
        env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    elif cfg["backend"] == "heap full":
        cc.enable_incremental_checkpoints(False)
    else:
        cc.enable_incremental_checkpoints(True, max_chain=2)
    if cfg["fork"] and cfg["backend"] != "rocksdb":
        env.configure(
            {
                "state.backend.heap.snapshot-process": "on",
                "state.backend.heap.snapshot-process.min-entries": 1,
            }
        )
    if cfg["scenario"] == "damaged":
        cc.enable_fallback_to_older_checkpoint()
    fixed = sf.RestartStrategies.fixed_delay_restart(restarts, 0)
    env.set_restart_strategy(strategy or (fixed if restarts else sf.RestartStrategies.no_restart()))
    half = N // 2

    async def slow(record: Any) -> Any:
        if record[1] % half == half - 1 and cfg.get("arm_late"):
            cfg.pop("arm_late")(record)  # the fault lands at the job's end (its final checkpoint)
        if gate is not None and not gate():  # slower until it opens; never held: a full async
            await asyncio.sleep(0.002)  # queue chained to a source delays its checkpoints (as Flink's)
        if record[1] % 3 == 0:
            await asyncio.sleep(0.003)
        return record

    streams = []
    for name, part in (("a", DATA[:half]), ("b", DATA[half:])):
        s = env.from_collection(part).uid(f"src-{name}").map(slow, concurrency=1).uid(f"slow-{name}")
        streams.append(s.set_parallelism(1))
    # keyed before the failing map: a key's records keep their order (a rebalance would not)
    keyed = streams[0].union(streams[1]).key_by(lambda r: r[0])
    # damaged: an older checkpoint to fall back to; in memory: whether one completed is left to chance
    need = 2 if cfg["scenario"] == "damaged" else 0 if memory else 1
    failing = keyed.map(_Failing(str(tmp), cfg["at"], tmp / "chk", need)).uid("failing")
    sink = sf.FileSink.for_row_format(str(tmp / "out"), sf.Encoder.simple_string_encoder())
    if cfg["roll"]:  # else one in-progress file per subtask, resumed (truncated) on a restore
        sink = sink.with_rolling_policy(sf.RollingPolicy.on_checkpoint_rolling_policy())
    sink = sink.build()
    failing.key_by(lambda r: r[0]).process(_Sum(str(tmp))).uid("sum").sink_to(sink).uid("sink")
    return env


def arm(cfg: dict[str, Any], tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fault = cfg["fault"]
    if fault == "function":
        _Failing.armed[str(tmp)] = cfg["times"]
    elif fault == "restore":  # the restart's restore fails (a transient read error), then succeeds
        from streamflow.runtime import job as job_module

        original = job_module.JobClient._latest_restore
        left = [cfg["times"]]

        def failing(self: Any) -> Any:
            if left[0] > 0:
                left[0] -= 1
                raise OSError("injected: reading the checkpoint failed")
            return original(self)

        monkeypatch.setattr(job_module.JobClient, "_latest_restore", failing)
        _Failing.armed[str(tmp)] = 1  # something must fail for a restore to happen
    elif fault == "open":  # restored subtasks fail while opening, then succeed
        _Sum.failing_opens[str(tmp)] = cfg["times"]
        _Failing.armed[str(tmp)] = 1
    elif cfg["late"]:
        cfg["arm_late"] = lambda _record: faults.inject(fault, times=cfg["times"])
    else:
        faults.inject(fault, min_checkpoint_id=cfg["min_id"], times=cfg["times"])
    if cfg["second"] is not None and cfg["second"] != fault:
        faults.inject(cfg["second"], min_checkpoint_id=cfg["min_id"] + 1)


def damage(tmp: Path, how: str, rng: random.Random) -> Path:
    """Damages the newest completed checkpoint (as the job's index names it); the damaged file."""
    from streamflow.checkpoint.storage import FileSystemCheckpointStorage

    handle = FileSystemCheckpointStorage(tmp / "chk").restore_point("faults")
    assert handle is not None
    if how.startswith("metadata"):
        meta = handle.path / "_metadata"
        if how == "metadata deleted":
            meta.unlink()
        else:
            meta.write_bytes(b"\x00garbage")
        return meta
    files = sorted(p for p in handle.path.rglob("*") if p.is_file() and p.name != "_metadata")
    if how.startswith("shared") and handle.shared_info:  # a file of the incremental chain
        files = sorted(handle.shared_dir / name for name in handle.shared_info)
    target = rng.choice(files)
    data = target.read_bytes()
    if how.endswith("truncated") or not data:
        target.write_bytes(data[: len(data) // 2])
    else:
        i = rng.randrange(len(data))
        target.write_bytes(data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1 :])
    return target


def run_scenario(seed: int, tmp: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any) -> dict[str, Any]:
    cfg = draw(seed)
    cfg["seed"] = seed
    caplog.set_level(logging.INFO, logger="streamflow")
    scenario = cfg["scenario"]
    if scenario == "failover":
        arm(cfg, tmp, monkeypatch)
        result = job(tmp, cfg, cfg["p1"], restarts=5).execute("faults")
        assert result.metrics["job.numRestarts"] >= 1 or not _fired(cfg, tmp) or cfg["tolerable"], cfg
        assert committed(tmp) == expected(), cfg
        _assert_logged_restarts(caplog.text, result.metrics["job.numRestarts"], cfg)
    elif scenario == "damaged" and cfg["live"]:
        _damaged_live(cfg, tmp, caplog)
    elif scenario in ("rescale", "damaged"):
        _Failing.armed[str(tmp)] = 1
        fired = lambda: _Failing.armed.get(str(tmp)) == 0  # noqa: E731 (the sources wait for it)
        try:
            job(tmp, cfg, cfg["p1"], restarts=0, gate=fired).execute("faults")
            cfg["outcome"] = "the first run ended before its failure"  # (a slow machine)
        except RuntimeError as exc:
            assert "injected function failure" in str(exc), (cfg, exc)
            assert re.search(r"failed: RuntimeError\(.injected function failure", caplog.text), cfg
        _Failing.armed.clear()
        if scenario == "damaged":
            _resume_damaged(cfg, tmp, caplog)
            return cfg
        arm(cfg, tmp, monkeypatch)
        result = job(tmp, cfg, cfg["p2"], restarts=5).execute("faults")
        assert committed(tmp) == expected(), cfg
        assert re.search(r"restored|restarted from|resum", caplog.text), cfg
    else:
        asyncio.run(_savepoint(cfg, tmp))
        assert committed(tmp) == expected(), cfg
    return cfg


def assert_checkpoints_intact(tmp: Path, damaged: list[Path]) -> int:
    """Every complete checkpoint left in the directory verifies (its entries and the shared files
    it lists), but one holding or listing a file the test damaged; how many were verified."""
    from streamflow.checkpoint.metadata import try_read_metadata

    verified = 0
    for d in sorted((tmp / "chk").glob("chk-*")):
        handle = try_read_metadata(d, int(d.name[4:]))
        if handle is None:
            continue  # debris of an interrupted write, or the _metadata the test damaged
        listed = {d / info.file for info in handle.entry_info.values()}
        listed |= {handle.shared_dir / name for name in handle.shared_info}
        if listed & set(damaged):
            continue
        handle.verify()
        verified += 1
    return verified


def _fired(cfg: dict[str, Any], tmp: Path) -> bool:
    """Whether the run met the fault (a short run may end before it: the job's pace varies)."""
    return _Failing.fired.get(str(tmp), 0) > 0 or faults.hits(cfg["fault"]) > 0


def _assert_logged_restarts(text: str, restarts: int, cfg: dict[str, Any]) -> None:
    failed = re.findall(r"job 'faults' failed \((\w+)", text)
    assert len(failed) == restarts, (cfg, failed)
    causes = ("InjectedFault", "RuntimeError", "OSError", "CheckpointFailureError")
    assert all(cause in causes for cause in failed), (cfg, failed)


def _resume_damaged(cfg: dict[str, Any], tmp: Path, caplog: Any) -> None:
    before = committed(tmp)
    rng = random.Random(cfg["seed"])
    target = damage(tmp, cfg["damage"], rng)
    cfg["damaged"] = [target]
    try:
        job(tmp, cfg, cfg["p2"], restarts=0).execute("faults")
    except (CorruptCheckpointError, DamagedCheckpointError) as exc:
        # the fallback is for a damaged _metadata or a missing or truncated shared file only
        assert not cfg["damage"].startswith("metadata"), (cfg, exc)
        assert str(target.name) in str(exc) or str(target) in str(exc), (cfg, target, exc)
        # nothing replayed, nothing wrong: a corrupt shared file is found when its operator reads
        # it, after the sinks restored (and committed) the complete checkpoint's output
        out = committed(tmp)
        assert not before - out and not out - expected(), cfg
        cfg["outcome"] = f"refused {type(exc).__name__}"
        return
    out = committed(tmp)
    want = expected()
    if cfg["damage"].startswith("metadata") or "FALLBACK" in caplog.text:
        assert re.search(r"FALLBACK .*: the latest completed checkpoint .* is damaged", caplog.text), cfg
        # an older checkpoint replays what the damaged one had committed: duplicates, never a
        # wrong sum (every line is one the model emits) and nothing missing
        assert set(out) == set(want), (cfg, set(out) ^ set(want))
        cfg["outcome"] = f"fallback, {sum((out - want).values())} duplicates"
    else:
        # a damaged entry or shared file the restore does not read (an unused file)
        assert out == want, (cfg, target)
        cfg["outcome"] = f"unread damage {target.name}"


def _damaged_live(cfg: dict[str, Any], tmp: Path, caplog: Any) -> None:
    """The newest checkpoint is damaged right before a failure of the running job: its restart
    falls back to an older one (logged), or is refused naming the file until the restart
    strategy is exhausted, or restores a newer intact one completed meanwhile."""
    from streamflow.runtime.job import RestartsExhaustedError

    targets: list[Path] = cfg.setdefault("damaged", [])
    _Failing.armed[str(tmp)] = 1
    _Failing.before[str(tmp)] = lambda: targets.append(damage(tmp, cfg["damage"], random.Random(cfg["seed"])))
    try:
        job(tmp, cfg, cfg["p1"], restarts=2).execute("faults")
    except RestartsExhaustedError as exc:
        cause = exc.__cause__
        assert isinstance(cause, (CorruptCheckpointError, DamagedCheckpointError)), (cfg, exc)
        assert str(targets[0].name) in str(cause), (cfg, targets, cause)
        assert not committed(tmp) - expected(), cfg  # nothing twice
        assert len(re.findall("restoring its latest completed checkpoint failed", caplog.text)) == 2, cfg
        cfg["outcome"] = f"refused {type(cause).__name__}"
        return
    out, want = committed(tmp), expected()
    if "FALLBACK" in caplog.text:
        assert set(out) == set(want), (cfg, set(out) ^ set(want))
        cfg["outcome"] = f"live fallback, {sum((out - want).values())} duplicates"
    else:
        assert out == want, (cfg, targets)
        cfg["outcome"] = "live, a newer checkpoint restored"


async def _savepoint(cfg: dict[str, Any], tmp: Path) -> None:
    stopped = asyncio.Event()
    env = job(tmp, cfg, cfg["p1"], restarts=5, gate=stopped.is_set)
    if cfg["fault"] in POINTS:
        faults.inject(cfg["fault"], min_checkpoint_id=cfg["min_id"], times=cfg["times"])
    client = await env.execute_async("faults")
    ended = client.get_job_execution_result()
    while not any((tmp / "chk").glob("chk-*/_metadata")) and client.get_job_status().value == "RUNNING":
        await asyncio.sleep(0.005)
    path = await stop_with_savepoint_retrying(client, tmp, cfg["drain"])
    stopped.set()
    try:
        await asyncio.wait_for(ended, 20)
    except SavepointCommitError:
        pass  # the job is not restarted: the resume from the savepoint commits the rest
    faults.clear()
    if path is None:  # the job ended before a stop succeeded (a short job on a slow machine)
        assert client.get_job_status().value == "FINISHED", cfg
        cfg["outcome"] = "the job ended before its stop"
        return
    env2 = job(tmp, cfg, cfg["p2"], restarts=0)
    env2.configure({"execution.savepoint.path": path})
    await (await env2.execute_async("faults")).get_job_execution_result()


def _seeds(spec: str) -> range:
    """``"n"``: seeds 0..n-1; ``"a:b"``: seeds a..b-1."""
    first, _, last = spec.rpartition(":")
    return range(int(first or 0), int(last))


SEEDS = _seeds(os.environ.get("STREAMFLOW_RANDOM_FAULTS", "8"))  # 0-7: every scenario


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_fault_combination_keeps_exactly_once(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = run_scenario(seed, tmp_path, monkeypatch, caplog)
    assert_checkpoints_intact(tmp_path, cfg.get("damaged", []))
    if os.environ.get("STREAMFLOW_RANDOM_FAULTS_LOG"):  # ad hoc: what each seed exercised
        hit = {p: faults.hits(p) for p in POINTS if faults.hits(p)}
        with open(os.environ["STREAMFLOW_RANDOM_FAULTS_LOG"], "a") as f:
            f.write(f"{seed} {cfg} hits={hit} outcome={cfg.get('outcome')}\n")
