"""``/metrics``: the job's metrics in the Prometheus text exposition format.

Built with ``prometheus_client`` (a custom collector over the job's metric
snapshot, read at scrape time) rather than hand-written text: the library gets
escaping, the exposition format's details and its content type right, and is
what Prometheus users already run. Names follow Flink's Prometheus reporter
(``<prefix>_<scope>_<metricName>``, labels for job, task, subtask, operator);
like that reporter, counters are exposed as gauges (a restart resets them).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily

from ..runtime.metrics import Distribution

PREFIX = "streamflow"
_BAD = re.compile(r"[^a-zA-Z0-9_:]")
_USER_KEY = re.compile(r"^(?P<uid>.*)\[(?P<sub>\d+)\]\.(?P<name>.+)$")

TASK_METRICS = (
    "numRecordsIn", "numRecordsOut", "numRecordsInPerSecond", "numRecordsOutPerSecond",
    "busyTimeMsPerSecond", "idleTimeMsPerSecond", "backPressuredTimeMsPerSecond",
    "inPoolUsage", "outPoolUsage", "currentInputWatermark", "currentOutputWatermark",
    "numRecordsDeadLettered", "lastCheckpointAlignmentMs", "numFiredTimers",
)  # fmt: skip
OPERATOR_METRICS = (
    "numRecordsIn", "numRecordsOut", "numRecordsSideOut",
    "currentInputWatermark", "currentOutputWatermark", "watermarkLag",
)  # fmt: skip


def metric_name(*parts: str) -> str:
    return _BAD.sub("_", "_".join((PREFIX, *parts)))


class _JobCollector:
    def __init__(self, client: Any) -> None:
        self._client = client

    def collect(self) -> Iterator[Metric]:
        client = self._client
        snap = client.get_metrics_snapshot()
        job = snap["job"]
        base = {"job_id": job["id"], "job_name": job["name"]}

        def family(scope: str, name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(metric_name(scope, name), doc, labels=[*base, *labels])

        task_labels = ["task_name", "vertex_id", "subtask_index"]
        tasks = {m: family("task", m, f"Flink's task metric {m}", task_labels) for m in TASK_METRICS}
        op_labels = ["task_name", "operator_uid", "operator_name", "subtask_index"]
        ops = {m: family("operator", m, f"Flink's operator metric {m}", op_labels) for m in OPERATOR_METRICS}
        for v in snap["vertices"]:
            for s in v["subtasks"]:
                values = [*base.values(), v["name"], v["id"], str(s["subtask"])]
                for m, fam in tasks.items():
                    if s.get(m) is not None:
                        fam.add_metric(values, float(s[m]))
                for op in s["operators"]:
                    op_values = [*base.values(), v["name"], op["uid"], op["name"], str(s["subtask"])]
                    for m, fam in ops.items():
                        if op.get(m) is not None:
                            fam.add_metric(op_values, float(op[m]))
        yield from tasks.values()
        yield from ops.values()

        fill = family("channel", "queueFill", "queued records / capacity of a channel", ["channel"])
        blocked = family(
            "channel", "backPressuredTimeMs", "time the channel's writer waited for room", ["channel"]
        )
        for ch in snap["channels"]:
            fill.add_metric([*base.values(), ch["name"]], ch["queueFill"])
            blocked.add_metric([*base.values(), ch["name"]], ch["backPressuredTimeMs"])
        yield fill
        yield blocked

        ck = snap["checkpoints"]
        latest = ck["latest"]["completed"] or {}
        job_values = list(base.values())
        for name, value, doc in (
            ("numRestarts", job["numRestarts"], "restarts of the job (Flink's numRestarts)"),
            ("numberOfCompletedCheckpoints", ck["counts"]["completed"], "completed checkpoints"),
            ("numberOfFailedCheckpoints", ck["counts"]["failed"], "failed checkpoints"),
            ("numberOfInProgressCheckpoints", ck["counts"]["in_progress"], "checkpoints in progress"),
            ("lastCheckpointDuration", latest.get("end_to_end_duration") or 0, "ms"),
            ("lastCheckpointSize", latest.get("state_size") or 0, "bytes"),
            ("lastCheckpointAlignmentDuration", latest.get("alignment_duration") or 0, "ms"),
        ):
            fam = family("job", name, doc, [])
            fam.add_metric(job_values, float(value))
            yield fam
        status = family("job", "status", "1 for the job's current status", ["status"])
        status.add_metric([*job_values, job["status"]], 1.0)
        yield status
        failed = ck["latest"]["failed"]
        if failed is not None:
            cause = family("job", "lastCheckpointFailure", "id of the last failed checkpoint", ["cause"])
            cause.add_metric([*job_values, str(failed.get("failure_message"))], float(failed["id"]))
            yield cause
        yield from self._user_metrics(client, base)

    def _user_metrics(self, client: Any, base: dict[str, str]) -> Iterator[Metric]:
        """Metric groups (user functions, operators, connectors): ``<uid>[<subtask>].<name>``."""
        families: dict[str, Metric] = {}
        labels = [*base, "operator_uid", "subtask_index"]
        for key, metric in list(client.execution.metrics.items()):
            m = _USER_KEY.match(key)
            if m is None:
                continue
            values = [*base.values(), m["uid"], m["sub"]]
            name = metric_name("operator", m["name"])
            if isinstance(metric, Distribution):
                fam = families.get(name) or SummaryMetricFamily(name, "distribution", labels=labels)
                fam.add_metric(values, count_value=metric.count, sum_value=metric.sum)  # type: ignore[attr-defined]
            else:
                value = client_value(metric)
                if value is None:
                    continue
                fam = families.get(name) or GaugeMetricFamily(name, "metric group metric", labels=labels)
                fam.add_metric(values, float(value))  # type: ignore[attr-defined]
            families[name] = fam
        yield from families.values()


def client_value(metric: Any) -> float | None:
    from ..runtime.metrics import read_metrics

    values = read_metrics({"m": metric})
    return None if "m" not in values else float(values["m"])


def render(client: Any) -> bytes:
    """The exposition text of one job (a fresh registry per scrape: nothing global)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_JobCollector(client))
    return generate_latest(registry)


def content_type() -> str:
    """The classic text format's content type (0.0.4), which every Prometheus version scrapes."""
    from prometheus_client import exposition

    return str(getattr(exposition, "CONTENT_TYPE_PLAIN_0_0_4", exposition.CONTENT_TYPE_LATEST))
