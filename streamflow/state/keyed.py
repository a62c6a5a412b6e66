"""Keyed state: the backend of an operator subtask (its tables, snapshots and restore).

The descriptors and the state objects user code holds are in ``state_objects.py``
(re-exported here, their import path since the start).

Theory of operation
-------------------
The :class:`KeyedStateBackend` of an operator holds one plain ``dict`` per
state name, mapping a key to that key's value. Before the operator calls user
code for a record (or a timer) it sets ``backend.current_key``; a state object
such as :class:`ValueState` reads and writes its table at that key. This is
Flink's model (a state handle scoped to the current key) with the cheapest
possible representation: a dict lookup per access.

Built-in operators (``reduce``, ``sum``, windows) use ``backend.tracked_table(name)``
(or ``backend.table(name)``) directly and skip the current-key indirection on
their hot path.

Snapshots are *incremental* when the backend was built with an
:class:`IncrementalSettings` and every table was handed out tracked: writes
mark their key dirty, and a checkpoint writes only the dirty keys (see
``incremental.py``: dirty keys, deltas, chains, restore). Otherwise a snapshot
holds every entry grouped by *key group* (``key_group_of(key)``), so a restore
with a different parallelism can hand each subtask the key groups it owns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NotSupportedError
from . import full_snapshot as _full
from . import incremental as _inc
from .codec import Codec
from .deferred_restore import DeferredRestore
from .key_groups import key_group_of
from .no_key import NO_KEY
from .state_objects import AggregatingState as AggregatingState
from .state_objects import AggregatingStateDescriptor as AggregatingStateDescriptor
from .state_objects import ListState as ListState
from .state_objects import ListStateDescriptor as ListStateDescriptor
from .state_objects import MapState as MapState
from .state_objects import MapStateDescriptor as MapStateDescriptor
from .state_objects import MapViews as MapViews
from .state_objects import ReducingState as ReducingState
from .state_objects import ReducingStateDescriptor as ReducingStateDescriptor
from .state_objects import StateDescriptor as StateDescriptor
from .state_objects import ValueState as ValueState
from .state_objects import ValueStateDescriptor as ValueStateDescriptor
from .typed import Pickled, pickle_entries, restored_entries


@dataclass(frozen=True)
class IncrementalSettings:
    """How a backend takes incremental checkpoints (see ``incremental.py``)."""

    owner: str  # "<uid>#<subtask>": names its shared files
    key_groups: range  # the key groups of its subtask
    codec: Codec
    max_chain: int = 32  # deltas after a base before the next materialisation
    snapshot_process: str = "auto"  # encode in a forked child: off, auto, on (heap_fork.py)
    snapshot_process_min_entries: int | None = None  # fork at this many entries, not the estimate


class KeyedStateBackend:
    """All keyed state of one operator subtask: ``{state name: {key: value}}``."""

    is_rocksdb = False  # RocksDB's backend (rocksdb_backend.py) checkpoints its own files

    def __init__(
        self,
        max_parallelism: int,
        incremental: IncrementalSettings | None = None,
        codec: Codec | None = None,
        key_groups: range | None = None,
    ) -> None:
        self.max_parallelism = max_parallelism
        # the state codec: full snapshots of large state are encoded in slices with it
        # (full_snapshot.py); None: in one piece by whoever encodes the operator snapshot
        self.state_codec = codec if codec is not None else (incremental.codec if incremental else None)
        if key_groups is None and incremental is not None:
            key_groups = incremental.key_groups
        self.owned_key_groups = key_groups  # this subtask's (recorded in full snapshots)
        self.current_key: Any = NO_KEY  # no key before a record or a timer sets one (no_key.py)
        self.restored_key_types: set[str] | None = None
        self._tables: dict[str, dict] = {}
        self._kinds: dict[str, str] = {}
        self._settings = incremental
        self._chain = (
            None if incremental is None else _inc.HeapChain(incremental.owner, incremental.max_chain)
        )
        self._dirty: dict[str, _inc.Changes] = {}
        self._capturing = False  # a capture is reading the dirty dicts (across loop pauses)
        self._restoring: DeferredRestore | None = None  # a chain restore not decoded yet
        # decode a chain restore later, in the task (deferred_restore.py): the streaming runtime
        # sets it; callers that read tables right after restore_from leave it off
        self.defer_restore = False
        self._untracked: set[str] = set()  # tables handed out without dirty tracking
        self._to_plain: dict[str, Callable[[Any], Any]] = {}  # tables written in another form
        self._captured: _inc.Capture | None = None
        self._captured_full: dict[str, Any] | None = None  # a full snapshot taken in slices
        self.ttl: Any = None  # the TtlRegistry of this backend's TTL states (state/ttl_cleanup.py)
        self.pickled: set[str] = set()  # states declared Types.PICKLED_BYTE_ARRAY() (state/typed.py)
        # states whose Pickled entries a RocksDB backend restored from a heap snapshot (typed.py)
        self.restored_pickled: set[str] = set()
        # state name -> repr of its declared type: this run's, and a restored snapshot's (typed.py)
        self.declared_types: dict[str, str] = {}
        self.restored_types: dict[str, str] = {}

    def _register(self, name: str, kind: str) -> dict:
        known = self._kinds.get(name)
        if known is not None and known != kind:
            raise ValueError(f"state {name!r} is already registered as {known} state, not {kind}")
        self._kinds[name] = kind
        return self._tables.setdefault(name, {})

    def table(self, name: str, kind: str = "internal") -> dict:
        """The table, untracked: its writer does not mark keys dirty, so this backend's
        snapshots are full ones from now on."""
        self._restored_now()
        self._untracked.add(name)
        return self._register(name, kind)

    def tracked_table(
        self, name: str, kind: str = "internal", to_plain: Callable[[Any], Any] | None = None
    ) -> tuple[dict, _inc.Changes | None]:
        """The table and the log of its writes (None when snapshots are not incremental):
        before the next snapshot, the caller records every key it writes with its new value
        (``put``, or ``extend`` for a batch), and every key it deletes (``delete``).
        ``to_plain``: every checkpoint, incremental or full, writes each value as
        ``to_plain(value)`` (computed at the capture, slice by slice), and a restore gives it
        back in that form (a window operator's windows as plain tuples)."""
        self._restored_now()
        if to_plain is not None:
            self._to_plain[name] = to_plain
        if self._settings is None:  # not incremental: whatever table() gives (RocksDB's tables)
            return self.table(name, kind), None
        table = self._register(name, kind)
        changes = self._dirty.get(name)
        if changes is None:
            # nothing recorded while the next capture writes a base anyway (changes.py)
            paused = self._chain is not None and self._chain.base_next()
            changes = self._dirty[name] = _inc.Changes(table, paused)
        return table, changes

    def table_names(self, prefix: str = "") -> list[str]:
        """The names of the tables registered, those starting with ``prefix``."""
        self._restored_now()
        return [name for name in self._tables if name.startswith(prefix)]

    def discard_tables(self, names: list[str]) -> list[str]:
        """Forget these tables where each is empty, its log of writes is empty, and no
        checkpoint captured but not yet confirmed may name it (its frames are repeated by the
        next checkpoint, whose header must know the table); returns the names kept."""
        chain = self._chain
        if self._capturing or (chain is not None and chain.pending):
            return names
        kept = []
        for name in names:
            changes = self._dirty.get(name)
            if self._tables.get(name) or (changes is not None and len(changes)):
                kept.append(name)
                continue
            self._tables.pop(name, None)
            self._kinds.pop(name, None)
            self._dirty.pop(name, None)
            self._untracked.discard(name)
        return kept

    def heap_tables(self) -> list[dict]:
        """The state tables (dicts in memory; the task freezes them for the collector when it
        has opened its operators, ``runtime/gc_policy.py``)."""
        return [] if self.is_rocksdb else list(self._tables.values())

    def seal_dirty(self) -> None:
        """Move each log's dict of merged writes aside once it holds ``incremental.CHUNK``
        keys (``Changes.seal``): a dict that grows to a million keys resizes in single C
        calls of 30-40 ms on the loop. Run by the task between slices (a loop budget chore,
        so possibly while this backend's capture is paused: then it leaves the logs alone)."""
        if self._capturing:
            return
        for changes in self._dirty.values():
            changes.seal()

    @property
    def incremental(self) -> bool:
        """Whether the next snapshot can be incremental."""
        return self._settings is not None and not self._untracked

    @property
    def incremental_settings(self) -> IncrementalSettings | None:
        """How this backend checkpoints incrementally (None: it does not); the timers of its
        operator checkpoint the same way (``runtime/timer_checkpoints.py``)."""
        return self._settings

    def get_state(self, descriptor: StateDescriptor) -> Any:
        table, dirty = self.tracked_table(descriptor.name, descriptor.kind)
        if isinstance(descriptor, ValueStateDescriptor):
            return ValueState.of(self, table, dirty, descriptor.default)
        if isinstance(descriptor, ListStateDescriptor):
            return ListState(self, table, dirty)
        if isinstance(descriptor, MapStateDescriptor):
            return MapState(self, table, dirty)
        if isinstance(descriptor, ReducingStateDescriptor):
            return ReducingState(self, table, dirty, descriptor.reduce)
        if isinstance(descriptor, AggregatingStateDescriptor):
            return AggregatingState(self, table, dirty, descriptor.agg_function)
        raise TypeError(f"unknown state descriptor {type(descriptor).__name__}")

    def keys(self) -> set:
        self._restored_now()
        out: set = set()
        for t in self._tables.values():
            out.update(t.keys())
        return out

    async def capture(
        self, checkpoint_id: int, savepoint: bool
    ) -> _inc.HeapUpload | _full.PartsUpload | None:
        """At a barrier, before :meth:`snapshot`: capture what changed, or a large full snapshot
        in parts (a ``SharedUpload`` that writes it as a shared file after the barrier), or None
        (a small full snapshot, taken by :meth:`snapshot`)."""
        self._restored_now()
        settings, chain_state = self._settings, self._chain
        if settings is None or chain_state is None or self._untracked:
            if self.state_codec is None or self.is_rocksdb or not _full.wanted(self._tables):
                return None
            self._capturing = True
            try:
                full = self._captured_full = await self._capture_full()
            finally:
                self._capturing = False
            return _full.to_shared_file(full, checkpoint_id, savepoint)
        self._capturing = True
        try:
            cap = await _inc.capture(
                self._tables, self._dirty, self._kinds, chain_state, settings, checkpoint_id, savepoint,
                _key_kind, self._to_plain,
            )  # fmt: skip
        finally:
            self._capturing = False
        self._captured = cap
        return _inc.HeapUpload(cap, chain_state)

    def checkpoint_complete(self, checkpoint_id: int) -> None:
        if self._chain is not None:
            self._chain.confirm(checkpoint_id)

    def snapshot(self) -> dict[str, Any]:
        """The state for the operator's snapshot: what :meth:`capture` captured (a chain of
        shared files), or every entry by key group (TTL states filtered by full-snapshot cleanup)."""
        self._restored_now()
        captured, self._captured = self._captured, None
        if captured is not None:
            return captured.descriptor()
        full, self._captured_full = self._captured_full, None
        if full is not None:
            return full
        tables = self._tables if self.ttl is None else self.ttl.snapshot_view(self._tables)
        if self._to_plain:  # as the captures write them (see tracked_table)
            tables = {n: _plain_entries(t, self._to_plain.get(n)) for n, t in tables.items()}
        pickled = self._pickled_now(tables)
        if pickled:
            tables = pickle_entries(tables, pickled)
        snap = snapshot_tables(tables, self._kinds, self.max_parallelism)
        if pickled:
            snap["pickled"] = sorted(pickled)
        return snap

    def _pickled_now(self, tables: dict[str, dict]) -> set[str]:
        restored_pickled = {n for n, t in tables.items() if t and type(next(iter(t.values()))) is Pickled}
        return self.pickled | restored_pickled

    async def _capture_full(self) -> dict[str, Any]:
        """A full snapshot in slices that yield (``full_snapshot.py``)."""
        assert self.state_codec is not None
        ttl, pickled, to_plain = self.ttl, self._pickled_now(self._tables), self._to_plain

        def prepare(name: str, entries: dict) -> dict:
            entries = _plain_entries(entries, to_plain.get(name))  # per slice (see tracked_table)
            if ttl is not None:
                entries = ttl.snapshot_view({name: entries})[name]
            return pickle_entries({name: entries}, {name})[name] if name in pickled else entries

        snap = await _full.capture_full(
            self._tables, self._kinds, self.owned_key_groups, self.state_codec, prepare, _key_kind, to_plain
        )
        if pickled:
            snap["pickled"] = sorted(pickled)
        return snap

    def remove_entry(self, name: str, key: Any) -> None:
        """Delete ``key``'s entry of state ``name`` (TTL cleanup): a write of this backend."""
        self._tables[name].pop(key, None)
        dirty = self._dirty.get(name)
        if dirty is not None:
            dirty.delete(key)

    def put_entry(self, name: str, key: Any, value: Any) -> None:
        """Replace ``key``'s entry of state ``name`` (TTL cleanup): a write of this backend."""
        self._tables[name][key] = value
        dirty = self._dirty.get(name)
        if dirty is not None:
            dirty.put(key, value)

    def restore(
        self,
        snapshots: Iterable[dict[str, Any]],
        owns: Callable[[int], bool],
        shared_path: Callable[[str], Path] | None = None,
        read_shared: Callable[[str], bytes] | None = None,
    ) -> None:
        """Load the key groups this subtask owns from full snapshots (see :meth:`restore_from`)."""
        self.restore_from(snapshots, owns, read_shared=read_shared)

    def restore_from(
        self,
        snapshots: Iterable[dict[str, Any]],
        owns: Callable[[int], bool],
        key_groups: range | None = None,
        read_shared: Callable[[str], bytes] | None = None,
        codec: Codec | None = None,
    ) -> None:
        """Load the key groups this subtask owns from one or more snapshots (full ones, or
        chains of shared files read with ``read_shared``)."""
        if self._chain is not None:
            self._chain.reset()
            for changes in self._dirty.values():  # the next capture is a base (changes.py)
                changes.clear()
                changes.paused = True
        for snap in snapshots:
            if snap.get("rocksdb"):
                raise NotSupportedError(
                    "keyed state written by the RocksDB state backend reaches the heap backend only "
                    "through a keyed operator's restore, which converts it (state/rocksdb_to_heap.py)"
                )
            if "incremental" in snap:
                self._restore_chain(snap, key_groups, read_shared, codec)
                continue
            for name, kind in snap["kinds"].items():
                self._register(name, kind)
            stored = snap.get("key_types")
            if stored is None and snap.get("key_type"):  # written before key_types existed
                stored = [snap["key_type"]]
            if stored:
                self.restored_key_types = (self.restored_key_types or set()) | set(stored)
            pickled = set(snap.get("pickled", ()))
            state_codec = codec or self.state_codec
            for name, entries in _full.entries_of(snap, owns, self.max_parallelism, state_codec, read_shared):
                if name in pickled:  # stays bytes until the job declares the state pickled
                    entries = restored_entries(entries, True, name in self.pickled)
                self._tables[name].update(entries)  # {key: value} (or former [(key, value)])

    def _restore_chain(
        self,
        snap: dict[str, Any],
        key_groups: range | None,
        read_shared: Callable[[str], bytes] | None,
        codec: Codec | None,
    ) -> None:
        if read_shared is None or key_groups is None or codec is None:
            raise ValueError("incremental keyed state can only be restored from checkpoint storage")
        maxp = self.max_parallelism
        if self._restoring is None:
            self._restoring = DeferredRestore(self._restore_decoded)
        for name in snap["chain"]:  # read and verified now; decoded by finish_restore
            steps = _inc.apply_file_slices(
                read_shared(name), self._register, codec, key_groups, lambda k: key_group_of(k, maxp),
                self._restoring.key_kinds,
            )  # fmt: skip
            self._restoring.add(name, steps)
        if not self.defer_restore:
            self._restoring.finish_now()

    @property
    def restore_pending(self) -> bool:
        """A chain restore is read but not decoded yet (``deferred_restore.py``)."""
        return bool(self._restoring)

    async def finish_restore(self) -> None:
        """Decode a pending chain restore a frame at a time, pausing through the loop budget."""
        if self._restoring:
            await self._restoring.finish()

    def _restored_now(self) -> None:
        if self._restoring:
            self._restoring.finish_now()

    def _restore_decoded(self, kinds: set[str]) -> None:
        self._restoring = None
        if kinds:
            self.restored_key_types = (self.restored_key_types or set()) | kinds

    def check_key_type(self, key: Any, operator: str) -> None:
        """After a restore: refuse a key whose kind is none of the kinds the checkpoint stored
        (all of them: an operator may hold keys of several types, e.g. None beside str).
        Numbers are one kind (1, 1.0 and True are equal keys, see key_groups.py), and so are
        str and its subclasses (a StrEnum member equals its value)."""
        self._restored_now()
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


def _plain_entries(entries: dict, to_plain: Callable[[Any], Any] | None) -> dict:
    return entries if to_plain is None else {k: to_plain(v) for k, v in entries.items()}


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
