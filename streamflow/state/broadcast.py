"""Broadcast state: a map per ``MapStateDescriptor``, the same on every parallel subtask.

Flink's broadcast state pattern (``BroadcastState``/``ReadOnlyBroadcastState``):
the broadcast side writes (``process_broadcast_element``), the other side only
reads, so every subtask that saw the same broadcast elements holds the same
state. In a checkpoint each subtask stores its copy. On restore (Flink's
``RoundRobinOperatorStateRepartitioner``): at the same parallelism each subtask takes its
own copy (nothing is repartitioned); at another, new subtask ``i`` takes the ``i % n``-th
of the ``n`` copies the old subtasks stored, in subtask order (``repartitionBroadcastState``;
a subtask that stored none is not counted). On a scale-up the old copies are thus spread
round robin, so copies that diverged (a function that wrote per-subtask values) keep their
proportions instead of all new subtasks taking subtask 0's.

A value written is the subtask's own copy (``runtime/detach.py``): a broadcast element reaches
every subtask as the same object, so a stored reference would be shared by all their states
(and by the records they emit), where each of Flink's subtasks deserializes its own. The
broadcast side also reads copies (:class:`BroadcastState`).

Keys and values are stored as the descriptor's declared types make them (PyFlink holds them
serialized with those types): where a type converts (``TypeInformation.converts``: rows,
tuples, floats, ...) the views are :class:`TypedBroadcastState` and
:class:`TypedReadOnlyBroadcastState`, which convert what is written and the keys looked up;
a descriptor whose types convert nothing gets the plain views (no cost per read).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..runtime.detach import detached

__all__ = [
    "BroadcastState",
    "BroadcastStateStore",
    "ReadOnlyBroadcastState",
    "TypedBroadcastState",
    "TypedReadOnlyBroadcastState",
]


class ReadOnlyBroadcastState:
    """The non-broadcast side's view: reads only."""

    __slots__ = ("_map",)

    def __class_getitem__(cls, item: Any) -> type:
        """``ReadOnlyBroadcastState[K, V]``: generic classes, as PyFlink's."""
        return cls

    def __init__(self, mapping: dict) -> None:
        self._map = mapping

    def get(self, key: Any) -> Any:
        return self._map.get(key)

    def contains(self, key: Any) -> bool:
        return key in self._map

    def items(self) -> list:
        return list(self._map.items())

    def keys(self) -> list:
        return list(self._map.keys())

    def values(self) -> list:
        return list(self._map.values())

    def is_empty(self) -> bool:
        return not self._map

    def __getitem__(self, key: Any) -> Any:
        return self._map[key]

    def __contains__(self, key: Any) -> bool:
        return key in self._map

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._map))


class BroadcastState(ReadOnlyBroadcastState):
    """The broadcast side's view: reads and writes. Its reads return copies of mutable values
    (``runtime/detach.py``): the other side may have emitted the stored object (enriching its
    records with a rule), so the broadcast side changing what it read in place before ``put``
    would change those records. Broadcast elements are few, so this costs little; the other
    side's reads, one per record, return the stored objects (it must not change them: Flink's
    read-only contract)."""

    __slots__ = ()

    def get(self, key: Any) -> Any:
        return detached(self._map.get(key))

    def items(self) -> list:
        return [(k, detached(v)) for k, v in self._map.items()]

    def values(self) -> list:
        return [detached(v) for v in self._map.values()]

    def __getitem__(self, key: Any) -> Any:
        return detached(self._map[key])

    def put(self, key: Any, value: Any) -> None:
        self._map[key] = detached(value)  # the state's own copy (runtime/detach.py)

    def put_all(self, mapping: dict) -> None:
        self._map.update({k: detached(v) for k, v in dict(mapping).items()})

    def remove(self, key: Any) -> None:
        self._map.pop(key, None)

    def clear(self) -> None:
        self._map.clear()

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        del self._map[key]


def _same(value: Any) -> Any:
    return value


