"""Stop-with-savepoint with ``advance_to_end_of_event_time`` (``--drain``): a divergence kept.

Flink's ``JobClient.stopWithSavepoint(advanceToEndOfEventTime, dir)`` (PyFlink's
``JobClient.stop_with_savepoint``): with the flag, the sources inject ``MAX_WATERMARK`` before the
final savepoint, so every event-time timer fires and every open event-time window emits its
result before the job stops (Flink's docs, "Stopping a job with savepoint": ``--drain``).
streamflow's PyFlink-style client takes a savepoint and cancels the job, and only logs the flag
(``api/blocking_client.py``): the open windows of a drained job never fire, so their results are
missing from the output, and restoring the savepoint does not bring them either (the next run
fires them only if its input ends). The strict xfail below is Flink's outcome.

Why not fixed here: draining needs every source to end its input on request (so that the final
watermark flows and the job finishes before its last savepoint), a hook the source readers do not
have yet.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from streamflow.common import WatermarkStrategy
from streamflow.common.watermark_strategy import TimestampAssigner
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.window import TumblingEventTimeWindows


class _Ts(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


@pytest.mark.xfail(
    strict=True,
    reason="divergence kept: stop_with_savepoint(advance_to_end_of_event_time=True) only logs the "
    "flag (savepoint, then cancel): no final watermark, so open event-time windows never fire "
    "(Flink's --drain fires them before the savepoint); the sources have no end-input-on-request "
    "hook yet",
)
def test_a_drained_stop_fires_the_open_windows(tmp_path: Any) -> None:
    async def endless() -> Any:
        for i in range(6):
            yield ("k", i * 100)
        await asyncio.sleep(3600)

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_default_savepoint_directory(str(tmp_path / "sp"))
    seen: list = []
    out: list = []
    stream = env.from_async_iterable(endless).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Ts())
    )
    stream.map(lambda v: v).add_sink(seen.append)
    (stream.key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(1000))
        .reduce(lambda a, b: (a[0], a[1] + b[1])).add_sink(out.append))  # fmt: skip
    client = env.execute_async("drain")
    deadline = time.monotonic() + 30
    while len(seen) < 6:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    client.stop_with_savepoint(True).result(timeout=60)
    client.get_job_execution_result().result(timeout=60)
    assert out == [("k", 1500)]  # the window [0, 1000) of the six elements fired at the drain
