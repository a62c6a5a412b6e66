"""Bounded sources on Spark: read once by the driver and written as numbered Parquet chunks.

The driver reads the source through its own ``SourceReader`` and writes chunks of
``records_per_chunk`` records, the last of which ends with the end-of-input marker row (see
:mod:`.plan`); Spark streams them in order, one per micro-batch (``maxFilesPerTrigger=1``;
the file source orders files by modification time, so each chunk gets a distinct one).
Records that are all plain tuples of one shape of str/int/bool (or scalars of one such type)
are written as typed columns with their :class:`~.native.Layout` beside them; anything else
is encoded by the job's codec into the ``value`` column.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

from ..connectors.base import END, Source
from ..graph import GraphError
from ..state.codec import Codec
from .encoding import batch_codec, row_schema
from .harness import EOF_ORDER, EOF_TS
from .native import LAYOUT_FILE, ZERO, Layout, Typer, records_from_arrow

_log = logging.getLogger(__name__)


class SparkTranslationError(GraphError):
    """The job uses something the Spark engine cannot express; the message names it."""


class ToBinary:
    """``mapInArrow``: typed record columns to the binary ``value`` column (for a union of
    streams whose records are stored differently)."""

    def __init__(self, layout: Layout, codec: Codec) -> None:
        self.layout = layout
        self.codec = codec

    def __call__(self, batches: Any) -> Any:
        encode_many, _decode_many = batch_codec(self.codec.encode, self.codec.decode)
        for batch in batches:
            yield _binary_batch(batch, self.layout, encode_many)


def _binary_batch(batch: Any, layout: Layout, encode_many: Callable[[list], list[bytes]]) -> Any:
    import pyarrow as pa

    eofs = batch.column("eof").to_pylist()
    records = records_from_arrow(batch, layout)
    values = [b"" if e else v for e, v in
              zip(eofs, encode_many([None if e else r for e, r in zip(eofs, records, strict=True)]),
                  strict=True)]
    base = [batch.column(c) for c in ("order", "ts", "tag", "eof")]
    return pa.RecordBatch.from_arrays([*base, pa.array(values, pa.binary())], schema=row_schema())


def materialize(source: Source, directory: str, codec: Codec, records_per_chunk: int,
                typed: bool = True) -> int:
    """Reads a bounded source to Parquet chunks (then an end marker); returns the record count.

    With ``typed``, records that are all tuples of one shape of str/int/bool fields (or all
    scalars of one such type) are written as typed columns and their layout to
    ``LAYOUT_FILE`` (see :mod:`.native`); the first record that does not fit turns the chunks
    written so far into encoded ones, and the rest follows encoded."""
    import shutil

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not getattr(source, "bounded", True):
        raise SparkTranslationError(
            f"source {source!r} is unbounded and has no Spark streaming source of its own"
        )
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    encode_many, _decode_many = batch_codec(codec.encode, codec.decode)
    typer = Typer() if typed else None
    state = {"chunk": 0, "seq": 0}

    def path_of(n: int) -> str:
        return os.path.join(directory, f"part-{n:06d}.parquet")

    def write(n: int, table: Any) -> None:
        path = path_of(n)
        pq.write_table(table, path)
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # Spark orders new files by mtime

    def untype() -> None:
        """The typed chunks written so far, rewritten encoded (a record did not fit)."""
        assert typer is not None
        layout = typer.layout(ignore_failure=True)
        _log.info("source %r: records are not typed columns (%s); encoding them", source, typer.failed)
        if layout is None:
            return
        for n in range(state["chunk"]):
            table = pq.read_table(path_of(n))
            batches = [_binary_batch(b, layout, encode_many) for b in table.to_batches()]
            write(n, pa.Table.from_batches(batches, row_schema()))

    def emit(records: list, last: bool = False) -> None:
        """One chunk; the last one ends with the end-of-input row (no micro-batch of its own)."""
        start, n = state["seq"], len(records)
        state["seq"] = start + n
        orders = pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)),
                                          pa.array(np.arange(start, start + n, dtype=np.int64)))
        base = [orders, pa.nulls(n, pa.int64()), pa.nulls(n, pa.string()), pa.array(np.zeros(n, dtype=bool))]
        columns = None
        if typer is not None and typer.failed is None and records:
            columns = typer.columns(records)
            if columns is None:
                untype()
        # None once typing failed; the count is final when the last chunk is written
        layout = typer.layout(count=start + n) if typer is not None else None
        if layout is not None:
            schema = layout.arrow_schema()
            typed = columns if columns is not None else [[] for _ in layout.fields]
            arrays = [pa.array(c, t) for c, t in zip(typed, schema.types[4:], strict=True)]
            table = pa.table([*base, *arrays], schema=schema)
        else:
            schema = row_schema()
            table = pa.table([*base, pa.array(encode_many(records), pa.binary())], schema=schema)
        if last:
            record = [pa.array([b""])]
            if layout is not None:
                types = schema.types[4:]
                record = [pa.array([ZERO[f.kind]], t) for f, t in zip(layout.fields, types, strict=True)]
            eof = [pa.array([EOF_ORDER], pa.list_(pa.int64())), pa.array([EOF_TS], pa.int64()),
                   pa.nulls(1, pa.string()), pa.array([True]), *record]
            table = pa.concat_tables([table, pa.table(eof, schema=schema)])
            if layout is not None:
                with open(os.path.join(directory, LAYOUT_FILE), "w") as f:
                    f.write(layout.to_json())
        chunk = state["chunk"]
        write(chunk, table)
        state["chunk"] = chunk + 1

    async def read_all() -> None:
        reader = source.create_reader(0, 1)
        wake = asyncio.Event()
        await reader.start(wake.set)
        pending: list[Any] = []
        try:
            while True:
                polled = reader.poll_batch(records_per_chunk)
                if polled is END:
                    break
                if polled is None:
                    await wake.wait()
                    wake.clear()
                    continue
                assert isinstance(polled, list)
                pending.extend(polled)
                while len(pending) > records_per_chunk:  # the last chunk waits for the end row
                    chunk, pending[:] = pending[:records_per_chunk], pending[records_per_chunk:]
                    emit(chunk)
        finally:
            await reader.close()
        emit(pending, last=True)

    asyncio.run(read_all())
    layout = typer.layout() if typer is not None else None
    with open(os.path.join(directory, "_COMPLETE"), "w") as f:
        f.write(str(state["seq"]))
    _log.info("materialized %d records of %r into %d chunks at %s (%s)", state["seq"], source, state["chunk"],
              directory, "typed columns" if layout is not None else "encoded")
    return state["seq"]
