"""How long a job may hold the caller's event loop before it lets the loop run.

Theory of operation
-------------------
A job runs in the event loop of the program that started it (``execute_async``), so while any
of its tasks computes, nothing else in that program runs: no request handler, no timer, no I/O.
:class:`LoopBudget` bounds that: the tasks of one job share one budget (``execution.loop-budget``,
10 ms by default), spent as *slices* of continuous work.

* A slice starts when the job starts running after the loop had a turn: after a pause (below),
  or when a task wakes up while every task of the job was waiting (idle). ``deadline`` is the
  slice's start plus the budget, read from the job's :class:`~streamflow.clock.Clock`.
* Tasks check ``due()`` once per batch (a clock read and a compare; the runtime calls it after
  each input batch, each control event, each mail run and each batch an operator emits), so a
  slice overruns the budget by at most one batch of one operator.
* When a slice is used up, the task that notices calls ``pause()``: it and every other task of
  the job that comes due meanwhile wait until the loop has completed ``GAP_ITERATIONS`` more
  iterations with no work of this job in them; then the next slice starts. The budget is per
  job, not per task: with k busy tasks, a per-task budget would hold the loop k times as long.

Why more than one iteration: a service's response to a request usually needs two loop turns
(the transport's ``data_received`` creates the handler task, whose first step runs on the next
turn), and asyncio polls I/O only at the start of a turn. With a single free turn the handler's
first step would run after the job's next slice; with two it runs before. An iteration with no
job work costs a few microseconds (a poll with a zero timeout), nothing against a 10 ms slice.

A budget of ``None`` turns voluntary pauses off: the job then only lets the loop run when it
waits for input or for room in a full channel (its timers and checkpoints starve meanwhile):
for scripts that run nothing else in their loop, never for an embedded job.

Counted: ``slices`` (pauses of the whole job, the ``job.numLoopYields`` metric) and ``waits``
(task pauses: a task that found the slice over and waited).

Long work inside one step of a task (a checkpoint's capture, a restore's decoding) is cut into
pieces of bounded size; between two pieces it calls :func:`yield_point`, which pauses through
the budget of the job whose task runs it (``bind`` in ``Task.run`` sets it for that asyncio
task; outside one, e.g. a restore while the job is built, it yields one loop iteration). Such
work so counts against the job's slice like any batch, instead of running back to back with
the job's other tasks in the iterations the pause meant to leave free. A piece is not
interrupted, so ``yield_point`` pauses early when the next piece, if it takes as long as the
last one (the time since the task's previous yield point), would end after the slice: a
capture piece of 16,384 keys takes 3-6 ms, and starting one a millisecond before the deadline
made the slice 14-16 ms long. A long step calls it before its first piece too (the task's
checkpoint capture: ``Task.capture_state``), which then expects a piece as long as the last
one this task measured: the first piece of each capture used to start unchecked, wherever the
slice was, and overran it by up to a whole piece (4.7 ms CPU median, 8.3 ms max, at 1M keys)
once a checkpoint.

*Chores* (``chores``) are cheap callables run once per pause, before the loop gets its free
iterations: keyed state backends move aside their dirty-key dicts before they grow large
(``KeyedStateBackend.seal_dirty``: a dict of a million entries resizes in one C call of 30-40
ms, which would hold the loop however the job slices its batches), and the task collects the
young generation. They are the job's work, held before the free iterations like the slice
itself, so they count against the budget: the next slice is shorter by what the last pause's
chores took (at most half the budget). At 1M keys they took 0.6-1.2 ms median, 1.5-2.3 ms p99,
up to 2.8 ms, on top of every 10 ms slice.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime
import math
import re
from collections.abc import Callable

import anyio

from ..clock import Clock

DEFAULT_LOOP_BUDGET_MS = 10.0
GAP_ITERATIONS = 2  # loop iterations without job work between two slices (see the module doc)


_current: contextvars.ContextVar[LoopBudget | None] = contextvars.ContextVar(
    "streamflow_loop_budget", default=None
)


def bind(budget: LoopBudget) -> None:
    """Make ``budget`` the one :func:`yield_point` uses in the current asyncio task."""
    _current.set(budget)


_piece_end: contextvars.ContextVar[float] = contextvars.ContextVar("streamflow_piece_end", default=-math.inf)
_piece_len: contextvars.ContextVar[float] = contextvars.ContextVar("streamflow_piece_len", default=0.0)


async def yield_point() -> None:
    """Before the first piece of a long step and between two pieces: pause if the job's slice
    is used up, or if the next piece, as long as the one that just ended (before the first:
    as long as this task's last piece), would overrun it (see the module doc); with no job
    budget bound to this asyncio task, yield one loop iteration."""
    budget = _current.get()
    if budget is None:
        await asyncio.sleep(0)
        return
    now = budget.now()
    piece = now - _piece_end.get()  # since this task's last yield point: the piece just done
    if piece > budget.budget_s:
        # not one piece (other work ran since: the first piece of a step is next) or longer
        # than a slice anyway: expect one as long as this task's last piece
        piece = _piece_len.get()
    else:
        _piece_len.set(piece)
    if now + piece >= budget.deadline:
        await budget.pause()
        now = budget.now()
    _piece_end.set(now)


_UNITS = {"": 1.0, "ms": 1.0, "milli": 1.0, "millis": 1.0, "s": 1000.0, "sec": 1000.0, "us": 0.001}


def parse_loop_budget(value: float | datetime.timedelta | str | None) -> float | None:
    """Milliseconds from a number (ms), a ``timedelta`` or a string such as ``"10 ms"``,
    ``"0.5s"``; ``None`` or ``"none"``/``"off"``: no voluntary pauses."""
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        ms = value.total_seconds() * 1000.0
    elif isinstance(value, str):
        text = value.strip().lower()
        if text in ("none", "off"):
            return None
        m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*([a-z]*)", text)
        if m is None or m.group(2) not in _UNITS:
            raise ValueError(f"execution.loop-budget: cannot read {value!r} (e.g. '10 ms', '0.5 s', 'none')")
        ms = float(m.group(1)) * _UNITS[m.group(2)]
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"execution.loop-budget: expected ms, a timedelta or a string, got {value!r}")
    else:
        ms = float(value)
    if not ms > 0:
        raise ValueError(f"execution.loop-budget must be > 0 ms (or 'none'), got {value!r}")
    return ms


class LoopBudget:
    __slots__ = (
        "_chores_s",
        "_clock",
        "_left",
        "_waiters",
        "budget_s",
        "chores",
        "deadline",
        "job_scope",
        "running",
        "slices",
        "waits",
    )

    def __init__(self, budget_ms: float | None, clock: Clock) -> None:
        if budget_ms is not None and not budget_ms > 0:
            raise ValueError(f"the loop budget must be > 0 ms (or None: no pauses), got {budget_ms!r}")
        self.budget_s = math.inf if budget_ms is None else budget_ms / 1000.0
        self._clock = clock
        self.deadline = clock.monotonic() + self.budget_s
        self._waiters: list[asyncio.Future[None]] = []
        self._left = 0
        self.running = 0  # tasks of the job not waiting for input
        self.slices = 0
        self.waits = 0
        self.chores: list[Callable[[], None]] = []  # run once per pause (module doc)
        # the job's cancel scope while it runs (Execution.run): a task resuming from a wait
        # checks it (Task._idle), as anyio may never catch it waiting
        self.job_scope: anyio.CancelScope | None = None
        self._chores_s = 0.0  # what the last pause's chores took: the next slice is that shorter

    def now(self) -> float:
        return self._clock.monotonic()

    def due(self) -> bool:
        """True once the current slice is used up (or a pause is under way): call ``pause()``."""
        return self._clock.monotonic() >= self.deadline

    async def pause(self) -> None:
        """Let the loop run ``GAP_ITERATIONS`` iterations without this job, then go on."""
        loop = asyncio.get_running_loop()
        if not self._waiters:
            self.slices += 1
            self._left = GAP_ITERATIONS
            self.deadline = -math.inf  # every task of the job that checks now joins the pause
            loop.call_soon(self._tick, loop)
            self.run_chores()
        self.waits += 1
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append(fut)
        await fut

    def run_chores(self) -> None:
        if not self.chores:
            return
        started = self._clock.monotonic()
        for chore in self.chores:  # an exception fails the task that paused (a bug: loud)
            chore()
        self._chores_s = min(self._clock.monotonic() - started, self.budget_s / 2)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self._left -= 1
        if self._left > 0:
            loop.call_soon(self._tick, loop)
            return
        waiters, self._waiters = self._waiters, []
        self.deadline = self._clock.monotonic() + self.budget_s - self._chores_s
        for fut in waiters:
            if not fut.done():  # a cancelled task's future
                fut.set_result(None)

    # -- idle accounting (a slice starts when the job wakes up from all-idle) ------------
    def task_started(self) -> None:
        self.running += 1

    def task_waits(self) -> None:
        self.running -= 1

    def task_wakes(self) -> None:
        self.running += 1
        if self.running == 1 and not self._waiters:
            self.deadline = self._clock.monotonic() + self.budget_s
