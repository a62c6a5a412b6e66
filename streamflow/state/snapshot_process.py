"""Snapshot children: encode a heap backend's checkpoint in a forked copy of the process.

Theory of operation
-------------------
CPython 3.11 runs one thread of Python at a time, so encoding a snapshot in a
thread still takes the loop's CPU. Redis' ``BGSAVE`` shows the way out: at the
barrier the task (while its state cannot change) calls :func:`start`, which
forks; the child is a copy-on-write image of the process *as of the barrier*,
runs ``work`` (encode, write the file atomically: temporary name, fsync,
rename) on the machine's other core, reports through a pipe and leaves with
``os._exit``. The parent goes on at once: it clears its logs and forwards the
barrier, and :meth:`SnapshotChild.result` (awaited by the upload, after the
barrier) resolves when the child's report arrives, read by the event loop
(``add_reader``; a loop without it: a thread blocked in ``read``). Every child
is reaped (``waitpid``), also when the wait is cancelled (the child is killed).

What the parent pays: ``fork`` copies the page tables (about 13 ms for 270 MB of
resident memory on this machine's VM), and every page the job writes while the
child lives is copied once (a minor fault, about 3 us here). What the child may
do: a fork while other threads run (the storage thread, executor threads)
copies only the forking thread, and any lock another thread held stays held in
the child for ever. So the child runs only code that needs no such lock:
modules imported before the fork, no ``logging`` (a failure travels through the
pipe, with its cause, and the parent logs it), no asyncio, no new threads, and
it ends with ``os._exit`` (no ``atexit``, no flushing of inherited buffers). It
asks the kernel for ``SIGKILL`` when the forking thread dies
(``PR_SET_PDEATHSIG``), so a job killed with ``SIGKILL`` leaves no child writing
files; a file a child wrote is part of a checkpoint only once the parent has
read its report and the checkpoint completed. Python 3.12 warns
(``DeprecationWarning``) about ``fork`` in a process with threads, for the reason
above; this module is written for that constraint, and the warning is silenced
only around its own ``fork``.

What CPython mends in the child (``PyOS_AfterFork_Child`` and the
``os.register_at_fork`` hooks of 3.11's standard library): the GIL, the import
lock, the thread states (``threading`` marks the other threads stopped),
``logging``'s module and handler locks, ``concurrent.futures``' shutdown lock,
``random``'s seed. Not mended: a lock inside an object another thread was
using (a file's buffer lock, a hash object's), and C libraries' own locks
(OpenSSL's algorithm fetch, a ``dlopen`` in progress; glibc's ``malloc`` takes
its arena locks around ``fork``, so it is safe). Should the child still meet
such a lock, it would wait for ever: so a **watchdog** bounds it. The first
thing the child does is arm ``ITIMER_REAL`` (``deadline_s`` of :func:`start`,
sized by the caller from the expected work with a generous floor) with
``SIGALRM`` at its default action, unblocked: the kernel ends the child when
it expires, whatever it waits for (a Python handler would never run in a
thread stuck in C). The parent then reads the closed pipe, and the error names
the watchdog. Should the child outlive its deadline anyway (it reset the
timer, or cannot run), :meth:`SnapshotChild.result` kills it ``KILL_GRACE_S``
later. A killed child is reaped off the loop's critical path (``waitpid`` with
``WNOHANG``, retried), so neither bound holds the loop.

:func:`available` says whether forking is possible here (Linux, ``os.fork``); the
caller falls back to encoding in the process, logged with the cause, when it is
not or when ``fork`` fails.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import gc
import logging
import os
import signal
import struct
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

import msgpack

from ..errors import StreamflowError

__all__ = ["SnapshotChild", "SnapshotChildError", "available", "start"]

_log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1
_LEN = struct.Struct("<I")
KILL_GRACE_S = 30.0  # the parent kills a child this long after its watchdog should have ended it

try:  # loaded now: a dlopen in the child could wait for a lock another thread held at the fork
    _LIBC: Any = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
except OSError:  # pragma: no cover - no libc symbols (static builds)
    _LIBC = None


class SnapshotChildError(StreamflowError, RuntimeError):
    """A snapshot child failed (its cause, as it reported it) or died without a report."""


def available() -> str | None:
    """None when snapshots can be encoded in a forked child here, else why not."""
    if not hasattr(os, "fork"):
        return "os.fork is not available on this platform"
    if not sys.platform.startswith("linux"):
        return f"snapshot children are only used on Linux (this is {sys.platform})"
    return None


class SnapshotChild:
    """One running child; :meth:`result` is its report (a dict) once it has exited."""

    def __init__(self, pid: int, fd: int, deadline_s: float | None = None) -> None:
        self.pid = pid
        self.deadline_s = deadline_s  # its watchdog (module doc); None: unbounded
        self._fd = fd
        self._started = 0.0  # the loop's time at the fork
        self._hung = False  # killed by the parent past its deadline
        self._buffer = bytearray()
        self._status: int | None = None
        self._outcome: dict[str, Any] | SnapshotChildError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        _LIVE[pid] = self

    @property
    def running(self) -> bool:
        return self._outcome is None

    @property
    def hung(self) -> bool:
        """Whether it was ended for running past its deadline (its watchdog, or the parent)."""
        return self._hung or (
            self._status is not None and os.WIFSIGNALED(self._status)
            and os.WTERMSIG(self._status) == signal.SIGALRM and self.deadline_s is not None
        )  # fmt: skip

    def _watch(self) -> None:
        """Read the report as it arrives (and reap the child), whether or not anyone awaits it."""
        loop = self._loop = asyncio.get_running_loop()
        self._started = loop.time()
        self._done = asyncio.Event()
        try:
            loop.add_reader(self._fd, self._readable)
        except (NotImplementedError, RuntimeError, ValueError) as exc:
            _log.info("snapshot child %d: the loop cannot watch its pipe (%r); a thread waits", self.pid, exc)
            self._thread = threading.Thread(target=self._wait_in_thread, args=(loop,), daemon=True)
            self._thread.start()

    async def result(self) -> dict[str, Any]:
        """The child's report; raises :class:`SnapshotChildError` with the child's cause. A
        cancelled wait kills the child (it is reaped either way)."""
        if self._outcome is None:
            if self._loop is not asyncio.get_running_loop() or self._done is None:
                self._read_blocking()  # watched by another loop (gone): read it here, it is short
            else:
                try:
                    await self._wait_bounded(self._done)
                except asyncio.CancelledError:
                    self.kill(block=False, why="its wait was cancelled")
                    raise
        outcome = self._outcome
        if isinstance(outcome, SnapshotChildError):
            raise outcome
        assert outcome is not None
        return outcome

    async def _wait_bounded(self, done: asyncio.Event) -> None:
        """Wait for the outcome; a child still running ``KILL_GRACE_S`` after its watchdog
        should have ended it is killed (module doc)."""
        if self.deadline_s is None:
            await done.wait()
            return
        assert self._loop is not None
        left = self._started + self.deadline_s + KILL_GRACE_S - self._loop.time()
        try:
            await asyncio.wait_for(done.wait(), max(left, 0.0))
        except TimeoutError:
            self._hung = True
            self.kill(block=False, why=f"no report {self.deadline_s + KILL_GRACE_S:g} s after the fork, "
                                       "its watchdog did not end it; killed by the parent")  # fmt: skip

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        self._buffer += chunk
        if chunk and not self._complete():
            return
        self._unwatch()
        self._finish()

    def _wait_in_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        os.set_blocking(self._fd, True)
        while self._fd >= 0:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except OSError:
                chunk = b""
            self._buffer += chunk
            if not chunk or self._complete():
                break
        try:
            loop.call_soon_threadsafe(self._finish)
        except RuntimeError:
            pass  # the loop is closed: result() or kill_all() finishes it

    def _read_blocking(self) -> None:
        if self._fd >= 0:
            self._unwatch()
            os.set_blocking(self._fd, True)
            while not self._complete():
                try:
                    chunk = os.read(self._fd, 1 << 16)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                self._buffer += chunk
        self._finish()

    def _complete(self) -> bool:
        buf = self._buffer
        return len(buf) >= 4 and len(buf) >= 4 + _LEN.unpack_from(buf)[0]

    def _finish(self) -> None:
        if self._outcome is not None:
            return
        self._close()
        buf = bytes(self._buffer)
        if self._complete():
            kind, payload = buf[4:6], buf[6 : 4 + _LEN.unpack_from(buf)[0]]
            if kind == b"OK":
                self._settle(msgpack.unpackb(payload, raw=False))
            else:
                self._settle(SnapshotChildError(payload.decode(errors="replace")))
            self._reap_soon()  # its last act: it is exiting (tearing down its memory can take ms)
        else:
            self._reap(block=True)  # the pipe closed: it has exited, or is about to
            self._settle(SnapshotChildError(f"the snapshot child ended without a report ({self._cause()})"))

    def _reap_soon(self, delay: float = 0.005) -> None:
        self._reap(block=False)
        if self._status is None:
            loop = self._loop
            if loop is not None and not loop.is_closed():
                loop.call_later(delay, self._reap_soon, min(2 * delay, 1.0))
            else:
                self._reap(block=True)

    def _settle(self, outcome: dict[str, Any] | SnapshotChildError) -> None:
        self._outcome = outcome
        if self._done is not None:
            try:
                self._done.set()
            except RuntimeError:
                pass  # its loop is closed (at exit): nobody waits any more

    def _reap(self, block: bool) -> None:
        if self._status is not None:
            return
        try:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere (a SIGCHLD handler set to SIG_IGN)
            pid, status = self.pid, 0
        if pid:
            self._status = status
            _LIVE.pop(self.pid, None)

    def _cause(self) -> str:
        status = self._status
        if status is None:
            return "still running"
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM and self.deadline_s is not None:
            return (f"its watchdog ended it after {self.deadline_s:g} s: it hung (a lock another thread "
                    "held at the fork?) or ran far past its expected time")  # fmt: skip
        if os.WIFSIGNALED(status):
            return f"killed by signal {os.WTERMSIG(status)}"
        return f"exit status {os.WEXITSTATUS(status)}"

    def _unwatch(self) -> None:
        if self._thread is None and self._loop is not None and self._fd >= 0 and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)

    def _close(self) -> None:
        if self._fd >= 0:
            self._unwatch()
            fd, self._fd = self._fd, -1
            os.close(fd)

    def kill(self, block: bool = True, why: str = "") -> None:
        """Kill the child (if it still runs) and reap it: now (``block``), or, on a running loop,
        soon (``waitpid`` without waiting: a large process takes ms to tear down)."""
        if self._status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                # dropped on purpose: the child has already exited; _reap below collects its
                # status and _settle reports its cause
                pass
        self._close()
        if block or self._loop is None or self._loop.is_closed():
            self._reap(block=True)
        else:
            self._reap_soon()
        if self._outcome is None:
            self._settle(SnapshotChildError(f"the snapshot child was killed ({why or self._cause()})"))


_LIVE: dict[int, SnapshotChild] = {}  # children not reaped yet, by pid
forks = 0  # children started by this process (a figure for tests and benchmarks)


_AT_EXIT: list[Callable[[], None]] = []


def at_exit(fn: Callable[[], None]) -> None:
    """Run ``fn`` at exit, once every child is killed and reaped (staging directories)."""
    _AT_EXIT.append(fn)


def wait_all() -> None:
    """Block until every snapshot child of this process has exited, and reap it (so that
    ``resource.getrusage(RUSAGE_CHILDREN)`` counts it: benchmarks)."""
    for child in list(_LIVE.values()):
        child._reap(block=True)


def kill_all() -> None:
    """Kill and reap every snapshot child of this process, then run the :func:`at_exit` calls."""
    for child in list(_LIVE.values()):
        child.kill()
    for fn in _AT_EXIT:
        fn()


atexit.register(kill_all)


def start(work: Callable[[], dict[str, Any]], deadline_s: float | None = None) -> SnapshotChild:
    """Fork a child that runs ``work`` and reports its result (a dict of plain values) or its
    failure; raises ``OSError`` when the fork fails. See the module doc for what ``work`` may do;
    ``deadline_s``: its watchdog (module doc), None for none."""
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # 3.12: fork with threads (module doc)
            pid = os.fork()
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    global forks
    forks += 1
    if pid == 0:  # pragma: no cover - the child (covered by the tests through its report)
        _child(work, read_fd, write_fd, parent, deadline_s)
    os.close(write_fd)
    os.set_blocking(read_fd, False)
    child = SnapshotChild(pid, read_fd, deadline_s)
    child._watch()
    return child


def _quiet_signals() -> None:  # pragma: no cover - in the child
    """A Ctrl-C is the parent's to handle, and a signal the child receives must not wake the
    parent's loop through the wakeup fd they share (best effort: the child works without it)."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except (ValueError, OSError):
        # dropped on purpose: the child may not log (a lock another thread held at the fork),
        # and it encodes and reports correctly without these settings (best effort, above)
        pass


