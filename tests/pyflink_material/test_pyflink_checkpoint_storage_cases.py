"""The cases of Apache Flink's ``pyflink/datastream/tests/test_checkpoint_storage.py``
(apache/flink ``60c01d3``, the newest stored version) on streamflow: the same calls and
expected values. ``test_constant`` compares with Java's
``JobManagerCheckpointStorage.DEFAULT_MAX_STATE_SIZE``; the port with its value, 5 MiB.

The cases' URI ``file://var/checkpoints/`` names a host, ``var``: the storage objects keep
it as PyFlink's do, but a job refuses to checkpoint there, a documented difference
(``streamflow/checkpoint/storages.py``; Flink's local file system ignores the host);
``test_file_uri_with_a_host_is_refused_when_used`` (not Flink's) checks the error, and
``test_*_local_path`` (not Flink's) run the same calls with ``file:///`` URIs.
``test_jobmanager_storage_with_a_path_writes_checkpoints_there`` (not Flink's): with a
``checkpoint_path`` Flink persists each checkpoint there (the metadata, with this storage's
state inline); streamflow writes the job's checkpoints to that directory.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from streamflow.checkpoint.storage import FileSystemCheckpointStorage as Directory
from streamflow.datastream import (
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
    StreamExecutionEnvironment,
)


def test_constant() -> None:
    assert JobManagerCheckpointStorage.DEFAULT_MAX_STATE_SIZE == 5 * 1024 * 1024


def test_create_jobmanager_checkpoint_storage() -> None:
    assert JobManagerCheckpointStorage() is not None
    assert JobManagerCheckpointStorage("file://var/checkpoints/") is not None
    assert JobManagerCheckpointStorage("file://var/checkpoints/", 10000000) is not None


def test_get_max_state_size() -> None:
    checkpoint_storage = JobManagerCheckpointStorage()
    assert checkpoint_storage.get_max_state_size() == JobManagerCheckpointStorage.DEFAULT_MAX_STATE_SIZE
    checkpoint_storage = JobManagerCheckpointStorage(max_state_size=50000)
    assert checkpoint_storage.get_max_state_size() == 50000


def test_create_fs_checkpoint_storage() -> None:
    assert FileSystemCheckpointStorage("file://var/checkpoints/") is not None
    assert FileSystemCheckpointStorage("file://var/checkpoints/", 2048) is not None
    assert FileSystemCheckpointStorage("file://var/checkpoints/", 2048, 4096) is not None


def test_get_min_file_size_threshold() -> None:
    checkpoint_storage = FileSystemCheckpointStorage("file://var/checkpoints/")
    assert checkpoint_storage.get_min_file_size_threshold() == 20480
    checkpoint_storage = FileSystemCheckpointStorage(
        "file://var/checkpoints/", file_state_size_threshold=2048
    )
    assert checkpoint_storage.get_min_file_size_threshold() == 2048


def test_get_checkpoint_path() -> None:
    checkpoint_storage = FileSystemCheckpointStorage("file://var/checkpoints/")
    assert checkpoint_storage.get_checkpoint_path() == "file://var/checkpoints"


def test_create_jobmanager_checkpoint_storage_local_path(tmp_path: Path) -> None:
    storage = JobManagerCheckpointStorage(f"file://{tmp_path}/checkpoints/", 10000000)
    assert storage.get_checkpoint_path() == str(tmp_path / "checkpoints")
    assert storage.get_max_state_size() == 10000000
    assert JobManagerCheckpointStorage().get_checkpoint_path() is None


def test_fs_checkpoint_storage_local_path(tmp_path: Path) -> None:
    storage = FileSystemCheckpointStorage(f"file://{tmp_path}/checkpoints/", 2048, 4096)
    assert storage.get_checkpoint_path() == str(tmp_path / "checkpoints")
    assert storage.get_min_file_size_threshold() == 2048


def test_file_uri_with_a_host_is_refused_when_used() -> None:
    config = StreamExecutionEnvironment.get_execution_environment().get_checkpoint_config()
    for storage in (
        FileSystemCheckpointStorage("file://var/checkpoints/"),
        JobManagerCheckpointStorage("file://var/x"),
    ):
        with pytest.raises(ValueError, match=r"ignore the host 'var'.*write file:///var/"):
            config.set_checkpoint_storage(storage)
    assert config.get_checkpoint_storage_dir() is None  # nothing changed
    with pytest.raises(ValueError, match="ignore the host 'var'"):
        config.set_checkpoint_storage_dir("file://var/checkpoints")


async def _slow(record: Any) -> Any:
    await asyncio.sleep(0.002)
    return record


def test_jobmanager_storage_with_a_path_writes_checkpoints_there(tmp_path: Path) -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    env.enable_checkpointing(10)
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage(JobManagerCheckpointStorage(str(tmp_path)))
    assert config.get_checkpoint_storage_dir() == tmp_path
    assert config.get_checkpoint_storage().get_checkpoint_path() == str(tmp_path)
    env.from_collection(list(range(200))).uid("src").map(_slow).uid("slow").key_by(lambda v: v % 3).sum(
        0
    ).uid("sum").print()
    env.execute("jobmanager storage with a path")
    written = sorted(tmp_path.glob("chk-*"))
    assert written, "no checkpoint written to the JobManagerCheckpointStorage's path"
    storage = Directory(tmp_path)
    for directory in written:
        storage.load(directory).verify()
