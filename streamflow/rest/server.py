"""The job's HTTP endpoint, served by aiohttp in the job's own event loop.

Started by ``execute_async`` when ``rest.port`` is configured (Flink's key;
off by default; bound to ``rest.address``, 127.0.0.1 unless told otherwise;
port 0 picks a free one: see :attr:`RestServer.url`), stopped when the job ends.
aiohttp is a well-kept asyncio server that runs in the caller's loop, so the
endpoint needs no thread and reads the job's state directly.

Routes (Flink's REST API shapes where Flink has the route):

* ``GET /`` the live job page (``static/index.html``, plain HTML and JS);
* ``GET /config``; ``GET /jobs``; ``GET /jobs/overview``; ``GET /jobs/<id>`` (with the
  plan and per-vertex metrics); ``GET /jobs/<id>/checkpoints``;
  ``GET /jobs/<id>/checkpoints/config``; ``GET /jobs/<id>/exceptions``;
  ``GET /jobs/<id>/vertices/<vid>``; ``.../backpressure``; ``.../watermarks``;
  ``GET /jobs/<id>/metrics[?get=a,b]``;
* ``POST /jobs/<id>/savepoints`` ``{"target-directory", "cancel-job"}`` -> ``{"request-id"}``;
  ``GET /jobs/<id>/savepoints/<request-id>``: Flink's asynchronous operation
  (``IN_PROGRESS``, then ``COMPLETED`` with ``location`` or ``failure-cause``);
  the savepoint goes to a new ``savepoint-<job id prefix>-<random>`` directory
  inside the target directory, as Flink names them (``JobClient.trigger_savepoint``), and
  ``location`` is that directory (``cancel-job``: Flink's deprecated
  cancel-with-savepoint, a savepoint and then a cancel);
* ``POST /jobs/<id>/stop`` ``{"targetDirectory", "drain"}`` -> ``{"request-id"}``: Flink's
  stop-with-savepoint (``JobClient.stop_with_savepoint``: a synchronous savepoint, the job ends
  FINISHED), its status at ``GET /jobs/<id>/savepoints/<request-id>``;
* ``PATCH /jobs/<id>?mode=cancel`` (Flink) and ``POST /jobs/<id>/cancel``;
* ``GET /jobs/<id>/snapshot``: everything the page draws, in one response (streamflow's own);
* ``GET /metrics``: Prometheus text.

Errors are Flink's ``{"errors": [...]}`` with a 4xx/5xx status.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import traceback
from importlib import resources
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..runtime.events import MAX_WATERMARK
from . import prometheus

if TYPE_CHECKING:
    from ..runtime.job import JobClient

_log = logging.getLogger("streamflow.rest")
REPORT_GRACE_S = 10.0


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"errors": [message]}, status=status)


class RestServer:
    def __init__(self, client: JobClient, host: str = "127.0.0.1", port: int = 0) -> None:
        self.client = client
        self.host = host
        self.port = port
        self.start_time_ms = client.execution.clock.now_ms()
        self.end_time_ms: int | None = None
        self._runner: web.AppRunner | None = None
        self._savepoints: dict[str, asyncio.Task[str]] = {}
        self._stopping: asyncio.Task[None] | None = None
        # stop-with-savepoint requests whose result nobody fetched yet: the endpoint stays up
        # (at most REPORT_GRACE_S) after the job ended so the caller learns the location
        self._unreported: set[str] = set()
        self._reported = asyncio.Event()
        app = web.Application()
        r = app.router
        r.add_get("/", self._index)
        r.add_get("/static/{name}", self._static)
        r.add_get("/config", self._config)
        r.add_get("/metrics", self._prometheus)
        r.add_get("/jobs", self._jobs)
        r.add_get("/jobs/overview", self._jobs_overview)
        r.add_get("/jobs/{jid}", self._job)
        r.add_patch("/jobs/{jid}", self._patch_job)
        r.add_post("/jobs/{jid}/cancel", self._cancel)
        r.add_get("/jobs/{jid}/snapshot", self._snapshot)
        r.add_get("/jobs/{jid}/metrics", self._job_metrics)
        r.add_get("/jobs/{jid}/exceptions", self._exceptions)
        r.add_get("/jobs/{jid}/checkpoints", self._checkpoints)
        r.add_get("/jobs/{jid}/checkpoints/config", self._checkpoint_config)
        r.add_post("/jobs/{jid}/savepoints", self._trigger_savepoint)
        r.add_get("/jobs/{jid}/savepoints/{rid}", self._savepoint_status)
        r.add_post("/jobs/{jid}/stop", self._stop_with_savepoint)
        r.add_get("/jobs/{jid}/vertices/{vid}", self._vertex)
        r.add_get("/jobs/{jid}/vertices/{vid}/backpressure", self._backpressure)
        r.add_get("/jobs/{jid}/vertices/{vid}/watermarks", self._watermarks)
        self.app = app

    # -- lifecycle ------------------------------------------------------------
    async def start(self) -> RestServer:
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            raise OSError(
                e.errno, f"cannot serve the job's REST endpoint on {self.host}:{self.port}: {e}"
            ) from e
        self._runner = runner
        if runner.addresses:  # the bound (host, port): port 0 picked a free one
            self.port = int(runner.addresses[0][1])
        _log.info("job %r: page, REST API and /metrics at %s", self.client.job_name, self.url)
        return self

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        if self._unreported:
            try:
                await asyncio.wait_for(self._reported.wait(), REPORT_GRACE_S)
            except TimeoutError:
                _log.warning("job %r: nobody fetched the result of savepoint requests %s",
                             self.client.job_name, sorted(self._unreported))  # fmt: skip
        if self._runner is not None:
            runner, self._runner = self._runner, None
            for task in self._savepoints.values():
                task.cancel()
            await runner.cleanup()
            _log.debug("job %r: REST endpoint %s closed", self.client.job_name, self.url)

    def stop_soon(self) -> None:
        """Close once the job ended (a done callback of the job's task)."""
        self.end_time_ms = self.client.execution.clock.now_ms()
        if self._stopping is None:
            self._stopping = asyncio.get_running_loop().create_task(self.stop())

    async def wait_stopped(self) -> None:
        if self._stopping is not None:
            await self._stopping
        else:
            await self.stop()

    # -- helpers --------------------------------------------------------------
    def _check_job(self, request: web.Request) -> None:
        jid = request.match_info["jid"]
        if jid != self.client.job_id:
            raise web.HTTPNotFound(
                text=f'{{"errors": ["Job {jid} not found (this endpoint serves {self.client.job_id})"]}}',
                content_type="application/json",
            )

    def _vertex_of(self, request: web.Request, snap: dict[str, Any]) -> dict[str, Any]:
        self._check_job(request)
        vid = request.match_info["vid"]
        for v in snap["vertices"]:
            if v["id"] == vid:
                return v
        raise web.HTTPNotFound(
            text=f'{{"errors": ["vertex {vid} not found"]}}', content_type="application/json"
        )

    def _job_summary(self) -> dict[str, Any]:
        c = self.client
        now = c.execution.clock.now_ms()
        end = self.end_time_ms
        return {
            "jid": c.job_id,
            "name": c.job_name,
            "state": c.get_job_status().value,
            "start-time": self.start_time_ms,
            "end-time": -1 if end is None else end,
            "duration": (end or now) - self.start_time_ms,
            "now": now,
        }

    # -- pages ------------------------------------------------------------------
    async def _index(self, request: web.Request) -> web.StreamResponse:
        return await self._static_file("index.html")

    async def _static(self, request: web.Request) -> web.StreamResponse:
        return await self._static_file(request.match_info["name"])

    async def _static_file(self, name: str) -> web.StreamResponse:
        if "/" in name or name.startswith("."):
            return _error(404, f"no such file {name!r}")
        resource = resources.files("streamflow.rest").joinpath("static", name)
        if not resource.is_file():
            return _error(404, f"no such file {name!r}")
        kind = {"html": "text/html", "js": "text/javascript", "css": "text/css", "svg": "image/svg+xml"}
        return web.Response(
            body=resource.read_bytes(), content_type=kind.get(name.rsplit(".", 1)[-1], "text/plain")
        )

    async def _config(self, request: web.Request) -> web.Response:
        from .. import __version__

        return web.json_response({"refresh-interval": 1000, "flink-version": f"streamflow {__version__}"})

    async def _prometheus(self, request: web.Request) -> web.Response:
        body = prometheus.render(self.client)
        return web.Response(body=body, headers={"Content-Type": prometheus.content_type()})

    # -- jobs -------------------------------------------------------------------
    async def _jobs(self, request: web.Request) -> web.Response:
        c = self.client
        return web.json_response({"jobs": [{"id": c.job_id, "status": c.get_job_status().value}]})

    async def _jobs_overview(self, request: web.Request) -> web.Response:
        return web.json_response({"jobs": [self._job_summary()]})

    async def _job(self, request: web.Request) -> web.Response:
        self._check_job(request)
        snap = self.client.get_metrics_snapshot()
        body = self._job_summary()
        body["vertices"] = [
            {
                "id": v["id"],
                "name": v["name"],
                "parallelism": v["parallelism"],
                "status": v["status"],
                "metrics": {
                    "read-records": v["metrics"]["numRecordsIn"],
                    "write-records": v["metrics"]["numRecordsOut"],
                },
            }
            for v in snap["vertices"]
        ]
        body["plan"] = {
            "jid": self.client.job_id,
            "name": self.client.job_name,
            "nodes": [
                {
                    "id": v["id"],
                    "parallelism": v["parallelism"],
                    "operator": " -> ".join(op["name"] for op in v["operators"]),
                    "description": v["name"],
                    "inputs": [
                        {
                            "num": i,
                            "id": e["id"],
                            "ship_strategy": e["ship_strategy"],
                            "exchange": "pipelined",
                        }
                        for i, e in enumerate(v["inputs"])
                    ],
                }
                for v in snap["vertices"]
            ],
        }
        return web.json_response(body)

    async def _snapshot(self, request: web.Request) -> web.Response:
        self._check_job(request)
        snap = self.client.get_metrics_snapshot()
        snap["job"].update(self._job_summary())
        return web.json_response(snap)

    async def _job_metrics(self, request: web.Request) -> web.Response:
        self._check_job(request)
        metrics = self.client.get_metrics()
        wanted = request.query.get("get")
        keys = wanted.split(",") if wanted else sorted(metrics)
        return web.json_response([{"id": k, "value": str(metrics[k])} for k in keys if k in metrics])

    async def _exceptions(self, request: web.Request) -> web.Response:
        self._check_job(request)
        cause = self.client.last_failure_cause
        return web.json_response({"root-exception": cause, "all-exceptions": [], "truncated": False})

    async def _patch_job(self, request: web.Request) -> web.Response:
        self._check_job(request)
        if request.query.get("mode", "cancel") != "cancel":
            return _error(400, f"unsupported mode {request.query.get('mode')!r} (only 'cancel')")
        return await self._cancel(request)

    async def _cancel(self, request: web.Request) -> web.Response:
        self._check_job(request)
        _log.info("job %r: cancel requested over REST", self.client.job_name)
        asyncio.get_running_loop().create_task(self.client.cancel())
        return web.json_response({}, status=202)

    # -- checkpoints and savepoints -----------------------------------------------
    async def _checkpoints(self, request: web.Request) -> web.Response:
        self._check_job(request)
        return web.json_response(self.client.checkpoint_stats.to_json())

    async def _checkpoint_config(self, request: web.Request) -> web.Response:
        self._check_job(request)
        ck = self.client.execution.config.checkpoint
        return web.json_response(
            {
                "mode": "exactly_once" if ck.mode.value == "exactly_once" else "at_least_once",
                "interval": ck.interval_ms if ck.interval_ms is not None else -1,
                "timeout": ck.timeout_ms,
                "min_pause": ck.min_pause_ms,
                "max_concurrent": ck.max_concurrent,
                "unaligned_checkpoints": ck.unaligned,
                "aligned_checkpoint_timeout": ck.aligned_timeout_ms or 0,
                # Flink's label: the storage class's simple name
                "checkpoint_storage": type(ck.get_checkpoint_storage()).__name__,
            }
        )

    async def _trigger_savepoint(self, request: web.Request) -> web.Response:
        self._check_job(request)
        try:
            body = await request.json() if request.can_read_body else {}
        except ValueError:
            return _error(400, "the request body must be JSON")
        target = body.get("target-directory")
        if not target:
            return _error(400, "target-directory is required (there is no default savepoint directory)")
        cancel_job = bool(body.get("cancel-job", False))
        request_id = secrets.token_hex(16)
        if cancel_job:
            self._unreported.add(request_id)
            self._reported.clear()
        self._savepoints[request_id] = asyncio.get_running_loop().create_task(
            self._savepoint(str(target), cancel_job)
        )
        return web.json_response({"request-id": request_id}, status=202)

    async def _stop_with_savepoint(self, request: web.Request) -> web.Response:
        """Flink's ``POST /jobs/<id>/stop`` (``StopWithSavepointRequestBody``)."""
        self._check_job(request)
        try:
            body = await request.json() if request.can_read_body else {}
        except ValueError:
            return _error(400, "the request body must be JSON")
        target = body.get("targetDirectory")
        if not target:
            return _error(400, "targetDirectory is required (there is no default savepoint directory)")
        drain = bool(body.get("drain", False))
        _log.info("job %r: stop-with-savepoint into %s (drain: %s) requested over REST", self.client.job_name,
                  target, drain)  # fmt: skip
        request_id = secrets.token_hex(16)
        self._unreported.add(request_id)  # the job ends: the caller must still learn the location
        self._reported.clear()
        self._savepoints[request_id] = asyncio.get_running_loop().create_task(
            self.client.stop_with_savepoint(drain, str(target))
        )
        return web.json_response({"request-id": request_id}, status=202)

    async def _savepoint(self, target: str, cancel_job: bool) -> str:
        _log.info("job %r: savepoint into %s requested over REST", self.client.job_name, target)
        location = await self.client.trigger_savepoint(target)
        if cancel_job:
            await self.client.cancel()
        return location

    async def _savepoint_status(self, request: web.Request) -> web.Response:
        self._check_job(request)
        task = self._savepoints.get(request.match_info["rid"])
        if task is None:
            return _error(404, f"no savepoint request {request.match_info['rid']}")
        if not task.done():
            return web.json_response({"status": {"id": "IN_PROGRESS"}})
        self._unreported.discard(request.match_info["rid"])
        if not self._unreported:
            self._reported.set()
        exc = task.exception() if not task.cancelled() else asyncio.CancelledError("the job ended")
        if exc is not None:
            trace = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            return web.json_response(
                {
                    "status": {"id": "COMPLETED"},
                    "operation": {"failure-cause": {"class": type(exc).__name__, "stack-trace": trace}},
                }
            )
        return web.json_response({"status": {"id": "COMPLETED"}, "operation": {"location": task.result()}})

    # -- vertices -----------------------------------------------------------------
    async def _vertex(self, request: web.Request) -> web.Response:
        v = self._vertex_of(request, self.client.get_metrics_snapshot())
        return web.json_response(v)

    async def _backpressure(self, request: web.Request) -> web.Response:
        v = self._vertex_of(request, self.client.get_metrics_snapshot())
        subtasks = [
            {
                "subtask": s["subtask"],
                "backpressure-level": s["backpressureLevel"],
                "ratio": s["backPressuredRatio"],
                "idleRatio": s["idleTimeMsPerSecond"] / 1000,
                "busyRatio": s["busyTimeMsPerSecond"] / 1000,
            }
            for s in v["subtasks"]
        ]
        return web.json_response(
            {
                "status": "ok",
                "backpressure-level": v["backpressureLevel"],
                "end-timestamp": self.client.execution.clock.now_ms(),
                "subtasks": subtasks,
            }
        )

    async def _watermarks(self, request: web.Request) -> web.Response:
        v = self._vertex_of(request, self.client.get_metrics_snapshot())
        out = []
        for s in v["subtasks"]:
            for key in ("currentInputWatermark", "currentOutputWatermark"):
                value = s[key]
                if value is not None:
                    out.append({"id": f"{s['subtask']}.{key}", "value": str(min(value, MAX_WATERMARK))})
        return web.json_response(out)


async def serve_job(client: JobClient, host: str, port: int) -> RestServer:
    """Serve ``client``'s job until it ends."""
    server = await RestServer(client, host, port).start()
    client.rest = server
    client._task.add_done_callback(lambda _: server.stop_soon())
    return server
