"""A stateful stage feeding two consumers is computed once on the Spark engine
(streamflow/spark/exchange.py, "Fan-out").

Every Spark query reading a DataFrame runs all of it: before, ``s = keyed.process(f)`` then
``s.sink_to(a)`` and ``s.map(g).sink_to(b)`` ran ``f`` once per sink query, each query with a
keyed state of its own. The answers of a deterministic ``f`` were right at twice the cost, but a
side-effecting ``f`` ran twice per record and a non-deterministic one gave each sink other
results. The functions here count their invocations (a line per call appended to a file, from
whichever process runs them) and put a random token in each output: on both engines there is one
call per record, both sinks of a fan-out get the same tokens, and the deterministic fields are
the asyncio engine's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyspark  # noqa: F401  (installed by scripts/install-test-deps; never skipped)
import pytest
from spark_jvm import driver_env
from test_spark import _env, _written_lines, events

from streamflow import KeyedProcessFunction, OutputTag, ValueStateDescriptor
from streamflow.common import Types
from streamflow.testing import ListSink

HERE = Path(__file__).parent
N = 1500  # 3 micro-batches of 500 records
LATE = OutputTag("odd", Types.PICKLED_BYTE_ARRAY())


def _called(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, b"x\n")
    finally:
        os.close(fd)


class RunningSum(KeyedProcessFunction):
    """The key's running sum with a random token per call; odd sums also to a side output."""

    def __init__(self, calls: str) -> None:
        self.calls = calls

    def open(self, ctx: Any) -> None:
        self.total = ctx.get_state(ValueStateDescriptor("total", Types.INT()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        _called(self.calls)
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        token = uuid.uuid4().hex
        if total % 2:
            yield LATE, (value[0], total, token)
        yield value[0], total, token


class Stamp:
    """A stateless map after a stateful stage, itself fanned out: a random token per call."""

    def __init__(self, calls: str) -> None:
        self.calls = calls

    def __call__(self, r: Any) -> Any:
        _called(self.calls)
        return r[0], r[1], uuid.uuid4().hex


NAMES = ["a", "b", "side", "c", "d"]


def fan_out_job(engine: str, calls: Path) -> dict[str, list]:
    env = _env(engine).set_parallelism(1)
    env.configure({"execution.spark.records-per-batch": 500})
    sinks = {name: ListSink() for name in NAMES}
    data = env.from_collection(events(N))
    # a keyed process function feeding a sink, a map into another sink, and a side output
    sums = data.key_by(lambda e: e[0]).process(RunningSum(str(calls / "process")))
    sums.sink_to(sinks["a"])
    sums.map(lambda r: (r[0], r[1], r[2])).sink_to(sinks["b"])
    sums.get_side_output(LATE).sink_to(sinks["side"])
    # a stateless stage after a keyed reduce, fanned out to two sinks
    stamped = (data.key_by(lambda e: e[0]).reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
               .map(Stamp(str(calls / "stamp"))))
    stamped.sink_to(sinks["c"])
    stamped.filter(lambda r: r[1] % 3 == 0).sink_to(sinks["d"])
    env.execute(f"fan-out on {engine}")
    return {name: sink.results for name, sink in sinks.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, list], dict[str, int]]]:
    out = {}
    for engine in ("asyncio", "spark"):
        calls = tmp_path_factory.mktemp(f"calls-{engine}")
        results = fan_out_job(engine, calls)
        counts = {name: len((calls / name).read_text().splitlines()) for name in ("process", "stamp")}
        out[engine] = (results, counts)
    return out


@pytest.mark.parametrize("engine", ["asyncio", "spark"])
def test_a_fanned_out_stage_runs_once_per_record(runs: Any, engine: str) -> None:
    _results, counts = runs[engine]
    assert counts == {"process": N, "stamp": N}


@pytest.mark.parametrize("engine", ["asyncio", "spark"])
def test_both_sinks_of_a_fan_out_see_the_same_calls(runs: Any, engine: str) -> None:
    results, _counts = runs[engine]
    assert len(results["a"]) == N
    assert Counter(results["a"]) == Counter(results["b"])
    assert Counter(results["side"]) == Counter(r for r in results["a"] if r[1] % 2)
    assert Counter(results["d"]) == Counter(r for r in results["c"] if r[1] % 3 == 0)


@pytest.mark.parametrize("name", NAMES)
def test_fan_out_same_on_both_engines(runs: Any, name: str) -> None:
    def fields(rs: list) -> Counter:
        return Counter((r[0], r[1]) for r in rs)  # (the tokens are random)

    expected = fields(runs["asyncio"][0][name])
    assert expected
    assert fields(runs["spark"][0][name]) == expected


def _run_fanout_kill_job(tmp: Path, hook: str | None, n: int) -> subprocess.CompletedProcess[str]:
    env = driver_env()
    env.pop("STREAMFLOW_SPARK_KILL_AFTER_BATCH", None)
    env.pop("STREAMFLOW_SPARK_KILL_AFTER_EXCHANGE_BATCH", None)
    if hook is not None:
        env[hook] = "1"
    return subprocess.run(
        [sys.executable, str(HERE / "spark_fanout_kill_job.py"), str(tmp / "out"), str(tmp / "chk"), str(n)],
        env=env, capture_output=True, text=True, timeout=600,
    )


def test_driver_killed_in_a_fan_out_resumes_exactly_once_with_one_answer(tmp_path: Path) -> None:
    """tests/spark_fanout_kill_job.py (a keyed running sum with a random token per call, into two
    exactly-once FileSinks, one through a map): SIGKILL the driver right after the fan-out's
    exchange wrote its chunk of micro-batch 1 (not committed: the replay computes other tokens),
    restart on the same checkpoint directory and SIGKILL it after a sink query wrote its
    micro-batch 1, restart again: both sinks hold every running sum exactly once, with the same
    tokens (the replayed exchange batch rewrote its chunk before either sink read it)."""
    n = 1200  # 3 source chunks of 400 records
    first = _run_fanout_kill_job(tmp_path, "STREAMFLOW_SPARK_KILL_AFTER_EXCHANGE_BATCH", n)
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    (exchange,) = (tmp_path / "chk" / "spark" / "exchange").iterdir()
    chunks = sorted(p.name for p in exchange.iterdir() if not p.name.startswith("."))
    assert chunks == ["part-00000000.parquet", "part-00000001.parquet"]  # killed mid-exchange
    killed_chunk = (exchange / "part-00000001.parquet").read_bytes()
    second = _run_fanout_kill_job(tmp_path, "STREAMFLOW_SPARK_KILL_AFTER_BATCH", n)
    assert second.returncode == -signal.SIGKILL, second.stderr[-3000:]
    assert (exchange / "part-00000001.parquet").read_bytes() != killed_chunk  # replayed: new tokens
    third = _run_fanout_kill_job(tmp_path, None, n)
    assert third.returncode == 0, third.stderr[-3000:]
    a = _written_lines(tmp_path / "out" / "a")
    b = _written_lines(tmp_path / "out" / "b")
    assert Counter(line.upper() for line in a) == Counter(b)
    expected, totals = [], {}
    for key, value, _ts in events(n):
        totals[key] = totals.get(key, 0) + value
        expected.append(f"{key},{totals[key]}")
    assert Counter(line.rsplit(",", 1)[0] for line in a) == Counter(expected)
    assert len(set(a)) == n  # (one token per call)
