"""examples/web_service/app.py as a real service: started as a subprocess, driven over HTTP,
stopped with SIGTERM (savepoint on shutdown) and started again (resumes from it)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from child_env import child_env
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).parent.parent
APP = ROOT / "examples" / "web_service" / "app.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(url: str, method: str = "GET") -> Any:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=30) as resp:
        body = resp.read()
        is_json = resp.headers["Content-Type"].startswith("application/json")
        return json.loads(body) if is_json else body.decode()


def wait_for(what: str, fn: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = fn()
        except OSError:  # not listening yet
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def start(state: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(APP), "--port", str(port), "--state-dir", str(state)],
        env=child_env(PYTHONPATH=str(ROOT)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    return err


def test_service_serves_metrics_takes_savepoints_and_resumes_after_restart(tmp_path: Path) -> None:
    state, port = tmp_path / "state", free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start(state, port)
    try:
        totals = wait_for("results", lambda: len(t := call(f"{base}/totals")) == 4 and t)
        job = call(f"{base}/job")
        assert job["status"] == "RUNNING" and job["restored_from"] is None
        text = call(f"{base}/metrics")
        families = {f.name for f in text_string_to_metric_families(text)}
        assert {"streamflow_task_numRecordsIn", "streamflow_task_backPressuredTimeMsPerSecond"} <= families
        location = call(f"{base}/savepoint", "POST")["location"]
        assert (Path(location) / "_metadata").is_file()
        wait_for("more results", lambda: call(f"{base}/totals")["s0"]["last_seq"] > totals["s0"]["last_seq"])
        before = call(f"{base}/totals")
    finally:
        err = stop(proc) if proc.poll() is None else proc.communicate()[1]
    assert "savepoint on shutdown" in err
    shutdown_savepoint = (state / "latest-savepoint").read_text()

    proc = start(state, port)
    try:
        job = wait_for("the restarted job", lambda: call(f"{base}/job"))
        assert job["restored_from"] == shutdown_savepoint
        after = wait_for("results after the restart", lambda: len(t := call(f"{base}/totals")) == 4 and t)
        # the source and the totals go on from the shutdown savepoint (taken after `before` was
        # read): a job started from scratch would count again from sequence 0 and total 0
        for sensor, seen in before.items():
            assert after[sensor]["last_seq"] > seen["last_seq"]
            assert after[sensor]["total"] >= seen["total"]
    finally:
        stop(proc)
