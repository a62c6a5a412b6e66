"""Declared state types: what a value state stores, and which codec checkpoints its state.

PyFlink serializes a state value with the descriptor's type on every
``update``: a ``Types.FLOAT()`` value comes back as a 32-bit float, a row type
comes back as a ``Row``; so are a list state's elements and a map state's keys
and values. Types that convert (``TypeInformation.convert`` is not the identity)
get the :class:`TypedValueState`, :class:`TypedListState` or :class:`TypedMapState`
wrapper; a reducing state stores its first value and its reduce function's results
converted, an aggregating state its accumulators (:func:`typed_reducing_descriptor`);
other descriptors get the plain state.

The declared type also names the codec of the state in checkpoints:

* ``Types.PICKLED_BYTE_ARRAY()`` (for a map state, as its key or value type)
  opts that state in to pickling, as PyFlink pickles it: each key's entry is
  pickled (``pickle_entries``) before the checkpoint codec sees it, and the
  snapshot lists the state under ``"pickled"``. Any picklable Python object
  can then be kept in it, also one the default codec refuses. A RocksDB backend
  stores its values in the DB with the codec as they are written, not only at a
  checkpoint: there a pickled state's table pickles each entry on its way into
  RocksDB (:func:`pickled_entry`, a :class:`Pickled` the codec carries as extension
  18) and unpickles it on the way out (:func:`unpickled_entry`), so its DB, its
  checkpoint files and a savepoint hold the entries pickled, as a heap snapshot does.
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

import copy
import pickle
from typing import Any

from ..errors import StreamflowError
from .codec_format import Pickled as Pickled  # a restored entry not unpickled yet (module doc)
from .state_objects import MapDictProtocol

__all__ = [
    "Pickled",
    "StateMigrationError",
    "TypedReducingState",
    "declare",
    "pickle_entries",
    "pickles",
    "restored_entries",
    "typed_list_state",
    "typed_map_state",
    "typed_reducing_descriptor",
    "typed_value_state",
]


class StateMigrationError(StreamflowError, TypeError):
    """A restored state is declared with a type that cannot read what was stored (Flink's
    ``StateMigrationException``)."""


class _TypedState:
    """A state that stores what it is given converted by ``convert`` (the declared type's)."""

    __slots__ = ("_convert", "_inner")

    def __init__(self, inner: Any, convert: Any) -> None:
        self._inner = inner
        self._convert = convert

    def clear(self) -> None:
        self._inner.clear()


class TypedValueState(_TypedState):
    __slots__ = ()

    def value(self) -> Any:
        return self._inner.value()

    def update(self, value: Any) -> None:
        self._inner.update(None if value is None else self._convert(value))


class TypedListState(_TypedState):
    """A list state whose elements are stored as the descriptor's element type declares them."""

    __slots__ = ()

    def get(self) -> Any:
        return self._inner.get()

    def __iter__(self) -> Any:
        return iter(self._inner.get())

    def add(self, value: Any) -> None:
        self._inner.add(self._convert(value))  # None stays None: refused by the list state

    def add_all(self, values: Any) -> None:
        self._inner.add_all(None if values is None else [self._convert(v) for v in values])

    def update(self, values: Any) -> None:
        self._inner.update(None if values is None else [self._convert(v) for v in values])


class TypedMapState(MapDictProtocol):
    """A map state whose keys and values are stored as the descriptor's key and value types
    declare them; a key is converted for look-ups too (PyFlink serializes it with the key type)."""

    __slots__ = ("_inner", "_key", "_value")

    def __init__(self, inner: Any, key: Any, value: Any) -> None:
        self._inner, self._key, self._value = inner, key, value

    def get(self, key: Any) -> Any:
        return self._inner.get(self._key(key))

    def put(self, key: Any, value: Any) -> None:
        self._inner.put(self._key(key), self._value(value))

    def put_all(self, mapping: Any) -> None:
        if mapping is None:  # adds nothing (the map state's put_all)
            self._inner.put_all(None)
        else:
            self._inner.put_all({self._key(k): self._value(v) for k, v in dict(mapping).items()})

    def remove(self, key: Any) -> None:
        self._inner.remove(self._key(key))

    def contains(self, key: Any) -> bool:
        return bool(self._inner.contains(self._key(key)))

    def keys(self) -> Any:
        return self._inner.keys()

    def values(self) -> Any:
        return self._inner.values()

    def items(self) -> Any:
        return self._inner.items()

    def is_empty(self) -> bool:
        return bool(self._inner.is_empty())

    def clear(self) -> None:
        self._inner.clear()

    def __iter__(self) -> Any:
        return iter(self._inner.keys())


class TypedReducingState(_TypedState):
    """A reducing state whose value is stored as the descriptor's type declares it: the first
    value added and each result of the reduce function (:func:`typed_reducing_descriptor`)."""

    __slots__ = ()

    def get(self) -> Any:
        return self._inner.get()

    def add(self, value: Any) -> None:
        self._inner.add(None if value is None else self._convert(value))  # None clears


class _TypedAggregate:
    """An AggregateFunction whose accumulators are stored as the state's declared type."""

    def __init__(self, agg: Any, convert: Any) -> None:
        self._agg, self._convert = agg, convert

    def create_accumulator(self) -> Any:
        return self._convert(self._agg.create_accumulator())

    def add(self, value: Any, accumulator: Any) -> Any:
        return self._convert(self._agg.add(value, accumulator))

    def get_result(self, accumulator: Any) -> Any:
        return self._agg.get_result(accumulator)

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        return self._convert(self._agg.merge(acc_a, acc_b))


def typed_reducing_descriptor(descriptor: Any) -> tuple[Any, Any]:
    """``descriptor`` with its reduce function's results (or, for an aggregating state, its
    accumulators) converted to the declared type, as PyFlink stores them serialized with it,
    and the conversion (None, and ``descriptor`` itself, when the type converts nothing)."""
    convert = _converter(getattr(descriptor, "type_info", None))
    if convert is None:
        return descriptor, None
    typed = copy.copy(descriptor)
    if hasattr(descriptor, "agg_function"):
        typed.agg_function = _TypedAggregate(descriptor.agg_function, convert)
    else:
        reduce = descriptor.reduce
        typed.reduce = lambda a, b: convert(reduce(a, b))
    return typed, convert


def _converter(type_info: Any) -> Any:
    from ..types.typeinfo import TypeInformation

    if isinstance(type_info, TypeInformation) and type_info.converts():
        return type_info.convert
    return None


def _same(value: Any) -> Any:
    return value


def typed_value_state(state: Any, descriptor: Any) -> Any:
    convert = _converter(getattr(descriptor, "type_info", None))
    return state if convert is None else TypedValueState(state, convert)


def typed_list_state(state: Any, descriptor: Any) -> Any:
    """PyFlink serializes each element with the descriptor's element type: a row type gives
    ``Row``s back, a ``Types.DOUBLE()`` floats (as :func:`typed_value_state` for a value)."""
    convert = _converter(getattr(descriptor, "type_info", None))
    return state if convert is None else TypedListState(state, convert)


def typed_map_state(state: Any, descriptor: Any) -> Any:
    """As :func:`typed_list_state`, for a map state's keys and values."""
    types = getattr(descriptor, "type_info", None)
    key_type, value_type = types if isinstance(types, tuple) else (None, None)
    key, value = _converter(key_type), _converter(value_type)
    if key is None and value is None:
        return state
    return TypedMapState(state, key or _same, value or _same)


# ---------------------------------------------------------------- the state codec named by the type


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
    if name in backend.restored_pickled:  # a RocksDB backend restored from a heap snapshot
        backend.restored_pickled.discard(name)
        table = _RestoredPickled(backend._rtables[name])
    if pickles(getattr(descriptor, "type_info", None)):
        backend.pickled.add(name)
        if getattr(backend, "is_rocksdb", False):  # values reach RocksDB pickled (module doc)
            backend.table(name, descriptor.kind, pickled_entry, unpickled_entry)
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
    # the restored declaration says pickled (a RocksDB table is not scanned for Pickled entries)
    restored_pickled = _restored_pickled(backend.restored_types.get(name))
    if restored_pickled or (table and any(type(entry) is Pickled for entry in table.values())):
        raise TypeError(
            f"state {name!r} was checkpointed pickled (declared Types.PICKLED_BYTE_ARRAY()) but its "
            f"descriptor now declares {descriptor.type_info!r}: declare Types.PICKLED_BYTE_ARRAY() "
            "again to restore it (restoring never unpickles a state the job does not declare pickled)"
        )


def pickled_entry(entry: Any) -> Any:
    """A pickled state's entry as a RocksDB backend stores it: :class:`Pickled` (the codec
    carries it as such, extension 18), so any picklable object can be kept, as on the heap."""
    return entry if type(entry) is Pickled else Pickled(pickle.dumps(entry, pickle.HIGHEST_PROTOCOL))


def unpickled_entry(entry: Any) -> Any:
    """A pickled state's entry read back from RocksDB (only for a state the running job declares
    pickled: ``declare`` sets it); an entry stored before the state was pickled stays as it is."""
    return pickle.loads(entry) if type(entry) is Pickled else entry  # declared pickled: trusted


def _restored_pickled(restored: str | None) -> bool:
    """Whether a restored declaration (the repr of a type, or of a map state's pair of types)
    opted the state in to pickling, as :func:`pickles` tells of a type."""
    if restored is None:
        return False
    mark = "PickledByteArrayTypeInfo"  # PickledBytesTypeInfo's repr (PyFlink's name)
    return restored == mark or restored.startswith(f"({mark}, ") or restored.endswith(f", {mark})")


class _RestoredPickled:
    """The entries of a RocksDB table restored from a heap snapshot's pickled state, for
    ``declare``: read once (a list: the loop writes while it goes), written back unpickled."""

    def __init__(self, table: Any) -> None:
        self._table = table
        self._entries = list(table.items())

    def __bool__(self) -> bool:
        return bool(self._entries)

    def items(self) -> list[tuple[Any, Any]]:
        return self._entries

    def values(self) -> list[Any]:
        return [entry for _, entry in self._entries]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._table[key] = value


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
