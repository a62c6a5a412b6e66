"""Filesystem checkpoint storage: atomicity, checksums, retention, savepoints."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

import streamflow.checkpoint.storage as storage_module
from streamflow.checkpoint.storage import (
    INDEX_PREFIX,
    METADATA_FILE,
    CheckpointHandle,
    CheckpointStorageError,
    CorruptCheckpointError,
    FileSystemCheckpointStorage,
)
from streamflow.runtime.events import CheckpointType
from streamflow.testing import ManualClock

ENTRIES = {"op-a.0": b"state of a", "op-b.0": b"\x00\x01binary", "empty": b""}


def make(tmp_path: Path, retain: int = 3) -> FileSystemCheckpointStorage:
    return FileSystemCheckpointStorage(tmp_path / "chk", retain=retain, clock=ManualClock(1234))


def names(directory: Path) -> list[str]:
    """File names in ``directory``, without the jobs' checkpoint indexes (``_completed-*``)."""
    if not directory.exists():
        return []
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith(INDEX_PREFIX))


def write_ids(storage: FileSystemCheckpointStorage, ids: list[int], job: str = "job") -> None:
    for cid in ids:
        storage.write_checkpoint(cid, job, {"e": f"{job}-{cid}".encode()})


# ---------------------------------------------------------------- writing and reading


def test_write_then_read_back(tmp_path: Path) -> None:
    storage = make(tmp_path)
    path = storage.write_checkpoint(7, "job", ENTRIES)
    assert path == tmp_path / "chk" / "chk-7"
    assert names(path) == sorted([*ENTRIES, METADATA_FILE])
    handle = storage.latest_complete()
    assert handle is not None
    assert (handle.checkpoint_id, handle.path, handle.job_name) == (7, path, "job")
    assert handle.kind is CheckpointType.CHECKPOINT and handle.timestamp_ms == 1234
    assert handle.entries == tuple(ENTRIES)
    for name, data in ENTRIES.items():
        assert handle.read(name) == data
    handle.verify()


def test_metadata_content(tmp_path: Path) -> None:
    storage = make(tmp_path)
    path = storage.write_checkpoint(3, "my job", {"x": b"abc"}, timestamp_ms=99)
    meta = orjson.loads((path / METADATA_FILE).read_bytes())
    assert meta == {
        "format_version": 1,
        "job_name": "my job",
        "checkpoint_id": 3,
        "timestamp_ms": 99,
        "kind": "checkpoint",
        "entries": [{"name": "x", "file": "x", "size": 3, "sha256": hashlib.sha256(b"abc").hexdigest()}],
    }


def test_empty_checkpoint_is_valid(tmp_path: Path) -> None:
    storage = make(tmp_path)
    storage.write_checkpoint(1, "job", {})
    handle = storage.latest_complete("job")
    assert handle is not None and handle.entries == ()


def test_latest_complete_on_missing_directory(tmp_path: Path) -> None:
    assert make(tmp_path).latest_complete() is None
    assert make(tmp_path).complete_checkpoints() == []


def test_latest_complete_picks_highest_id_numerically(tmp_path: Path) -> None:
    storage = make(tmp_path, retain=10)
    write_ids(storage, [9, 10, 2])
    handle = storage.latest_complete()
    assert handle is not None and handle.checkpoint_id == 10
    assert [h.checkpoint_id for h in storage.complete_checkpoints()] == [2, 9, 10]


@pytest.mark.parametrize(
    ("job_filter", "expected_id"),
    [(None, 5), ("a", 4), ("b", 5), ("c", None)],
)
def test_job_name_filtering(tmp_path: Path, job_filter: str | None, expected_id: int | None) -> None:
    storage = make(tmp_path, retain=10)
    write_ids(storage, [1, 4], job="a")
    write_ids(storage, [2, 5], job="b")
    handle = storage.latest_complete(job_filter)
    assert (handle.checkpoint_id if handle else None) == expected_id
    if handle:
        assert handle.read("e") == f"{handle.job_name}-{expected_id}".encode()


# ---------------------------------------------------------------- atomicity


