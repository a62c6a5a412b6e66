"""Where the event loop is held: a stack sampler for the benches (``--watch`` in bench/embedded.py).

A callback in the loop stamps the time every millisecond; a sampler thread looks every
millisecond and, while the stamp is older than ``threshold_ms``, records the loop thread's Python
stack (``sys._current_frames``). A *hold* is one such episode: its length is the gap between two
stamps, its samples say what ran. The garbage collector's time in a hold is recorded too (a
``gc.callbacks`` hook, with each collection over 2 ms), since it has no Python frame.

The sampler needs the GIL to look: while the loop thread runs Python code it gets it at the
switch interval (set to 0.5 ms while watching), but a single long C call (a dict resize,
``list()`` of a million keys, a C codec) is seen only after it returns, as the frame that
called it. ``report()`` lists the longest holds with the frames seen most in each and, over all
holds, the functions by how many samples they were on the stack (inclusive) and on top.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import sys
import threading
import time
from typing import Any

Stack = tuple[str, ...]


def _frame_name(code: Any, lineno: int) -> str:
    path = code.co_filename
    short = path.rsplit("/streamflow/", 1)[-1] if "/streamflow/" in path else path.rsplit("/", 1)[-1]
    return f"{short}:{code.co_name}:{lineno}"


class LoopWatch:
    def __init__(self, threshold_ms: float = 15.0, depth: int = 14) -> None:
        self.threshold = threshold_ms / 1000.0
        self.depth = depth
        self.last = time.perf_counter()
        self.last_cpu = time.thread_time()
        self.holds: list[tuple[float, list[Stack], float, float]] = []  # (length s, samples, gc s, CPU s)
        self._samples: list[Stack] = []
        self.gc_long: list[tuple[int, float, int]] = []  # collections over 2 ms: (generation, s, collected)
        self._gc_in_hold = 0.0
        self._gc_start = 0.0
        self._gc_counts = (0, 0, 0)
        self._gc_cpu_start = 0.0
        self._stop = threading.Event()
        self._loop_thread = threading.get_ident()
        self._thread = threading.Thread(target=self._run, name="loop-watch", daemon=True)
        self._lock = threading.Lock()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._old_switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)
        gc.callbacks.append(self._on_gc)
        loop.call_soon(self._stamp)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        gc.callbacks.remove(self._on_gc)
        sys.setswitchinterval(self._old_switch)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
            self._gc_cpu_start = time.thread_time()
            self._gc_counts = gc.get_count()
        else:
            took = time.perf_counter() - self._gc_start
            self._gc_in_hold += took
            if took > 0.002:
                self.gc_long.append((info["generation"], took, info.get("collected", 0)))
                if took > 0.02:
                    cpu = time.thread_time() - self._gc_cpu_start
                    print(
                        f"loop-watch: generation {info['generation']} collection: {took * 1000:.0f} ms wall, "
                        f"{cpu * 1000:.1f} ms CPU, counts at its start {self._gc_counts}, "
                        f"collected {info.get('collected')}",
                        file=sys.stderr,
                    )

    def _stamp(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        gap = now - self.last
        with self._lock:
            if gap > self.threshold:
                self.holds.append((gap, self._samples, self._gc_in_hold, cpu - self.last_cpu))
            self._samples = []
            self._gc_in_hold = 0.0
            self.last, self.last_cpu = now, cpu
        if not self._stop.is_set():
            self._loop.call_later(0.001, self._stamp)

    def _run(self) -> None:
        while not self._stop.is_set():
            time.sleep(0.001)
            if time.perf_counter() - self.last <= self.threshold:
                continue
            frame = sys._current_frames().get(self._loop_thread)
            stack: list[str] = []
            while frame is not None and len(stack) < self.depth:
                stack.append(_frame_name(frame.f_code, frame.f_lineno))
                frame = frame.f_back
            with self._lock:
                self._samples.append(tuple(stack))

    def report(self, top: int = 8, out: Any = sys.stderr) -> None:
        holds = sorted(self.holds, key=lambda h: -h[3])  # by CPU time: the load does not inflate it
        n_cpu = sum(1 for h in holds if h[3] > self.threshold)
        print(
            f"loop-watch: {len(holds)} holds over {self.threshold * 1000:.0f} ms wall, "
            f"{n_cpu} of them in CPU time",
            file=out,
        )
        inclusive: collections.Counter[str] = collections.Counter()
        leaf: collections.Counter[str] = collections.Counter()
        for _length, samples, _gc, _cpu in holds:
            for s in samples:
                leaf[s[0] if s else "?"] += 1
                inclusive.update(set(s))
        by_wall = sorted(self.holds, key=lambda h: -h[0])[: top // 2]
        for length, samples, gc_s, cpu in holds[:top] + [h for h in by_wall if h not in holds[:top]]:
            common = collections.Counter(s[:4] for s in samples).most_common(2)
            print(
                f"  hold {length * 1000:6.1f} ms wall, {cpu * 1000:6.1f} ms CPU, gc {gc_s * 1000:5.1f} ms, "
                f"{len(samples)} samples",
                file=out,
            )
            for stack, n in common:
                print(f"    {n:3d}x " + " < ".join(stack), file=out)
        gcs = collections.Counter((g, round(t * 1000 / 5) * 5) for g, t, _ in self.gc_long)
        print(f"  collections over 2 ms (generation, ~ms): {sorted(gcs.items())}", file=out)
        print("  on top of the stack (samples):", file=out)
        for name, n in leaf.most_common(15):
            print(f"    {n:5d} {name}", file=out)
        print("  on the stack (samples, inclusive):", file=out)
        for name, n in inclusive.most_common(25):
            print(f"    {n:5d} {name}", file=out)
