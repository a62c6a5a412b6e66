"""End to end: at-least-once mode tracks several checkpoints at once (Flink's CheckpointBarrierTracker).

Two inputs with different latencies feed one task: barriers of the next checkpoints arrive on
the fast input while the slow input still owes the earlier ones. The tracker keeps them all
pending and completes each once its last barrier is in, in order; old main tracked one
checkpoint at a time, so every early barrier of checkpoint n+1 aborted n (subsumed).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import streamflow as sf
from streamflow.testing import CheckpointRecorder

FIRST = 4  # the first checkpoints checked (later ones may meet the end of the job)


async def slow(record: int) -> int:
    await asyncio.sleep(0.002)
    return record


def test_checkpoints_complete_in_order_when_one_input_lags(tmp_path: Path) -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(1).set_batch_size(4).set_channel_capacity(16)
    env.enable_checkpointing(10)
    (
        env.get_checkpoint_config()
        .set_checkpointing_mode(sf.CheckpointingMode.AT_LEAST_ONCE)
        .set_checkpoint_storage_dir(tmp_path / "chk")
        .set_max_concurrent_checkpoints(8)
        .set_max_retained_checkpoints(100)
    )
    recorder = CheckpointRecorder()
    fast = env.from_collection(range(100_000, 130_000)).uid("fast")
    lagging = env.from_collection(range(300)).uid("slow-src").map(slow, concurrency=1).uid("slow")
    lagging.disable_chaining()
    fast.union(lagging).map(lambda x: x).uid("join").disable_chaining().sink_to(recorder).uid("rec")
    result = env.execute("alo-tracker")

    records = [v for kind, v in recorder.events if kind == "record"]
    assert sorted(records) == list(range(300)) + list(range(100_000, 130_000))
    completed = recorder.checkpoints("complete")
    assert completed[:FIRST] == list(range(1, FIRST + 1)), (completed, recorder.checkpoints("aborted"))
    assert [cid for cid in recorder.checkpoints("aborted") if cid <= FIRST] == []
    assert result.metrics["checkpoints.numCompleted"] >= FIRST
