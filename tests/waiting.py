"""``wait_until``: poll a condition in the running event loop, failing after a timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def wait_until(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)
