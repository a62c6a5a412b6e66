"""Working directories of processes that are gone are removed by the next process that makes
one in the same place (``state/abandoned_dirs.py``), for RocksDB's working directories and the
snapshot children's staging directories alike; a removal that fails is logged with its cause."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamflow.state import heap_fork, rocksdb_setup
from streamflow.state.abandoned_dirs import pid_alive, remove_abandoned


def _dead_pid() -> int:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return dead.pid


def test_the_directories_of_processes_that_are_gone_are_removed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dead, me = _dead_pid(), os.getpid()
    assert not pid_alive(dead) and pid_alive(me) and pid_alive(1)
    rows = [  # (name, removed)
        (f"streamflow-heap-pid{dead}-abc", True),  # its process is gone
        (f"streamflow-heap-pid{me}-def", False),  # this process's
        ("streamflow-heap-pid1-ghi", False),  # a live process's (another user's too)
        ("streamflow-heap-pidx-jkl", False),  # not one of ours
        (f"streamflow-heap-pid{dead}-mine", False),  # the caller's own, whatever its name says
    ]
    for name, _ in rows:
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "f").write_bytes(b"x")
    caplog.set_level(logging.INFO)
    removed = remove_abandoned(
        tmp_path, "streamflow-heap-pid*", heap_fork._owner, "staging directory", tmp_path / rows[-1][0]
    )
    assert removed == [tmp_path / rows[0][0]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n for n, gone in rows if not gone)
    assert f"the staging directory of process {dead}, which is gone" in caplog.text


def test_rocksdb_owners_by_name_and_by_owner_file(tmp_path: Path) -> None:
    dead = _dead_pid()
    by_name = tmp_path / f"streamflow-rdb-op-0-pid{dead}-abcd"
    by_file = tmp_path / "streamflow-rdb-op-1-efgh"  # made by an older version: an owner file
    foreign = tmp_path / "streamflow-rdb-not-ours"
    for d in (by_name, by_file, foreign):
        d.mkdir()
    (by_file / "owner.pid").write_text(str(dead))
    assert rocksdb_setup._owner(by_name) == dead and rocksdb_setup._owner(by_file) == dead
    assert rocksdb_setup._owner(foreign) is None
    rocksdb_setup.remove_abandoned(tmp_path, tmp_path / "streamflow-rdb-mine")
    assert [p.name for p in tmp_path.iterdir()] == [foreign.name]


def test_a_removal_that_fails_is_logged_with_its_cause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    odd = tmp_path / f"streamflow-heap-pid{_dead_pid()}-file"
    odd.write_bytes(b"a file, not a directory")
    caplog.set_level(logging.INFO)
    remove_abandoned(tmp_path, "streamflow-heap-pid*", heap_fork._owner, "staging directory")
    assert "could not remove" in caplog.text and "Not a directory" in caplog.text
