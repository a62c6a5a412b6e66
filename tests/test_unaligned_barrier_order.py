"""End to end: unaligned barriers of successive checkpoints queued in one channel keep their order.

Under backpressure a slow task leaves several unaligned barriers queued in its input channel at
once (max concurrent checkpoints > 1). Each overtakes the queued data but never the barrier of an
earlier checkpoint (Flink's PrioritizedDeque), so every checkpoint completes, in order. On the old
main barrier n+1 went to the head, ahead of barrier n: the task saw n+1 first, n was never
acknowledged and was subsumed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import streamflow as sf
from streamflow.runtime.channel import Channel
from streamflow.runtime.events import CheckpointBarrier
from streamflow.testing import CheckpointRecorder

FIRST = 4  # the first checkpoints checked (later ones may meet the end of the job)


async def slow(record: int) -> int:
    await asyncio.sleep(0.01)  # a batch of 4 holds the task for several checkpoint intervals
    return record


def test_queued_unaligned_barriers_of_successive_checkpoints_complete_in_order(
    tmp_path: Path, monkeypatch: Any
) -> None:
    queued_behind_a_barrier = [0]
    put_priority = Channel.put_priority

    def spy(self: Channel, event: Any) -> Any:
        if any(type(item) is CheckpointBarrier for item in self.snapshot()):
            queued_behind_a_barrier[0] += 1
        return put_priority(self, event)

    monkeypatch.setattr(Channel, "put_priority", spy)
    env = sf.StreamExecutionEnvironment().set_parallelism(1).set_batch_size(4).set_channel_capacity(8)
    env.enable_checkpointing(10)
    (
        env.get_checkpoint_config()
        .set_checkpoint_storage_dir(tmp_path / "chk")
        .enable_unaligned_checkpoints()
        .set_max_concurrent_checkpoints(4)
        .set_max_retained_checkpoints(100)
    )
    recorder = CheckpointRecorder()
    data = list(range(150))
    env.from_collection(data).map(slow, concurrency=1).disable_chaining().sink_to(recorder).uid("rec")
    result = env.execute("unaligned-order")

    assert [v for kind, v in recorder.events if kind == "record"] == data
    assert queued_behind_a_barrier[0] > 0, "no barrier was ever queued behind another"
    completed = recorder.checkpoints("complete")
    assert completed[:FIRST] == list(range(1, FIRST + 1)), completed
    assert completed == sorted(completed)
    aborted = [cid for cid in recorder.checkpoints("aborted") if cid <= FIRST]
    assert aborted == [], recorder.checkpoints("aborted")
    snapshots = recorder.checkpoints("snapshot")
    assert snapshots[:FIRST] == list(range(1, FIRST + 1)), snapshots
    assert result.metrics["checkpoints.numCompleted"] >= FIRST
