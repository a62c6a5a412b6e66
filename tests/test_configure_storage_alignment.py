"""``configure()``: Flink's ``execution.checkpointing.storage: jobmanager`` with a checkpoint
directory, ``pipeline.watermark-alignment.allow-unaligned-source-splits``, and the REST
server's label of the checkpoint storage."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from streamflow.checkpoint.storage import FileSystemCheckpointStorage as Directory
from streamflow.datastream import (
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
    StreamExecutionEnvironment,
)


async def _slow(record: Any) -> Any:
    await asyncio.sleep(0.002)
    return record


@pytest.mark.parametrize("dir_first", [True, False])
def test_jobmanager_storage_keeps_the_checkpoint_dir_and_writes_checkpoints_there(
    tmp_path: Path, dir_first: bool
) -> None:
    keys = [("execution.checkpointing.dir", str(tmp_path)), ("execution.checkpointing.storage", "jobmanager")]
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    env.configure(dict(keys if dir_first else keys[::-1]))
    env.enable_checkpointing(10)
    config = env.get_checkpoint_config()
    assert config.get_checkpoint_storage_dir() == tmp_path
    storage = config.get_checkpoint_storage()
    assert isinstance(storage, JobManagerCheckpointStorage)
    assert storage.get_checkpoint_path() == str(tmp_path)
    env.from_collection(list(range(100))).uid("src").map(_slow).uid("slow").print()
    env.execute("jobmanager storage configured with a directory")
    written = sorted(tmp_path.glob("chk-*"))
    assert written, "no checkpoint written to execution.checkpointing.dir"
    for directory in written:
        Directory(tmp_path).load(directory).verify()


def test_jobmanager_storage_keeps_a_directory_configured_before() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.configure({"execution.checkpointing.dir": "/tmp/sf-hunt/before"})
    env.configure({"execution.checkpointing.storage": "jobmanager"})
    assert env.get_checkpoint_config().get_checkpoint_storage().get_checkpoint_path() == "/tmp/sf-hunt/before"


def test_jobmanager_storage_without_a_directory_is_in_memory() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.configure({"execution.checkpointing.storage": "jobmanager"})
    config = env.get_checkpoint_config()
    assert config.get_checkpoint_storage_dir() is None
    assert config.get_checkpoint_storage().get_checkpoint_path() is None


@pytest.mark.parametrize("value", [True, False, "true", "FALSE"])
def test_allow_unaligned_source_splits_is_accepted_and_logged(
    value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with caplog.at_level(logging.INFO, logger="streamflow"):
        env.configure({"pipeline.watermark-alignment.allow-unaligned-source-splits": value})
    assert "allow-unaligned-source-splits" in caplog.text and "changes nothing" in caplog.text


def test_allow_unaligned_source_splits_refuses_a_value_that_is_not_a_boolean() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ValueError, match="Unrecognized option for boolean: yes"):
        env.configure({"pipeline.watermark-alignment.allow-unaligned-source-splits": "yes"})


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
