"""State TTL switched on or off between a snapshot and its restore: the entries are migrated.

A state with a TTL stores each value with its last write time (``(value, ts)``; a list per
element, a map per entry: ``ttl_state.py``); the same state without a TTL stores the bare
values. Flink (TtlAwareSerializer#migrateValueFromPriorSerializer) lets a job restore a state
with its TTL switched off or on: switched off, each entry keeps its user value; switched on,
each value is stamped with the restore's current time (so it expires a TTL after the restore).

Theory of operation:

* User code registers keyed state through ``RuntimeContext`` (runtime/context.py), which
  calls :func:`on_register` with whether the descriptor has a TTL. The backend's
  :class:`~.ttl_cleanup.TtlRegistry` keeps ``user_states``: name -> TTL enabled.
* A keyed operator's snapshot stores :func:`user_states` (runtime/timer_operator.py) beside
  its keyed state, for every backend alike; a restore hands them to :func:`note_restored`,
  which keeps them as ``restored`` (the union of the restored subtasks').
* On registration, a state whose restored TTL flag differs from the descriptor's is migrated
  once, in place, through the backend's write path (tracked writes, so incremental checkpoints
  log the rewritten entries; RocksDB's cache marks them dirty). A checkpoint written before
  ``user_states`` existed records no flag: its states are not migrated (there is nothing to
  tell a stored ``(value, ts)`` from a user's tuple).
* States restored but not registered again keep their restored flag in the next snapshots.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from .ttl_cleanup import registry

log = logging.getLogger(__name__)


def user_states(backend: Any) -> dict[str, bool] | None:
    """The user states' TTL flags to store in a snapshot (None: no user state is known)."""
    reg = getattr(backend, "ttl", None)
    if reg is None or not (reg.user_states or reg.restored):
        return None
    return {**(reg.restored or {}), **reg.user_states}


def note_restored(backend: Any, snapshots: Iterable[dict[str, Any]]) -> None:
    """Remember the TTL flags the restored snapshots recorded (see the module doc)."""
    restored: dict[str, bool] = {}
    for snap in snapshots:
        flags = snap.get("user_states")
        if flags:
            restored.update(flags)
    if restored:
        registry(backend).restored = restored


def on_register(
    backend: Any, descriptor: Any, ttl_enabled: bool, now: Callable[[], int], per_window: str | None = None
) -> None:
    """User code registers ``descriptor``: migrate its restored entries if its TTL changed.
    ``per_window``: the descriptor is a window function's per-window ``list`` or ``map`` state,
    kept as a map state of window -> list or map whose elements carry their own timestamps
    (``runtime/window_state.py``): each window's value is migrated as that kind."""
    reg = registry(backend)
    name = descriptor.name
    reg.user_states[name] = ttl_enabled
    prior = None if reg.restored is None else reg.restored.pop(name, None)
    if prior is None or prior == ttl_enabled:
        return
    kind = descriptor.kind
    table, dirty = backend.tracked_table(name, kind)
    at = now()
    convert = _wrap(per_window or kind, at) if ttl_enabled else _unwrap(per_window or kind)
    if per_window is not None:
        inner = convert
        convert = lambda entry: {window: inner(value) for window, value in entry.items()}  # noqa: E731
    entries = list(table.items())  # migrated after the scan (a RocksDB table is scanned)
    for key, entry in entries:
        migrated = convert(entry)
        table[key] = migrated
        if dirty is not None:
            dirty.put(key, migrated)
    log.info(
        "state %r: restored %s a TTL, registered %s: %d entries migrated%s",
        name,
        "without" if ttl_enabled else "with",
        "with one" if ttl_enabled else "without",
        len(entries),
        f" (written at {at})" if ttl_enabled else "",
    )


def _wrap(kind: str, at: int) -> Callable[[Any], Any]:
    if kind == "list":
        return lambda entry: [(v, at) for v in entry]
    if kind == "map":
        return lambda entry: {k: (v, at) for k, v in entry.items()}
    return lambda entry: (entry, at)


def _unwrap(kind: str) -> Callable[[Any], Any]:
    if kind == "list":
        return lambda entry: [v for v, _ts in entry]
    if kind == "map":
        return lambda entry: {k: v for k, (v, _ts) in entry.items()}
    return lambda entry: entry[0]
