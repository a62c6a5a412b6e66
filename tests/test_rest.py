"""The job's REST API, /metrics and the CLI against a running job (a real subprocess job with a
slow sink, driven over HTTP)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from jobproc import ROOT, job_process
from prometheus_client.parser import text_string_to_metric_families

import streamflow as sf


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def wait_for(what: str, fn: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def streamflow(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamflow", *args], capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_rest_api_metrics_and_cli_against_a_running_job(tmp_path: Path) -> None:
    with job_process("--checkpoint-dir", str(tmp_path / "ck")) as job:
        url = job.url()
        assert url.startswith("http://127.0.0.1:")  # loopback unless told otherwise
        jobs = get(f"{url}/jobs")["jobs"]
        assert len(jobs) == 1 and jobs[0]["status"] == "RUNNING"
        jid = jobs[0]["id"]
        detail = get(f"{url}/jobs/{jid}")
        assert detail["name"] == "slow job" and detail["state"] == "RUNNING"
        names = [v["name"] for v in detail["vertices"]]
        assert names[0] == "collection" and names[2:] == ["slow sink", "Sink"]
        source, stamps, slow, _ = detail["plan"]["nodes"]
        assert slow["inputs"][0]["id"] == stamps["id"] and stamps["inputs"][0]["id"] == source["id"]

        # the source is backpressured by the slow sink; checkpoints complete meanwhile
        def source_backpressured() -> bool:
            bp = get(f"{url}/jobs/{jid}/vertices/{source['id']}/backpressure")
            return bp["backpressure-level"] == "high" and bp["subtasks"][0]["ratio"] > 0.5

        wait_for("a backpressured source", source_backpressured)
        ck = wait_for(
            "a completed checkpoint",
            lambda: (c := get(f"{url}/jobs/{jid}/checkpoints"))["counts"]["completed"] and c,
        )
        done = ck["latest"]["completed"]
        assert done["status"] == "COMPLETED" and done["state_size"] > 0
        assert Path(done["external_path"]).is_dir()
        assert get(f"{url}/jobs/{jid}/vertices/{slow['id']}/backpressure")["backpressure-level"] == "ok"
        watermarks = wait_for(
            "a watermark at the slow task",
            lambda: {
                w["id"]: int(w["value"]) for w in get(f"{url}/jobs/{jid}/vertices/{slow['id']}/watermarks")
            },
        )
        assert watermarks["0.currentInputWatermark"] >= 1_700_000_000_000

        # metrics: Flink's names through the REST API and in Prometheus text
        metrics = {m["id"]: m["value"] for m in get(f"{url}/jobs/{jid}/metrics")}
        assert int(metrics["slow[0].numRecordsIn"]) > 0
        assert int(metrics["slow[0].slowRecords"]) > 0  # a user counter from the metric group
        assert "collection (1/1).backPressuredTimeMsPerSecond" in metrics
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = resp.read().decode()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        bp = families["streamflow_task_backPressuredTimeMsPerSecond"].samples
        assert any(s.labels["task_name"] == "collection" and s.value > 500 for s in bp)
        assert any(s.value > 0 for s in families["streamflow_task_numRecordsOutPerSecond"].samples)
        assert families["streamflow_job_numberOfCompletedCheckpoints"].samples[0].value >= 1
        assert {s.labels["channel"] for s in families["streamflow_channel_queueFill"].samples} == {
            f"collection[0] -> {names[1]}[0]",
            f"{names[1]}[0] -> slow sink[0]",
            "slow sink[0] -> Sink[0]",
        }
        assert families["streamflow_operator_slowRecords"].samples[0].labels["operator_uid"] == "slow"
        assert families["streamflow_operator_valueSize"].type == "summary"
        assert families["streamflow_operator_slowMeter"].samples[0].value > 0

        # errors in Flink's shape
        with pytest.raises(urllib.error.HTTPError) as err:
            get(f"{url}/jobs/0000/checkpoints")
        assert err.value.code == 404 and "not found" in json.loads(err.value.read())["errors"][0]

        # the CLI: a savepoint of the running job, then cancel with a savepoint
        sp = streamflow("savepoint", url, str(tmp_path / "savepoints"))
        assert sp.returncode == 0, sp.stderr
        location = sp.stdout.strip().rsplit(" ", 1)[-1]
        assert Path(location).parent == tmp_path / "savepoints"
        inspected = json.loads(streamflow("checkpoints", "inspect", location, "--json").stdout)
        assert inspected["kind"] == "savepoint" and inspected["valid"] and "numbers" in inspected["operators"]
        cancel = streamflow("cancel", f"{url}/jobs/{jid}", "--with-savepoint", str(tmp_path / "final"))
        assert cancel.returncode == 0, cancel.stderr
        assert "job cancelled" in cancel.stdout
        assert job.wait(30) == 0
        assert any("cancel" in line for line in job.log)
        assert len(list((tmp_path / "final").iterdir())) == 1
    # the endpoint closed with the job
    with pytest.raises(urllib.error.URLError):
        get(f"{url}/jobs")
    refused = streamflow("cancel", url)
    assert refused.returncode == 1 and "cannot reach" in refused.stderr


async def test_rest_is_off_by_default_and_serves_a_configured_port() -> None:
    env = sf.StreamExecutionEnvironment()
    env.from_collection(list(range(10))).add_sink(lambda x: None)
    client = await env.execute_async("quiet")
    assert client.rest is None
    await client.get_job_execution_result()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = sf.StreamExecutionEnvironment()
    env.configure({"rest.port": port})
    env.from_collection(lambda: iter(range(10**9))).add_sink(lambda x: None)
    client = await env.execute_async("served")
    assert client.rest.url == f"http://127.0.0.1:{port}"
    await client.cancel()
    await client.rest.wait_stopped()


async def test_user_metric_group_counter_gauge_meter_distribution() -> None:
    class Measured(sf.MapFunction):
        def open(self, ctx: sf.RuntimeContext) -> None:
            g = ctx.get_metrics_group()
            self.c, self.m, self.d = g.counter("c"), g.meter("m"), g.distribution("d")
            g.add_group("nested").gauge("g", lambda: 42)

        def map(self, v: int) -> int:
            self.c.inc()
            self.m.mark_event(2)
            self.d.update(v)
            return v

    env = sf.StreamExecutionEnvironment()
    env.from_collection(list(range(1, 11))).map(Measured()).uid("measured").add_sink(lambda x: None)
    result = await (await env.execute_async("metric groups")).get_job_execution_result()
    m = result.metrics
    assert m["measured[0].c"] == 10 and m["measured[0].m"] == 20 and m["measured[0].nested.g"] == 42
    d = [m[f"measured[0].d.{k}"] for k in ("count", "sum", "min", "max", "mean")]
    assert d == [10, 55, 1, 10, 5.5]
    assert m["measured[0].numRecordsIn"] == m["measured[0].numRecordsOut"] == 10
