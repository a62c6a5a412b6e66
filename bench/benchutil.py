"""Helpers the state benchmarks share (rocksdb_scale.py; state_checkpoints.py may use them too):
the machine line, target verdicts, medians, CPU time per thread, checkpoint directory sizes."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def machine(when: str) -> str:
    """``2 cores, load average 1.2 / 1.5 / 1.8 (at start)``: print it beside every figure."""
    one, five, fifteen = os.getloadavg()
    return f"{os.cpu_count()} cores, load average {one:.1f} / {five:.1f} / {fifteen:.1f} ({when})"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def target(label: str, value: float, limit: float, unit: str, fmt: str = ".1f") -> str:
    """``label: 12.3 % (target <= 15 %): PASS``: at most ``limit``."""
    return f"{label}: {value:{fmt}} {unit} (target <= {limit:g} {unit}): {verdict(value <= limit)}"


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def dir_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


class ThreadCPU:
    """CPU seconds per thread of this process, by kind: ``main`` (the job's event loop),
    ``rocksdb:low`` (RocksDB's compactions), ``rocksdb:high`` (its memtable flushes),
    ``other`` (Python worker threads: the checkpoint writer, ``to_thread`` calls). Sampled from
    /proc/self/task every 0.2 s, so a thread that lives less than that may be missed (Linux
    only; empty elsewhere)."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-thread-cpu")
        self._thread.start()

    def _sample(self) -> None:
        try:
            tids = os.listdir("/proc/self/task")
        except OSError:
            return
        pid = os.getpid()
        for tid in tids:
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue  # ended meanwhile
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(tid) == pid:
                name = "main"
            elif not name.startswith("rocksdb"):
                name = "other"
            self.seen[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / self._tick)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    def stop(self) -> dict[str, float]:
        self._sample()
        self._stop.set()
        out: dict[str, float] = {}
        for name, cpu in self.seen.values():
            out[name] = round(out.get(name, 0.0) + cpu, 2)
        return out


async def run_with_heartbeat(env: Any, name: str) -> tuple[float, float, Any]:
    """Run the job in this loop beside a 5 ms heartbeat: (process CPU seconds, the longest loop
    hold in ms as the loop thread's CPU time between two beats, the job's result)."""
    import asyncio

    worst, stop = [0.0], [False]

    async def beat() -> None:
        last = time.thread_time()
        while not stop[0]:
            await asyncio.sleep(0.005)
            now = time.thread_time()
            worst[0], last = max(worst[0], now - last), now

    heartbeat = asyncio.create_task(beat())
    started = time.process_time()
    result = await (await env.execute_async(name)).get_job_execution_result()
    cpu = time.process_time() - started
    stop[0] = True
    await heartbeat
    return cpu, worst[0] * 1000, result
