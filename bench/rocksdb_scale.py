"""RocksDB state backend at scale (issue 12 item 7).

1. overhead: a keyed running sum over K keys (2K records: every key twice), on
   EmbeddedRocksDBStateBackend, without checkpoints and with a checkpoint every
   second (to a local directory). Each run is a child process, so its peak RSS
   is its own. Targets: overhead <= 15 %, peak RSS < 2 GB.
2. restore: the checkpointed run's final checkpoint (all K keys) restored by a
   new job at the same parallelism (SST files linked back), then at another one
   (key-group ranges copied). Target: < 30 s for 10M keys.
3. cost: checkpoint size (bytes newly written: SST files not already stored,
   plus entries) and duration (trigger to completion; the synchronous part at
   the barrier) against the state size (1k, 100k, 1M, 10M keys) and the share
   of keys changed since the previous checkpoint (1 %, 10 %, 100 %).

Usage: python bench/rocksdb_scale.py [--keys 1000000] [--parts overhead,baseline,restore,cost]
       [--cost-keys 1000,100000,1000000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import streamflow as sf  # noqa: E402
from streamflow.checkpoint.storage import FileSystemCheckpointStorage  # noqa: E402


class Totals(sf.SinkFunction):
    """Counts the running sums: with every key seen twice the outputs are K ones and K twos."""

    def __init__(self) -> None:
        self.n = 0
        self.total = 0

    def write_batch(self, values: list) -> None:
        self.n += len(values)
        self.total += sum(v[1] for v in values)


def records(keys: int) -> Any:
    for i in range(2 * keys):
        yield (i % keys, 1)


class ThreadCPU:
    """CPU seconds per thread name (RocksDB's background threads, the checkpoint writer...),
    sampled from /proc/self/task every 0.2 s (Linux; empty elsewhere)."""

    def __init__(self) -> None:
        import threading

        self.seen: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        try:
            tids = os.listdir("/proc/self/task")
        except OSError:
            return
        for tid in tids:
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(tid) == os.getpid():
                name = "main"
            elif not name.startswith("rocksdb"):
                name = "other"  # Python's worker threads: the checkpoint writer, to_thread calls
            self.seen[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / self._tick)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    def stop(self) -> dict[str, float]:
        self._sample()
        self._stop.set()
        out: dict[str, float] = {}
        for name, cpu in self.seen.values():
            out[name] = round(out.get(name, 0.0) + cpu, 2)
        return out


def running_sum(keys: int, checkpoint_dir: str | None, parallelism: int = 1, restore: bool = False) -> dict:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    if checkpoint_dir is not None:
        env.enable_checkpointing(1_000)
        env.get_checkpoint_config().set_checkpoint_storage_dir(checkpoint_dir)
    sink = Totals()
    env.from_collection(lambda: records(keys)).uid("src").set_parallelism(1).key_by(lambda r: r[0]).sum(
        1
    ).uid("sum").add_sink(sink)
    threads = ThreadCPU()
    t, cpu = time.perf_counter(), time.process_time()
    result = env.execute("rocksdb-scale")
    elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    per_thread = threads.stop()
    if not restore:
        assert (sink.n, sink.total) == (2 * keys, 3 * keys), f"wrong answer: {sink.n}, {sink.total}"
    return {
        "elapsed_s": elapsed,
        "cpu_s": cpu,  # every thread of the process: the job, RocksDB's, the checkpoint writer's
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "checkpoints": int(result.metrics.get("checkpoints.numCompleted", 0)),
        "threads": per_thread,
        "restored": int(result.metrics.get("job.restoredCheckpointId", 0) or 0),
    }


def child(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def checkpoint_bytes(directory: Path, job: str) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def overhead_and_restore(keys: int, repeat: int, parts: set[str]) -> None:
    base: list[dict] = []
    with_ckpt: list[dict] = []
    keep = Path(tempfile.mkdtemp(prefix="sf-rocks-bench-"))
    try:
        for r in range(repeat):  # interleaved: the machine's drift hits both alike
            if "baseline" in parts:
                base.append(child(["run", str(keys), "-"]))
            chk = keep / f"chk-{r}"
            with_ckpt.append(child(["run", str(keys), str(chk)]))
        if not base:  # --parts overhead,restore without baseline: the checkpointed run alone
            x = with_ckpt[0]
            print(
                f"running sum, {keys:,} keys ({2 * keys:,} records), RocksDB, checkpoint every 1 s: "
                f"{x['elapsed_s']:.1f} s ({x['cpu_s']:.1f} s CPU, {x['checkpoints']} checkpoints), "
                f"peak RSS {x['rss_mb']:.0f} MB (target < 2048 MB)"
            )
            base = with_ckpt
        b = min(x["elapsed_s"] for x in base)
        c = min(x["elapsed_s"] for x in with_ckpt)
        bc = min(x["cpu_s"] for x in base)
        cc = min(x["cpu_s"] for x in with_ckpt)
        print(
            f"running sum, {keys:,} keys ({2 * keys:,} records), RocksDB: no checkpoints {b:.1f} s "
            f"({bc:.1f} s CPU); checkpoint every 1 s {c:.1f} s ({cc:.1f} s CPU, "
            f"{with_ckpt[0]['checkpoints']} checkpoints); overhead {100 * (c / b - 1):+.1f} % wall, "
            f"{100 * (cc / bc - 1):+.1f} % CPU (target <= 15 %)"
        )
        print(
            f"peak RSS: no checkpoints {max(x['rss_mb'] for x in base):.0f} MB, with checkpoints "
            f"{max(x['rss_mb'] for x in with_ckpt):.0f} MB (target < 2048 MB)"
        )
        chk = keep / "chk-0"
        latest = FileSystemCheckpointStorage(chk).restore_point("rocksdb-scale")
        assert latest is not None
        size = checkpoint_bytes(chk, "rocksdb-scale")
        print(f"checkpoint directory after the run: {size / 2**20:.0f} MB ({len(latest.shared)} SST files)")
        if "restore" in parts:
            for p in (1, 4):
                work = keep / f"restore-{p}"
                shutil.copytree(chk, work)
                r = child(["restore", str(keys), str(work), str(p)])
                print(
                    f"restore of the {keys:,}-key checkpoint at parallelism {p} ({r['cpu_s']:.1f} s CPU) "
                    f"({'SST files linked back' if p == 1 else 'key-group ranges copied'}): "
                    f"{r['elapsed_s']:.1f} s, the whole job (target < 30 s); peak RSS {r['rss_mb']:.0f} MB"
                )
    finally:
        shutil.rmtree(keep, ignore_errors=True)


# -- 3: checkpoint cost against state size and change rate ----------------------------------------


async def cost(keys: int, rates: list[float]) -> list[dict]:
    chk = Path(tempfile.mkdtemp(prefix="sf-rocks-cost-"))
    phases = [list(range(keys))] + [list(range(0, keys, max(1, round(1 / r)))) for r in rates]
    go = [asyncio.Event() for _ in phases]
    done = [asyncio.Event() for _ in phases]

    async def source() -> Any:
        for i, phase in enumerate(phases):
            await go[i].wait()
            for n, k in enumerate(phase):
                yield (k, i)
                if n % 4096 == 0:
                    await asyncio.sleep(0)
            done[i].set()
        await asyncio.Event().wait()  # stay open: a finished source ends checkpointing

    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(chk))
    env.from_async_iterable(source).uid("src").key_by(lambda r: r[0]).reduce(
        lambda a, b: (a[0], a[1] + b[1])
    ).uid("sum").add_sink(lambda _: None)
    client = await env.execute_async("cost")
    storage = FileSystemCheckpointStorage(chk)
    rows = []
    before: set[str] = set()
    try:
        for i in range(len(phases)):
            go[i].set()
            await done[i].wait()
            t = time.perf_counter()
            await client.trigger_checkpoint()
            duration = time.perf_counter() - t
            handle = storage.latest_complete("cost")
            assert handle is not None
            meta = json.loads((handle.path / "_metadata").read_bytes())
            new = set(handle.shared) - before
            new_bytes = sum(handle.shared_info[n].size for n in new)
            new_bytes += sum(e.size for e in handle.entry_info.values())
            rows.append(
                {
                    "keys": keys,
                    "changed": "all (first)" if i == 0 else f"{rates[i - 1]:.0%}",
                    "duration_ms": round(duration * 1000),
                    "sync_ms": meta.get("stats", {}).get("sync_ms_max"),
                    "new_bytes": new_bytes,
                    "new_files": len(new),
                    "total_bytes": sum(s.size for s in handle.shared_info.values()),
                }
            )
            before = set(handle.shared)
    finally:
        await client.cancel()
        shutil.rmtree(chk, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--parts", default="overhead,baseline,restore,cost")
    ap.add_argument("--cost-keys", default="1000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--child", nargs="+")
    args = ap.parse_args()
    if args.child:
        what, keys = args.child[0], int(args.child[1])
        if what == "run":
            target = None if args.child[2] == "-" else args.child[2]
            print(json.dumps(running_sum(keys, target)))
        else:  # restore: the job again, from the checkpoint; its source has nothing left
            print(json.dumps(running_sum(keys, args.child[2], int(args.child[3]), restore=True)))
        return
    parts = set(args.parts.split(","))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    if "overhead" in parts:
        overhead_and_restore(args.keys, args.repeat, parts)
    if "cost" in parts:
        print(f"{'keys':>10} {'changed':>12} {'duration':>9} {'sync':>6} {'new bytes':>12} {'new SSTs':>8} "
              f"{'all SSTs':>12}")  # fmt: skip
        for k in map(int, args.cost_keys.split(",")):
            for row in asyncio.run(cost(k, [0.01, 0.1, 1.0])):
                print(
                    f"{row['keys']:>10,} {row['changed']:>12} {row['duration_ms']:>7} ms "
                    f"{row['sync_ms'] or 0:>4} ms {row['new_bytes']:>12,} {row['new_files']:>8} "
                    f"{row['total_bytes']:>12,}"
                )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
