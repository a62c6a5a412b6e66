"""Translating a job's logical graph to Spark Structured Streaming.

Theory of operation
-------------------
The translation walks the logical graph (its nodes, edges and operator factories, never
the user's code paths) and builds one streaming DataFrame per node output:

* A **source** is read once by the driver through its own ``SourceReader`` and written as
  numbered Parquet chunks into the query's input directory (rows of
  :data:`~.encoding.ROW_DDL`, the records encoded by the job's state codec), followed by
  an end-of-input marker row; Spark streams the chunks in order, one per micro-batch
  (``maxFilesPerTrigger=1``), and the file source's offsets live in the checkpoint.
  Kafka sources have a Spark streaming source of their own (see :mod:`.kafka_source`).
* **Non-keyed operators** become ``mapInArrow`` stages running the operators themselves
  (:class:`~.harness.ChainRunner`); forward-connected ones with a single consumer are fused
  into one stage, as the asyncio engine chains them into one task.
* A **keyed operator** (``key_by`` then reduce, process, window, ...) gets a key column (the key
  selector's result, encoded: :mod:`.key_column`), the event-time watermark of its input
  (``withWatermark`` with the delay of the upstream watermark strategy), and runs as
  ``groupBy(key).applyInPandasWithState`` (:class:`~.keyed.KeyedRunner`): the operator's keyed
  state and timers per key live in Spark's state store, event-time timers as its timeouts.
* **union** is ``unionByName``; before a keyed stage each input gets a watermark of its own and
  the union's is their minimum (:mod:`.watermarks`). A **side output** is a filter on the ``tag``
  column.
* Every **sink** is a query with ``foreachBatch`` (:mod:`.sinks`), checkpointed at its uid.
* Spark runs one stateful operator per query: a stateful stage (keyed operator, native
  window, rolling reduce) that feeds another is written by a query of its own and read back
  by the next one (:mod:`.exchange`); each :class:`Stream` counts the stateful operators in its
  DataFrame since the last exchange and names the exchanges it reads (their queries first).
  A fan-out after a stateful stage or a Python stage (``Stream.python``) is exchanged too: computed once.

End of input: Spark does not flush event time when a bounded input ends, so the last
chunk of every source is a marker row with an event time far in the future (year 2255);
it passes through every stage and lifts the watermark so the trailing no-data
micro-batch fires every pending window and timer. Sinks never see it.

A **keyed two-input operator** (``connect()`` of keyed streams: co-process, co-map, interval
join) is a keyed stage over the union of its inputs: each row's ``tag`` is set to the input it
feeds (``"0"``/``"1"``), the key column takes each input's own key selector, and the runner
feeds a row to ``process_batch`` or ``process_batch2``; the two inputs' watermarks meet in the
union's minimum, as in the asyncio engine's valve. A non-keyed one (co-map, co-process) is a
stateless stage over the same tagged union (:class:`~.harness.ChainRunner`).

A two-input operator whose second input is **broadcast** (broadcast state) runs one group
per subtask, every group seeing every broadcast row (:mod:`.broadcast`); so does a batch
job's ``keyed.connect(plain)``, its keyed input sorted (:mod:`.half_sorted`).

``broadcast().map(...)`` (or a sink) replicates each row once per subtask (:mod:`.replicate`);
async I/O runs in a stateless stage's event loop (:mod:`.harness`). What cannot be expressed
is refused at translation time (:class:`SparkTranslationError` naming the operator):
broadcast partitioning into a first input, custom watermark generators (Spark's watermark is
a fixed delay). Processing-time timers are refused when registered (known only at run time).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import types
import uuid
from dataclasses import dataclass
from typing import Any

from ..connectors.base import Source
from ..graph import JobGraph, Partitioning, StreamNode
from ..runtime.basic_operators import FilterOperator, MapOperator, UserFunctionOperator
from ..runtime.timestamps import TimestampsAndWatermarksOperator
from ..state.codec import Codec
from .broadcast import broadcast_stage, is_broadcast_stage
from .encoding import KEYED_DDL, ROW_DDL, STATE_DDL
from .exchange import Exchange, exchanged_output
from .half_sorted import half_sorted, half_sorted_stage
from .harness import ChainRunner, NodeSpec
from .key_column import Fused, KeyColumn
from .keyed import KeyedRunner
from .native import (
    LAYOUT_FILE,
    Expr,
    Layout,
    merge_layouts,
    recognise,
    record_value,
    select_result,
    to_column,
    truthy,
)
from .replicate import is_replicated, replicate, sink_input
from .rolling import recognise_rolling, rolling_frame
from .sources import SparkTranslationError, ToBinary, materialize
from .watermarks import SETTINGS, hold_back, stage_event_time, timestamps_expr, watermark_delay
from .window_agg import aggregate_columns, output_frame, recognise_window
from .windows import WindowFirer, feeds_keyed, native_window, window_frame

_log = logging.getLogger(__name__)


@dataclass
class Stream:
    """A node output as a streaming DataFrame of :data:`ROW_DDL` rows."""

    df: Any
    ordered: bool  # rows arrive in input order within each partition (no shuffle yet)
    delay_ms: int | None  # the event-time delay of the watermark strategy upstream, if any
    # a stateless stage's (input DataFrame, runner): a keyed stage right after it runs its key
    # column in the same mapInArrow (one Python pass instead of two)
    stage: tuple[Any, Any] | None = None
    layout: Layout | None = None  # typed record columns (see .native), else the binary ``value``
    native: bool = False  # the node runs as Spark expressions (no Python stage to fuse with)
    ts_range: tuple[int, int] | None = None  # the data rows' ``ts`` bounds (a recognised assigner)
    flat_order: bool = False  # every row's ``order`` is one input position, ``[seq]``
    no_ts: bool = False  # no data row carries a timestamp (only end-of-input rows do)
    stateful: int = 0  # stateful Spark operators in ``df`` since the last exchange (Spark allows one)
    python: bool = False  # ``df`` runs user functions in a Python stage since the last exchange (.exchange)
    min_watermark: bool = False  # event time: the minimum of several withWatermark nodes (.watermarks)
    reads: frozenset[str] = frozenset()  # the exchanges ``df`` reads (their queries run first)
    sides: bool = False  # the input of a two-input operator: a row's ``tag`` is its input, "0"/"1"
    replicas: int = 0  # broadcast partitioning: each row once per subtask, ``tag`` its index (.replicate)


class Translation:
    def __init__(self, spark: Any, graph: JobGraph, codec: Codec, work_dir: str, records_per_batch: int,
                 native_windows: bool = True, native_exprs: bool = True, batch: bool = False,
                 sorted_inputs: bool = True):
        self.spark = spark
        self.native_windows = native_windows
        self.native_exprs = native_exprs
        self.batch = batch  # a batch job: keyed stages run key by key at the end of input (.keyed)
        self.sorted_inputs = sorted_inputs
        self.graph = graph
        self.codec = codec
        self.work_dir = work_dir
        self.records_per_batch = records_per_batch
        self._streams: dict[tuple[int, str | None], Stream] = {}
        self._chains: dict[int, tuple[Stream, list[NodeSpec]]] = {}
        self._exchanged: dict[int, tuple[Any, Stream]] = {}
        self.exchanges: list[Exchange] = []  # in dependency order (an exchange reads earlier ones)
        self.session_settings: dict[str, str] = {}  # Spark settings the queries start with (.watermarks)

    # -- public -----------------------------------------------------------------------
    def sink_streams(self) -> list[tuple[StreamNode, Stream]]:
        """The stream feeding each sink node, in graph order."""
        out = []
        for node in self.graph.nodes:
            if node.is_sink:
                self._check_inputs(node)
                out.append((node, sink_input(node, self._input_of(node), self.graph.parallelism[node.id])))
        return out

    def spec(self, node: StreamNode, side_tags: list[str] | None = None) -> NodeSpec:
        assert node.operator_factory is not None, f"{node!r} is a source, not an operator"
        return NodeSpec(
            name=node.name,
            uid=self.graph.uid_of(node),
            factory=node.operator_factory,
            keyed=node.keyed,
            max_parallelism=node.max_parallelism or 128,
            side_tags=side_tags or [],
        )

    # -- nodes ------------------------------------------------------------------------
    def stream(self, node: StreamNode, tag: str | None = None) -> Stream:
        key = (node.id, tag)
        if key not in self._streams:
            out = self._output(node)
            # a source's or a native stage's rows never carry a side-output tag: no filter
            tagless = tag is None and (node.source is not None or out.native)
            self._streams[key] = dataclasses.replace(out, stage=None) if tagless else self._filter(out, tag)
        return self._streams[key]

    def _output(self, node: StreamNode) -> Stream:
        full = (node.id, "*")
        if full not in self._streams:
            out = self._translate(node)
            why = exchanged_output(self.graph, node, out.stateful, out.python, out.min_watermark)
            if why is not None:  # read by the next queries from chunks written by a query of its own
                out = self._exchange(out, self.graph.uid_of(node), f"operator {node.name!r} ({why})")
            self._streams[full] = out
        return self._streams[full]

    def _exchange(self, stream: Stream, uid: str, what: str) -> Stream:
        """``stream`` written by a query of its own and read back (see :mod:`.exchange`)."""
        if (done := self._exchanged.get(id(stream.df))) is None:
            exchange = Exchange(uid, what, stream.df, os.path.join(self.work_dir, "exchange", uid),
                                stream.layout, stream.reads)
            self.exchanges.append(exchange)
            _log.info("%s is written by a Spark query of its own and read back downstream", what)
            out = dataclasses.replace(stream, df=exchange.read(self.spark), ordered=False, stage=None,
                                      stateful=0, python=False, min_watermark=False, reads=frozenset({uid}))
            done = self._exchanged[id(stream.df)] = (stream.df, out)  # (the df is kept: its id stays unique)
        return done[1]

    def _translate(self, node: StreamNode) -> Stream:
        if node.source is not None:
            return self._source(node, node.source)
        self._check_inputs(node)
        if is_broadcast_stage(node):
            return broadcast_stage(self, node)
        if half_sorted(node, self.batch, self.sorted_inputs):  # keyed.connect(plain) in a batch job
            return half_sorted_stage(self, node)
        if node.keyed:
            return self._keyed(node)
        native = self._native(node)
        if native is not None:
            return native
        stream, specs = self._chain(node)
        runner = ChainRunner(specs, self.codec.encode, self.codec.decode, stream.ordered, stream.layout,
                             stream.sides, stream.replicas)
        df = stream.df.mapInArrow(runner, ROW_DDL)
        return Stream(df, stream.ordered, stream.delay_ms, (stream.df, runner), **_carried(stream, True))

    def _native(self, node: StreamNode) -> Stream | None:
        """The node as Spark expressions over typed columns, if its function is recognised
        (:mod:`.native`); None otherwise."""
        from pyspark.sql import functions as F

        if not self.native_exprs or len(node.inputs) != 1 or self._side_tags(node):
            return None
        (edge,) = node.inputs
        if edge.partitioning in (Partitioning.HASH, Partitioning.BROADCAST) or edge.side_tag is not None:
            return None  # (a side output's rows carry its tag, which a native stage would keep)
        stream = self._input_of(node)
        layout = stream.layout
        factory = node.operator_factory
        if layout is None or factory is None:
            return None
        op = factory.create(0)
        what = f"operator {node.name!r}"
        if type(op) in (MapOperator, FilterOperator):
            assert isinstance(op, UserFunctionOperator)
            fn = op.functions[0]
            if not isinstance(fn, types.FunctionType) or op.is_async:
                return None
            result = recognise(fn, layout, what)
            if result is None:
                return None
            if type(op) is MapOperator:
                df = select_result(stream.df, result)
                out_layout = result.layout(layout)
            else:
                cond = truthy(result)
                if cond is None:
                    return None
                df, out_layout = stream.df.where(F.col("eof") | cond), layout
        elif type(op) is TimestampsAndWatermarksOperator:
            assert isinstance(op, TimestampsAndWatermarksOperator)
            ts = timestamps_expr(op, layout, what)
            if ts is None:
                return None
            df = stream.df.withColumn("ts", F.when(F.col("eof"), F.col("ts")).otherwise(to_column(ts)))
            _log.info("%s runs natively on Spark", what)
            delay = own if (own := watermark_delay(node)) is not None else stream.delay_ms
            return Stream(df, stream.ordered, delay, None, layout, True, (ts.lo, ts.hi), stream.flat_order,
                          **_carried(stream))
        else:
            return None
        _log.info("%s runs natively on Spark", what)
        return Stream(df, stream.ordered, stream.delay_ms, None, out_layout, True, stream.ts_range,
                      stream.flat_order, stream.no_ts, **_carried(stream))

    def _chain(self, node: StreamNode) -> tuple[Stream, list[NodeSpec]]:
        """The stage input and the fused operators ending with ``node``."""
        if node.id in self._chains:
            return self._chains[node.id]
        spec = self.spec(node, self._side_tags(node))
        spec_delay = watermark_delay(node)
        up = self._fusable_upstream(node)
        if is_replicated(node):  # a chain of its own, one copy per subtask (.replicate)
            spec.parallelism = self.graph.parallelism[node.id]
            result = (replicate(_with_delay(self._input_of(node), spec_delay), spec.parallelism), [spec])
        elif (
            up is not None
            and node.inputs[0].partitioning is not Partitioning.HASH
            and not self._output(up).native
        ):
            stream, specs = self._chain(up)
            if stream.replicas:  # fused after a broadcast consumer: plays its subtask (.replicate)
                spec.parallelism = self.graph.parallelism[node.id]
            result = (_with_delay(stream, spec_delay), [*specs, spec])
        else:
            result = (_with_delay(self._input_of(node), spec_delay), [spec])
        self._chains[node.id] = result
        return result

    def _keyed(self, node: StreamNode) -> Stream:
        from pyspark.sql import functions as F
        from pyspark.sql.streaming.state import GroupStateTimeout

        edges = node.inputs
        two_input = _two_input(node)
        selectors = [{id(e.key_selector): e.key_selector for e in edges if e.input_index == i}
                     for i in range(2 if two_input else 1)]
        key_selectors = [k for s in selectors if len(s) == 1 for k in s.values() if k is not None]
        if len(key_selectors) != len(selectors):
            raise SparkTranslationError(
                f"operator {node.name!r}: the Spark engine needs one key selector for all inputs of a "
                "keyed operator (one per side of a connect())"
            )
        stream = self._input_of(node)
        if stream.stateful:  # (an upstream stateful stage exchanges its output: see _output)
            stream = self._exchange(stream, f"{self.graph.uid_of(node)}-input", f"the input of {node.name!r}")
        event_time = stream.delay_ms is not None
        native = self.native_windows and not self.batch  # a batch job's windows fire key by key
        window = native_window(self.graph, node) if event_time and native else None
        native_key = None
        if (stream.layout is not None and self.native_exprs and not two_input
                and (window is not None or not event_time)):
            native_key = self._native_key(node, stream.layout, key_selectors[0])
        layout = stream.layout if native_key is not None else None
        if native_key is not None:
            keyed = stream.df.withColumn("key", F.when(~F.col("eof"), to_column(native_key)))  # null: eof
        else:
            key_column = KeyColumn(key_selectors, self.codec, markers=window is None, layout=stream.layout)
            keyed = self._keyed_input(node, stream, key_column)
        if window is not None:
            assert stream.delay_ms is not None
            # (the end-of-input row stays in the aggregation: an exchange downstream appends one)
            stateful: dict[str, Any] = {"stateful": 1, "reads": stream.reads}
            if native_key is not None and layout is not None:
                key = dataclasses.replace(native_key, tree=("col", "key"))
                agg = recognise_window(window, layout, key, stream.ts_range, f"window {node.name!r}",
                                       node.declared_types.get(None))
                if agg is not None:
                    frame = window_frame(keyed, window, stream.delay_ms, [], aggregate_columns(agg),
                                         stream.flat_order)
                    return Stream(output_frame(frame, agg), False, stream.delay_ms, None,
                                  agg.layout(layout.count), True, **stateful)
            firer = WindowFirer(self.spec(node, self._side_tags(node)), self.codec.encode, self.codec.decode,
                                uuid.uuid4().hex, layout)
            frame = window_frame(keyed, window, stream.delay_ms, layout.columns if layout else ["value"],
                                 flat_order=stream.flat_order and layout is not None)
            return Stream(frame.mapInArrow(firer, ROW_DDL), False, stream.delay_ms, **stateful)
        rolling_ok = window is None and not event_time and not self.batch  # (a batch reduce is not rolling)
        if native_key is not None and layout is not None and rolling_ok:
            assert node.operator_factory is not None
            rolling = recognise_rolling(node.operator_factory.create(0), layout, f"operator {node.name!r}")
            if rolling is not None:
                parts, out_layout = rolling
                tree = native_key.tree
                field = tree[1] if tree[0] == "col" and tree[1] in layout.columns else None
                df = rolling_frame(stream.df, to_column(native_key), field, parts, layout, stream.flat_order,
                                   not stream.no_ts)
                return Stream(df, False, None, None, out_layout, flat_order=stream.flat_order,
                              no_ts=stream.no_ts, stateful=1, reads=stream.reads)
        keyed = stage_event_time(keyed, self.batch, stream.delay_ms)
        runner = KeyedRunner(
            self.spec(node, self._side_tags(node)),
            self.codec.encode,
            self.codec.decode,
            self.codec.encode,
            self.codec.decode,
            event_time,
            uuid.uuid4().hex,
            layout,
            self.batch,
            self.sorted_inputs,
            two_input,
        )
        timed = event_time or self.batch
        timeout = GroupStateTimeout.EventTimeTimeout if timed else GroupStateTimeout.NoTimeout
        df = keyed.groupBy("key").applyInPandasWithState(runner, ROW_DDL, STATE_DDL, "append", timeout)
        return Stream(df, False, stream.delay_ms, stateful=1, reads=stream.reads)

    @staticmethod
    def _native_key(node: StreamNode, layout: Layout, selector: Any) -> Expr | None:
        """The key expression of a recognised key selector (one str, int or bool field), else None."""
        if not isinstance(selector, types.FunctionType):
            return None
        result = recognise(selector, layout, f"the key selector of {node.name!r}")
        if result is None or result.is_tuple or (result.identity and layout.is_tuple):
            return None
        if (key := record_value(layout) if result.identity else result.exprs[0]).kind == "float":
            return None  # a float key stays Python's (its hash and equality)
        _log.info("the key selector of %r runs natively on Spark", node.name)
        return key

    def _keyed_input(self, node: StreamNode, stream: Stream, key_column: KeyColumn) -> Any:
        """The keyed stage's input with its key column; fused into the stateless stage before
        it when that stage feeds only this one (its outputs then carry no side-output tag)."""
        up = self._fusable_upstream(node)
        if up is not None:
            stage = self._output(up).stage
            if stage is not None:
                return stage[0].mapInArrow(Fused(stage[1], key_column), KEYED_DDL)
        return stream.df.mapInArrow(key_column, KEYED_DDL)

    def _fusable_upstream(self, node: StreamNode) -> StreamNode | None:
        """The stateless, non-source operator that is ``node``'s only input and feeds only
        ``node`` through its main output: the stage ``node`` may fuse into; else None."""
        if len(node.inputs) != 1:
            return None
        edge = node.inputs[0]
        up = edge.upstream
        if (
            edge.side_tag is not None
            or up.source is not None
            or up.keyed
            or len(self.graph.consumers[up.id]) != 1
            or self._side_tags(up)
        ):
            return None
        return up

    def _input_of(self, node: StreamNode) -> Stream:
        streams = [self.stream(e.upstream, e.side_tag) for e in node.inputs]
        if _two_input(node):  # each row names the input it feeds (.keyed.KeyedRunner reads it)
            from pyspark.sql import functions as F

            streams = [dataclasses.replace(s, df=s.df.withColumn("tag", F.lit(str(e.input_index))),
                                           stage=None) for s, e in zip(streams, node.inputs, strict=True)]
        if len(streams) == 1:
            return streams[0]
        if sum(s.stateful for s in streams) > 1:  # one stateful operator per query
            uid = self.graph.uid_of(node)
            streams = [self._exchange(s, f"{uid}-in{i}", f"input {i} of {node.name!r}") if s.stateful else s
                       for i, s in enumerate(streams)]
        layout = merge_layouts([s.layout for s in streams])
        dfs = [s.df if layout is not None or s.layout is None else
               s.df.mapInArrow(ToBinary(s.layout, self.codec), ROW_DDL) for s in streams]
        timed = self.batch or any(s.delay_ms is not None for s in streams)
        if held := timed and (node.keyed or feeds_keyed(self.graph, node)):
            # the union's watermark is the minimum over its inputs, not the fastest one's (.watermarks);
            # a batch job's keys end when every input has ended
            _log.info("the inputs of %r have a watermark each; the union's is their minimum", node.name)
            self.session_settings.update(SETTINGS)
            dfs = [hold_back(df, None if self.batch else s.delay_ms)
                   for df, s in zip(dfs, streams, strict=True)]
        df = dfs[0]
        for other in dfs[1:]:
            df = df.unionByName(other)
        delays = [s.delay_ms for s in streams if s.delay_ms is not None]
        return Stream(df, False, min(delays) if delays else None, None, layout,
                      flat_order=all(s.flat_order for s in streams), no_ts=all(s.no_ts for s in streams),
                      stateful=sum(s.stateful for s in streams), python=any(s.python for s in streams),
                      reads=frozenset().union(*(s.reads for s in streams)), sides=_two_input(node),
                      min_watermark=(held and not self.batch) or any(s.min_watermark for s in streams))

    # -- sources ----------------------------------------------------------------------
    def _source(self, node: StreamNode, source: Source) -> Stream:
        from ..connectors.kafka_source import KafkaSource

        if node.watermark_alignment is not None:  # (a micro-batch reads each source to its offsets)
            _log.warning("%s: watermark alignment (group %r) does not pace sources on the Spark engine",
                         node.name, node.watermark_alignment[0])  # fmt: skip
        if isinstance(source, KafkaSource):  # a Spark streaming source of its own
            from .kafka import kafka_stream

            # with a watermark strategy, one watermark per partition: the minimum over them (.watermarks)
            df, delay, per_partition = kafka_stream(self.spark, source, self.codec, self.records_per_batch,
                                                    not self.batch)
            if per_partition:
                self.session_settings.update(SETTINGS)
            return Stream(df, True, delay, min_watermark=per_partition)
        directory = os.path.join(self.work_dir, "input", self.graph.uid_of(node))
        if not os.path.exists(os.path.join(directory, "_COMPLETE")):
            materialize(source, directory, self.codec, self.records_per_batch, self.native_exprs)
        layout = None
        if os.path.exists(os.path.join(directory, LAYOUT_FILE)):
            with open(os.path.join(directory, LAYOUT_FILE)) as f:
                layout = Layout.from_json(f.read())
        df = (
            self.spark.readStream.schema(layout.ddl() if layout else ROW_DDL)
            .option("maxFilesPerTrigger", 1)
            .parquet(directory)
        )
        # a materialized source: orders are ``[seq]``, data rows have no timestamp
        return Stream(df, True, None, None, layout, flat_order=True, no_ts=True)

    # -- helpers ----------------------------------------------------------------------
    def _side_tags(self, node: StreamNode) -> list[str]:
        return sorted({e.side_tag for _n, e in self.graph.consumers.get(node.id, []) if e.side_tag})

    def _filter(self, stream: Stream, tag: str | None) -> Stream:
        from pyspark.sql import functions as F
        cond = F.col("tag").isNull() if tag is None else (F.col("tag") == F.lit(tag))
        return dataclasses.replace(stream, df=stream.df.where(cond | F.col("eof")), stage=None)

    def _check_inputs(self, node: StreamNode) -> None:
        broadcast = any(e.partitioning is Partitioning.BROADCAST for e in node.inputs)
        if broadcast and not is_broadcast_stage(node) and not is_replicated(node):
            raise SparkTranslationError(
                f"operator {node.name!r}: broadcast partitioning has a Spark equivalent only into a "
                "one-input operator or sink, or as the second input of a two-input operator"
            )


def _two_input(node: StreamNode) -> bool:
    """Whether ``node`` is a two-input operator (``connect()``): an edge feeds its second input."""
    return any(e.input_index for e in node.inputs)


def _carried(stream: Stream, python: bool = False) -> dict[str, Any]:
    """What a stateless stage's output keeps of its input's bookkeeping (``python``: it runs Python)."""
    return {"stateful": stream.stateful, "python": stream.python or python, "reads": stream.reads,
            "min_watermark": stream.min_watermark}


def _with_delay(stream: Stream, delay: int | None) -> Stream:
    return stream if delay is None else dataclasses.replace(stream, delay_ms=delay)

