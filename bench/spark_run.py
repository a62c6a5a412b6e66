"""``bench/run.py --engine spark``: the canonical workloads on the Spark engine against the
hand-written PySpark queries of ``bench/spark_baselines.py``, in one SparkSession (see
:func:`spark_main` for the method). Run through ``bench/run.py``, which hands over its workload
functions, its ``ENGINE`` switch (set to Spark here) and its events generator."""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable
from typing import Any


def _tree_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of this process and each of its live descendants (the JVM,
    the Python workers), by pid."""
    ticks = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / ticks
    me, mine = os.getpid(), {}
    for pid, seconds in cpu.items():
        p = pid
        while p > 1 and p != me:
            p = parent.get(p, 0)
        if p == me:
            mine[pid] = seconds
    return mine


def _measured(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall seconds, CPU seconds of the process tree, and ``fn``'s answer. The CPU is the sum
    over processes of what each used between the two readings (a process that started
    meanwhile: all of its time; one that exited meanwhile: nothing, so this is a lower bound;
    Spark reuses its Python workers, so few do)."""
    gc.collect()
    before, t = _tree_cpu(), time.perf_counter()
    answer = fn()
    wall, after = time.perf_counter() - t, _tree_cpu()
    return wall, sum(c - before.get(pid, 0.0) for pid, c in after.items()), answer


def spark_main(args: argparse.Namespace, WORKLOADS: dict[str, Callable[[int], Any]],
               ENGINE: dict[str, Any], events: Callable[[int], Any]) -> int:
    """streamflow on Spark against hand-written PySpark in one SparkSession (the JVM started
    before any timing, so neither side pays it). Both sides get the same method: each workload
    is first run untimed on both at the timed size (at most 100,000 records) and the timed
    micro-batch size, then ``--repeat`` rounds of one run each,
    the order alternating (streamflow first, then PySpark first: neither always runs on the
    other's warm caches or after its garbage), each run after ``gc.collect()``. Each round
    gives a wall ratio and a CPU ratio (this process, the JVM and the Python workers); the
    figures are the medians over rounds of these ratios, beside the median times."""
    import statistics

    import spark_baselines

    from streamflow.spark.session import get_session

    spark = get_session({"spark.driver.memory": "2g"})
    names = args.workloads.split(",")
    # Untimed warm-up of each workload on both sides, as large as a timed run (up to 100k): the
    # first query of a kind pays its Python workers' imports, and the JVM compiles (C1/C2 JIT)
    # the per-key and per-row paths only once they ran often enough. After a warm-up of 1,000
    # records in 10 micro-batches (until 2026-11-27), the first timed W2 run at 100k spent
    # 7.5-13 s CPU in the JVM's compiler threads against 3-4 s in the runs after it, while its
    # Python workers and driver used what the later runs did; a warm-up of 20,000 records left
    # 8 s of it (docs/performance.md, "helper spark, 15:30-16:05").
    warm = min(args.n, 100_000)
    ENGINE.update(name="spark", per_batch=max(1, warm // 10))
    for name in names:
        WORKLOADS[name](warm)
        spark_baselines.BASELINES[name](spark, list(events(warm)), 10)
    ENGINE.update(per_batch=max(1, args.n // 10))
    ok = True
    target = 1.2
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    print(f"{'workload':8} {'n':>9} {'streamflow s':>13} {'pyspark s':>10} {'ratio':>6} {'cpu ratio':>9} "
          f"{'target':>6}  wall/cpu result  answer  (medians over {args.repeat} rounds; load average "
          "before/after)")
    for name in names:
        flows: list[tuple[float, float]] = []
        hands: list[tuple[float, float]] = []
        answer = expected = None
        load = os.getloadavg()[0]
        for i in range(args.repeat):
            def flow(name: str = name) -> tuple[float, float, Any]:
                return _measured(lambda: WORKLOADS[name](args.n))

            def hand(name: str = name) -> tuple[float, float, Any]:
                # the events are generated inside the timed interval, as streamflow's source does
                return _measured(lambda: spark_baselines.BASELINES[name](spark, list(events(args.n)), 10))

            first, second = (flow, hand) if i % 2 == 0 else (hand, flow)
            a, b = first(), second()
            (t, c, answer), (ht, hc, expected) = (a, b) if i % 2 == 0 else (b, a)
            flows.append((t, c))
            hands.append((ht, hc))
        wall_ratio = statistics.median(f[0] / h[0] for f, h in zip(flows, hands, strict=True))
        cpu_ratio = statistics.median(f[1] / max(1e-9, h[1]) for f, h in zip(flows, hands, strict=True))
        good = answer == expected
        ok &= good
        # both verdicts: wall time is what the target names; on a shared machine the CPU time
        # (driver, JVM and workers) is the steadier figure (see docs/performance.md)
        verdict = "/".join("PASS" if r <= target else "MISS" for r in (wall_ratio, cpu_ratio))
        print(
            f"{name:8} {args.n:>9,} {statistics.median(t for t, _c in flows):>13.3f} "
            f"{statistics.median(t for t, _c in hands):>10.3f} {wall_ratio:>5.2f}x {cpu_ratio:>8.2f}x "
            f"{'<=' + str(target) + 'x':>6}  {verdict}  {answer} "
            f"{'exact' if good else f'WRONG ({expected})'}"
            f"  load {load:.1f}/{os.getloadavg()[0]:.1f}",
            flush=True,
        )
        runs = (f"streamflow wall {[round(t, 2) for t, _c in flows]} cpu {[round(c, 2) for _t, c in flows]}, "
                f"pyspark wall {[round(t, 2) for t, _c in hands]} cpu {[round(c, 2) for _t, c in hands]}")
        print(f"         runs: {runs}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if ok else 1
