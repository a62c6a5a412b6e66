"""Exactly-once output to files with checkpoints; kill it and run it again.

Run: python examples/exactly_once_files.py [WORK_DIR]

Counts events per user into part files under WORK_DIR/totals. A checkpoint is
taken every 100 ms into WORK_DIR/checkpoints; part files become visible only
when the checkpoint that covers them completes. Kill the process (even with
kill -9) and run the same command again: it resumes from the last checkpoint,
and the visible output holds every running total exactly once.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from streamflow import Encoder, FileSink, RestartStrategies, StreamExecutionEnvironment


async def slow(event: tuple[str, int]) -> tuple[str, int]:
    if event[1] % 2:
        await asyncio.sleep(0.001)  # stands in for real work, so the job runs for a while
    return event


def main(work: Path) -> None:
    env = StreamExecutionEnvironment().set_parallelism(2)
    env.enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage_dir(work / "checkpoints")
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 500))
    events = [(f"user{i % 7}", i % 10) for i in range(2_000)]
    (
        env.from_collection(events)
        .uid("events")
        .map(slow, concurrency=1)
        .uid("work")
        .set_parallelism(1)
        .key_by(lambda e: e[0])
        .sum(1)
        .uid("totals")
        .sink_to(FileSink.for_row_format(str(work / "totals"), Encoder.json_lines_encoder()).build())
        .uid("files")
    )
    result = env.execute("exactly-once totals")
    visible = [f for f in (work / "totals").iterdir() if not f.name.startswith(".")]
    lines = sum(len(f.read_text().splitlines()) for f in visible)
    print(
        f"{result.metrics['checkpoints.numCompleted']} checkpoints completed; "
        f"{lines} running totals in {len(visible)} committed part files under {work / 'totals'}"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="streamflow-eo-")))
