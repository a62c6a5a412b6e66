"""A streaming job embedded in an asyncio service: the service keeps serving while the job runs.

Run: python examples/embedded_service.py
"""

from __future__ import annotations

import asyncio

from streamflow import StreamExecutionEnvironment


async def sensor_readings():
    for i in range(200):
        yield {"sensor": f"s{i % 4}", "celsius": 20 + (i * 7) % 11}
        await asyncio.sleep(0.001)


async def main() -> None:
    env = StreamExecutionEnvironment()
    alerts: list[dict] = []
    (
        env.from_async_iterable(sensor_readings)
        .key_by(lambda r: r["sensor"])
        .max("celsius")
        .filter(lambda r: r["celsius"] >= 30)
        .add_sink(alerts.append)
    )
    client = await env.execute_async("sensors")
    heartbeats = 0
    while client.get_job_status().value == "RUNNING":  # the service keeps working meanwhile
        heartbeats += 1
        await asyncio.sleep(0.01)
    result = await client.get_job_execution_result()
    print(f"job {result.status.value}: {len(alerts)} alerts, {heartbeats} heartbeats served meanwhile")


if __name__ == "__main__":
    asyncio.run(main())
