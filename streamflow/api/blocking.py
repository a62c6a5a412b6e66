"""The blocking entry points (``execute()``, ``execute_and_collect()``) run a loop of their own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["loop_factory", "refuse_running_loop", "run_coroutine"]


def refuse_running_loop(message: str) -> None:
    """Raise ``RuntimeError(message)`` when called inside a running event loop: a blocking call
    there would stop the caller's loop (a plain script, with no loop running, passes)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(message)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed, else asyncio's default (None)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_coroutine(coro: Any) -> Any:
    """Run ``coro`` to completion in a new loop from :func:`loop_factory`."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(coro)
