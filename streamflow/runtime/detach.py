"""Values kept in state never share an object with a record that flows on.

A reduce function may change its first argument in place and return it, as PyFlink's own
``KeyedStream._accumulate`` does for ``Row`` and ``list`` records (``v1[pos] = ...; return
v1``), and as Java's ``ReduceFunction`` contract allows. In Flink that is harmless: state
and records are serialized copies (PyFlink serializes every record it emits, the state
backends serialize what they keep), so a result already emitted, the element received, and
another window's copy of the same element never change afterwards. streamflow passes
records by reference, so an operator that folds records into state keeps in state a copy
of what it received or emitted, made here:

* a value of an immutable type (numbers, strings, bytes, ``None``, ``Decimal``, dates,
  UUIDs, enums) or a tuple of such values is its own copy (no cost beyond a type check);
* anything else is deep-copied, as serializing and reading it back would.

Operators whose functions cannot change their arguments (the built-in aggregations, reduce
expressions inlined by ``fold.py``) do not call it. What this does not cover: a function
changing its *second* argument (the record it was handed) changes that record, as any
function changing a record it received does, since records are shared between operators.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import enum
import uuid
from typing import Any

__all__ = ["detached"]

_IMMUTABLE = frozenset(
    {
        int, float, complex, bool, str, bytes, type(None), decimal.Decimal, uuid.UUID,
        datetime.datetime, datetime.date, datetime.time, datetime.timedelta, range, frozenset,
    }
)  # fmt: skip


def detached(value: Any) -> Any:
    """``value`` itself if nothing in it can change in place, else a deep copy of it."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is tuple:
        for item in value:
            if type(item) not in _IMMUTABLE:
                break
        else:
            return value
    elif isinstance(value, enum.Enum):
        return value
    return copy.deepcopy(value)
