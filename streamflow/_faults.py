"""Fault-injection hooks at named protocol points: SIGKILL a process, or raise in-process.

Internal: production code calls these hooks; ``streamflow.testing.faults`` is the user-facing
name, and ``import streamflow`` never imports the test kit.

Set ``STREAMFLOW_KILL_AT=<point>:<checkpoint id>`` (or just ``<point>``) in the
environment of a job's process; the first time the runtime passes that point
for a checkpoint id >= the given one, the process kills itself with SIGKILL
(no cleanup, no flush: a real crash). In-process, :func:`inject` arms a point to
raise :class:`InjectedFault` instead (once, or every time), so a test can fail a
job at that point and watch its restart strategy recover it. Points, in the
order of a checkpoint's life:

* ``trigger``: the driver is about to send checkpoint n to the sources;
* ``alignment``: a task paused a channel for barrier n (alignment under way);
* ``snapshot``: a task snapshotted its state for n, before n completed (also a finished task's
  final state labelled n);
* ``persist``: every task acknowledged n; its write is about to start;
* ``metadata``: n's entries are durable, its ``_metadata`` is not (storage thread);
* ``metadata_written``: n's ``_metadata`` is durable (storage thread);
* ``complete``: checkpoint n is durable in storage, before anyone was notified;
* ``notify``: the driver is about to tell every task that n completed;
* ``commit``: a sink is committing n and has made part of its output visible (the Kafka sink:
  its marker is in T_n, the commit is not yet sent);
* ``committed``: the Kafka sink committed T_n and has not begun the next transaction.

Outside a checkpoint's life (``CONNECTOR_POINTS``), each with the id of the checkpoint whose
completion started the work (0 after a restore):

* ``compact``: a FileSink compaction committed its group's inputs (hidden) and has not written
  the compacted file;
* ``recommit``: a restored Kafka sink re-sent the uncommitted epochs of its state and their marker
  into a transaction and has not committed it (the id: the newest of those epochs' checkpoints).

Unset (the normal case), every hook is one falsy module attribute check.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass

from .errors import StreamflowError

_SPEC = os.environ.get("STREAMFLOW_KILL_AT", "")
_POINT, _, _ID = _SPEC.partition(":")
_MIN_ID = int(_ID) if _ID else 0
POINTS = (
    "trigger", "alignment", "snapshot", "persist", "metadata", "metadata_written",
    "complete", "notify", "commit", "committed",
)  # fmt: skip
CONNECTOR_POINTS = ("compact", "recommit")


class InjectedFault(StreamflowError, RuntimeError):
    """Raised at an armed point by :func:`inject`."""


@dataclass
class _Armed:
    min_id: int
    times: int  # how many more times to raise; -1: always
    hits: int = 0


_armed: dict[str, _Armed] = {}
_lock = threading.Lock()  # storage points run in a worker thread
ARMED = bool(_SPEC)


def inject(point: str, min_checkpoint_id: int = 0, times: int = 1) -> None:
    """Raise :class:`InjectedFault` at ``point`` for checkpoint ids >= ``min_checkpoint_id``,
    ``times`` times (-1: every time). :func:`clear` disarms everything."""
    global ARMED
    if point not in POINTS + CONNECTOR_POINTS:
        raise ValueError(f"unknown fault point {point!r}; known: {', '.join(POINTS + CONNECTOR_POINTS)}")
    with _lock:
        _armed[point] = _Armed(min_checkpoint_id, times)
        ARMED = True


def hits(point: str) -> int:
    """How often an injected fault was raised at ``point`` since it was armed."""
    armed = _armed.get(point)
    return armed.hits if armed is not None else 0


def clear() -> None:
    global ARMED
    with _lock:
        _armed.clear()
        ARMED = bool(_SPEC)


def point(name: str, checkpoint_id: int) -> None:
    if _SPEC and name == _POINT and checkpoint_id >= _MIN_ID:
        os.kill(os.getpid(), signal.SIGKILL)
    armed = _armed.get(name)
    if armed is None or checkpoint_id < armed.min_id:
        return
    with _lock:
        if armed.times == 0:
            return
        if armed.times > 0:
            armed.times -= 1
        armed.hits += 1
    raise InjectedFault(f"injected fault at {name!r} for checkpoint {checkpoint_id}")
