"""Incremental checkpoints of an operator's timers on the heap backend.

Theory of operation
-------------------
A :class:`~streamflow.runtime.timers.TimerService` keeps, per time domain, a dict of
its live timers ``(timestamp, key, namespace) -> seq`` (``seq``: the registration
order, which breaks ties between equal timestamps). That dict is a keyed table like
any other of the heap backend, so its checkpoints reuse the backend's incremental
machinery (``state/incremental.py``) unchanged, with a chain of their own:

* **What changed** since the last checkpoint costs nothing per registration: seqs
  ascend, so the timers registered since then are the end of the queue's ``seq ->
  timer`` dict (read newest first, a slice at a time, until a seq at or below the
  checkpoint's *mark*). A deletion or a firing of a timer registered at or before the
  mark appends it to the queue's ``dead`` list (one compare and a list append; the
  others are simply gone). At the barrier both become an ``incremental.Changes`` (the
  deaths as deletions, then the registrations with their seq: a timer deleted and set
  again is deleted, then set), so a timer set and deleted in between costs nothing, and
  ``dead`` never holds more than the timers live at the mark. Changes outnumbering
  twice the timers (plus ``incremental.SLACK``) make the checkpoint a base instead.
* **Capture** at the barrier: ``incremental.capture`` writes the logged changes (a
  delta) or every live timer (a base: the first checkpoint, the first after a restore,
  a chain of ``max_chain`` deltas, deltas larger than twice a base, too many changes)
  into one shared file, in slices of ``incremental.CHUNK`` timers that pause through the
  loop budget; then the mark moves to the newest live timer (a savepoint moves nothing).
  The operator's snapshot holds the file chain (``Capture.descriptor``) under
  ``"timers"`` instead of the timers; ``HeapUpload`` joins the frames after the barrier;
  ``notify_checkpoint_complete`` advances the chain (:meth:`confirm`); the storage keeps
  every file a retained checkpoint references.
* **No timers, no file.** When no timer is live at a checkpoint (most keyed operators
  never register one), the snapshot holds the empty column form (``{}``) as before, no
  file is written, nothing is logged and the chain is reset (the next checkpoint
  with timers writes a base).
* **Plain form.** A timer is written as a tuple: ``(ts, key, None)`` without a
  namespace (a process function's timers: written as they are, no call per timer), else
  ``(ts, key, *encode_namespace(ns))`` when that encoding is a non-empty tuple whose
  first element is neither None nor ``"="`` (a window: ``(ts, key, "w", start, end)``,
  scalars only, so the column packs in one msgspec pass), else ``(ts, key, "=", plain)``.
  :func:`from_plain` inverts it.
* **Key groups.** The tables' keys are timers, so a restore at another parallelism
  computes the key group of ``timer[1]`` (the key), only for files that straddle its
  range (``incremental.apply_file_slices`` takes the function).
* **Restore** (:func:`read_chains`): each snapshot's chain is applied in order into one
  table per domain (``plain timer -> seq``); the timers are then registered in ``seq``
  order (a stable sort; nearly sorted already), so equal timestamps fire in their
  registration order, as without a failure. Snapshots of several subtasks (rescaling)
  hold disjoint keys. Snapshots in the former formats (columns, tuples) still restore.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from operator import itemgetter
from typing import Any, cast

from ..checkpoint._fs import CorruptCheckpointError
from ..state import incremental as _inc
from ..state.key_groups import key_group_of
from .loop_budget import yield_point
from .timers import TimerService

__all__ = ["TimerCheckpoints", "TimerRestore", "from_plain", "is_incremental", "plain_form", "read_chains"]

EVENT, PROCESSING = "event_time", "processing_time"
KINDS = {EVENT: "timers", PROCESSING: "timers"}
_SEQ = itemgetter(1)
_PAIR_SEQ, _PAIR_TIMER = itemgetter(0), itemgetter(1)
_WRAP = "="


def plain_form(encode: Callable[[Any], Any]) -> Callable[[tuple[int, Any, Any]], tuple]:
    """The plain form of a timer ``(ts, key, namespace)`` (see the module doc)."""

    def plain(timer: tuple[int, Any, Any]) -> tuple:
        ts, key, ns = timer
        if ns is None:
            return timer
        p = encode(ns)
        if type(p) is tuple and p and p[0] is not None and not (type(p[0]) is str and p[0] == _WRAP):
            return (ts, key, *p)
        return (ts, key, _WRAP, p)

    return plain


def from_plain(plain: tuple | list, decode: Callable[[Any], Any]) -> tuple[int, Any, Any]:
    """The timer of a plain form (:func:`plain_form`), its namespace decoded by ``decode``."""
    if len(plain) == 3 and plain[2] is None:
        return (plain[0], plain[1], None)
    tail = tuple(plain[2:])
    if len(tail) == 2 and type(tail[0]) is str and tail[0] == _WRAP:
        return (plain[0], plain[1], decode(tail[1]))
    if not tail:
        raise ValueError(f"not a timer: {plain!r}")
    return (plain[0], plain[1], decode(tail))


class _PlainView:
    """A domain's live timers as the capture reads a table: their number, the timers in plain
    form (in registration order) and their seqs. A base reads it a slice at a time."""

    __slots__ = ("live", "plain")

    def __init__(self, live: dict[tuple[int, Any, Any], int], plain: Callable[[Any], tuple]) -> None:
        self.live, self.plain = live, plain

    def __len__(self) -> int:
        return len(self.live)

    def __iter__(self) -> Iterator[tuple]:
        return map(self.plain, self.live)

    def values(self) -> Iterable[int]:
        return self.live.values()


def _timer_kind(_t: type) -> str:
    return "timer"  # the key kinds a restore checks are the keyed state's, not these


class TimerCheckpoints:
    """Incremental checkpoints of one operator subtask's :class:`TimerService`.

    ``settings``: the keyed backend's ``IncrementalSettings`` (owner, key groups, codec,
    max chain); ``encode``: the operator's namespace encoding, or None when its timers
    have no namespace (then timers are written as they are)."""

    def __init__(self, timers: TimerService, settings: Any, encode: Callable[[Any], Any] | None) -> None:
        self.timers = timers
        self.settings = settings
        self.chain = _inc.HeapChain(f"{settings.owner}#timers", settings.max_chain)
        self.plain = None if encode is None else plain_form(encode)
        self._captured: _inc.Capture | None = None
        self._mark = timers.set_mark(False)  # nothing logged: the first checkpoint writes a base

    def _tables(self) -> dict[str, dict]:
        live = self.timers.live()
        if self.plain is None:
            return cast("dict[str, dict]", live)
        return {name: cast(dict, _PlainView(table, self.plain)) for name, table in live.items()}

    async def _changes(self, tables: dict[str, dict]) -> dict[str, _inc.Changes] | None:
        """Per domain, the changes since the last checkpoint as the log a capture reads: the
        timers deleted or fired (as deletions), then those registered since (with their seq),
        each read a slice of ``incremental.CHUNK`` at a time between loop budget pauses. None:
        they outnumber twice the timers (plus ``incremental.SLACK``): a base costs no more."""
        out = {}
        mark, plain, chunk = self._mark, self.plain, _inc.CHUNK
        for name, table in tables.items():
            dead, newest = self.timers.changes(name)
            limit = 2 * len(table) + _inc.SLACK
            if len(dead) > limit:
                return None
            changes = out[name] = _inc.Changes(table)
            for start in range(0, len(dead), chunk):
                gone = dead[start : start + chunk]
                changes.extend(gone if plain is None else list(map(plain, gone)), [_inc.MISSING] * len(gone))
                changes.deletes = True
                await yield_point()
            new: list[tuple[list, list]] = []  # newest first
            count = len(dead)  # ``newest``: (seq, timer), seqs descending: the new ones first
            while True:
                slice_ = list(islice(newest, chunk))
                last = not slice_ or slice_[-1][0] <= mark
                pairs = [p for p in slice_ if p[0] > mark] if last else slice_
                count += len(pairs)
                if count > limit:
                    return None
                if pairs:
                    pairs.reverse()
                    seqs, registered = list(map(_PAIR_SEQ, pairs)), list(map(_PAIR_TIMER, pairs))
                    new.append((registered if plain is None else list(map(plain, registered)), seqs))
                if last:
                    break
                await yield_point()
            for keys, values in reversed(new):
                changes.extend(keys, values)
        return out

    async def capture(self, checkpoint_id: int, savepoint: bool) -> _inc.HeapUpload | None:
        """At the barrier: the changed (or all) timers into a new shared file; None when no
        timer is live (the snapshot then holds the empty column form, see the module doc)."""
        timers = self.timers
        if not timers.num_timers:
            if not savepoint:  # the next checkpoint with timers writes a base
                self.chain.reset()
                self._mark = timers.set_mark(False)
            return None
        tables = self._tables()
        changes = None if self.chain.must_materialise(timers.num_timers) else await self._changes(tables)
        if changes is None:  # a base: the capture reads the tables, not the log
            changes = {name: _inc.Changes(table) for name, table in tables.items()}
            for c in changes.values():
                c.full = True
        cap = await _inc.capture(
            tables, changes, KINDS, self.chain, self.settings, checkpoint_id, savepoint, _timer_kind
        )
        if not savepoint:
            self._mark = timers.set_mark()
        self._captured = cap
        return _inc.HeapUpload(cap, self.chain)

    def snapshot(self) -> dict[str, Any] | None:
        """What the operator's snapshot holds under ``"timers"``: the captured chain, or None
        (nothing captured: the caller writes the timers' columns)."""
        captured, self._captured = self._captured, None
        return None if captured is None else captured.descriptor()

    def confirm(self, checkpoint_id: int) -> None:
        self.chain.confirm(checkpoint_id)

    def restored(self) -> None:
        """After the timers were restored (not logged): the next checkpoint writes a base."""
        self.chain.reset()
        self._mark = self.timers.set_mark(False)


def is_incremental(timers: Any) -> bool:
    """Whether an operator snapshot's ``"timers"`` is a chain of shared files."""
    return isinstance(timers, dict) and "incremental" in timers


class TimerRestore:
    """A restore of timers from incremental chains, in steps (as ``state/deferred_restore.py``
    does for keyed state): every file is read (verified) and its header checked when made,
    at the job's build; :meth:`finish` (the task, before its operators open) applies one
    frame per step, then orders the timers by seq and registers :data:`incremental.CHUNK`
    of them per step, pausing through the loop budget; :meth:`finish_now` does it at once.
    ``decode``: the namespace decoding (None: timers are registered in plain form);
    ``on_done`` runs after the last timer is registered."""

    def __init__(
        self,
        timers: TimerService,
        descriptors: list[dict[str, Any]],
        read_shared: Callable[[str], bytes] | None,
        codec: Any,
        groups: range,
        max_parallelism: int,
        decode: Callable[[Any], Any] | None,
        on_done: Callable[[], None],
    ) -> None:
        if read_shared is None or codec is None:
            raise ValueError("incremental timers can only be restored from checkpoint storage")
        self.timers, self.decode, self.on_done = timers, decode, on_done
        self.tables: dict[str, dict[tuple, int]] = {EVENT: {}, PROCESSING: {}}

        def group(timer: tuple) -> int:
            return key_group_of(timer[1], max_parallelism)

        self.files = []
        for desc in descriptors:
            for name in desc["chain"]:  # read and verified now (a damaged file fails the build)
                steps = _inc.apply_file_slices(read_shared(name), self._table, codec, groups, group, set())
                self._step(name, steps)  # the header
                self.files.append((name, steps))
        self._steps: Iterator[None] | None = self._run()

    def _table(self, name: str, kind: str) -> dict:
        if kind != "timers" or name not in self.tables:
            raise ValueError(f"not a timer table: {name!r} ({kind})")
        return self.tables[name]

    @staticmethod
    def _step(name: str, steps: Iterator[None]) -> bool:
        try:
            next(steps)
        except StopIteration:
            return False
        except (ValueError, TypeError, KeyError, IndexError) as e:
            msg = f"timer file {name!r} of an incremental checkpoint is damaged: {type(e).__name__}: {e}"
            raise CorruptCheckpointError(msg, name) from e
        return True

    def _run(self) -> Iterator[None]:
        for name, steps in self.files:
            while self._step(name, steps):
                yield
        self.files = []
        decode, chunk = self.decode, _inc.CHUNK
        for name, table in self.tables.items():
            seqs = list(table.values())
            yield
            # in seq order: a table's order already, unless a delta set again a timer its base
            # held (it kept the base's place)
            in_order = seqs == sorted(seqs)
            ordered = list(table) if in_order else [t for t, _s in sorted(table.items(), key=_SEQ)]
            self.tables[name] = {}
            yield
            for start in range(0, len(ordered), chunk):
                part = ordered[start : start + chunk]
                self.timers.restore({name: part if decode is None else [from_plain(p, decode) for p in part]})
                yield
        self.on_done()

    def __bool__(self) -> bool:
        return self._steps is not None

    def finish_now(self) -> None:
        steps, self._steps = self._steps, None
        if steps is not None:
            for _ in steps:
                pass

    async def finish(self) -> None:
        steps, self._steps = self._steps, None
        if steps is not None:
            for _ in steps:
                await yield_point()


def read_chains(
    descriptors: list[dict[str, Any]],
    read_shared: Callable[[str], bytes] | None,
    codec: Any,
    groups: range,
    max_parallelism: int,
) -> dict[str, list[tuple]]:
    """The plain timers of these snapshots' chains whose key is in ``groups``, per domain,
    in registration order (see the module doc; a restore uses :class:`TimerRestore`)."""
    out: dict[str, list[tuple]] = {EVENT: [], PROCESSING: []}

    class _Collect:
        def restore(self, data: dict[str, list[tuple]]) -> None:
            for name, timers in data.items():
                out[name] += timers

    restore = TimerRestore(
        cast(TimerService, _Collect()), descriptors, read_shared, codec, groups, max_parallelism,
        None, lambda: None,
    )  # fmt: skip
    restore.finish_now()
    return out




FULL_SLICE = 1_024  # timers per slice of a full snapshot's columns (a few ms with windows)


def timer_columns(
    timers: TimerService, enc: Callable[[Any], Any], out: dict[str, Any], codec: Any = None
) -> Iterator[None]:
    """Fill ``out`` with every live timer as ``{domain: {"ts", "key", "ns"}}`` columns (what a
    full snapshot, not incremental, stores: ``TimerOperator.snapshot_state``), yielding after
    each slice of :data:`FULL_SLICE` timers: the capture at the barrier pauses there through
    the loop budget (a window's namespace costs ~1 us to make plain and ~3 us to encode: a
    million timers held the loop seconds in one piece). Registration order (re-registered in it, they
    fire in the same order); a slice of timers without a namespace is stored as it is (None).
    ``codec`` (the state codec): each slice's columns are encoded with it into a part, ``{domain:
    {"parts": [bytes, ...]}}``, which the checkpoint copies as opaque bytes (encoding 80k
    windows' columns in one piece held the loop 50 ms); :func:`columns_of` reads either form."""
    for domain, table in timers.live().items():
        if not len(table):
            continue
        ts: list[int] = []
        keys: list[Any] = []
        namespaces: list[Any] = []
        parts: list[bytes] = []
        it = iter(table)
        while part := list(islice(it, FULL_SLICE)):
            ns = list(map(itemgetter(2), part))
            ns = ns if ns.count(None) == len(ns) else [None if n is None else enc(n) for n in ns]
            if codec is not None:
                parts.append(codec.encode({"ts": list(map(itemgetter(0), part)),
                                           "key": list(map(itemgetter(1), part)), "ns": ns}))  # fmt: skip
            else:
                ts += map(itemgetter(0), part)
                keys += map(itemgetter(1), part)
                namespaces += ns
            yield
        out[domain] = {"parts": parts} if codec is not None else {"ts": ts, "key": keys, "ns": namespaces}


def columns_of(stored: Any, codec: Any) -> tuple[list[int], list[Any], list[Any]]:
    """The ``(timestamps, keys, plain namespaces)`` columns of one domain of a full snapshot's
    timers: in parts (:func:`timer_columns` with a codec), columns, or a tuple per timer (older
    checkpoints)."""
    if isinstance(stored, dict) and "parts" in stored:
        if codec is None:
            raise ValueError("these timers were written in parts: restoring them needs the state codec")
        ts: list[int] = []
        keys: list[Any] = []
        namespaces: list[Any] = []
        for part in stored["parts"]:
            columns = codec.decode(part)
            ts += columns["ts"]
            keys += columns["key"]
            namespaces += columns["ns"]
        return ts, keys, namespaces
    if isinstance(stored, dict):
        return stored["ts"], stored["key"], stored["ns"]
    return [t[0] for t in stored], [t[1] for t in stored], [t[2] for t in stored]
