"""Every example in examples/ runs to completion and prints exactly what it should.

An example without an entry in ``CHECKS`` fails: a new example comes with its expected output.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from child_env import child_env

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))

WORD_COUNT = """\
57 distinct words; top 10:
     6  is
     5  the
     4  a
     4  event
     4  time
     3  and
     3  bounded
     3  of
     3  stream
     2  an
"""

EVENT_TIME_WINDOWS = """\
window> alice [   0s,   10s): 2 clicks
window> bob   [   0s,   10s): 1 clicks
window> alice [   0s,   10s): 3 clicks
window> bob   [  10s,   20s): 1 clicks
too late> ('bob', 3000)
window> alice [  20s,   30s): 1 clicks
"""


def check_word_count(out: str, work: Path) -> None:
    assert out == WORD_COUNT


def check_event_time_windows(out: str, work: Path) -> None:
    # alice's 9.5 s click is late but within the 2 s allowed lateness: [0 s, 10 s) fires again;
    # bob's 3 s click arrives after the watermark passed 12 s: beyond it, to the side output
    assert out == EVENT_TIME_WINDOWS


def check_embedded_service(out: str, work: Path) -> None:
    match = re.fullmatch(r"job FINISHED: 182 alerts, (\d+) heartbeats served meanwhile\n", out)
    assert match, out
    assert int(match.group(1)) > 0  # the service kept serving while the job ran


def check_exactly_once_files(out: str, work: Path) -> None:
    totals = work / "totals"
    match = re.fullmatch(
        r"(\d+) checkpoints completed; 2000 running totals in (\d+) committed part files under "
        + re.escape(str(totals))
        + "\n",
        out,
    )
    assert match, out
    assert int(match.group(1)) >= 1 and int(match.group(2)) >= 1
    lines = [
        tuple(json.loads(line))
        for f in totals.iterdir()
        if not f.name.startswith(".")
        for line in f.read_text().splitlines()
    ]
    expected: list[tuple[str, int]] = []
    running: dict[str, int] = {}
    for i in range(2_000):
        user = f"user{i % 7}"
        running[user] = running.get(user, 0) + i % 10
        expected.append((user, running[user]))
    assert Counter(lines) == Counter(expected)  # every running total exactly once


CHECKS: dict[str, Callable[[str, Path], None]] = {
    "word_count.py": check_word_count,
    "event_time_windows.py": check_event_time_windows,
    "embedded_service.py": check_embedded_service,
    "exactly_once_files.py": check_exactly_once_files,
}


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_prints_its_expected_output(script: Path, tmp_path: Path) -> None:
    assert script.name in CHECKS, f"add the expected output of examples/{script.name} to CHECKS"
    args = [str(tmp_path)] if script.name == "exactly_once_files.py" else []
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120,
                          env=child_env())
    assert done.returncode == 0, done.stderr[-3000:]
    CHECKS[script.name](done.stdout, tmp_path)
