"""Progress of a bounded job on a terminal: records read per source, rate and elapsed time.

Drawn with ``rich`` (a well-kept library that handles terminal width, colours
and redrawing) on standard error, refreshed a few times a second from the
job's metrics; it ends with the job. ``execute_async`` turns it on when
standard error is a terminal and every source is bounded, or when
``streamflow.progress`` says so (``streamflow run --progress/--no-progress``):
output piped to a file or a CI log stays silent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .job import JobClient

_log = logging.getLogger("streamflow.progress")
REFRESH_S = 0.25


def show_progress(client: JobClient) -> asyncio.Task[None] | None:
    if not all(v.head.source.bounded for v in client.execution.graph.vertices if v.head.source is not None):
        _log.debug("job %r has an unbounded source: no progress bar", client.job_name)
        return None
    return asyncio.get_running_loop().create_task(_draw(client), name=f"progress of {client.job_name}")


async def _draw(client: JobClient) -> None:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=None),
        TextColumn("{task.completed:>12,.0f} records"),
        TextColumn("{task.fields[rate]:>10,.0f}/s"),
        TimeElapsedColumn(),
    )
    progress = Progress(*columns, console=Console(stderr=True), transient=False)
    bars: dict[str, TaskID] = {}
    job_done = client._task
    with progress:
        while True:
            ended = job_done.done()
            snap = client.get_metrics_snapshot()
            for v in snap["vertices"]:
                if not v["source"]:
                    continue
                records = v["metrics"]["numRecordsIn"]  # of a source: the records it read
                if v["id"] not in bars:
                    name = v["name"].split(" -> ")[0][:30]
                    bars[v["id"]] = progress.add_task(name, total=None, rate=0.0)
                progress.update(
                    bars[v["id"]],
                    completed=records,
                    rate=v["metrics"]["numRecordsInPerSecond"],
                    total=records if v["status"] == "FINISHED" else None,
                )
            if ended:
                break
            await asyncio.wait({job_done}, timeout=REFRESH_S)
