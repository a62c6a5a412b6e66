"""Python's garbage collector in W3 (``bench/run.py``'s tumbling-window job, fast form): what a
collector policy could take.

W3 keeps each record in a window pane until the window fires, so its records outlive the tuple
free list and every one is visited once by a young collection. Per run, with a ``gc.callbacks``
hook timing each collection by the loop thread's CPU (``time.thread_time``) and wall time: the
collector's CPU by generation, the number of collections, the longest one, and the job's CPU
(``time.process_time``), for the default thresholds and a few others set for the run only
(restored after it), interleaved (A B C ... then reversed), in one process after a warm-up.

    python bench/gc_w3.py [--n 1000000] [--rounds 3]

Each variant's thresholds hold for the whole run (the GC policy's own third threshold while
jobs run, ``gc_policy.FULL_EVERY``, is set to the variant's for it); the first row is Python's
default, the second what the policy sets while jobs run (since 2026-11-27 21:15, helper `fast2`).

Verdict per variant (PASS/MISS): its collector CPU is at least ``CUT`` (25 %) below the
default's (medians) and its longest collection (CPU) is not longer than the default's. Read
with the job CPU beside it: a variant that moves the collector's time but not the job's has
moved nothing the job pays.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import run as workloads  # noqa: E402

from streamflow.runtime import gc_policy  # noqa: E402

CUT = 0.25
VARIANTS: dict[str, tuple[int, int, int]] = {
    "700, 10, 10 (Python's)": (700, 10, 10),
    "700, 10, 100 (policy)": (700, 10, 100),
    "2,000, 10, 10": (2_000, 10, 10),
    "7,000, 10, 10": (7_000, 10, 10),
    "700, 100, 10": (700, 100, 10),
    "700, 10, 100": (700, 10, 100),
}


class Collections:
    def __init__(self) -> None:
        self.cpu = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self.longest_cpu = 0.0
        self.longest_wall = 0.0
        self._t = self._w = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t, self._w = time.thread_time(), time.perf_counter()
            return
        took, wall = time.thread_time() - self._t, time.perf_counter() - self._w
        g = info["generation"]
        self.cpu[g] += took
        self.count[g] += 1
        self.longest_cpu = max(self.longest_cpu, took)
        self.longest_wall = max(self.longest_wall, wall)


def one(n: int, thresholds: tuple[int, int, int]) -> tuple[float, Collections]:
    default = gc.get_threshold()
    gc.collect()
    seen = Collections()
    gc.set_threshold(*thresholds)
    gc.callbacks.append(seen)
    # the policy raises the third threshold to FULL_EVERY while jobs run: here, to the variant's
    full_every, gc_policy.FULL_EVERY = gc_policy.FULL_EVERY, thresholds[2]
    try:
        cpu = time.process_time()
        workloads.w3(n)
        cpu = time.process_time() - cpu
    finally:
        gc_policy.FULL_EVERY = full_every
        gc.callbacks.remove(seen)
        gc.set_threshold(*default)
    return cpu, seen


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"gc_w3: W3 fast at {args.n:,} records, {args.rounds} interleaved rounds; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    workloads.w3(10_000)  # warm-up
    got: dict[str, list[tuple[float, Collections]]] = {name: [] for name in VARIANTS}
    for r in range(args.rounds):
        for name in VARIANTS if r % 2 == 0 else reversed(VARIANTS):
            got[name].append(one(args.n, VARIANTS[name]))
    base = next(iter(VARIANTS))
    base_gc = statistics.median(sum(c.cpu) for _, c in got[base])
    base_longest = max(c.longest_cpu for _, c in got[base])
    for name, runs in got.items():
        gc_ms = statistics.median(sum(c.cpu) for _, c in runs) * 1000
        gens = " / ".join(f"{statistics.median(c.cpu[g] for _, c in runs) * 1000:.0f}" for g in range(3))
        counts = " / ".join(f"{runs[-1][1].count[g]:,}" for g in range(3))
        longest = max(c.longest_cpu for _, c in runs)
        verdict = ""
        if name != base:
            ok = gc_ms / 1000 <= (1 - CUT) * base_gc and longest <= base_longest
            verdict = f"; cut >= {CUT:.0%} without a longer collection: {'PASS' if ok else 'MISS'}"
        print(
            f"  {name:22}: collector CPU median {gc_ms:6.1f} ms (generations 0/1/2: {gens} ms; "
            f"collections {counts}), longest collection {longest * 1000:5.2f} ms CPU / "
            f"{max(c.longest_wall for _, c in runs) * 1000:6.2f} ms wall; job CPU median "
            f"{statistics.median(cpu for cpu, _ in runs):.3f} s{verdict}",
            flush=True,
        )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
