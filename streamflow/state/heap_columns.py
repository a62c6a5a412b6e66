"""Columns of the heap backend's incremental state files: exact, cheapest encoder first.

Theory of operation
-------------------
A frame of a heap state file (``incremental.py``) holds a column of keys and a
column of values. Each column is packed by the first of these encoders that
accepts it, and tagged with a letter so a restore decodes it the same way.

* ``S``: every value is a scalar (exactly ``str``, ``int`` within 64 bits,
  ``float``, ``bool``, ``None`` or ``bytes``): msgspec's encoder, one C pass
  (4x faster than msgpack's strict packer on strings); decoded untyped.
* ``U``: tuples of differing lengths whose elements are all such scalars:
  msgspec packs the tuples as arrays in one C pass, decoded as
  ``list[tuple]``. The elements' types are read in one pass of C calls (see
  :func:`_scalar_fields`); msgspec would pack an Enum, a Decimal, a UUID, a
  date, a set or a nested tuple as something else, so such a column never takes
  this path.
* ``P``: msgpack's C packer in strict mode (nested lists and dicts of plain
  types; strict mode refuses tuples and subclasses).
* ``T``: same-length tuples, packed field by field: each field's column (an
  ``itemgetter`` pass) is packed by ormsgpack in strict mode (:func:`strict_pack`:
  every type it would not give back as itself, tuples included, goes to a
  ``default`` that refuses), else by msgpack's strict packer (which also takes
  dicts with keys other than ``str``). The packer's own type dispatch is the
  check, so no pass reads the elements' types first (on 800k ``(str, int,
  int)`` values and their keys: 11 % less time than ``U`` with its checks,
  less than half the instructions; docs/performance.md).
* ``C``: anything else, through the job's state codec.

All round-trip exactly (tuples stay tuples, ``True`` stays bool); an encoder
that refuses a column (a 65-bit int, a lone surrogate) hands it to the next.

Every encoder here is exact or refuses: the checks before ``S`` and ``U`` read
the type of every element (one pass of C calls, see :func:`types_of` and
:func:`_scalar_fields`), and msgspec's ``enc_hook`` refuses anything else it
does not know; ``P`` and ``T`` pack only exact types (strict packers). Why
the packer is the check for ``T``: reading an element's type is a C call that
touches the element, about as dear as packing it (docs/performance.md,
2026-11-27 ``incr``, second session). ormsgpack's strict options (:data:`STRICT`) refuse
subclasses of ``str``/``int``/``float``/``list``/``dict``, Enum, dataclasses,
datetime/date/time, UUID, ints beyond 64 bits, tuples at any depth, and dicts
with keys other than ``str``; ``bytearray`` and ``memoryview`` are packed as
binary and come back as ``bytes``, as with the codec (``codec.py``).
"""

from __future__ import annotations

import threading
from itertools import chain
from operator import countOf, itemgetter
from typing import Any

import msgpack
import msgspec
import ormsgpack

from .codec import Codec

__all__ = [
    "STRICT", "pack_column", "pack_column_typed", "pack_fields", "packb", "strict_pack", "types_of",
    "unpack_column", "unpack_fields",
]  # fmt: skip

_PLAIN_ERRORS = (TypeError, ValueError, OverflowError)


def _refuse(obj: Any) -> Any:
    raise TypeError(type(obj).__name__)


# ormsgpack in strict mode: every value it would not give back as itself goes to ``default``
STRICT = (
    ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_UUID
    | ormsgpack.OPT_PASSTHROUGH_BIG_INT
    | ormsgpack.OPT_PASSTHROUGH_TUPLE
)


def strict_pack(obj: Any) -> bytes:
    """MessagePack of ``obj`` when it holds only ``None``, ``bool``, ``int`` within 64 bits,
    ``float``, ``str``, ``bytes`` (``bytearray``/``memoryview`` as ``bytes``), ``list`` and
    ``dict`` with ``str`` keys, all of exactly these types; raises ``TypeError`` otherwise."""
    return ormsgpack.packb(obj, default=_refuse, option=STRICT)


def packb(obj: Any) -> bytes:
    """msgpack, strict (frames and headers of plain types)."""
    return msgpack.packb(obj, use_bin_type=True, strict_types=True, default=_refuse)


class _Packer(threading.local):
    """This thread's strict packer (reusing one costs a third less than ``msgpack.packb``)
    and msgspec encoder (its ``enc_hook`` refuses what msgspec does not know)."""

    def __init__(self) -> None:
        self.pack = msgpack.Packer(use_bin_type=True, strict_types=True, default=_refuse).pack
        self.encode = msgspec.msgpack.Encoder(enc_hook=_refuse).encode


_PACKER = _Packer()


def _pack(obj: Any) -> bytes:
    return _PACKER.pack(obj)  # a Packer resets its buffer on failure too


def _unpackb(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True)


