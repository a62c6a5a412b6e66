"""Window state in incremental checkpoints, through the public API: a windowed job (tumbling
on the fast path, sliding, session) checkpoints at chosen points, is cancelled, and restored
from the chain, at the same or another parallelism; what the two runs emit together is exactly
what one run without a failure emits. A checkpoint after few keys changed writes little."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.checkpoint.storage import FileSystemCheckpointStorage
from streamflow.common import Time
from streamflow.eventtime import WatermarkGenerator
from streamflow.runtime.events import Watermark
from streamflow.windowing import EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows

KEYS = 40
N = 1_600
STOPS = [200, 450, 700, 950, 1_200]  # a checkpoint at each: a base, then deltas


def ts_of(i: int) -> int:
    return i + (i // 300) * 1_000  # a gap every 300 records: sessions end, panes are dropped


DATA = [(f"k{i % KEYS}", i) for i in range(N)]


class EveryRecord(WatermarkGenerator):
    """Punctuated: a watermark after each record, in the batch (none after the last barrier)."""

    def on_event(self, event: Any, event_timestamp: int, output: Any) -> None:
        output.emit_watermark(Watermark(event_timestamp - 1))


ASSIGNERS = {
    "tumbling": lambda: TumblingEventTimeWindows.of(Time.milliseconds(50)),
    "sliding": lambda: SlidingEventTimeWindows.of(Time.milliseconds(60), Time.milliseconds(20)),
    "session": lambda: EventTimeSessionWindows.with_gap(Time.milliseconds(100)),
}


class Gates:
    def __init__(self, stops: list[int], data: list[tuple[str, int]] = DATA) -> None:
        self.stops = stops
        self.data = data
        self.at = -1
        self.released = asyncio.Event()

    def release(self) -> None:
        self.released.set()

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for i, r in enumerate(self.data):
            if i in self.stops:
                self.at = i
                await self.released.wait()
                self.released = asyncio.Event()
            yield r


def env_for(tmp_path: Path, parallelism: int) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    env.enable_checkpointing(3_600_000)  # only the checkpoints the test triggers
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    cfg.set_max_retained_checkpoints(2).enable_incremental_checkpoints(True, max_chain=3)
    return env


SEEN: list[int] = []  # the records that reached the map before the window (any subtask)


def seen(r: tuple[str, int]) -> tuple[str, int]:
    SEEN.append(r[1])
    return r


def pipeline(source: Any, kind: str, out: list) -> None:
    ws = sf.WatermarkStrategy.for_generator(EveryRecord).with_timestamp_assigner(lambda r, _ts: ts_of(r[1]))
    (
        source.uid("src").map(seen).uid("seen").assign_timestamps_and_watermarks(ws).uid("wm")
        .key_by(lambda r: r[0]).window(ASSIGNERS[kind]()).reduce(lambda a, b: (a[0], a[1] + b[1])).uid("win")
        .add_sink(out.append)
    )  # fmt: skip


async def wait_until(cond: Any, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "condition not reached in time"
        await asyncio.sleep(0.002)


async def reference(kind: str) -> Counter:
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    out: list = []
    pipeline(env.from_collection(DATA), kind, out)
    await (await env.execute_async("ref")).get_job_execution_result()
    return Counter(out)


async def checkpointed_run(tmp_path: Path, kind: str, parallelism: int, stops: list[int]) -> list:
    env = env_for(tmp_path, parallelism)
    gates, out = Gates(stops), []
    pipeline(env.from_async_iterable(gates.__aiter__), kind, out)
    client = await env.execute_async("win")
    SEEN.clear()
    for stop in stops:
        await wait_until(lambda stop=stop: gates.at == stop and len(SEEN) == stop)  # type: ignore[misc]
        await client.trigger_checkpoint()
        if stop != stops[-1]:
            gates.release()
    await asyncio.wait_for(client.cancel(), 30)
    return out


async def restored_run(tmp_path: Path, kind: str, parallelism: int) -> list:
    env = env_for(tmp_path, parallelism)
    out: list = []
    pipeline(env.from_async_iterable(Gates([]).__aiter__), kind, out)
    await (await env.execute_async("win")).get_job_execution_result()
    return out


@pytest.mark.parametrize("kind", list(ASSIGNERS))
@pytest.mark.parametrize(("before", "after"), [(1, 1), (4, 4), (1, 4), (4, 2)])
async def test_restored_window_job_emits_exactly_what_one_run_emits(
    tmp_path: Path, kind: str, before: int, after: int
) -> None:
    first = await checkpointed_run(tmp_path, kind, before, STOPS)
    latest = FileSystemCheckpointStorage(tmp_path / "chk").restore_point("win")
    assert latest is not None
    assert latest.shared, "the window state was not checkpointed incrementally"
    second = await restored_run(tmp_path, kind, after)
    assert Counter(first) + Counter(second) == await reference(kind)
    assert second, "the restored run emitted nothing: the test would not see lost state"


def shared_sizes(tmp_path: Path) -> dict[str, int]:
    s = FileSystemCheckpointStorage(tmp_path / "chk")
    return {p.name: p.stat().st_size for p in s.shared_dir("win").iterdir()}


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_checkpoint_after_few_keys_changed_writes_little(tmp_path: Path, kind: str) -> None:
    """A window over many keys (the fast path's panes; a session window's contents, trigger
    state, merging sets): the base holds them all, a delta after 9 records only those keys."""
    many = [(f"key-{i}", i) for i in range(5_000)] + [(f"key-{i}", 1) for i in range(9)]
    env = env_for(tmp_path, 1)
    gates, out = Gates([5_000, 5_008], many), []
    ws = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _ts: 0)
    hour = Time.hours(1)
    assigner = (
        TumblingEventTimeWindows.of(hour) if kind == "tumbling" else EventTimeSessionWindows.with_gap(hour)
    )
    (
        env.from_async_iterable(gates.__aiter__).uid("src").map(seen).assign_timestamps_and_watermarks(ws)
        .key_by(lambda r: r[0]).window(assigner)
        .reduce(lambda a, b: (a[0], a[1] + b[1])).uid("win").add_sink(out.append)
    )  # fmt: skip
    SEEN.clear()
    client = await env.execute_async("win")
    await wait_until(lambda: gates.at == 5_000 and len(SEEN) == 5_000)
    await client.trigger_checkpoint()
    base = shared_sizes(tmp_path)
    gates.release()
    await wait_until(lambda: gates.at == 5_008 and len(SEEN) == 5_008)
    await client.trigger_checkpoint()
    delta = {n: size for n, size in shared_sizes(tmp_path).items() if n not in base}
    await asyncio.wait_for(client.cancel(), 30)
    # one delta of the window state, and (session windows: timers) one of the timers
    assert [n for n in base if "-base-" in n] and delta and all("-delta-" in n for n in delta), delta
    assert len(delta) == (1 if kind == "tumbling" else 2), delta
    base_size, delta_size = sum(base.values()), sum(delta.values())
    assert base_size > 40_000 and delta_size < base_size / 50, (base_size, delta_size)
