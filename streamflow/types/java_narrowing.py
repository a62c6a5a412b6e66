"""The JVM's narrowing of integers that ``from_collection(list, type_info)`` applies.

PyFlink hands a typed collection to the JVM, which reads each Python int as a Java
``Long``/``BigInteger`` and converts it to the declared type with ``Number.shortValue()``,
``intValue()``, ...: a value out of the type's range wraps around silently (43878 declared
``Types.SHORT()`` is -21658, 9147483648 declared ``Types.INT()`` is 557549056; Flink's
``test_from_collection_with_data_types``). :func:`narrower` gives the function that does the
same to a converted value of a type (fields of rows and tuples, elements of arrays and
lists), or ``None`` when the type has no integral part. Values in range are returned as
they are; a value that is not an ``int`` (or is a ``bool``) is left alone.

Only a list or tuple collection is narrowed, once when the job is defined: that is what
PyFlink's ``from_collection`` takes. An iterable or generator (streamflow's extension) is
not, so no per-record cost reaches the streaming source path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .row import Row
from .typeinfo import BasicTypeInfo, RowTypeInfo, TupleTypeInfo, TypeInformation, _ArrayTypeInfo

__all__ = ["narrow_collection", "narrower"]

_BITS = {"Byte": 8, "Short": 16, "Integer": 32, "Long": 64}


def _int_narrower(bits: int) -> Callable[[Any], Any]:
    half, mask = 1 << (bits - 1), (1 << bits) - 1

    def narrow(value: Any) -> Any:
        if type(value) is int and not -half <= value < half:
            return ((value + half) & mask) - half
        return value

    return narrow


def narrower(type_info: Any) -> Callable[[Any], Any] | None:
    """The function narrowing a value of ``type_info`` as the JVM does, or None."""
    if type(type_info) is BasicTypeInfo and type_info.name in _BITS:
        return _int_narrower(_BITS[type_info.name])
    if isinstance(type_info, (RowTypeInfo, TupleTypeInfo)):
        fields = [narrower(t) for t in type_info.get_field_types()]
        if not any(fields):
            return None
        pairs = [(i, f) for i, f in enumerate(fields) if f is not None]
        if isinstance(type_info, TupleTypeInfo):
            return lambda v: _narrow_tuple(v, pairs)
        return lambda v: _narrow_row(v, pairs)
    if isinstance(type_info, _ArrayTypeInfo):
        element = narrower(type_info._element_type)
        if element is None:
            return None
        return lambda v: v if not isinstance(v, list) else [element(x) for x in v]
    return None


def _narrow_row(value: Any, pairs: list[tuple[int, Callable[[Any], Any]]]) -> Any:
    if isinstance(value, Row):
        for i, narrow in pairs:
            value[i] = narrow(value[i])  # the Row is the converted copy, not the caller's
    return value


def _narrow_tuple(value: Any, pairs: list[tuple[int, Callable[[Any], Any]]]) -> Any:
    if type(value) is not tuple:
        return value
    if all(narrow(value[i]) is value[i] for i, narrow in pairs):
        return value  # in range: the caller's tuple as it is
    fields = list(value)
    for i, narrow in pairs:
        fields[i] = narrow(fields[i])
    return tuple(fields)


def narrow_collection(type_info: TypeInformation | None, values: list[Any]) -> list[Any]:
    """``values`` (already converted to ``type_info``) narrowed as the JVM does."""
    narrow = narrower(type_info)
    return values if narrow is None else [narrow(v) for v in values]
