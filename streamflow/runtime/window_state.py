"""Per-window and global keyed state of a ``ProcessWindowFunction`` (PyFlink's ``KeyedStateStore``).

``context.window_state()`` is keyed state scoped to the current key *and window*;
``context.global_state()`` is keyed state scoped to the key only, shared by all of its
windows (Flink's ``WindowOperator.WindowContext``). Global state is the operator's keyed
state, the same as ``runtime_context.get_state(...)`` in ``open``. Window state is kept
in one map state per descriptor (``"window-state:" + name``) whose map keys are the
windows: the views below read and write the current window's entry, so it is keyed,
checkpointed and restored (also at another parallelism) as any map state is. A time window
(a named tuple) is its own map key; a global or count window, which the state codec cannot
encode, is keyed by the window operator's plain form of it (``encode_namespace``).

Every value written is the state's own copy, as for keyed state (``runtime/detach.py``): a
new list or map is built for each write from copies of what is added (``MapState.put_owned``),
so each write copies only what it adds, and ``get`` of reducing and aggregating state returns a
copy of a mutable result, which the next ``add`` may change in place.

A state emptied by a write (``update(None)``, ``update([])``, the last map entry removed,
null added to reducing or aggregating state) removes the window's entry, as Flink's states
clear their namespace's entry, so no empty entry is left behind per window.

A time-to-live on a per-window value, reducing or aggregating state makes the descriptor's map
state a TTL map state (``state/ttl_state.py``): each window's entry expires on its own, as
Flink's TTL state in the window's namespace does. Per-window list and map state with a TTL
expire element by element, as Flink's ``TtlListState``/``TtlMapState``: each window's list or
map holds ``(value, timestamp)`` elements, and the keyed TTL list and map states themselves
work on the window's entry through ``_WindowEntry`` (one window's entry seen as their table).
The TTL cleanup strategies (incremental, full snapshot, RocksDB compaction) do not run on
per-window list and map state: expired elements go on access, and with the window's state
when the function clears it in ``clear(context)``.

As in Flink, the function clears window state itself (in ``clear(context)``, called when
the window is purged); per-window state is refused with a merging (session) assigner,
where Flink refuses it too ("Per-window state is not allowed when using merging windows").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

from ..state.keyed import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    MapViews,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from ..state.state_objects import NULL_ELEMENT, checked_list, detached_items
from ..state.ttl_migration import on_register
from ..state.ttl_state import TtlListState, TtlMapState
from ..state.typed import declare
from ..windowing.count import CountWindow
from ..windowing.windows import GlobalWindow
from .context import RuntimeContext
from .detach import IMMUTABLE, detached, detached_all

if TYPE_CHECKING:
    from .window_operator import WindowOperator

__all__ = ["PerWindowStateStore"]

_PREFIX = "window-state:"


class PerWindowStateStore:
    """PyFlink's ``KeyedStateStore`` whose states are scoped to one window of the current key."""

    def __init__(self, op: WindowOperator, window: Any) -> None:
        if getattr(op, "merging", False):
            raise NotImplementedError(
                "Per-window state is not allowed when using merging windows (as in Flink): "
                f"{type(op.assigner).__name__} merges windows; use global_state() instead"
            )
        self._runtime = RuntimeContext(op.ctx)
        self._now = op.ctx.clock.now_ms
        # the map key: a form the state codec round-trips (module doc)
        plain = isinstance(window, (GlobalWindow, CountWindow))
        self._window = op.encode_namespace(window) if plain else window

    def _table(self, descriptor: StateDescriptor, value_type: Any = None) -> Any:
        storage = MapStateDescriptor(_PREFIX + descriptor.name, None, value_type)
        ttl = getattr(descriptor, "ttl_config", None)
        if ttl is not None and ttl.is_enabled():
            # the window's entry expires as a whole: Flink's TTL value/reducing/aggregating
            # state in the window's namespace (state/ttl_state.py's TtlMapState, per window)
            storage.enable_time_to_live(ttl)
        return self._runtime.get_map_state(storage)

    def get_state(self, state_descriptor: ValueStateDescriptor) -> WindowValueState:
        table = self._table(state_descriptor, state_descriptor.type_info)
        return WindowValueState(table, self._window, getattr(state_descriptor, "default", None))

    def _elements(self, descriptor: StateDescriptor) -> tuple[Any, Any, Any]:
        """A per-window list or map state's storage (a map state: window -> list or map; with a
        TTL each element carries its timestamp), registered with that layout so a restore with
        the TTL switched migrates each window's elements; with its backend and TTL config."""
        storage = MapStateDescriptor(_PREFIX + descriptor.name)
        backend = self._runtime._backend(storage)
        declare(backend, storage)
        ttl = getattr(descriptor, "ttl_config", None)
        ttl = ttl if ttl is not None and ttl.is_enabled() else None
        on_register(backend, storage, ttl is not None, self._now, per_window=descriptor.kind)
        return backend.get_state(storage), backend, ttl

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> Any:
        table, backend, ttl = self._elements(state_descriptor)
        if ttl is None:
            return WindowListState(table, self._window)
        return _in_window(TtlListState(backend, _entry(table, self._window), ttl, self._now))

    def get_map_state(self, state_descriptor: MapStateDescriptor) -> Any:
        table, backend, ttl = self._elements(state_descriptor)
        if ttl is None:
            return WindowMapState(table, self._window)
        return _in_window(TtlMapState(backend, _entry(table, self._window), ttl, self._now))

    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> WindowReducingState:
        return WindowReducingState(self._table(state_descriptor), self._window, state_descriptor.reduce)

    def get_aggregating_state(self, state_descriptor: AggregatingStateDescriptor) -> WindowAggregatingState:
        return WindowAggregatingState(
            self._table(state_descriptor), self._window, state_descriptor.agg_function
        )


