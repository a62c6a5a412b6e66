"""Keeps Python's cyclic garbage collector from pausing the event loop for long (issue 12 item 4).

Theory of operation
-------------------
A full (generation 2) collection visits every container object the collector tracks. Keyed
state of a million keys whose values are lists, dicts or objects is a million such objects:
one full collection then takes 80-140 ms of CPU (3 M: 240-360 ms), on the caller's loop, and
CPython 3.11 starts one each time the objects that survived into generation 2 since the last
one reach a quarter of those that survived it, so a job that keeps replacing state values runs
into one every few hundred thousand records. (Values of plain tuples of numbers and strings
cost little: the collector stops tracking such tuples, and dicts of them, after their first
collection.) ``gc.freeze()`` moves every tracked object to a permanent generation that
collections skip, in constant time.

:class:`GcPolicy` is process-wide and counts the jobs running (``job_started`` /
``job_ended``, one pair per ``JobClient``):

* while any job runs, a ``gc.callbacks`` hook times every collection; generation 2 ones are
  counted, the longest kept (the metrics ``process.gcFullCollections`` and
  ``process.gcFullPauseMaxMs``);
* a task that opens keyed state (its tables, still empty, or just restored) freezes right away
  (``task_state_ready``): a full collection would otherwise traverse each table, however large
  it grows, since a frozen dict stays frozen while it grows;
* a full collection that took longer than ``freeze_after_ms`` (5 ms) makes the policy call
  ``gc.freeze()`` on the loop right after it: everything alive then (the state, mostly) is
  skipped by later collections, which only see what was allocated since. Right after a full
  collection every cycle of garbage is gone, so what is frozen was alive. The same happens
  after a job restored a checkpoint (its state is all new objects at once);
* when the last job ends, ``gc.unfreeze()`` if the policy froze and the process had no frozen
  objects before the first job (the application's own ``gc.freeze()`` is left alone, and
  logged): the collector is as it was, and the next full collection sees everything again;
* while any job runs, the collector's third threshold is at least ``FULL_EVERY`` (100; Python's
  default is 10): a full collection comes after 100 generation-1 collections instead of 10 (and,
  as always, only once the objects that survived into generation 2 since the last one are a
  quarter of those it left). Window panes are what made this worth it: records held until a
  watermark fires their window sit in one list per key and window, and those lists reach
  generation 2 within a window's life, so each full collection walked every list and, through
  it, every held record (a quarter of a million in a tumbling-window job between two 200 ms
  periodic watermarks), 3-6 ms a time, a dozen times a million records, for nothing: the
  lists are freed by reference counting when their window fires. Young collections are
  untouched, so cycles among young objects are found as soon as before; cyclic garbage that
  reached generation 2 waits longer. The first threshold at 0 (collector switched off by
  threshold) is left alone; the previous thresholds come back when the last job ends, unless
  the application set others meanwhile (then its own stay, logged).

Every freeze and unfreeze is logged (INFO), with the pause that caused it; the threshold change
at DEBUG (it comes with every first job). The cost of a freeze: a cycle of
objects frozen while alive that becomes garbage during the job is reclaimed only after the job
ends (objects freed by reference counting, the common case, are freed at once, frozen or not).
``streamflow.gc.freeze: false`` (``env.configure``) turns freezing off; pauses are still
measured.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

_log = logging.getLogger("streamflow.gc")

FREEZE_AFTER_MS = 5.0
FULL_EVERY = 100  # the collector's third threshold while jobs run (module doc)


class GcPolicy:
    def __init__(self, freeze_after_ms: float = FREEZE_AFTER_MS) -> None:
        self.freeze_after_ms = freeze_after_ms
        self._lock = threading.Lock()
        self._jobs: dict[int, bool] = {}  # id(job) -> freezing allowed
        self._loops: set[asyncio.AbstractEventLoop] = set()
        self._started = 0.0
        self._frozen_by_us = False
        self._user_frozen = 0
        self._freeze_pending = False
        self.full_collections = 0
        self.full_pause_max_ms = 0.0
        self.freezes = 0
        self._logged = 0  # freezes logged at INFO since the first of the running jobs started
        self._thresholds: tuple[int, int, int] | None = None  # (before, set): the jobs' third threshold
        self._set: tuple[int, int, int] | None = None

    # -- jobs ------------------------------------------------------------------------
    def job_started(self, job: object, *, freeze: bool) -> None:
        with self._lock:
            if id(job) in self._jobs:
                return
            if not self._jobs:
                self._user_frozen = gc.get_freeze_count()
                self._frozen_by_us = False
                self._logged = 0
                gc.callbacks.append(self._on_gc)
                self._raise_full_threshold()
            self._jobs[id(job)] = freeze
            try:
                self._loops.add(asyncio.get_running_loop())
            except RuntimeError:
                pass  # no running loop (a job built outside one): nothing to remember, not a failure

    def job_ended(self, job: object) -> None:
        with self._lock:
            if self._jobs.pop(id(job), None) is None or self._jobs:
                return
            self._loops.clear()
            if self._on_gc in gc.callbacks:
                gc.callbacks.remove(self._on_gc)
            self._restore_full_threshold()
            if not self._frozen_by_us:
                return
            self._frozen_by_us = False
            # counting walks every frozen object (2-5 ms at a job's end: a tenth of a short job's
            # fixed cost), so only for a line that is logged
            count = gc.get_freeze_count() if _log.isEnabledFor(logging.INFO) else "some"
            if self._user_frozen:
                _log.info(
                    "streamflow: the last job ended; %s objects stay frozen (gc.freeze): the application "
                    "had frozen objects before the job, so streamflow does not unfreeze (gc.unfreeze() "
                    "would unfreeze the application's too)",
                    count,
                )
                return
            gc.unfreeze()
            _log.info(
                "streamflow: the last job ended: gc.unfreeze() (%s objects); the garbage collector is "
                "as before the job",
                count,
            )

    def _raise_full_threshold(self) -> None:
        before = gc.get_threshold()
        self._thresholds = self._set = None
        if before[0] <= 0 or before[2] >= FULL_EVERY:
            return  # collector off by threshold, or full collections already as rare
        self._thresholds, self._set = before, (before[0], before[1], FULL_EVERY)
        gc.set_threshold(*self._set)
        _log.debug("streamflow: jobs running: gc thresholds %s -> %s (module doc)", before, self._set)

    def _restore_full_threshold(self) -> None:
        before, mine = self._thresholds, self._set
        self._thresholds = self._set = None
        if before is None:
            return
        if gc.get_threshold() != mine:
            _log.info(
                "streamflow: the last job ended; gc thresholds %s stay (set by the application while "
                "jobs ran; streamflow had set %s, and found %s before the first job)",
                gc.get_threshold(),
                mine,
                before,
            )
            return
        gc.set_threshold(*before)
        _log.debug("streamflow: the last job ended: gc thresholds back to %s", before)

    def after_restore(self, job: object, what: str) -> None:
        """A job restored its state: freeze it (all of it is new, long-lived objects)."""
        if self._jobs.get(id(job)):
            self._freeze(f"after restoring {what}")

    def task_state_ready(self, task: str, restored: bool, tables: Iterable[object] = ()) -> None:
        """A task opened operators with keyed state (and decoded its restored state first, which
        the heap backend defers to the task, ``state/deferred_restore.py``): freeze now, if any
        running job freezes (the task does not know its job; jobs in one process rarely differ
        in this). The state's ``tables`` are then frozen while still small: a full collection
        never visits a table of a million entries (one such visit alone costs 30-90 ms of CPU,
        even when none of its keys and values is a container), only what is new.

        An empty dict (or one of plain numbers and strings) is not tracked by the collector, so
        ``gc.freeze()`` would leave it out: it would start being tracked at its first tuple
        value, as a young object, and reach generation 2 as a table of a million entries (the
        first full collection of a 1M-key running sum spent 34-64 ms on it). Each table is made
        tracked first (``track``)."""
        if self.freezing:
            track(tables)
            what = "decoded its restored state" if restored else "opened its keyed state"
            self._freeze(f"task {task} {what}")

    @property
    def freezing(self) -> bool:
        return any(self._jobs.values())

    # -- the collector's hook ------------------------------------------------------------
    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        if info.get("generation") != 2:
            return
        pause_ms = (time.perf_counter() - self._started) * 1000
        self.full_collections += 1
        self.full_pause_max_ms = max(self.full_pause_max_ms, pause_ms)
        if pause_ms < self.freeze_after_ms or self._freeze_pending or not self.freezing:
            return
        self._freeze_pending = True
        reason = f"a full garbage collection took {pause_ms:.0f} ms"
        for loop in list(self._loops):  # the collection may have run in a worker thread
            try:
                loop.call_soon_threadsafe(self._freeze, reason)
                return
            except RuntimeError:  # that loop is closed
                self._loops.discard(loop)
        self._freeze_pending = False

    def _freeze(self, reason: str) -> None:
        self._freeze_pending = False
        if not self.freezing:
            return
        gc.freeze()
        self._frozen_by_us = True
        self.freezes += 1
        self._logged += 1
        level = logging.INFO if self._logged <= 3 else logging.DEBUG
        _log.log(
            level,
            "streamflow: %s: gc.freeze(); later collections skip every object alive now, until the "
            "last job ends (streamflow.gc.freeze: false turns this off)",
            reason,
        )

    def metrics(self) -> dict[str, float | int]:
        return {
            "process.gcFullCollections": self.full_collections,
            "process.gcFullPauseMaxMs": round(self.full_pause_max_ms, 1),
            "process.gcFreezes": self.freezes,
        }


_PROBE = "\x00streamflow.gc_policy.track"


def track(tables: Iterable[object]) -> None:
    """Make each dict among ``tables`` tracked by the collector (so ``gc.freeze()`` freezes it):
    a dict starts being tracked when a container is stored in it and stays tracked after that
    entry is gone (only a full collection untracks dicts, and frozen objects are in none).

    The probe's key is a ``str`` (an existing key when the dict has one): a dict whose keys
    have all been exact ``str`` looks them up by a specialised path, and a single key of
    another type (an ``object()`` probe did this) switches it to the general lookup for good,
    which compares equal strings through ``PyObject_RichCompare``: about 300 more machine
    instructions a record for a keyed running sum on string keys (callgrind)."""
    for table in tables:
        if isinstance(table, dict) and not gc.is_tracked(table):
            if table:  # store a container under a key it has, then put its value back
                key = next(iter(table))
                value = table[key]
                table[key] = []
                table[key] = value
            else:
                table[_PROBE] = []
                del table[_PROBE]


def collect_young_when_idle() -> None:
    """Called by the last task of a job to wait for input (nothing of the job in flight, the
    whole job idle): collect the young generations now, when the
    young one is past half its threshold, so the automatic collection (which starts at an
    allocation once it reaches the threshold) rarely falls inside a batch, where the records
    of that batch wait for it. Generation 1 is taken when the automatic collection would take
    it. A record arriving meanwhile waits for it as it would for any callback, but a job that
    keeps up with its input idles between batches, and each such collection has at most half
    a threshold of young objects (measured in docs/performance.md, ``bench/latency.py``).
    Nothing is done when the application turned the collector off (or set threshold 0)."""
    count0, count1, _ = gc.get_count()
    threshold0, threshold1, _ = gc.get_threshold()
    if 2 * count0 >= threshold0 > 0 and gc.isenabled():
        gc.collect(1 if count1 + 1 >= threshold1 else 0)


GC_POLICY = GcPolicy()
