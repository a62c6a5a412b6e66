"""Values kept in state never share an object with a record that flows on.

Flink's rule: a record is a copy. PyFlink serializes every record a Python function emits,
Flink's default (object reuse disabled) copies records between chained operators, and the
RocksDB state backend keeps serialized copies: so a record already emitted never changes
afterwards, whatever the function does next with the object it emitted or with its state.
streamflow hands records on by reference (copying every record would cost every job a copy
per record), so where an object crosses between a function's records and the state kept for
it, the state side takes its own copy, made here:

* the keyed ``reduce`` and window ``reduce``/``aggregate`` operators keep a copy of what
  they received or emitted: a reduce function may change its first argument in place and
  return it (PyFlink's own ``KeyedStream._accumulate`` idiom for ``Row`` and ``list``
  records, and Java's ``ReduceFunction`` contract allows it);
* the state objects user functions hold (``state/state_objects.py``: ``ValueState``,
  ``ListState``, ``MapState``, ``ReducingState``, ``AggregatingState``; their time-to-live
  forms, ``state/ttl_state.py``; a ``ProcessWindowFunction``'s per-window state; broadcast
  state) keep a copy of every value written (``update``, ``add``, ``add_all``, ``put``,
  ``put_all``): *copy on write*. A function that appends to a list kept in ``ValueState``,
  writes it back and emits it (a common PyFlink pattern) emits an object the state no longer
  holds, so the next element's append does not change the record already emitted.

Copy on write, not on read, by cost: a copy is paid per write, which the function chooses and
which Flink pays too (serializing on RocksDB); a copy on every read would also charge
functions that only read a large value per record (a lookup table, a set of seen ids).

What a copy is: a value of an immutable type (numbers, strings, bytes, ``None``,
``Decimal``, dates, UUIDs, enums) or a tuple of such values is its own copy (a type check);
lists, dicts, sets, tuples and ``Row`` are rebuilt (their immutable elements shared, C speed
when all are); anything else (a dataclass, nesting deeper than :data:`_DEPTH`, a cycle) goes to
``copy.deepcopy``. As with a serializer, an object appearing twice inside a value
is copied twice.

Operators whose functions cannot change their arguments (the built-in aggregations, reduce
expressions inlined by ``fold.py``) do not call it. A ``ProcessWindowFunction`` gets a fresh
list of its window's elements when the contents stay after the firing (``window_operator.
_emit``), so the list it emits is not the one later elements are appended to; the elements
themselves are the records as received. What this does not cover: a function changing a
record it was handed changes that record (records are shared between operators), and a
function changing an object it emitted and still holds changes the record already emitted
(a reused buffer; ``tests/test_emitted_records_flink.py``). A value *read* from state is the
state's own object: changing it in place without ``update`` (outside Flink's contract, which
requires the write) changes the state on both backends (RocksDB writes back a mutable value
it handed out: ``state/rocksdb_table.py``; a heap incremental checkpoint holds the change
only if the key was written since the last one), and emitting it and later changing it in
place before the ``update`` changes the record emitted: emit a value you will go on changing
only after writing it back, or emit a copy.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import enum
import uuid
from typing import Any

from ..types.row import Row

__all__ = ["IMMUTABLE", "detached", "detached_all"]

IMMUTABLE = frozenset(
    {
        int, float, complex, bool, str, bytes, type(None), decimal.Decimal, uuid.UUID,
        datetime.datetime, datetime.date, datetime.time, datetime.timedelta, range, frozenset,
    }
)  # fmt: skip
_is_immutable_type = IMMUTABLE.__contains__
_DEPTH = 24  # nesting copied structurally; deeper (or cyclic) values go to copy.deepcopy


class _TooDeep(Exception):
    pass


def detached(value: Any) -> Any:
    """``value`` itself if nothing in it can change in place, else a deep copy of it."""
    kind = type(value)
    if kind in IMMUTABLE:
        return value
    if kind is tuple:
        if all(map(_is_immutable_type, map(type, value))):
            return value
    elif isinstance(value, enum.Enum):
        return value
    try:
        return _copied(value, 0)
    except _TooDeep:  # a cycle, or nesting too deep to copy by recursion
        return copy.deepcopy(value)


def detached_all(values: list) -> list:
    """``values`` (a list the caller owns) with each element :func:`detached`, in place."""
    if all(map(_is_immutable_type, map(type, values))):
        return values
    for i, v in enumerate(values):
        if type(v) not in IMMUTABLE:
            values[i] = detached(v)
    return values


def _copied(value: Any, depth: int) -> Any:
    """A copy of ``value`` in which nothing is shared with it that could change in place:
    lists, dicts, sets, tuples and ``Row`` rebuilt (their immutable elements, and tuples of
    immutable values, shared), anything else by ``copy.deepcopy``."""
    kind = type(value)
    if kind in IMMUTABLE:
        return value
    if depth > _DEPTH:
        raise _TooDeep
    if kind is list:
        out = value[:]
        if not all(map(_is_immutable_type, map(type, value))):
            for i, item in enumerate(out):
                if type(item) not in IMMUTABLE and not _frozen_tuple(item):
                    out[i] = _copied(item, depth + 1)
        return out
    if kind is dict:
        if all(map(_is_immutable_type, map(type, value.values()))):
            return value.copy()
        return {k: v if _frozen_tuple(v) else _copied(v, depth + 1) for k, v in value.items()}
    if kind is tuple:
        if all(map(_is_immutable_type, map(type, value))):
            return value
        return tuple(_copied(v, depth + 1) for v in value)
    if kind is Row:
        row = object.__new__(Row)
        object.__setattr__(row, "_values", _copied(value._values, depth + 1))
        object.__setattr__(row, "_from_dict", value._from_dict)
        object.__setattr__(row, "_row_kind", value._row_kind)
        fields = value._field_names()
        if fields is not None:
            object.__setattr__(row, "_fields", list(fields))
        return row
    if kind is set:
        return value.copy()  # set elements are hashable: copied as they are
    if isinstance(value, enum.Enum):
        return value
    return copy.deepcopy(value)


def _frozen_tuple(value: Any) -> bool:
    """Whether ``value`` is a tuple of immutable values (its own copy)."""
    return type(value) is tuple and all(map(_is_immutable_type, map(type, value)))
