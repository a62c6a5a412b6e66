"""The Spark engine: the same job objects on both engines give the same answers.

One SparkSession for the whole test process (the first Spark test starts it; later ones
reuse it). The workloads are shared/bench/WORKLOADS.md's, at a small N.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from spark_jvm import driver_env

from streamflow import (
    AggregateFunction,
    KeyedProcessFunction,
    OutputTag,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    WatermarkStrategy,
)
from streamflow.common import Types
from streamflow.functions import SinkFunction
from streamflow.testing import ListSink
from streamflow.windowing import EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows

HERE = Path(__file__).parent
N = 3000


def events(n: int) -> list[tuple[str, int, int]]:
    perm = [(j * 37) % 100 for j in range(100)]
    return [(f"k{i % 10}", i % 97, (i // 100) * 100 + perm[i % 100]) for i in range(n)]


def _env(engine: str) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment()
    env.set_engine(engine)
    env.configure({"execution.spark.records-per-batch": 1000})  # several micro-batches
    return env


def _strategy(bound: int = 200) -> WatermarkStrategy:
    return WatermarkStrategy.for_bounded_out_of_orderness(bound).with_timestamp_assigner(lambda e, t: e[2])


class CountWithTimeout(KeyedProcessFunction):
    """Flink's docs example: count per key, emit (key, count) when a key is quiet 500 ms."""

    def open(self, ctx: Any) -> None:
        from streamflow import ValueStateDescriptor

        self.state = ctx.get_state(ValueStateDescriptor("count"))

    def process_element(self, value: Any, ctx: Any) -> None:
        current = self.state.value() or (value[0], 0, 0)
        current = (value[0], current[1] + 1, ctx.timestamp())
        self.state.update(current)
        ctx.timer_service().register_event_time_timer(current[2] + 500)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        key, count, last = self.state.value()
        if timestamp == last + 500:
            yield (key, count, timestamp)


LATE = OutputTag("late")


NAMES = ["w1", "w2", "w3", "w3_process", "session", "timers", "sliding", "sliding_native", "union", "signed",
         "mixed", "python_on_typed", "keyed_typed", "list_keys", "dict_keys", "window_output_type",
         "window_cast_types", "window_double",
         "equal_keys", "equal_unhashable_keys", "equal_keys_window"]

# Keys equal in Python are one key on both engines (spark/group_keys.py): 1, 1.0, True; 0, -0.0, 0.0,
# False; tuples of equal items; bytes are not str. Every NaN key (a new float object each time)
# equals no key, not even another NaN.
EQUAL_KEYS = [1, 1.0, True, 0, -0.0, 0.0, False, (1, "x"), (True, "x"), (1.0, "x"), "a", b"a", None,
              2.0, 2, 2.5, float("inf"), -float("inf")]


def equal_keys_data(n: int) -> list[tuple[Any, int]]:
    return [(EQUAL_KEYS[i % len(EQUAL_KEYS)] if i % 50 else float("nan"), i % 7) for i in range(n)]


