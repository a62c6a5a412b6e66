"""What user code holds of keyed state: descriptors (PyFlink's names) and state objects.

A descriptor names a state and its kind (value, list, map, reducing, aggregating);
``KeyedStateBackend.get_state`` (``keyed.py``) hands out the matching state object.
A state object reads and writes its backend's table (a plain ``dict``) at the
backend's ``current_key``, set by the operator before it calls user code, and records
each write in the table's log of changes when the backend checkpoints incrementally
(``incremental.Changes``; None otherwise). ``MapViews`` is the read side and dict
protocol of a map state, shared with the window's per-window map state.

Every value written is the state's own copy (``runtime/detach.py``: an immutable value is
its own copy, at the cost of a type check): a function that writes an object and emits it
(``current.append(v); state.update(current); yield current``) can go on changing its state
without changing the record it emitted, as in Flink, where records and state are
serialized copies. A value read is the state's own object (no copy per read): changed in
place, it changes the state without ``update``, which Flink's contract requires anyway
(Flink's RocksDB backend loses such a change; an incremental checkpoint here holds it only
if the key was written since the last checkpoint, since reads are not logged).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..functions import AggregateFunction, ReduceFunction
from ..runtime.detach import IMMUTABLE, detached, detached_all
from . import incremental as _inc

if TYPE_CHECKING:
    from .keyed import KeyedStateBackend

__all__ = [
    "AggregatingState",
    "AggregatingStateDescriptor",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "MapViews",
    "ReducingState",
    "ReducingStateDescriptor",
    "StateDescriptor",
    "ValueState",
    "ValueStateDescriptor",
]

_MISSING = object()


class StateDescriptor:
    kind = "value"

    def __init__(self, name: str, type_info: Any = None) -> None:
        if not name or not isinstance(name, str):
            raise ValueError(f"a state name must be a non-empty string, got {name!r}")
        self.name = name
        self.type_info = type_info
        self.ttl_config: Any = None

    def get_name(self) -> str:
        return self.name

    def enable_time_to_live(self, ttl_config: Any) -> None:
        """Keep a ``StateTtlConfig`` on this descriptor (see ``streamflow/state/ttl.py``)."""
        self.ttl_config = ttl_config


class ValueStateDescriptor(StateDescriptor):
    kind = "value"

    def __init__(self, name: str, value_type_info: Any = None, default: Any = None) -> None:
        super().__init__(name, value_type_info)
        self.default = default


class ListStateDescriptor(StateDescriptor):
    kind = "list"

    def __init__(self, name: str, elem_type_info: Any = None) -> None:
        super().__init__(name, elem_type_info)


class MapStateDescriptor(StateDescriptor):
    kind = "map"

    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None) -> None:
        super().__init__(name, (key_type_info, value_type_info))


class ReducingStateDescriptor(StateDescriptor):
    kind = "reducing"

    def __init__(
        self,
        name: str,
        reduce_function: ReduceFunction | Callable[[Any, Any], Any],
        type_info: Any = None,
    ) -> None:
        super().__init__(name, type_info)
        fn = reduce_function
        self.reduce: Callable[[Any, Any], Any] = fn.reduce if isinstance(fn, ReduceFunction) else fn
        self._reduce_function = reduce_function

    def get_reduce_function(self) -> Any:
        return self._reduce_function


class AggregatingStateDescriptor(StateDescriptor):
    kind = "aggregating"

    def __init__(self, name: str, agg_function: AggregateFunction, state_type_info: Any = None):
        super().__init__(name, state_type_info)
        self.agg_function = agg_function

    def get_agg_function(self) -> AggregateFunction:
        return self.agg_function


class _KeyedState:
    """``_dirty``: the writes since the last snapshot (``incremental.Changes``; None: not
    tracked); every write records its key's value (a deletion once the key is gone)."""

    __slots__ = ("_backend", "_dirty", "_table")

    def __class_getitem__(cls, item: Any) -> type:
        """``ValueState[int]``, ``MapState[str, int]``...: generic classes, as PyFlink's."""
        return cls

    def __init__(self, backend: KeyedStateBackend, table: dict, dirty: _inc.Changes | None) -> None:
        self._backend = backend
        self._table = table
        self._dirty = dirty

    def _written(self, key: Any) -> None:
        if self._dirty is not None:
            self._dirty.put(key, self._table.get(key, _inc.MISSING))

    def clear(self) -> None:
        key = self._backend.current_key
        if self._table.pop(key, None) is None and not self._table:  # (no entry holds None)
            hash(key)  # an empty dict's pop does not hash: no key set raises here (no_key.py)
        if self._dirty is not None:
            self._dirty.delete(key)


