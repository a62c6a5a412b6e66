"""K1 benchmark: streamflow's exactly-once Kafka pipeline against the hand-written aiokafka loop.

usage: python bench/kafka_k1.py [--runs 3] [--n 100000] [--parallelism 1]

Runs the shared K1 driver (shared/bench/kafka/bench.py: a fresh noida-db broker per run, N input
records produced up front, the pipeline timed until a read_committed consumer has seen all N
outputs, then the committed output checked) on the two pipelines alternately, and prints both
throughputs (median records/s), whether every run's output was exact, and the ratio
streamflow / hand-written (target >= 0.70). The driver directory is found at
$STREAMFLOW_BENCH_KAFKA, else ../shared/bench/kafka next to the repository, else
/work/shared/bench/kafka.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def driver_dir() -> Path:
    for cand in (os.environ.get("STREAMFLOW_BENCH_KAFKA"), REPO.parent / "shared/bench/kafka",
                 "/work/shared/bench/kafka"):
        if cand and (Path(cand) / "bench.py").exists():
            return Path(cand)
    raise SystemExit("K1 driver not found: set STREAMFLOW_BENCH_KAFKA to shared/bench/kafka")


def run_once(drv: Path, engine: str, cmd: list[str], n: int) -> dict:
    env = dict(os.environ, KP_N=str(n), PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, str(drv / "bench.py"), "--engine", engine, "--runs", "1", "--timeout", "600",
         "--", *cmd],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit(f"{engine}: no result from the driver\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--parallelism", type=int, default=1)
    args = ap.parse_args()
    drv = driver_dir()
    engines = {
        "aiokafka": [str(drv / "pipe_aiokafka.py"), "eos", "1"],
        "streamflow": [str(REPO / "bench/kafka_k1_pipeline.py"), str(args.parallelism)],
    }
    rps: dict[str, list[float]] = {e: [] for e in engines}
    exact: dict[str, bool] = dict.fromkeys(engines, True)
    for i in range(args.runs):
        for engine, cmd in engines.items():  # alternately, so both see the same machine load
            res = run_once(drv, engine, cmd, args.n)
            ok = bool(res.get("check", {}).get("ok"))
            exact[engine] = exact[engine] and ok
            if "rps" in res:
                rps[engine].append(res["rps"])
            print(f"run {i + 1} {engine:10s} rps={res.get('rps')} exact={ok} "
                  f"{res.get('error', '')}", flush=True)
    med = {e: statistics.median(v) if v else float("nan") for e, v in rps.items()}
    print(f"hand-written aiokafka EOS: {med['aiokafka']:,.0f} records/s (exact: {exact['aiokafka']})")
    print(f"streamflow K1 (p={args.parallelism}): {med['streamflow']:,.0f} records/s "
          f"(exact: {exact['streamflow']})")
    print(f"ratio streamflow / hand-written: {med['streamflow'] / med['aiokafka']:.2f} (target >= 0.70)")


if __name__ == "__main__":
    main()