def test_entries_without_metadata_are_not_complete(tmp_path: Path) -> None:
    """A crash before ``_metadata`` is written: the directory holds entries only."""
    storage = make(tmp_path)
    write_ids(storage, [1, 2])
    crashed = storage.directory / "chk-3"
    crashed.mkdir()
    (crashed / "e").write_bytes(b"half of a checkpoint")
    handle = storage.latest_complete()
    assert handle is not None and handle.checkpoint_id == 2
    with pytest.raises(CheckpointStorageError, match="_metadata is missing") as info:
        storage.load(crashed)
    assert info.value.path == crashed


def test_failed_metadata_write_leaves_checkpoint_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = make(tmp_path)
    write_ids(storage, [1])
    real_replace = os.replace

    def crash_on_metadata(src: Any, dst: Any) -> None:
        if Path(dst).name == METADATA_FILE:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_metadata)
    with pytest.raises(CheckpointStorageError, match="No space left") as info:
        storage.write_checkpoint(2, "job", ENTRIES)
    assert info.value.path == storage.directory / "chk-2" / METADATA_FILE
    assert not (storage.directory / "chk-2").exists()  # a failed write removes what it wrote
    handle = storage.latest_complete()
    assert handle is not None and handle.checkpoint_id == 1
    monkeypatch.setattr(os, "replace", real_replace)
    storage.write_checkpoint(2, "job", {"e": b"retried"})
    handle = storage.latest_complete()
    assert handle is not None and handle.checkpoint_id == 2 and handle.entries == ("e",)


