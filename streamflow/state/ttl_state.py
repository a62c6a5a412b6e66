"""Keyed state with a time-to-live (``descriptor.enable_time_to_live(StateTtlConfig)``).

Port of Flink's TTL state decorators (``flink-runtime/.../state/ttl/``:
``AbstractTtlDecorator``, ``TtlValueState``, ``TtlListState``, ``TtlMapState``,
``TtlReducingState``, ``TtlAggregatingState``, ``TtlUtils``): every value is
stored with the processing time of its last write (or access, with
``OnReadAndWrite``) as ``(value, timestamp)``, and is expired once
``timestamp + ttl <= now``. Reading an expired value removes it; with
``NeverReturnExpired`` the read sees nothing, with
``ReturnExpiredIfNotCleanedUp`` it still sees the value this once (Flink's
``getWrappedWithTtlCheckAndUpdate``). List and map state expire per element
and per entry. Time comes from the job's :class:`~streamflow.clock.Clock`, so
tests drive it with a manual clock. The timestamps are part of the stored
state, so TTL survives checkpoints and restores. Cleanup happens on access:
``cleanup_full_snapshot``/``cleanup_incrementally`` settings are accepted and
expired entries that are never read again stay until their key is written or
read, unless a cleanup strategy drops them (``ttl_cleanup.py``: in full
snapshots, incrementally on each access and record, by default 5 keys per
access).

Incremental checkpoints (``incremental.py``): the table is handed out tracked
unless the state asks for full-snapshot cleanup (which, as in Flink, applies
to full snapshots only, so that state keeps the backend's snapshots full).
Every method that may have changed the current key's entry (a write, an
expiry on read, a timestamp renewed on read) logs that key's entry afterwards
(``_written``): a read that changed nothing logs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..runtime.detach import detached, detached_all
from . import incremental as _inc
from .state_objects import NULL_ELEMENT, MapDictProtocol, checked_list
from .ttl import StateTtlConfig
from .ttl_cleanup import registry

__all__ = ["ttl_state"]

_MISSING = object()


class _Ttl:
    """Shared TTL rules for one state handle."""

    _on_access: Callable[[], None] | None = None  # incremental cleanup, run before each access
    _dirty: _inc.Changes | None = None  # the table's log of writes (incremental checkpoints)

    def __init__(self, backend: Any, table: dict, config: StateTtlConfig, now: Callable[[], int]) -> None:
        self._backend = backend
        self._table = table
        self._changed = False  # a read expired or renewed an entry (see _read)
        self._ttl = config.get_ttl()
        self._now = now
        self._update_on_read = config.get_update_type() == StateTtlConfig.UpdateType.OnReadAndWrite
        self._return_expired = (
            config.get_state_visibility() == StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
        )

    def _expired(self, ts: int, now: int) -> bool:
        return ts + self._ttl <= now

    def _written(self) -> None:
        """Log the current key's entry (or its deletion) when writes are tracked."""
        if self._dirty is not None:
            key = self._backend.current_key
            entry = self._table.get(key, _MISSING)
            if entry is _MISSING:
                self._dirty.delete(key)
            else:
                self._dirty.put(key, entry)

    def _after_read(self) -> None:
        """Log the current key's entry if the read just done changed it."""
        if self._changed:
            self._changed = False
            self._written()

    def clear(self) -> None:
        if self._on_access is not None:
            self._on_access()
        key = self._backend.current_key
        if self._table.pop(key, None) is None and not self._table:  # (no entry holds None)
            hash(key)  # an empty dict's pop does not hash: no key set raises here (no_key.py)
        self._written()

    def _read(
        self,
        entry: tuple[Any, int] | None,
        on_expired: Callable[[], None],
        rewrite: Callable[[tuple[Any, int]], None],
    ) -> Any:
        """``entry``'s value, or _MISSING; Flink's getWrappedWithTtlCheckAndUpdate."""
        if entry is None:
            return _MISSING
        value, ts = entry
        now = self._now()
        if self._expired(ts, now):
            on_expired()
            self._changed = True
            return value if self._return_expired else _MISSING
        if self._update_on_read:
            rewrite((value, now))
            self._changed = True
        return value


