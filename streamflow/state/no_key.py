"""The current key while there is none: keyed state used outside a keyed context is refused.

Theory of operation
-------------------
A keyed backend's ``current_key`` is set by its operator before user code runs for a record
or a timer. Before the first one (``open()``), and on a broadcast stream's side, there is no
key. ``None`` cannot stand for that: it is a legal key (a selector may return it), so state
written in ``open()`` would silently become the state of the records whose key is None.
Flink refuses the access instead (``StateTable#checkKeyNamespacePreconditions``: "No key set.
This method should not be called outside of a keyed context.").

The backend starts with :data:`NO_KEY`, a sentinel distinct from every key, and checks it at
no cost on the hot path: every state access (heap and RocksDB, plain and TTL, keyed and
per-window) looks the current key up in a dict (the heap table, RocksDB's cache, a timer
queue's index), which hashes it, and the sentinel's ``__hash__`` raises
:class:`NoKeySetError`. Encoding it (pickle) raises as well. Only then, on the error path,
is the state found by walking up the frames of the access to the state object being used, so
the error names it; the operator's failure note (``runtime/operator.py``) names the operator.

Operators leave the last key set after a record, as Flink does (``close()`` sees it); the
broadcast side of a keyed broadcast operator sets :data:`BROADCAST_NO_KEY`, whose error points
to ``ctx.apply_to_keyed_state()``.
"""

from __future__ import annotations

import sys
from typing import Any

from ..errors import StreamflowError

__all__ = ["BROADCAST_NO_KEY", "NO_KEY", "NoKeySetError"]


class NoKeySetError(StreamflowError, RuntimeError):
    """Keyed state or a timer was used while no key is set (outside a keyed context)."""


class _NoKey:
    """A current key that is no key: hashing or encoding it raises :class:`NoKeySetError`."""

    __slots__ = ("_hint", "_where")

    def __init__(self, where: str, hint: str) -> None:
        self._where = where
        self._hint = hint

    def error(self, used: str) -> NoKeySetError:
        """The error for ``used`` (``keyed state 'name'``, ``a timer``) reached without a key."""
        return NoKeySetError(
            f"No key set: {used} was used {self._where}. This method should not be called "
            f"outside of a keyed context: {self._hint}"
        )

    def _refuse(self, *_: Any) -> Any:
        raise self.error(_accessed_state(sys._getframe(1)))

    __hash__ = __reduce__ = __reduce_ex__ = _refuse

    def __repr__(self) -> str:
        return f"<no key: {self._where}>"


NO_KEY = _NoKey(
    "outside a keyed context (in open(), or anywhere before a record or a timer set a key)",
    "move the state access into process_element / on_timer (the functions called for a "
    "record or a timer of a key); open() may only create the state handles",
)
BROADCAST_NO_KEY = _NoKey(
    "in process_broadcast_element (the broadcast side is not keyed: it has no key)",
    "use ctx.apply_to_keyed_state() to reach every key's state",
)


def _accessed_state(frame: Any) -> str:
    """``keyed state 'name'`` of the nearest state object up the stack from ``frame`` (a state
    method looking the key up), else what a keyed access without a state is: a timer."""
    depth = 0
    while frame is not None and depth < 12:
        name = _state_name(frame.f_locals.get("self"))
        if name is not None:
            return f"keyed state {name!r}"
        frame, depth = frame.f_back, depth + 1
    return "keyed state or a timer"


def _state_name(obj: Any) -> str | None:
    """The state name of ``obj`` when it is a state table (RocksDB's) or a state object over
    one (it holds its ``_table`` and its ``_backend``), else None."""
    if obj is None:
        return None
    table = obj if hasattr(obj, "_rkeys") else getattr(obj, "_table", None)
    name = getattr(table, "name", None)  # a RocksTable names its state
    if isinstance(name, str):
        return name
    backend = getattr(obj, "_backend", None)
    tables = getattr(backend, "_tables", None)
    if table is None or not isinstance(tables, dict):
        return None
    return next((n for n, t in tables.items() if t is table), None)