class TypedReadOnlyBroadcastState(ReadOnlyBroadcastState):
    """A read-only view whose keys are looked up as the descriptor's key type declares them."""

    __slots__ = ("_key",)

    def __init__(self, mapping: dict, key: Any) -> None:
        super().__init__(mapping)
        self._key = key

    def get(self, key: Any) -> Any:
        return self._map.get(self._key(key))

    def contains(self, key: Any) -> bool:
        return self._key(key) in self._map

    def __getitem__(self, key: Any) -> Any:
        return self._map[self._key(key)]

    def __contains__(self, key: Any) -> bool:
        return self._key(key) in self._map


class TypedBroadcastState(BroadcastState):
    """The broadcast side's view storing keys and values as the descriptor's key and value
    types declare them (PyFlink's broadcast state holds them serialized with those types: a
    ``Types.ROW`` value comes back a ``Row``, a ``Types.DOUBLE()`` one a float)."""

    __slots__ = ("_key", "_value")

    def __init__(self, mapping: dict, key: Any, value: Any) -> None:
        super().__init__(mapping)
        self._key, self._value = key, value

    def get(self, key: Any) -> Any:
        return super().get(self._key(key))

    def contains(self, key: Any) -> bool:
        return self._key(key) in self._map

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._key(key))

    def __contains__(self, key: Any) -> bool:
        return self._key(key) in self._map

    def put(self, key: Any, value: Any) -> None:
        super().put(self._key(key), self._value(value))

    def put_all(self, mapping: dict) -> None:
        super().put_all({self._key(k): self._value(v) for k, v in dict(mapping).items()})

    def remove(self, key: Any) -> None:
        super().remove(self._key(key))

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(self._key(key))


def _converters(descriptor: Any) -> tuple[Any, Any] | None:
    """The key and value conversions of a ``MapStateDescriptor``'s declared types, or None
    when neither converts (``TypeInformation.converts``)."""
    from ..types.typeinfo import TypeInformation

    types = getattr(descriptor, "type_info", None)
    if not isinstance(types, tuple):
        return None
    key, value = (t.convert if isinstance(t, TypeInformation) and t.converts() else None for t in types)
    return None if key is None and value is None else (key or _same, value or _same)


class BroadcastStateStore:
    """One operator subtask's broadcast states, by descriptor name."""

    def __init__(self, names: list[str]) -> None:
        self.maps: dict[str, dict] = {name: {} for name in names}

    def _map(self, descriptor: Any) -> dict:
        name = getattr(descriptor, "name", descriptor)
        if name not in self.maps:
            raise KeyError(
                f"no broadcast state {name!r}: pass its MapStateDescriptor to broadcast() "
                f"(this stream broadcasts {sorted(self.maps)})"
            )
        return self.maps[name]

    def writable(self, descriptor: Any) -> BroadcastState:
        convert = _converters(descriptor)
        if convert is None:
            return BroadcastState(self._map(descriptor))
        return TypedBroadcastState(self._map(descriptor), *convert)

    def read_only(self, descriptor: Any) -> ReadOnlyBroadcastState:
        convert = _converters(descriptor)
        if convert is None or convert[0] is _same:  # values were converted when written
            return ReadOnlyBroadcastState(self._map(descriptor))
        return TypedReadOnlyBroadcastState(self._map(descriptor), convert[0])

    def snapshot(self) -> dict[str, list]:
        return {name: list(m.items()) for name, m in self.maps.items()}

    def restore(self, states: list[Any], subtask: int, parallelism: int) -> None:
        """``states``: every old subtask's state, by old subtask index. At the same parallelism
        each subtask takes its own (Flink repartitions nothing then); at another, of the old
        subtasks that reported broadcast state, new subtask ``subtask`` takes the
        ``subtask % count``-th copy (a subtask without state is not counted, so every new
        subtask gets a copy; testRepartitionBroadcastStateWithNullSubtaskState)."""
        if len(states) == parallelism:
            state = states[subtask]
            if state is None or "broadcast" not in state:
                return
        else:
            copies = [s for s in states if s is not None and "broadcast" in s]
            if not copies:
                return
            state = copies[subtask % len(copies)]
        for name, items in state["broadcast"].items():
            self.maps.setdefault(name, {}).update(dict(items))
