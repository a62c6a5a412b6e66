"""Restore and rescale of a large RocksDB checkpoint (issue 12 item 7: restore of the 10M-key
checkpoint in under 30 s).

A job at parallelism ``P`` (the source at 1) sums K records, one per key, on
EmbeddedRocksDBStateBackend and ends with a checkpoint holding all K keys. Each
restore is a new job at parallelism ``Q`` restoring that checkpoint (its own
hard-linked copy of the checkpoint directory), then summing one more record
for 1,000 sample keys: their sums must be 2, so every subtask's restored state
is checked. The figure is the whole restoring job (start, restore, the sample,
its final checkpoint), each in its own process: wall time, CPU time of the
process (every thread) and peak RSS, with the load average. Restores of
different ``P -> Q`` are interleaved, ``--repeat`` rounds, medians.

``P == Q`` links the SST files back; ``Q > P`` links each new subtask's base
DB and clips it by range tombstones; ``Q < P`` links one old DB and ingests
the other old DBs' entries as SST files (``streamflow/state/rocksdb_restore.py``).

Usage: python bench/rocksdb_rescale.py [--keys 10000000] [--pairs 1:1,1:2,1:4,4:1] [--repeat 3]
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
from itertools import repeat
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from benchutil import ThreadCPU, machine, median, verdict  # noqa: E402

import streamflow as sf  # noqa: E402
from streamflow.checkpoint.storage import FileSystemCheckpointStorage  # noqa: E402

JOB = "rocksdb-rescale"
SAMPLE = 1000


class Sink(sf.SinkFunction):
    def __init__(self) -> None:
        self.n = 0
        self.sample: list[tuple[int, int]] = []

    def write_batch(self, values: list) -> None:
        self.n += len(values)
        if len(self.sample) < 10 * SAMPLE:
            self.sample.extend(values)


def _sample(keys: int) -> list[int]:
    return list(range(0, keys, max(1, keys // SAMPLE)))


def job(keys: int, parallelism: int, checkpoint_dir: str, restore: bool) -> dict[str, Any]:
    """The build (``restore=False``: K records, one per key, from a collection source; a second
    source stays open so the job is running when the checkpoint is taken, then cancelled) or a
    restore (the collection source is restored finished; the second sends one record per
    sample key, then ends)."""
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    env.enable_checkpointing(3_600_000)  # only the one triggered below (and a restore's last)
    env.get_checkpoint_config().set_checkpoint_storage_dir(checkpoint_dir)
    sample = _sample(keys)

    async def more() -> Any:
        if restore:
            for k in sample:
                yield (k, 1)
        else:
            await asyncio.Event().wait()  # open until the job is cancelled
            yield (0, 0)  # (never reached: makes this an async generator)

    sink = Sink()
    once = env.from_collection(lambda: zip(range(keys), repeat(1))).uid("src").set_parallelism(1)
    hold = env.from_async_iterable(more).uid("more").set_parallelism(1)
    once.union(hold).key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(sink).set_parallelism(1)

    async def run() -> Any:
        client = await env.execute_async(JOB)
        if restore:
            return await client.get_job_execution_result()
        while sink.n < keys:
            await asyncio.sleep(0.05)
        await client.trigger_checkpoint()
        await client.cancel()
        return None

    threads = ThreadCPU()
    t, cpu = time.perf_counter(), time.process_time()
    result = asyncio.run(run())
    elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    per_thread = threads.stop()
    if restore:
        got = dict(sink.sample)
        wrong = {k: got.get(k) for k in sample if got.get(k) != 2}
        assert sink.n == len(sample) and not wrong, (
            f"restored state is wrong: {sink.n} out, {list(wrong.items())[:5]}"
        )
    else:
        assert sink.n == keys, f"wrong answer: {sink.n} records out"
    return {
        "elapsed_s": elapsed,
        "cpu_s": cpu,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "threads": per_thread,
        "restored": 0 if result is None else int(result.metrics.get("job.restoredCheckpointId", 0) or 0),
    }


def child(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _link_tree(src: Path, dst: Path) -> None:
    """A copy of a checkpoint directory whose files are hard links (the restoring job writes its
    own checkpoints and index into it; it never changes a file in place)."""
    shutil.copytree(src, dst, copy_function=os.link)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--pairs", default="1:1,1:2,1:4,4:1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", nargs="+")
    args = ap.parse_args()
    if args.child:
        what, keys, p, directory = args.child
        print(json.dumps(job(int(keys), int(p), directory, restore=what == "restore")))
        return
    pairs = [tuple(map(int, x.split(":"))) for x in args.pairs.split(",")]
    keys = args.keys
    print(f"machine: {machine('at start')}")
    root = Path(tempfile.mkdtemp(prefix="sf-rocks-rescale-"))
    try:
        built: dict[int, Path] = {}
        for p in sorted({p for p, _ in pairs}):
            d = root / f"built-{p}"
            r = child(["build", str(keys), str(p), str(d)])
            handle = FileSystemCheckpointStorage(d).restore_point(JOB)
            assert handle is not None, "the build left no checkpoint"
            ssts = [n for n in handle.shared if n.endswith(".sst")]
            size = sum(handle.shared_info[n].size for n in ssts)
            print(
                f"built: {keys:,} keys at parallelism {p} in {r['elapsed_s']:.1f} s "
                f"({r['cpu_s']:.1f} s CPU); "
                f"checkpoint {size / 2**20:.0f} MB in {len(ssts)} SST files; {machine('after it')}"
            )
            built[p] = d
        runs: dict[tuple[int, int], list[dict[str, Any]]] = {pq: [] for pq in pairs}
        for rnd in range(args.repeat):
            for p, q in pairs:  # interleaved: each round restores every pair once
                work = root / f"restore-{p}-{q}-{rnd}"
                _link_tree(built[p], work)
                res = child(["restore", str(keys), str(q), str(work)])
                res["load"] = os.getloadavg()[0]
                runs[(p, q)].append(res)
                print(
                    f"  round {rnd + 1}: {p} -> {q}: {res['elapsed_s']:.1f} s wall, "
                    f"{res['cpu_s']:.1f} s CPU, "
                    f"peak RSS {res['rss_mb']:.0f} MB, load {res['load']:.1f}",
                    flush=True,
                )
                shutil.rmtree(work, ignore_errors=True)
        print(f"restore of the {keys:,}-key checkpoint, the whole restoring job, medians of {args.repeat}:")
        for (p, q), rs in runs.items():
            how = (
                "SST files linked back"
                if p == q
                else ("linked back, clipped by range" if q > p else "one linked back, the others ingested")
            )
            wall = median(r["elapsed_s"] for r in rs)
            print(
                f"  {p} -> {q} ({how}): {wall:.1f} s wall, {median(r['cpu_s'] for r in rs):.1f} s CPU, "
                f"peak RSS {median(r['rss_mb'] for r in rs):.0f} MB, load {min(r['load'] for r in rs):.1f}-"
                f"{max(r['load'] for r in rs):.1f} (target < 30 s): {verdict(wall < 30)}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"machine: {machine('at the end')}")


if __name__ == "__main__":
    main()
