"""Checkpoint value codec: MessagePack (the ``msgpack`` library) with extension types.

Theory of operation
-------------------
Checkpoint data is plain Python values plus a few common library types. The
:class:`MsgpackCodec` hands the value to msgpack's C packer with
``strict_types=True``: the types MessagePack carries exactly are packed at C
speed and never reach Python code, and every other value (a tuple included:
strict mode does not pack it as an array) is passed to one ``default`` hook
that wraps it in a MessagePack *extension type*, a ``(code, bytes)`` pair
that no plain value can be mistaken for. Decoding is the mirror image: the C
unpacker calls ``ext_hook`` for each extension value only.

Native, untouched: ``None``, ``bool``, ``int`` in [-2**63, 2**64), ``float``
(NaN, ``inf`` and ``-0.0`` included: IEEE doubles), ``str``, ``bytes``,
``list``, and ``dict`` with keys of any supported hashable type (MessagePack
maps allow any key: ``{1: "a", (1, 2): "b", None: 0}`` round-trips).

Every other value is packed as an array whose first element is a *marker*:
a zero-length MessagePack extension value (``ExtType(code, b"")``) that no
plain value can be mistaken for, followed by the value's parts, packed by the
same packer in the same pass (no nested packing):

====  ==========================================  =============================================
code  Python value                                parts after the marker
====  ==========================================  =============================================
1     ``tuple``                                   the elements
2     ``set``                                     the elements
3     ``frozenset``                               the elements
4     ``int`` outside 64 bits                     two's complement bytes, big-endian
5     ``datetime.datetime`` naive or aware        ``y, mo, d, h, mi, s, us, fold, tz``
6     ``datetime.date``                           proleptic ordinal
7     ``datetime.time``                           ``h, mi, s, us, fold, tz``
8     ``datetime.timedelta``                      ``days, seconds, microseconds``
9     ``decimal.Decimal``                         ``str(value)`` (NaN, sNaN, -0 exact)
10    ``uuid.UUID``                               16 bytes
11    ``enum.Enum`` member (by class import path) ``path, member name``
12    dataclass instance (by class import path)   ``path, [field names], [field values]``
13    namedtuple instance (by class import path)  ``path, field values...``
14    streamflow ``Row``                          ``field names or None, row kind, values...``
15    ``ListKey`` (a list key's stand-in)         the elements
16    ``DictKey`` (a dict key's stand-in)         the dict
17    ``SetKey`` (a set key's stand-in)           the elements
18    ``Pickled`` (a pickled state's entry)       its bytes (never unpickled here: typed.py)
====  ==========================================  =============================================

(15-17: the hashable stand-ins of list, dict and set keys, ``hashable_keys.py``:
they are keys of the state tables, so they must come back as themselves.)

Decoding: ``ext_hook`` turns a marker into a private sentinel, and
``list_hook`` (called by the C unpacker for each array, innermost first)
rebuilds the value of an array that starts with one. Measured against
nesting a separately packed payload per value, markers are 3.5x faster to
encode and 1.5x faster to decode (1M tuples).

``tz`` is ``None`` (naive), ``[offset seconds, offset microseconds, name or
None]`` for a ``datetime.timezone``, or ``"Area/City"`` for a ``zoneinfo.ZoneInfo``.

(``bytearray`` and ``memoryview`` are packed as binary by msgpack's C
packer before any hook sees them: they come back as ``bytes``.)

Types are matched exactly (``type(x) is int``): a subclass of a builtin that
is not an Enum or namedtuple (a ``str`` subclass, ``OrderedDict``,
``numpy.float64``) is refused rather than silently decoded as its base.

**Classes by import path, never code.** Enum, dataclass and namedtuple
values record their class as ``"module:QualName"``. Decoding resolves that
path only in a module that is *already imported* (the decoder never imports
anything: a crafted checkpoint cannot make it run a module's top level), checks
that the object found is a class of the recorded kind, and, when the codec was
built with ``allowed_types``, that it is one of them. Instances are rebuilt
field-wise without calling ``__init__``/``__post_init__`` (``object.__new__``
and ``object.__setattr__``, as pickle does for dataclasses; ``tuple.__new__``
for namedtuples), so decoding runs no user or library code. A dataclass whose
fields changed since the checkpoint gets missing fields from their defaults;
a field with no default, or one the class no longer has, is an error naming both.

Anything else raises ``TypeError`` naming the type and where it sits in the
value and suggesting :class:`PickleCodec`. Strings must be valid Unicode (no
lone surrogates); nesting is bounded (msgpack's recursion limit, 511) and
cycles are refused.

:class:`PickleCodec` is the explicit opt-in for arbitrary objects. Unpickling
runs code chosen by whoever wrote the bytes, so it is only ever fed bytes read
back from the checkpoint or savepoint location the user configured for their
own job: never point a job that uses it at a directory others can write to.

Why msgpack: measured against msgspec and the former hand-written orjson
tagging on 1M-key state (see ``bench/codec.py`` and docs/checkpoints.md),
msgpack's ``strict_types`` mode is the only fast path that keeps tuples apart
from lists without a Python pass over the whole value.

This module holds the encoding side and the codec objects; the decoding side is
``codec_decoding.py`` and what both share (extension codes, markers, class paths)
is ``codec_format.py``. ``decode`` and ``ClassResolver`` are re-exported here.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import logging
import pickle
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

import msgpack

from .codec_decoding import _DECODER, _Decoder
from .codec_decoding import _ext_hook as _ext_hook
from .codec_decoding import decode as decode
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
    Pickled,
)
from .codec_format import MARKS as _M
from .codec_format import ClassResolver as ClassResolver
from .codec_format import gc_paused as _gc_paused
from .codec_format import is_namedtuple as _is_namedtuple
from .codec_format import is_row as _is_row
from .codec_format import type_path as type_path
from .hashable_keys import DictKey, ListKey, SetKey

__all__ = ["Codec", "MsgpackCodec", "PickleCodec", "decode", "encode", "type_path"]

log = logging.getLogger(__name__)

_SUPPORTED = (
    "None, bool, int, float, str, bytes, tuple, list, dict, set, frozenset, datetime, date, time, "
    "timedelta, Decimal, UUID, Enum, dataclasses, namedtuples and Row"
)


@runtime_checkable
class Codec(Protocol):
    """Turns checkpoint values into bytes and back."""

    name: str

    def encode(self, obj: object) -> bytes: ...

    def decode(self, data: bytes) -> object: ...


class _Unsupported(TypeError):
    pass


# ---------------------------------------------------------------- encoding


def _tz(tz: datetime.tzinfo | None) -> Any:
    if tz is None:
        return None
    if type(tz) is datetime.timezone:
        off = tz.utcoffset(None)
        name = tz.tzname(None)
        default_name = datetime.timezone(off).tzname(None)
        return [off.days * 86400 + off.seconds, off.microseconds, None if name == default_name else name]
    key = getattr(tz, "key", None)
    if type(tz).__module__ == "zoneinfo" and isinstance(key, str):
        return key
    raise _Unsupported(f"time zone {type(tz).__module__}.{type(tz).__qualname__}")


class _Packer(threading.local):
    """This thread's packer (a Packer is not thread-safe; reusing one is 4x cheaper than
    ``msgpack.packb``, which builds a new one per call)."""

    def __init__(self) -> None:
        self.pack = msgpack.Packer(
            default=_default, strict_types=True, use_bin_type=True, datetime=False
        ).pack


def _pack(obj: Any) -> bytes:
    return _PACKER.pack(obj)  # a Packer resets its buffer on failure too


def _enc_datetime(v: datetime.datetime) -> list:
    return [
        _M[EXT_DATETIME],
        v.year,
        v.month,
        v.day,
        v.hour,
        v.minute,
        v.second,
        v.microsecond,
        v.fold,
        _tz(v.tzinfo),
    ]


def _enc_time(v: datetime.time) -> list:
    return [_M[EXT_TIME], v.hour, v.minute, v.second, v.microsecond, v.fold, _tz(v.tzinfo)]


def _enc_bigint(v: int) -> list:
    return [_M[EXT_BIGINT], v.to_bytes((v.bit_length() + 8) // 8, "big", signed=True)]


_T, _S, _F = _M[EXT_TUPLE], _M[EXT_SET], _M[EXT_FROZENSET]
_ENCODERS: dict[type, Callable[[Any], list]] = {
    tuple: lambda v: [_T, *v],
    set: lambda v: [_S, *v],
    frozenset: lambda v: [_F, *v],
    int: _enc_bigint,  # the packer hands over only ints outside 64 bits
    datetime.datetime: _enc_datetime,
    datetime.date: lambda v: [_M[EXT_DATE], v.toordinal()],
    datetime.time: _enc_time,
    datetime.timedelta: lambda v: [_M[EXT_TIMEDELTA], v.days, v.seconds, v.microseconds],
    decimal.Decimal: lambda v: [_M[EXT_DECIMAL], str(v)],
    uuid.UUID: lambda v: [_M[EXT_UUID], v.bytes],
    ListKey: lambda v: [_M[EXT_LIST_KEY], *v],
    DictKey: lambda v: [_M[EXT_DICT_KEY], dict(v)],
    SetKey: lambda v: [_M[EXT_SET_KEY], *v],
    Pickled: lambda v: [_M[EXT_PICKLED], bytes(v)],
}


def _encoder_for(t: type) -> Callable[[Any], list]:
    """The encoder of a user type (Enum, dataclass, namedtuple, Row), cached per type."""
    path = type_path(t)
    if not _is_row(t) and (issubclass(t, enum.Enum) or dataclasses.is_dataclass(t) or _is_namedtuple(t)):
        try:
            found = ClassResolver._find(path, "a class")
        except ValueError:
            found = None
        if found is not t:  # refused now rather than when a restore cannot find it
            raise _Unsupported(
                f"{path} cannot be found again by its import path (a class defined in a function?)"
            )
    enc: Callable[[Any], list]
    if issubclass(t, enum.Enum):
        mark = _M[EXT_ENUM]

        def enc(v: Any) -> list:
            return [mark, path, v.name]
    elif dataclasses.is_dataclass(t):
        mark = _M[EXT_DATACLASS]
        names = [f.name for f in dataclasses.fields(t)]

        def enc(v: Any) -> list:
            return [mark, path, names, [getattr(v, n) for n in names]]
    elif _is_namedtuple(t):
        mark = _M[EXT_NAMEDTUPLE]

        def enc(v: Any) -> list:
            return [mark, path, *v]
    elif _is_row(t):
        mark = _M[EXT_ROW]

        def enc(v: Any) -> list:
            fields = getattr(v, "_fields", None)
            kind = v.get_row_kind() if hasattr(v, "get_row_kind") else None
            return [mark, list(fields) if fields else None, getattr(kind, "value", kind), *v._values]
    else:
        raise _Unsupported(t.__qualname__)
    _ENCODERS[t] = enc
    return enc


def _default(obj: Any) -> list:
    t = type(obj)
    enc = _ENCODERS.get(t)
    if enc is None:
        enc = _encoder_for(t)
    return enc(obj)


_PACKER = _Packer()


def encode(obj: object) -> bytes:
    """Encode ``obj`` (see the module docstring for what is supported) to MessagePack bytes."""
    try:
        with _gc_paused():
            return _pack(obj)
    except _Unsupported:
        pass  # a value the fast pass cannot pack: the slow path below names its type and place
    except (RecursionError, ValueError) as e:  # msgpack: "recursion limit exceeded"
        raise ValueError(f"cannot encode a cyclic or too deeply nested value: {e}") from None
    except UnicodeEncodeError as e:
        raise ValueError(f"cannot encode checkpoint data: a str with lone surrogates ({e})") from None
    except TypeError:
        pass  # msgpack's own "can not serialize" for an odd value: located below
    raise _unsupported_error(obj)


def _unsupported_error(obj: object) -> TypeError:
    try:
        path, bad, reason = _locate(obj, "value")
    except RecursionError:
        return TypeError("cannot encode a cyclic or too deeply nested value")
    t = type(bad)
    name = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    why = f" ({reason})" if reason and reason != t.__qualname__ else ""
    return TypeError(
        f"cannot encode {name} at {path} in checkpoint data{why}: the default codec round-trips only "
        f"{_SUPPORTED} (exact types, not subclasses, classes importable by module and name); convert "
        "the value, declare it as a dataclass, or opt in to pickle with PickleCodec()"
    )


def _leaf_error(obj: Any) -> str | None:
    try:
        _pack(obj)
    except (TypeError, ValueError) as e:
        return str(e)
    return None


def _locate(obj: Any, path: str) -> tuple[str, object, str | None]:
    """Slow path, only after a failure: the first value the codec refuses, where, and why."""
    t = type(obj)
    children: Iterable[tuple[str, Any]]
    if t is dict:
        children = [(f"{path} key {k!r}", k) for k in obj] + [(f"{path}[{k!r}]", v) for k, v in obj.items()]
    elif t in (list, tuple) or _is_namedtuple(t):
        children = [(f"{path}[{i}]", x) for i, x in enumerate(obj)]
    elif t in (set, frozenset):
        children = [(f"{path} element", x) for x in obj]
    elif dataclasses.is_dataclass(t):
        children = [(f"{path}.{f.name}", getattr(obj, f.name)) for f in dataclasses.fields(t)]
    else:
        reason = _leaf_error(obj)
        return (path if reason is not None else "", obj, reason)
    for where, child in children:
        found = _locate(child, where)
        if found[0]:
            return found
    reason = None if t in (dict, list, tuple, set, frozenset) else _leaf_error(obj)
    return (path if reason is not None else "", obj, reason)  # e.g. a dataclass defined in a function


# ---------------------------------------------------------------- codec objects


class MsgpackCodec:
    """The default codec: :func:`encode` / :func:`decode`.

    ``allowed_types``: if given, Enum, dataclass and namedtuple values decode only
    into these classes (a stricter rule than the default "already imported").
    """

    name = "msgpack"

    def __init__(self, allowed_types: Iterable[type] | None = None) -> None:
        self._decoder = _DECODER if allowed_types is None else _Decoder(ClassResolver(allowed_types))

    def encode(self, obj: object) -> bytes:
        return encode(obj)

    def decode(self, data: bytes) -> object:
        return self._decoder.decode(data)


class PickleCodec:
    """Explicit opt-in for arbitrary objects; see the module docstring on trust.

    Only ever decodes bytes read back from the checkpoint or savepoint location
    the user configured for this job.
    """

    name = "pickle"

    def __init__(self, protocol: int = pickle.HIGHEST_PROTOCOL) -> None:
        self.protocol = protocol

    def encode(self, obj: object) -> bytes:
        return pickle.dumps(obj, protocol=self.protocol)

    def decode(self, data: bytes) -> object:
        return pickle.loads(data)  # trusted: the user's own checkpoint location only
