"""Stop-with-savepoint with ``advance_to_end_of_event_time`` (``--drain``) through PyFlink's
blocking ``JobClient``.

Flink's ``JobClient.stopWithSavepoint(advanceToEndOfEventTime, dir)`` (PyFlink's
``JobClient.stop_with_savepoint``): with the flag, the sources inject ``MAX_WATERMARK`` before the
final savepoint, so every event-time timer fires and every open event-time window emits its
result before the job stops (Flink's docs, "Stopping a job with savepoint": ``--drain``), and the
job ends FINISHED. streamflow's client used to take a savepoint and cancel the job, only logging
the flag: the open windows never fired. Now the sources halt at a synchronous savepoint's barrier
after the maximum watermark (``runtime/source_task.py``, ``JobClient.stop_with_savepoint``); the
rest of the semantics is in ``test_stop_with_savepoint.py``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from streamflow.common import WatermarkStrategy
from streamflow.common.watermark_strategy import TimestampAssigner
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.window import TumblingEventTimeWindows


class _Ts(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


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
    path = client.stop_with_savepoint(True).result(timeout=60)
    assert client.get_job_execution_result().result(timeout=60).status.value == "FINISHED"
    assert path.startswith(str(tmp_path / "sp"))
    assert out == [("k", 1500)]  # the window [0, 1000) of the six elements fired at the drain