def _watchdog(deadline_s: float) -> None:  # pragma: no cover - in the child
    """Arm the child's watchdog (module doc): ``SIGALRM`` at its default action (the process
    ends), unblocked in this thread (the forking thread's mask is inherited), in ``deadline_s``."""
    try:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the forking thread is the child's main thread
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
    except (ValueError, OSError):
        # dropped on purpose: the child may not log (module doc); without these the timer may
        # not end it, and the parent kills it KILL_GRACE_S after the deadline instead
        pass
    signal.setitimer(signal.ITIMER_REAL, max(deadline_s, 0.001))


def _child(
    work: Callable[[], dict[str, Any]], read_fd: int, write_fd: int, parent: int, deadline_s: float | None
) -> None:  # pragma: no cover
    code = 0
    try:
        if deadline_s is not None:  # first: nothing before it may wait for a lock
            _watchdog(deadline_s)
        os.close(read_fd)
        gc.disable()  # the parent's garbage is the parent's; a collection here only copies pages
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(3)
        _quiet_signals()
        message = b"OK" + msgpack.packb(work(), use_bin_type=True)
    except BaseException as exc:  # reported, never raised: the child must not run the parent's code
        code = 1
        try:
            message = b"ER" + f"{type(exc).__name__}: {exc}".encode(errors="replace")
        except BaseException:
            message = b"ERunprintable failure"
    try:
        data = _LEN.pack(len(message)) + message
        while data:
            data = data[os.write(write_fd, data) :]
    finally:
        os._exit(code)