class _WindowEntry:
    """One window's entry of a per-window state's map state, as the table a TTL list or map
    state (``state/ttl_state.py``) works on: it looks up the current key, which this table
    ignores (its map state is the current key's), and reads and writes the window's entry.
    It is also the TTL state's log of writes: an entry the state changed in place is written
    back (``put_owned``), so incremental checkpoints and RocksDB's cache see the change."""

    __slots__ = ("_storage", "_window")

    def __init__(self, storage: Any, window: Any) -> None:
        self._storage, self._window = storage, window

    def get(self, _key: Any, default: Any = None) -> Any:
        value = self._storage.get(self._window)
        return default if value is None else value

    def setdefault(self, _key: Any, default: Any) -> Any:
        value = self._storage.get(self._window)
        if value is None:
            self._storage.put_owned(self._window, default)
            return default
        return value

    def __setitem__(self, _key: Any, value: Any) -> None:
        self._storage.put_owned(self._window, value)

    def pop(self, _key: Any, default: Any = None) -> Any:
        value = self._storage.get(self._window)
        if value is None:
            return default
        self._storage.remove(self._window)
        return value

    def __len__(self) -> int:
        return 0 if self._storage.get(self._window) is None else 1

    put = __setitem__  # the log of writes: the changed entry written back

    def delete(self, _key: Any) -> None:
        """The log of writes: the entry is gone (``pop`` removed it from the map state)."""


def _entry(storage: Any, window: Any) -> dict:
    """The window's entry as the TTL state's table (the dict methods it uses)."""
    return cast(dict, _WindowEntry(storage, window))


def _in_window(state: Any) -> Any:
    """A TTL list or map state over one window's entry: its writes are logged by writing the
    entry back (``_WindowEntry.put``); no cleanup strategy runs on it (expiry on access, and
    the function's ``clear(context)``)."""
    state._dirty = state._table
    return state


def global_state_store(op: WindowOperator) -> RuntimeContext:
    """``global_state()``: the operator's keyed state (its ``get_*_state`` methods)."""
    return RuntimeContext(op.ctx)


