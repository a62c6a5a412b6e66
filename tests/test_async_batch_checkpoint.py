"""An async batch function's inputs are part of the checkpoint (``runtime/async_batch.py`` on
``runtime/async_wait.py``'s queue): a restore re-issues the inputs not yet emitted, those
whose batch was called and those still gathering, in new batches, and the output is exactly
once."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from pathlib import Path

import pytest
from test_async_io_checkpoint import FailOnceAfterCheckpoint, _committed, _throttle

import streamflow as sf
from streamflow.common import Time, Types
from streamflow.datastream import AsyncBatchFunction, AsyncDataStream


class SlowBatchLookup(AsyncBatchFunction):
    """A batch holding a multiple of 25 takes 0.4 s (twenty checkpoint intervals), others 1 ms."""

    async def async_invoke_batch(self, inputs: list[int]) -> list[int]:
        await asyncio.sleep(0.4 if any(v % 25 == 0 for v in inputs) else 0.001)
        return [v * 10 for v in inputs]


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
def test_restore_reissues_batched_inputs_exactly_once(
    tmp_path: Path, ordered: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="streamflow.runtime.async_wait")
    chk, out = tmp_path / "chk", tmp_path / "out"
    env = sf.StreamExecutionEnvironment().set_parallelism(1).set_batch_size(8)
    env.enable_checkpointing(20)
    env.get_checkpoint_config().set_checkpoint_storage_dir(chk)
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(3, 0))
    source = env.from_collection(list(range(300))).uid("src").map(_throttle, concurrency=1).uid("throttle")
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
    results.map(FailOnceAfterCheckpoint(str(tmp_path), 1500, chk)).uid("fail").sink_to(
        sf.FileSink.for_row_format(str(out), sf.Encoder.simple_string_encoder()).build()
    ).uid("sink")
    result = env.execute("async-batch-restore")
    assert str(tmp_path) in FailOnceAfterCheckpoint.failed  # the job failed once and was restored
    assert Counter(_committed(out)) == Counter(str(v * 10) for v in range(300))  # exactly once
    assert result.metrics["checkpoints.numCompleted"] >= 2
    assert [r for r in caplog.records if "re-issuing" in r.getMessage()]  # inputs were in flight
