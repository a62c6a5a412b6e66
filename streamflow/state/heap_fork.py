"""When the heap backend encodes a checkpoint in a snapshot child, and the child's files.

Theory of operation
-------------------
``incremental.capture`` asks :func:`wanted` at each barrier. The child
(``snapshot_process.py``) takes the encoding off the job's CPU, but the job pays
for the fork (the page tables, proportional to its resident memory: a single
call that holds the loop) and for a fault on each page it writes afterwards (a
copy while the child runs; once it has exited, the page is made writable
again). Every page the job writes after a fork faults once, so the faults
counted since the last fork are the pages it writes between two checkpoints;
before the first fork, all resident pages are assumed. :func:`wanted` (mode
``auto``, the default) uses a child only for a *base* (a capture of every entry:
the first checkpoint, a materialisation), and only when encoding its entries
here would cost more than the fork and those faults. What an entry costs here
is measured, not assumed: the capture encodes the base's first slice in the
process, timed (:func:`probe`: this thread's CPU, plus the hashing and writing
of its bytes), and a child that takes over goes on from the second slice; the
fork and the faults are estimated per resident page, at costs measured on this
project's machine (docs/performance.md, helpers ``fork`` and ``lead``): a 1M-key base costs the
job ~90-100 ms with a child instead of 250-500 ms of encoding, and the heap
job's overhead fell from +17 % to +5 % on a quiet machine. A *delta* stays in
the process: it costs what changed (a patch delta ~70-100 ns an entry), and a
fork at every checkpoint would hold the loop at each (the fork copies the page
tables in one call: 6-14 ms at 270 MB) and make every page the job writes fault
again; in ``bench/embedded.py``'s 1M-key job, forking every delta lifted the
/ping p99 from 12 to 15-24 ms, forking its bases only to 13.6-13.8 ms. Never
with one CPU (the child would take the job's), nor when the fork alone would
hold the loop more than ``MAX_FORK_MS`` (a process above ~600 MB resident), nor
for a base that costs less than ``MIN_SAVING_MS`` here (a small state: the saving
is not worth a process, and the choice does not depend on the machine's speed).
``on`` forks every capture, ``off`` none, and a fixed threshold
(``...snapshot-process.min-entries``) forks every capture of at least that many
entries, deltas too. A platform without ``fork`` (not Linux) or a failed
``fork`` encodes in the process, logged with the cause.

Files. A child writes ``<staging>/<file name>`` (a directory of this process,
``streamflow-heap-pid<pid>-*`` under the system's temporary directory, removed
at exit; those of processes that died are removed by the next one), atomically:
``<name>.tmp``, rename (the storage fsyncs the file when it links it into the
checkpoint, before the metadata, off the loop). Its report (size, sha256, the byte span of its
own frames, its key kinds, its entries) reaches the parent through the pipe;
the upload hands the storage the file with the size and sha256 the child
computed as it wrote it (a ``HashedFile``: hard-linked into the checkpoint's
shared directory, its size checked, not read again; the digest describes the
file as written, so a restore still finds a file damaged later). A staged file
is deleted once a checkpoint at or after its own completes (the storage holds it
by then, or its checkpoint was subsumed); a delta whose checkpoint is still pending is read back (its span) by
the next capture, which repeats its frames as it repeats in-memory ones.

Failure. A child that fails (a value the codec refuses, a full disk, killed)
fails its checkpoint: the upload raises :class:`SnapshotChildError` with the
child's cause, and the driver declines, logged. Its logs were cleared at the
barrier, so the next capture, which first waits for earlier children
(:func:`settle`), writes a base.

A child that hangs (a lock another thread held at the fork: see
``snapshot_process.py``) must not stall the job's checkpoints: its watchdog
ends it after :func:`watchdog_s` (``WATCHDOG_FACTOR`` times the work expected
of it, at the measured cost per entry, at least ``WATCHDOG_FLOOR_S``: a 1M-key
base, ~0.5 s of work, gets the floor), and the parent kills it
``snapshot_process.KILL_GRACE_S`` later should it still run; both the upload
and :func:`settle` wait no longer. The checkpoint is declined with that cause,
and the next capture writes its base *in the process*, logged (a child that
ran past its deadline because it was slow, not stuck, would be again).
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from . import snapshot_process as _proc
from .abandoned_dirs import remove_abandoned
from .snapshot_process import SnapshotChild, SnapshotChildError

if TYPE_CHECKING:
    from .incremental import HeapChain, _Pending

__all__ = ["SnapshotChildError", "encode_in_child", "frames_of", "note", "remove_staged", "settle", "wanted"]

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

_log = logging.getLogger(__name__)

# costs measured on this project's machine (docs/performance.md, helper ``fork``)
ENCODE_NS = 450.0  # in the process, per entry: capture, hashing and writing (a 1M-key base: 385-508 ms)
BYTE_NS = 2.5  # per byte of a file the process writes: sha256 (0.8 ns) and the write (1.9 ns CPU)
# in the parent, per page it writes after a fork: a copy-on-write fault while the child lives
# (3.9-6.3 us measured; 4.6 us on the 2026-11-27 evening VM), a fault that only makes the page
# writable again after it exited (1.0-2.6 us). Averaged over a job's pages: the heap job (1M keys,
# every key written each second, 63k pages resident) paid at most ~100 ms for its base's child,
# i.e. <= 1.6 us per resident page, as only part of them are written while the child lives
FAULT_NS = 1_500.0
TABLE_NS = 200.0  # fork's copy of the page tables, per resident page (13 ms at 270 MB)
WATCHDOG_FLOOR_S = 60.0  # a child's watchdog: at least this long (module doc) ...
WATCHDOG_FACTOR = 20.0  # ... or this many times the work expected of it
MAX_FORK_MS = 30.0  # fork holds the loop: a process larger than this allows encodes in itself
MIN_SAVING_MS = 30.0  # a base cheaper than this to encode here stays here: a child is not worth its risks

_warned: set[str] = set()
_last_fork_faults: list[int] = []  # the process's minor faults at its last fork
_hung: weakref.WeakSet[HeapChain] = weakref.WeakSet()  # chains whose last child ran past its deadline


def estimates(settings: Any) -> bool:
    """Whether :func:`wanted` decides by the cost estimate (``auto`` without a fixed threshold)."""
    return getattr(settings, "snapshot_process", "auto") == "auto" and (
        getattr(settings, "snapshot_process_min_entries", None) is None
    )


def probe(frames: Iterator[list[bytes]], tally: Any) -> tuple[Iterator[list[bytes]], float]:
    """Encode the first slice of ``frames`` here, timed (this thread's CPU: a loaded machine's
    preemption does not count): the same frames again, and what an entry costs to encode, hash
    and write in the process (ns; ``tally.entries``: the entries encoded)."""
    t0 = time.thread_time_ns()
    first = next(frames, [])
    ns = time.thread_time_ns() - t0 + sum(map(len, first)) * BYTE_NS
    return itertools.chain([first], frames), ns / max(1, tally.entries)


def wanted(settings: Any, entries: int, base: bool, cost: float | None = None) -> bool:
    """Whether this capture's ``entries`` are encoded in a snapshot child (module doc);
    ``base``: the capture writes every entry (a base), not a delta; ``cost``:
    what an entry costs in the process (ns, :func:`probe`), else :data:`ENCODE_NS`."""
    mode = getattr(settings, "snapshot_process", "auto")
    estimated = estimates(settings)
    fixed = getattr(settings, "snapshot_process_min_entries", None)
    if mode == "off" or entries == 0 or (estimated and not base):
        return False
    why = _proc.available() or _one_cpu()
    if why is not None:
        _once(why, "heap checkpoints are encoded in the process: %s", why)
        return False
    if not estimated:
        return entries >= (fixed or 1)
    pages = resident_pages()
    fork_ms = pages * TABLE_NS / 1e6
    if fork_ms > MAX_FORK_MS:
        why = "heap checkpoints are encoded in the process: %d MB resident, a fork would hold the loop"
        _once("resident", why + " ~%.0f ms (more than %.0f)", pages * PAGE >> 20, fork_ms, MAX_FORK_MS)
        return False
    # every page the job writes after a fork faults once; since the last fork it wrote about
    # as many pages as it faulted on (before any fork: assume all of them)
    written = minor_faults() - _last_fork_faults[0] if _last_fork_faults else pages
    here_ms = entries * (ENCODE_NS if cost is None else cost) / 1e6
    child_ms = (pages * TABLE_NS + min(written, pages) * FAULT_NS) / 1e6
    _log.debug("a base of %d entries: ~%.0f ms to encode in the process, ~%.0f ms for a child (%d MB "
               "resident)", entries, here_ms, child_ms, pages * PAGE >> 20)  # fmt: skip
    return here_ms > max(child_ms, MIN_SAVING_MS)


def _one_cpu() -> str | None:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return "the process may use one CPU only: a child would take the job's" if cpus < 2 else None


def _once(key: str, message: str, *args: Any) -> None:
    """Log why children are not used, once per process and cause (it holds at every capture)."""
    if key not in _warned:
        _warned.add(key)
        _log.warning(message, *args)


def resident_pages() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 1 << 20  # unknown: as for 4 GB, which never forks (MAX_FORK_MS)


def minor_faults() -> int:
    """This process's minor page faults so far (0 where ``resource`` does not exist: no fork there)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def watchdog_s(entries: int, cost: float | None = None) -> float:
    """How long a child encoding ``entries`` may run before its watchdog ends it (module doc);
    ``cost``: what an entry costs (ns, :func:`probe`), else :data:`ENCODE_NS`."""
    expected_s = entries * (ENCODE_NS if cost is None else cost) / 1e9
    return max(WATCHDOG_FLOOR_S, WATCHDOG_FACTOR * expected_s)


