"""Exchanges: a stateful stage's output handed to the next stateful stage by a query of its own.

Theory of operation
-------------------
Spark runs at most one ``applyInPandasWithState`` in a streaming query: a second one (a
keyed reduce then a keyed process function, two keyed windows in a row, a union of two keyed
streams) is refused when the query *starts*, with ``AnalysisException: Multiple
applyInPandasWithStates are not supported on a streaming DataFrames/Datasets``
(``UnsupportedOperationChecker``, still so in 4.3). ``transformWithStateInPandas`` chains only
with a Spark event-time column on every output row, which the translation's rows do not carry
(data rows carry no Spark event time: :mod:`.plan`), and a streaming aggregation followed by
another stateful operator needs the same. So the translation cuts the job there instead: the
output of a stateful stage (a keyed operator, a native window, a rolling reduce) that feeds
another stateful stage is written by a query of its own (``foreachBatch``) as numbered
Parquet chunks, one per micro-batch, and read back by the downstream query exactly as a
bounded source's chunks are read (``readStream.parquet``, ``maxFilesPerTrigger=1``, the file
source's offsets in the downstream query's checkpoint).

**Fan-out.** Every query reading a DataFrame runs all of it: a stage whose output feeds two
consumers (``s.add_sink(a)`` and ``s.map(f).sink_to(b)``, a main output and a side output, two
branches unioned again) would run once per consumer's query: a stateful one with a state of
its own per query, and any user function (stateless ones too) once per consumer per record,
so a non-deterministic or side-effecting function (a call out, a counter, a random value)
would run twice per record and give each sink other results, where Flink runs it once. So
the output of the first node whose output feeds more than one consumer (main or side output)
is exchanged as well (:func:`exchanged_output`) when its DataFrame runs a stateful operator or
a user function in Python since the last exchange: its query runs every stage once and every
consumer reads the same chunks. Not exchanged: a job without a fan-out; a fan-out of a source
itself (a bounded source's chunks are read again, a Kafka source is read and deserialized
again by each query) or of stages Spark runs as expressions alone (:mod:`.native`: pure); a
stateless one whose watermark is the minimum of several, with a keyed stage downstream
(:func:`exchanged_output`).
A replayed micro-batch may compute other rows than its first run did (a random value),
but it rewrites its chunk before any consumer reads it: the consumers' queries start when the
exchange's query has ended, that is when every batch of it is in Spark's commit log.

Every query runs with ``Trigger.AvailableNow`` (:mod:`.client`), so a downstream query starts
when the queries it reads from have ended: it then sees every chunk, in micro-batch order (the
file source orders files by modification time: chunk ``b`` gets ``1_000_000 + b`` seconds, as
:func:`.sources.materialize` does). The downstream query's watermark is driven by the same
marker rows as in one query (:class:`.key_column.KeyColumn`), from the chunks' ``ts``.

End of input. The chunks never hold an end-of-input row: when the upstream query has ended,
:meth:`Exchange.finish` appends a chunk holding one (once: a restarted job finds it there).
The upstream's own rows would come too early or not at all: a keyed stage passes the row on in
the micro-batch that brings it, while the windows and timers it fires at the end of input come
in Spark's trailing micro-batch after it (downstream they would be later than a watermark of
2255: dropped as late, or a batch job's timeout set in the past); a native window keeps the row
in a window that never closes.

Exactly once. A micro-batch's chunk is written to a temporary name and renamed, under a name
fixed by its batch id: a replayed batch (after a driver crash) writes the same rows again to
the same file. The downstream query's checkpoint remembers which chunks it has read.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..graph import JobGraph, StreamNode
from .encoding import ROW_DDL
from .harness import EOF_ORDER, EOF_TS
from .native import ZERO, Layout

_log = logging.getLogger(__name__)

_CHUNK = re.compile(r"part-(\d{8})(-eof)?\.parquet$")
_MTIME_BASE = 1_000_000  # seconds; chunk b gets _MTIME_BASE + b (Spark orders new files by mtime)


def exchanged_output(graph: JobGraph, node: StreamNode, stateful: int, python: bool = False,
                     min_watermark: bool = False) -> str | None:
    """Why ``node``'s output is written by a query of its own, or None: its DataFrame holds
    ``stateful`` stateful operators since the last exchange and a keyed operator is downstream
    (Spark runs one per query), or the node has more than one consumer (the fan-out above) and
    its DataFrame runs a stateful operator or a user function in Python (``python``) since the
    last exchange. A fan-out of a source or of Spark expressions alone is recomputed per query:
    the bounded source's chunks are read again, the expressions are pure.

    Not a stateless fan-out whose event time is the minimum of several watermarks
    (``min_watermark``: a union's inputs, a Kafka source's partitions, :mod:`.watermarks`) with
    a keyed stage downstream: the chunks would carry one stream of rows, whose watermark
    downstream follows the fastest input, and the other inputs' records would be late. Each
    consumer's query computes it then, its functions once per consumer (logged)."""
    from .windows import feeds_keyed

    if stateful and node.keyed and feeds_keyed(graph, node):
        return "a stateful stage downstream"
    if not (stateful or python) or len(graph.consumers.get(node.id, [])) < 2:
        return None
    if not stateful and min_watermark and feeds_keyed(graph, node):
        _log.warning("operator %r feeds %d consumers, and its watermark is the minimum over several inputs "
                     "or partitions, which an exchange would not keep: each consumer's Spark query runs its "
                     "functions again (once per consumer per record)", node.name,
                     len(graph.consumers[node.id]))
        return None
    return "a fan-out: computed once for its consumers"


