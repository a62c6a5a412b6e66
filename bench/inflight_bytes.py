"""In-flight bytes: peak RSS with large records behind a slow sink (issue 12 items 5 and 7).

A source emits N distinct records of SIZE MB each (bytes), a map passes them on
and an async map as slow as the sink holds them back. Each run is a fresh
process; it prints the peak RSS above the baseline before the job, the job's
``job.inFlightBytesPeak`` (estimated bytes queued in channels at once) and the
configured job byte budget. Without a byte budget (records counted only) all
records pile up in the channels; with one, the queued bytes stay within it.

The RSS beyond the budget is the records outside the channels: the one being made, the one in
the slow map, the one in the sink, and at most one batch per channel past the budget (a batch
always enters an empty channel); it does not grow with the budget or the number of records.

Target (issue 12 item 7): with a byte budget, memory stays within it. Two checks per budget:
the bytes queued in channels at once at most the budget plus one batch (the budget's own
guarantee), and the peak RSS above the baseline at most the budget plus the records that are
never queued (``OUTSIDE`` = 4: the one being made, the one in the slow map, the one in the sink,
one batch past the budget). PASS when both hold for every budget.

Usage: python bench/inflight_bytes.py [--records N] [--size-mb S] [--budget-mb B[,B...]]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUTSIDE = 4  # records a byte budget does not count (see the module doc)


def child(records: int, size_mb: int, budget_mb: int | None) -> None:
    sys.path.insert(0, str(HERE.parent))
    import asyncio

    import streamflow as sf

    async def slow(record: tuple[int, bytes]) -> tuple[int, bytes]:
        await asyncio.sleep(0.01)
        return record

    env = sf.StreamExecutionEnvironment().set_parallelism(1).set_batch_size(1)
    if budget_mb is None:
        env.set_job_byte_budget(2**50).set_channel_byte_budget(None)  # effectively records only
    else:
        env.set_job_byte_budget(budget_mb * 2**20).set_channel_byte_budget(budget_mb * 2**20)
    seen = [0]

    def sink(record: tuple[int, bytes]) -> None:
        seen[0] += 1

    (
        env.from_collection(range(records))
        .map(lambda i: (i, bytes([i % 256]) * (size_mb * 2**20)))  # a distinct payload per record
        .disable_chaining()
        .map(slow, concurrency=1)
        .disable_chaining()
        .sink_to(sink)
    )
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = env.execute("inflight-bytes")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert seen[0] == records
    print(
        json.dumps(
            {
                "rss_peak_above_base_mb": round((peak - base) / 1024, 1),
                "in_flight_peak_mb": round(result.metrics["job.inFlightBytesPeak"] / 2**20, 1),
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=60)
    ap.add_argument("--size-mb", type=int, default=10)
    ap.add_argument("--budget-mb", default="64", help="one or more job byte budgets, e.g. 16,64,256")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.records, args.size_mb, None if args.child == "none" else int(args.child))
        return
    print(f"{args.records} records of {args.size_mb} MB behind a slow sink")
    print(f"  load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    verdicts: list[bool] = []
    budgets = [int(b) for b in str(args.budget_mb).split(",")]
    for budget in (None, *budgets):
        cmd = [sys.executable, __file__, "--records", str(args.records), "--size-mb", str(args.size_mb)]
        cmd += ["--child", "none" if budget is None else str(budget)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
        figures = json.loads(out.strip().splitlines()[-1])
        label = "records only (no byte budget)" if budget is None else f"byte budget {budget} MB"
        over = ""
        if budget is not None:
            extra = figures["rss_peak_above_base_mb"] - budget
            queued_ok = figures["in_flight_peak_mb"] <= budget + args.size_mb
            rss_ok = figures["rss_peak_above_base_mb"] <= budget + OUTSIDE * args.size_mb
            verdicts.append(queued_ok and rss_ok)
            over = (
                f", RSS beyond the budget {extra:+7.1f} MB ({extra / args.size_mb:+.1f} records; "
                f"allowed {OUTSIDE}): {'PASS' if verdicts[-1] else 'MISS'}"
            )
        print(
            f"  {label:32s} peak RSS +{figures['rss_peak_above_base_mb']:7.1f} MB, "
            f"in flight at most {figures['in_flight_peak_mb']:7.1f} MB{over}"
        )
    print(
        f"target: in flight <= budget + 1 record, peak RSS <= budget + {OUTSIDE} records of "
        f"{args.size_mb} MB, for every budget: {'PASS' if verdicts and all(verdicts) else 'MISS'}"
    )


if __name__ == "__main__":
    main()
