"""Reader of checkpoint entries written by streamflow's former ``json`` codec (orjson + tags).

Only decoding is kept, so checkpoints and savepoints taken before the switch to
:mod:`streamflow.state.codec` (MessagePack) still restore; nothing writes this
format any more. Every JSON object is a one-key tag ``{tag: payload}``: ``t``
tuple, ``d`` str-keyed dict, ``m`` other dict as ``[k1, v1, ...]``, ``s`` set,
``f`` frozenset, ``b`` base64 bytes, ``i`` hex big int, ``x`` NaN/inf.
"""

from __future__ import annotations

import binascii
from typing import Any

import orjson

NAME = "json"


def _dec(node: Any) -> Any:
    t = type(node)
    if t is list:
        return [_dec(x) for x in node]
    if t is not dict:
        return node
    if len(node) != 1:
        raise ValueError(f"expected a one-key tag object, got keys {sorted(node)[:5]!r}")
    [(tag, payload)] = node.items()
    decoder = _DECODERS.get(tag)
    if decoder is None:
        raise ValueError(f"unknown codec tag {tag!r}")
    return decoder(payload)


def _dec_map(payload: list[Any]) -> dict[Any, Any]:
    it = iter(_dec(payload))
    return dict(zip(it, it, strict=True))


_DECODERS: dict[str, Any] = {
    "t": lambda p: tuple(_dec(p)),
    "d": lambda p: {k: _dec(v) for k, v in p.items()},
    "m": _dec_map,
    "s": lambda p: set(_dec(p)),
    "f": lambda p: frozenset(_dec(p)),
    "b": lambda p: binascii.a2b_base64(p),
    "i": lambda p: int(p, 16),
    "x": float,
}


def decode(data: bytes) -> object:
    """Decode bytes written by the former ``json`` codec; malformed data raises ``ValueError``."""
    try:
        tree = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"not legacy json checkpoint data (invalid JSON): {e}") from e
    try:
        return _dec(tree)
    except (TypeError, AttributeError, binascii.Error) as e:
        raise ValueError(f"malformed legacy json checkpoint data: {e}") from e
