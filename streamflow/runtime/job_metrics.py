"""Reading a running job's metrics: per vertex, subtask, operator and channel, with Flink's names.

The runtime keeps only cumulative numbers, updated per batch or only when a
task has to wait: records in and out (tasks, operators through their
:class:`MeteredOutput`, channels), loop time spent idle (waiting for input)
and backpressured (waiting for room in a full output channel), watermarks.
This reader turns them into what Flink shows: ``numRecordsInPerSecond``,
``busyTimeMsPerSecond``, ``idleTimeMsPerSecond``, ``backPressuredTimeMsPerSecond``,
``inPoolUsage``/``outPoolUsage`` (queue fill), ``currentInputWatermark``,
``currentOutputWatermark`` and the watermark lag. Rates come from successive
samples of the cumulative numbers, taken when somebody reads (at most one
kept per ``SAMPLE_EVERY_S``; the rate spans up to ``WINDOW_S``, or the time
since the task started while no older sample exists), so reading costs the
job nothing between reads.

Backpressure level per subtask, as Flink's web UI: the share of time the
subtask was blocked on output: ``ok`` up to 10 %, ``low`` up to 50 %, ``high``
above.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from .events import MAX_WATERMARK, MIN_WATERMARK
from .metrics import Counter, Gauge, read_metrics

if TYPE_CHECKING:
    from ..graph import JobVertex
    from .job import JobClient
    from .task import Task

SAMPLE_EVERY_S = 0.5


def loop_time() -> float:
    """The event loop's monotonic time (the tasks' metric timestamps use it), or the same
    clock when read outside the loop."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


WINDOW_S = 5.0


def vertex_id(vertex: JobVertex, graph: Any) -> str:
    """A stable hex id per job vertex, from its head operator's uid (as Flink hashes uids)."""
    return hashlib.md5(graph.uid_of(vertex.head).encode(), usedforsecurity=False).hexdigest()


def backpressure_level(ratio: float) -> str:
    return "ok" if ratio <= 0.10 else "low" if ratio <= 0.5 else "high"


def _wm(value: int | None) -> int | None:
    """A watermark for display: None before the first one (Flink shows MIN as "no watermark")."""
    return None if value is None or value <= MIN_WATERMARK else value


