"""Interval and window joins resumed from a savepoint twice, on the heap and on RocksDB, at
changing parallelism: the buffers written by a resumed job must be in its savepoint (the
pattern of Flink's ``ResumeCheckpointManuallyITCase`` / ``RescalingITCase`` applied to the
joins of ``IntervalJoinITCase`` and ``CoGroupJoinITCase``; the job is
``test_joins_checkpointed``'s).

Theory of the check: every pair is emitted exactly once across the three jobs. A savepoint is
consistent wherever the source stands, but the list sink is not transactional: a window that
fires after a savepoint fires again in the job restored from it (at-least-once, as Flink's
would). So each job takes its savepoint once the pairs its records make have all come out:
the interval join's on arrival, the window join's once the periodic watermark closes them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_checkpointing import Gate, wait_until
from test_joins_checkpointed import EVENTS, _build, _expected

import streamflow as sf


def _pairs_by(stop: int) -> int:
    """The pairs the first ``stop`` events make, once the watermark catches up with them: each
    R_i's interval pair with L_i (emitted when R_i arrives), and the window pairs of the 60 ms
    windows ending by the watermark (``max timestamp - 20 - 1``: the watermark operator has
    the source's parallelism, 1, as Flink's matches its input). A window fired then is whole:
    the events after are at most 7 older than the largest, past its end."""
    wm = max(e[2] for e in EVENTS[:stop]) - 21
    intervals = sum(1 for e in EVENTS[:stop] if e[0] == "R")
    windows = [p for p in _expected() if p[0] == "window" and (10 * p[1]) // 60 * 60 + 59 <= wm]
    return intervals + len(windows)


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
        pairs = _pairs_by(stop)
        await wait_until(lambda pairs=pairs: len(out) == pairs, timeout=20.0)
        path = await client.trigger_savepoint(str(tmp_path / f"sp{phase}"))
        await asyncio.wait_for(client.cancel(), 30)
    assert sorted(out) == _expected()
