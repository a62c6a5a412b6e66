"""The snapshot-child policy of the heap backend (``state/heap_fork.py::wanted``), as a table:
``off`` never forks; ``on`` and a fixed ``min-entries`` fork by count alone; ``auto`` (the
default) forks only for a base (a capture of every entry) whose encoding here would cost more
than the fork and the page faults it causes, never for a delta, never with one CPU, never
above the resident size whose fork would hold the loop too long, and logs why once."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import streamflow as sf
from streamflow.state import heap_fork, snapshot_process
from streamflow.state.changes import CHUNK
from streamflow.state.keyed import KeyedStateBackend

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


# (mode, min-entries, entries, base, resident MB, faults since the last fork or None, cpus,
#  an entry's cost measured by the probe (ns) or None) -> fork?
CASES = [
    # off: never
    ("off", None, 1_000_000, True, 270, None, 2, None, False),
    ("off", 1, 1_000_000, True, 270, None, 2, None, False),
    # on / a fixed threshold: by count, deltas too, whatever the estimate
    ("on", None, 1, False, 270, None, 2, None, True),
    ("on", None, 0, True, 270, None, 2, None, False),
    ("auto", 500, 499, True, 270, None, 2, None, False),
    ("auto", 500, 500, False, 270, None, 2, None, True),
    # auto: a delta never, however large
    ("auto", None, 1_000_000, False, 270, None, 2, None, False),
    ("auto", None, 1_000_000, False, 270, 0, 2, None, False),
    # auto: a large base forks (the heap job's first checkpoint: 1M entries at ~250-270 MB)
    ("auto", None, 1_000_000, True, 270, None, 2, None, True),
    ("auto", None, 600_000, True, 270, None, 2, None, True),
    # ... a small one does not: the faults of every resident page would cost more
    ("auto", None, 100_000, True, 270, None, 2, None, False),
    # ... unless few pages were written since the last fork (a sparse state)
    ("auto", None, 100_000, True, 270, 1_000, 2, None, True),
    # ... never with one CPU, nor where the fork alone would hold the loop too long
    ("auto", None, 1_000_000, True, 270, None, 1, None, False),
    ("on", None, 1_000_000, True, 270, None, 1, None, False),
    ("auto", None, 5_000_000, True, 700, None, 2, None, False),
    ("auto", None, 0, True, 270, None, 2, None, False),
    # ... nor for a base that costs less than MIN_SAVING_MS here, however cheap a child would be
    ("auto", None, 60_000, True, 270, 1_000, 2, None, False),
    ("auto", None, 20_000, True, 1, 0, 2, 1_000.0, False),
    ("auto", None, 40_000, True, 1, 0, 2, 1_000.0, True),
    # the probe's measured cost decides instead of the default per-entry cost: the heap job's
    # base (1M entries at ~155 ns, 245 MB) forks; a cheap state of 300k ints (~70 ns, 121 MB)
    # does not; nor does a big base whose entries cost little to encode
    ("auto", None, 1_000_000, True, 245, None, 2, 155.0, True),
    ("auto", None, 300_000, True, 121, None, 2, 70.0, False),
    ("auto", None, 1_000_000, True, 245, None, 2, 60.0, False),
    # ... which a fixed mode ignores
    ("on", None, 1_000_000, True, 245, None, 2, 1.0, True),
]


@pytest.mark.parametrize("mode,fixed,entries,base,resident,faults,cpus,cost,fork", CASES)
def test_when_a_capture_is_encoded_in_a_child(
    machine: dict, mode: str, fixed: int | None, entries: int, base: bool, resident: int,
    faults: int | None, cpus: int, cost: float | None, fork: bool,
) -> None:  # fmt: skip
    machine.update(resident=resident * MB, faults=faults, cpus=cpus)
    machine["refresh"]()
    assert heap_fork.wanted(Settings(mode, fixed), entries, base, cost) is fork


def test_the_probe_times_the_first_slice_and_gives_every_slice_back() -> None:
    class Tally:
        entries = 0

    tally = Tally()

    def frames():
        for i in range(3):
            tally.entries += 1000
            sum(range(20_000))  # some CPU to time
            yield [b"x" * 100, bytes([i])]

    it, cost = heap_fork.probe(frames(), tally)
    assert tally.entries == 1000  # only the first slice was encoded
    assert cost > 101 * heap_fork.BYTE_NS / 1000  # its CPU time and its bytes, per entry
    assert [f[1] for f in it] == [b"\x00", b"\x01", b"\x02"]  # nothing lost or repeated
    assert tally.entries == 3000
    empty, _ = heap_fork.probe(iter(()), Tally())
    assert list(empty) == [[]]


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


# ---------------------------------------------------------------- the probe inside a capture

sys.path.insert(0, str(Path(__file__).parent))
from test_incremental_state import MAXP, Files, settings, tables, write  # noqa: E402


@pytest.mark.parametrize("child", [True, False])
def test_a_probed_base_restores_exactly_in_a_child_or_here(
    monkeypatch: pytest.MonkeyPatch, child: bool
) -> None:
    """``auto``: the base's first slice is encoded here and timed; a child that takes over goes on
    from the second slice (its file holds every entry once), or the process goes on itself."""
    monkeypatch.setattr(heap_fork.os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(heap_fork, "FAULT_NS", 0.0 if child else 1e9)
    monkeypatch.setattr(heap_fork, "TABLE_NS", 0.0)
    monkeypatch.setattr(heap_fork, "MIN_SAVING_MS", 0.0)
    probes: list[float] = []
    real_probe = heap_fork.probe

    def probe(frames, tally):  # type: ignore[no-untyped-def]
        it, cost = real_probe(frames, tally)
        probes.append(cost)
        return it, cost

    monkeypatch.setattr(heap_fork, "probe", probe)
    forks = snapshot_process.forks
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    n = 3 * CHUNK + 5
    for k in range(n):
        write(backend, f"k{k}", (f"k{k}", k, -k))
    base = files.take(backend, 1)
    assert "-base-" in base["chain"][0] and len(probes) == 1 and probes[0] > 0
    assert (snapshot_process.forks - forks == 1) is child
    write(backend, "k1", "changed")  # a delta on top: never probed, never forked (auto)
    delta = files.take(backend, 2)
    assert len(probes) == 1 and (snapshot_process.forks - forks == 1) is child
    restored = files.restore([delta])
    assert tables(restored) == tables(backend) and len(tables(restored)["v"]) == n
