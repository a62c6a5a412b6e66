"""Event time on Spark: the watermark delay of a strategy, the watermark of a union and of a
Kafka source's partitions.

Theory of operation
-------------------
Spark has one event-time watermark per streaming query. Each ``withWatermark`` node in the
query tracks the highest event time of the rows that pass it, minus its delay; the query's
watermark is combined from those nodes by ``spark.sql.streaming.multipleWatermarkPolicy``
(``min`` by default, stored in the checkpoint), recomputed between micro-batches, and never
goes back. A node that has seen no row yet counts as 0.

A keyed stage puts one ``withWatermark`` on its input (:mod:`.plan`). On a union that node sees
the rows of every input, so its watermark follows the *fastest* input: a bounded source that
ends early lifts it to the end-of-input row's event time (2255), and every later record of the
other inputs is late (dropped by a native window, fired past by a keyed operator): a silent
wrong answer. Flink's rule is the minimum over the inputs: an input that ended emits the
maximum watermark for itself only, so it stops holding the others back but never pushes them.

So every input of a union that feeds a keyed stage gets a ``withWatermark`` of its own
(:func:`hold_back`), on its rows' ``ts`` with its own strategy's delay; with the ``min``
policy the query's watermark is the minimum over the inputs (the keyed stage's own node sees
all rows, so its watermark is never the lowest). An input without a watermark strategy gets a
node on its end-of-input row only: it holds the watermark at 0 until that input ends, as such
an input does on the asyncio engine (its channel's watermark stays at the minimum until the
end of input). Spark refuses a ``withWatermark`` below another one when it propagates
watermarks per stateful operator (``spark.sql.streaming.statefulOperator.allowMultiple``,
"Redefining watermark is disallowed"); the translation runs one stateful operator per query
(:mod:`.exchange`), so :data:`SETTINGS` turns that off, which gives the single global watermark
of Spark before 3.4 (late rows are then judged against the current micro-batch's watermark
instead of the previous one's: for records within the strategy's bound the answers are the
same, see docs/spark.md). The settings apply to this job's queries only: they are set on the
session around each query's start (Spark copies the session's settings into the query when it
starts), then restored (:func:`.session.session_settings`).

A Kafka source read with a watermark strategy (``from_source(kafka, strategy)``) generates
watermarks per partition on the asyncio engine, as in Flink (``connectors/kafka_watermarks.py``):
the source's watermark is the minimum over its partitions, so a partition whose event times lag
the others' (a backlog replayed) holds it back instead of having its records judged late. The
same rule on Spark: one ``withWatermark`` node per partition (:func:`per_split`), each on its own
partition's rows (and the end-of-input row) in one linear chain over the single source, combined
by the ``min`` policy; a partition that has had no row holds the watermark at 0, as it holds the
asyncio engine's at the minimum. Partitions are those the topics have when the job is
translated. A strategy with idleness (``with_idleness``) keeps the single node: Spark cannot tell
an idle partition, and one that never gets a record would hold the watermark for ever (logged).
"""

from __future__ import annotations

import logging
import types
from typing import Any

from ..eventtime import (
    BoundedOutOfOrdernessWatermarks,
    NoWatermarksGenerator,
    _ValueAndTimestampAssigner,
    _ValueAssigner,
)
from ..graph import StreamNode
from ..runtime.timestamps import TimestampsAndWatermarksOperator
from .native import Expr, Layout, recognise
from .sources import SparkTranslationError

_log = logging.getLogger(__name__)

POLICY = "spark.sql.streaming.multipleWatermarkPolicy"
ALLOW_MULTIPLE = "spark.sql.streaming.statefulOperator.allowMultiple"
SETTINGS = {POLICY: "min", ALLOW_MULTIPLE: "false"}
_HOLD_COLUMN = "_input_event_time"


def watermark_delay(node: StreamNode) -> int | None:
    """The Spark watermark delay of a timestamps-and-watermarks node, or None."""
    factory = node.operator_factory
    if factory is None:
        return None
    op = factory.create(0)
    if not isinstance(op, TimestampsAndWatermarksOperator):
        return None
    return strategy_delay(op.strategy, f"operator {node.name!r}")


