"""The random moments of the kill tests: how many, and the seed that picks them.

A kill test with random moments restarts a killed job from its checkpoints ``KILLS`` times, each
killed after a random delay. The protocol points a kill can land between are each killed at by
the chosen-point tests (every checkpoint phase, every two-phase-commit boundary, with each state
kind); the random kills add the moments nobody chose. Twenty kills per test with a fixed seed
killed at the same twenty moments in every run, eight per test with a seed that changes from run
to run kill at other moments each run, in a third of the time. The seed is printed (pytest shows
it with a failure) and ``STREAMFLOW_SEED=<seed>`` replays a run's moments.

A random moment counts from the job's start, not the process's: the job writes a line to stderr
once its imports are done (``wait_running`` reads up to it). Counted from the start of the
process, most kills landed while Python imported streamflow (0.4 s with bytecode, 1.3-2 s
without: a fresh clone under ``PYTHONDONTWRITEBYTECODE``), before the job had touched its
checkpoints, transactions or files, and tested no recovery. ``Landings`` proves they land
mid-job: it counts the kills whose run completed a checkpoint (a newer ``chk-N/_metadata``
than before it started; the restart resumes from it), and fails the test when none did.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import time
from pathlib import Path

KILLS = 8  # SIGKILLs per random-moment kill test


def kill_rng(name: str) -> random.Random:
    """The random source of one kill test: seeded by ``STREAMFLOW_SEED`` when it is set, else by the
    clock; the seed is printed."""
    seed = os.environ.get("STREAMFLOW_SEED") or str(time.time_ns())
    print(f"{name}: random kill moments from STREAMFLOW_SEED={seed}")
    return random.Random(f"{name}-{seed}")


def wait_running(proc: subprocess.Popen[bytes], running: str) -> bytes:
    """Reads the job's stderr up to the line ``running`` (the job's first, written once its
    imports are done) and returns what came before it; a random kill's moment counts from there."""
    assert proc.stderr is not None
    early = b""
    while line := proc.stderr.readline():
        if line.rstrip().decode(errors="replace") == running:
            return early
        early += line
    proc.wait(120)
    raise AssertionError(f"the job exited ({proc.returncode}) before it started:\n{early.decode()[-3000:]}")


_CHK = re.compile(r"chk-(\d+)")


def newest_checkpoint(chk: Path) -> int:
    """The id of the newest complete checkpoint under ``chk`` (its ``chk-N/_metadata`` exists), 0
    when there is none."""
    ids = [int(m.group(1)) for p in chk.glob("**/chk-*/_metadata") if (m := _CHK.fullmatch(p.parent.name))]
    return max(ids, default=0)


class Landings:
    """Where a test's random kills landed: ``mid_job`` counts the kills whose run completed a
    checkpoint before it died (the next run resumes from one the killed run wrote), out of
    ``kills``. ``check`` prints the tally and fails when no kill landed mid-job."""

    def __init__(self, name: str) -> None:
        self.name, self.kills, self.mid_job = name, 0, 0

    def killed(self, before: int, after: int) -> None:
        """One kill; ``before``, ``after``: ``newest_checkpoint`` as the run started and after it died."""
        self.kills += 1
        self.mid_job += after > before

    def check(self) -> None:
        print(f"{self.name}: {self.mid_job} of {self.kills} kills landed after a checkpoint of their run")
        assert self.mid_job > 0, f"{self.name}: none of {self.kills} kills landed after a checkpoint of a run"
