"""The row layout every translated stage reads and writes (see :mod:`.harness`)."""

from __future__ import annotations

from typing import Any

ROW_COLUMNS = ["order", "ts", "tag", "eof", "value"]
ROW_DDL = "order array<long>, ts long, tag string, eof boolean, value binary"
KEYED_DDL = ROW_DDL + ", key binary"
STATE_DDL = "snapshot binary"


def row_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("order", pa.list_(pa.int64())),
            ("ts", pa.int64()),
            ("tag", pa.string()),
            ("eof", pa.bool_()),
            ("value", pa.binary()),
        ]
    )


def rows_to_arrow(rows: list[tuple]) -> Any:
    """``(order, ts, tag, eof, value)`` tuples as one Arrow record batch."""
    import pyarrow as pa

    schema = row_schema()
    cols: list[Any] = list(zip(*rows, strict=True)) if rows else [() for _ in ROW_COLUMNS]
    arrays = [pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def keyed_schema() -> Any:
    import pyarrow as pa

    return row_schema().append(pa.field("key", pa.binary()))
