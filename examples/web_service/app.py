"""A streaming job embedded in an aiohttp web service: metrics, savepoints, resume on restart.

The service runs the job in its own event loop (``execute_async``) and serves

* ``GET /totals``   the job's results so far (running totals per sensor),
* ``GET /metrics``  the job's metrics in Prometheus text, for the service's own scraper,
* ``GET /job``      status, restore source and a few metrics as JSON,
* ``POST /savepoint``  a savepoint now (``{"location": ...}``).

Shutting the service down (SIGTERM, SIGINT) takes a savepoint and cancels the job; the next
start resumes from that savepoint, so the totals go on from where they were.

Run: python examples/web_service/app.py --port 8080 --state-dir /tmp/sensors
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
from pathlib import Path
from typing import Any

from aiohttp import web

import streamflow as sf
from streamflow.rest import prometheus_content_type, prometheus_text

log = logging.getLogger("sensor-service")
JOB_NAME = "sensor totals"


class Totals(sf.SinkFunction):
    """Keeps the latest running total per sensor where the web handlers can read it."""

    def __init__(self) -> None:
        self.by_sensor: dict[str, dict[str, int]] = {}

    def invoke(self, value: tuple[str, int, int]) -> None:
        sensor, total, seq = value
        self.by_sensor[sensor] = {"total": total, "last_seq": seq}


async def pace(reading: tuple[str, int, int]) -> tuple[str, int, int]:
    await asyncio.sleep(0.001)  # a reading every millisecond or so: the source is backpressured
    return reading


def build_job(state_dir: Path, totals: Totals, savepoint: str | None) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(1_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(state_dir / "checkpoints"))
    if savepoint is not None:
        env.configure({"execution.savepoint.path": savepoint})
    (
        env.from_collection(lambda: ((f"s{i % 4}", i % 10, i) for i in itertools.count())).uid("readings")
        .map(pace).uid("pace")
        .key_by(lambda r: r[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1], b[2])).uid("running-totals")
        .add_sink(totals).uid("totals")
    )  # fmt: skip
    return env


async def job_context(app: web.Application) -> Any:
    """Start the job with the service; savepoint and stop it when the service shuts down."""
    state_dir: Path = app["state_dir"]
    marker = state_dir / "latest-savepoint"
    savepoint = marker.read_text().strip() if marker.exists() else None
    totals = Totals()
    env = build_job(state_dir, totals, savepoint)
    client = await env.execute_async(JOB_NAME)
    log.info("job started%s", f", resumed from {savepoint}" if savepoint else "")
    app["client"], app["totals"], app["restored_from"] = client, totals, savepoint
    yield
    if client.get_job_status() is sf.JobStatus.RUNNING:
        location = await client.trigger_savepoint(str(state_dir / "savepoints"))  # a new savepoint-*
        marker.write_text(location)
        log.info("savepoint on shutdown: %s", location)
    await client.cancel()


async def get_totals(request: web.Request) -> web.Response:
    return web.json_response(request.app["totals"].by_sensor)


async def get_metrics(request: web.Request) -> web.Response:
    body = prometheus_text(request.app["client"])
    return web.Response(body=body, headers={"Content-Type": prometheus_content_type()})


async def get_job(request: web.Request) -> web.Response:
    client: sf.JobClient = request.app["client"]
    metrics = client.get_metrics()
    return web.json_response(
        {
            "job_id": client.get_job_id(),
            "status": client.get_job_status().value,
            "restored_from": request.app["restored_from"],
            "checkpoints": metrics.get("checkpoints.numberOfCompletedCheckpoints", 0),
            "records_per_second": metrics.get("pace[0].numRecordsIn", 0),
        }
    )


async def post_savepoint(request: web.Request) -> web.Response:
    client: sf.JobClient = request.app["client"]
    target = request.app["state_dir"] / "savepoints"  # each savepoint: a new savepoint-* in it
    try:
        location = await client.trigger_savepoint(str(target))
    except Exception as exc:  # the caller gets the cause; the service keeps running
        log.warning("savepoint failed: %r", exc)
        return web.json_response({"error": repr(exc)}, status=500)
    return web.json_response({"location": location})


def make_app(state_dir: Path) -> web.Application:
    app = web.Application()
    app["state_dir"] = state_dir
    app.cleanup_ctx.append(job_context)
    app.router.add_get("/totals", get_totals)
    app.router.add_get("/metrics", get_metrics)
    app.router.add_get("/job", get_job)
    app.router.add_post("/savepoint", post_savepoint)
    return app


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--state-dir", type=Path, default=Path("sensor-service-state"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.state_dir.mkdir(parents=True, exist_ok=True)
    web.run_app(make_app(args.state_dir), host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
