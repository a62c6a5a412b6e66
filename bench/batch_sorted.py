"""What batch mode's sorted keyed inputs cost (``runtime/sorting_input.py``, ``sort_buffer.py``).

The same bounded job in BATCH mode, with Flink's sorted inputs (the default) and with
``execution.sorted-inputs.enabled: false`` (arrival order, every key's timers at the end of
input: what batch mode did before), measured in the same run, interleaved (A B A B ...),
CPU time of the process, medians. Jobs: a keyed ``reduce`` (one result per key) and a
``KeyedProcessFunction`` with a ValueState and an event-time timer per record, over
``--records`` records with ``--keys`` keys in random timestamp order, parallelism 1, plus the
reduce with a sort buffer small enough to spill (``--spill-kb``) to show the disk path, and
the reduce with a restart strategy (blocking exchanges between pipelined regions, which fail
over alone: ``runtime/regions.py``; without one the exchanges run pipelined).

    python bench/batch_sorted.py [--records 200000] [--keys 20000] [--runs 5]
    python bench/batch_sorted.py --spill-only [--spill-kb 512]

Target: sorted / unsorted CPU time <= 2.0 for both jobs (the sort is a Python ``sorted`` per
key plus a second pass over the records; Flink's own sorted inputs cost a sort and a
serialization per record); the spilling run is reported, not targeted.

``--spill-only``: what spilling costs (``runtime/sort_runs.py``): the keyed reduce in memory
and with a ``--spill-kb`` budget, interleaved, for plain records ``(str, int, int)`` and for
records with a ``Decimal`` and a ``datetime`` field (which go through the records codec's
extension types), the spilling run's extra CPU per record printed beside the in-memory run
(reported, not targeted). Run it with ``PYTHONPATH`` at two trees to compare their spill
formats (docs/performance.md).
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import machine, median, target

from streamflow.common import WatermarkStrategy
from streamflow.common.restart_strategy import RestartStrategies
from streamflow.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from streamflow.datastream.functions import KeyedProcessFunction
from streamflow.datastream.state import ValueStateDescriptor


class LastValue(KeyedProcessFunction):
    def open(self, runtime_context: Any) -> None:
        self.last = runtime_context.get_state(ValueStateDescriptor("last", None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.last.update(value[2])
        ctx.timer_service().register_event_time_timer(value[1] + 1)
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ctx.get_current_key(), self.last.value()


def _data(records: int, keys: int) -> list[tuple[str, int, int]]:
    rng = random.Random(7)
    return [(f"key-{rng.randrange(keys)}", rng.randrange(10**9), i) for i in range(records)]


def _rich(data: list[tuple[str, int, int]]) -> list[tuple]:
    """The records with a ``Decimal`` and a ``datetime`` field (codec extension types)."""
    epoch = datetime.datetime(2026, 1, 1)
    return [(k, ts, v, decimal.Decimal(v) / 100, epoch + datetime.timedelta(seconds=v)) for k, ts, v in data]


def run(
    job: str, data: list, sorted_inputs: bool, memory: str | None = None, restarts: bool = False
) -> tuple[float, int]:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    if restarts:  # blocking exchanges between pipelined regions (runtime/regions.py)
        env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    config: dict[str, Any] = {"execution.sorted-inputs.enabled": sorted_inputs, "streamflow.progress": False}
    if memory is not None:
        config["execution.sorted-inputs.memory"] = memory
    env.configure(config)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])
    keyed = env.from_collection(data).assign_timestamps_and_watermarks(strategy).key_by(lambda e: e[0])
    if job == "reduce":
        stream = keyed.reduce(lambda a, b: (a[0], b[1], a[2] + b[2]))
    elif job == "reduce-rich":
        stream = keyed.reduce(lambda a, b: (a[0], b[1], a[2] + b[2], a[3] + b[3], b[4]))
    else:
        stream = keyed.process(LastValue())
    started = time.process_time()
    n = sum(1 for _ in stream.execute_and_collect())
    return time.process_time() - started, n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--spill-kb", type=int, default=512)
    parser.add_argument("--spill-only", action="store_true", help="only the spill cost (module doc)")
    args = parser.parse_args()
    data = _data(args.records, args.keys)
    if args.spill_only:
        spill_only(data, args)
        return
    print(f"batch_sorted: {args.records} records, {args.keys} keys, {args.runs} interleaved runs; "
          f"{machine('at start')}")  # fmt: skip
    ok = True
    for job in ("reduce", "process"):
        sorted_s: list[float] = []
        unsorted_s: list[float] = []
        for _ in range(args.runs):
            cpu, n = run(job, data, True)
            sorted_s.append(cpu)
            cpu_u, n_u = run(job, data, False)
            unsorted_s.append(cpu_u)
            assert n == n_u, (job, n, n_u)
        cpu_s, cpu_u = median(sorted_s), median(unsorted_s)
        ratio = cpu_s / cpu_u
        rates = f"{args.records / cpu_s:,.0f} vs {args.records / cpu_u:,.0f} records/s"
        print(f"  {job}: sorted {cpu_s:.2f} s CPU, unsorted {cpu_u:.2f} s CPU ({rates})")
        line = target(f"  {job}: sorted / unsorted CPU", ratio, 2.0, "x", ".2f")
        ok = ok and ratio <= 2.0
        print(line)
    spill = [run("reduce", data, True, f"{args.spill_kb} kb")[0] for _ in range(max(1, args.runs // 2))]
    print(f"  reduce spilling beyond {args.spill_kb} KiB: {median(spill):.2f} s CPU (reported, not targeted)")
    piped, blocking = [], []
    for _ in range(max(1, args.runs // 2)):
        piped.append(run("reduce", data, True)[0])
        blocking.append(run("reduce", data, True, restarts=True)[0])
    ratio = median(blocking) / median(piped)
    print(f"  reduce with a restart strategy (blocking exchanges, region failover): {median(blocking):.2f} "
          f"s CPU, {ratio:.2f}x the pipelined run's (reported, not targeted)")  # fmt: skip
    print(f"  {machine('at end')}")
    print("PASS" if ok else "MISS")


def spill_only(data: list, args: argparse.Namespace) -> None:
    import streamflow

    print(f"batch_sorted --spill-only: {args.records} records, {args.keys} keys, budget {args.spill_kb} KiB, "
          f"{args.runs} interleaved runs; streamflow from {Path(streamflow.__file__).parent}; "
          f"{machine('at start')}")  # fmt: skip
    for job, records in (("reduce", data), ("reduce-rich", _rich(data))):
        memory_s: list[float] = []
        spill_s: list[float] = []
        for _ in range(args.runs):
            cpu_m, n_m = run(job, records, True)
            memory_s.append(cpu_m)
            cpu_s, n_s = run(job, records, True, f"{args.spill_kb} kb")
            spill_s.append(cpu_s)
            assert n_m == n_s, (job, n_m, n_s)
        m, sp = median(memory_s), median(spill_s)
        extra_us = (sp - m) / args.records * 1e6
        print(f"  {job}: in memory {m:.2f} s CPU, spilling {sp:.2f} s CPU ({sp / m:.2f}x; "
              f"{extra_us:.2f} us CPU more per record)")  # fmt: skip
    print(f"  {machine('at end')}")


if __name__ == "__main__":
    main()