class JobMetricsReader:
    def __init__(self, client: JobClient) -> None:
        self._client = client
        self._samples: deque[tuple[float, dict[tuple[str, int], tuple[float, ...]]]] = deque()
        self._execution_id = 0

    # -- cumulative numbers of one task ---------------------------------------
    @staticmethod
    def _cumulative(task: Task, now: float) -> tuple[float, ...]:
        records_in = getattr(task, "records_in", 0)
        if task.is_source:
            records_in = getattr(task, "records_out", 0)  # what the source read
        tail = task.outputs[-1][1] if task.outputs else None
        records_out = tail.records_out + sum(tail.side_records_out.values()) if tail is not None else 0
        blocked = sum(ch.blocked_s for w in task.writers for ch in w.channels)
        return (records_in, records_out, task.idle_s, blocked)

    def _rates(self, now: float, current: dict[tuple[str, int], tuple[float, ...]], starts: dict) -> dict:
        samples = self._samples
        if id(self._client.execution) != self._execution_id:  # a restart: counters start again
            samples.clear()
            self._execution_id = id(self._client.execution)
        while samples and now - samples[0][0] > WINDOW_S:
            samples.popleft()
        base_t, base = samples[0] if samples else (None, {})
        rates = {}
        for key, values in current.items():
            if base_t is not None and key in base and now - base_t > 0.05:
                t0, v0 = base_t, base[key]
            else:
                t0, v0 = starts.get(key) or now, (0.0, 0.0, 0.0, 0.0)
            span = max(now - t0, 1e-3)
            d_in, d_out, d_idle, d_bp = (values[i] - v0[i] for i in range(4))
            idle = min(1.0, max(0.0, d_idle / span))
            bp = min(1.0 - idle, max(0.0, d_bp / span))
            rates[key] = {
                "numRecordsInPerSecond": d_in / span,
                "numRecordsOutPerSecond": d_out / span,
                "idleTimeMsPerSecond": round(idle * 1000),
                "backPressuredTimeMsPerSecond": round(bp * 1000),
                "busyTimeMsPerSecond": round((1.0 - idle - bp) * 1000),
            }
        if not samples or now - samples[-1][0] >= SAMPLE_EVERY_S:
            samples.append((now, current))
        return rates

    # -- the snapshot -----------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Everything, structured: ``vertices`` (with subtasks and operators), ``channels``,
        ``checkpoints`` (Flink's /checkpoints shape), ``user`` (metric groups) and ``job``."""
        client = self._client
        execution = client.execution
        graph = execution.graph
        now = loop_time()
        now_ms = execution.clock.now_ms()
        tasks = iter(execution.tasks)
        per_vertex: list[tuple[JobVertex, list[Task]]] = [
            (v, [next(tasks) for _ in range(v.parallelism)]) for v in graph.vertices
        ]
        current, starts = {}, {}
        for v, subtasks in per_vertex:
            vid = vertex_id(v, graph)
            for i, t in enumerate(subtasks):
                end = t.ended_s if t.ended_s is not None else now
                current[(vid, i)] = self._cumulative(t, end)
                starts[(vid, i)] = t.started_s
        rates = self._rates(now, current, starts)
        vertices = []
        for v, subtasks in per_vertex:
            vid = vertex_id(v, graph)
            subs = []
            for i, t in enumerate(subtasks):
                subs.append(self._subtask(t, i, current[(vid, i)], rates[(vid, i)], now_ms))
            worst = max((s["backPressuredRatio"] for s in subs), default=0.0)
            inputs = []
            for edge in v.head.inputs:
                up = graph.vertex_of[edge.upstream.id]
                inputs.append({"id": vertex_id(up, graph), "ship_strategy": edge.partitioning.name})
            vertices.append(
                {
                    "id": vid,
                    "name": v.name,
                    "parallelism": v.parallelism,
                    "operators": [{"uid": graph.uid_of(n), "name": n.name} for n in v.nodes],
                    "inputs": inputs,
                    "source": v.head.source is not None,
                    "status": _status(subtasks),
                    "backpressureLevel": backpressure_level(worst),
                    "subtasks": subs,
                    "metrics": _sum_subtasks(subs),
                }
            )
        channels = [
            {
                "name": ch.name,
                "queued": ch.size,
                "capacity": ch.capacity,
                "queueFill": ch.size / ch.capacity,
                "numRecordsIn": ch.records_in,
                "backPressuredTimeMs": round(ch.blocked_s * 1000),
            }
            for ch in execution.channels
        ]
        return {
            "job": {
                "id": client.job_id,
                "name": client.job_name,
                "status": client.get_job_status().value,
                "numRestarts": client.restarts,
                "lastFailureCause": client.last_failure_cause,
                "now": now_ms,
            },
            "vertices": vertices,
            "channels": channels,
            "checkpoints": execution.checkpoint_stats.to_json(),
            "user": read_metrics(execution.metrics),
        }

    def _subtask(self, t: Task, index: int, cum: tuple[float, ...], rate: dict, now_ms: int) -> dict:
        gate = getattr(t, "gate", None)
        in_fill = max((ch.size / ch.capacity for ch in gate.channels), default=0.0) if gate else 0.0
        out_fill = max((ch.size / ch.capacity for w in t.writers for ch in w.channels), default=0.0)
        valve = getattr(t, "valve", None)
        input_wm = _wm(valve.last_output_watermark) if valve is not None else None
        operators = []
        upstream_out: int | None = None if t.is_source else int(cum[0])
        upstream_wm = input_wm
        execution = self._client.execution
        for node, out in t.outputs:
            out_wm = _wm(out.current_watermark)
            # a sink's records out are those it wrote, when it counts them (connectors/sink_metrics.py)
            scope = f"{execution.graph.uid_of(node)}[{index}]"
            sent = execution.metrics.get(f"{scope}.numRecordsSend")
            fired = execution.metrics.get(f"{scope}.numFiredTimers")  # a keyed operator with timers
            op = {
                "uid": node.uid or node.name,
                "name": node.name,
                "numRecordsIn": upstream_out,
                "numRecordsOut": out.records_out if not isinstance(sent, Gauge) else sent.get_value(),
                "numRecordsSideOut": sum(out.side_records_out.values()),
                "currentInputWatermark": upstream_wm,
                "currentOutputWatermark": out_wm,
                "watermarkLag": None if out_wm is None or out_wm >= MAX_WATERMARK else now_ms - out_wm,
                "numFiredTimers": fired.count if isinstance(fired, Counter) else None,
            }
            operators.append(op)
            upstream_out, upstream_wm = out.records_out, out_wm
        bp_ratio = rate["backPressuredTimeMsPerSecond"] / 1000
        alignment = getattr(t, "alignment", None)  # an aligned source (watermark_alignment.py)
        return {
            "subtask": index,
            "name": t.name,
            "status": "FINISHED" if t.finished else "RUNNING" if t.scheduled else "CREATED",
            "numRecordsIn": int(cum[0]),
            "numRecordsOut": int(cum[1]),
            **rate,
            "backPressuredRatio": bp_ratio,
            "backpressureLevel": backpressure_level(bp_ratio),
            "inPoolUsage": in_fill,
            "outPoolUsage": out_fill,
            "currentInputWatermark": input_wm,
            "currentOutputWatermark": operators[-1]["currentOutputWatermark"] if operators else None,
            "numRecordsDeadLettered": getattr(t, "records_malformed", 0),
            "lastCheckpointAlignmentMs": t.checkpointer.last_alignment_ms if t.checkpointer else 0,
            # Flink's is a task metric (TaskIOMetricGroup): the timers its chained operators fired
            "numFiredTimers": sum(op["numFiredTimers"] or 0 for op in operators),
            **({} if alignment is None else {"watermarkAlignmentDrift": alignment.drift()}),
            "operators": operators,
        }

    def flat(self, snapshot: dict[str, Any]) -> dict[str, float | int]:
        """The snapshot as ``JobClient.get_metrics()`` keys: ``<task name>.<metric>``,
        ``<operator uid>[<subtask>].<metric>``, ``channel.<name>.<metric>``, ``checkpoints.*``."""
        out: dict[str, float | int] = {}
        sources = {v["id"] for v in snapshot["vertices"] if v["source"]}
        for v in snapshot["vertices"]:
            for s in v["subtasks"]:
                for key, value in s.items():
                    if key == "subtask" or (key == "numRecordsIn" and v["id"] in sources):
                        continue
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        out[f"{s['name']}.{key}"] = value
                for op in s["operators"]:
                    for key in ("numRecordsIn", "numRecordsOut", "currentInputWatermark",
                                "currentOutputWatermark", "watermarkLag"):  # fmt: skip
                        if op[key] is not None:
                            out[f"{op['uid']}[{s['subtask']}].{key}"] = op[key]
        for ch in snapshot["channels"]:
            out[f"channel.{ch['name']}.queueFill"] = ch["queueFill"]
            out[f"channel.{ch['name']}.backPressuredTimeMs"] = ch["backPressuredTimeMs"]
        ck = snapshot["checkpoints"]
        latest = ck["latest"]["completed"] or {}
        out["checkpoints.numberOfCompletedCheckpoints"] = ck["counts"]["completed"]
        out["checkpoints.numberOfFailedCheckpoints"] = ck["counts"]["failed"]
        out["checkpoints.numberOfInProgressCheckpoints"] = ck["counts"]["in_progress"]
        out["checkpoints.lastCheckpointDuration"] = latest.get("end_to_end_duration") or 0
        out["checkpoints.lastCheckpointSize"] = latest.get("state_size") or 0
        out["checkpoints.lastCheckpointAlignmentDuration"] = latest.get("alignment_duration") or 0
        out.update(snapshot["user"])
        return out


def _status(subtasks: list[Task]) -> str:
    """A vertex's: FINISHED when all its subtasks are, CREATED while none is scheduled (a batch
    job's region waiting for its inputs: runtime/regions.py), else RUNNING."""
    if all(t.finished for t in subtasks):
        return "FINISHED"
    return "RUNNING" if any(t.scheduled for t in subtasks) else "CREATED"


def _sum_subtasks(subs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("numRecordsIn", "numRecordsOut", "numRecordsInPerSecond", "numRecordsOutPerSecond")
    total: dict[str, Any] = {k: sum(s[k] for s in subs) for k in keys}
    for k in ("busyTimeMsPerSecond", "backPressuredTimeMsPerSecond", "idleTimeMsPerSecond"):
        total[k] = max((s[k] for s in subs), default=0)
    wms = [s["currentInputWatermark"] for s in subs if s["currentInputWatermark"] is not None]
    total["currentInputWatermark"] = min(wms) if wms else None
    owms = [s["currentOutputWatermark"] for s in subs]
    total["currentOutputWatermark"] = None if not owms or None in owms else min(owms)
    return total
