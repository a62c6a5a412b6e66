"""Instructions a record of the canonical workloads, under cachegrind: a figure the VM's speed cannot move.

``python bench/run.py --instructions`` (or ``python bench/instructions.py [--n N]``) runs each
workload's plain_loop and each form once under ``valgrind --tool=cachegrind --cache-sim=yes`` at
``n`` records and once at ``BASE`` records, in a fresh interpreter each, and prints per record
(the difference of the two runs over ``n - BASE``: interpreter start, imports and first-call
compilation cancel out) the instructions executed, their ratio to plain_loop's, and the
first-level data cache misses of cachegrind's simulated cache beside them.

Why (measured 2026-11-27, helper ``fast``, docs/performance.md): on this shared VM the same code
runs at two speeds, 1.7x apart, in episodes of 0.1-0.5 s, so CPU-time ratios need 21 interleaved
rounds and still move by about +-0.04. Instruction counts do not depend on the machine's speed or
load. They do not see memory stalls either: W2's fast form executes 1.2x plain_loop's
instructions but misses the first-level cache 4-5 times as often (every record lives in a
512-record batch before it is folded, every output in a list before the sink reads it), which is
why its CPU ratio is higher than its instruction ratio. So ``bench/run.py``'s PASS/MISS verdict
stays on CPU time (the targets are about time); this figure says how much of a CPU miss is the
code and how much the machine, and it decides between two versions of the code when CPU time
cannot.

How: the child runs ``bench/run.py --child FORM:WORKLOAD:N`` (the same job functions as the CPU
rounds, the answer checked) with the loop budget multiplied by ``SLOWDOWN`` (valgrind runs the
interpreter about 50x slower; with the native 10 ms budget the job would pause 50x as often per
record as it does natively), and the auto-watermark interval multiplied by it too (200 ms ->
10 s: W3 holds as many records between two periodic watermarks as natively, about 250,000;
before 2026-11-27 21:40 it held 50x fewer under valgrind, so W3's figure left out most of the
memory traffic of holding them; at the default ``n`` the whole run is within one interval, so
W3's figure is best taken at ``--instructions-n 1000000``). The young-collection policy still
times its collections in CPU time, so it collects more often under valgrind than natively: a
few tens of instructions a record of run-to-run wobble on keyed jobs (W2, W3). Needs valgrind;
about 10 minutes at the default ``n`` on 2 cores (two children at a time).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = 1_000  # records of the run subtracted
SLOWDOWN = 50  # valgrind's slow-down of the interpreter, applied to the loop budget and watermark interval
TARGETS = {"fast": 1.2, "idiomatic": 1.5}


def run_child(spec: str) -> None:
    """In the child process under valgrind: run one job (``FORM:WORKLOAD:N``), check its answer."""
    import run  # bench/run.py (on sys.path: this file's directory)

    from streamflow.runtime import execution

    form, name, n = spec.split(":")
    config = execution.RuntimeConfig
    init = config.__init__

    def slow_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if self.loop_budget_ms is not None:
            self.loop_budget_ms *= SLOWDOWN

    config.__init__ = slow_init  # type: ignore[method-assign]
    # the periodic watermark is processing time too: natively, W3 holds the records of 200 ms
    # (about a quarter of a million) between two watermarks; at 200 ms under valgrind it would
    # hold 50x fewer, and the memory traffic of holding them would not be counted (0: disabled)
    import streamflow as sf

    env_class = sf.StreamExecutionEnvironment
    env_init, env_set = env_class.__init__, env_class.set_auto_watermark_interval

    def scaled_init(self: Any, *args: Any, **kwargs: Any) -> None:
        env_init(self, *args, **kwargs)
        self._auto_watermark_interval_ms *= SLOWDOWN

    def scaled_set(self: Any, interval: Any) -> Any:
        env_set(self, interval)
        self._auto_watermark_interval_ms *= SLOWDOWN
        return self

    env_class.__init__ = scaled_init  # type: ignore[method-assign]
    env_class.set_auto_watermark_interval = scaled_set  # type: ignore[method-assign]
    job = getattr(run.plain_loop, name) if form == "plain" else run.FORMS[form][name]
    answer = job(int(n))
    if callable(answer):
        answer = answer()
    if int(n) == 1_000_000 and answer != run.EXPECTED_1M[name]:
        raise SystemExit(f"{spec}: wrong answer {answer}")


def cachegrind(form: str, name: str, n: int) -> dict[str, int]:
    """cachegrind's totals (Ir, D1mr, D1mw, ...) of one child run."""
    fd, out = tempfile.mkstemp(prefix="cg.", suffix=".out")
    os.close(fd)
    try:
        cmd = [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=yes",
            f"--cachegrind-out-file={out}",
            sys.executable,
            os.path.join(HERE, "run.py"),
            "--child",
            f"{form}:{name}:{n}",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"cachegrind of {form} {name} n={n} failed: {done.stderr[-2000:]}")
        events: list[str] = []
        with open(out) as f:
            for line in f:
                if line.startswith("events:"):
                    events = line.split()[1:]
                elif line.startswith("summary:"):
                    return dict(zip(events, map(int, line.split()[1:]), strict=True))
        raise RuntimeError(f"cachegrind of {form} {name} n={n}: no summary in {out}")
    finally:
        os.unlink(out)


def per_record(form: str, name: str, n: int) -> tuple[float, float]:
    """(instructions, D1 misses) a record: the run at ``n`` minus the run at ``BASE``."""
    big, small = cachegrind(form, name, n), cachegrind(form, name, BASE)
    ir = (big["Ir"] - small["Ir"]) / (n - BASE)
    d1 = (big["D1mr"] + big["D1mw"] - small["D1mr"] - small["D1mw"]) / (n - BASE)
    return ir, d1


def instructions_main(n: int, workloads: list[str], forms: tuple[str, ...]) -> int:
    if shutil.which("valgrind") is None:
        print("instructions: valgrind not found (apt-get install valgrind); no instruction counts")
        return 1
    print(
        f"instructions a record under cachegrind (n={n:,} minus n={BASE:,}, loop budget x{SLOWDOWN}); "
        "ratio to plain_loop's;\nD1 miss: first-level data cache misses a record (simulated); "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    head = f"{'workload':8} {'form':9} {'instr/rec':>9} {'ratio':>6} {'target':>7}  {'by instr':8}"
    print(f"{head} {'D1 miss/rec':>11}")
    jobs = [(name, form) for name in workloads for form in ("plain", *forms)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # two cores: two valgrind children at a time
        results = dict(zip(jobs, pool.map(lambda job: per_record(job[1], job[0], n), jobs), strict=True))
    for name in workloads:
        plain_ir, plain_d1 = results[(name, "plain")]
        print(f"{name:8} {'plain':9} {plain_ir:>9,.0f} {1:>5.2f}x {'':>7}  {'':8} {plain_d1:>11.1f}")
        for form in forms:
            ir, d1 = results[(name, form)]
            ratio = ir / plain_ir
            verdict = "PASS" if ratio <= TARGETS[form] else "MISS"
            target = TARGETS[form]
            print(f"{name:8} {form:9} {ir:>9,.0f} {ratio:>5.2f}x {target:>6.1f}x  {verdict:8} {d1:>11.1f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=101_000)
    ap.add_argument("--workloads", default="w1,w2,w3")
    ap.add_argument("--form", choices=("fast", "idiomatic", "both"), default="both")
    a = ap.parse_args()
    sys.path.insert(0, HERE)
    chosen = ("fast", "idiomatic") if a.form == "both" else (a.form,)
    raise SystemExit(instructions_main(a.n, a.workloads.split(","), chosen))
