"""The key Spark groups by: one value per Python equality class of keys.

Theory of operation
-------------------
On the asyncio engine keyed state lives in dicts, so keys that are equal in Python share it:
``1``, ``1.0`` and ``True`` are one key, as are ``0``, ``-0.0`` and ``False``, a tuple and a
namedtuple of equal items, ``bytes`` and an equal ``bytearray``, an ``IntEnum`` member and
its value, ``Decimal(1)`` and ``1`` (``state/key_groups.py`` hashes them alike so they share
a key group too). On Spark a keyed operator runs as ``groupBy(key)``, and Spark compares the
key column's *bytes*; the job codec gives ``1``, ``1.0`` and ``True`` three encodings. So the
key column holds the encoding of :func:`group_key`'s result, the representative of the key's
equality class:

* ``bool`` -> ``int``; a ``float`` equal to an int -> that ``int`` (``-0.0`` -> ``0``); every
  NaN -> one NaN; ``Decimal``/``Fraction`` -> the equal ``int`` or ``float`` if there is one,
  else an exact ``(marker, numerator, denominator)``; an ``IntEnum``/``StrEnum``-like member
  -> its value; subclasses of ``str``/``int``/``bytes``/``float`` -> the base value;
  ``bytearray`` -> ``bytes``;
* a tuple or namedtuple -> the tuple of its items' representatives (a namedtuple equals the
  tuple of its fields); a list, dict or set (or frozenset) -> its hashable stand-in
  (``state/hashable_keys.py``) of representatives, a dict's items and a set's elements sorted
  by their encodings (equal dicts may hold their items in another order, equal sets iterate
  differently);
* a streamflow ``Row`` and an ``eq`` dataclass -> a marker tuple of their kind, class and
  compared fields' representatives (a Row is equal only to a Row).

Anything else is its own representative. The representative is only compared, never decoded
back into a key: the operators compute their keys from the records themselves, so a user
function sees the record's own key, exactly as on the asyncio engine.

NaN is the exception Python itself makes: ``nan != nan``, so a NaN key equals no key, not
even another NaN; a dict finds it only by identity (the very same float object). All NaN
keys share one Spark group, and in it each record's NaN is a new object (decoded from its
bytes), so each record with a NaN key is a key of its own, as it is on the asyncio engine
for NaNs that are different objects (see docs/spark.md).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

__all__ = ["group_key", "is_plain"]

_PLAIN = frozenset({str, int, bytes, type(None)})
_NAN = float("nan")
_MARK = "\x00streamflow-key"  # first item of the marker tuples of Rows, dataclasses, fractions


def is_plain(kinds: set[type]) -> bool:
    """Whether keys of these exact types are their own representatives (the common case)."""
    return kinds <= _PLAIN


def group_key(key: Any, encode: Callable[[Any], bytes]) -> Any:
    """The representative of ``key``'s equality class (see the module docstring); ``encode``
    is the job codec's, which orders a dict's items and a set's elements."""
    from ..state.hashable_keys import DictKey, ListKey, SetKey

    t = type(key)
    if t in _PLAIN:
        return key
    if t is bool:
        return int(key)
    if t is float:
        if key.is_integer():
            return int(key)
        return _NAN if key != key else key
    if t is tuple:
        return tuple(group_key(x, encode) for x in key)
    if t is list or t is ListKey:
        return ListKey([group_key(x, encode) for x in key])
    if t is dict or t is DictKey:
        items = [(group_key(k, encode), group_key(v, encode)) for k, v in key.items()]
        items.sort(key=lambda kv: encode(kv[0]))
        return DictKey(items)
    if t is set or t is SetKey or t is frozenset:
        return SetKey(sorted((group_key(x, encode) for x in key), key=encode))
    if t is bytearray:
        return bytes(key)
    if isinstance(key, enum.Enum):  # a member that is an int/str/...: equal to its value
        return group_key(key._value_, encode) if isinstance(key, (int, str, bytes, float)) else key
    if isinstance(key, (Decimal, Fraction)):
        return _number(key)
    if isinstance(key, tuple):  # a namedtuple (equal to the plain tuple of its fields)
        return tuple(group_key(x, encode) for x in key)
    for base in (str, int, bytes, float):
        if isinstance(key, base):
            return group_key(base(key), encode)  # type: ignore[arg-type]
    values = getattr(key, "_values", None)
    if t.__name__ == "Row" and type(values) is list:  # streamflow's Row (see types/row.py __eq__)
        names = key._field_names()
        fields: Any = (tuple(group_key(v, encode) for v in values) if names is None else
                       tuple(sorted((n, group_key(v, encode)) for n, v in zip(names, values, strict=True))))
        return (_MARK, "row", key._row_kind.name, names is None, fields)
    if dataclasses.is_dataclass(key) and not isinstance(key, type) and t.__dataclass_params__.eq:
        fields = tuple(group_key(getattr(key, f.name), encode) for f in dataclasses.fields(key) if f.compare)
        return (_MARK, "dataclass", t.__module__, t.__qualname__, fields)
    return key


def _number(x: Decimal | Fraction) -> Any:
    """A Decimal or Fraction: the int or float equal to it, else an exact fraction."""
    if isinstance(x, Decimal) and not x.is_finite():
        return _NAN if x.is_nan() else float(x)
    f = Fraction(x)
    if f.denominator == 1:
        return int(f)
    as_float = float(f)
    if math.isfinite(as_float) and Fraction(as_float) == f:
        return as_float
    return (_MARK, "fraction", f.numerator, f.denominator)