def encode_in_child(
    chain: HeapChain,
    checkpoint_id: int,
    name: str,
    work: Callable[[BinaryIO], dict[str, Any]],
    entries: int = 0,
    cost: float | None = None,
) -> tuple[SnapshotChild, Path] | None:
    """Fork a child that writes ``<staging>/<name>`` with ``work`` (``entries`` at ``cost``
    each: its watchdog, :func:`watchdog_s`); None (logged) when forking fails, or when the
    chain's last child ran past its deadline, and the caller encodes in the process."""
    if chain in _hung:
        _hung.discard(chain)
        _log.warning("checkpoint %d: the last snapshot child ran past its deadline; encoding this one in "
                     "the process", checkpoint_id)  # fmt: skip
        return None
    try:
        path = _staging() / name
    except OSError as exc:
        _log.warning("checkpoint %d: no staging directory for a snapshot child (%s); encoding in the process",
                     checkpoint_id, exc)  # fmt: skip
        return None

    def child_work() -> dict[str, Any]:
        t0 = time.monotonic()
        tmp = path.with_name(name + ".tmp")
        try:
            with open(tmp, "xb") as out:
                report = work(out)
            # no fsync here: the storage links the file into the checkpoint and fsyncs it
            # before the checkpoint's metadata (shared_files.py), off the loop
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        report["name"] = name
        report["wall_ms"] = (time.monotonic() - t0) * 1e3
        report["cpu_ms"] = time.process_time() * 1e3  # the child's: it started at zero
        return report

    try:
        f0 = time.monotonic()
        child = _proc.start(child_work, watchdog_s(entries, cost))
        _last_fork_faults[:] = [minor_faults()]
        _log.debug("checkpoint %d: fork took %.1f ms at %d MB resident", checkpoint_id,
                   (time.monotonic() - f0) * 1e3, resident_pages() * PAGE >> 20)  # fmt: skip
    except OSError as exc:
        _log.warning(
            "checkpoint %d: cannot fork a snapshot child (%s); encoding in the process", checkpoint_id, exc
        )
        return None
    chain.staged[checkpoint_id] = path
    return child, path