def workloads(engine: str) -> dict[str, list]:
    env = _env(engine)
    sinks = {name: ListSink() for name in NAMES}
    data = events(N)
    (env.from_collection(data).map(lambda e: e[1] * 2).filter(lambda v: v % 3 != 0).sink_to(sinks["w1"]))
    (
        env.from_collection(data)
        .key_by(lambda e: e[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
        .sink_to(sinks["w2"])
    )
    timed = env.from_collection(data).assign_timestamps_and_watermarks(_strategy())
    (
        timed.key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(1000))
        .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])))
        .sink_to(sinks["w3"])
    )
    (  # a process function of aggregates: Spark aggregates (see .window_agg)
        timed.key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(1000))
        .process(_WindowStats())
        .sink_to(sinks["w3_process"])
    )
    sparse = [e for e in data if e[2] % 700 < 300]  # gaps of 400 ms between bursts
    (
        env.from_collection(sparse)
        .assign_timestamps_and_watermarks(_strategy())
        .key_by(lambda e: e[0])
        .window(EventTimeSessionWindows.with_gap(200))
        .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])))
        .sink_to(sinks["session"])
    )
    (
        env.from_collection(sparse)
        .assign_timestamps_and_watermarks(_strategy())
        .key_by(lambda e: e[0])
        .process(CountWithTimeout())
        .sink_to(sinks["timers"])
    )
    windowed = (
        timed.filter(lambda e: e[1] % 5 == 0)
        .key_by(lambda e: e[0])
        .window(SlidingEventTimeWindows.of(1000, 500))
        .side_output_late_data(LATE)
        .aggregate(_CountAgg())
    )
    windowed.map(lambda r: ("window", r)).sink_to(sinks["sliding"])
    (  # translated natively: sliding, with an offset, a reduce and a process function
        timed.key_by(lambda e: e[0])
        .window(SlidingEventTimeWindows.of(1000, 300, 100))
        .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])), _FirstValues())
        .sink_to(sinks["sliding_native"])
    )
    a = env.from_collection(data[:500]).map(lambda e: ("a", e[1]))
    b = env.from_collection(data[500:900]).map(lambda e: ("b", e[1]))
    a.union(b).key_by(lambda r: r[0]).sum(1).sink_to(sinks["union"])
    # recognised functions on negative ints: Python's floor division and modulo (see .native)
    signed = [(k, v - 48, -ts) for k, v, ts in data]
    (
        env.from_collection(signed)
        .map(lambda e: (e[0], e[1] // 7, e[1] % 7, e[2] - e[1] * 3, e[1] * 3 - 1 > 0))
        .filter(lambda r: r[2] != 3)
        .key_by(lambda r: r[0])
        .sum(1)
        .sink_to(sinks["signed"])
    )
    # a float after 1500 records: the typed chunks written so far become encoded ones
    mixed = [(k, v) for k, v, _ts in data[:1500]] + [("k1", 0.5)] + [(k, v) for k, v, _ts in data[1500:2500]]
    env.from_collection(mixed).map(lambda e: (e[0], e[1] * 2)).key_by(lambda r: r[0]).sum(1).sink_to(
        sinks["mixed"])
    # functions that are not recognised run in Python on typed columns
    (env.from_collection(data).map(lambda e: e[0].upper()).filter(lambda s: s != "K3")
     .sink_to(sinks["python_on_typed"]))
    # a reduce that is not a rolling sum: the per-key operator, on typed columns with a native key
    (env.from_collection(data).key_by(lambda e: e[0]).reduce(lambda a, b: (a[0], max(a[1], b[1]), b[2]))
     .sink_to(sinks["keyed_typed"]))
    # unhashable keys, as PyFlink allows them (state/hashable_keys.py): a list key through the
    # per-key reduce, a dict key through a window (Spark groups by their canonical encoding)
    (env.from_collection(data).key_by(lambda e: [e[0], e[1] % 2])
     .reduce(lambda a, b: (a[0], a[1] + b[1], b[2])).sink_to(sinks["list_keys"]))
    (timed.key_by(lambda e: {"odd": e[1] % 2 == 1, "k": e[0]}).window(TumblingEventTimeWindows.of(1000))
     .process(_DictKeyStats()).sink_to(sinks["dict_keys"]))
    # a window's output_type makes its results Rows (the reduce is otherwise run as Spark aggregates)
    (timed.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(1000))
     .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])),
             output_type=Types.ROW([Types.STRING(), Types.INT(), Types.LONG()]))
     .sink_to(sinks["window_output_type"]))
    # declared DOUBLE/FLOAT/BOOLEAN outputs: Spark aggregates cast as PyFlink's serializers convert
    # (FLOAT rounds to 32 bits: the sums times 1000003 pass 2**24; see .window_agg output_casts)
    (timed.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(1000))
     .process(_CastStats(), output_type=Types.TUPLE([Types.STRING(), Types.DOUBLE(), Types.FLOAT(),
                                                     Types.BOOLEAN(), Types.LONG()]))
     .sink_to(sinks["window_cast_types"]))
    (timed.map(lambda e: e[1]).key_by(lambda v: v % 4).window(TumblingEventTimeWindows.of(1000))
     .reduce(lambda a, b: a + b, output_type=Types.DOUBLE()).sink_to(sinks["window_double"]))
    # over three micro-batches: a key's state restored from Spark's state store meets its equal
    (env.from_collection(equal_keys_data(2500)).key_by(lambda e: e[0])
     .reduce(lambda a, b: (a[0], a[1] + b[1])).sink_to(sinks["equal_keys"]))
    unhashable = [([1, 2], 1), ([True, 2.0], 2), ([1, 2.5], 3), ({"a": 1}, 4), ({"a": True}, 5),
                  ([(1, 2)], 6), ([[1, 2]], 7), ([[True, 2]], 8), ({0.0: "z", "b": {1}}, 9),
                  ({"b": {True}, False: "z"}, 10)]
    (env.from_collection(unhashable * 150).key_by(lambda e: e[0])
     .reduce(lambda a, b: (a[0], a[1] + b[1])).sink_to(sinks["equal_unhashable_keys"]))
    # a window function is given the key of the window's first element (the key column holds
    # only its equality class's representative)
    (timed.key_by(lambda e: e[1] % 2 == 1 if e[1] % 3 else float(e[1] % 2))
     .window(TumblingEventTimeWindows.of(1000)).process(_KeyRepr()).sink_to(sinks["equal_keys_window"]))
    env.execute(f"workloads on {engine}")
    return {name: sink.results for name, sink in sinks.items()}


