"""Broadcast partitioning into a one-input operator or a sink: ``stream.broadcast().map(f)``.

Theory of operation
-------------------
Flink's ``BroadcastPartitioner`` sends every record to every parallel subtask of the
consumer, so a consumer of parallelism ``p`` processes each record ``p`` times, once in each
subtask, each with its own copy of the function and its own
``get_runtime_context().get_index_of_this_subtask()``; what the subtasks emit comes out
``p`` times (once per subtask, each copy computed by that subtask).

On Spark the consumer's input is **replicated**: every data row becomes ``p`` rows
(``explode`` over the subtask indexes ``0 .. p-1``), each row's ``order`` gains its subtask
index (so the copies keep distinct, input-ordered positions) and its ``tag`` names it. The
stateless stage that runs the consumer (:class:`~.harness.ChainRunner` with ``replicas=p``)
keeps one stage per subtask index in the worker and feeds each row to the stage of its
subtask, whose operators play that subtask (index, parallelism); operators fused after the
consumer play the same subtask (``index % their parallelism``), as they are chained to it in
the asyncio engine when their parallelism is the same. End-of-input rows are not replicated.
A sink fed by broadcast partitioning receives the ``p`` copies (its ``tag`` is left alone).

A function keeping something in ``self`` keeps it per subtask within one Spark task (a
partition of a micro-batch), as every stateless stage on Spark does.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..graph import Partitioning, StreamNode

if TYPE_CHECKING:
    from .plan import Stream

__all__ = ["is_replicated", "replicate", "sink_input"]


def is_replicated(node: StreamNode) -> bool:
    """``node`` has one input, and it is broadcast partitioned."""
    return len(node.inputs) == 1 and node.inputs[0].partitioning is Partitioning.BROADCAST


def replicate(stream: Stream, parallelism: int, name_subtask: bool = True) -> Stream:
    """``stream`` with every data row once per subtask ``0 .. parallelism-1`` (module doc);
    with ``name_subtask`` a row's ``tag`` is its subtask index (what ChainRunner reads)."""
    from pyspark.sql import functions as F

    df = stream.df
    columns = df.columns
    eof = F.col("eof")
    every = F.array(*[F.lit(i).cast("long") for i in range(parallelism)])
    out = df.withColumn("_subtask", F.explode(F.when(eof, F.array(F.lit(0).cast("long"))).otherwise(every)))
    out = out.withColumn("order", F.when(eof, F.col("order")).otherwise(
        F.concat(F.col("order"), F.array(F.col("_subtask")))))
    if name_subtask:
        out = out.withColumn("tag", F.when(eof, F.col("tag")).otherwise(F.col("_subtask").cast("string")))
    return dataclasses.replace(stream, df=out.select(*columns), ordered=False, flat_order=False, stage=None,
                               native=False, replicas=parallelism if name_subtask else 0)


def sink_input(node: StreamNode, stream: Stream, parallelism: int) -> Stream:
    """What sink ``node`` receives of ``stream``: every row ``parallelism`` times when it is
    broadcast partitioned (each subtask of the sink writes every record), else ``stream``."""
    return replicate(stream, parallelism, False) if is_replicated(node) else stream