def strategy_delay(strategy: Any, what: str) -> int | None:
    """The Spark watermark delay of a ``WatermarkStrategy`` (None: no watermarks); ``what``
    names its operator or source in the error a custom generator raises."""
    generator = strategy.generator_factory()
    if isinstance(generator, BoundedOutOfOrdernessWatermarks):
        return int(generator._bound)
    if isinstance(generator, NoWatermarksGenerator):
        return None
    raise SparkTranslationError(
        f"{what}: a custom watermark generator ({type(generator).__name__}) cannot run "
        "on Spark, whose watermark is the maximum event time minus a fixed delay: use "
        "WatermarkStrategy.for_bounded_out_of_orderness(...) or for_monotonous_timestamps()"
    )


def timestamps_expr(op: TimestampsAndWatermarksOperator, layout: Layout, what: str) -> Expr | None:
    """The ``ts`` expression of a recognised timestamp assigner, else None."""
    assigner = op.strategy.create_timestamp_assigner()
    if assigner is None:
        return None
    if type(assigner) in (_ValueAssigner, _ValueAndTimestampAssigner):
        fn = assigner._fn  # type: ignore[attr-defined]
        if not isinstance(fn, types.FunctionType):
            return None
        result = recognise(fn, layout, what, 0, 1 if type(assigner) is _ValueAssigner else 2)
    else:  # a TimestampAssigner class: its method, which must not read ``self``
        result = recognise(assigner.extract_timestamp, layout, what, 1, 2)
    if result is None or result.is_tuple or result.identity or result.exprs[0].kind != "int":
        return None
    return result.exprs[0]


def stage_event_time(keyed: Any, batch: bool, delay_ms: int | None) -> Any:
    """A keyed (or broadcast) stage's input with Spark's event time: in a batch job the
    end-of-input row's alone (every group times out after it), else the marker rows' (key
    ``b""``, :class:`~.key_column.KeyColumn`) behind ``delay_ms``; none without a delay."""
    from pyspark.sql import functions as F

    if batch:
        end = F.when(F.col("eof"), F.timestamp_millis("ts"))
        return keyed.withColumn("event_time", end).withWatermark("event_time", "0 milliseconds")
    if delay_ms is None:
        return keyed
    spark_time = F.when(F.col("key") == F.lit(b""), F.timestamp_millis("ts"))
    return keyed.withColumn("event_time", spark_time).withWatermark("event_time", f"{delay_ms} milliseconds")


def hold_back(df: Any, delay_ms: int | None) -> Any:
    """``df`` (rows of one union input) behind a watermark node of its own: its rows' highest
    ``ts`` minus ``delay_ms``, or with no delay (no watermark strategy) its end-of-input row's
    alone. The node's column is dropped again; the node stays in the plan."""
    from pyspark.sql import functions as F

    ts = F.timestamp_millis("ts")
    column = ts if delay_ms is not None else F.when(F.col("eof"), ts)
    return (df.withColumn(_HOLD_COLUMN, column)
            .withWatermark(_HOLD_COLUMN, f"{delay_ms or 0} milliseconds").drop(_HOLD_COLUMN))


def per_split(df: Any, splits: int, delay_ms: int) -> Any:
    """``df`` (a Kafka source's rows, with the ``split`` column: the index of the row's
    partition) behind one watermark node per partition, each on its partition's rows' ``ts``
    and the end-of-input row's, minus ``delay_ms``; with the ``min`` policy the query's
    watermark is the minimum over the partitions (module doc). The nodes' columns and
    ``split`` are dropped again; the nodes stay in the plan."""
    from pyspark.sql import functions as F

    ts = F.timestamp_millis("ts")
    for i in range(splits):
        column = f"{_HOLD_COLUMN}_{i}"
        mine = F.when((F.col("split") == F.lit(i)) | F.col("eof"), ts)
        df = df.withColumn(column, mine).withWatermark(column, f"{delay_ms} milliseconds").drop(column)
    return df.drop("split")
