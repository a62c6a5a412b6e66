"""A union of event-time streams of unequal length on the Spark engine (spark/watermarks.py).

Each bounded source has its own watermark strategy; the union's watermark is the minimum over
its inputs (Flink's rule), so a source that ends early stops holding the others back but never
pushes them. Spark's watermark is one per query: before the fix it was the maximum event time
of the unioned rows, so the short source's end-of-input row (event time 2255) lifted it at
once and the long source's later records were dropped as late, silently (9 of 60 windows on
Spark). The same job runs on the asyncio engine at parallelism 1 and 4 and on Spark, and the
answers must be equal: a native window, a window on the per-key path (allowed lateness and a
late-data side output), event-time timers, an input without a watermark strategy, and a batch
job whose keys must end after the last input ends.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyspark  # noqa: F401  (installed by scripts/install-test-deps; never skipped)
import pytest
from test_spark_chained import SumPerSecond  # event-time timers: a key's sum per second

from streamflow import KeyedProcessFunction, OutputTag, StreamExecutionEnvironment, WatermarkStrategy
from streamflow.testing import ListSink
from streamflow.windowing import TumblingEventTimeWindows

LATE = OutputTag("late")
NAMES = ["native_window", "per_key_window", "late", "timers", "unstamped_input", "batch_reduce"]


def short_events() -> list[tuple[str, int, int]]:
    """150 records, ts 0..1499 in slight disorder (within the bound): ends long before the other."""
    return [(f"k{i % 3}", 1, i * 10 + (i * 7) % 10) for i in range(150)]


# 600 records (was 2000, which cost 14 micro-batches per query on Spark): with the union's
# per-input watermarks removed (plan.py's hold_back block skipped) the native window, the per-key
# window, the late output and the timers still differ on Spark, and the batch job still fails
# (the long source ends in its second micro-batch of 500), as they did at 2000
LONG = 600


def long_events() -> list[tuple[str, int, int]]:
    """600 records, ts 0..5999, interleaving the short source's timestamps at first."""
    return [(f"k{i % 3}", 100, i * 10 + (i * 3) % 10) for i in range(LONG)]


def _strategy() -> WatermarkStrategy:
    return WatermarkStrategy.for_bounded_out_of_orderness(200).with_timestamp_assigner(lambda e, t: e[2])


class TimerPerKey(KeyedProcessFunction):
    """Records and one event-time timer per key (a union with an input that has no watermark
    strategy: on both engines that input holds the union's watermark until it ends)."""

    def open(self, ctx: Any) -> None:
        from streamflow import ValueStateDescriptor

        self.seen = ctx.get_state(ValueStateDescriptor("seen"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        if not self.seen.value():  # once per key: a timer registered in the past fires at the next
            self.seen.update(True)  # watermark, whose moment differs between the engines
            ctx.timer_service().register_event_time_timer(999)
        yield ("record", value[0], value[1])

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ("timer", ctx.get_current_key(), timestamp)


def _env(engine: str, parallelism: int, records_per_batch: int = 149) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment()
    env.set_engine(engine)
    env.set_parallelism(parallelism)
    # 149: the short source ends in batch 1 (its second chunk: 1 record and its end of input), the
    # long one in batch 4 (each micro-batch costs every query of the job about 0.5 s on Spark)
    env.configure({"execution.spark.records-per-batch": records_per_batch})
    return env


def _timed(env: StreamExecutionEnvironment, data: list) -> Any:
    # one split and one watermark generator per source: its watermark follows its own records
    return env.from_collection(data).set_parallelism(1).assign_timestamps_and_watermarks(_strategy()) \
        .set_parallelism(1)


def streaming_job(engine: str, parallelism: int = 1) -> dict[str, list]:
    env = _env(engine, parallelism)
    sinks = {name: ListSink() for name in NAMES}
    union = _timed(env, short_events()).union(_timed(env, long_events()))
    # translated natively on Spark (groupBy(window, key) in the JVM)
    (union.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(1000))
     .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2]))).sink_to(sinks["native_window"]))
    # the per-key path: allowed lateness and a late-data side output (nothing is late here)
    windowed = (union.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(1000))
                .allowed_lateness(100).side_output_late_data(LATE)
                .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2]))))
    windowed.sink_to(sinks["per_key_window"])
    windowed.get_side_output(LATE).sink_to(sinks["late"])
    union.key_by(lambda e: e[0]).process(SumPerSecond()).sink_to(sinks["timers"])
    # an input with no watermark strategy: the union's watermark waits for its end
    unstamped = env.from_collection([("u", 7, 0)] * 5).set_parallelism(1)
    (_timed(env, long_events()).union(unstamped).key_by(lambda e: e[0] == "u")
     .process(TimerPerKey()).sink_to(sinks["unstamped_input"]))
    env.execute(f"union of unequal sources on {engine} at parallelism {parallelism}")
    return {name: sink.results for name, sink in sinks.items()}


def batch_job(engine: str, parallelism: int = 1) -> list:
    """A batch job: one final result per key, after both inputs ended (not after the first)."""
    from streamflow.execution_mode import RuntimeExecutionMode

    env = _env(engine, parallelism, 500)  # the short source ends in batch 0, the long one in batch 1
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    sink = ListSink()
    (_timed(env, short_events()).union(_timed(env, long_events())).key_by(lambda e: e[0])
     .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2]))).sink_to(sink))
    env.execute(f"batch union on {engine}")
    return sink.results


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, list]]:
    out = {}
    for name, engine, parallelism in (("asyncio-1", "asyncio", 1), ("asyncio-4", "asyncio", 4),
                                      ("spark", "spark", 1)):
        out[name] = streaming_job(engine, parallelism)
        out[name]["batch_reduce"] = batch_job(engine, parallelism)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_union_of_unequal_sources_same_on_both_engines(runs: dict[str, dict[str, list]], name: str) -> None:
    expected = runs["asyncio-1"][name]
    if name != "late":
        assert expected, f"{name}: the asyncio engine produced nothing; the test would prove nothing"
    assert Counter(map(repr, runs["asyncio-4"][name])) == Counter(map(repr, expected)), "asyncio at 4"
    assert Counter(map(repr, runs["spark"][name])) == Counter(map(repr, expected)), "spark"


def test_every_record_of_the_long_source_is_in_a_window(runs: dict[str, dict[str, list]]) -> None:
    """Beside the equality: the long source's records past the short one's end are all counted
    (the failure was silent: the windows after the short source's end were missing)."""
    total = 150 * 1 + LONG * 100
    for engine in ("asyncio-1", "spark"):
        assert sum(r[1] for r in runs[engine]["native_window"]) == total, engine
        assert len(runs[engine]["native_window"]) == 3 * (LONG // 100), engine
        assert runs[engine]["late"] == [], engine



def test_the_watermark_settings_are_the_jobs_own(runs: dict[str, dict[str, list]]) -> None:
    """The union's queries start with the min policy and one global watermark (.watermarks), and
    the session gets its own values back: other jobs in it are not changed."""
    from streamflow.spark.session import get_session
    from streamflow.spark.watermarks import SETTINGS

    session = get_session()
    assert {key: session.conf.get(key, None) for key in SETTINGS} == dict.fromkeys(SETTINGS)
