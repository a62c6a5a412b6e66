"""A keyed state value the checkpoint codec cannot encode: the error that names it.

A state declared without a type (or with one the codec carries) is checkpointed by the job's
state codec, by default MessagePack with the extension types of ``codec.py``: it refuses, say,
an instance of a plain user class, which PyFlink would have pickled (an undeclared type is
``PICKLED_BYTE_ARRAY`` there). The codec's own error names the type and where it sits inside
the value, not which state held it: the job's author needs the state, the operator, the value's
type and the fix (declare the state ``Types.PICKLED_BYTE_ARRAY()``, or a type the codec
carries), and gets them from :class:`StateEncodingError`.

Where the value is refused: a RocksDB backend encodes a state's values as it writes them into
the DB (a flush: when its cache fills, and at every checkpoint at the latest), and names the
entry it was writing (``rocksdb_table.py``). A heap backend's values are encoded by a
checkpoint, in several places (an incremental capture, a full snapshot in slices, the
operator's whole state): when one fails, :func:`find_refused` looks for the entry the codec
refuses (a scan of the tables, only after a failure) and the task raises the error naming it
(``runtime/task_state.py``). Either way the first checkpoint fails the job at the latest
(or its restart strategy restarts it): never a checkpoint silently without the state.
"""

from __future__ import annotations

import pickle
from typing import Any

from ..errors import StreamflowError
from .codec import _locate

__all__ = ["REFUSALS", "StateEncodingError", "find_refused", "refused_state_value"]

# what a codec or pickle raises for a value it refuses (pickle: AttributeError for a local class)
REFUSALS = (TypeError, ValueError, AttributeError, pickle.PicklingError)


class StateEncodingError(StreamflowError, TypeError):
    """A keyed state holds a value the checkpoint codec cannot encode (see the module doc)."""


def _type_name(t: type) -> str:
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def refused_state_value(
    state: str, where: str, value: Any, cause: BaseException, pickled: bool = False, kind: str | None = None
) -> StateEncodingError:
    """The error for ``value`` of keyed state ``state`` (of ``kind``: "window" for a window
    operator's own tables) in ``where`` (an operator), which the codec (``pickled``: pickle,
    the state being declared so) refused with ``cause``."""
    if pickled:
        return StateEncodingError(
            f"keyed state {state!r} of {where} is declared Types.PICKLED_BYTE_ARRAY() but holds a "
            f"value of type {_type_name(type(value))} that pickle refuses ({cause}): store a "
            "picklable value (or make it picklable: __reduce__ / __getstate__)"
        )
    detail = str(cause).split(": the default codec", 1)[0]  # its type and place, not the list
    if kind == "window":  # a window operator's own state: no descriptor of the user's to declare
        return StateEncodingError(
            f"window state {state!r} of {where} holds a value of type "
            f"{_type_name(_refused_type(value))} that the checkpoint codec cannot encode ({detail}): "
            "a window operator's contents are checkpointed with the job's state codec (a stream "
            "declared Types.PICKLED_BYTE_ARRAY() does not pickle them): make the window's elements "
            "(or accumulators) a type the codec carries (a dataclass, a Row...), or opt the job in "
            "to pickle with get_checkpoint_config().set_state_codec(PickleCodec())"
        )
    return StateEncodingError(
        f"keyed state {state!r} of {where} holds a value of type {_type_name(_refused_type(value))} "
        f"that the checkpoint codec cannot encode ({detail}): declare the state's type in its "
        "descriptor, Types.PICKLED_BYTE_ARRAY() to keep any picklable object (PyFlink's default "
        "for a state without a type), or a type the codec carries (a dataclass, a Row type...); "
        "or convert the value before storing it (or opt the whole job's state in to pickle: "
        "get_checkpoint_config().set_state_codec(PickleCodec()))"
    )


def _refused_type(value: Any) -> type:
    """The type of what the default codec refuses inside ``value`` (a TTL entry, a map state's
    dict, a list...), else ``value``'s."""
    try:
        path, bad, _ = _locate(value, "value")
    except RecursionError:
        return type(value)
    return type(bad) if path else type(value)


def find_refused(backend: Any, codec: Any) -> tuple[str, Any, BaseException, bool] | None:
    """The first ``(state, value, error, pickled)`` of a heap ``backend`` that ``codec`` refuses
    (or pickle, for a state declared pickled: ``pickled``); None if none is refused. Slow: a
    scan of every table, only after a checkpoint failed."""
    to_plain = getattr(backend, "_to_plain", {})
    for name, table in list(getattr(backend, "_tables", {}).items()):
        pickled = name in backend.pickled
        plain = to_plain.get(name)
        for value in list(table.values()):
            try:
                if pickled:
                    pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
                else:
                    codec.encode(value if plain is None else plain(value))
            except Exception as e:
                return name, value, e, pickled
    return None
