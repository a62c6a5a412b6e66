"""Run a pipeline script through ``streamflow run --rest-port 0`` in a subprocess and find its
REST endpoint in the log (shared by the REST, CLI and browser tests)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from child_env import child_env

ROOT = Path(__file__).parent.parent
SLOW_JOB = Path(__file__).parent / "scripts" / "slow_job.py"
_URL = re.compile(r"page, REST API and /metrics at (http://\S+)")


class JobProcess:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def url(self, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.log):
                if m := _URL.search(line):
                    return m.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError("the job did not report its REST endpoint:\n" + "".join(self.log)[-3000:])

    def wait(self, timeout: float = 30) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code


@contextlib.contextmanager
def job_process(*run_args: str, script: Path = SLOW_JOB) -> Iterator[JobProcess]:
    env = child_env(PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamflow", "run", "--rest-port", "0", *run_args, str(script)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    job = JobProcess(proc)
    try:
        yield job
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
