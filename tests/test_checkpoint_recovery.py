"""Recovering from damaged storage (issue 9, defect 3): a damaged or missing ``_metadata`` of
the latest completed checkpoint, a damaged index or damaged entries are refused with an error
naming them; an older checkpoint is used only when the user allows it, loudly."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.checkpoint.storage import (
    METADATA_FILE,
    CorruptCheckpointError,
    DamagedCheckpointError,
    FileSystemCheckpointStorage,
)

DATA = [(f"k{i % 4}", i) for i in range(120)]


async def slow(record: Any) -> Any:
    if record[1] % 10 == 0:  # about 100 ms in all: several checkpoints complete meanwhile
        await asyncio.sleep(0.008)
    return record


def job(
    tmp_path: Path, *, fallback: bool = False, data: list = DATA, records: Any = None
) -> sf.StreamExecutionEnvironment:
    """``records``: an async iterable factory to read instead of ``data`` (a job that stays up)."""
    env = sf.StreamExecutionEnvironment().set_parallelism(2).set_batch_size(8)
    env.enable_checkpointing(10)
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    cfg.set_max_retained_checkpoints(3)
    if fallback:
        cfg.enable_fallback_to_older_checkpoint()
    source = env.from_collection(data) if records is None else env.from_async_iterable(records)
    source.uid("src").map(slow, concurrency=1).uid("slow").key_by(lambda r: r[0]).sum(1).uid("sum").sink_to(
        sf.FileSink.for_row_format(str(tmp_path / "out"), sf.Encoder.simple_string_encoder()).build()
    ).uid("sink")
    return env


def committed(tmp_path: Path) -> Counter[str]:
    out: Counter[str] = Counter()
    for f in sorted((tmp_path / "out").iterdir()):
        if f.is_file() and not f.name.startswith("."):
            out.update(f.read_text().splitlines())
    return out


def latest_dir(tmp_path: Path) -> Path:
    handle = FileSystemCheckpointStorage(tmp_path / "chk").restore_point("sums")
    assert handle is not None
    return handle.path


def finished_job(tmp_path: Path) -> tuple[Path, Counter[str]]:
    """Run the bounded job to its end: its final checkpoint is the latest completed one."""
    job(tmp_path).execute("sums")
    return latest_dir(tmp_path), committed(tmp_path)


def _delete(d: Path) -> None:
    (d / METADATA_FILE).unlink()


def _garbage(d: Path) -> None:
    (d / METADATA_FILE).write_bytes(b"\x00not json")


def _replace_by_file(d: Path) -> None:
    shutil.rmtree(d)
    d.write_text("not a directory")


DAMAGE = {"deleted": _delete, "garbage": _garbage, "directory_replaced_by_a_file": _replace_by_file}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_latest_metadata_is_refused_naming_it(tmp_path: Path, damage: str) -> None:
    latest, before = finished_job(tmp_path)
    DAMAGE[damage](latest)
    with pytest.raises(DamagedCheckpointError, match="enable_fallback_to_older_checkpoint") as info:
        job(tmp_path).execute("sums")
    assert str(latest) in str(info.value)
    assert committed(tmp_path) == before  # nothing replayed: no duplicates


def test_all_checkpoints_damaged_is_refused_not_a_fresh_start(tmp_path: Path) -> None:
    _, before = finished_job(tmp_path)
    for d in (tmp_path / "chk").glob("chk-*"):
        _delete(d)
    with pytest.raises(DamagedCheckpointError):
        job(tmp_path).execute("sums")
    assert committed(tmp_path) == before


def test_deleted_index_is_refused(tmp_path: Path) -> None:
    _, before = finished_job(tmp_path)
    for index in (tmp_path / "chk").glob("_completed-*"):
        index.unlink()
    with pytest.raises(DamagedCheckpointError, match="index"):
        job(tmp_path).execute("sums")
    assert committed(tmp_path) == before


def test_fallback_when_allowed_is_loud(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    latest, _ = finished_job(tmp_path)
    older = FileSystemCheckpointStorage(tmp_path / "chk").complete_checkpoints("sums")[-2]
    _garbage(latest)
    caplog.set_level(logging.WARNING)
    result = job(tmp_path, fallback=True).execute("sums")
    assert result.metrics["job.restoredCheckpointId"] == older.checkpoint_id
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("FALLBACK" in m and str(latest) in m and str(older.path) in m for m in warnings)


def test_damaged_entry_is_refused_naming_the_file(tmp_path: Path) -> None:
    latest, before = finished_job(tmp_path)
    entry = sorted(p for p in latest.iterdir() if p.name.startswith("task-"))[0]
    entry.write_bytes(entry.read_bytes()[:-3] + b"xyz")
    for fallback in (False, True):  # the fallback is for a damaged _metadata only
        with pytest.raises(CorruptCheckpointError) as info:
            job(tmp_path, fallback=fallback).execute("sums")
        assert str(entry) in str(info.value)
    assert committed(tmp_path) == before


# ---------------------------------------------------------------- storage rules


def write(storage: FileSystemCheckpointStorage, cid: int, job: str = "j") -> Path:
    return storage.write_checkpoint(cid, job, {"e": f"{job}-{cid}".encode()})


def test_index_names_the_latest_and_debris_above_it_is_ignored(tmp_path: Path) -> None:
    storage = FileSystemCheckpointStorage(tmp_path, retain=5)
    assert storage.restore_point("j") is None
    write(storage, 1)
    write(storage, 2)
    (tmp_path / "chk-3").mkdir()  # an interrupted write: no _metadata, not in the index
    (tmp_path / "chk-3" / "e").write_bytes(b"partial")
    handle = storage.restore_point("j")
    assert handle is not None and handle.checkpoint_id == 2
    write(storage, 3)  # the debris is replaced
    handle = storage.restore_point("j")
    assert handle is not None and handle.checkpoint_id == 3 and handle.read("e") == b"j-3"


def test_checkpoint_whose_index_update_never_happened_is_debris(tmp_path: Path, monkeypatch: Any) -> None:
    storage = FileSystemCheckpointStorage(tmp_path, retain=1)
    write(storage, 1)
    monkeypatch.setattr(storage, "_write_index", lambda *args: None)  # a crash right before it
    write(storage, 2)
    monkeypatch.undo()
    handle = storage.restore_point("j")
    assert handle is not None and handle.checkpoint_id == 1  # 2 never completed
    assert (tmp_path / "chk-1" / METADATA_FILE).exists()  # retention kept the real latest
    write(storage, 2)  # a new attempt may write 2 again
    handle = storage.restore_point("j")
    assert handle is not None and handle.checkpoint_id == 2


def test_a_first_checkpoint_killed_before_the_index_is_debris_once_the_job_began(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A process killed between its first checkpoint's _metadata and the index update: the index
    written when the job began (latest 0) tells that apart from a deleted index (refused)."""
    storage = FileSystemCheckpointStorage(tmp_path)
    storage.begin_job("j")
    monkeypatch.setattr(storage, "_write_index", lambda *args: None)  # killed right before it
    write(storage, 1)
    monkeypatch.undo()
    assert storage.restore_point("j") is None  # a fresh start, not "index deleted"
    assert storage.first_free_id("j") == 2
    write(storage, 2)
    handle = storage.restore_point("j")
    assert handle is not None and handle.checkpoint_id == 2
    for index in tmp_path.glob("_completed-*"):
        index.unlink()
    with pytest.raises(DamagedCheckpointError, match="index"):
        storage.restore_point("j")


def test_other_jobs_are_independent(tmp_path: Path) -> None:
    storage = FileSystemCheckpointStorage(tmp_path)
    write(storage, 1, "a")
    write(storage, 2, "b")
    a, b = storage.restore_point("a"), storage.restore_point("b")
    assert a is not None and a.checkpoint_id == 1 and b is not None and b.checkpoint_id == 2
    assert storage.restore_point("c") is None


def test_an_entry_that_cannot_be_decoded_names_its_file(tmp_path: Path) -> None:
    from streamflow.checkpoint.restore import RestoredCheckpoint
    from streamflow.state.codec import MsgpackCodec

    storage = FileSystemCheckpointStorage(tmp_path)
    for n, data in enumerate([b"json\n{not json", b"msgpack\n\xc1\x93"]):  # checksums match
        path = storage.write_checkpoint(n + 1, "j", {"task-0": data})
        with pytest.raises(CorruptCheckpointError, match="task-0") as info:
            RestoredCheckpoint.load(storage.load(path), MsgpackCodec())
        assert str(path / "task-0") in str(info.value)
