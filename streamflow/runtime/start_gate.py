"""The start gate: no task of a job starts its input before every task has opened.

Theory of operation
-------------------
A task opens its operators (tail to head), then starts its input: a source
task starts its reader, any task re-sends its restored output channel state
and polls its input. Opening is where a restored operator settles what its
checkpoint left: the exactly-once Kafka sink re-sends and commits its pending
epochs (``connectors/kafka_sink.py``), an async I/O operator re-issues its
restored queue (``async_wait.py``). If sources started as soon as their own
task had opened, then after a rescale a partition's new reader could send a
key's newer records downstream before the subtask that took over the old
reader's in-flight elements had re-issued them, and the key's records would
be processed out of order.

So every task reports when its operators have opened and waits until all the
job's tasks have: only then does any input start. Opening does not depend on
input, so the wait always ends, unless a task fails, which cancels the job.
A task built outside a job (no gate) starts at once.
"""

from __future__ import annotations

import asyncio

__all__ = ["StartGate"]


class StartGate:
    """Counts the tasks of a job still opening; ``opened()`` waits until none is."""

    __slots__ = ("_all_open", "_opening")

    def __init__(self, tasks: int) -> None:
        if tasks < 0:
            raise ValueError(f"a job has >= 0 tasks, got {tasks}")
        self._opening = tasks
        self._all_open: asyncio.Event | None = None  # made on first wait (needs the running loop)

    @property
    def open(self) -> bool:
        """Every task has opened."""
        return self._opening == 0

    async def opened(self) -> None:
        """One task has opened its operators: return once every task has."""
        if self._opening <= 0:
            raise RuntimeError("more tasks opened than the job has")
        self._opening -= 1
        if self._all_open is None:
            self._all_open = asyncio.Event()
        if self._opening == 0:
            self._all_open.set()
        else:
            await self._all_open.wait()
