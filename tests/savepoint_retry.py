"""Stop-with-savepoint retried while it fails, for the seeded fault tests (test_random_faults,
test_random_kafka_faults): a fault armed at a checkpoint's point may fail the stop's savepoint;
the job then keeps running (or, draining, fails over) and the stop is tried again."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import streamflow as sf
from streamflow.runtime.job import SavepointCommitError

ENDED = ("FINISHED", "FAILED", "CANCELED")


async def stop_with_savepoint_retrying(
    client: Any, directory: Path, drain: bool, *, attempts: int = 20, pause: float = 0.05
) -> str | None:
    """The savepoint's path (``directory/sp<attempt>``), once a stop succeeded or its savepoint
    completed before the job failed committing it (``SavepointCommitError``: not restarted, a
    resume from the savepoint commits the rest); None if the job ended first or every attempt
    failed (each failure logged)."""
    for attempt in range(attempts):
        if client.get_job_status().value in ENDED:
            return None
        try:
            stop = client.stop_with_savepoint(drain, str(directory / f"sp{attempt}"))
            return str(await asyncio.wait_for(stop, 20))
        except SavepointCommitError as exc:  # the savepoint is complete: the job failed committing it
            return str(exc.savepoint_path)
        except (sf.errors.StreamflowError, RuntimeError, OSError) as exc:  # type: ignore[attr-defined]
            logging.getLogger("test").warning("stop-with-savepoint failed: %r", exc)
            await asyncio.sleep(pause)
    return None
