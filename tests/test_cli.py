"""The ``streamflow`` command end to end: ``python -m streamflow`` in a subprocess, real jobs,
real checkpoint directories."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from child_env import child_env

ROOT = Path(__file__).parent.parent
PIPELINE = Path(__file__).parent / "scripts" / "cli_pipeline.py"


def streamflow(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = child_env(PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "streamflow", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_console_script_is_declared_beside_python_m() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "aiostreamflow"  # PyPI's "streamflow" is another project
    assert project["scripts"]["streamflow"] == "streamflow.cli:main"
    from streamflow.cli import main

    assert main(["checkpoints", "list", str(ROOT / "no-such-dir")]) == 1


@pytest.mark.parametrize(
    "command",
    [[], ["run"], ["checkpoints"], ["checkpoints", "list"], ["checkpoints", "inspect"], ["savepoint"],
     ["cancel"], ["kafka"], ["kafka", "record"], ["kafka", "replay"]],
    ids=lambda c: " ".join(c) or "streamflow",
)  # fmt: skip
def test_every_command_has_help(command: list[str]) -> None:
    done = streamflow(*command, "--help", timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: streamflow")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "no_such_script.py"], "no pipeline script at no_such_script.py"),
        (["run", "--parallelism", "0", str(PIPELINE)], "--parallelism must be >= 1"),
        (["run", "--from-savepoint", "/no/such/savepoint", str(PIPELINE)], "no savepoint or checkpoint"),
        (["run", "--bogus", str(PIPELINE)], "unrecognized arguments"),
    ],
)
def test_usage_errors_exit_2_with_a_clear_message(args: list[str], message: str) -> None:
    done = streamflow(*args, timeout=30)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_failing_script_exits_1_and_logs_the_error(tmp_path: Path) -> None:
    script = tmp_path / "boom.py"
    script.write_text(
        "import streamflow as sf\n"
        "env = sf.StreamExecutionEnvironment()\n"
        "env.from_collection([1, 2, 0]).map(lambda x: 1 // x).add_sink(lambda x: None)\n"
        "env.execute('boom')\n"
    )
    done = streamflow("run", str(script), timeout=60)
    assert done.returncode == 1
    assert "ZeroDivisionError" in done.stderr
    assert "failed" in done.stderr


def test_run_passes_settings_and_arguments_then_checkpoints_are_listed_and_inspected(tmp_path: Path) -> None:
    ck, out = tmp_path / "ck", tmp_path / "out.json"
    done = streamflow(
        "run", "--parallelism", "2", "--checkpoint-dir", str(ck), str(PIPELINE), str(out), "600"
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(out.read_text())
    assert seen["parallelism"] == 2 and seen["checkpoint_dir"] == str(ck)
    assert seen["status"] == "FINISHED" and seen["count"] == 600
    assert "job 'cli pipeline'" in done.stderr and "finished" in done.stderr  # logged start and end

    listed = streamflow("checkpoints", "list", str(ck), "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert rows and all(r["complete"] and r["job_name"] == "cli pipeline" for r in rows)
    assert "complete" in streamflow("checkpoints", "list", str(ck)).stdout

    latest = rows[-1]["path"]
    inspected = streamflow("checkpoints", "inspect", latest, "--json")
    assert inspected.returncode == 0, inspected.stderr
    d = json.loads(inspected.stdout)
    assert d["valid"] and d["complete"] and d["kind"] == "checkpoint"
    assert d["checkpoint_id"] == rows[-1]["checkpoint_id"]
    # the final checkpoint of the finished job: every operator finished, keyed state not kept
    # (FLIP-147), the source's position is (sizes per operator uid)
    assert {"numbers", "sums"} <= set(d["finished"]) and "sums" not in d["operators"]
    assert {(s["task"], s["subtask"]) for s in d["subtasks"] if s["task"] == "sums"} == {
        ("sums", 0),
        ("sums", 1),
    }
    assert d["operators"]["numbers"] == sum(s["operators"].get("numbers", 0) for s in d["subtasks"]) > 0
    assert {"duration_ms", "alignment_ms_max", "sync_ms_max", "async_ms", "tasks"} <= set(d["stats"])
    text = streamflow("checkpoints", "inspect", latest).stdout
    assert "valid (checksums): yes" in text and "sums" in text and "alignment" in text
    assert "finished operators" in text

    # a damaged entry: inspect says so and exits 1; an interrupted write is listed as incomplete
    entry = next(Path(latest).glob("task-*"))
    entry.write_bytes(entry.read_bytes()[:-1] + b"!")
    damaged = streamflow("checkpoints", "inspect", latest)
    assert damaged.returncode == 1
    assert "valid (checksums): NO" in damaged.stdout and "corrupt" in damaged.stdout
    (ck / "chk-999").mkdir()
    rows = json.loads(streamflow("checkpoints", "list", str(ck), "--json").stdout)
    assert rows[-1]["checkpoint_id"] == 999 and not rows[-1]["complete"]
    assert "_metadata is missing" in rows[-1]["problem"]


def test_run_from_savepoint_restores(tmp_path: Path) -> None:
    ck, out = tmp_path / "ck", tmp_path / "out.json"
    assert streamflow("run", "--checkpoint-dir", str(ck), str(PIPELINE), str(out), "300").returncode == 0
    first = json.loads(out.read_text())
    chk = json.loads(streamflow("checkpoints", "list", str(ck), "--json").stdout)[-1]["path"]
    done = streamflow("run", "--from-savepoint", chk, str(PIPELINE), str(out), "300")
    assert done.returncode == 0, done.stderr
    again = json.loads(out.read_text())
    assert again["savepoint_path"] == chk
    assert f"restored from {chk}" in done.stderr
    # the final checkpoint holds the finished sources' positions: nothing is read twice
    assert again["count"] == 0 and first["count"] == 300


def test_progress_is_drawn_when_asked_and_silent_when_not_a_terminal(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    shown = streamflow("run", "--progress", str(PIPELINE), str(out), "200")
    assert shown.returncode == 0, shown.stderr
    assert "collection" in shown.stderr and "200 records" in shown.stderr
    quiet = streamflow("run", str(PIPELINE), str(out), "200")  # stderr is a pipe, not a TTY
    assert quiet.returncode == 0 and "records" not in quiet.stderr


async def test_inspect_shows_the_channel_state_of_unaligned_checkpoints(tmp_path: Path) -> None:
    import asyncio
    import itertools

    import streamflow as sf
    from streamflow.tools.checkpoints import inspect_checkpoint, list_checkpoints

    async def slow(v: int) -> int:
        await asyncio.sleep(0.002)
        return v

    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(30)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "ck"))
    env.get_checkpoint_config().enable_unaligned_checkpoints()
    env.set_batch_size(4)
    env.set_channel_capacity(64)
    env.disable_operator_chaining()
    env.from_collection(lambda: itertools.count()).uid("n").map(slow).uid("slow").add_sink(lambda v: None)
    client = await env.execute_async("unaligned")
    details: list = []
    try:
        for _ in range(100):
            await asyncio.sleep(0.1)
            if not (tmp_path / "ck").is_dir():  # a loaded machine: no checkpoint has started yet
                continue
            rows = [r for r in list_checkpoints(tmp_path / "ck") if r.complete]
            details = [inspect_checkpoint(r.path) for r in rows]
            if any(d.channel_state_bytes for d in details):
                break
    finally:
        await asyncio.wait_for(client.cancel(), 30)
    assert (tmp_path / "ck").is_dir(), "no checkpoint was written in 10 s"
    with_state = [d for d in details if d.channel_state_bytes]
    assert with_state, "no checkpoint recorded in-flight data"
    d = with_state[-1]
    assert d.valid and d.channel_state_bytes == sum(s.channel_state_bytes for s in d.subtasks)
    assert any(s.output_channel_batches or s.input_channel_batches for s in d.subtasks)
    shown = json.loads(streamflow("checkpoints", "inspect", d.path, "--json").stdout)
    assert shown["channel_state_bytes"] == d.channel_state_bytes > 0
