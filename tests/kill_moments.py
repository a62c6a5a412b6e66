"""The random moments of the kill tests: how many, and the seed that picks them.

A kill test with random moments restarts a killed job from its checkpoints ``KILLS`` times, each
killed after a random delay. The protocol points a kill can land between are each killed at by
the chosen-point tests (every checkpoint phase, every two-phase-commit boundary, with each state
kind); the random kills add the moments nobody chose. Twenty kills per test with a fixed seed
killed at the same twenty moments in every run, eight per test with a seed that changes from run
to run kill at other moments each run, in a third of the time. The seed is printed (pytest shows
it with a failure) and ``STREAMFLOW_SEED=<seed>`` replays a run's moments.
"""

from __future__ import annotations

import os
import random
import time

KILLS = 8  # SIGKILLs per random-moment kill test


def kill_rng(name: str) -> random.Random:
    """The random source of one kill test: seeded by ``STREAMFLOW_SEED`` when it is set, else by the
    clock; the seed is printed."""
    seed = os.environ.get("STREAMFLOW_SEED") or str(time.time_ns())
    print(f"{name}: random kill moments from STREAMFLOW_SEED={seed}")
    return random.Random(f"{name}-{seed}")
