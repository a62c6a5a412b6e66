"""Window state in checkpoints (issue 12): a tumbling event-time window (the fast path) over K
keys, reduce, heap backend with incremental checkpoints.

1. Overhead and loop hold: the job over K keys and 3K records with a checkpoint every second vs
   none, interleaved (A B A B ...), medians of the process CPU time; the worst loop hold is the
   longest gap, in loop-thread CPU time, between two turns of a 5 ms heartbeat task in the
   caller's loop (target <= 50 ms).
2. Size against the change rate: the job loads K keys, checkpoints (a base), then writes 1 %,
   10 % or 100 % of the keys and checkpoints again: the new file's size (a delta, or a base when
   the chain policy materialises) beside the base's.

    python bench/window_checkpoints.py [K] [rounds]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchutil import run_with_heartbeat

import streamflow as sf
from streamflow.checkpoint.storage import FileSystemCheckpointStorage
from streamflow.common import Time
from streamflow.windowing import TumblingEventTimeWindows

HOLD_TARGET_MS = 50.0


def window(stream: Any, sink: Any) -> None:
    ws = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _ts: r[2])
    (
        stream.uid("src").assign_timestamps_and_watermarks(ws).key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(Time.hours(10))).reduce(lambda a, b: (a[0], a[1] + b[1], a[2]))
        .uid("win").add_sink(sink)
    )  # fmt: skip


async def timed_run(keys: int, checkpoints: bool) -> tuple[float, float, int]:
    env = sf.StreamExecutionEnvironment()
    if checkpoints:
        env.enable_checkpointing(1000)
        env.get_checkpoint_config().set_checkpoint_storage_dir(tempfile.mkdtemp(prefix="winb-"))
    n = 3 * keys
    window(env.from_collection(lambda: ((i % keys, 1, i // 1000) for i in range(n))), lambda r: None)
    cpu, hold_ms, result = await run_with_heartbeat(env, "win")
    return cpu, hold_ms, int(result.metrics.get("checkpoints.numCompleted") or 0)


class Gated:
    def __init__(self, data: list, stops: list[int]) -> None:
        self.data, self.stops, self.at = data, stops, -1
        self.released = asyncio.Event()

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for i, r in enumerate(self.data):
            if i in self.stops:
                self.at = i
                await self.released.wait()
                self.released = asyncio.Event()
            yield r


async def sizes(keys: int, fraction: float) -> tuple[int, int, str]:
    """(base bytes, next checkpoint's new file bytes, its kind) after ``fraction`` of the keys changed."""
    changed = max(1, int(keys * fraction))
    data = [(k, 1, 0) for k in range(keys)] + [(k, 1, 0) for k in range(changed)] + [(0, 1, 0)]
    stops = [keys, keys + changed]
    d = Path(tempfile.mkdtemp(prefix="winb-"))
    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(3_600_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir(d)
    seen = [0]

    def count(r: Any) -> Any:
        seen[0] += 1
        return r

    gates = Gated(data, stops)
    window(env.from_async_iterable(gates.__aiter__).map(count), lambda r: None)
    client = await env.execute_async("win")
    shared = FileSystemCheckpointStorage(d)
    files: list[dict[str, int]] = []
    for i, stop in enumerate(stops):
        while not (gates.at == stop and seen[0] == stop):
            await asyncio.sleep(0.005)
        await client.trigger_checkpoint()
        files.append({p.name: p.stat().st_size for p in shared.shared_dir("win").iterdir()})
        if i == 0:
            gates.released.set()
    await client.cancel()
    base = sum(files[0].values())
    new = {n: s for n, s in files[1].items() if n not in files[0]}
    kind = "delta" if all("-delta-" in n for n in new) else "base"
    return base, sum(new.values()), kind


async def main() -> None:
    keys = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print(f"window checkpoints, tumbling fast path, {keys:,} keys; load {os.getloadavg()}")
    runs: dict[bool, list[tuple[float, float, int]]] = {False: [], True: []}
    for _ in range(rounds):
        for ck in (False, True):
            runs[ck].append(await timed_run(keys, ck))
    base_cpu = statistics.median(r[0] for r in runs[False])
    ck_cpu = statistics.median(r[0] for r in runs[True])
    hold = max(r[1] for r in runs[True])
    hold_none = max(r[1] for r in runs[False])
    print(
        f"  cpu none {base_cpu:.2f} s, checkpoint every 1 s {ck_cpu:.2f} s: overhead "
        f"{100 * (ck_cpu / base_cpu - 1):.0f} % ({[r[2] for r in runs[True]]} checkpoints)"
    )
    print(
        f"  worst loop hold (CPU) with checkpoints {hold:.0f} ms, without {hold_none:.0f} ms: "
        f"target <= {HOLD_TARGET_MS:.0f} ms {'PASS' if hold <= HOLD_TARGET_MS else 'MISS'}"
    )
    for fraction in (0.01, 0.1, 1.0):
        base, new, kind = await sizes(keys, fraction)
        print(
            f"  {fraction:>5.0%} of keys changed: base {base / 1e6:.2f} MB, next checkpoint writes "
            f"{new / 1e6:.3f} MB ({kind}, {new / base:.3f} of the base)"
        )
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    asyncio.run(main())
