"""``configure()``: Flink's ``execution.checkpointing.storage: jobmanager`` with a checkpoint
directory, ``pipeline.watermark-alignment.allow-unaligned-source-splits``, and the REST
server's label of the checkpoint storage."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from streamflow.datastream import (
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
    StreamExecutionEnvironment,
)


async def _slow(record: Any) -> Any:
    await asyncio.sleep(0.002)
    return record


@pytest.mark.parametrize(
    ("storage", "label"),
    [
        (None, "JobManagerCheckpointStorage"),
        ("jobmanager-path", "JobManagerCheckpointStorage"),
        ("filesystem", "FileSystemCheckpointStorage"),
    ],
)
async def test_rest_names_the_checkpoint_storage_class(
    tmp_path: Path, storage: str | None, label: str
) -> None:
    env = StreamExecutionEnvironment()
    env.configure({"rest.port": 0})
    env.enable_checkpointing(60_000)
    if storage == "jobmanager-path":
        env.get_checkpoint_config().set_checkpoint_storage(JobManagerCheckpointStorage(str(tmp_path)))
    elif storage == "filesystem":
        env.get_checkpoint_config().set_checkpoint_storage(FileSystemCheckpointStorage(str(tmp_path)))
    env.from_collection(lambda: iter(range(10**9))).add_sink(lambda x: None)
    client = await env.execute_async("labelled")
    try:
        async with aiohttp.ClientSession() as session:
            url = f"{client.rest.url}/jobs/{client.job_id}/checkpoints/config"
            async with session.get(url) as response:
                body = await response.json()
        assert body["checkpoint_storage"] == label
    finally:
        await client.cancel()
        await client.rest.wait_stopped()
