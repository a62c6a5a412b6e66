"""Joins keep their buffers in checkpoints: a savepoint taken between a record and the record
it joins with, restored at another parallelism, gives every pair exactly once (the interval
join's buffered sides, the window join's window contents)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_checkpointing import Gate, wait_until

import streamflow as sf
from streamflow.common import Duration, WatermarkStrategy
from streamflow.datastream.functions import ProcessJoinFunction
from streamflow.datastream.window import TumblingEventTimeWindows

# L_i at 10*i and R_i at 10*i + 3 (key k{i % 3}); each R_i comes after L_{i+1}, so pairs straddle
N = 30
EVENTS: list[tuple[str, str, int, int]] = []
for i in range(N):
    EVENTS.append(("L", f"k{i % 3}", 10 * i, i))
    if i:
        EVENTS.append(("R", f"k{(i - 1) % 3}", 10 * (i - 1) + 3, i - 1))
EVENTS.append(("R", f"k{(N - 1) % 3}", 10 * (N - 1) + 3, N - 1))
STOP = 31  # the savepoint: after L_15, before R_15 (mid-stream, mid-window)


class _Pair(ProcessJoinFunction):
    def process_element(self, left: Any, right: Any, ctx: Any) -> Any:
        yield "interval", left[3], right[3]


def _build(env: sf.StreamExecutionEnvironment, source: sf.DataStream, out: list) -> None:
    timed = (
        source.uid("src")
        .assign_timestamps_and_watermarks(
            WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(20)).with_timestamp_assigner(
                lambda e, ts: e[2]
            )
        )
        .uid("wm")
    )
    left = timed.filter(lambda e: e[0] == "L").uid("left")
    right = timed.filter(lambda e: e[0] == "R").uid("right")
    left.key_by(lambda e: e[1]).interval_join(right.key_by(lambda e: e[1])).between(0, 5).process(
        _Pair()
    ).uid("interval").add_sink(out.append)
    left.join(right).where(lambda e: e[1]).equal_to(lambda e: e[1]).window(
        TumblingEventTimeWindows.of(Duration.of_millis(60))
    ).apply(lambda a, b: ("window", a[3], b[3])).uid("window-join").add_sink(out.append)


def _expected() -> list:
    interval = [("interval", i, i) for i in range(N)]
    window = [
        ("window", i, j)
        for i in range(N)
        for j in range(N)
        if i % 3 == j % 3 and (10 * i) // 60 == (10 * j + 3) // 60
    ]
    return sorted(interval + window)


@pytest.mark.parametrize("new_parallelism", [1, 3])
async def test_joins_restore_their_buffers_from_a_savepoint(tmp_path: Path, new_parallelism: int) -> None:
    gate = Gate(EVENTS, STOP)
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    out1: list = []
    _build(env, env.from_async_iterable(gate.__aiter__), out1)
    client = await env.execute_async("joins")
    first = [e for e in EVENTS[:STOP]]
    pairs_before = sum(1 for e in first if e[0] == "R")  # each R_i joins L_i, which came before it
    await wait_until(lambda: sum(1 for r in out1 if r[0] == "interval") == pairs_before)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()

    env2 = sf.StreamExecutionEnvironment().set_parallelism(new_parallelism)
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    _build(env2, env2.from_collection(EVENTS), out2)  # the source resumes after record STOP
    await (await env2.execute_async("joins")).get_job_execution_result()
    assert any(r[0] == "interval" for r in out2) and any(r[0] == "window" for r in out2)
    assert sorted(out1 + out2) == _expected()
