"""Cheap size estimates of record batches, for the channels' in-flight byte budget.

Theory of operation
-------------------
Channel capacity counts records, so a few huge records behind a slow consumer
could hold gigabytes. Flink bounds in-flight data in bytes (network buffers);
streamflow estimates the size of each batch once, when it is written into a
channel, and the channel and the job keep a byte budget besides the record
capacity (see :mod:`streamflow.runtime.channel`).

The estimate is per batch and cheap, not exact (Python objects have no cheap
exact size; ``sys.getsizeof`` is shallow and a deep walk costs more than the
record's processing):

* a batch of ``str``/``bytes``/``bytearray`` (judged by its first and last
  record): the sum of their lengths (one C-level pass) plus
  :data:`OBJECT_OVERHEAD` per record;
* any other batch: its first, middle and last records are measured and the
  batch counts ``len(batch)`` times the largest of the three (exact for the
  common case of uniform records, and it errs on the large side);
* one record: ``str``/``bytes``/``bytearray`` its length, ``memoryview`` its
  ``nbytes``, numbers and ``None`` :data:`OBJECT_OVERHEAD`; a tuple, list, set,
  dict, or an object with a ``__dict__`` (dataclasses, plain classes) counts its
  container overhead plus its fields measured one level deep (a field that is
  itself a container counts by ``sys.getsizeof``, shallow).

So the common large payloads (bytes, str, and records holding them in their
fields: tuples, dataclasses, dicts) are measured by their length, which is what
dominates their memory.
"""

from __future__ import annotations

import sys
from typing import Any

OBJECT_OVERHEAD = 32  # about what a small int, float or empty str costs in CPython
_STRINGS = (str, bytes, bytearray)
_SCALARS = (int, float, bool, type(None), complex)


def _field_size(value: Any) -> int:
    t = type(value)
    if t in _STRINGS:
        return len(value) + OBJECT_OVERHEAD
    if t in _SCALARS:
        return OBJECT_OVERHEAD
    if t is memoryview:
        return int(value.nbytes) + OBJECT_OVERHEAD
    return sys.getsizeof(value)


def record_size(record: Any) -> int:
    """Estimated bytes of one record (see the module docstring)."""
    t = type(record)
    if t in _STRINGS or t in _SCALARS or t is memoryview:
        return _field_size(record)
    if t is tuple or t is list or t is set or t is frozenset:
        return sys.getsizeof(record) + sum(map(_field_size, record))
    if t is dict:
        keys, values = sum(map(_field_size, record.keys())), sum(map(_field_size, record.values()))
        return sys.getsizeof(record) + keys + values
    fields = getattr(record, "__dict__", None)
    if fields is not None:
        return sys.getsizeof(record) + sum(map(_field_size, fields.values()))
    slots = getattr(t, "__slots__", None)
    if slots is not None and not isinstance(slots, str):
        size = sys.getsizeof(record)
        for name in slots:
            if hasattr(record, name):
                size += _field_size(getattr(record, name))
        return size
    return sys.getsizeof(record)


def batch_size(records: list) -> int:
    """Estimated bytes of a batch of records (see the module docstring)."""
    n = len(records)
    if not n:
        return 0
    first, last = records[0], records[-1]
    if type(first) in _STRINGS and type(last) in _STRINGS:
        try:
            return sum(map(len, records)) + n * OBJECT_OVERHEAD
        except TypeError:  # a record in the middle has no length: measure by sampling below
            pass
    largest = max(record_size(first), record_size(last), record_size(records[n // 2]))
    return n * largest


_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "k": 2**10, "kb": 2**10, "kibibytes": 2**10,
    "m": 2**20, "mb": 2**20, "mebibytes": 2**20,
    "g": 2**30, "gb": 2**30, "gibibytes": 2**30,
    "t": 2**40, "tb": 2**40, "tebibytes": 2**40,
}  # fmt: skip


def parse_memory_size(value: int | str | None, what: str) -> int | None:
    """Bytes from an int or a size in Flink's ``MemorySize`` syntax (``"64 mb"``, ``"1g"``; binary
    units); ``None`` stays ``None`` (no bound). Raises ValueError for anything else or below 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{what} must be bytes (int) or a size such as '64 mb', got {value!r}")
    if isinstance(value, str):
        text = value.strip().lower()
        digits = len(text) - len(text.lstrip("0123456789"))
        number, unit = text[:digits], text[digits:].strip()
        if not number or unit not in _UNITS:
            raise ValueError(f"{what}: cannot parse {value!r} (e.g. '512 mb', '1 gb', 1048576)")
        value = int(number) * _UNITS[unit]
    if value < 1:
        raise ValueError(f"{what} must be >= 1 byte, got {value}")
    return value