async def settle(chain: HeapChain) -> None:
    """Wait for the children of pending checkpoints; a failed one's checkpoint is dropped and
    the next capture writes a base (module doc)."""
    for cid, pending in sorted(chain.pending.items()):
        child = pending.child
        if child is None:
            continue
        try:
            report = await child.result()  # bounded: its watchdog, then the parent kills it (module doc)
        except SnapshotChildError as exc:
            _log.warning(
                "checkpoint %d: its snapshot child failed (%s); the next checkpoint writes a base", cid, exc
            )
            del chain.pending[cid]
            chain.broken = True
            if child.hung:
                _hung.add(chain)
            continue
        note(chain, pending, report)


def note(chain: HeapChain, pending: _Pending | None, report: dict[str, Any]) -> None:
    """Record a child's report: its file's size and entries, and where its own frames are."""
    name = report["name"]
    _log.debug(
        "snapshot child of %s: %d entries, %d bytes, %.0f ms (%.0f ms CPU); %d page faults in this "
        "process since the fork", name, report["entries"], report["size"], report["wall_ms"],
        report["cpu_ms"], minor_faults() - _last_fork_faults[0] if _last_fork_faults else 0,
    )  # fmt: skip
    chain.sizes[name] = report["size"]
    chain.entries[name] = report["entries"]
    if pending is not None:
        pending.child = None
        pending.span = (report["span"][0], report["span"][1])
        pending.key_kinds = set(report["kinds"])


def frames_of(pending: _Pending) -> list[bytes]:
    """A pending delta's frames: in memory, or read back from its child's file."""
    if pending.file is None:
        return pending.frames
    start, end = pending.span
    with open(pending.file, "rb") as f:
        f.seek(start)
        return [f.read(end - start)]


def remove_staged(chain: HeapChain, checkpoint_id: int) -> None:
    """Delete the staged files of checkpoints up to ``checkpoint_id`` (module doc)."""
    for cid in [c for c in chain.staged if c <= checkpoint_id]:
        path = chain.staged.pop(cid)
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            _log.warning("could not remove the snapshot child's file %s: %s", path, exc)


_STAGING: list[Path] = []
_MARK = "streamflow-heap-pid"


def _staging() -> Path:
    """This process's staging directory, made on first use (module doc)."""
    if _STAGING and _STAGING[0].is_dir():
        return _STAGING[0]
    root = Path(tempfile.gettempdir())
    remove_abandoned(root, f"{_MARK}*", _owner, "snapshot staging directory")
    path = Path(tempfile.mkdtemp(prefix=f"{_MARK}{os.getpid()}-", dir=root))
    _STAGING[:] = [path]
    _proc.at_exit(lambda: shutil.rmtree(path, ignore_errors=True))
    return path


def _owner(staging: Path) -> int | None:
    """The pid in a staging directory's name (``streamflow-heap-pid<pid>-<random>``)."""
    pid = staging.name[len(_MARK) :].partition("-")[0]
    return int(pid) if pid.isdigit() else None
