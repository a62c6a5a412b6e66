"""Savepoints into an explicit target directory get a directory of their own, as Flink's.

Flink's rule (``AbstractFsCheckpointStorageAccess#initializeLocationForSavepoint`` /
``createSavepointLocation``): a savepoint triggered into a target directory is written to a new
``savepoint-<first 6 hex digits of the job id>-<12 random hex digits>`` directory inside it, and
that directory's path is what the trigger returns; so one target directory takes any number of
savepoints (``SavepointITCase`` triggers several into one ``savepointDir``). streamflow wrote a
savepoint into the named directory itself and refused a second one there ("not empty", only
after every task had snapshotted). A savepoint written the old way (``_metadata`` in the named
directory itself) still restores.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_checkpointing import wait_until

import streamflow as sf
from streamflow.checkpoint.storage import CheckpointStorageError, FileSystemCheckpointStorage
from streamflow.testing import faults


@pytest.fixture(autouse=True)
def _disarm() -> None:
    faults.clear()


class _Feed:
    """An unbounded source fed by the test, one record at a time."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()

    async def __call__(self) -> AsyncIterator[tuple[str, int]]:
        while True:
            yield await self.queue.get()


def _sums(env: sf.StreamExecutionEnvironment, source: sf.DataStream, out: list) -> None:
    source.key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(out.append)


async def _restored_sum(path: str) -> list:
    env = sf.StreamExecutionEnvironment()
    # a new source (the fed one's position is left unclaimed): the sum's state is what counts
    env.configure({"execution.savepoint.path": path, "execution.savepoint.ignore-unclaimed-state": True})
    out: list = []
    _sums(env, env.from_collection([("a", 100)]).uid("collection"), out)
    await (await env.execute_async("resumed")).get_job_execution_result()
    return out


async def test_two_savepoints_into_one_directory_each_restore_their_own_state(tmp_path: Path) -> None:
    """``SavepointITCase``'s savepoints into one ``savepointDir``: each goes into its own
    ``savepoint-<job>-<random>`` directory there, the trigger returns that directory, and each
    restores the state it was taken at (a:1, then a:3). Before: the second one failed "not
    empty". A copy of the first laid out the old way (its files in the named directory itself)
    restores too."""
    feed = _Feed()
    env = sf.StreamExecutionEnvironment()
    out: list = []
    _sums(env, env.from_async_iterable(feed).uid("src"), out)
    client = await env.execute_async("sums")
    target = tmp_path / "sps"
    feed.queue.put_nowait(("a", 1))
    await wait_until(lambda: len(out) == 1)
    first = await client.trigger_savepoint(str(target))
    feed.queue.put_nowait(("a", 2))
    await wait_until(lambda: len(out) == 2)
    second = await client.trigger_savepoint(str(target))
    await asyncio.wait_for(client.cancel(), 30)
    name = re.compile(rf"savepoint-{client.job_id[:6]}-[0-9a-f]{{12}}")
    assert first != second
    for path in (first, second):
        assert Path(path).parent == target and name.fullmatch(Path(path).name), path
        assert (Path(path) / "_metadata").is_file()
    assert await _restored_sum(first) == [("a", 101)]
    assert await _restored_sum(second) == [("a", 103)]
    legacy = tmp_path / "legacy"  # the old layout: _metadata in the named directory itself
    shutil.copytree(first, legacy)
    assert await _restored_sum(str(legacy)) == [("a", 101)]
    assert await _restored_sum(str(legacy / "_metadata")) == [("a", 101)]


async def test_a_failed_savepoint_leaves_no_directory_behind(tmp_path: Path) -> None:
    """Flink disposes a failed savepoint's location (``PendingCheckpoint#abort`` ->
    ``disposeOnFailure``): a write failing before ``_metadata`` removes the savepoint's new
    directory whole, so nothing half-written lies in the target directory; the job keeps
    running and the next savepoint there succeeds."""
    feed = _Feed()
    env = sf.StreamExecutionEnvironment()
    out: list = []
    _sums(env, env.from_async_iterable(feed).uid("src"), out)
    client = await env.execute_async("sums")
    feed.queue.put_nowait(("a", 1))
    await wait_until(lambda: len(out) == 1)
    target = tmp_path / "sps"
    target.mkdir()
    faults.inject("metadata")  # every entry written, then the failure
    with pytest.raises(RuntimeError, match="InjectedFault"):
        await client.trigger_savepoint(str(target))
    assert list(target.iterdir()) == []
    path = await client.trigger_savepoint(str(target))
    await asyncio.wait_for(client.cancel(), 30)
    assert [p.name for p in target.iterdir()] == [Path(path).name]
    assert await _restored_sum(path) == [("a", 101)]


def test_a_directory_holding_savepoints_is_not_one(tmp_path: Path) -> None:
    """Restoring from the target directory instead of the savepoint's own fails, as Flink's
    (no ``_metadata`` there), and the error names the savepoints it holds."""
    storage = FileSystemCheckpointStorage(tmp_path / "chk")
    target = tmp_path / "sps"
    storage.write_checkpoint(1, "job", {"e": b"1"}, savepoint_path=target / "savepoint-abcdef-0123456789ab")
    with pytest.raises(CheckpointStorageError, match="savepoint-abcdef-0123456789ab"):
        storage.load(target)