class ValueState(_KeyedState):
    __slots__ = ("_default",)

    def __init__(
        self, backend: KeyedStateBackend, table: dict, dirty: _inc.Changes | None, default: Any
    ) -> None:
        super().__init__(backend, table, dirty)
        self._default = default

    def value(self) -> Any:
        return self._table.get(self._backend.current_key, self._default)

    @staticmethod
    def of(backend: KeyedStateBackend, table: dict, dirty: _inc.Changes | None, default: Any) -> ValueState:
        """The value state for a descriptor's ``default``: a mutable default is copied for
        each key that reads it (``MutableDefaultValueState``)."""
        kind = ValueState if type(default) in IMMUTABLE else MutableDefaultValueState
        return kind(backend, table, dirty, default)

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            if type(value) not in IMMUTABLE:
                value = detached(value)  # the state's own copy (module doc)
            key = self._backend.current_key
            self._table[key] = value
            if self._dirty is not None:
                self._dirty.put(key, value)


class MutableDefaultValueState(ValueState):
    """A ``ValueState`` whose descriptor's default is mutable (``ValueStateDescriptor(name,
    type, [])``): a key without a value reads a copy of it, as Flink's
    ``StateDescriptor#getDefaultValue`` returns ``serializer.copy(defaultValue)``; handing out
    the descriptor's own object let one key's ``value().append(x)`` change every key's default."""

    __slots__ = ()

    def value(self) -> Any:
        value = self._table.get(self._backend.current_key, _MISSING)
        return detached(self._default) if value is _MISSING else value


class ListState(_KeyedState):
    """Null (``None``) is refused as an element and as the list, before anything is written
    (Flink's ``HeapListState``/``RocksDBListState``: NullPointerException, here TypeError with
    Flink's message), so a refused call leaves the key's list as it was."""

    __slots__ = ()

    def get(self) -> list:
        return list(self._table.get(self._backend.current_key, ()))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())

    def add(self, value: Any) -> None:
        if value is None:
            raise TypeError(NULL_ELEMENT)
        if type(value) not in IMMUTABLE:
            value = detached(value)
        key = self._backend.current_key
        self._table.setdefault(key, []).append(value)
        self._written(key)

    def add_all(self, values: Iterable[Any]) -> None:
        values = detached_all(checked_list(values))
        if values:  # adding nothing gives the key no state (Flink's addAll)
            key = self._backend.current_key
            self._table.setdefault(key, []).extend(values)
            self._written(key)

    def update(self, values: Iterable[Any]) -> None:
        values = detached_all(checked_list(values))
        if values:
            key = self._backend.current_key
            self._table[key] = values
            self._written(key)
        else:
            self.clear()


NULL_ELEMENT = "You cannot add null to a ListState."
NULL_LIST = "List of values to add cannot be null."


def checked_list(values: Iterable[Any] | None) -> list:
    """``values`` as a new list, refusing null as the list or as an element (Flink's messages)."""
    if values is None:
        raise TypeError(NULL_LIST)
    values = list(values)
    if any(v is None for v in values):
        raise TypeError(NULL_ELEMENT)
    return values


class MapDictProtocol:
    """PyFlink's MapState is also used like a dict: ``state[k]``, ``state[k] = v``, ``del
    state[k]``, ``k in state``, in terms of the state's ``get``, ``put``, ``remove`` and
    ``contains`` (every map state: keyed, window, TTL, typed)."""

    __slots__ = ()

    if TYPE_CHECKING:  # what the subclass provides

        def get(self, key: Any) -> Any: ...
        def put(self, key: Any, value: Any) -> None: ...
        def remove(self, key: Any) -> None: ...
        def contains(self, key: Any) -> bool: ...

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)


class MapViews(MapDictProtocol):
    """The read views and dict protocol of a map state, in terms of its ``_map()``, ``get``,
    ``put`` and ``remove`` (keyed ``MapState`` and a window's ``WindowMapState``)."""

    __slots__ = ()

    def _map(self) -> dict:
        raise NotImplementedError

    def get(self, key: Any) -> Any:
        return self._map().get(key)

    def put(self, key: Any, value: Any) -> None:
        raise NotImplementedError

    def remove(self, key: Any) -> None:
        raise NotImplementedError

    def contains(self, key: Any) -> bool:
        return key in self._map()

    def keys(self) -> list:
        return list(self._map().keys())

    def values(self) -> list:
        return list(self._map().values())

    def items(self) -> list:
        return list(self._map().items())

    def is_empty(self) -> bool:
        return not self._map()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())


