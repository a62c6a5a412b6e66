"""Fault-injection hooks for crash tests: SIGKILL this process at a named protocol point.

Internal: production code calls these hooks; ``streamflow.testing.faults`` documents them
for users, and ``import streamflow`` never imports the test kit.

Set ``STREAMFLOW_KILL_AT=<point>:<checkpoint id>`` (or just ``<point>``) in the
environment of a job's process; the first time the runtime passes that point
for a checkpoint id >= the given one, the process kills itself with SIGKILL
(no cleanup, no flush: a real crash). Points:

* ``alignment``: a task paused a channel for barrier n (alignment under way);
* ``snapshot``: a task snapshotted its state for n, before n completed;
* ``complete``: checkpoint n is durable in storage, before anyone was notified;
* ``commit``: a sink is committing n and has made part of its output visible.

Unset (the normal case), every hook is one falsy module attribute check.
"""

from __future__ import annotations

import os
import signal

_SPEC = os.environ.get("STREAMFLOW_KILL_AT", "")
ARMED = bool(_SPEC)
_POINT, _, _ID = _SPEC.partition(":")
_MIN_ID = int(_ID) if _ID else 0


def point(name: str, checkpoint_id: int) -> None:
    if ARMED and name == _POINT and checkpoint_id >= _MIN_ID:
        os.kill(os.getpid(), signal.SIGKILL)