def test_tmp_files_never_visible_under_final_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At every fsync, every visible non-hidden file already holds its final content."""
    storage = make(tmp_path)
    entries = {f"e{i}": bytes([i]) * (1000 * i) for i in range(5)}
    target = storage.directory / "chk-1"
    observed: list[list[str]] = []
    real_fsync = os.fsync

    def checking_fsync(fd: int) -> None:
        real_fsync(fd)
        listing = names(target)
        observed.append(listing)
        for name in listing:
            if name.startswith("."):
                assert name.endswith(".tmp")
            elif name == METADATA_FILE:
                assert set(entries) <= set(listing)  # metadata comes last
            else:
                assert (target / name).read_bytes() == entries[name]

    monkeypatch.setattr(os, "fsync", checking_fsync)
    storage.write_checkpoint(1, "job", entries)
    assert any(any(n.startswith(".") for n in listing) for listing in observed)
    assert names(target) == sorted([*entries, METADATA_FILE])


def test_failed_entry_write_leaves_no_final_or_tmp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = make(tmp_path)
    real_fsync = os.fsync
    calls = []

    def failing_fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 5:  # 1-2: the index begun (file, dir), 3: parent dir, 4: first entry, 5: second
            raise OSError(5, "I/O error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(CheckpointStorageError, match="I/O error") as info:
        storage.write_checkpoint(1, "job", {"first": b"1", "second": b"2"})
    assert info.value.path.name == "second"
    assert not (storage.directory / "chk-1").exists()  # a failed write removes what it wrote
    assert storage.latest_complete() is None


def test_existing_complete_checkpoint_is_not_overwritten(tmp_path: Path) -> None:
    storage = make(tmp_path)
    write_ids(storage, [1], job="a")
    with pytest.raises(CheckpointStorageError, match="already holds a complete") as info:
        storage.write_checkpoint(1, "b", {"e": b"other"})
    assert info.value.path == storage.directory / "chk-1"
    handle = storage.latest_complete()
    assert handle is not None and handle.read("e") == b"a-1"


# ---------------------------------------------------------------- corruption


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: p.write_bytes(b"state of A"), "sha256"),
        (lambda p: p.write_bytes(b"state"), "5 bytes, metadata says 10"),
        (lambda p: p.write_bytes(b"state of a, longer"), "metadata says 10"),
        (lambda p: p.unlink(), "cannot read"),
    ],
    ids=["flipped", "truncated", "extended", "missing"],
)
def test_checksum_corruption_detected_on_read(tmp_path: Path, damage: Any, message: str) -> None:
    storage = make(tmp_path)
    path = storage.write_checkpoint(1, "job", ENTRIES)
    damage(path / "op-a.0")
    handle = storage.latest_complete()  # checksums are verified lazily: still found
    assert handle is not None
    assert handle.read("op-b.0") == ENTRIES["op-b.0"]
    with pytest.raises(CorruptCheckpointError, match=message) as info:
        handle.read("op-a.0")
    assert info.value.path == path / "op-a.0"
    assert str(path / "op-a.0") in str(info.value)
    with pytest.raises(CorruptCheckpointError):
        handle.verify()


def test_unknown_entry_name(tmp_path: Path) -> None:
    storage = make(tmp_path)
    storage.write_checkpoint(1, "job", ENTRIES)
    handle = storage.latest_complete()
    assert handle is not None
    with pytest.raises(CheckpointStorageError, match="no entry 'nope'"):
        handle.read("nope")


def _meta(cid: int = 2, **overrides: Any) -> bytes:
    meta: dict[str, Any] = {
        "format_version": 1,
        "job_name": "job",
        "checkpoint_id": cid,
        "timestamp_ms": 0,
        "kind": "checkpoint",
        "entries": [],
    }
    meta.update(overrides)
    return orjson.dumps(meta)


def _entry(**overrides: Any) -> dict[str, Any]:
    return {"name": "e", "file": "e", "size": 1, "sha256": "0" * 64, **overrides}


CORRUPT_METADATA: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("not_json", b"{garbage"),
    ("not_object", b"[1, 2]"),
    ("wrong_version", _meta(format_version=3)),
    ("v2_without_shared", _meta(format_version=2)),
    ("v1_with_shared", _meta(shared=[_entry()])),
    ("shared_not_list", _meta(format_version=2, shared={})),
    ("shared_path_escape", _meta(format_version=2, shared=[{"name": "../x", "size": 1, "sha256": "0" * 64}])),
    ("shared_bad_sha", _meta(format_version=2, shared=[{"name": "x", "size": 1, "sha256": "x"}])),
    ("shared_duplicate", _meta(format_version=2, shared=[{"name": "x", "size": 1, "sha256": "0" * 64}] * 2)),
    ("id_mismatch", _meta(cid=7)),
    ("id_not_int", _meta(cid="2")),
    ("negative_id", _meta(cid=-2)),
    ("job_not_str", _meta(job_name=5)),
    ("no_timestamp", _meta(timestamp_ms=None)),
    ("bad_kind", _meta(kind="snapshot")),
    ("entries_not_list", _meta(entries={})),
    ("entry_missing_field", _meta(entries=[{"name": "e", "file": "e", "size": 1}])),
    ("entry_path_escape", _meta(entries=[_entry(file="../x")])),
    ("entry_bad_sha", _meta(entries=[_entry(sha256="xyz")])),
    ("entry_bad_size", _meta(entries=[_entry(size=-1)])),
    ("entry_size_not_int", _meta(entries=[_entry(size="1")])),
    ("entry_duplicate", _meta(entries=[_entry(), _entry()])),
    ("entry_not_object", _meta(entries=["e"])),
]


@pytest.mark.parametrize("metadata", [c[1] for c in CORRUPT_METADATA], ids=[c[0] for c in CORRUPT_METADATA])
def test_corrupt_metadata_is_ignored_and_load_names_it(tmp_path: Path, metadata: bytes) -> None:
    storage = make(tmp_path)
    write_ids(storage, [1])
    bad = storage.directory / "chk-2"
    bad.mkdir()
    (bad / METADATA_FILE).write_bytes(metadata)
    handle = storage.latest_complete()
    assert handle is not None and handle.checkpoint_id == 1
    with pytest.raises(CheckpointStorageError) as info:
        storage.load(bad)
    assert str(bad / METADATA_FILE) in str(info.value)


def test_valid_hand_written_metadata_loads(tmp_path: Path) -> None:
    storage = make(tmp_path)
    good = storage.directory / "chk-2"
    good.mkdir(parents=True)
    (good / METADATA_FILE).write_bytes(_meta())
    assert storage.load(good).checkpoint_id == 2


# ---------------------------------------------------------------- retention


def test_retention_keeps_last_n(tmp_path: Path) -> None:
    storage = make(tmp_path, retain=3)
    write_ids(storage, [1, 2, 3, 4, 5])
    assert names(storage.directory) == ["chk-3", "chk-4", "chk-5"]


def test_retention_one(tmp_path: Path) -> None:
    storage = make(tmp_path, retain=1)
    write_ids(storage, [1, 2])
    assert names(storage.directory) == ["chk-2"]


def test_retention_deletes_older_debris_keeps_newer(tmp_path: Path) -> None:
    storage = make(tmp_path, retain=2)
    write_ids(storage, [1])
    for cid in (2, 9):
        debris = storage.directory / f"chk-{cid}"
        debris.mkdir()
        (debris / "e").write_bytes(b"partial")
    corrupt = storage.directory / "chk-3"
    corrupt.mkdir()
    (corrupt / METADATA_FILE).write_bytes(b"{")
    (storage.directory / "unrelated").mkdir()
    write_ids(storage, [4])
    assert names(storage.directory) == ["chk-1", "chk-4", "chk-9", "unrelated"]


def test_retention_leaves_other_jobs_alone(tmp_path: Path) -> None:
    storage = make(tmp_path, retain=1)
    write_ids(storage, [1, 2], job="other")
    write_ids(storage, [3, 4, 5], job="job")
    assert names(storage.directory) == ["chk-2", "chk-5"]


def test_a_checkpoint_never_committed_to_the_index_is_debris(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """chk-3 is complete on disk, but its process died before the index named it; the job
    restarted from chk-2 and went on with ids above it. chk-3 is never listed, retained or
    chosen by a fallback, and retention removes it (it once counted as complete and pushed a
    real checkpoint out of the retained ones)."""
    storage = make(tmp_path, retain=2)
    write_ids(storage, [1, 2])
    with monkeypatch.context() as m:
        m.setattr(storage, "_write_index", lambda *args: None)  # killed right before the commit
        storage.write_checkpoint(3, "job", {"e": b"job-3"})
    assert (storage.directory / "chk-3" / METADATA_FILE).exists()
    assert [h.checkpoint_id for h in storage.complete_checkpoints("job")] == [1, 2]
    restored = storage.restore_point("job")
    assert restored is not None and restored.checkpoint_id == 2
    write_ids(storage, [4])
    assert [h.checkpoint_id for h in storage.complete_checkpoints("job")] == [2, 4]
    assert names(storage.directory) == ["chk-2", "chk-4"]
    write_ids(storage, [5])
    (storage.directory / "chk-5" / METADATA_FILE).write_bytes(b"garbage")  # damaged latest
    fallback = storage.restore_point("job", fallback=True)
    assert fallback is not None and fallback.checkpoint_id == 4


def test_an_index_without_the_completed_list_still_reads(tmp_path: Path) -> None:
    """An index written before it listed the completed ids: every complete chk of the job up to
    ``latest`` counts, as before."""
    storage = make(tmp_path, retain=5)
    write_ids(storage, [1, 2, 3])
    index = next(storage.directory.glob(f"{INDEX_PREFIX}*"))
    index.write_bytes(orjson.dumps({"format_version": 1, "job_name": "job", "latest": 2}))
    assert [h.checkpoint_id for h in storage.complete_checkpoints("job")] == [1, 2]
    write_ids(storage, [4])
    assert [h.checkpoint_id for h in storage.complete_checkpoints("job")] == [1, 2, 4]
    assert names(storage.directory) == ["chk-1", "chk-2", "chk-4"]


def test_retention_failure_is_logged_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    storage = make(tmp_path, retain=1)
    write_ids(storage, [1])

    def broken_rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(storage_module.shutil, "rmtree", broken_rmtree)
    storage.write_checkpoint(2, "job", {"e": b"x"})
    assert "retention" in caplog.text and "Permission denied" in caplog.text
    handle = storage.latest_complete()
    assert handle is not None and handle.checkpoint_id == 2
    # chk-1 lost its metadata first, so it is no longer complete
    assert [h.checkpoint_id for h in storage.complete_checkpoints()] == [2]


# ---------------------------------------------------------------- savepoints and load


def test_savepoint_goes_to_user_path_and_survives_retention(tmp_path: Path) -> None:
    storage = make(tmp_path, retain=1)
    savepoint = tmp_path / "savepoints" / "sp-1"
    path = storage.write_checkpoint(2, "job", ENTRIES, savepoint_path=str(savepoint))
    assert path == savepoint
    assert names(savepoint) == sorted([*ENTRIES, METADATA_FILE])
    assert storage.latest_complete() is None  # savepoints are not checkpoints
    write_ids(storage, [3, 4, 5])
    handle = storage.load(savepoint)
    assert handle.kind is CheckpointType.SAVEPOINT and handle.checkpoint_id == 2
    assert handle.read("op-a.0") == ENTRIES["op-a.0"]
    assert names(storage.directory) == ["chk-5"]


def test_savepoint_path_must_be_new_or_empty(tmp_path: Path) -> None:
    storage = make(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    storage.write_checkpoint(1, "job", ENTRIES, savepoint_path=empty)
    with pytest.raises(CheckpointStorageError, match="not empty") as info:
        storage.write_checkpoint(2, "job", ENTRIES, savepoint_path=empty)
    assert info.value.path == empty
    a_file = tmp_path / "file"
    a_file.write_bytes(b"")
    with pytest.raises(CheckpointStorageError, match="not a directory"):
        storage.write_checkpoint(2, "job", ENTRIES, savepoint_path=a_file)


@pytest.mark.parametrize("form", ["dir", "str", "metadata_file", "relative_name", "handle"])
def test_load_forms(tmp_path: Path, form: str) -> None:
    storage = make(tmp_path)
    path = storage.write_checkpoint(4, "job", ENTRIES)
    handle = storage.latest_complete()
    assert handle is not None
    arg: str | Path | CheckpointHandle = {
        "dir": path,
        "str": str(path),
        "metadata_file": path / METADATA_FILE,
        "relative_name": "chk-4",
        "handle": handle,
    }[form]
    loaded = storage.load(arg)
    assert loaded.checkpoint_id == 4 and loaded.path == path and loaded.entries == handle.entries


def test_load_missing_path(tmp_path: Path) -> None:
    with pytest.raises(CheckpointStorageError, match="no checkpoint or savepoint") as info:
        make(tmp_path).load(tmp_path / "nowhere")
    assert info.value.path == tmp_path / "nowhere"


# ---------------------------------------------------------------- argument errors


@pytest.mark.parametrize("name", ["", ".hidden", "_metadata", "_x", "a/b", "a\\b", "nul\x00", "x" * 201, 5])
def test_invalid_entry_names(tmp_path: Path, name: Any) -> None:
    storage = make(tmp_path)
    with pytest.raises(ValueError, match="invalid checkpoint entry name"):
        storage.write_checkpoint(1, "job", {name: b"x"})
    assert not (storage.directory / "chk-1").exists()


@pytest.mark.parametrize(
    ("cid", "job", "entries", "exc"),
    [
        (-1, "job", {}, ValueError),
        (True, "job", {}, ValueError),
        ("1", "job", {}, ValueError),
        (1, "", {}, ValueError),
        (1, "job", {"e": "text"}, TypeError),
    ],
)
def test_invalid_arguments(tmp_path: Path, cid: Any, job: Any, entries: Any, exc: type) -> None:
    with pytest.raises(exc):
        make(tmp_path).write_checkpoint(cid, job, entries)


def test_invalid_retain(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        FileSystemCheckpointStorage(tmp_path, retain=0)


def test_directory_is_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"")
    storage = FileSystemCheckpointStorage(blocker)
    with pytest.raises(CheckpointStorageError) as info:
        storage.write_checkpoint(1, "job", {})
    assert str(blocker) in str(info.value)
    with pytest.raises(CheckpointStorageError, match="cannot list"):
        storage.latest_complete()


def test_bytes_like_entries(tmp_path: Path) -> None:
    storage = make(tmp_path)
    storage.write_checkpoint(1, "job", {"a": bytearray(b"ab"), "m": memoryview(b"cd")})
    handle = storage.latest_complete()
    assert handle is not None and handle.read("a") == b"ab" and handle.read("m") == b"cd"


def test_write_replaces_debris_with_corrupt_metadata(tmp_path: Path) -> None:
    storage = make(tmp_path)
    debris = storage.directory / "chk-1"
    debris.mkdir(parents=True)
    (debris / METADATA_FILE).write_bytes(b"{torn")
    (debris / "stale").write_bytes(b"old")
    storage.write_checkpoint(1, "job", {"e": b"new"})
    assert names(debris) == sorted(["e", METADATA_FILE])
    handle = storage.latest_complete("job")
    assert handle is not None and handle.read("e") == b"new"