class MapState(MapViews, _KeyedState):
    __slots__ = ()

    def _map(self) -> dict:
        return self._table.get(self._backend.current_key) or {}

    def put(self, key: Any, value: Any) -> None:
        if type(value) not in IMMUTABLE:
            value = detached(value)
        current = self._backend.current_key
        self._table.setdefault(current, {})[key] = value
        self._written(current)

    def put_all(self, mapping: dict | None) -> None:
        """A null or empty ``mapping`` adds nothing (Flink's RocksDBMapState/TtlMapState#putAll)."""
        if not mapping:
            return
        current = self._backend.current_key
        self._table.setdefault(current, {}).update(detached_items(mapping))
        self._written(current)

    def put_owned(self, key: Any, value: Any) -> None:
        """``put`` of a value that is already the state's own (no copy): a window's per-window
        state (``runtime/window_state.py``) builds each new value from copies itself."""
        current = self._backend.current_key
        self._table.setdefault(current, {})[key] = value
        self._written(current)

    def remove(self, key: Any) -> None:
        current = self._backend.current_key
        m = self._table.get(current)
        if m is not None:
            m.pop(key, None)
            if not m:
                self.clear()
            else:
                self._written(current)


def detached_items(mapping: Any) -> dict:
    """``mapping`` as a new dict whose values are the state's own copies (``runtime/detach.py``)."""
    entries = dict(mapping)
    if not all(map(IMMUTABLE.__contains__, map(type, entries.values()))):
        for k, v in entries.items():
            entries[k] = detached(v)
    return entries


class ReducingState(_KeyedState):
    """The accumulator is the state's own object: the reduce function may change its first
    argument in place and return it (``runtime/detach.py``); a value stored as it came (the
    first, or one the function returned) is copied, and ``get`` returns a copy of a mutable
    accumulator, which the next ``add`` may change in place (Flink's ``get`` deserializes).

    Null is no value (Flink's ``HeapReducingState``): adding null clears the key's state, and a
    reduce function that returns null leaves it empty, so the next ``add`` starts afresh."""

    __slots__ = ("_reduce",)

    def __init__(
        self, backend: KeyedStateBackend, table: dict, dirty: _inc.Changes | None, reduce: Callable
    ) -> None:
        super().__init__(backend, table, dirty)
        self._reduce = reduce

    def get(self) -> Any:
        value = self._table.get(self._backend.current_key)
        return value if type(value) in IMMUTABLE else detached(value)

    def add(self, value: Any) -> None:
        if value is None:
            self.clear()
            return
        key = self._backend.current_key
        prev = self._table.get(key)
        result = value if prev is None else self._reduce(prev, value)
        if result is None:
            self.clear()
            return
        if result is value and type(value) not in IMMUTABLE:
            result = detached(value)
        self._table[key] = result
        self._written(key)


class AggregatingState(_KeyedState):
    """``get`` returns a copy of a mutable result (``get_result`` may return the accumulator,
    which the next ``add`` changes in place); an accumulator ``add`` returns as the value it
    was given is copied (as ``ReducingState``). Adding null clears the key's accumulator
    without calling the function, and a null accumulator is none: the next ``add`` creates one
    (Flink's ``HeapAggregatingState``)."""

    __slots__ = ("_agg",)

    def __init__(
        self, backend: KeyedStateBackend, table: dict, dirty: _inc.Changes | None, agg: AggregateFunction
    ) -> None:
        super().__init__(backend, table, dirty)
        self._agg = agg

    def get(self) -> Any:
        acc = self._table.get(self._backend.current_key)
        if acc is None:
            return None
        result = self._agg.get_result(acc)
        return result if type(result) in IMMUTABLE else detached(result)

    def add(self, value: Any) -> None:
        if value is None:
            self.clear()
            return
        key = self._backend.current_key
        acc = self._table.get(key)
        if acc is None:
            acc = self._agg.create_accumulator()
        acc = self._agg.add(value, acc)
        if acc is None:
            self.clear()
            return
        if acc is value and type(value) not in IMMUTABLE:
            acc = detached(value)
        self._table[key] = acc
        self._written(key)
