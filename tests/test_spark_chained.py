"""Two or more stateful stages in one job on the Spark engine (streamflow/spark/exchange.py).

Spark runs one ``applyInPandasWithState`` per streaming query and refuses a second one when
the query starts; the translation writes a stateful stage's output by a query of its own and
the next stateful stage reads it. Each job here runs on the asyncio engine at parallelism 1
and 4 and on Spark (the session the other Spark tests use), and the answers must be equal.
The window-after-window jobs are order-sensitive (the first element's field, the elements'
list): a window's outputs carry three-position orders ``[TIMER_ORDER, max_timestamp, j]``,
whose first position is the same for every output; a native window downstream that kept only
the first position ordered its elements arbitrarily.
"""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pyspark  # noqa: F401  (installed by scripts/install-test-deps; never skipped)
import pytest
from test_spark import _run_kill_job, _spark_log, _written_lines

from streamflow import (
    KeyedProcessFunction,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    WatermarkStrategy,
)
from streamflow.testing import ListSink
from streamflow.windowing import SlidingEventTimeWindows, TumblingEventTimeWindows

N = 3000


def events(n: int) -> list[tuple[str, int, int]]:
    perm = [(j * 37) % 100 for j in range(100)]
    return [(f"k{i % 10}", i % 97, (i // 100) * 100 + perm[i % 100]) for i in range(n)]


class SumPerSecond(KeyedProcessFunction):
    """Event-time timers after an exchange: the key's sum of each second, emitted at its end
    (whatever arrives before or after the watermark passes: the same answer)."""

    def open(self, ctx: Any) -> None:
        from streamflow import ValueStateDescriptor

        self.sums = ctx.get_state(ValueStateDescriptor("sums"))

    def process_element(self, value: Any, ctx: Any) -> None:
        end = ctx.timestamp() // 1000 * 1000 + 999
        sums = dict(self.sums.value() or {})
        sums[end] = sums.get(end, 0) + value[1]
        self.sums.update(sums)
        ctx.timer_service().register_event_time_timer(end)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        sums = dict(self.sums.value())
        total = sums.pop(timestamp)
        self.sums.update(sums)
        yield (ctx.get_current_key(), timestamp, total)


class Ends(ProcessWindowFunction):
    """Order-sensitive: the elements' timestamps in the order the window got them."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return [(key, context.window().end, [e[2] for e in elements])]


NAMES = ["reduce_reduce", "reduce_timers", "window_window_first", "window_window_list", "window_rekeyed",
         "union_of_keyed", "window_then_rolling"]


def chained(engine: str, parallelism: int = 1) -> dict[str, list]:
    env = StreamExecutionEnvironment()
    env.set_engine(engine)
    env.set_parallelism(parallelism)
    env.configure({"execution.spark.records-per-batch": 1000})  # several micro-batches
    sinks = {name: ListSink() for name in NAMES}
    data = events(N)
    source = env.from_collection(data).set_parallelism(1)  # one split: per-key input order is kept
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(200).with_timestamp_assigner(lambda e, t: e[2])
    timed = source.assign_timestamps_and_watermarks(strategy).set_parallelism(1)
    running = source.key_by(lambda e: e[0]).reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
    # a rolling reduce, then a per-key reduce of another key (Spark: two applyInPandasWithState)
    (running.key_by(lambda r: r[0]).reduce(lambda a, b: (a[0], max(a[1], b[1]), b[2]))
     .sink_to(sinks["reduce_reduce"]))
    # a rolling reduce with timestamps, then event-time timers of another key after the exchange
    (timed.key_by(lambda e: e[0]).reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
     .key_by(lambda r: r[1] % 4).process(SumPerSecond()).sink_to(sinks["reduce_timers"]))
    # a native window (Spark aggregates), then windows of the same key: the first element's field
    # and the elements' order must be the asyncio engine's
    per_second = (timed.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(1000))
                  .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2]))))
    (per_second.key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(3000))
     .reduce(lambda a, b: (a[0], a[1] + b[1], a[2])).sink_to(sinks["window_window_first"]))
    (per_second.key_by(lambda r: r[0]).window(SlidingEventTimeWindows.of(4000, 2000))
     .process(Ends()).sink_to(sinks["window_window_list"]))
    # another key downstream: outputs of several keys meet (an order-insensitive fold)
    (per_second.key_by(lambda r: r[1] % 4).window(TumblingEventTimeWindows.of(5000))
     .reduce(lambda a, b: (min(a[0], b[0]), a[1] + b[1], max(a[2], b[2]))).sink_to(sinks["window_rekeyed"]))
    # two keyed stages unioned into one sink
    other = env.from_collection(data[:1500]).set_parallelism(1).key_by(lambda e: e[1] % 5).reduce(
        lambda a, b: (a[0], a[1] + b[1], b[2]))
    running.union(other).sink_to(sinks["union_of_keyed"])
    # a window, then a rolling sum of its results per key (typed columns, three-position orders)
    per_second.key_by(lambda r: r[0]).sum(1).sink_to(sinks["window_then_rolling"])
    env.execute(f"chained stateful stages on {engine} at parallelism {parallelism}")
    return {name: sink.results for name, sink in sinks.items()}


def batch_job(engine: str, parallelism: int = 1) -> list:
    """A batch job (RuntimeExecutionMode.BATCH): each keyed stage emits its final results at the
    end of its input, after the end-of-input row went by (the exchange appends that row last)."""
    from streamflow.execution_mode import RuntimeExecutionMode

    env = StreamExecutionEnvironment()
    env.set_engine(engine)
    env.set_parallelism(parallelism)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.configure({"execution.spark.records-per-batch": 1000})
    sink = ListSink()
    (env.from_collection(events(N)).key_by(lambda e: e[0]).reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
     .key_by(lambda r: r[1] % 4).reduce(lambda a, b: (min(a[0], b[0]), a[1] + b[1], max(a[2], b[2])))
     .sink_to(sink))
    env.execute(f"chained batch job on {engine}")
    return sink.results


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, list]]:
    out = {"asyncio-1": chained("asyncio"), "asyncio-4": chained("asyncio", 4), "spark": chained("spark")}
    for engine, results in (("asyncio-1", batch_job("asyncio")), ("asyncio-4", batch_job("asyncio", 4)),
                            ("spark", batch_job("spark"))):
        out[engine]["batch_reduce_reduce"] = results
    return out


@pytest.mark.parametrize("name", [*NAMES, "batch_reduce_reduce"])
def test_chained_stateful_stages_same_on_both_engines(runs: dict[str, dict[str, list]], name: str) -> None:
    expected = runs["asyncio-1"][name]
    assert expected, f"{name}: the asyncio engine produced nothing; the test would prove nothing"
    at_4 = runs["asyncio-4"][name]
    assert Counter(map(repr, at_4)) == Counter(map(repr, expected)), "asyncio at parallelism 4"
    assert Counter(map(repr, runs["spark"][name])) == Counter(map(repr, expected)), "spark"


def test_window_after_window_keeps_element_order(runs: dict[str, dict[str, list]]) -> None:
    """Beside the equality: the elements' list is in time order and the first element's field is
    the earliest, so a wrong order would show (not only a wrong multiset)."""
    for _key, _end, ends in runs["spark"]["window_window_list"]:
        assert ends == sorted(ends)
    firsts = [r[2] for r in runs["spark"]["window_window_first"]]  # in the first second of 3
    assert firsts and all(ts // 1000 % 3 == 0 for ts in firsts)


def _finish_kill_job_here(tmp: Path, n: int, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``streamflow run --engine spark tests/spark_kill_job.py`` as _run_kill_job runs it, without
    a fault hook, through the CLI's main() in this process: its Spark session is a driver that never
    saw the job (as a restarted one) with no JVM to start and its Python workers up, instead of a
    subprocess driver's 15-25 s. (exit code, what it wrote to stderr); the CLI's logging settings
    are restored."""
    import logging

    from streamflow.cli import main

    root, ours = logging.getLogger(), logging.getLogger("streamflow")
    handlers, level = list(root.handlers), ours.level
    capsys.readouterr()
    try:
        code = main(["run", "--engine", "spark", str(Path(__file__).parent / "spark_kill_job.py"),
                     str(tmp / "out"), str(tmp / "chk"), str(n)])
    finally:
        root.handlers[:] = handlers
        ours.setLevel(level)
    return code, capsys.readouterr().err


def test_driver_killed_in_an_exchange_and_in_the_next_query_resumes_exactly_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A running sum times a broadcast factor, then a running sum of another key (an exchange
    between them), into an exactly-once FileSink (tests/spark_kill_job.py): SIGKILL the driver
    right after the exchange wrote its chunk of micro-batch 1 (before Spark committed the batch;
    the downstream query has not started), restart on the same checkpoint directory and SIGKILL
    it after the sink wrote micro-batch 1 of the downstream query (before Spark committed it),
    restart again: every output of the second running sum is written exactly once.

    The first restart replays the broadcast stage's micro-batch 1, whose factor arrived in
    micro-batch 0 only: it reads it from the restored broadcast state (a wrong or missing factor
    changes every sum). The second replays the sink's batch. This test also covers what
    test_spark.py's test_driver_killed_mid_run_resumes_exactly_once proved with two driver runs
    of its own (a batch replayed after its output was written, the broadcast state restored), and
    what test_spark.py's test_streamflow_run_engine_spark_runs_the_unchanged_script proved with a
    driver of its own: every run is ``streamflow run --engine spark`` on a script that names no
    engine and enables checkpoints, and the last one finishes with the expected outputs (the last
    one in this process's Spark session: _finish_kill_job_here)."""
    n = 1200  # 400 records per micro-batch: 3 source chunks, the last ending with end of input
    chk = tmp_path / "chk"
    first = _run_kill_job(tmp_path, 1, "STREAMFLOW_SPARK_KILL_AFTER_EXCHANGE_BATCH", n)
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    (exchange,) = (chk / "spark" / "exchange").iterdir()
    query = f"exchange-{exchange.name}"
    chunks = sorted(p.name for p in exchange.iterdir() if not p.name.startswith("."))
    assert chunks == ["part-00000000.parquet", "part-00000001.parquet"]  # killed mid-exchange
    # where the kill landed: inside micro-batch 1 of the exchange's query, after its chunk was
    # written and before Spark committed it (batch 0 committed, 1 planned); the downstream
    # query had not started
    assert (_spark_log(chk, query, "offsets"), _spark_log(chk, query, "commits")) == ([0, 1], [0])
    assert _spark_log(chk, "sums", "offsets") == []
    assert not (tmp_path / "out").exists() or _written_lines(tmp_path / "out") == []
    second = _run_kill_job(tmp_path, 1, "STREAMFLOW_SPARK_KILL_AFTER_BATCH", n)
    assert second.returncode == -signal.SIGKILL, second.stderr[-3000:]
    assert any(p.name.endswith("-eof.parquet") for p in exchange.iterdir())  # the exchange had ended
    assert _spark_log(chk, query, "commits") == _spark_log(chk, query, "offsets")
    # inside micro-batch 1 of the sink's query: its part file written, Spark's commit not
    assert (_spark_log(chk, "sums", "offsets"), _spark_log(chk, "sums", "commits")) == ([0, 1], [0])
    out = tmp_path / "out"
    killed = {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".")}
    assert sorted(name[-8:] for name in killed) == ["00000000", "00000001"], sorted(killed)
    code, stderr = _finish_kill_job_here(tmp_path, n, capsys)
    assert code == 0, stderr[-3000:]
    assert "job status: FINISHED" in stderr, stderr[-3000:]  # through `streamflow run`
    # the resumed run replayed batch 1 (the same file, the same bytes) and ran the rest
    assert {name: (out / name).read_bytes() for name in killed} == killed
    assert _spark_log(chk, "sums", "commits")[-1] > 1
    expected = []
    firsts: dict[str, int] = {}
    seconds: dict[str, int] = {}
    for key, value, _ts in events(n):
        firsts[key] = firsts.get(key, 0) + value
        scaled = firsts[key] * 3  # spark_kill_job.FACTOR
        m = f"m{scaled % 4}"
        seconds[m] = seconds.get(m, 0) + scaled
        expected.append(f"{m},{seconds[m]}")
    assert Counter(_written_lines(tmp_path / "out")) == Counter(expected)
