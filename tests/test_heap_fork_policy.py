"""The snapshot-child policy of the heap backend (``state/heap_fork.py::wanted``), as a table:
``off`` never forks; ``on`` and a fixed ``min-entries`` fork by count alone; ``auto`` (the
default) forks only for a base (a capture of every entry) whose encoding here would cost more
than the fork and the page faults it causes, never for a delta, never with one CPU, never
above the resident size whose fork would hold the loop too long, and logs why once."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

import streamflow as sf
from streamflow.state import heap_fork

MB = 1 << 20


@dataclass
class Settings:
    snapshot_process: str = "auto"
    snapshot_process_min_entries: int | None = None


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> dict:
    """A Linux machine with 2 CPUs, ``resident`` bytes resident, ``faults`` since the last fork
    (None: no fork yet)."""
    m: dict = {"resident": 270 * MB, "faults": None, "cpus": 2}
    monkeypatch.setattr(heap_fork._proc, "available", lambda: None)
    monkeypatch.setattr(heap_fork.os, "sched_getaffinity", lambda _pid: set(range(m["cpus"])))
    monkeypatch.setattr(heap_fork, "resident_pages", lambda: m["resident"] // heap_fork.PAGE)
    monkeypatch.setattr(heap_fork, "minor_faults", lambda: 10_000_000 + (m["faults"] or 0))
    monkeypatch.setattr(heap_fork, "_warned", set())

    def last_fork() -> list[int]:
        return [] if m["faults"] is None else [10_000_000]

    monkeypatch.setattr(heap_fork, "_last_fork_faults", last_fork())
    m["refresh"] = lambda: monkeypatch.setattr(heap_fork, "_last_fork_faults", last_fork())
    return m


# (mode, min-entries, entries, base, resident MB, faults since the last fork or None, cpus) -> fork?
CASES = [
    # off: never
    ("off", None, 1_000_000, True, 270, None, 2, False),
    ("off", 1, 1_000_000, True, 270, None, 2, False),
    # on / a fixed threshold: by count, deltas too, whatever the estimate
    ("on", None, 1, False, 270, None, 2, True),
    ("on", None, 0, True, 270, None, 2, False),
    ("auto", 500, 499, True, 270, None, 2, False),
    ("auto", 500, 500, False, 270, None, 2, True),
    # auto: a delta never, however large
    ("auto", None, 1_000_000, False, 270, None, 2, False),
    ("auto", None, 1_000_000, False, 270, 0, 2, False),
    # auto: a large base forks (the heap job's first checkpoint: 1M entries at ~250-270 MB)
    ("auto", None, 1_000_000, True, 270, None, 2, True),
    ("auto", None, 600_000, True, 270, None, 2, True),
    # ... a small one does not: the faults of every resident page would cost more
    ("auto", None, 100_000, True, 270, None, 2, False),
    # ... unless few pages were written since the last fork (a sparse state)
    ("auto", None, 100_000, True, 270, 1_000, 2, True),
    # ... never with one CPU, nor where the fork alone would hold the loop too long
    ("auto", None, 1_000_000, True, 270, None, 1, False),
    ("on", None, 1_000_000, True, 270, None, 1, False),
    ("auto", None, 5_000_000, True, 700, None, 2, False),
    ("auto", None, 0, True, 270, None, 2, False),
]


@pytest.mark.parametrize(("mode", "fixed", "entries", "base", "resident", "faults", "cpus", "fork"), CASES)
def test_when_a_capture_is_encoded_in_a_child(
    machine: dict, mode: str, fixed: int | None, entries: int, base: bool, resident: int,
    faults: int | None, cpus: int, fork: bool,
) -> None:  # fmt: skip
    machine.update(resident=resident * MB, faults=faults, cpus=cpus)
    machine["refresh"]()
    assert heap_fork.wanted(Settings(mode, fixed), entries, base) is fork


def test_why_not_is_logged_once(machine: dict, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="streamflow.state.heap_fork")
    machine.update(resident=700 * MB)
    for _ in range(3):
        assert not heap_fork.wanted(Settings(), 5_000_000, True)
    machine.update(cpus=1)
    for _ in range(3):
        assert not heap_fork.wanted(Settings(), 5_000_000, True)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "700 MB resident" in messages[0] and "one CPU" in messages[1]


def test_auto_is_the_default() -> None:
    assert sf.StreamExecutionEnvironment().get_checkpoint_config().snapshot_process == "auto"
