"""What checkpoints cost a job with a timer per key (issue 12: checkpoints that cost what changed,
a loop the job never holds for long).

A ``KeyedProcessFunction`` keeps a ``ValueState`` and registers one event-time timer per key
(``--keys`` keys, ``--records`` records, flat out from memory); the timers fire at the end. Each
run is a fresh process, without checkpoints and with one every second, interleaved
(``--repeat`` rounds). Printed per mode: the process CPU time (median), the longest time the job
held the loop (the loop thread's CPU time between two 5 ms heartbeats, so a loaded machine's
preemption does not count) and the checkpoints completed; then the overhead with PASS/MISS
against issue 12's targets (at most 10 % CPU, at most 50 ms hold), and the load average.

``--no-state`` drops the ``ValueState`` (a timer per key and nothing else), to see what the
timers' checkpoints cost alone; with the state, each checkpoint also writes the keys whose count
changed (most of them: every key gets a record every ``keys`` records).

Usage: python bench/timer_checkpoints.py [--keys 300000] [--records 900000] [--repeat 3] [--no-state]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchutil import run_with_heartbeat

ROOT = Path(__file__).resolve().parent.parent
OVERHEAD_TARGET, HOLD_TARGET_MS = 0.10, 50.0


def child(keys: int, records: int, checkpoints: bool, state: bool) -> dict[str, Any]:
    import streamflow as sf

    class TimerPerKey(sf.KeyedProcessFunction):
        def open(self, ctx: Any) -> None:
            self.count = ctx.get_state(sf.ValueStateDescriptor("count"))

        def process_element(self, value: Any, ctx: Any) -> Any:
            self.count.update((self.count.value() or 0) + 1)
            ctx.timer_service().register_event_time_timer(10**12)
            return ()

        def on_timer(self, ts: int, ctx: Any) -> Any:
            yield ctx.get_current_key(), self.count.value()

    class TimerOnly(sf.KeyedProcessFunction):  # --no-state: what the timers alone cost
        def process_element(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service().register_event_time_timer(10**12)
            return ()

        def on_timer(self, ts: int, ctx: Any) -> Any:
            yield ctx.get_current_key(), ts

    async def main(directory: str) -> dict[str, Any]:
        env = sf.StreamExecutionEnvironment()
        if checkpoints:
            env.enable_checkpointing(1000)
            env.get_checkpoint_config().set_checkpoint_storage_dir(directory)
        strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
            lambda r, ts: r[1]
        )
        fired = [0]
        (
            env.from_collection(lambda: ((i % keys, i // 1000) for i in range(records)))
            .assign_timestamps_and_watermarks(strategy)
            .key_by(lambda r: r[0])
            .process(TimerPerKey() if state else TimerOnly())
            .add_sink(lambda r: fired.__setitem__(0, fired[0] + 1))
        )
        cpu, hold_ms, result = await run_with_heartbeat(env, "timers")
        assert fired[0] == keys, fired[0]
        return {
            "cpu": cpu,
            "hold_ms": hold_ms,
            "checkpoints": result.metrics.get("checkpoints.numCompleted", 0),
        }

    with tempfile.TemporaryDirectory(prefix="sf-timers-") as directory:  # ~9 MB of checkpoints a run
        return asyncio.run(main(directory))


def run(keys: int, records: int, checkpoints: bool, state: bool) -> dict[str, Any]:
    mode = "ck" if checkpoints else "none"
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(keys), str(records), mode, "state" if state else "timers"],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        keys, records, mode, state = sys.argv[2:6]
        print(json.dumps(child(int(keys), int(records), mode == "ck", state == "state")))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=300_000)
    parser.add_argument("--records", type=int, default=900_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-state", action="store_true", help="timers only, no ValueState")
    args = parser.parse_args()
    runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    for _ in range(args.repeat):
        for mode in (False, True):
            runs[mode].append(run(args.keys, args.records, mode, not args.no_state))
    cpu = {mode: statistics.median(r["cpu"] for r in rs) for mode, rs in runs.items()}
    hold = {mode: max(r["hold_ms"] for r in rs) for mode, rs in runs.items()}
    what = "a timer each, no state" if args.no_state else "a timer and a ValueState each"
    print(f"{args.keys:,} keys with {what}, {args.records:,} records, load {os.getloadavg()}")
    for mode in (False, True):
        label = "checkpoint every 1 s" if mode else "no checkpoints"
        cks = [r["checkpoints"] for r in runs[mode]]
        print(f"  {label:22} CPU {cpu[mode]:6.2f} s (median)  longest hold {hold[mode]:6.1f} ms  "
              f"checkpoints {cks}")
    overhead = cpu[True] / cpu[False] - 1
    per_ck = (cpu[True] - cpu[False]) / max(1.0, statistics.median(r["checkpoints"] for r in runs[True]))
    print(f"  CPU per checkpoint {per_ck * 1000:.0f} ms (difference of the medians / median checkpoints)")
    held = "PASS" if hold[True] <= HOLD_TARGET_MS else "MISS"
    print(f"  overhead {overhead:+.1%} (target <= {OVERHEAD_TARGET:.0%}: "
          f"{'PASS' if overhead <= OVERHEAD_TARGET else 'MISS'}); longest hold with checkpoints "
          f"{hold[True]:.1f} ms (target <= {HOLD_TARGET_MS:.0f} ms: {held})")


if __name__ == "__main__":
    main()
