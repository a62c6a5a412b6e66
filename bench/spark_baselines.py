"""W1-W3 as a person writes them by hand in PySpark Structured Streaming (the baselines of
``bench/run.py --engine spark``), following ../shared/SPARK.md's measured recipes.

Each baseline gets the same events as streamflow, writes them as ``chunks`` Parquet files
(what streamflow's Spark engine does with a collection source, so input preparation is in
both figures), streams them with ``maxFilesPerTrigger=1`` and ``availableNow``, and
aggregates each micro-batch into a driver-side answer in ``foreachBatch``:

- W1: ``select``/``where`` on columns: no Python in the data path.
- W2: ``applyInPandasWithState`` with a per-key running sum (one output per input record),
  sorted by a sequence number inside each key (rows of a key arrive unordered).
- W3: ``withWatermark`` + ``window`` + ``sum`` in append mode, with an end-of-input sentinel
  event so the last windows fire.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

SENTINEL_TS = 9_000_000_000_000


def _write_input(events: list[tuple[str, int, int]], chunks: int, sentinel: bool) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = tempfile.mkdtemp(prefix="spark-baseline-")
    size = max(1, -(-len(events) // chunks))
    parts = [events[i : i + size] for i in range(0, len(events), size)]
    if sentinel:
        parts.append([("__eof__", 0, SENTINEL_TS)])
    seq = 0
    for n, part in enumerate(parts):
        table = pa.table(
            {
                "seq": list(range(seq, seq + len(part))),
                "key": [e[0] for e in part],
                "value": [e[1] for e in part],
                "ts_ms": [e[2] for e in part],
            }
        )
        seq += len(part)
        path = os.path.join(directory, f"part-{n:05d}.parquet")
        pq.write_table(table, path)
        os.utime(path, (1_000_000 + n, 1_000_000 + n))
    return directory


def _run(spark: Any, df: Any, on_batch: Any, output_mode: str = "append") -> None:
    chk = tempfile.mkdtemp(prefix="spark-baseline-chk-")
    try:
        q = (
            df.writeStream.outputMode(output_mode)
            .foreachBatch(on_batch)
            .option("checkpointLocation", chk)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
    finally:
        shutil.rmtree(chk, ignore_errors=True)


SCHEMA = "seq long, key string, value long, ts_ms long"


def w1(spark: Any, events: list, chunks: int) -> tuple[int, int]:
    from pyspark.sql import functions as F

    directory = _write_input(events, chunks, sentinel=False)
    answers: dict[int, tuple[int, int]] = {}
    try:
        df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(directory)
        out = df.select((F.col("value") * 2).alias("v")).where(F.col("v") % 3 != 0)

        def on_batch(bdf: Any, batch_id: int) -> None:
            row = bdf.agg(F.count("v").alias("c"), F.sum("v").alias("s")).collect()[0]
            answers[batch_id] = (int(row.c), int(row.s or 0))

        _run(spark, out, on_batch)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return (sum(a[0] for a in answers.values()), sum(a[1] for a in answers.values()))


def _running_sum(key: Any, pdfs: Any, state: Any) -> Any:
    import pandas as pd

    total = state.get[0] if state.exists else 0
    pdf = pd.concat(list(pdfs)).sort_values("seq")
    sums = pdf["value"].astype("int64").cumsum() + total
    state.update((int(sums.iloc[-1]),))
    yield pd.DataFrame({"key": key[0], "seq": pdf["seq"].values, "rsum": sums.values})


def w2(spark: Any, events: list, chunks: int) -> tuple[int, int]:
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    directory = _write_input(events, chunks, sentinel=False)
    last: dict[str, tuple[int, int]] = {}
    outputs: dict[int, int] = {}
    try:
        df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(directory)
        out = df.groupBy("key").applyInPandasWithState(
            _running_sum, "key string, seq long, rsum long", "total long", "append",
            GroupStateTimeout.NoTimeout,
        )

        def on_batch(bdf: Any, batch_id: int) -> None:
            rows = bdf.groupBy("key").agg(F.max("seq").alias("seq"), F.max("rsum").alias("rsum"),
                                          F.count("*").alias("n")).collect()
            outputs[batch_id] = sum(int(r.n) for r in rows)
            for r in rows:
                if r.key not in last or last[r.key][0] < r.seq:
                    last[r.key] = (int(r.seq), int(r.rsum))

        _run(spark, out, on_batch)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return (sum(v[1] for v in last.values()), sum(outputs.values()))


def w3(spark: Any, events: list, chunks: int) -> tuple[int, int]:
    from pyspark.sql import functions as F

    directory = _write_input(events, chunks, sentinel=True)
    answers: dict[int, tuple[int, int]] = {}
    try:
        df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(directory)
        out = (
            df.withColumn("ts", F.timestamp_millis("ts_ms"))
            .withWatermark("ts", "200 milliseconds")
            .groupBy(F.window("ts", "10 seconds"), "key")
            .agg(F.sum("value").alias("s"))
            .select("key", F.unix_millis(F.col("window.end")).alias("end"), "s")
        )

        def on_batch(bdf: Any, batch_id: int) -> None:
            # the sentinel is dropped here, not in the query: Spark pushes a filter on the
            # grouping key below the aggregation, and the watermark would never see it
            bdf = bdf.where(F.col("key") != "__eof__")
            weighted = F.sum((F.col("end") % 1000003) * F.col("s")).alias("a")
            row = bdf.agg(F.count("*").alias("n"), weighted).collect()[0]
            answers[batch_id] = (int(row.n), int(row.a or 0))

        _run(spark, out, on_batch)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return (sum(a[0] for a in answers.values()), sum(a[1] for a in answers.values()))


BASELINES = {"w1": w1, "w2": w2, "w3": w3}


def timed(fn: Any, *args: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    answer = fn(*args)
    return time.perf_counter() - t, answer
