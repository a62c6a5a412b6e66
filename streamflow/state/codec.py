"""Typed value codec for checkpoint data, built on orjson.

Theory of operation
-------------------
Checkpoint state is plain Python data. JSON alone loses types (a tuple comes
back as a list, ``{1: "a"}`` cannot be written, big ints and NaN are refused or
mangled), so :func:`encode` first maps the value onto a JSON tree in one pass,
tagging exactly the values JSON cannot carry, and :func:`decode` reverses that
pass after ``orjson.loads``. Every node is visited once: linear time, no
quadratic re-tagging. Values JSON carries natively pass through unchanged and
untagged: ``str``, ``bool``, ``None``, finite ``float`` (``-0.0`` included; orjson
writes the shortest repr that reads back bit-exact), ``int`` within 64 bits, and
``list`` (its elements encoded).

The tree has one rule: **every JSON object is a tag** ``{tag: payload}`` with a
single key, so a user's dict can never be mistaken for a tag:

==========  ============================================  ==========================
tag         Python value                                  payload
==========  ============================================  ==========================
``"t"``     ``tuple``                                     array of elements
``"d"``     ``dict`` whose keys are all ``str``           object ``{key: value}``
``"m"``     any other ``dict`` (int, tuple... keys)       flat array ``[k1, v1, ...]``
``"s"``     ``set``                                       array of elements
``"f"``     ``frozenset``                                 array of elements
``"b"``     ``bytes``                                     base64 string
``"i"``     ``int`` outside 64 bits (arbitrary size)      hex string (no digit limit)
``"x"``     ``float`` NaN, ``inf``, ``-inf``              ``"nan"``, ``"inf"``, ``"-inf"``
==========  ============================================  ==========================

Types are matched exactly (``type(x) is int``), so a subclass (``IntEnum``, a
``dict`` subclass, ``numpy.float64``) is refused rather than silently decoded
as its base class. Anything else raises ``TypeError`` naming the type and where
it sits in the value, and suggesting :class:`PickleCodec`. Limits: strings
must be valid Unicode (no lone surrogates), and nesting is bounded by orjson's
depth limit (about 120 tuples/dicts/sets deep, 250 lists); cycles are refused.

:class:`PickleCodec` is the explicit opt-in for arbitrary objects. Unpickling
runs code chosen by whoever wrote the bytes, so it is only ever fed bytes read
back from the checkpoint or savepoint location the user configured for their
own job: never point a job that uses it at a directory others can write to.
"""

from __future__ import annotations

import binascii
import math
import pickle
from typing import Any, Protocol, runtime_checkable

import orjson

__all__ = ["Codec", "JsonCodec", "PickleCodec", "decode", "encode"]

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1  # orjson reads and writes the u64 range too
_NONE_TYPE = type(None)
_SUPPORTED = "None, bool, int, float, str, bytes, tuple, list, dict, set, frozenset"


@runtime_checkable
class Codec(Protocol):
    """Turns checkpoint values into bytes and back."""

    name: str

    def encode(self, obj: object) -> bytes: ...

    def decode(self, data: bytes) -> object: ...


class _Unsupported(Exception):
    pass


# ---------------------------------------------------------------- encoding


def _plain(values: Any) -> bool:
    """True if every value in ``values`` passes through JSON as is (C-speed scans only)."""
    types = set(map(type, values))
    if types <= _PASS_TYPES:
        return True
    if types == _INT_ONLY:
        return min(values) >= _INT_MIN and max(values) <= _INT_MAX
    if types == _FLOAT_ONLY:
        return math.isfinite(sum(values, 0.0))  # NaN/inf in, or overflow: not plain
    return False


def _enc(obj: Any) -> Any:
    t = type(obj)
    if t is str or t is bool or obj is None:
        return obj
    if t is int:
        return obj if _INT_MIN <= obj <= _INT_MAX else {"i": format(obj, "x")}
    if t is float:
        return obj if math.isfinite(obj) else {"x": repr(obj)}
    if t is list:
        return obj if _plain(obj) else [_enc(x) for x in obj]
    encoder = _ENCODERS.get(t)
    if encoder is None:
        raise _Unsupported
    return encoder(obj)


def _enc_dict(obj: dict[Any, Any]) -> Any:
    if set(map(type, obj)) <= _STR_ONLY:
        return {"d": obj if _plain(obj.values()) else {k: _enc(v) for k, v in obj.items()}}
    return {"m": [e for kv in obj.items() for e in (_enc(kv[0]), _enc(kv[1]))]}


def _enc_items(obj: Any) -> Any:
    return list(obj) if _plain(obj) else [_enc(x) for x in obj]


