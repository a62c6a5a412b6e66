"""Where the window operator's state lives, and the form it takes in checkpoints.

Theory of operation
-------------------
A window operator's state per key is three tables of the keyed backend:
``window-contents`` maps a key to ``{state window: accumulator}``, ``window-trigger``
to the key's trigger state ``{(window, state name): value}`` and ``window-merging`` to
its :class:`MergingWindowSet` (merging assigners only). The fast path
(``window_fast_path.py``) keeps its state as panes ``{window: {key: acc}}`` instead,
each pane a table of its own (``window_panes.py``), with the ``_fired`` / ``_refire``
bookkeeping beside them.

* Heap backend: the three tables are *tracked* (``KeyedStateBackend.tracked_table``):
  every write to them happens inside an element or a timer of the general path, for the
  current key, and :meth:`WindowTables._touched` logs that key's entries afterwards, so
  incremental checkpoints write only what changed.
* RocksDB backend: the tables are RocksDB's, storing windows in their plain form; there
  is no fast path (its panes would live in the operator, outside RocksDB).

In a checkpoint a window travels as a plain tuple (:meth:`WindowTables.encode_namespace`,
used for the timers' namespaces too): ``("w", start, end)`` for a ``TimeWindow``,
``("c", id)`` for a ``CountWindow``, ``("g",)`` for the ``GlobalWindow``; a custom
assigner's window as the bytes of its ``get_window_serializer()`` (``("s", bytes)``),
else as itself (``("o", window)``) for the state codec. A restore converts between the
two paths: a general path's checkpoint restored where the fast path applies becomes
panes, a fast path's checkpoint restored where it does not becomes ``window-contents``.
The timers convert with them, once every timer is back (``finish_restore``): a general
path's firing timers become the panes' ``_fired`` / ``_refire`` and are deleted
(``_timers_into_panes``); the panes' implied timers (firing unless fired, or for the keys in
``refire``; cleanup) become real ones (``_pane_timers``). So every firing of Flink's
WindowOperator (on time, each late one, the cleanup) happens once across a heap <-> RocksDB
switch or a change of path (tests/test_window_lateness_backend_switch.py).
"""

from __future__ import annotations

import io
from typing import Any, cast

from ..windowing.count import CountWindow
from ..windowing.merging import MergingWindowSet
from ..windowing.windows import GlobalWindow, TimeWindow
from .timer_operator import TimerOperator
from .window_panes import PREFIX, PaneTables, pane_name, pane_window

_MISSING = object()


