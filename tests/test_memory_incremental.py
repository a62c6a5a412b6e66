"""Incremental heap checkpoints without a checkpoint storage directory (the in-memory
``JobManagerCheckpointStorage``, a plain ``env.enable_checkpointing(...)``): the chain's files
are kept in memory with the latest checkpoint (``MemorySharedFiles``), a failover restores the
keyed state exactly from a base and its deltas, and a savepoint copies the chain in, so a new
job restores from it at another parallelism."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import streamflow as sf
from tests.test_incremental_patch import wait_until

DATA = [(f"k{i % 400}", i % 7, i) for i in range(600)]
STOPS = [150, 300, 450]  # the source waits here until the test took a checkpoint


def expected_sums() -> dict[str, int]:
    sums: dict[str, int] = {}
    for key, value, _i in DATA:
        sums[key] = sums.get(key, 0) + value
    return sums


class GatedJob:
    """The keyed sum over DATA whose source waits at each stop until released, and a map that
    fails once at record 500 once ``failing``."""

    def __init__(self, parallelism: int) -> None:
        self.released = asyncio.Event()
        self.open = False  # no more waits (a restarted source passes its stops)
        self.failing = False
        self.failed = False
        self.out: list[Any] = []
        self.env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
        self.env.enable_checkpointing(3_600_000)  # only the checkpoints the test triggers
        self.env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(1, 0))
        (
            self.env.from_async_iterable(self.source).uid("src")
            .map(self.fail).uid("fail").set_parallelism(1)
            .key_by(lambda r: r[0]).sum(1).uid("sum")
            .add_sink(self.out.append)
        )  # fmt: skip

    async def source(self) -> Any:
        for i, r in enumerate(DATA):
            if i in STOPS and not self.open:
                await self.released.wait()
                self.released = asyncio.Event()
            yield r

    def fail(self, r: Any) -> Any:
        if self.failing and not self.failed and r[2] == 500:
            self.failed = True
            raise RuntimeError("injected failure")
        return r

    async def checkpoints_at(self, client: Any, stops: list[int]) -> None:
        for stop in stops:
            await wait_until(lambda stop=stop: len(self.out) == stop)  # type: ignore[misc]
            await client.trigger_checkpoint()
            if stop != STOPS[-1]:
                self.released.set()

    def last(self) -> dict[str, int]:
        return {key: total for key, total, _i in self.out}


async def test_a_failover_restores_a_chain_kept_in_memory_exactly() -> None:
    job = GatedJob(parallelism=2)
    client = await job.env.execute_async("memory-chain")
    await job.checkpoints_at(client, STOPS)
    writer = client.execution.driver.writer
    assert writer.storage is None
    kept = list(writer.memory_shared._files)
    # two subtasks, each a base and two deltas: a chain, not full snapshots in the entries
    assert len(kept) == 6, kept
    assert all(writer.memory_shared.path(name).is_file() for name in kept)
    job.failing = job.open = True
    job.released.set()
    result = await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert job.failed and result.metrics["job.numRestarts"] == 1
    assert result.metrics["job.restoredCheckpointId"] == 3
    assert job.last() == expected_sums()  # no delta lost or applied twice


async def test_a_savepoint_without_storage_copies_the_chain_kept_in_memory(tmp_path: Path) -> None:
    job = GatedJob(parallelism=2)
    client = await job.env.execute_async("memory-chain")
    await job.checkpoints_at(client, STOPS[:2])
    await wait_until(lambda: len(job.out) == STOPS[2])
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)
    assert (Path(path) / "_metadata").exists()
    first = job.last()

    env = sf.StreamExecutionEnvironment().set_parallelism(3)  # another parallelism: by key group
    env.configure({"execution.savepoint.path": path})
    out: list[Any] = []
    env.from_collection(DATA).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(out.append)
    await asyncio.wait_for((await env.execute_async("restored")).get_job_execution_result(), 60)
    assert len(out) == len(DATA) - STOPS[2]  # the source resumed where the savepoint was taken
    assert {**first, **{key: total for key, total, _i in out}} == expected_sums()


async def test_a_failover_while_a_write_adds_its_files_keeps_the_previous_checkpoint_whole() -> None:
    """The kept checkpoint and its files change together: a write cancelled while it adds its
    files (the job failed meanwhile) leaves the previous checkpoint kept, with every file it
    needs, even when the new one would drop them (a new base)."""
    import threading

    from streamflow.checkpoint.config import CheckpointConfig
    from streamflow.checkpoint.writer import CheckpointWriter

    writer = CheckpointWriter("job", CheckpointConfig(), None, lambda _task: 1)

    def state(shared: dict[str, bytes]) -> dict[str, Any]:
        return {"ops": b"", "in": {}, "out": {}, "shared": shared, "refs": []}

    await writer.write(1, {"t": state({"base-1": b"one"})}, None, None)
    gate, adding = threading.Event(), threading.Event()
    add = writer.memory_shared.add

    def slow_add(shared: dict[str, Any]) -> Any:
        adding.set()
        gate.wait(10)
        return add(shared)

    writer.memory_shared.add = slow_add  # type: ignore[method-assign]
    write = asyncio.ensure_future(writer.write(2, {"t": state({"base-2": b"two"})}, None, None))
    await asyncio.to_thread(adding.wait, 10)
    write.cancel()  # the job failed while the files were added
    gate.set()
    try:
        await write
    except asyncio.CancelledError:
        pass
    assert writer.latest_in_memory is not None and writer.latest_in_memory[0] == 1
    assert writer.memory_shared.path("base-1").read_bytes() == b"one"  # what a failover reads
    await writer.write(3, {"t": state({"base-3": b"three"})}, None, None)
    assert writer.latest_in_memory[0] == 3 and not (writer.memory_shared.directory / "base-1").exists()
