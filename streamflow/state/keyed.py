"""Keyed state: descriptors (PyFlink's names), state objects, and the backend.

Theory of operation
-------------------
The :class:`KeyedStateBackend` of an operator holds one plain ``dict`` per
state name, mapping a key to that key's value. Before the operator calls user
code for a record (or a timer) it sets ``backend.current_key``; a state object
such as :class:`ValueState` reads and writes its table at that key. This is
Flink's model (a state handle scoped to the current key) with the cheapest
possible representation: a dict lookup per access.

Built-in operators (``reduce``, ``sum``, windows) use ``backend.table(name)``
directly and skip the current-key indirection on their hot path.

Snapshots group entries by *key group* (``key_group_of(key)``), so a restore
with a different parallelism can hand each subtask the key groups it owns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..functions import AggregateFunction, ReduceFunction
from .key_groups import key_group_of

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
        self.reduce: Callable[[Any, Any], Any] = (
            fn.reduce if isinstance(fn, ReduceFunction) else fn
        )


class AggregatingStateDescriptor(StateDescriptor):
    kind = "aggregating"

    def __init__(self, name: str, agg_function: AggregateFunction, state_type_info: Any = None):
        super().__init__(name, state_type_info)
        self.agg_function = agg_function


class _KeyedState:
    __slots__ = ("_backend", "_table")

    def __init__(self, backend: KeyedStateBackend, table: dict) -> None:
        self._backend = backend
        self._table = table

    def clear(self) -> None:
        self._table.pop(self._backend.current_key, None)


class ValueState(_KeyedState):
    __slots__ = ("_default",)

    def __init__(self, backend: KeyedStateBackend, table: dict, default: Any) -> None:
        super().__init__(backend, table)
        self._default = default

    def value(self) -> Any:
        return self._table.get(self._backend.current_key, self._default)

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._table[self._backend.current_key] = value


class ListState(_KeyedState):
    __slots__ = ()

    def get(self) -> list:
        return list(self._table.get(self._backend.current_key, ()))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())

    def add(self, value: Any) -> None:
        self._table.setdefault(self._backend.current_key, []).append(value)

    def add_all(self, values: Iterable[Any]) -> None:
        self._table.setdefault(self._backend.current_key, []).extend(values)

    def update(self, values: Iterable[Any]) -> None:
        values = list(values)
        if values:
            self._table[self._backend.current_key] = values
        else:
            self.clear()


class MapState(_KeyedState):
    __slots__ = ()

    def _map(self) -> dict:
        return self._table.get(self._backend.current_key) or {}

    def get(self, key: Any) -> Any:
        return self._map().get(key)

    def put(self, key: Any, value: Any) -> None:
        self._table.setdefault(self._backend.current_key, {})[key] = value

    def put_all(self, mapping: dict) -> None:
        self._table.setdefault(self._backend.current_key, {}).update(mapping)

    def remove(self, key: Any) -> None:
        m = self._table.get(self._backend.current_key)
        if m is not None:
            m.pop(key, None)
            if not m:
                self.clear()

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

    # PyFlink's MapState is also used like a dict
    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)


class ReducingState(_KeyedState):
    __slots__ = ("_reduce",)

    def __init__(self, backend: KeyedStateBackend, table: dict, reduce: Callable) -> None:
        super().__init__(backend, table)
        self._reduce = reduce

    def get(self) -> Any:
        return self._table.get(self._backend.current_key)

    def add(self, value: Any) -> None:
        key = self._backend.current_key
        prev = self._table.get(key, _MISSING)
        self._table[key] = value if prev is _MISSING else self._reduce(prev, value)


class AggregatingState(_KeyedState):
    __slots__ = ("_agg",)

    def __init__(self, backend: KeyedStateBackend, table: dict, agg: AggregateFunction) -> None:
        super().__init__(backend, table)
        self._agg = agg

    def get(self) -> Any:
        acc = self._table.get(self._backend.current_key, _MISSING)
        return None if acc is _MISSING else self._agg.get_result(acc)

    def add(self, value: Any) -> None:
        key = self._backend.current_key
        acc = self._table.get(key, _MISSING)
        if acc is _MISSING:
            acc = self._agg.create_accumulator()
        self._table[key] = self._agg.add(value, acc)


class KeyedStateBackend:
    """All keyed state of one operator subtask: ``{state name: {key: value}}``."""

    is_rocksdb = False  # RocksDB's backend (rocksdb_backend.py) checkpoints its own files

    def __init__(self, max_parallelism: int) -> None:
        self.max_parallelism = max_parallelism
        self.current_key: Any = None
        self.restored_key_types: set[str] | None = None
        self._tables: dict[str, dict] = {}
        self._kinds: dict[str, str] = {}

    def table(self, name: str, kind: str = "internal") -> dict:
        known = self._kinds.get(name)
        if known is not None and known != kind:
            raise ValueError(f"state {name!r} is already registered as {known} state, not {kind}")
        self._kinds[name] = kind
        return self._tables.setdefault(name, {})

    def get_state(self, descriptor: StateDescriptor) -> Any:
        table = self.table(descriptor.name, descriptor.kind)
        if isinstance(descriptor, ValueStateDescriptor):
            return ValueState(self, table, descriptor.default)
        if isinstance(descriptor, ListStateDescriptor):
            return ListState(self, table)
        if isinstance(descriptor, MapStateDescriptor):
            return MapState(self, table)
        if isinstance(descriptor, ReducingStateDescriptor):
            return ReducingState(self, table, descriptor.reduce)
        if isinstance(descriptor, AggregatingStateDescriptor):
            return AggregatingState(self, table, descriptor.agg_function)
        raise TypeError(f"unknown state descriptor {type(descriptor).__name__}")

    def keys(self) -> set:
        out: set = set()
        for t in self._tables.values():
            out.update(t.keys())
        return out

    def snapshot(self) -> dict[str, Any]:
        return snapshot_tables(self._tables, self._kinds, self.max_parallelism)

    def restore(self, snapshots: Iterable[dict[str, Any]], owns: Callable[[int], bool]) -> None:
        """Load the key groups this subtask owns from one or more snapshots."""
        for snap in snapshots:
            for name, kind in snap["kinds"].items():
                self.table(name, kind)
            stored = snap.get("key_types")
            if stored is None and snap.get("key_type"):  # written before key_types existed
                stored = [snap["key_type"]]
            if stored:
                self.restored_key_types = (self.restored_key_types or set()) | set(stored)
            for group, states in snap["groups"].items():
                if owns(int(group)):
                    for name, entries in states.items():
                        self._tables[name].update(entries)  # {key: value} (or former [(key, value)])

    def check_key_type(self, key: Any, operator: str) -> None:
        """After a restore: refuse a key whose kind is none of the kinds the checkpoint stored
        (all of them: an operator may hold keys of several types, e.g. None beside str).
        Numbers are one kind (1, 1.0 and True are equal keys, see key_groups.py), and so are
        str and its subclasses (a StrEnum member equals its value)."""
        expected, self.restored_key_types = self.restored_key_types, None
        if expected is not None and _key_kind(type(key)) not in {_stored_kind(e) for e in expected}:
            raise TypeError(
                f"operator {operator} was restored with keys of type {' or '.join(sorted(expected))} but "
                f"the key selector now returns {_type_name(type(key))} ({key!r}): the key type of a stateful "
                "operator cannot change; give the operator a new uid() to start it without state"
            )


def snapshot_tables(tables: dict[str, dict], kinds: dict[str, str], max_parallelism: int) -> dict[str, Any]:
    """``{"kinds", "key_types", "groups": {key_group: {state: {key: value}}}}``; ``key_types``
    names every kind of key stored (sorted; see ``check_key_type``)."""
    groups: dict[int, dict[str, dict]] = {}
    types: set[type] = set()
    for name, t in tables.items():
        types.update(map(type, t))
        for k, v in t.items():
            groups.setdefault(key_group_of(k, max_parallelism), {}).setdefault(name, {})[k] = v
    return {"kinds": dict(kinds), "key_types": sorted(set(map(_key_kind, types))), "groups": groups}


def _key_kind(t: type) -> str:
    """What a key type is compared as after a restore (see ``check_key_type``)."""
    if issubclass(t, int | float):
        return "number"
    if issubclass(t, str):
        return "str"
    return _type_name(t)


def _stored_kind(name: str) -> str:
    """A stored kind; checkpoints written before kinds existed stored type names."""
    return "number" if name in ("int", "float", "bool") else name


def _type_name(t: type) -> str:
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