class TtlValueState(_Ttl):
    def __init__(
        self, backend: Any, table: dict, config: StateTtlConfig, now: Callable[[], int], default: Any = None
    ) -> None:
        super().__init__(backend, table, config, now)
        self._default = default

    def value(self) -> Any:
        if self._on_access is not None:
            self._on_access()
        key, table = self._backend.current_key, self._table
        value = self._read(table.get(key), lambda: table.pop(key, None), lambda e: table.__setitem__(key, e))
        self._after_read()
        return detached(self._default) if value is _MISSING else value  # a mutable default: a copy

    def update(self, value: Any) -> None:
        if self._on_access is not None:
            self._on_access()
        if value is None:
            self.clear()
        else:
            self._table[self._backend.current_key] = (detached(value), self._now())  # runtime/detach.py
            self._written()


class TtlListState(_Ttl):
    """Elements expire one by one, but a read changes the stored list only as Flink's
    ``TtlListState#get`` does: a list with no unexpired element is cleared; otherwise it is
    left as it is, expired elements included (with ``OnReadAndWrite`` the unexpired ones are
    stored again with the read's time). So ``ReturnExpiredIfNotCleanedUp`` keeps returning an
    expired element while its list holds an unexpired one, until a cleanup strategy drops it
    (``ttl_cleanup.py``) or the whole list expires."""

    def _live(self) -> list:
        key, table = self._backend.current_key, self._table
        entries = table.get(key)
        if not entries:
            return []
        now, out, renewed = self._now(), [], []
        for value, ts in entries:
            if not self._expired(ts, now):
                out.append(value)
                renewed.append((value, now))
            elif self._return_expired:
                out.append(value)
        if not renewed:
            table.pop(key, None)
            self._written()
        elif self._update_on_read:
            table[key] = renewed
            self._written()
        return out

    def get(self) -> list:
        if self._on_access is not None:
            self._on_access()
        return self._live()

    def __iter__(self) -> Iterator[Any]:
        if self._on_access is not None:
            self._on_access()
        return iter(self._live())

    def add(self, value: Any) -> None:
        if value is None:
            raise TypeError(NULL_ELEMENT)
        if self._on_access is not None:
            self._on_access()
        self._table.setdefault(self._backend.current_key, []).append((detached(value), self._now()))
        self._written()

    def add_all(self, values: Iterable[Any]) -> None:
        if self._on_access is not None:
            self._on_access()
        now = self._now()
        entries = [(v, now) for v in detached_all(checked_list(values))]
        if entries:  # adding nothing gives the key no state (Flink's addAll)
            self._table.setdefault(self._backend.current_key, []).extend(entries)
            self._written()

    def update(self, values: Iterable[Any]) -> None:
        if self._on_access is not None:
            self._on_access()
        now = self._now()
        entries = [(v, now) for v in detached_all(checked_list(values))]
        if entries:
            self._table[self._backend.current_key] = entries
            self._written()
        else:
            self.clear()


class TtlMapState(MapDictProtocol, _Ttl):
    def _map(self) -> dict:
        return self._table.get(self._backend.current_key) or {}

    def _get(self, user_key: Any) -> Any:
        m = self._map()

        def drop() -> None:
            m.pop(user_key, None)
            if not m:
                self.clear()

        return self._read(m.get(user_key), drop, lambda e: m.__setitem__(user_key, e))

    def get(self, user_key: Any) -> Any:
        if self._on_access is not None:
            self._on_access()
        value = self._get(user_key)
        self._after_read()
        return None if value is _MISSING else value

    def contains(self, user_key: Any) -> bool:
        if self._on_access is not None:
            self._on_access()
        found = self._get(user_key) is not _MISSING
        self._after_read()
        return found

    def put(self, user_key: Any, value: Any) -> None:
        if self._on_access is not None:
            self._on_access()
        self._table.setdefault(self._backend.current_key, {})[user_key] = (detached(value), self._now())
        self._written()

    def put_all(self, mapping: dict | None) -> None:
        if self._on_access is not None:
            self._on_access()
        if not mapping:  # null or empty adds nothing (Flink's TtlMapState#putAll)
            return
        now = self._now()
        self._table.setdefault(self._backend.current_key, {}).update(
            {k: (detached(v), now) for k, v in mapping.items()}
        )
        self._written()

    def remove(self, user_key: Any) -> None:
        if self._on_access is not None:
            self._on_access()
        m = self._table.get(self._backend.current_key)
        if m is not None:
            m.pop(user_key, None)
            if not m:
                self.clear()
            else:
                self._written()

    def items(self) -> list:
        if self._on_access is not None:
            self._on_access()
        out = []
        for user_key in list(self._map()):
            value = self._get(user_key)
            if value is not _MISSING:
                out.append((user_key, value))
        self._after_read()
        return out

    def keys(self) -> list:
        return [k for k, _ in self.items()]

    def values(self) -> list:
        return [v for _, v in self.items()]

    def is_empty(self) -> bool:
        return not self.items()

    def __iter__(self) -> Iterator[Any]:
        if self._on_access is not None:
            self._on_access()
        return iter(self.keys())


