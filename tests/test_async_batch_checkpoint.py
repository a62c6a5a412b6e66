"""An async batch function's inputs are part of the checkpoint (``runtime/async_batch.py`` on
``runtime/async_wait.py``'s queue): a restore re-issues the inputs not yet emitted, those
whose batch was called and those still gathering, in new batches, and the output is exactly
once."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from test_async_io_checkpoint import run_failing_once, throttled_job

from streamflow.common import Time, Types
from streamflow.datastream import AsyncBatchFunction, AsyncDataStream


class SlowBatchLookup(AsyncBatchFunction):
    """A batch holding a multiple of 25 takes 0.2 s (ten checkpoint intervals; was 0.4 s), others 1 ms."""

    async def async_invoke_batch(self, inputs: list[int]) -> list[int]:
        await asyncio.sleep(0.2 if any(v % 25 == 0 for v in inputs) else 0.001)
        return [v * 10 for v in inputs]


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
def test_restore_reissues_batched_inputs_exactly_once(
    tmp_path: Path, ordered: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="streamflow.runtime.async_wait")
    env, source = throttled_job(tmp_path)
    wait = AsyncDataStream.ordered_wait_batch if ordered else AsyncDataStream.unordered_wait_batch
    results = wait(
        source,
        SlowBatchLookup(),
        Time.seconds(30),
        batch_size=5,
        batch_timeout=Time.milliseconds(10),
        capacity=20,
        output_type=Types.INT(),
    ).uid("lookup")
    run_failing_once(env, results, tmp_path)
    assert [r for r in caplog.records if "re-issuing" in r.getMessage()]  # inputs were in flight
