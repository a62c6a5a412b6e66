"""Shared files in checkpoint storage: writing, reading, savepoints, and retention by reference
counting, including crashes between the steps of a write or of retention."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

import streamflow.checkpoint.shared_files as shared_module
from streamflow.checkpoint.shared_files import job_key
from streamflow.checkpoint.storage import (
    METADATA_FILE,
    CheckpointStorageError,
    CorruptCheckpointError,
    DamagedCheckpointError,
    FileSystemCheckpointStorage,
)
from streamflow.runtime.events import CheckpointType
from streamflow.testing import ManualClock


def make(tmp_path: Path, retain: int = 3) -> FileSystemCheckpointStorage:
    return FileSystemCheckpointStorage(tmp_path / "chk", retain=retain, clock=ManualClock(1234))


def shared_names(storage: FileSystemCheckpointStorage, job: str = "job") -> list[str]:
    d = storage.shared_dir(job)
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def content(name: str) -> bytes:
    return f"content of {name}".encode()


def write(
    storage: FileSystemCheckpointStorage, cid: int, new: list[str], refs: list[str], job: str = "job"
) -> Path:
    return storage.write_checkpoint(
        cid, job, {"e": f"{cid}".encode()}, shared={n: content(n) for n in new}, references=refs
    )


# ---------------------------------------------------------------- writing and reading


def test_shared_bytes_and_paths_are_written_listed_and_read(tmp_path: Path) -> None:
    storage = make(tmp_path)
    source = tmp_path / "local.sst"
    source.write_bytes(b"immutable sst")
    path = storage.write_checkpoint(1, "job", {"e": b"x"}, shared={"a": b"delta a", "sst-1": source})
    meta = orjson.loads((path / METADATA_FILE).read_bytes())
    assert meta["format_version"] == 2
    assert meta["shared"] == [
        {"name": "a", "size": 7, "sha256": hashlib.sha256(b"delta a").hexdigest()},
        {"name": "sst-1", "size": 13, "sha256": hashlib.sha256(b"immutable sst").hexdigest()},
    ]
    handle = storage.restore_point("job")
    assert handle is not None and handle.shared == ("a", "sst-1")
    assert handle.read_shared("a") == b"delta a"
    linked = handle.shared_path("sst-1")
    assert linked == tmp_path / "chk" / "shared" / job_key("job") / "sst-1"
    assert linked.read_bytes() == b"immutable sst"
    assert os.stat(linked).st_ino == os.stat(source).st_ino  # hard-linked, not copied
    handle.verify()
    with pytest.raises(CheckpointStorageError, match="no shared file 'nope'"):
        handle.read_shared("nope")


def test_a_checkpoint_without_shared_files_keeps_format_1(tmp_path: Path) -> None:
    storage = make(tmp_path)
    path = storage.write_checkpoint(1, "job", {"e": b"x"}, shared={}, references=())
    meta = orjson.loads((path / METADATA_FILE).read_bytes())
    assert meta["format_version"] == 1 and "shared" not in meta
    assert not (storage.directory / "shared").exists()


def test_link_failure_falls_back_to_a_logged_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    storage = make(tmp_path)
    source = tmp_path / "local.sst"
    source.write_bytes(b"sst")

    def no_link(src: Any, dst: Any) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(shared_module.os, "link", no_link)
    caplog.set_level(logging.INFO)
    storage.write_checkpoint(1, "job", {}, shared={"sst": source})
    handle = storage.restore_point("job")
    assert handle is not None and handle.read_shared("sst") == b"sst"
    assert os.stat(handle.shared_path("sst")).st_ino != os.stat(source).st_ino
    assert "cannot hard-link" in caplog.text and "cross-device" in caplog.text


def test_unknown_reference_fails_and_leaves_nothing(tmp_path: Path) -> None:
    storage = make(tmp_path)
    write(storage, 1, ["b1"], [])
    with pytest.raises(CheckpointStorageError, match="nope is referenced but no complete checkpoint"):
        write(storage, 2, ["d2"], ["nope"])
    assert not (storage.directory / "chk-2").exists()
    assert shared_names(storage) == ["b1"]  # d2, written before the failure, is removed


def test_reference_to_a_missing_file_fails(tmp_path: Path) -> None:
    storage = make(tmp_path)
    write(storage, 1, ["b1"], [])
    (storage.shared_dir("job") / "b1").unlink()
    with pytest.raises(CheckpointStorageError, match="missing"):
        write(storage, 2, [], ["b1"])


def test_new_file_under_a_listed_name_must_have_the_same_content(tmp_path: Path) -> None:
    storage = make(tmp_path)
    write(storage, 1, ["b1"], [])
    storage.write_checkpoint(2, "job", {}, shared={"b1": content("b1")})  # the same file: fine
    with pytest.raises(CheckpointStorageError, match="other content"):
        storage.write_checkpoint(3, "job", {}, shared={"b1": b"something else"})
    handle = storage.restore_point("job")
    assert handle is not None and handle.checkpoint_id == 2 and handle.read_shared("b1") == content("b1")


@pytest.mark.parametrize("name", ["", ".hidden", "_meta", "a/b", "..", "x" * 201])
def test_invalid_shared_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="shared file name"):
        make(tmp_path).write_checkpoint(1, "job", {}, shared={name: b"x"})


def test_stopped_write_removes_its_shared_files(tmp_path: Path) -> None:
    storage = make(tmp_path)
    write(storage, 1, ["b1"], [])
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 2  # after the first two shared files

    with pytest.raises(CheckpointStorageError, match="stopped"):
        storage.write_checkpoint(2, "job", {"e": b"x"}, shared={n: b"x" for n in "pqr"}, should_stop=stop)
    assert shared_names(storage) == ["b1"]
    assert not (storage.directory / "chk-2").exists()


# ---------------------------------------------------------------- damage


def test_missing_shared_file_makes_the_latest_checkpoint_damaged(tmp_path: Path) -> None:
    storage = make(tmp_path, retain=5)
    write(storage, 1, ["b1"], [])
    write(storage, 2, ["b2"], [])  # a new base: 1 and 2 share nothing
    write(storage, 3, ["d3"], ["b2"])
    (storage.shared_dir("job") / "b2").unlink()
    with pytest.raises(DamagedCheckpointError, match="b2 is missing") as info:
        storage.restore_point("job")
    assert "chk-3" in str(info.value)
    # the explicit fallback skips every checkpoint that needs the lost file
    handle = storage.restore_point("job", fallback=True)
    assert handle is not None and handle.checkpoint_id == 1


def test_truncated_shared_file_is_damage_and_altered_content_is_corruption(tmp_path: Path) -> None:
    storage = make(tmp_path)
    write(storage, 1, ["b1"], [])
    file = storage.shared_dir("job") / "b1"
    file.write_bytes(content("b1")[:-1])
    with pytest.raises(DamagedCheckpointError, match="bytes, its metadata says"):
        storage.restore_point("job")
    file.write_bytes(content("b1")[:-1] + b"?")  # the same size: found when read
    handle = storage.restore_point("job")
    assert handle is not None
    with pytest.raises(CorruptCheckpointError, match="sha256") as info:
        handle.read_shared("b1")
    assert str(file) in str(info.value)
    with pytest.raises(CorruptCheckpointError):
        handle.shared_path("b1")
    with pytest.raises(CorruptCheckpointError):
        handle.verify()


# ---------------------------------------------------------------- savepoints


def test_savepoint_is_self_contained(tmp_path: Path) -> None:
    storage = make(tmp_path, retain=1)
    write(storage, 1, ["b1"], [])
    source = tmp_path / "local.sst"
    source.write_bytes(b"sst")
    target = tmp_path / "sp"
    storage.write_checkpoint(
        2, "job", {"e": b"sp"}, savepoint_path=target, shared={"d2": b"d2", "sst": source}, references=["b1"]
    )
    assert shared_names(storage) == ["b1"]  # a savepoint adds nothing to the job's shared files
    write(storage, 3, ["b3"], [])  # retention drops chk-1 and b1
    assert shared_names(storage) == ["b3"]
    handle = storage.load(target)
    assert handle.kind is CheckpointType.SAVEPOINT and handle.shared == ("d2", "sst", "b1")
    assert handle.shared_dir == target / "shared"
    handle.verify()
    assert handle.read_shared("b1") == content("b1")
    assert handle.read_shared("sst") == b"sst"


def test_savepoint_copy_of_a_corrupt_reference_fails(tmp_path: Path) -> None:
    storage = make(tmp_path)
    write(storage, 1, ["b1"], [])
    (storage.shared_dir("job") / "b1").write_bytes(content("b1")[:-1] + b"?")
    with pytest.raises(CorruptCheckpointError, match="sha256"):
        storage.write_checkpoint(2, "job", {}, savepoint_path=tmp_path / "sp", references=["b1"])
    assert not (tmp_path / "sp").exists()  # the directory the write created is removed whole


# ---------------------------------------------------------------- retention: reference counting

# (checkpoint id, new shared files, referenced ones) -> shared files left after its retention
CHAIN_RETAIN_2: list[tuple[int, list[str], list[str], list[str]]] = [
    (1, ["b1"], [], ["b1"]),
    (2, ["d2"], ["b1"], ["b1", "d2"]),
    (3, ["d3"], ["b1", "d2"], ["b1", "d2", "d3"]),
    (4, ["b4"], [], ["b1", "b4", "d2", "d3"]),  # chk-3 (and its chain) is still retained
    (5, ["d5"], ["b4"], ["b4", "d5"]),  # chk-3 gone: nothing lists b1, d2, d3 any more
    (6, [], ["b4", "d5"], ["b4", "d5"]),  # nothing changed: references only
    (7, ["b7"], [], ["b4", "b7", "d5"]),
    (8, ["b8"], [], ["b7", "b8"]),
]


def test_retention_deletes_what_no_retained_checkpoint_lists(tmp_path: Path) -> None:
    storage = make(tmp_path, retain=2)
    for cid, new, refs, left in CHAIN_RETAIN_2:
        write(storage, cid, new, refs)
        assert shared_names(storage) == left, f"after checkpoint {cid}"
        for handle in storage.complete_checkpoints("job"):
            handle.verify()  # removing an old checkpoint never breaks a newer one


def test_retention_of_one_job_leaves_the_shared_files_of_others(tmp_path: Path) -> None:
    storage = make(tmp_path, retain=1)
    write(storage, 1, ["x"], [], job="other")
    write(storage, 2, ["b2"], [], job="job")
    write(storage, 3, ["b3"], [], job="job")
    assert shared_names(storage, "other") == ["x"]
    assert shared_names(storage, "job") == ["b3"]


def _crash_after_shared_files(storage: FileSystemCheckpointStorage) -> None:
    """The process died after writing shared files (and a temporary file), before any metadata."""
    d = storage.shared_dir("job")
    (d / "orphan").write_bytes(b"never listed")
    (d / ".orphan2.abc.tmp").write_bytes(b"half")


def _crash_after_metadata_deletion(storage: FileSystemCheckpointStorage) -> None:
    """Retention died after deleting chk-2's metadata, before its directory and shared files."""
    (storage.directory / "chk-2" / METADATA_FILE).unlink()


