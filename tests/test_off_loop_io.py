"""The file sink's slow file operations never run on the event loop (issue 12 item 4).

A running job's FileSink rolls part files, fsyncs them at checkpoints and commits them (renames
and directory fsyncs) when checkpoints complete: each of those ``os`` calls is recorded with the
thread it ran in, and none may be the event loop's thread.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.common import Encoder
from streamflow.connectors.file_sink import FileSink, RollingPolicy


@pytest.fixture
def io_threads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    calls: list[tuple[str, int]] = []
    for name in ("rename", "fsync"):
        original = getattr(os, name)

        def spy(*args: Any, _original: Any = original, _name: str = name, **kw: Any) -> Any:
            calls.append((_name, threading.get_ident()))
            return _original(*args, **kw)

        monkeypatch.setattr(os, name, spy)
    return calls


async def test_file_sink_rolls_syncs_and_commits_off_the_loop(
    tmp_path: Path, io_threads: list[tuple[str, int]]
) -> None:
    out, ck = tmp_path / "out", tmp_path / "ck"
    env = sf.StreamExecutionEnvironment().set_batch_size(50)
    env.enable_checkpointing(20)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(ck))
    sink = (
        FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=2_000))
        .build()
    )

    async def slowly(i: int) -> str:  # a few checkpoints happen while the job runs
        if i % 500 == 0:
            import asyncio

            await asyncio.sleep(0.03)
        return str(i)

    env.from_collection(range(5_000)).map(slowly).sink_to(sink)
    loop_thread = threading.get_ident()
    client = await env.execute_async("off-loop")
    result = await client.get_job_execution_result()
    assert result.metrics["checkpoints.numCompleted"] >= 2
    lines = sorted(
        int(line) for f in out.iterdir() if not f.name.startswith(".") for line in f.read_text().split()
    )
    assert lines == list(range(5_000))
    assert len([f for f in out.iterdir() if not f.name.startswith(".")]) > 2  # rolled by size
    assert len([c for c in io_threads if c[0] == "rename"]) > 2
    on_loop = [name for name, thread in io_threads if thread == loop_thread]
    assert on_loop == [], f"{len(on_loop)} file operations ran on the event loop: {on_loop[:5]}"
