"""Declared state types: what a value state stores, and which codec checkpoints its state.

PyFlink serializes a state value with the descriptor's type on every
``update``: a ``Types.FLOAT()`` value comes back as a 32-bit float, a row type
comes back as a ``Row``. Types that convert (``TypeInformation.convert`` is not
the identity) get the :class:`TypedValueState` wrapper; other descriptors get
the plain state.

The declared type also names the codec of the state in checkpoints:

* ``Types.PICKLED_BYTE_ARRAY()`` (for a map state, as its key or value type)
  opts that state in to pickling, as PyFlink pickles it: each key's entry is
  pickled (``pickle_entries``) before the checkpoint codec sees it, and the
  snapshot lists the state under ``"pickled"``. Any picklable Python object
  can then be kept in it, also one the default codec refuses.
* Every other declared type (primitives, rows, tuples, lists, maps, dates...)
  and an undeclared type use the job's checkpoint codec: by default
  MessagePack with the extension types of ``codec.py``, which carries these
  types exactly.

The declared type is also what a restore checks (Flink's serializer compatibility check,
``StateMigrationException``): the keyed operator's snapshot lists each state's declared type
(``declared_types``), and a state declared again with another type after a restore is refused
naming both types (:func:`declare`), instead of handing back values of the old type under the
new declaration. A state declared without a type (None) is not checked.

Unpickling runs code chosen by whoever wrote the bytes, so a restore decodes
a pickled state only when the *running* job's descriptor declares it pickled
(:func:`declare`): until then its entries stay :class:`Pickled` bytes, and a
descriptor that declares another type for them is refused with an error
naming the state. A checkpoint alone can never make a job unpickle.
"""

from __future__ import annotations

import pickle
from typing import Any

from ..errors import StreamflowError

__all__ = [
    "Pickled",
    "StateMigrationError",
    "declare",
    "pickle_entries",
    "pickles",
    "restored_entries",
    "typed_value_state",
]


class StateMigrationError(StreamflowError, TypeError):
    """A restored state is declared with a type that cannot read what was stored (Flink's
    ``StateMigrationException``)."""


class TypedValueState:
    __slots__ = ("_convert", "_inner")

    def __init__(self, inner: Any, convert: Any) -> None:
        self._inner = inner
        self._convert = convert

    def value(self) -> Any:
        return self._inner.value()

    def update(self, value: Any) -> None:
        self._inner.update(None if value is None else self._convert(value))

    def clear(self) -> None:
        self._inner.clear()


def typed_value_state(state: Any, descriptor: Any) -> Any:
    from ..types.typeinfo import TypeInformation

    type_info = getattr(descriptor, "type_info", None)
    if isinstance(type_info, TypeInformation) and type_info.converts():
        return TypedValueState(state, type_info.convert)
    return state


# ---------------------------------------------------------------- the state codec named by the type


class Pickled(bytes):
    """A restored entry of a pickled state, not unpickled yet (see the module docstring)."""


def pickles(type_info: Any) -> bool:
    """Whether a descriptor's type info opts its state in to pickling."""
    from ..types.typeinfo import PickledBytesTypeInfo

    if isinstance(type_info, tuple):  # MapStateDescriptor: (key type, value type)
        return any(isinstance(t, PickledBytesTypeInfo) for t in type_info)
    return isinstance(type_info, PickledBytesTypeInfo)


def declare(backend: Any, descriptor: Any) -> None:
    """Note ``descriptor``'s codec on ``backend`` (called when user code gets the state):
    a pickled state is pickled in snapshots and its restored entries are unpickled now; a type
    other than the one the restored state was declared with is refused."""
    name = descriptor.name
    _check_declared_type(backend, name, getattr(descriptor, "type_info", None))
    table = backend._tables.get(name)
    if pickles(getattr(descriptor, "type_info", None)):
        backend.pickled.add(name)
        # incremental snapshots (state/incremental.py) write dirty entries with the job's codec:
        # a pickled state makes this backend's snapshots full ones, which pickle it
        untracked = getattr(backend, "_untracked", None)
        if untracked is not None:
            untracked.add(name)
        if table:
            for key, entry in table.items():
                if type(entry) is Pickled:
                    table[key] = pickle.loads(entry)  # the job declares this state pickled: trusted
        return
    backend.pickled.discard(name)
    if table and any(type(entry) is Pickled for entry in table.values()):
        raise TypeError(
            f"state {name!r} was checkpointed pickled (declared Types.PICKLED_BYTE_ARRAY()) but its "
            f"descriptor now declares {descriptor.type_info!r}: declare Types.PICKLED_BYTE_ARRAY() "
            "again to restore it (restoring never unpickles a state the job does not declare pickled)"
        )


def _check_declared_type(backend: Any, name: str, type_info: Any) -> None:
    """Record ``name``'s declared type on ``backend`` (``declared_types``, for snapshots) after
    comparing it with the restored one (``restored_types``)."""
    if type_info is None or (isinstance(type_info, tuple) and all(t is None for t in type_info)):
        return
    declared = repr(type_info)
    restored = backend.restored_types.get(name)
    if restored is not None and restored != declared:
        raise StateMigrationError(
            f"state {name!r} was checkpointed with type {restored} but its descriptor now declares "
            f"{declared}: the new state type must not be incompatible with the old one (Flink's "
            "StateMigrationException); declare the former type, or give the state a new name"
        )
    backend.declared_types[name] = declared


def pickle_entries(tables: dict[str, dict], names: set[str]) -> dict[str, dict]:
    """``tables`` with each entry of the states ``names`` pickled (copies; the state stays)."""
    view = dict(tables)
    for name in names:
        table = tables.get(name)
        if table:
            view[name] = {
                key: bytes(entry) if type(entry) is Pickled else pickle.dumps(entry, pickle.HIGHEST_PROTOCOL)
                for key, entry in table.items()
            }
    return view


def restored_entries(entries: dict, pickled: bool, declared: bool) -> dict:
    """Entries read back from a snapshot: a pickled state's entries stay :class:`Pickled`
    until the job declares the state pickled (``declared``: it already did)."""
    if not pickled:
        return entries
    if declared:
        return {key: pickle.loads(data) for key, data in entries.items()}
    return {key: Pickled(data) for key, data in entries.items()}
