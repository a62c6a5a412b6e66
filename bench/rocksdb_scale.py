"""RocksDB state backend at scale (issue 12 item 7).

1. overhead: a keyed running sum over K keys (2K records: every key twice), on
   EmbeddedRocksDBStateBackend, without checkpoints and with a checkpoint every
   second (to a local directory). Each run is a child process, so its peak RSS
   is its own. Targets: overhead <= 15 %, peak RSS < 2 GB.
2. restore: measured by bench/rocksdb_rescale.py (target < 30 s for 10M keys): a checkpoint
   taken while the job runs, restored at 1, 2, 4 and from 4 to 1, the restored state checked on
   sample keys. (The running sum here ends its input, so its last checkpoint holds finished
   operators, as Flink's final checkpoint does: a restore of it reads no keyed state, and timing
   one measured nothing; it was removed from this bench on 2026-11-28.)
3. cost: checkpoint size (bytes newly written: SST files not already stored,
   plus entries) and duration (trigger to completion; the synchronous part at
   the barrier) against the state size (1k, 100k, 1M, 10M keys) and the share
   of keys changed since the previous checkpoint (1 %, 10 %, 100 %).

Usage: python bench/rocksdb_scale.py [--keys 1000000] [--parts overhead,baseline,cost]
       [--cost-keys 1000,100000,1000000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
sys.path.insert(0, str(HERE))

from benchutil import ThreadCPU, dir_bytes, machine, median, target, verdict  # noqa: E402

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


def running_sum(keys: int, checkpoint_dir: str | None, every: int = 0) -> dict:
    """``every``: a checkpoint every that many records (triggered through the job client), instead
    of every second of wall time."""
    env = sf.StreamExecutionEnvironment()
    env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    if checkpoint_dir is not None:
        env.enable_checkpointing(1_000 if not every else 3_600_000)
        env.get_checkpoint_config().set_checkpoint_storage_dir(checkpoint_dir)
    sink = Totals()
    env.from_collection(lambda: records(keys)).uid("src").set_parallelism(1).key_by(lambda r: r[0]).sum(
        1
    ).uid("sum").add_sink(sink)

    async def run() -> Any:
        client = await env.execute_async("rocksdb-scale")
        triggered: list[asyncio.Future] = []
        done = False

        async def trigger() -> None:
            nxt = every
            while not done:
                await asyncio.sleep(0.002)
                if sink.n >= nxt:
                    triggered.append(asyncio.ensure_future(client.trigger_checkpoint()))
                    nxt += every

        watch = asyncio.ensure_future(trigger())
        result = await client.get_job_execution_result()
        done = True
        await watch
        await asyncio.gather(*triggered, return_exceptions=True)  # the last ones may find it ended
        return result

    threads = ThreadCPU()
    t, cpu = time.perf_counter(), time.process_time()
    result = asyncio.run(run()) if every else env.execute("rocksdb-scale")
    elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    per_thread = threads.stop()
    assert (sink.n, sink.total) == (2 * keys, 3 * keys), f"wrong answer: {sink.n}, {sink.total}"
    return {
        "elapsed_s": elapsed,
        "cpu_s": cpu,  # every thread of the process: the job, RocksDB's, the checkpoint writer's
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "checkpoints": int(result.metrics.get("checkpoints.numCompleted", 0)),
        "threads": per_thread,
    }


def child(args: list[str]) -> dict:
    return children([args])[0]


def children(argss: list[list[str]]) -> list[dict]:
    """Run the children at the same time (one each, the usual case, or a pair with
    ``--together``); their results in order."""
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in argss
    ]
    outs = []
    for args, proc in zip(argss, procs, strict=True):
        stdout, stderr = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"child {args} failed:\n{stderr[-3000:]}")
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    return outs


def _threads(x: dict) -> str:
    t = x["threads"]
    return (
        f"main {t.get('main', 0):.1f} s, compactions {t.get('rocksdb:low', 0):.1f} s, "
        f"memtable flushes {t.get('rocksdb:high', 0):.1f} s, other threads {t.get('other', 0):.1f} s"
    )


def _med(runs: list[dict], field: str) -> float:
    return median(x[field] for x in runs)


def _med_threads(runs: list[dict]) -> dict:
    names = {n for x in runs for n in x["threads"]}
    return {"threads": {n: median(x["threads"].get(n, 0.0) for x in runs) for n in names}}


def overhead(
    keys: int, repeat: int, parts: set[str], paced: bool, every: int = 0, together: bool = False
) -> None:
    base: list[dict] = []
    with_ckpt: list[dict] = []
    keep = Path(tempfile.mkdtemp(prefix="sf-rocks-bench-"))
    try:
        for r in range(repeat):  # interleaved (A B A B ...): the machine's drift hits both alike
            if together and every:  # the pair at the same time: the same machine for both
                b, c = children(
                    [["run", str(keys), "-"], ["run", str(keys), str(keep / f"chk-{r}"), str(every)]]
                )
                base.append(b)
                with_ckpt.append(c)
                continue
            if "baseline" in parts:
                base.append(child(["run", str(keys), "-"]))
                if paced and not every:  # one checkpoint per second of the job's own CPU time
                    every = round(2 * keys / _med(base, "cpu_s"))
            with_ckpt.append(child(["run", str(keys), str(keep / f"chk-{r}"), str(every)]))
            if paced and base:  # the pacing of the next pair: every baseline so far
                every = round(2 * keys / _med(base, "cpu_s"))
        print(
            f"running sum, {keys:,} keys ({2 * keys:,} records, every key twice), RocksDB, parallelism 1; "
            f"{repeat} run(s) of each, interleaved, medians; {machine('after the runs')}"
        )
        ck = with_ckpt
        how = (
            f"a checkpoint every {every:,} records (one per second of the no-checkpoint run's CPU time: "
            "what 1 s checkpoints are on a quiet machine, whatever the load)"
            if every
            else "a checkpoint every 1 s of wall time"
        )
        print(f"  {how}")
        print(
            f"  checkpointed: {_med(ck, 'elapsed_s'):.1f} s wall, {_med(ck, 'cpu_s'):.1f} s CPU "
            f"({_threads(_med_threads(ck))}), {_med(ck, 'checkpoints'):.0f} checkpoints"
        )
        if base:
            print(
                f"  no checkpoints: {_med(base, 'elapsed_s'):.1f} s wall, {_med(base, 'cpu_s'):.1f} s CPU "
                f"({_threads(_med_threads(base))})"
            )
            cpu = 100 * (_med(ck, "cpu_s") / _med(base, "cpu_s") - 1)
            wall = 100 * (_med(ck, "elapsed_s") / _med(base, "elapsed_s") - 1)
            print("  " + target("overhead of 1 s checkpoints, CPU time of the process", cpu, 15, "%", "+.1f"))
            n = max(1.0, _med(ck, "checkpoints"))
            per = (_med(ck, "cpu_s") - _med(base, "cpu_s")) / n
            print(f"  one checkpoint costs {1000 * per:.0f} ms of CPU (all threads)")
            if not every:
                # a loaded machine stretches the run, and a checkpoint per wall second then means
                # more checkpoints per record than on a quiet one (--interval cpu avoids it)
                print("  " + target("at one per CPU second (estimate)", 100 * per, 15, "%", "+.1f"))
            print(f"  (wall time {wall:+.1f} %)")
        rss = max(x["rss_mb"] for x in base + ck)
        print(f"  peak RSS: {rss:.0f} MB (target < 2048 MB): {verdict(rss < 2048)}")
        chk = keep / "chk-0"
        ssts = sum(1 for _ in chk.glob("shared/*/*.sst"))
        print(f"  checkpoint directory after the run: {dir_bytes(chk) / 2**20:.0f} MB ({ssts} SST files)")
        print("  restore: python bench/rocksdb_rescale.py (a running job's checkpoint, the state checked)")
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
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--parts", default="overhead,baseline,cost")
    ap.add_argument("--cost-keys", default="1000,100000,1000000,10000000")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument(
        "--interval",
        choices=["cpu", "wall"],
        default="cpu",
        help="cpu: a checkpoint per second of the no-checkpoint run's CPU time (by record count: "
        "robust to a loaded machine); wall: every second of wall time",
    )
    ap.add_argument(
        "--every",
        type=int,
        default=0,
        help="with --interval cpu: a checkpoint every this many records, instead of the pacing "
        "measured by the first baseline run (e.g. the records per CPU second of an earlier run)",
    )
    ap.add_argument(
        "--together",
        action="store_true",
        help="with --every: run each baseline and checkpointed pair at the same time (half the wall "
        "time on a loaded machine; each process's CPU time is still its own)",
    )
    ap.add_argument("--child", nargs="+")
    args = ap.parse_args()
    if args.child:
        what, keys = args.child[0], int(args.child[1])
        if what == "run":
            target = None if args.child[2] == "-" else args.child[2]
            every = int(args.child[3]) if len(args.child) > 3 else 0
            print(json.dumps(running_sum(keys, target, every=every)))
        return
    parts = set(args.parts.split(","))
    print(f"machine: {machine('at start')}")
    if "overhead" in parts:
        overhead(args.keys, args.repeat, parts, args.interval == "cpu", args.every, args.together)
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
    print(f"machine: {machine('at the end')}")


if __name__ == "__main__":
    main()