class WindowTables(TimerOperator):
    """A timer operator whose keyed state is a window operator's tables: the base of
    :class:`~streamflow.runtime.window_operator.WindowOperator`, which sets these fields."""

    assigner: Any
    fast: bool  # whether the fast path runs (window_fast_path.py)
    panes: dict[TimeWindow, dict[Any, Any]]  # fast path only
    _fired: set[TimeWindow]
    _refire: dict[TimeWindow, set[Any]]  # fast path: keys whose timer is pending again

    # -- lifecycle -----------------------------------------------------------
    def setup(self, ctx: Any, output: Any) -> None:
        super().setup(ctx, output)
        backend = self.backend
        if backend.is_rocksdb:
            self._rocksdb_tables(backend)
            return
        self._pane_tables = PaneTables(backend, self.panes)
        # general path: tracked tables, written by checkpoints (incremental or full) in plain form
        # (windows as tuples, converted at the capture); the fast path keeps its state in pane
        # tables (window_panes.py), and these hold only a restored general path's state
        enc = self.encode_namespace
        self.contents, self._contents_log = backend.tracked_table(
            "window-contents", "window", lambda wins: {enc(w): acc for w, acc in wins.items()}
        )
        self.trigger_state, self._trigger_log = backend.tracked_table(
            "window-trigger", "window", lambda store: {(enc(w), name): v for (w, name), v in store.items()}
        )
        self.merging_sets, self._merging_log = backend.tracked_table(
            "window-merging", "window", lambda mws: [(enc(a), enc(b)) for a, b in mws.persist()]
        )

    def _touched(self, key: Any) -> None:
        """Log ``key``'s window state after an element or a timer of the general path (every
        write to the three tables happens inside one of them, for the current key)."""
        for table, log in (
            (self.contents, self._contents_log),
            (self.trigger_state, self._trigger_log),
            (self.merging_sets, self._merging_log),
        ):
            if log is not None:
                value = table.get(key, _MISSING)
                if value is _MISSING:
                    log.delete(key)
                else:
                    log.put(key, value)

    def _rocksdb_tables(self, backend: Any) -> None:
        """Window state in RocksDB: no fast path (its panes live in the operator), and the
        tables store windows in their plain form (``encode_namespace``), as checkpoints do."""
        self.fast = False
        self._contents_log = self._trigger_log = self._merging_log = None  # RocksDB keeps them
        enc, dec, assigner = self.encode_namespace, self.decode_namespace, self.assigner
        self.contents = backend.table(
            "window-contents", "window",
            to_plain=lambda wins: {enc(w): acc for w, acc in wins.items()},
            from_plain=lambda plain: {dec(w): acc for w, acc in plain.items()},
        )  # fmt: skip
        self.trigger_state = backend.table(
            "window-trigger", "window",
            to_plain=lambda store: {(enc(w), name): v for (w, name), v in store.items()},
            from_plain=lambda plain: {(dec(w), name): v for (w, name), v in plain.items()},
        )  # fmt: skip
        self.merging_sets = backend.table(
            "window-merging", "window",
            to_plain=lambda mws: [(enc(a), enc(b)) for a, b in mws.persist()],
            from_plain=lambda pairs: MergingWindowSet(assigner, [(dec(a), dec(b)) for a, b in pairs]),
        )  # fmt: skip

    # -- checkpoints: windows travel as plain tuples --------------------------
    def encode_namespace(self, window: Any) -> Any:
        if isinstance(window, TimeWindow):
            return ("w", window.start, window.end)
        if isinstance(window, CountWindow):
            return ("c", window.id)
        if isinstance(window, GlobalWindow):
            return ("g",)
        # a custom assigner's window: the bytes of its serializer (PyFlink's
        # get_window_serializer()), else the window itself, for the state codec
        serializer = self._window_serializer()
        if serializer is None:
            return ("o", window)
        buf = io.BytesIO()
        serializer.serialize(window, buf)
        return ("s", buf.getvalue())

    def decode_namespace(self, plain: Any) -> Any:
        kind = plain[0]
        if kind == "w":
            return TimeWindow(plain[1], plain[2])
        if kind == "c":
            return CountWindow(plain[1])
        if kind == "s":
            serializer = self._window_serializer()
            if serializer is None:
                raise ValueError(
                    f"operator {self.name!r}: the checkpoint holds windows written by a window "
                    f"serializer, but assigner {type(self.assigner).__name__} has none now"
                )
            return serializer.deserialize(io.BytesIO(plain[1]))
        return plain[1] if kind == "o" else GlobalWindow.get()

    def _window_serializer(self) -> Any:
        """The assigner's ``get_window_serializer()`` (custom windows only), or None."""
        get = getattr(self.assigner, "get_window_serializer", None)
        try:
            return get() if callable(get) else None
        except NotImplementedError:
            return None

    def snapshot_state(self, checkpoint_id: int) -> Any:
        if self.backend.is_rocksdb:  # the tables are the state (see _rocksdb_tables)
            return {**super().snapshot_state(checkpoint_id), "fired": [], "refire": []}
        enc = self.encode_namespace
        # the backend's snapshot holds the tables in plain form (their to_plain, see setup),
        # incremental or full (taken in slices at the barrier: state/full_snapshot.py)
        state = super().snapshot_state(checkpoint_id)
        state["fired"] = [enc(w) for w in self._fired]
        state["refire"] = [(enc(w), list(keys)) for w, keys in self._refire.items()]
        return state

    def notify_checkpoint_complete(self, checkpoint_id: int) -> Any:
        result = super().notify_checkpoint_complete(checkpoint_id)
        if not self.backend.is_rocksdb:
            self._pane_tables.prune()  # emptied panes no pending checkpoint names any more
        return result

    def initialize_state(self, restored: Any) -> None:
        super().initialize_state(restored)
        self._heap_panes: Any = None
        self._converted: set[Any] | None = None  # windows of a general path's checkpoint (fast path)
        self._pane_entries: Any = None  # a fast path's panes, now contents (general path)
        if restored is None or self._heap_migration is not None:
            return  # (RocksDB state onto the heap: converted once start_restore read it)
        if self.backend.is_rocksdb:
            self._heap_panes = restored  # into window contents once the DB is open (finish_restore)
            return
        self._convert_restored(restored)

    async def start_restore(self) -> None:
        pending = self._heap_migration
        await super().start_restore()
        if pending is not None:
            self._convert_restored(pending[1])

    async def finish_restore(self) -> None:
        """After the keyed backend started and RocksDB's timers are back: a heap checkpoint's
        panes restored into RocksDB become window contents (``_panes_into_contents``)."""
        await super().finish_restore()
        restored, self._heap_panes = getattr(self, "_heap_panes", None), None
        if restored is not None:
            self._panes_into_contents(restored)
        converted, self._converted = getattr(self, "_converted", None), None
        if converted:
            self._timers_into_panes(converted)
        pending, self._pane_entries = getattr(self, "_pane_entries", None), None
        if pending is not None:
            self._pane_timers(*pending)

    def _convert_restored(self, restored: Any) -> None:
        """The restored heap tables' windows, decoded, into the path this operator runs."""
        self.backend.table_names()  # a deferred chain restore is decoded now: converted below
        dec = self.decode_namespace
        contents = {key: {dec(w): acc for w, acc in wins.items()} for key, wins in self.contents.items()}
        self.contents.clear()
        panes = self._pane_tables
        panes.restored()
        if self.fast:
            # a checkpoint of the general path: its timers become the panes' bookkeeping once
            # they are all back (finish_restore: _timers_into_panes)
            self._converted = {w for wins in contents.values() for w in wins}
            for key, wins in contents.items():
                for w, acc in wins.items():
                    (self.panes.get(w) or panes.new(w))[key] = acc
        else:
            self.contents.update(contents)
            entries = []
            for w, pane in self.panes.items():  # a checkpoint of the fast path
                for key, acc in pane.items():
                    self.contents.setdefault(key, {})[w] = acc
                    entries.append((key, w))
                panes.retired.append(pane_name(w))
                pane.clear()
            self.panes.clear()
            panes.prune()
            # its implied timers become real ones once every timer is back (finish_restore)
            self._pane_entries = (entries, restored) if entries else None
        for key, store in list(self.trigger_state.items()):
            self.trigger_state[key] = {(dec(w), name): v for (w, name), v in store.items()}
        for key, pairs in list(self.merging_sets.items()):
            self.merging_sets[key] = MergingWindowSet(self.assigner, [(dec(a), dec(b)) for a, b in pairs])
        for s in restored.all:
            if s is not None:
                self._fired.update(w for w in map(dec, s.get("fired", ())) if w in self.panes)
                for plain, keys in s.get("refire", ()):
                    w = dec(plain)
                    owned = [k for k in keys if k in self.panes.get(w, ())]
                    if owned:
                        self._refire.setdefault(w, set()).update(owned)

    def _panes_into_contents(self, restored: Any) -> None:
        """RocksDB takes the general path: a heap fast path's checkpoint (restored through a
        savepoint into RocksDB) brings back pane tables, whose accumulators become window
        contents and whose implied timers become real ones: the firing at
        ``max_timestamp()`` (the EventTimeTrigger's, unless the pane had fired already; for a
        fired pane, the keys in ``refire``: a late element after an earlier restore registered
        that timer again) and the cleanup. Without this the open windows' contents were never
        read again."""
        entries = []
        for name in self.backend.table_names(PREFIX):
            pane, window = self.backend.table(name, "window"), pane_window(name)
            for key, acc in list(pane.items()):
                wins = self.contents.get(key) or {}
                wins[window] = acc
                self.contents[key] = wins
                entries.append((key, window))
                del pane[key]
        self._pane_timers(entries, restored)

    def _pane_timers(self, entries: list[tuple[Any, Any]], restored: Any) -> None:
        """The general path's timers for panes of a fast path's checkpoint, now window contents
        (``entries``: their keys and windows): the EventTimeTrigger's firing at
        ``max_timestamp()`` unless the pane fired (``fired``), or, for a fired pane, if the key
        is in its ``refire``; and the cleanup."""
        dec = self.decode_namespace
        states = [s for s in restored.all if s is not None]
        fired = {dec(w) for s in states for w in s.get("fired", ())}
        refire: dict[Any, set[Any]] = {}
        for s in states:
            for plain, keys in s.get("refire", ()):
                refire.setdefault(dec(plain), set()).update(keys)
        register_cleanup = cast(Any, self)._register_cleanup  # WindowOperator's
        for key, window in entries:
            if window not in fired or key in refire.get(window, ()):
                self.timers.register_event_time_timer(key, window, window.max_timestamp())
            register_cleanup(key, window)

    def _timers_into_panes(self, windows: set[Any]) -> None:
        """A general path's checkpoint (RocksDB's, through a savepoint) restored on the fast
        path: its windows' timers become the panes' bookkeeping. A window whose firing timer
        (the EventTimeTrigger's, at ``max_timestamp()``) is gone for some key has fired: it
        goes into ``_fired``, so the next watermark does not fire it again, and the keys whose
        firing timer is pending (a late element after a restore registered it again) into
        ``_refire``. Then its timers are deleted: the fast path's are implied, and a stale
        firing timer would fire the window again after a later switch back to the general
        path."""
        timers = self.timers
        for window in windows:
            pane = self.panes.get(window)
            if not pane:
                continue
            at, cleanup = window.max_timestamp(), cast(Any, self).cleanup_time(window)
            pending = [key for key in pane if timers.has_event_time_timer(key, window, at)]
            if len(pending) < len(pane):
                self._fired.add(window)
                if pending:
                    self._refire.setdefault(window, set()).update(pending)
            for key in pane:
                timers.delete_event_time_timer(key, window, at)
                timers.delete_event_time_timer(key, window, cleanup)