class _WindowState:
    def __init__(self, table: Any, window: Any) -> None:
        self._table, self._window = table, window

    def _get(self, default: Any = None) -> Any:
        value = self._table.get(self._window)
        return default if value is None else value

    def clear(self) -> None:
        self._table.remove(self._window)


class WindowValueState(_WindowState):
    """The descriptor's default while the window has no value, a copy of a mutable one (as
    keyed ``ValueState``: Flink's per-window state is the backend's value state)."""

    def __init__(self, table: Any, window: Any, default: Any = None) -> None:
        super().__init__(table, window)
        self._default = default

    def value(self) -> Any:
        value = self._get()
        if value is None:
            default = self._default
            return default if type(default) in IMMUTABLE else detached(default)
        return value

    def update(self, value: Any) -> None:
        if value is None:  # as clear (Flink's ValueState#update(null))
            self.clear()
        else:
            self._table.put(self._window, value)  # MapState.put: the state's own copy


class WindowListState(_WindowState):
    def get(self) -> list:
        return list(self._get(()))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())

    def add(self, value: Any) -> None:
        if value is None:
            raise TypeError(NULL_ELEMENT)
        self._table.put_owned(self._window, [*self._get(()), detached(value)])

    def add_all(self, values: Iterable[Any]) -> None:
        added = detached_all(checked_list(values))
        if added:  # adding nothing gives the window no entry (Flink's addAll)
            self._table.put_owned(self._window, [*self._get(()), *added])

    def update(self, values: Iterable[Any]) -> None:
        values = detached_all(checked_list(values))
        if values:
            self._table.put_owned(self._window, values)
        else:  # an empty list is no state (Flink's update(emptyList))
            self.clear()


class WindowMapState(MapViews, _WindowState):
    def _map(self) -> dict:
        return dict(self._get({}))

    def put(self, key: Any, value: Any) -> None:
        self._table.put_owned(self._window, {**self._map(), key: detached(value)})

    def put_all(self, mapping: dict | None) -> None:
        if mapping:  # null or empty adds nothing (Flink's RocksDBMapState/TtlMapState#putAll)
            self._table.put_owned(self._window, {**self._map(), **detached_items(mapping)})

    def remove(self, key: Any) -> None:
        entries = self._map()
        if key not in entries:
            return
        del entries[key]
        if entries:
            self._table.put_owned(self._window, entries)
        else:  # the last entry gone: the window has no map (Flink's HeapMapState#remove)
            self.clear()


def _put_owned(table: Any, window: Any, value: Any) -> None:
    """``put_owned`` where the table has it; a TTL map state copies the value in ``put``."""
    put = getattr(table, "put_owned", None)
    (table.put if put is None else put)(window, value)


class WindowReducingState(_WindowState):
    def __init__(self, table: Any, window: Any, reduce: Any) -> None:
        super().__init__(table, window)
        self._reduce = reduce

    def get(self) -> Any:
        value = self._get()
        return value if type(value) in IMMUTABLE else detached(value)

    def add(self, value: Any) -> None:
        """Null is no value (Flink's HeapReducingState): adding it, or a null result, clears."""
        current = None if value is None else self._table.get(self._window)
        result = value if current is None else self._reduce(current, value)
        if result is None:
            self.clear()
        else:
            _put_owned(self._table, self._window, detached(value) if result is value else result)


class WindowAggregatingState(_WindowState):
    def __init__(self, table: Any, window: Any, agg_function: Any) -> None:
        super().__init__(table, window)
        self._agg = agg_function

    def get(self) -> Any:
        acc = self._table.get(self._window)
        return None if acc is None else detached(self._agg.get_result(acc))

    def add(self, value: Any) -> None:
        """Adding null clears, as does a null accumulator (Flink's HeapAggregatingState)."""
        if value is None:
            self.clear()
            return
        acc = self._table.get(self._window)
        if acc is None:
            acc = self._agg.create_accumulator()
        acc = self._agg.add(value, acc)
        if acc is None:
            self.clear()
        else:
            _put_owned(self._table, self._window, detached(value) if acc is value else acc)