@dataclass
class Exchange:
    """One stateful stage's output written for the queries downstream (see the module docstring)."""

    uid: str
    what: str  # for messages: the operator(s) upstream
    df: Any  # the upstream rows (``order, ts, tag, eof`` and ``value`` or the layout's columns)
    directory: str
    layout: Layout | None
    reads: frozenset[str] = field(default_factory=frozenset)  # the exchanges the upstream reads

    @property
    def ddl(self) -> str:
        return self.layout.ddl() if self.layout is not None else ROW_DDL

    @property
    def columns(self) -> list[str]:
        return ["order", "ts", "tag", "eof", *(self.layout.columns if self.layout is not None else ["value"])]

    def read(self, spark: Any) -> Any:
        """The chunks as a streaming DataFrame of the same columns."""
        os.makedirs(self.directory, exist_ok=True)
        return spark.readStream.schema(self.ddl).option("maxFilesPerTrigger", 1).parquet(self.directory)

    def writer(self, after: Callable[[int], None] | None = None) -> Any:
        """The upstream query's ``foreachBatch`` function: one chunk per non-empty micro-batch
        (then ``after(batch_id)``: the driver-kill tests' fault hook)."""
        directory, columns = self.directory, self.columns

        def write(batch_df: Any, batch_id: int) -> None:
            table = batch_df.where("eof = false").select(*columns).toArrow()
            if table.num_rows:
                _write(directory, f"part-{batch_id:08d}.parquet", table, batch_id)
            if after is not None:
                after(batch_id)

        return write

    def finish(self) -> None:
        """The upstream query has ended: the end-of-input chunk."""
        import pyarrow as pa

        numbers = []
        for name in os.listdir(self.directory):
            m = _CHUNK.match(name)
            if m is not None and m.group(2):
                return  # written by an earlier run of this job
            if m is not None:
                numbers.append(int(m.group(1)))
        n = max(numbers, default=-1) + 1
        layout = self.layout
        schema = layout.arrow_schema() if layout is not None else None
        record = ([pa.array([ZERO[f.kind]], t) for f, t in zip(layout.fields, schema.types[4:], strict=True)]
                  if layout is not None and schema is not None else [pa.array([b""], pa.binary())])
        base = [pa.array([EOF_ORDER], pa.list_(pa.int64())), pa.array([EOF_TS], pa.int64()),
                pa.nulls(1, pa.string()), pa.array([True])]
        table = pa.table([*base, *record], names=self.columns)
        _write(self.directory, f"part-{n:08d}-eof.parquet", table, n)
        _log.info("exchange %s: end of input appended after %d chunks (%s)", self.uid, n, self.what)


def _write(directory: str, name: str, table: Any, number: int) -> None:
    import pyarrow.parquet as pq

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    tmp = os.path.join(directory, f".{name}.tmp")
    pq.write_table(table, tmp)
    os.utime(tmp, (_MTIME_BASE + number, _MTIME_BASE + number))
    os.replace(tmp, path)