class _CastStats(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return [(key, sum(e[1] for e in elements), sum(e[1] for e in elements) * 1000003 + 16777217,
                 len(elements) % 2, context.window().end)]


class _KeyRepr(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return [(repr(key), context.window().end, sum(e[1] for e in elements), len(elements))]


class _DictKeyStats(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        # a dict key's items may come in another order on Spark (an equal dict): compare them sorted
        return [(isinstance(key, dict), sorted(key.items()), context.window().end,
                 sum(e[1] for e in elements))]


class _WindowStats(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return [(key, context.window().end, sum(e[1] for e in elements), len(elements),
                 max(e[2] for e in elements),
                 context.window().max_timestamp() - min([e[2] for e in elements]))]


class _FirstValues(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        (acc,) = elements
        return [(key, context.window().start, context.window().end, acc)]


class _CountAgg(AggregateFunction):
    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, acc: int) -> int:
        return acc + 1

    def get_result(self, acc: int) -> int:
        return acc

    def merge(self, a: int, b: int) -> int:
        return a + b


@pytest.fixture(scope="module")
def both() -> dict[str, dict[str, list]]:
    return {engine: workloads(engine) for engine in ("asyncio", "spark")}


@pytest.mark.parametrize("name", NAMES)
def test_same_answers_on_both_engines(both: dict[str, dict[str, list]], name: str) -> None:
    expected, actual = both["asyncio"][name], both["spark"][name]
    assert expected, f"{name}: the asyncio engine produced nothing; the test would prove nothing"
    assert Counter(map(repr, actual)) == Counter(map(repr, expected))


def test_unhashable_keys_and_window_output_types_on_spark(both: dict[str, dict[str, list]]) -> None:
    """Beside the equal answers: a window's output_type gives Rows on Spark too, and a dict key
    reaches the window function as a dict, one firing per key and window."""
    spark = both["spark"]
    assert {type(r).__name__ for r in spark["window_output_type"]} == {"Row"}
    assert {r[0] for r in spark["dict_keys"]} == {True}
    assert len({(repr(r[1]), r[2]) for r in spark["dict_keys"]}) == len(spark["dict_keys"])


def test_per_key_order_is_kept(both: dict[str, dict[str, list]]) -> None:
    """A running sum's outputs of one key come in input order (Spark shuffles them)."""
    for engine in ("asyncio", "spark"):
        by_key: dict[str, list[int]] = {}
        for key, total, _ts in both[engine]["w2"]:
            by_key.setdefault(key, []).append(total)
        assert all(v == sorted(v) for v in by_key.values()), engine


def test_workload_answers(both: dict[str, dict[str, list]]) -> None:
    """WORKLOADS.md's answer formulas on the Spark results."""
    w1 = both["spark"]["w1"]
    data = events(N)
    expected = [v * 2 for _k, v, _t in data if (v * 2) % 3 != 0]
    assert (len(w1), sum(w1)) == (len(expected), sum(expected))
    finals: dict[str, int] = {}
    for key, total, _ts in both["spark"]["w2"]:
        finals[key] = max(finals.get(key, 0), total)
    assert (sum(finals.values()), len(both["spark"]["w2"])) == (sum(v for _k, v, _t in data), N)


class _AsksWatermark(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return [(key, context.current_watermark())]


def test_which_windows_run_natively() -> None:
    """Only windows whose semantics Spark reproduces exactly take the native path (no Spark
    needed: this is the translation's decision)."""
    from streamflow.spark.windows import native_window

    def decide(build: Any) -> list[bool]:
        env = _env("spark")
        stream = env.from_collection(events(10)).assign_timestamps_and_watermarks(_strategy())
        build(stream.key_by(lambda e: e[0])).sink_to(ListSink())
        graph = env.get_job_graph()
        return [native_window(graph, n) is not None for n in graph.nodes if n.keyed]

    def add(a: Any, b: Any) -> Any:
        return (a[0], a[1] + b[1], a[2])

    tumbling = TumblingEventTimeWindows.of(1000)
    assert decide(lambda k: k.window(tumbling).reduce(add)) == [True]
    assert decide(lambda k: k.window(SlidingEventTimeWindows.of(1000, 100)).aggregate(_CountAgg())) == [True]
    assert decide(lambda k: k.window(tumbling).allowed_lateness(10).reduce(add)) == [False]
    assert decide(lambda k: k.window(tumbling).side_output_late_data(LATE).reduce(add)) == [False]
    assert decide(lambda k: k.window(EventTimeSessionWindows.with_gap(10)).reduce(add)) == [False]
    assert decide(lambda k: k.window(tumbling).process(_AsksWatermark())) == [False]
    rekeyed = decide(lambda k: k.window(tumbling).reduce(add).key_by(lambda e: e[0]).reduce(add))
    assert rekeyed == [True, False]  # (the keyed reduce reads the window's output from an exchange)
    assert decide(lambda k: k.reduce(add)) == [False]


@pytest.mark.parametrize(
    ("starting", "stopping", "bounded", "refused"),
    [("earliest", "committed", True,
      "KafkaSource (set_bounded) stops at latest(), offsets() or timestamp(), not committed()"),
     ("earliest", "offsets", False, "a KafkaSource built with set_unbounded(offsets()) is refused"),
     ("earliest", "latest", False, "a KafkaSource built with set_unbounded(latest()) is refused")],
)
def test_kafka_offsets_spark_cannot_honour_are_refused(
    starting: str, stopping: str, bounded: bool, refused: str
) -> None:
    """A bounded KafkaSource's stopping offsets other than latest(), offsets() and timestamp()
    (tests/test_spark_kafka_offsets.py) were ignored on Spark, and so were
    set_unbounded(stopping_offsets)'s (it read past them, and
    the refusal of offsets() called it bounded): refused when the job is translated, before any
    query starts, as the starting offsets it cannot honour are."""
    from streamflow.datastream.connectors.kafka import KafkaOffsetsInitializer as Offsets
    from streamflow.datastream.connectors.kafka import KafkaSource, KafkaTopicPartition

    initializers = {
        "latest": Offsets.latest(),
        "earliest": Offsets.earliest(),
        "timestamp": Offsets.timestamp(1000),
        "offsets": Offsets.offsets({KafkaTopicPartition("t", 0): 5}),
        "committed": Offsets.committed_offsets(),
    }
    builder = (KafkaSource.builder().set_bootstrap_servers("127.0.0.1:1").set_topics("t").set_group_id("g")
               .set_value_only_deserializer(lambda b: b).set_starting_offsets(initializers[starting]))
    if bounded:
        builder.set_bounded(initializers[stopping])
    else:
        builder.set_unbounded(initializers[stopping])
    env = _env("spark")
    env.from_source(builder.build(), WatermarkStrategy.no_watermarks(), "kafka").sink_to(ListSink())
    with pytest.raises(ValueError, match=refused.replace("(", r"\(").replace(")", r"\)")):
        env.execute("refused")


def test_a_file_sink_with_date_time_buckets_is_refused_before_a_query_starts(tmp_path: Path) -> None:
    """A micro-batch replayed after a driver crash has the same batch id but a later processing
    time, so a date-time bucket would put its second copy elsewhere: refused, not ignored (it
    wrote into the base path)."""
    from streamflow.common.serialization import Encoder
    from streamflow.datastream.connectors.file_system import BucketAssigner, FileSink

    env = _env("spark")
    sink = (FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.date_time_bucket_assigner()).build())
    env.from_collection([1, 2]).sink_to(sink)
    with pytest.raises(ValueError, match="on the Spark engine a FileSink writes each micro-batch"):
        env.execute("refused")
    assert not (tmp_path / "out").exists()


def test_a_compacting_file_sink_is_refused_before_a_query_starts(tmp_path: Path) -> None:
    """enable_compact() on the Spark engine, whose FileSink writes a part file per micro-batch:
    refused with the reason, not ignored."""
    from streamflow.common.serialization import Encoder
    from streamflow.datastream.connectors.file_system import FileCompactor, FileCompactStrategy, FileSink

    env = _env("spark")
    strategy = FileCompactStrategy.builder().enable_compaction_on_checkpoint(1).build()
    sink = (FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder())
            .enable_compact(strategy, FileCompactor.concat_file_compactor()).build())  # fmt: skip
    env.from_collection([1, 2]).sink_to(sink)
    with pytest.raises(ValueError, match="does not compact them: enable_compact"):
        env.execute("refused")
    assert not (tmp_path / "out").exists()


def test_processing_time_timers_are_refused_clearly() -> None:
    class Ticker(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> None:
            ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time())

    env = _env("spark")
    env.from_collection([1, 2]).key_by(lambda x: x).process(Ticker()).sink_to(ListSink())
    with pytest.raises(Exception, match="processing-time timers cannot run on the Spark engine"):
        env.execute("refused at run time")


class _SlowSink(SinkFunction):
    """Records what it got; each micro-batch takes a while, so cancel() lands mid-run."""

    def __init__(self) -> None:
        self.results: list = []

    def write_batch(self, values: list) -> None:
        import time

        self.results.extend(values)
        time.sleep(0.3)


def test_cancel_stops_a_running_spark_job() -> None:
    """The configuration key selects the engine; cancel() stops the queries from the caller's
    loop (no polling): the job ends CANCELED long before its 40 micro-batches would have run."""
    import asyncio
    import time

    from streamflow.runtime.job import JobStatus

    sink = _SlowSink()
    env = StreamExecutionEnvironment()
    env.configure({"execution.engine": "spark", "execution.spark.records-per-batch": 50})
    env.from_collection(list(range(2000))).map(lambda v: v + 1).add_sink(sink)

    async def run() -> tuple[JobStatus, float]:
        client = await env.execute_async("cancelled")
        deadline = time.monotonic() + 300
        # the metrics come from the query's progress, reported when a micro-batch completes
        while client.get_metrics().get("spark.numBatches", 0) < 1:
            assert time.monotonic() < deadline, "no micro-batch completed in 300 s"
            await asyncio.sleep(0.05)
        assert client.get_job_status() is JobStatus.RUNNING
        started = time.monotonic()
        await client.cancel()
        return client.get_job_status(), time.monotonic() - started

    status, took = asyncio.run(run())
    assert status is JobStatus.CANCELED
    assert 0 < len(sink.results) < 2000
    assert took < 60


def _run_kill_job(tmp: Path, kill_after: int | None, hook: str = "STREAMFLOW_SPARK_KILL_AFTER_BATCH",
                  n: int = 2000) -> subprocess.CompletedProcess[str]:
    """``streamflow run --engine spark tests/spark_kill_job.py`` (a script that names no engine) on
    ``tmp``'s output and checkpoint directories; with ``kill_after``, the driver SIGKILLs itself
    after micro-batch ``kill_after`` of the query ``hook`` names. The driver-kill test is
    tests/test_spark_chained.py's (a broadcast stage, an exchange, a FileSink)."""
    env = driver_env()
    env.pop("STREAMFLOW_SPARK_KILL_AFTER_BATCH", None)
    env.pop("STREAMFLOW_SPARK_KILL_AFTER_EXCHANGE_BATCH", None)
    if kill_after is not None:
        env[hook] = str(kill_after)
    return subprocess.run(
        [sys.executable, "-m", "streamflow", "run", "--engine", "spark", str(HERE / "spark_kill_job.py"),
         str(tmp / "out"), str(tmp / "chk"), str(n)],
        env=env, capture_output=True, text=True, timeout=600,
    )


def _spark_log(chk: Path, query: str, kind: str) -> list[int]:
    """The batch ids in a query's Spark checkpoint log under ``chk`` (a job's checkpoint storage
    directory): ``offsets`` (micro-batches planned: written before a batch runs) or ``commits``
    (micro-batches Spark committed after its sink returned). What a killed driver left: the
    batches its restart replays (planned, not committed) and those it does not run again."""
    log = chk / "spark" / "checkpoints" / query / kind
    return sorted(int(p.name) for p in log.iterdir() if p.name.isdigit()) if log.exists() else []


def _written_lines(out: Path) -> list[str]:
    """Every line of the sink's part files (not its hidden in-progress ones)."""
    return [line for f in sorted(out.iterdir()) if not f.name.startswith(".")
            for line in f.read_text().splitlines()]


def _kafka_job(engine: str, bootstrap: str, src: str, dst: str, prefix: str) -> None:
    import orjson

    from streamflow.common.serialization import JsonRowDeserializationSchema, SimpleStringSchema
    from streamflow.datastream.connectors.base import DeliveryGuarantee
    from streamflow.datastream.connectors.kafka import (
        KafkaOffsetsInitializer,
        KafkaRecordSerializationSchema,
        KafkaSink,
        KafkaSource,
    )

    env = _env(engine)
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_topics(src)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(JsonRowDeserializationSchema())
        .build()
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(dst)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(prefix)
        .build()
    )
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka")
        .key_by(lambda r: r["key"])
        .reduce(lambda a, b: {"key": a["key"], "value": a["value"] + b["value"]})
        .map(lambda r: orjson.dumps({"key": r["key"], "sum": r["value"]}).decode())
        .sink_to(sink)
        .uid("sums")
    )
    env.execute(f"kafka on {engine}")


def test_kafka_in_kafka_out_same_on_both_engines(kafka: Any) -> None:
    """The same Kafka -> keyed running sum -> Kafka (exactly-once) job on both engines: the
    committed outputs are equal, per key in the same order, and no transaction stays open."""
    import asyncio

    import orjson

    from streamflow.testing.kafka_broker import create_topic, open_transactions, produce, read_topic

    bs = kafka.bootstrap_servers
    tag = f"{os.getpid()}-{id(kafka)}"
    src = f"spark-in-{tag}"
    keys = [f"k{i % 7}" for i in range(400)]
    values = [orjson.dumps({"key": k, "value": i % 13}) for i, k in enumerate(keys)]

    async def setup() -> None:
        await create_topic(bs, src, 2)
        await produce(bs, src, values, keys=[k.encode() for k in keys])

    asyncio.run(setup())
    outputs = {}
    for engine in ("asyncio", "spark"):
        dst = f"spark-out-{engine}-{tag}"
        asyncio.run(create_topic(bs, dst, 1))
        _kafka_job(engine, bs, src, dst, f"tx-{engine}-{tag}")
        records = asyncio.run(read_topic(bs, dst))
        outputs[engine] = [orjson.loads(r.value) for r in records]
        assert not asyncio.run(open_transactions(bs, dst)), engine
    assert len(outputs["spark"]) == len(values)
    assert Counter(map(repr, outputs["spark"])) == Counter(map(repr, outputs["asyncio"]))
    for engine, out in outputs.items():
        per_key: dict[str, list[int]] = {}
        for r in out:
            per_key.setdefault(r["key"], []).append(r["sum"])
        assert all(v == sorted(v) for v in per_key.values()), engine


# ``streamflow run --engine spark`` on a script that names no engine and enables checkpoints (which
# Spark replaces by its own): the driver runs of tests/test_spark_chained.py's driver-kill test
# (_run_kill_job) go through it, and its last run must finish (job status FINISHED) with every
# expected output, instead of a Spark driver of its own here (15-20 s).


def test_kafka_reads_through_the_python_source_when_the_jvm_connector_is_missing(
    both: dict[str, dict[str, list]],
) -> None:
    """The switch to ``format("kafka")`` looks for Spark's connector class; this machine has
    none (no Maven), so the Python data source of the Kafka test above is what ran."""
    from streamflow.spark.kafka import jvm_connector_available
    from streamflow.spark.session import get_session

    assert jvm_connector_available(get_session()) is False


def test_equal_unhashable_keys_give_equal_key_columns() -> None:
    """Spark groups by the key column's bytes: equal dicts in another insertion order, equal sets
    built in another order, and lists inside tuples encode alike; hashable keys as before."""
    from streamflow.spark.encoding import batch_codec, encode_keys
    from streamflow.state.codec import MsgpackCodec

    codec = MsgpackCodec()
    encode_many, decode_many = batch_codec(codec.encode, codec.decode)
    words = [f"w{i}" for i in range(40)]
    keys = [{"a": 1, "b": [2, {"c": 3, "d": 4}]}, {"b": [2, {"d": 4, "c": 3}], "a": 1},
            set(words), set(reversed(words)), ("t", [1, 2]), ("t", [1, 2]), "plain"]
    out = encode_keys(keys, encode_many, codec.encode)
    assert out[0] == out[1] and out[2] == out[3] and out[4] == out[5]
    assert len({out[0], out[2], out[4], out[6]}) == 4
    assert out[6] == codec.encode("plain")
    assert decode_many(out) == keys  # the stand-ins decode to keys equal to the originals
    assert encode_keys(["x", ("y", 1)], encode_many, codec.encode) == encode_many(["x", ("y", 1)])


def test_keys_equal_in_python_give_equal_key_columns() -> None:
    """One key column value per Python equality class (spark/group_keys.py), and distinct values
    for keys Python tells apart."""
    import dataclasses
    import enum
    from collections import namedtuple

    from streamflow.common import Row
    from streamflow.spark.encoding import batch_codec, encode_keys
    from streamflow.state.codec import MsgpackCodec

    class Color(enum.IntEnum):
        RED = 1

    @dataclasses.dataclass(frozen=True)
    class Point:
        x: Any
        y: Any

    pair = namedtuple("pair", "a b")
    codec = MsgpackCodec()
    encode_many, _decode_many = batch_codec(codec.encode, codec.decode)
    classes = [
        [1, 1.0, True, Decimal(1), Decimal("1.00"), Color.RED],
        [0, -0.0, 0.0, False, Decimal("-0")],
        [2.5, Decimal("2.5")],
        [float("nan"), -float("nan"), Decimal("NaN")],
        [(1, "x"), (True, "x"), pair(1.0, "x")],
        [b"a", bytearray(b"a")],
        ["a"],
        [Decimal("0.1")],
        [0.1],
        [Row(1, 2), Row(1.0, True + 1)],
        [Row(a=1, b=2), Row(b=2.0, a=True)],
        [Point(1, "y"), Point(1.0, "y")],
        [None],
    ]
    columns = [set(encode_keys(keys, encode_many, codec.encode)) for keys in classes]
    assert all(len(c) == 1 for c in columns), columns
    assert len(set.union(*columns)) == len(classes)


def batch_jobs(engine: str) -> dict[str, list]:
    """A batch job (RuntimeExecutionMode.BATCH): each keyed operator runs key by key at the end of
    input, a key's records in timestamp order, then its timers (api/batch.py)."""
    from streamflow.execution_mode import RuntimeExecutionMode

    env = _env(engine)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    sinks = {name: ListSink() for name in ("reduce", "timers", "window")}
    data = events(N)
    # one final result per key, with the timestamp of the key's last record
    (env.from_collection(data).assign_timestamps_and_watermarks(_strategy()).key_by(lambda e: e[0])
     .reduce(lambda a, b: (a[0], a[1] + b[1], b[2])).sink_to(sinks["reduce"]))
    # timers fire at the key's end, after its records in timestamp order (the input is not in order)
    sparse = [e for e in data if e[2] % 700 < 300]
    (env.from_collection(sparse).assign_timestamps_and_watermarks(_strategy()).key_by(lambda e: e[0])
     .process(CountWithTimeout()).sink_to(sinks["timers"]))
    (env.from_collection(data).assign_timestamps_and_watermarks(_strategy()).key_by(lambda e: e[0])
     .window(TumblingEventTimeWindows.of(1000)).process(_WindowStats()).sink_to(sinks["window"]))
    env.execute(f"batch jobs on {engine}")
    return {name: sink.results for name, sink in sinks.items()}


def test_batch_mode_same_on_both_engines() -> None:
    expected, actual = batch_jobs("asyncio"), batch_jobs("spark")
    assert len(expected["reduce"]) == 10 and len(expected["timers"]) == 10 and expected["window"]
    for name in expected:
        assert Counter(map(repr, actual[name])) == Counter(map(repr, expected[name])), name
