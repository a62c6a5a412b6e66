"""The row layout every translated stage reads and writes (see :mod:`.harness`), and the
job codec applied to whole columns.

:func:`batch_codec` encodes and decodes a list of values at once. For the default
``MsgpackCodec`` it pauses the cyclic GC once per list instead of once per value and calls
msgpack directly (the per-value context manager and wrapper cost more than the packing of a
small record); any failure falls back to the codec's own per-value path, which raises its
precise error (the type and place of an unsupported value). Other codecs are called per value.
"""

from __future__ import annotations

from collections.abc import Callable
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


def batch_codec(encode: Callable[[Any], bytes], decode: Callable[[bytes], Any],
                ) -> tuple[Callable[[list], list[bytes]], Callable[[list], list]]:
    """``(encode_many, decode_many)`` for the job codec's ``encode`` and ``decode`` (see the
    module docstring)."""
    from ..state import codec as mp

    codec = getattr(decode, "__self__", None)
    if type(codec) is not mp.MsgpackCodec or getattr(encode, "__self__", None) is not codec:
        return (lambda objs: [encode(o) for o in objs]), (lambda data: [decode(d) for d in data])
    assert isinstance(codec, mp.MsgpackCodec)
    hook = codec._decoder.list_hook
    unpackb, ext_hook = mp.msgpack.unpackb, mp._ext_hook

    def encode_many(objs: list) -> list[bytes]:
        pack = mp._PACKER.pack
        try:
            with mp._gc_paused():
                return [pack(o) for o in objs]
        except Exception:  # the per-value path below raises the precise error
            return [encode(o) for o in objs]

    def decode_many(data: list) -> list:
        try:
            with mp._gc_paused():
                return [unpackb(d, ext_hook=ext_hook, list_hook=hook, strict_map_key=False, raw=False,
                                timestamp=0) for d in data]
        except Exception:  # the per-value path below raises the precise error
            return [decode(d) for d in data]

    return encode_many, decode_many


def order_column(prefix: list[int], count: int) -> Any:
    """``[*prefix, 0]``, ``[*prefix, 1]``, ... ``count`` times, as an Arrow list<long> array."""
    import numpy as np
    import pyarrow as pa

    width = len(prefix) + 1
    values = np.empty((count, width), dtype=np.int64)
    values[:, :-1] = prefix
    values[:, -1] = np.arange(count, dtype=np.int64)
    offsets = np.arange(0, count * width + 1, width, dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.ravel()))


def sort_by_order(orders: Any) -> Any:
    """The indices that sort an Arrow list<long> column lexicographically (numpy, when every
    order has the same length; Python's list comparison otherwise)."""
    import numpy as np

    n = len(orders)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    offsets = orders.offsets.to_numpy()
    lengths = np.diff(offsets)
    if (lengths == lengths[0]).all() and lengths[0] > 0:
        flat = orders.values.to_numpy()[offsets[0]:offsets[-1]].reshape(n, int(lengths[0]))
        return np.lexsort(flat.T[::-1])
    py = orders.to_pylist()
    return np.array(sorted(range(n), key=py.__getitem__), dtype=np.int64)


def encode_keys(keys: list, encode_many: Callable[[list], list[bytes]],
                encode: Callable[[Any], bytes]) -> list[bytes]:
    """The key column of a keyed stage: the encoded keys, which Spark groups by, so keys that
    are equal in Python must give equal bytes: each key is encoded as the representative of
    its equality class (:func:`~.group_keys.group_key`: ``1``, ``1.0`` and ``True`` alike; an
    unhashable key as its canonical stand-in). Keys that are all ``str``, ``int``, ``bytes``
    or None are their own representatives and pay one ``set(map(type, keys))``."""
    from .group_keys import group_key, is_plain

    if not is_plain(set(map(type, keys))):
        keys = [group_key(k, encode) for k in keys]
    return encode_many(keys)
