"""The checkpoint codec's decoding side: MessagePack back to Python values.

The C unpacker calls ``_ext_hook`` for each extension value: a zero-length one is a
marker (``codec_format.py``) and becomes a private :class:`_Marker` sentinel; any
other is malformed data. ``list_hook``, called for each array innermost first,
rebuilds the value of an array that starts with a marker from the parts after it
(the table in ``codec.py``'s docstring). Enum, dataclass and namedtuple classes
are found by their recorded import path through a :class:`ClassResolver` (never
importing anything); instances are rebuilt field-wise without running user code.
Malformed data raises ``ValueError``.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from collections.abc import Callable
from typing import Any

import msgpack

from .codec_format import (
    EXT_BIGINT,
    EXT_DATACLASS,
    EXT_DATE,
    EXT_DATETIME,
    EXT_DECIMAL,
    EXT_DICT_KEY,
    EXT_ENUM,
    EXT_FROZENSET,
    EXT_LIST_KEY,
    EXT_NAMEDTUPLE,
    EXT_PICKLED,
    EXT_ROW,
    EXT_SET,
    EXT_SET_KEY,
    EXT_TIME,
    EXT_TIMEDELTA,
    EXT_TUPLE,
    EXT_UUID,
    MARKS,
    ClassResolver,
    Pickled,
    is_namedtuple,
)
from .codec_format import gc_paused as _gc_paused
from .hashable_keys import DictKey, ListKey, SetKey

__all__ = ["decode"]


def _dec_tz(spec: Any) -> datetime.tzinfo | None:
    if spec is None:
        return None
    if type(spec) is str:
        import zoneinfo

        return zoneinfo.ZoneInfo(spec)
    seconds, micros, name = spec
    off = datetime.timedelta(seconds=seconds, microseconds=micros)
    return datetime.timezone(off) if name is None else datetime.timezone(off, name)


def _dec_datetime(p: list) -> datetime.datetime:
    y, mo, d, h, mi, s, us, fold, tz = p
    return datetime.datetime(y, mo, d, h, mi, s, us, tzinfo=_dec_tz(tz), fold=fold)


def _dec_time(p: list) -> datetime.time:
    h, mi, s, us, fold, tz = p
    return datetime.time(h, mi, s, us, tzinfo=_dec_tz(tz), fold=fold)


class _Marker:
    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code

    def __repr__(self) -> str:
        return f"<codec marker {self.code}>"


_MARKERS = [_Marker(code) for code in range(len(MARKS))]


class _Decoder:
    """One decoding setup: the class resolver and the hooks bound to it."""

    def __init__(self, resolver: ClassResolver) -> None:
        self.resolver = resolver
        self.builders: dict[int, Callable[[list], Any]] = {
            EXT_TUPLE: lambda p: tuple(p),
            EXT_SET: lambda p: set(p),
            EXT_FROZENSET: lambda p: frozenset(p),
            EXT_BIGINT: lambda p: int.from_bytes(p[0], "big", signed=True),
            EXT_DATETIME: _dec_datetime,
            EXT_DATE: lambda p: datetime.date.fromordinal(p[0]),
            EXT_TIME: _dec_time,
            EXT_TIMEDELTA: lambda p: datetime.timedelta(*p),
            EXT_DECIMAL: lambda p: decimal.Decimal(p[0]),
            EXT_UUID: lambda p: uuid.UUID(bytes=bytes(p[0])),
            EXT_ENUM: self.enum,
            EXT_DATACLASS: self.dataclass,
            EXT_NAMEDTUPLE: self.namedtuple,
            EXT_ROW: self.row,
            EXT_LIST_KEY: ListKey,
            EXT_DICT_KEY: lambda p: DictKey(p[0]),
            EXT_SET_KEY: SetKey,
            EXT_PICKLED: lambda p: Pickled(p[0]),  # bytes, never unpickled here (typed.py)
        }

    def list_hook(self, items: list) -> Any:
        if items and type(items[0]) is _Marker:
            return self.builders[items[0].code](items[1:])
        return items

    def decode(self, data: bytes) -> object:
        try:
            with _gc_paused():
                return msgpack.unpackb(
                    data,
                    ext_hook=_ext_hook,
                    list_hook=self.list_hook,
                    strict_map_key=False,
                    raw=False,
                    timestamp=0,
                )
        except ValueError as e:
            raise ValueError(f"malformed checkpoint codec data: {e}") from e
        except Exception as e:  # msgpack raises TypeError, StackError, ... on garbage
            raise ValueError(f"malformed checkpoint codec data: {type(e).__name__}: {e}") from e

    def enum(self, p: list) -> Any:
        path, name = p
        cls = self.resolver.resolve(path, "an Enum", lambda c: issubclass(c, enum.Enum))
        try:
            return cls[name]  # type: ignore[index]
        except KeyError:
            raise ValueError(f"Enum {path} has no member {name!r} (restored from checkpoint data)") from None

    def dataclass(self, p: list) -> Any:
        path, names, values = p
        cls = self.resolver.resolve(path, "a dataclass", dataclasses.is_dataclass)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        obj: Any = object.__new__(cls)
        given = dict(zip(names, values, strict=True))
        for name, value in given.items():
            if name not in fields:
                raise ValueError(f"dataclass {path} has no field {name!r} any more (from checkpoint data)")
            object.__setattr__(obj, name, value)
        for name, f in fields.items():
            if name in given:
                continue
            if f.default is not dataclasses.MISSING:
                object.__setattr__(obj, name, f.default)
            elif f.default_factory is not dataclasses.MISSING:
                object.__setattr__(obj, name, f.default_factory())
            else:
                raise ValueError(
                    f"dataclass {path} field {name!r} is not in checkpoint data and has no default"
                )
        return obj

    def namedtuple(self, p: list) -> Any:
        path, values = p[0], p[1:]
        cls: Any = self.resolver.resolve(path, "a namedtuple", is_namedtuple)
        if len(values) != len(cls._fields):
            raise ValueError(
                f"namedtuple {path} has {len(cls._fields)} fields, checkpoint data {len(values)}"
            )
        return tuple.__new__(cls, values)

    def row(self, p: list) -> Any:
        from importlib import import_module

        fields, kind, values = p[0], p[1], p[2:]
        try:  # streamflow's own module (the only one this names), not one chosen by the data
            row_cls = import_module("streamflow.common").Row
        except (ImportError, AttributeError) as e:
            raise ValueError(f"checkpoint data holds a Row but streamflow has no Row type: {e}") from None
        row = row_cls(**dict(zip(fields, values, strict=True))) if fields else row_cls(*values)
        if kind is not None and hasattr(row, "set_row_kind"):
            row.set_row_kind(type(row.get_row_kind())(kind))
        return row


def _ext_hook(code: int, data: bytes) -> _Marker:
    if data or not 0 < code < len(_MARKERS):
        raise ValueError(f"unknown codec extension type {code} ({len(data)} bytes)")
    return _MARKERS[code]


_DECODER = _Decoder(ClassResolver())


def decode(data: bytes) -> object:
    """Decode bytes written by :func:`encode`; malformed data raises ``ValueError``."""
    return _DECODER.decode(data)
