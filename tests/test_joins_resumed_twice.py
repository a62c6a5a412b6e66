"""Interval and window joins resumed from a savepoint twice, on the heap and on RocksDB, at
changing parallelism: the buffers written by a resumed job must be in its savepoint (the
pattern of Flink's ``ResumeCheckpointManuallyITCase`` / ``RescalingITCase`` applied to the
joins of ``IntervalJoinITCase`` and ``CoGroupJoinITCase``; the job is
``test_joins_checkpointed``'s).

Theory of the check: every pair is emitted exactly once across the three jobs, whatever the
point of each savepoint (a savepoint is consistent wherever the source stands).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_checkpointing import Gate
from test_joins_checkpointed import EVENTS, _build, _expected

import streamflow as sf


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
async def test_joins_resumed_twice(tmp_path: Path, backend: str) -> None:
    out: list = []
    path: str | None = None
    for phase, (stop, parallelism) in enumerate([(21, 2), (41, 3), (len(EVENTS), 1)]):
        env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
        if backend == "rocksdb":
            env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
        if path is not None:
            env.configure({"execution.savepoint.path": path})
        gate = Gate(EVENTS, stop)
        _build(env, env.from_async_iterable(gate.__aiter__), out)
        client = await env.execute_async("joins")
        if stop == len(EVENTS):
            await client.get_job_execution_result()
            break
        await asyncio.sleep(0.3)  # the source at the gate (any point gives a consistent savepoint)
        path = await client.trigger_savepoint(str(tmp_path / f"sp{phase}"))
        await asyncio.wait_for(client.cancel(), 30)
    assert sorted(out) == _expected()
