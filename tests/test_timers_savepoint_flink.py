"""Timers restored from a savepoint, ported from Flink's
``flink-tests/src/test/java/org/apache/flink/test/checkpointing/TimersSavepointITCase.java``
(``testSavepointWithTimers``: an event-time timer registered before the savepoint, written by
one timer store (RocksDB) and restored into another (heap), fires after the restore), widened
to many keys, processing-time timers, both directions of the backend switch and a changed
parallelism (``RescalingITCase``'s rule that keyed state, timers included, follows its key
group to the subtask owning it after rescaling).

Theory of the check: the first job registers per key one event-time timer (in the future of
its watermark) and one processing-time timer, then a savepoint is taken while the timers are
pending and the job is cancelled. The second job, restored from it, pushes the watermark past
every event-time timer; each timer must fire exactly once, on the subtask that owns the key's
key group at the new parallelism, with its original timestamp.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_checkpointing import Gate, wait_until

import streamflow as sf
from streamflow.common import Types
from streamflow.state.key_groups import key_group_of, subtask_of_key_group

KEYS = 24
MAXP = 128
EVENT_AT = 1_000


class TimersProcessFunction(sf.KeyedProcessFunction):
    """Flink's ``TimersProcessFunction``: the first record of a key registers the timers
    (event time ``EVENT_AT + key``, processing time ``now + delay``); a timer emits
    ``(key, domain, timestamp, subtask)``."""

    def __init__(self, delay: int) -> None:
        self.delay = delay

    def open(self, ctx: sf.RuntimeContext) -> None:
        self.index = ctx.get_index_of_this_subtask()
        self.seen = ctx.get_state(sf.ValueStateDescriptor("seen", Types.BOOLEAN()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        if not self.seen.value():
            self.seen.update(True)
            ctx.timer_service().register_event_time_timer(EVENT_AT + value[0])
            now = ctx.timer_service().current_processing_time()
            ctx.timer_service().register_processing_time_timer(now + self.delay)
        return iter(())

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        domain = "event" if ctx.time_domain() == sf.TimeDomain.EVENT_TIME else "processing"
        yield (ctx.get_current_key(), domain, timestamp if domain == "event" else 0, self.index)


def job(env: sf.StreamExecutionEnvironment, source: sf.DataStream, delay: int) -> list:
    out: list = []
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r: r[1])
    (
        source.uid("src")
        .assign_timestamps_and_watermarks(strategy)
        .uid("wm")
        .key_by(lambda r: r[0])
        .process(TimersProcessFunction(delay))
        .uid("timers")
        .add_sink(out.append)
    )
    return out


def environment(parallelism: int, backend: str) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_max_parallelism(MAXP)
    if backend == "rocksdb":
        env.set_state_backend(sf.EmbeddedRocksDBStateBackend())
    return env


@pytest.mark.parametrize(
    ("old_b", "new_b", "old_p", "new_p"),
    [
        ("rocksdb", "heap", 4, 4),  # Flink's case: RocksDB timers into heap timers
        ("rocksdb", "heap", 4, 2),
        ("heap", "rocksdb", 2, 3),
        ("heap", "heap", 4, 2),
        ("rocksdb", "rocksdb", 2, 3),
    ],
)
async def test_savepoint_with_timers(tmp_path: Path, old_b: str, new_b: str, old_p: int, new_p: int) -> None:
    """``testSavepointWithTimers``: pending timers survive savepoint, backend switch and rescale."""
    env = environment(old_p, old_b)
    first = [(k, k) for k in range(KEYS)]
    gate = Gate([*first, (0, 1)], len(first))
    out1 = job(env, env.from_async_iterable(gate.__aiter__).set_parallelism(1), 60_000)
    client = await env.execute_async("timers")
    await asyncio.wait_for(gate.reached.wait(), 20)  # the savepoint's barrier follows every record
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)
    assert out1 == []

    env2 = environment(new_p, new_b)
    env2.configure({"execution.savepoint.path": path})
    gate2 = Gate([(k, 5_000) for k in range(KEYS)] + [(0, 6_000)], KEYS + 1)
    out2 = job(env2, env2.from_async_iterable(gate2.__aiter__).set_parallelism(1), 60_000)
    client2 = await env2.execute_async("timers restored")
    await wait_until(lambda: len(out2) >= KEYS, timeout=20.0)
    await asyncio.sleep(0.1)  # a duplicate firing would show here
    await asyncio.wait_for(client2.cancel(), 30)
    owner = {k: subtask_of_key_group(key_group_of(k, MAXP), MAXP, new_p) for k in range(KEYS)}
    assert sorted(out2) == sorted((k, "event", EVENT_AT + k, owner[k]) for k in range(KEYS))


@pytest.mark.parametrize(("old_b", "new_b"), [("rocksdb", "heap"), ("heap", "rocksdb"), ("heap", "heap")])
async def test_processing_time_timers_fire_after_restore(tmp_path: Path, old_b: str, new_b: str) -> None:
    """A processing-time timer pending in the savepoint fires once after the restore (at its
    time, which has passed by then), on the subtask owning the key at the new parallelism."""
    env = environment(2, old_b)
    first = [(k, k) for k in range(KEYS)]
    gate = Gate([*first, (0, 1)], len(first))
    out1 = job(env, env.from_async_iterable(gate.__aiter__).set_parallelism(1), 300)
    client = await env.execute_async("timers")
    await asyncio.wait_for(gate.reached.wait(), 20)  # the savepoint's barrier follows every record
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)
    assert out1 == []
    await asyncio.sleep(0.3)
    env2 = environment(3, new_b)
    env2.configure({"execution.savepoint.path": path})
    gate2 = Gate([(0, 1)], 0)
    out2 = job(env2, env2.from_async_iterable(gate2.__aiter__).set_parallelism(1), 60_000)
    client2 = await env2.execute_async("timers restored")
    await wait_until(lambda: len(out2) >= KEYS, timeout=20.0)
    await asyncio.sleep(0.1)
    await asyncio.wait_for(client2.cancel(), 30)
    owner = {k: subtask_of_key_group(key_group_of(k, MAXP), MAXP, 3) for k in range(KEYS)}
    assert sorted(out2) == sorted((k, "processing", 0, owner[k]) for k in range(KEYS))
