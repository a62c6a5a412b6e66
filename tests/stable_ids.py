"""Test ids that are the same in every process: the suite runs under pytest-xdist, which refuses
to distribute tests whose workers collect different ids. ``repr`` is not stable across
processes for sets (their order follows string hashes, randomized per process) nor for objects
shown with their address; :func:`stable_repr` sorts set elements and drops addresses."""

from __future__ import annotations

import re
from typing import Any

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def stable_repr(value: Any) -> str:
    """``repr(value)`` with sets' elements sorted (recursively) and no object addresses."""
    if isinstance(value, (set, frozenset)):
        inner = ", ".join(sorted(stable_repr(v) for v in value))
        return f"{type(value).__name__}({{{inner}}})"
    if isinstance(value, tuple) and type(value) is tuple:
        return "(" + ", ".join(stable_repr(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if type(value) is list:
        return "[" + ", ".join(stable_repr(v) for v in value) + "]"
    if type(value) is dict:
        return "{" + ", ".join(f"{stable_repr(k)}: {stable_repr(v)}" for k, v in value.items()) + "}"
    return _ADDRESS.sub("", repr(value))