def _crash_before_garbage_collection(storage: FileSystemCheckpointStorage) -> None:
    """Retention died after deleting chk-1, before deleting x1, which only chk-1 listed."""
    (storage.shared_dir("job") / "x1").write_bytes(content("x1"))


def _crash_before_index(storage: FileSystemCheckpointStorage) -> None:
    """chk-4's metadata is durable but the index never named it (died right before)."""
    storage.write_checkpoint(4, "job", {}, shared={"d4": b"other d4"}, references=["b1", "d2", "d3"])
    index = next(storage.directory.glob("_completed-*"))
    index.write_bytes(index.read_bytes().replace(b'"latest": 4', b'"latest": 3'))


CRASHES = {
    "after_shared_files": (_crash_after_shared_files, ["b1", "d2", "d3", "orphan", ".orphan2.abc.tmp"]),
    "after_metadata_deletion": (_crash_after_metadata_deletion, ["b1", "d2", "d3"]),
    "before_garbage_collection": (_crash_before_garbage_collection, ["b1", "d2", "d3", "x1"]),
    "before_index": (_crash_before_index, ["b1", "d2", "d3", "d4"]),
}


@pytest.mark.parametrize("crash", list(CRASHES))
def test_crash_between_steps_never_loses_a_listed_file(tmp_path: Path, crash: str) -> None:
    storage = make(tmp_path, retain=2)
    write(storage, 1, ["b1", "x1"], [])
    write(storage, 2, ["d2"], ["b1"])
    write(storage, 3, ["d3"], ["b1", "d2"])
    damage, present = CRASHES[crash]
    damage(storage)
    assert sorted(p.name for p in storage.shared_dir("job").iterdir()) == sorted(present)
    latest = storage.restore_point("job")
    assert latest is not None and latest.checkpoint_id == 3
    latest.verify()  # the latest completed checkpoint is intact after every crash
    # the next completed write (a new attempt's, id 4) cleans up: only what is listed is left
    write(storage, 4, ["d4"], ["b1", "d2", "d3"])
    assert shared_names(storage) == ["b1", "d2", "d3", "d4"]
    assert storage.shared_dir("job").joinpath("d4").read_bytes() == content("d4")
    write(storage, 5, ["b5"], [])
    write(storage, 6, ["d6"], ["b5"])
    assert shared_names(storage) == ["b5", "d6"]
    assert sorted(p.name for p in storage.directory.glob("chk-*")) == ["chk-5", "chk-6"]


def test_interrupted_garbage_collection_is_logged_and_finished_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    storage = make(tmp_path, retain=1)
    write(storage, 1, ["b1", "x1", "y1"], [])
    real_unlink = Path.unlink
    calls = []

    def failing_unlink(self: Path, missing_ok: bool = False) -> None:
        if self.parent == storage.shared_dir("job"):
            calls.append(self.name)
            if len(calls) == 2:
                raise PermissionError(13, "Permission denied")
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", failing_unlink)
    write(storage, 2, ["d2"], ["b1"])
    monkeypatch.undo()
    assert "retention" in caplog.text and "Permission denied" in caplog.text
    assert "b1" in shared_names(storage) and "d2" in shared_names(storage)
    handle = storage.restore_point("job")
    assert handle is not None and handle.checkpoint_id == 2
    handle.verify()
    write(storage, 3, [], ["b1", "d2"])
    assert shared_names(storage) == ["b1", "d2"]
