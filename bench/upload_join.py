"""How long a heap backend's upload holds the event loop after the barrier (``HeapUpload.produce``).

A heap keyed state backend of ``--keys`` keys (a running sum's ``(key, sum, ts)`` tuples, as
``bench/state_checkpoints.py``) takes a base checkpoint: the capture encodes its frames at the
barrier (in slices that yield), then the upload joins them into one file (17 MB at 1M keys).
Measured around ``produce()`` alone, with a coroutine in the same loop that yields every
iteration: the longest loop turn the produce held (wall, and the loop thread's CPU). Two
variants, interleaved (A B A B ...) in one process, each on a fresh capture: ``thread``, the
join in a worker thread past ``JOIN_ON_LOOP_MAX`` (now), and ``loop``, the join on the loop
(before: ``JOIN_ON_LOOP_MAX`` set out of reach). Medians and worsts are printed with the
load average.

    python bench/upload_join.py [--keys 1000000] [--runs 5]

Target: the longest turn's loop-thread CPU <= 10 ms (the default loop budget: a slice of the job's
work), PASS/MISS on the ``thread`` variant's median; its wall time is printed beside it (on a
loaded machine the loop thread also waits for a core, and for the GIL while the worker thread
allocates the file: at most a switch interval, 5 ms, at a time).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from streamflow.checkpoint import uploads  # noqa: E402
from streamflow.state import incremental  # noqa: E402
from streamflow.state.codec import MsgpackCodec  # noqa: E402
from streamflow.state.key_groups import key_group_range  # noqa: E402
from streamflow.state.keyed import IncrementalSettings, KeyedStateBackend  # noqa: E402

MAXP = 128
TARGET_MS = 10.0
ON_LOOP_DEFAULT = uploads.JOIN_ON_LOOP_MAX


def backend_with(n: int) -> KeyedStateBackend:
    settings = IncrementalSettings("sum#0", key_group_range(0, MAXP, 1), MsgpackCodec(), 8)
    backend = KeyedStateBackend(MAXP, settings)
    table, _ = backend.tracked_table("reduce", "value")
    for i in range(n):
        k = f"k{i}"
        table[k] = (k, i, i)
    return backend


async def one(keys: int, variant: str, cid: int) -> tuple[float, float, int]:
    """The longest loop turn during one produce (wall ms, loop-thread CPU ms) and the file size."""
    backend = backend_with(keys)
    upload = await backend.capture(cid, False)
    assert isinstance(upload, incremental.HeapUpload)
    backend.snapshot()
    uploads.JOIN_ON_LOOP_MAX = ON_LOOP_DEFAULT if variant == "thread" else 1 << 62
    gc.collect()
    worst_wall, worst_cpu, done = 0.0, 0.0, False

    async def ticker() -> None:
        nonlocal worst_wall, worst_cpu
        while not done:
            t, c = time.perf_counter(), time.thread_time()
            await asyncio.sleep(0)
            worst_wall = max(worst_wall, time.perf_counter() - t)
            worst_cpu = max(worst_cpu, time.thread_time() - c)

    tick = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    files = await upload.produce()
    done = True
    await tick
    uploads.JOIN_ON_LOOP_MAX = ON_LOOP_DEFAULT
    size = sum(len(d) for d in files.values() if isinstance(d, bytes))
    return worst_wall * 1000, worst_cpu * 1000, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"upload_join: {args.keys:,} keys, a base checkpoint's produce(); load average {load}")
    got: dict[str, list[tuple[float, float, int]]] = {"thread": [], "loop": []}
    cid = 0
    for _ in range(args.runs):
        for variant in ("thread", "loop"):
            cid += 1
            got[variant].append(asyncio.run(one(args.keys, variant, cid)))
    ok = True
    for variant, runs in got.items():
        walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
        med = statistics.median(walls)
        passed = statistics.median(cpus) <= TARGET_MS
        if variant == "thread":
            ok = passed
        what = "join in a worker thread (now)" if variant == "thread" else "join on the loop (before)"
        print(
            f"  {variant:6} {what:32}: longest loop turn median {med:6.1f} ms (worst {max(walls):6.1f}), "
            f"loop-thread CPU median {statistics.median(cpus):6.1f} ms (worst {max(cpus):6.1f}); "
            f"file {runs[0][2] / 1e6:.1f} MB; target CPU <= {TARGET_MS:.0f} ms: "
            f"{'PASS' if passed else 'MISS'}"
        )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("PASS" if ok else "MISS")


if __name__ == "__main__":
    main()
