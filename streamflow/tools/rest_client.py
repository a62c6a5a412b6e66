"""A small synchronous client of a running job's REST endpoint (Flink's REST API shapes).

Used by ``streamflow savepoint`` and ``streamflow cancel``. ``JOB_URL`` is the
job's endpoint (``http://127.0.0.1:8081``: the only job served there is used)
or one job's URL (``http://127.0.0.1:8081/jobs/<id>``). The standard library's
``urllib`` is enough for a handful of JSON requests and keeps the command free
of an event loop.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..errors import StreamflowError


class RestError(StreamflowError, RuntimeError):
    """The endpoint could not be reached or answered with an error."""


def _request(method: str, url: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors="replace")
        try:
            detail = "; ".join(json.loads(detail).get("errors", [detail]))
        except (ValueError, AttributeError):
            pass  # not Flink's {"errors": [...]} shape: show the body as it is
        raise RestError(f"{method} {url} failed with HTTP {e.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise RestError(f"cannot reach {url}: {reason} (is the job running with rest.port set?)") from None
    return json.loads(raw) if raw else {}


def job_url(url: str) -> str:
    """``.../jobs/<id>`` for a job URL, or for the single job served at an endpoint URL."""
    url = url.rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if not parts.scheme or not parts.netloc:
        raise RestError(f"{url!r} is not a URL; expected e.g. http://127.0.0.1:8081")
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) >= 2 and segments[-2] == "jobs":
        return url
    jobs = _request("GET", f"{url}/jobs").get("jobs", [])
    if not jobs:
        raise RestError(f"no job is served at {url}")
    if len(jobs) > 1:
        ids = ", ".join(j["id"] for j in jobs)
        raise RestError(f"{url} serves several jobs ({ids}): give {url}/jobs/<id>")
    return f"{url}/jobs/{jobs[0]['id']}"


def trigger_savepoint(url: str, target_directory: str | None, cancel_job: bool, timeout_s: float) -> str:
    """Trigger a savepoint (Flink's POST /jobs/<id>/savepoints), wait for it; its location."""
    job = job_url(url)
    body: dict[str, Any] = {"cancel-job": cancel_job}
    if target_directory is not None:
        body["target-directory"] = target_directory
    trigger = _request("POST", f"{job}/savepoints", body)
    return _wait_for_savepoint(job, trigger["request-id"], timeout_s)


def stop_with_savepoint(url: str, target_directory: str, drain: bool, timeout_s: float) -> str:
    """Stop the job with a savepoint (Flink's POST /jobs/<id>/stop), wait for it; its location."""
    job = job_url(url)
    trigger = _request("POST", f"{job}/stop", {"targetDirectory": target_directory, "drain": drain})
    return _wait_for_savepoint(job, trigger["request-id"], timeout_s)


def _wait_for_savepoint(job: str, request_id: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        status = _request("GET", f"{job}/savepoints/{request_id}")
        if status["status"]["id"] == "COMPLETED":
            op = status.get("operation", {})
            if "failure-cause" in op:
                raise RestError(f"savepoint failed: {op['failure-cause'].get('stack-trace', op)}")
            return str(op["location"])
        if time.monotonic() > deadline:
            raise RestError(f"savepoint {request_id} did not complete within {timeout_s:.0f} s")
        time.sleep(0.1)


def cancel(url: str) -> None:
    """Cancel the job (Flink's PATCH /jobs/<id>?mode=cancel)."""
    _request("PATCH", f"{job_url(url)}?mode=cancel")


def get_json(url: str) -> Any:
    return _request("GET", url)