# the types msgspec packs as themselves and decodes back as the same type; an Enum, a
# Decimal, a UUID, a date, a set or a nested tuple it would pack as something else
_SCALARS = frozenset({str, int, float, bool, type(None), bytes})
_DECODE_SCALARS = msgspec.msgpack.Decoder().decode
_DECODE_TUPLES = msgspec.msgpack.Decoder(list[tuple]).decode


def types_of(values: list[Any]) -> set[type]:
    """The types of a column's values: one pass of C calls, and no set insertion per value
    when they all have the first one's type (the common case; half the time of
    ``set(map(type, values))``)."""
    types = list(map(type, values))
    if types and types.count(types[0]) == len(types):
        return {types[0]}
    return set(types)


def _arity(values: list[tuple]) -> int:
    """The length every tuple of the column has, or 0 (lengths differ, or empty tuples)."""
    arity = len(values[0]) if values else 0
    return arity if countOf(map(len, values), arity) == len(values) else 0


def _scalar_fields(values: list[tuple]) -> bool:
    """Whether every element of every tuple is of a type in :data:`_SCALARS`: one pass of C
    calls over the elements, then, when the first tuple's fields keep their types down the
    column (the common case), one count per field position (identity compares; the slices
    cover every element whatever the tuples' lengths), else one set of the types."""
    flat = list(map(type, chain.from_iterable(values)))
    step = len(values[0]) if values else 0
    if step:
        for i in range(min(step, len(flat))):
            t = flat[i]
            part = flat[i::step]
            if t not in _SCALARS or part.count(t) != len(part):
                break
        else:
            return True
    return set(flat) <= _SCALARS


def pack_column(values: list[Any], codec: Codec) -> bytes:
    """The column's bytes, tagged (see the module doc)."""
    return pack_column_typed(values, codec)[0]


def pack_column_typed(
    values: list[Any], codec: Codec, types: set[type] | None = None, arity: int | None = None
) -> tuple[bytes, set[type]]:
    """The column's bytes and the types of its values (computed unless given). ``arity``:
    given with ``types == {tuple}``, the length of every tuple (not measured again)."""
    if types is None:
        types = types_of(values)
    if types <= _SCALARS:
        try:
            return b"S" + _PACKER.encode(values), types
        except _PLAIN_ERRORS:
            pass  # an int beyond 64 bits, a lone surrogate: the paths below decide (no loss)
    elif types == {tuple}:
        if arity is None:
            arity = _arity(values)
        if arity:
            # columns by itemgetter (3x faster than zip(*values)), packed strictly: the
            # packers' type dispatch is the check (module doc)
            fields = [list(map(itemgetter(i), values)) for i in range(arity)]
            try:
                return b"T" + strict_pack(fields), types
            except _PLAIN_ERRORS:
                pass  # e.g. a dict with int keys, an Enum: msgpack's strict packer, then the codec
            try:
                return b"T" + _pack(fields), types
            except _PLAIN_ERRORS:
                pass  # a column plain msgpack cannot pack: the job's codec below packs it (no loss)
        elif _scalar_fields(values):
            try:
                return b"U" + _PACKER.encode(values), types
            except _PLAIN_ERRORS:
                pass  # as above
        return b"C" + codec.encode(values), types
    if tuple not in types:
        try:
            return b"P" + _pack(values), types
        except _PLAIN_ERRORS:
            pass  # as above: the codec's general encoding is the fallback, tagged "C"
    return b"C" + codec.encode(values), types


def pack_fields(values: list[tuple], fields: range) -> bytes | None:
    """Fields ``fields`` of same-length tuples as a ``T`` column (one column per field, packed
    strictly, see the module doc), or None when the strict packers refuse one."""
    columns = [list(map(itemgetter(i), values)) for i in fields]
    try:
        return b"T" + strict_pack(columns)
    except _PLAIN_ERRORS:
        pass  # e.g. a dict with int keys: msgpack's strict packer
    try:
        return b"T" + _pack(columns)
    except _PLAIN_ERRORS:
        return None  # the caller writes the whole values (the codec packs them: no loss)


def unpack_fields(data: bytes) -> list[list[Any]]:
    """The field columns of :func:`pack_fields`."""
    if data[:1] != b"T":
        raise ValueError(f"a field column tagged {data[:1]!r}")
    columns = _unpackb(data[1:])
    if not isinstance(columns, list) or not all(isinstance(c, list) for c in columns):
        raise ValueError("a field column that is not a list of lists")
    return columns


def unpack_column(data: bytes, codec: Codec) -> list[Any]:
    tag, body = data[:1], data[1:]
    if tag == b"S":
        values = _DECODE_SCALARS(body)
    elif tag == b"U":
        values = _DECODE_TUPLES(body)
    elif tag == b"P":
        values = _unpackb(body)
    elif tag == b"T":
        values = list(zip(*_unpackb(body), strict=True))
    elif tag == b"C":
        values = codec.decode(body)
    else:
        raise ValueError(f"unknown column tag {tag!r}")
    if not isinstance(values, list):
        raise ValueError(f"a column decoded to {type(values).__name__}, not a list")
    return values
