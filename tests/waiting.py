"""``wait_until``: poll a condition in the running event loop, failing after a timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


async def wait_until(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def read_until(reader: Any, got: list, done: Callable[[], bool], timeout: float = 20.0) -> None:
    """Poll a started ``SourceReader``, adding each batch's records to ``got``, until ``done()``."""

    def polled() -> bool:
        batch = reader.poll_batch(100)
        if isinstance(batch, tuple):  # (records, timestamps); None, END or a watermark otherwise
            got.extend(batch[0])
        return done()

    await wait_until(polled, timeout)