class _TtlAccumulating(_Ttl):
    """Reducing and aggregating state: one accumulator per key, expired as a whole. Null is no
    value, as without a TTL (``state_objects.ReducingState``): adding null clears the key's
    state, and a null result of the function leaves it empty."""

    def _acc(self) -> Any:
        key, table = self._backend.current_key, self._table
        acc = self._read(table.get(key), lambda: table.pop(key, None), lambda e: table.__setitem__(key, e))
        return _MISSING if acc is None else acc

    def _store(self, acc: Any) -> None:
        if acc is None:
            self._table.pop(self._backend.current_key, None)
        else:
            self._table[self._backend.current_key] = (acc, self._now())
        self._written()


class TtlReducingState(_TtlAccumulating):
    def __init__(
        self,
        backend: Any,
        table: dict,
        config: StateTtlConfig,
        now: Callable[[], int],
        reduce: Callable[[Any, Any], Any],
    ) -> None:
        super().__init__(backend, table, config, now)
        self._reduce = reduce

    def get(self) -> Any:
        if self._on_access is not None:
            self._on_access()
        acc = self._acc()
        self._after_read()
        return None if acc is _MISSING else detached(acc)  # the next add may change it in place

    def add(self, value: Any) -> None:
        if value is None:
            self.clear()
            return
        if self._on_access is not None:
            self._on_access()
        acc = self._acc()
        result = value if acc is _MISSING else self._reduce(acc, value)
        self._store(detached(value) if result is value else result)


class TtlAggregatingState(_TtlAccumulating):
    def __init__(
        self, backend: Any, table: dict, config: StateTtlConfig, now: Callable[[], int], agg: Any
    ) -> None:
        super().__init__(backend, table, config, now)
        self._agg = agg

    def get(self) -> Any:
        if self._on_access is not None:
            self._on_access()
        acc = self._acc()
        self._after_read()
        return None if acc is _MISSING else detached(self._agg.get_result(acc))

    def add(self, value: Any) -> None:
        if value is None:
            self.clear()
            return
        if self._on_access is not None:
            self._on_access()
        acc = self._acc()
        acc = self._agg.add(value, self._agg.create_accumulator() if acc is _MISSING else acc)
        self._store(detached(value) if acc is value else acc)


def ttl_state(backend: Any, descriptor: Any, now: Callable[[], int]) -> Any:
    """The TTL state handle for ``descriptor`` (whose ``ttl_config`` is enabled)."""
    config = descriptor.ttl_config
    dirty: _inc.Changes | None = None
    if config.get_cleanup_strategies().in_full_snapshot():  # full snapshots only (module doc)
        table = backend.table(descriptor.name, descriptor.kind)
    else:
        table, dirty = backend.tracked_table(descriptor.name, descriptor.kind)
    kind = descriptor.kind
    state: _Ttl
    if kind == "value":
        state = TtlValueState(backend, table, config, now, getattr(descriptor, "default", None))
    elif kind == "list":
        state = TtlListState(backend, table, config, now)
    elif kind == "map":
        state = TtlMapState(backend, table, config, now)
    elif kind == "reducing":
        state = TtlReducingState(backend, table, config, now, descriptor.reduce)
    elif kind == "aggregating":
        state = TtlAggregatingState(backend, table, config, now, descriptor.agg_function)
    else:
        raise TypeError(f"no TTL for {kind} state {descriptor.name!r}")
    state._on_access = registry(backend).register(descriptor.name, table, kind, config, now)
    state._dirty = dirty
    return state