_PASS_TYPES = frozenset({str, bool, _NONE_TYPE})
_STR_ONLY = frozenset({str})
_INT_ONLY = frozenset({int})
_FLOAT_ONLY = frozenset({float})
_ENCODERS: dict[type, Any] = {
    tuple: lambda obj: {"t": obj if _plain(obj) else [_enc(x) for x in obj]},  # orjson: array
    dict: _enc_dict,
    set: lambda obj: {"s": _enc_items(obj)},
    frozenset: lambda obj: {"f": _enc_items(obj)},
    bytes: lambda obj: {"b": binascii.b2a_base64(obj, newline=False).decode("ascii")},
}


def encode(obj: object) -> bytes:
    """Encode ``obj`` (see the module docstring for what is supported) to JSON bytes."""
    try:
        tree = _enc(obj)
    except _Unsupported:
        try:
            path, bad = _find_unsupported(obj, "value")
        except RecursionError:
            raise ValueError("cannot encode a cyclic or too deeply nested value") from None
        name = f"{type(bad).__module__}.{type(bad).__qualname__}"
        if type(bad).__module__ == "builtins":
            name = type(bad).__qualname__
        raise TypeError(
            f"cannot encode {name} at {path} in checkpoint data: the default codec "
            f"round-trips only {_SUPPORTED} (exact types, not subclasses); convert the "
            f"value, or opt in to pickle with PickleCodec()"
        ) from None
    except RecursionError:
        raise ValueError("cannot encode a cyclic or too deeply nested value") from None
    try:
        return orjson.dumps(tree)
    except orjson.JSONEncodeError as e:  # too deep, or a str with lone surrogates
        raise ValueError(f"cannot encode checkpoint data: {e}") from e


def _find_unsupported(obj: Any, path: str) -> tuple[str, object]:
    """Slow path, only after a failure: locate the first value ``_enc`` refuses."""
    t = type(obj)
    if t is dict:
        for k, v in obj.items():
            found = _find_unsupported(k, f"{path} key {k!r}")
            if found[0]:
                return found
            found = _find_unsupported(v, f"{path}[{k!r}]")
            if found[0]:
                return found
        return "", obj
    if t in (list, tuple):
        for i, x in enumerate(obj):
            found = _find_unsupported(x, f"{path}[{i}]")
            if found[0]:
                return found
        return "", obj
    if t in (set, frozenset):
        for x in obj:
            found = _find_unsupported(x, f"{path} element")
            if found[0]:
                return found
        return "", obj
    try:
        _enc(obj)
    except _Unsupported:
        return path, obj
    return "", obj


# ---------------------------------------------------------------- decoding


def _dec(node: Any) -> Any:
    t = type(node)
    if t is list:
        if _JSON_CONTAINERS.isdisjoint(map(type, node)):
            return node
        return [_dec(x) if type(x) in _JSON_CONTAINERS else x for x in node]
    if t is not dict:
        return node
    if len(node) != 1:
        raise ValueError(f"expected a one-key tag object, got keys {sorted(node)[:5]!r}")
    [(tag, payload)] = node.items()
    decoder = _DECODERS.get(tag)
    if decoder is None:
        raise ValueError(f"unknown codec tag {tag!r}")
    return decoder(payload)


def _dec_str_dict(payload: dict[str, Any]) -> dict[str, Any]:
    if _JSON_CONTAINERS.isdisjoint(map(type, payload.values())):
        return payload
    return {k: _dec(v) for k, v in payload.items()}


def _dec_map(payload: list[Any]) -> dict[Any, Any]:
    it = iter(_dec(payload))
    return dict(zip(it, it, strict=True))


_JSON_CONTAINERS = frozenset({list, dict})
_DECODERS: dict[str, Any] = {
    "t": lambda p: tuple(_dec(p)),
    "d": _dec_str_dict,
    "m": _dec_map,
    "s": lambda p: set(_dec(p)),
    "f": lambda p: frozenset(_dec(p)),
    "b": lambda p: binascii.a2b_base64(p),
    "i": lambda p: int(p, 16),
    "x": float,
}


def decode(data: bytes) -> object:
    """Decode bytes written by :func:`encode`; malformed data raises ``ValueError``."""
    try:
        tree = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"not checkpoint codec data (invalid JSON): {e}") from e
    if type(tree) not in _JSON_CONTAINERS:
        return tree
    try:
        return _dec(tree)
    except (TypeError, AttributeError, binascii.Error) as e:
        raise ValueError(f"malformed checkpoint codec data: {e}") from e


# ---------------------------------------------------------------- codec objects


class JsonCodec:
    """The default codec: :func:`encode` / :func:`decode`."""

    name = "json"

    def encode(self, obj: object) -> bytes:
        return encode(obj)

    def decode(self, data: bytes) -> object:
        return decode(data)


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
