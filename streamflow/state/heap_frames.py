"""Frames of the heap backend's incremental state files, per slice of writes (``incremental.py``).

Theory of operation
-------------------
A slice of logged writes becomes a ``del`` frame (its deletions) and a ``put``
frame (keys and whole values) (:func:`slice_frames`), or one *patch frame*.

Patch frames: only the fields that changed. The keyed ``sum`` (``min``, ``max``)
of a tuple field replaces a key's accumulator ``acc`` with ``(acc[0], ...,
acc[n] + r[n], ..., acc[k])``: every field but ``n`` is carried over, the very
same object. When a logged batch holds only such replacements of keys already in
the table (the operator vouches for it: ``Changes.extend(..., patch=n)``, which logs field ``n`` only, see
``runtime/keyed_operators.py``), a delta needs only the keys and field ``n``: a
patch frame ``[state, "patch", keys, [n], [column of field n]]`` (a restore takes
several fields too)
instead of a ``put`` frame of whole values. Each column is packed as any column
(``heap_columns.py``: a column of ints is one msgspec pass), so the round trip
stays exact.

Why a restore can apply it: every key of a patch frame was in the table when its
batch was folded, and so its whole value was written earlier in the chain (in the
base, or in a ``put`` frame of this or an earlier delta: a key's first record is
logged whole), and no write since changed the carried fields. A restore applies
frames in order, so when it reaches the patch frame the table holds that earlier
value, and the patched tuple ``(old[0], ..., new, ..., old[k])`` equals the live one.
Restores at another parallelism filter a patch frame's keys by key group as they
do a ``put`` frame's: a key's earlier value is in the same subtask's chain.

A patch of a key the table does not hold, or whose value is not a tuple long
enough, means a chain that is not what its writer wrote: the restore fails with
``ValueError`` naming the key (never a silently wrong value).

Key-first frames: the key written once. The keyed sum keyed by field 0
(``key_by(lambda e: e[0]).sum(1)``) stores each key's first record, whose field 0
is the key, the very object (the key selector returned it), and carries that
field ever after. Its writer vouches for it (``Changes.key_first``, with
``shape``), so a slice of whole values is written as ``[state, "putk", keys,
fields]``: the key column once, and fields 1.. of the tuples column-wise (a
``T`` column of ``shape - 1`` fields, ``heap_columns.py``); a restore rebuilds
``(key, *fields)``, the key object itself as field 0, exactly what the live table
held (the same object for both). Checking the identity instead of trusting the
writer (``all(map(is_, keys, column 0))``) costs about what writing the column
saves (docs/performance.md), so only a writer that knows writes these frames.
A column that the strict packers refuse (e.g. an Enum field) falls back to a
``put`` frame. Builds before these frames fail on them with "unknown frame 'putk'".
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress, repeat
from operator import countOf, is_, itemgetter
from typing import Any

from .changes import MISSING
from .codec import Codec
from .heap_columns import (
    pack_column,
    pack_column_typed,
    pack_fields,
    packb,
    types_of,
    unpack_column,
    unpack_fields,
)

__all__ = ["apply_patch", "key_first_values", "patch_frame", "slice_frames"]

_MUTABLE = frozenset({list, dict, set, bytearray})


def slice_frames(
    table: str,
    keys: list,
    values: list,
    deletes: bool,
    unique: bool,
    codec: Codec,
    key_types: set[type],
    shape: int | None = None,
    key_first: bool = False,
) -> list[bytes]:
    """The frames of one slice of writes, oldest first. A key written more than once in the
    slice is written once (its last value) when the slice holds a deletion (a ``del`` and a
    ``put`` frame are not ordered against each other) or mutable values (each logged write
    refers to the same object, which holds its latest value: encoding it once per write
    would cost the square of a growing list's length). ``shape``: every value that is not
    a deletion is a tuple of that length (``Changes.shape``: no pass reads their types);
    ``key_first``: and its field 0 is its key (``Changes.key_first``: a "putk" frame)."""
    value_types: set[type] = {tuple, type(MISSING)} if shape else types_of(values)
    has_deletes = deletes and any(map(is_, values, repeat(MISSING, len(values))))
    if not unique and (has_deletes or not _MUTABLE.isdisjoint(value_types)):
        last = dict(zip(keys, values, strict=True))
        keys, values = list(last), list(last.values())
        value_types = {tuple, type(MISSING)} if shape else types_of(values)
    if shape and not has_deletes:
        value_types.discard(type(MISSING))
    frames = []
    if has_deletes:
        present = [v is not MISSING for v in values]
        dels = [k for k, p in zip(keys, present, strict=True) if not p]
        frames.append(packb([table, "del", pack_column(dels, codec)]))
        keys, values = list(compress(keys, present)), list(compress(values, present))
        value_types.discard(type(MISSING))
    if keys:
        packed_keys, types = pack_column_typed(keys, codec)
        key_types |= types
        rest = pack_fields(values, range(1, shape)) if key_first and shape and shape > 1 else None
        if rest is not None:  # the key once (module doc)
            frames.append(packb([table, "putk", packed_keys, rest]))
        else:
            packed = pack_column_typed(values, codec, value_types, shape or None)[0]
            frames.append(packb([table, "put", packed_keys, packed]))
    return frames


def key_first_values(keys: list, frame: list) -> list[tuple]:
    """The values of a "putk" frame (``keys``: its keys, decoded): ``(key, *fields)``."""
    fields = unpack_fields(frame[3])
    if not fields or any(len(f) != len(keys) for f in fields):
        raise ValueError(f"a putk frame of {len(keys)} keys with fields of {[len(f) for f in fields]}")
    return list(zip(keys, *fields, strict=True))


def patch_frame(
    table: str, keys: list, column: list, field: int, codec: Codec, key_types: set[type]
) -> bytes:
    """The patch frame of one slice: ``keys`` and ``column``, each key's new value of tuple
    field ``field`` (module doc). Adds the keys' types to ``key_types``."""
    packed_keys, types = pack_column_typed(keys, codec)
    key_types |= types
    return packb([table, "patch", packed_keys, [field], [pack_column_typed(column, codec)[0]]])


def apply_patch(
    table: dict, keys: list, frame: list, codec: Codec, keep: Callable[[Any], bool] | None
) -> None:
    """Apply a patch frame to ``table`` (``keys``: its keys, decoded); ``keep``: which keys to
    apply (None: all)."""
    fields: list[int] = frame[3]
    columns = [unpack_column(c, codec) for c in frame[4]]
    if len(fields) != len(columns) or any(len(c) != len(keys) for c in columns):
        raise ValueError(f"a patch frame of {len(keys)} keys with columns of {[len(c) for c in columns]}")
    if not fields or not all(type(f) is int and f >= 0 for f in fields):
        raise ValueError(f"a patch frame of fields {fields!r}")
    if keep is not None:
        mask = list(map(keep, keys))
        keys = list(compress(keys, mask))
        columns = [list(compress(c, mask)) for c in columns]
    if not keys:
        return
    try:
        old = list(map(table.__getitem__, keys))
    except KeyError as exc:
        raise ValueError(f"a patch of key {exc.args[0]!r}, which the restored state does not hold") from None
    arity = len(old[0]) if type(old[0]) is tuple else 0
    same = arity > max(fields) and countOf(map(type, old), tuple) == len(old)
    if same and countOf(map(len, old), arity) == len(old):
        # column-wise, all in C: the old tuples' fields, the patched ones replaced, zipped back
        parts = [list(map(itemgetter(i), old)) for i in range(arity)]
        for f, column in zip(fields, columns, strict=True):
            parts[f] = column
        table.update(zip(keys, zip(*parts, strict=True), strict=True))
        return
    top = max(fields)
    for i, (key, value) in enumerate(zip(keys, old, strict=True)):
        if type(value) is not tuple or len(value) <= top:
            raise ValueError(f"a patch of fields {fields} of key {key!r}, whose value is {value!r}")
        patched = list(value)
        for f, column in zip(fields, columns, strict=True):
            patched[f] = column[i]
        table[key] = tuple(patched)
