"""After the barrier a heap backend's upload joins its encoded frames (``HeapUpload.produce``):
a large file (17 MB at 1M keys, 2-48 ms) is joined in a worker thread, so the task's step
ends there and the loop runs meanwhile; a small one is joined at once. No timing: whether the
produce finished within its first step is what tells."""

from __future__ import annotations

import asyncio

from test_loop_state import backend, write

from streamflow.checkpoint import uploads
from streamflow.state import incremental


async def _first_step_done(values: int, size: int) -> bool:
    b = backend()
    for k in range(values):
        write(b, k, k.to_bytes(4, "big") * (size // 4))
    upload = await b.capture(1, False)
    assert isinstance(upload, incremental.HeapUpload) and upload.capture.child is None
    b.snapshot()
    parts = list(upload.capture.parts)
    total = sum(map(len, parts))
    assert (total >= uploads.JOIN_ON_LOOP_MAX) == (values * size >= uploads.JOIN_ON_LOOP_MAX)
    task = asyncio.ensure_future(upload.produce())
    await asyncio.sleep(0)  # the produce's first step runs, then this test again
    done = task.done()
    produced = await task
    assert produced == {upload.capture.name: b"".join(parts)}  # the same file either way
    assert upload.chain_state.sizes[upload.capture.name] == total
    return done


async def test_a_large_file_is_joined_off_the_loop() -> None:
    assert not await _first_step_done(3_000, 1_000)  # 3 MB: the step ended at the thread's join


async def test_a_small_file_is_joined_at_once() -> None:
    assert await _first_step_done(100, 100)
