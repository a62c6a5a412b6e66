"""Decoding a restored heap state in slices, after the job has started (issue 12 item 4).

Theory of operation
-------------------
A job is built synchronously in the caller's event loop (``execute_async``), and operators
get their state there (``initialize_state``). Decoding an incremental chain of a million keys
takes about a second of CPU: done there, it holds the loop for that second. So the heap
backend only *prepares* a chain restore at build time: each file of the chain is read and
verified (its size and sha256, as before: a damaged file still fails the job's start) and
its header checked (a wrong codec too), and :class:`DeferredRestore` keeps one step
iterator per file (``incremental.apply_file_slices``: one frame, at most ``CHUNK`` keys, per
step). The task that owns the backend finishes it before opening its operators
(``Task.run``), one frame at a time with a loop budget pause point between frames
(``loop_budget.yield_point``): the loop is held for one frame at a time, and the decoding
counts against the job's slice like any other work.

Anyone who touches the backend's tables before that (another engine, a test, a tool) finishes
it synchronously first (:meth:`DeferredRestore.finish_now`), so a table is never seen half
restored. Files are applied in chain order, each to its end, as before.

The restored objects are all new and long-lived: once done, the task asks the GC policy to
freeze them (``GcPolicy.after_task_restore``), as a restore at build time did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..checkpoint._fs import CorruptCheckpointError

__all__ = ["DeferredRestore"]


class DeferredRestore:
    def __init__(self, on_done: Callable[[set[str]], None]) -> None:
        self._files: list[tuple[str, Iterator[None]]] = []
        self.key_kinds: set[str] = set()  # filled by the files' last steps
        self._on_done = on_done
        self.frames = 0  # frames applied (steps after the headers)

    def add(self, name: str, steps: Iterator[None]) -> None:
        """One file's steps; its first (the header check) runs now."""
        self._step(name, steps)
        self._files.append((name, steps))

    def __bool__(self) -> bool:
        return bool(self._files)

    def _step(self, name: str, steps: Iterator[None]) -> bool:
        try:
            next(steps)
        except StopIteration:
            return False
        except (ValueError, TypeError, KeyError, IndexError) as e:
            msg = f"state file {name!r} of an incremental checkpoint is damaged: {type(e).__name__}: {e}"
            raise CorruptCheckpointError(msg, name) from e
        return True

    def finish_now(self) -> None:
        """Apply every remaining frame at once (a table is needed before the task finished)."""
        for name, steps in self._files:
            while self._step(name, steps):
                self.frames += 1
        self._done()

    async def finish(self) -> None:
        """Apply the remaining frames one at a time, pausing through the job's loop budget."""
        from ..runtime.loop_budget import yield_point

        for name, steps in self._files:
            while self._step(name, steps):
                self.frames += 1
                await yield_point()
        self._done()

    def _done(self) -> None:
        self._files = []
        self._on_done(self.key_kinds)
