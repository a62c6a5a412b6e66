"""A snapshot child's file reaches the checkpoint storage with the size and sha256 the child
computed as it wrote it (``shared_files.HashedFile``): the storage lists that digest without
reading the file again and checks only the size. The digest describes the file as written, so
a file damaged afterwards (on disk before the storage linked it, or in the checkpoint later)
still fails its verification at restore; a truncated or missing one fails the write."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import orjson
import pytest

from streamflow.checkpoint.shared_files import HashedFile
from streamflow.checkpoint.storage import (
    METADATA_FILE,
    CheckpointStorageError,
    CorruptCheckpointError,
    FileSystemCheckpointStorage,
)
from streamflow.state import incremental, snapshot_process
from streamflow.state.codec import MsgpackCodec
from streamflow.state.key_groups import key_group_range
from streamflow.state.keyed import IncrementalSettings, KeyedStateBackend
from streamflow.testing import ManualClock

WRITTEN = b"the frames as the child wrote them"


def _storage(tmp_path: Path) -> FileSystemCheckpointStorage:
    return FileSystemCheckpointStorage(tmp_path / "chk", clock=ManualClock(1234))


def _child_file(tmp_path: Path) -> tuple[Path, HashedFile]:
    path = tmp_path / "staged"
    path.write_bytes(WRITTEN)
    return path, HashedFile(path, len(WRITTEN), hashlib.sha256(WRITTEN).hexdigest())


def test_the_writers_digest_is_listed_and_damage_after_the_write_is_found_at_restore(tmp_path: Path) -> None:
    path, hashed = _child_file(tmp_path)
    path.write_bytes(WRITTEN.replace(b"frames", b"fRames"))  # damaged since the child wrote it
    storage = _storage(tmp_path)
    chk = storage.write_checkpoint(1, "job", {"e": b"x"}, shared={"d1": hashed})
    meta = orjson.loads((chk / METADATA_FILE).read_bytes())
    # the digest of what was written, not of what the disk holds now (reading it again would
    # have listed the damaged content as good)
    assert meta["shared"] == [{"name": "d1", "size": len(WRITTEN), "sha256": hashed.sha256}]
    handle = storage.restore_point("job")
    assert handle is not None
    with pytest.raises(CorruptCheckpointError, match="sha256 does not match"):
        handle.read_shared("d1")
    with pytest.raises(CorruptCheckpointError):
        handle.verify()


def test_an_intact_hashed_file_is_linked_and_restores(tmp_path: Path) -> None:
    path, hashed = _child_file(tmp_path)
    storage = _storage(tmp_path)
    storage.write_checkpoint(1, "job", {"e": b"x"}, shared={"d1": hashed})
    handle = storage.restore_point("job")
    assert handle is not None and handle.read_shared("d1") == WRITTEN
    assert handle.shared_path("d1").stat().st_ino == path.stat().st_ino  # hard-linked
    handle.verify()


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_a_truncated_or_missing_hashed_file_fails_the_write(tmp_path: Path, damage: str) -> None:
    path, hashed = _child_file(tmp_path)
    if damage == "truncated":
        path.write_bytes(WRITTEN[:-1])
    else:
        path.unlink()
    storage = _storage(tmp_path)
    match = "its writer wrote 34" if damage == "truncated" else "cannot read shared file source"
    with pytest.raises(CheckpointStorageError, match=match):
        storage.write_checkpoint(1, "job", {"e": b"x"}, shared={"d1": hashed})
    assert storage.restore_point("job") is None
    shared = storage.shared_dir("job")
    assert not shared.exists() or list(shared.iterdir()) == []


@pytest.mark.parametrize(
    "size, digest", [(-1, "0" * 64), (1.0, "0" * 64), (1, "0" * 63), (1, "G" * 64), (1, None)]
)
def test_a_hashed_file_needs_a_size_and_a_digest(size: object, digest: object) -> None:
    with pytest.raises(ValueError, match="needs a size and a sha256"):
        HashedFile(Path("x"), size, digest)  # type: ignore[arg-type]


@pytest.mark.skipif(snapshot_process.available() is not None, reason="no fork here")
async def test_a_childs_upload_hands_the_storage_the_digest_of_its_file(tmp_path: Path) -> None:
    settings = IncrementalSettings(
        "op#0", key_group_range(0, 128, 1), MsgpackCodec(), 8, snapshot_process="on",
        snapshot_process_min_entries=1,
    )  # fmt: skip
    backend = KeyedStateBackend(128, settings)
    table, _ = backend.tracked_table("reduce", "value")
    for i in range(1_000):
        table[f"k{i}"] = (f"k{i}", i)
    upload = await backend.capture(1, False)
    assert isinstance(upload, incremental.HeapUpload) and upload.capture.child is not None
    backend.snapshot()
    (name, hashed), *_ = (await upload.produce()).items()
    assert isinstance(hashed, HashedFile)
    data = hashed.path.read_bytes()
    assert (hashed.size, hashed.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    storage = _storage(tmp_path)
    storage.write_checkpoint(1, "job", {"e": b"x"}, shared={name: hashed})
    handle = storage.restore_point("job")
    assert handle is not None and handle.read_shared(name) == data


def test_without_storage_a_file_that_cannot_be_linked_is_copied_and_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    import streamflow.checkpoint.shared_files as shared_module
    from streamflow.checkpoint.shared_files import MemorySharedFiles

    _path, hashed = _child_file(tmp_path)

    def no_link(src: object, dst: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(shared_module.os, "link", no_link)
    caplog.set_level(logging.INFO)
    kept = MemorySharedFiles()
    kept.commit(kept.add({"d1": hashed}), [])  # as the writer does
    assert kept.path("d1").read_bytes() == WRITTEN
    assert "cannot hard-link" in caplog.text and "cross-device" in caplog.text


def test_without_storage_the_files_of_a_failed_write_go_at_the_next_commit() -> None:
    """A failover while a checkpoint's files are added leaves them in no kept checkpoint (the
    writer never commits them); the next commit returns them with the stale ones, so a job that
    fails over again and again does not pile them up until it ends."""
    from streamflow.checkpoint.shared_files import MemorySharedFiles

    kept = MemorySharedFiles()

    def write(shared: dict[str, bytes], references: list[str], committed: bool = True) -> list[str]:
        added = kept.add(shared)
        stale = kept.commit(added, references) if committed else []
        kept.remove(stale)
        return sorted(p.name for p in stale)

    assert write({"a": b"1", "b": b"2"}, []) == []
    assert write({"c": b"3", "d": b"4"}, ["a", "b"], committed=False) == []  # failed mid-write
    assert kept.directory is not None
    assert sorted(os.listdir(kept.directory)) == ["a", "b", "c", "d"]
    # the next checkpoint refers to a, adds e (and d again, as a content-named file can be)
    assert write({"d": b"4", "e": b"5"}, ["a"]) == ["b", "c"]
    assert sorted(os.listdir(kept.directory)) == ["a", "d", "e"]
    assert [kept.path(n).read_bytes() for n in ("a", "d", "e")] == [b"1", b"4", b"5"]
