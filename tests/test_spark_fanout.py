"""A stateful stage, or a stateless one running Python, feeding two consumers is computed once on
the Spark engine (streamflow/spark/exchange.py, "Fan-out").

Every Spark query reading a DataFrame runs all of it: before, ``s = keyed.process(f)`` then
``s.sink_to(a)`` and ``s.map(g).sink_to(b)`` ran ``f`` once per sink query, each query with a
keyed state of its own. The answers of a deterministic ``f`` were right at twice the cost, but a
side-effecting ``f`` ran twice per record and a non-deterministic one gave each sink other
results. The same held for a stateless stage running Python (the counting map before a fan-out
here ran 3 times per record, the process function after it twice, until 2026-11-29 evening).
The functions here count their invocations (a line per call appended to a file, from whichever
process runs them) and put a random token in each output: on both engines there is one call per
record, both sinks of a fan-out get the same tokens, and the deterministic fields are the
asyncio engine's.
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
from kill_moments import kill_rng
from spark_jvm import driver_env
from test_spark import _env, _spark_log, _strategy, _written_lines, events

from streamflow import KeyedProcessFunction, OutputTag, ProcessFunction, ValueStateDescriptor
from streamflow.common import Types
from streamflow.testing import ListSink
from streamflow.windowing import TumblingEventTimeWindows

HERE = Path(__file__).parent
N = 600  # one micro-batch (the kill test's job runs three)
LATE = OutputTag("odd", Types.PICKLED_BYTE_ARRAY())
ODD = OutputTag("odd-values", Types.PICKLED_BYTE_ARRAY())


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


class Count:
    """A stateless map before a fan-out, counting its calls (a side effect): the record unchanged."""

    def __init__(self, calls: str) -> None:
        self.calls = calls

    def __call__(self, r: Any) -> Any:
        _called(self.calls)
        return r


class Split(ProcessFunction):
    """A stateless process function counting its calls, every record to its main output and the
    odd values also to a side output, each feeding a sink."""

    def __init__(self, calls: str) -> None:
        self.calls = calls

    def process_element(self, value: Any, ctx: Any) -> Any:
        _called(self.calls)
        if value[1] % 2:
            yield ODD, value
        yield value


NAMES = ["a", "b", "side", "c", "d", "e", "odd"]


def fan_out_job(engine: str, calls: Path) -> dict[str, list]:
    env = _env(engine).set_parallelism(1)
    sinks = {name: ListSink() for name in NAMES}
    data = env.from_collection(events(N))
    # a counting stateless map fanned out: into the keyed stage below and a stateless process
    # function whose main output and side output feed a sink each (itself a fan-out)
    counted = data.map(Count(str(calls / "map")))
    split = counted.process(Split(str(calls / "split")))
    split.sink_to(sinks["e"])
    split.get_side_output(ODD).sink_to(sinks["odd"])
    # a keyed process function feeding a sink, a map into another sink, and a side output
    sums = counted.key_by(lambda e: e[0]).process(RunningSum(str(calls / "process")))
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


COUNTED = ("map", "split", "process", "stamp")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, list], dict[str, int]]]:
    out = {}
    for engine in ("asyncio", "spark"):
        calls = tmp_path_factory.mktemp(f"calls-{engine}")
        results = fan_out_job(engine, calls)
        counts = {name: len((calls / name).read_text().splitlines()) for name in COUNTED}
        out[engine] = (results, counts)
    return out


@pytest.mark.parametrize("engine", ["asyncio", "spark"])
def test_a_fanned_out_stage_runs_once_per_record(runs: Any, engine: str) -> None:
    _results, counts = runs[engine]
    assert counts == dict.fromkeys(COUNTED, N)


@pytest.mark.parametrize("engine", ["asyncio", "spark"])
def test_both_sinks_of_a_fan_out_see_the_same_calls(runs: Any, engine: str) -> None:
    results, _counts = runs[engine]
    assert len(results["a"]) == N
    assert Counter(results["a"]) == Counter(results["b"])
    assert Counter(results["side"]) == Counter(r for r in results["a"] if r[1] % 2)
    assert Counter(results["d"]) == Counter(r for r in results["c"] if r[1] % 3 == 0)
    assert Counter(results["e"]) == Counter(events(N))
    assert Counter(results["odd"]) == Counter(r for r in results["e"] if r[1] % 2)


@pytest.mark.parametrize("name", NAMES)
def test_fan_out_same_on_both_engines(runs: Any, name: str) -> None:
    def fields(rs: list) -> Counter:
        return Counter((r[0], r[1]) for r in rs)  # (the tokens are random)

    expected = fields(runs["asyncio"][0][name])
    assert expected
    assert fields(runs["spark"][0][name]) == expected


def _killed_fanout_job(tmp: Path, hook: str, batch: int, n: int,
                       shape: str) -> subprocess.CompletedProcess[str]:
    """tests/spark_fanout_kill_job.py in a driver of its own, which SIGKILLs itself after the
    micro-batch ``batch`` of the query ``hook`` names."""
    env = driver_env()
    env.pop("STREAMFLOW_SPARK_KILL_AFTER_BATCH", None)
    env.pop("STREAMFLOW_SPARK_KILL_AFTER_EXCHANGE_BATCH", None)
    env[hook] = str(batch)
    return subprocess.run(
        [sys.executable, str(HERE / "spark_fanout_kill_job.py"), str(tmp / "out"), str(tmp / "chk"), str(n),
         shape],
        env=env, capture_output=True, text=True, timeout=600,
    )


# the kill points: right after the fan-out's exchange wrote its chunk K (not committed: the replay
# computes other tokens), or after a sink query wrote its micro-batch K (the exchange had ended)
KILL_POINTS = [(hook, batch) for hook in ("STREAMFLOW_SPARK_KILL_AFTER_EXCHANGE_BATCH",
                                         "STREAMFLOW_SPARK_KILL_AFTER_BATCH") for batch in (0, 1)]
SHAPES = ("stateful", "stateless")  # the fanned-out stage: a keyed running sum, or a stateless map


def test_driver_killed_in_a_fan_out_resumes_exactly_once_with_one_answer(tmp_path: Path) -> None:
    """tests/spark_fanout_kill_job.py (a keyed running sum, or a stateless map: ``SHAPES``, with a
    random token per call, into two exactly-once FileSinks, one through a map): SIGKILL the driver
    at one of ``KILL_POINTS``, the shape and the point picked per run by a printed seed
    (tests/kill_moments.py; ``STREAMFLOW_SEED`` replays it), then resume on the same checkpoint
    directory (in this process's Spark session: a driver that never saw the job, as a restarted
    one): both sinks hold every output (running sum or value) exactly once, with the same tokens
    (a replayed exchange batch rewrote its chunk before either sink read it). The chained
    driver-kill test (tests/test_spark_chained.py) kills at both points of one exchange in one
    restart sequence."""
    import spark_fanout_kill_job as job

    rng = kill_rng("spark-fan-out")
    hook, batch = rng.choice(KILL_POINTS)
    shape = rng.choice(SHAPES)
    print(f"the {shape} fan-out killed at {hook}={batch}")
    n = 3 * job.PER_BATCH  # 3 source chunks, the last ending with end of input
    killed = _killed_fanout_job(tmp_path, hook, batch, n, shape)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    (exchange,) = (tmp_path / "chk" / "spark" / "exchange").iterdir()
    chunks = sorted(p.name for p in exchange.iterdir() if not p.name.startswith("."))
    killed_chunk = (exchange / chunks[-1]).read_bytes()
    chk, query = tmp_path / "chk", f"exchange-{exchange.name}"
    logs = {q: (_spark_log(chk, q, "offsets"), _spark_log(chk, q, "commits")) for q in (query, "a", "b")}
    print(f"killed with Spark's (offsets, commits) logs {logs}")
    written: dict[Path, bytes] = {}
    if hook == "STREAMFLOW_SPARK_KILL_AFTER_EXCHANGE_BATCH":
        assert chunks == [f"part-{k:08d}.parquet" for k in range(batch + 1)]  # killed mid-exchange
        # inside the exchange query's micro-batch ``batch``: planned, its chunk written, not
        # committed; the sink queries had not started
        assert logs == {query: (list(range(batch + 1)), list(range(batch))), "a": ([], []), "b": ([], [])}
    else:
        assert chunks[-1].endswith("-eof.parquet"), chunks  # the exchange had ended
        assert logs[query][0] == logs[query][1]
        # inside micro-batch ``batch`` of a sink query (the first to reach it: either kills
        # there): planned, its part file written, not committed; neither query committed it
        killer = [q for q in ("a", "b") if logs[q][0][-1:] == [batch]]
        assert killer and all(logs[q][1] == list(range(len(logs[q][1]))) and len(logs[q][1]) <= batch
                              for q in ("a", "b")), logs
        assert logs[killer[0]][1] == list(range(batch)), logs
        written = {f: f.read_bytes() for q in ("a", "b") for f in (tmp_path / "out" / q).iterdir()
                   if not f.name.startswith(".")}
        assert any(f.parent.name == killer[0] and f.name.endswith(f"{batch:08d}") for f in written), written
    job.run(str(tmp_path / "out"), str(tmp_path / "chk"), n, shape)
    assert {f: f.read_bytes() for f in written} == written  # replayed from the same chunks: same bytes
    if hook == "STREAMFLOW_SPARK_KILL_AFTER_EXCHANGE_BATCH":
        assert (exchange / chunks[-1]).read_bytes() != killed_chunk  # replayed: new tokens
    else:
        assert (exchange / chunks[-1]).read_bytes() == killed_chunk  # committed: not recomputed
    a = _written_lines(tmp_path / "out" / "a")
    b = _written_lines(tmp_path / "out" / "b")
    assert Counter(line.upper() for line in a) == Counter(b)
    expected, totals = [], {}
    for key, value, _ts in job.events(n):
        totals[key] = totals.get(key, 0) + value
        expected.append(f"{key},{totals[key] if shape == 'stateful' else value}")
    assert Counter(line.rsplit(",", 1)[0] for line in a) == Counter(expected)
    assert len(set(a)) == n  # (one token per call)


def _stamp(e: Any) -> Any:  # a Python stage on Spark (a call: not recognised as an expression)
    return (e[0], int(str(e[1])), e[2])


def _no_fan_out(data: Any) -> None:
    data.map(_stamp).filter(lambda e: e[1] > 3).sink_to(ListSink())


def _map_two_sinks(data: Any) -> None:
    s = data.map(_stamp).uid("m")
    s.sink_to(ListSink())
    s.filter(lambda e: e[1] > 3).sink_to(ListSink())


def _fused_then_fan_out(data: Any) -> None:  # the chain's last operator feeds two paths
    s = data.map(_stamp).uid("m1").map(_stamp).uid("m2")
    s.sink_to(ListSink())
    s.map(_stamp).sink_to(ListSink())


def _native_after_python(data: Any) -> None:  # a recognised stage after a Python one feeds two
    s = data.map(_stamp).uid("m").map(lambda e: (e[0], e[1] * 2, e[2])).uid("native")
    s.sink_to(ListSink())
    s.sink_to(ListSink())


def _side_output(data: Any) -> None:
    s = data.process(Split("/dev/null")).uid("split")
    s.sink_to(ListSink())
    s.get_side_output(ODD).sink_to(ListSink())


def _source_fan_out(data: Any) -> None:  # the source's chunks are read by each query
    data.sink_to(ListSink())
    data.map(_stamp).sink_to(ListSink())


def _union_fan_out(data: Any) -> None:  # a union's watermark feeding windows: the minimum is kept
    timed = [data.assign_timestamps_and_watermarks(_strategy()),
             data.filter(lambda e: e[1] > 3).assign_timestamps_and_watermarks(_strategy())]
    s = timed[0].union(timed[1]).map(_stamp).uid("m")
    for size in (1000, 2000):
        s.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(size)).reduce(
            lambda a, b: (a[0], a[1] + b[1], b[2])).sink_to(ListSink())


def _native_fan_out(data: Any) -> None:  # Spark expressions only: pure, recomputed per query
    s = data.map(lambda e: (e[0], e[1] * 2, e[2]))
    s.sink_to(ListSink())
    s.filter(lambda e: e[1] > 3).sink_to(ListSink())


@pytest.mark.parametrize(("build", "exchanged"), [
    (_no_fan_out, []), (_map_two_sinks, ["m"]), (_fused_then_fan_out, ["m2"]),
    (_native_after_python, ["native"]), (_side_output, ["split"]), (_source_fan_out, []),
    (_native_fan_out, []), (_union_fan_out, []),
])
def test_where_a_stateless_fan_out_is_exchanged(build: Any, exchanged: list[str], tmp_path: Path) -> None:
    """The boundary (streamflow/spark/exchange.py, exchanged_output): the first operator whose
    output feeds more than one path (main or side output) is exchanged when its query would run a
    user function in Python; a job without a fan-out, a source's fan-out and a fan-out of Spark
    expressions alone are translated as before; so is a fan-out whose watermark is the minimum of
    a union's inputs with windows downstream (the chunks would give them the fastest input's).
    Translation only: no query runs."""
    from streamflow.spark.plan import Translation
    from streamflow.spark.session import get_session
    from streamflow.state.codec import MsgpackCodec

    env = _env("spark")
    build(env.from_collection(events(20)))
    plan = Translation(get_session(), env.get_job_graph(), MsgpackCodec(), str(tmp_path), 1000)
    plan.sink_streams()
    assert [e.uid for e in plan.exchanges] == exchanged
