"""Heap checkpoints encoded in the process against in a forked snapshot child (``state/heap_fork.py``).

A heap keyed state backend holding N keys (``(key, sum, ts)`` running sums, as
``state_checkpoints.py sizes``) takes a checkpoint after a fraction of its keys was
written; ``--base`` makes every checkpoint a base (a materialisation: all N keys), else
each is a delta of what changed. Both modes, interleaved (A B A B ...), each run in a process of
its own, the checkpoint followed by the next interval's writes (the job going on while the
child runs), measured as:

* ``job CPU ms``: this process's CPU (``time.process_time``) from the barrier to the
  checkpoint written, plus the interval's writes: what the job pays, page faults included;
* ``writes ms``: the interval's writes alone (after a fork each page written faults once);
* ``sync ms``: how long the task waits at the barrier (capture and snapshot: the fork is here),
  wall and CPU;
* ``child CPU ms``: the snapshot child's CPU (``RUSAGE_CHILDREN``); ``faults``: this process's
  minor page faults over the same span.

Medians over ``--repeat`` rounds, with the load average. Usage:
python bench/snapshot_children.py [--keys 1000000] [--fraction 0.01] [--base] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from state_checkpoints import backend_with, one_checkpoint, touch  # noqa: E402

from streamflow.checkpoint.storage import FileSystemCheckpointStorage  # noqa: E402
from streamflow.state import snapshot_process  # noqa: E402
from streamflow.state.keyed import IncrementalSettings  # noqa: E402


def _usage() -> tuple[float, float, int]:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), kids.ru_utime + kids.ru_stime, me.ru_minflt


def one(n: int, fraction: float, base: bool, mode: str) -> dict[str, float]:
    """One checkpoint of one mode, in a process of its own (the other mode's state would share
    this one's pages and faults): a first base, an interval's writes, then the checkpoint measured."""
    backend = backend_with(n, True)
    settings = backend._settings
    assert settings is not None
    backend._settings = IncrementalSettings(
        settings.owner, settings.key_groups, settings.codec, settings.max_chain, mode
    )
    gc.freeze()  # as the job's gc policy does with its state
    with tempfile.TemporaryDirectory() as d:
        storage = FileSystemCheckpointStorage(d, retain=2)
        asyncio.run(one_checkpoint(backend, storage, 1))
        snapshot_process.wait_all()
        touch(backend, n, fraction, 0)
        if base and backend._chain is not None:
            backend._chain.confirmed = []  # the next checkpoint materialises
        gc.collect()
        cpu0, kids0, flt0 = _usage()
        row = asyncio.run(one_checkpoint(backend, storage, 2))
        w0 = time.process_time()
        touch(backend, n, fraction, 1)  # the next interval's writes, the child perhaps running
        writes = time.process_time() - w0
        snapshot_process.wait_all()
        cpu1, kids1, flt1 = _usage()
    return {
        "job_cpu_ms": (cpu1 - cpu0) * 1e3, "writes_ms": writes * 1e3, "sync_ms": row["sync_ms"],
        "sync_cpu_ms": row["sync_cpu_ms"], "child_cpu_ms": (kids1 - kids0) * 1e3,
        "faults": float(flt1 - flt0), "bytes": row["bytes"],
    }  # fmt: skip


def run(n: int, fraction: float, base: bool, repeat: int) -> None:
    rows: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    for _ in range(repeat):
        for m in rows:
            cmd = [sys.executable, __file__, "--keys", str(n), "--fraction", str(fraction), "--mode", m]
            cmd += ["--base"] if base else []
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            rows[m].append(json.loads(out.stdout.strip().splitlines()[-1]))
    kind = "a base (all keys)" if base else "a delta"
    print(
        f"{n:,} keys, {fraction:.0%} written per interval, each checkpoint {kind}; median of {repeat} "
        f"interleaved runs; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(f"{'mode':>12} {'job CPU ms':>11} {'writes ms':>10} {'sync ms':>8} {'(CPU)':>6} "
          f"{'child CPU ms':>13} {'faults':>8} {'MB':>6}")  # fmt: skip
    med = {m: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for m, rs in rows.items()}
    for m, x in med.items():
        name = "in process" if m == "off" else "child"
        print(
            f"{name:>12} {x['job_cpu_ms']:>11.1f} {x['writes_ms']:>10.1f} {x['sync_ms']:>8.1f} "
            f"{x['sync_cpu_ms']:>6.1f} "
            f"{x['child_cpu_ms']:>13.1f} {x['faults']:>8.0f} {x['bytes'] / 1e6:>6.1f}"
        )
    ratio = med["on"]["job_cpu_ms"] / med["off"]["job_cpu_ms"]
    print(f"  the job's CPU with a child / in the process: {ratio:.2f} (runs: "
          f"{', '.join(format(r['job_cpu_ms'], '.0f') for r in rows['off'])} / "
          f"{', '.join(format(r['job_cpu_ms'], '.0f') for r in rows['on'])} ms)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--base", action="store_true", help="every checkpoint a base (materialisation)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--mode", choices=["off", "on"], default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode is not None:  # one run, in a process of its own
        print(json.dumps(one(args.keys, args.fraction, args.base, args.mode)))
        return
    run(args.keys, args.fraction, args.base, args.repeat)


if __name__ == "__main__":
    main()
