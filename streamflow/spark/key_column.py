"""The key column of a keyed stage: ``mapInArrow`` functions that run in Spark's Python workers.

Theory of operation
-------------------
A keyed operator on Spark runs as ``groupBy(key).applyInPandasWithState``
(``plan.py``); its input needs a ``key`` column, the key selector's result encoded by
the job's codec. :class:`KeyColumn` adds it, batch by batch, in the workers, and
keeps Spark's event-time watermark where streamflow wants it: Spark drops a stateful
operator's input rows at or below the previous micro-batch's watermark, but
streamflow's operators decide lateness themselves (allowed lateness, late-data side
outputs), so data rows carry no event time for Spark; one marker row per batch
(key ``b""``, tag ``WATERMARK_TAG``) carries the batch's highest timestamp instead.
:class:`Fused` runs a stateless stage's function and the key column in one
``mapInArrow`` (one Python pass instead of two).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..state.codec import Codec
from .encoding import batch_codec, encode_keys, keyed_schema
from .harness import WATERMARK_TAG
from .native import Layout, records_from_arrow

__all__ = ["Fused", "KeyColumn"]


class Fused:
    """Two ``mapInArrow`` functions as one."""

    def __init__(self, first: Callable[[Any], Any], second: Callable[[Any], Any]) -> None:
        self.first, self.second = first, second

    def __call__(self, batches: Any) -> Any:
        return self.second(self.first(batches))


class KeyColumn:
    """``mapInArrow``: adds the encoded key of every row, and one watermark row per batch.

    Spark drops a stateful operator's input rows whose event time is at or below the
    previous micro-batch's watermark; streamflow's operators decide lateness themselves
    (allowed lateness, late-data side outputs), so data rows carry no event time for Spark.
    Instead each batch gets one marker row (key ``b""``, not end-of-input) whose event
    time is the batch's highest timestamp: Spark's watermark follows the data exactly as
    before, and no data row is ever dropped. The end-of-input row keeps its event time.
    Typed input (``layout``) leaves encoded: the record's columns become ``value``.
    A two-input operator's stage has a key selector per input (``key_selectors``): a row's
    ``tag`` names its input (``"0"``/``"1"``, set by the translation).
    """

    def __init__(self, key_selectors: list[Callable[[Any], Any]], codec: Codec, markers: bool = True,
                 layout: Layout | None = None,
                 group_keys: Callable[[list], list[bytes]] | None = None) -> None:
        self.key_selectors = key_selectors
        self.codec = codec
        self.markers = markers  # False: data rows keep their event time (native windows)
        self.layout = layout
        self.group_keys = group_keys  # the key column from the selectors' results (default: encoded)

    def __call__(self, batches: Any) -> Any:
        import pyarrow as pa

        schema = keyed_schema()
        encode_many, decode_many = batch_codec(self.codec.encode, self.codec.decode)
        for batch in batches:
            eofs = batch.column("eof").to_pylist()
            data = [i for i, e in enumerate(eofs) if not e]
            everything = len(data) == len(eofs)
            if self.layout is None:
                values = batch.column("value").to_pylist()
                records = decode_many(values if everything else [values[i] for i in data])
            else:
                typed = records_from_arrow(batch, self.layout)
                records = typed if everything else [typed[i] for i in data]
                encoded = encode_many(records)
                values = encoded if everything else [b""] * len(eofs)
                if not everything:
                    for i, v in zip(data, encoded, strict=True):
                        values[i] = v
            if len(self.key_selectors) == 1:
                keys_of = list(map(self.key_selectors[0], records))
            else:  # a two-input operator: each row's own input's key selector
                tags = batch.column("tag").to_pylist()
                sides = tags if everything else [tags[i] for i in data]
                keys_of = [self.key_selectors[side == "1"](r) for r, side in zip(records, sides, strict=True)]
            if self.group_keys is not None:
                encoded_keys = self.group_keys(keys_of)
            else:
                encoded_keys = encode_keys(keys_of, encode_many, self.codec.encode)
            if everything:
                keys = encoded_keys
            else:
                keys = [b""] * len(eofs)
                for i, k in zip(data, encoded_keys, strict=True):
                    keys[i] = k
            base = [batch.column(c) for c in ("order", "ts", "tag", "eof")]
            arrays = [*base, pa.array(values, pa.binary()), pa.array(keys, pa.binary())]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)
            if not self.markers:
                if batch.column("ts").null_count:
                    raise ValueError(
                        "an event-time window needs record timestamps: call assign_timestamps_and_"
                        "watermarks() (or from_source with a WatermarkStrategy) upstream"
                    )
                continue
            tss = batch.column("ts").to_pylist()
            stamped = [t for t, e in zip(tss, eofs, strict=True) if t is not None and not e]
            if stamped:
                marker = [[[-1]], [max(stamped)], [WATERMARK_TAG], [False], [b""], [b""]]
                yield pa.RecordBatch.from_arrays(
                    [pa.array(c, f.type) for c, f in zip(marker, schema, strict=True)], schema=schema
                )
