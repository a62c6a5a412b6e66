"""Keyed state never holds the event loop for long (issue 12 item 4): dirty-key dicts are sealed
before they grow into long resizes, a capture pauses through the job's loop budget between its
slices, a restore decodes its files in slices that yield too, and a window closing over many
keys fires them in slices.

No wall-clock timing: loop turns are counted by a coroutine that yields every iteration, and
the loop budget's clock is one that says "the slice is over" at every reading, so every
``yield_point`` pauses: the heartbeat must then run between every two slices.
"""

from __future__ import annotations

import asyncio
from typing import Any

from test_checkpointing import checkpoint_then_cancel

import streamflow as sf
from streamflow.clock import SystemClock
from streamflow.common import Duration, WatermarkStrategy
from streamflow.runtime.loop_budget import LoopBudget, bind
from streamflow.state import incremental
from streamflow.state.codec import MsgpackCodec
from streamflow.state.key_groups import key_group_range
from streamflow.state.keyed import IncrementalSettings, KeyedStateBackend, ValueStateDescriptor
from streamflow.windowing.assigners import TumblingEventTimeWindows

CODEC = MsgpackCodec()
MAXP = 128
VALUE = ValueStateDescriptor("v")
CHUNK = incremental.CHUNK


class AlwaysDue(SystemClock):
    """A monotonic clock that jumps a second at every reading: every budget check is due."""

    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        self.t += 1.0
        return self.t


def backend() -> KeyedStateBackend:
    # in the process: these tests count the capture's slices (a snapshot child has none)
    settings = IncrementalSettings("op#0", key_group_range(0, MAXP, 1), CODEC, 8, snapshot_process="off")
    return KeyedStateBackend(MAXP, settings)


def write(b: KeyedStateBackend, key: Any, value: Any) -> None:
    b.current_key = key
    b.get_state(VALUE).update(value)


class Files:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    async def take(self, b: KeyedStateBackend, cid: int) -> dict:
        upload = await b.capture(cid, False)
        assert upload is not None
        descriptor = b.snapshot()
        produced = await upload.produce()  # bytes, or the file a snapshot child wrote (heap_fork.py)
        self.files.update((n, d if isinstance(d, bytes) else d.read_bytes()) for n, d in produced.items())
        b.checkpoint_complete(cid)
        return descriptor

    def restore(self, descriptor: dict) -> KeyedStateBackend:
        b = backend()
        groups = key_group_range(0, MAXP, 1)
        b.restore_from([descriptor], lambda g: g in groups, groups, self.files.__getitem__, CODEC)
        return b


def test_sealed_dirty_dicts_keep_every_write_and_the_latest_value() -> None:
    """Writes spread over a sealed dict and the log after it: the delta restores exactly,
    overwrites and deletions after a seal included, and the dict handed out stays the same."""
    files, b = Files(), backend()
    write(b, "seed", 0)
    base = asyncio.run(files.take(b, 1))
    dirty = b._dirty["v"]
    for k in range(CHUNK + 10):
        write(b, k, k)
    b.seal_dirty()
    assert b._dirty["v"] is dirty and not dirty.merged and len(dirty.batches) == 1  # logged
    for k in range(0, 100):
        write(b, k, -k)  # overwritten after the seal
    for k in range(100, 200):
        write(b, k, None)  # deleted after the seal
    write(b, "seed", None)
    for k in range(CHUNK, 2 * CHUNK + 5):
        write(b, k, ("again", k))
    b.seal_dirty()
    write(b, 150, "back")  # deleted in one sealed dict, written again in the live one
    assert not dirty.merged  # once something is logged, writes are logged too
    delta = asyncio.run(files.take(b, 2))
    assert len(delta["chain"]) == 2 and delta["chain"][0] == base["chain"][0]
    assert len(dirty) == 0
    restored = files.restore(delta)
    expected = dict(b._tables["v"])
    assert restored._tables["v"] == expected
    assert expected[5] == -5 and 120 not in expected and expected[150] == "back" and "seed" not in expected
    assert expected[CHUNK + 1] == ("again", CHUNK + 1)


def test_small_dirty_dicts_are_not_sealed() -> None:
    files, b = Files(), backend()
    asyncio.run(files.take(b, 1))  # before the first capture the logs pause (state/changes.py)
    for k in range(CHUNK - 1):
        write(b, k, k)
    b.seal_dirty()
    assert len(b._dirty["v"].merged) == CHUNK - 1 and not b._dirty["v"].batches


async def _turns_between(work: Any) -> tuple[Any, int, int]:
    """Run ``work`` beside a heartbeat that yields every iteration; (result, heartbeat turns,
    budget pauses)."""
    budget = LoopBudget(10, AlwaysDue())
    turns = 0
    done = False

    async def heartbeat() -> None:
        nonlocal turns
        while not done:
            turns += 1
            await asyncio.sleep(0)

    beat = asyncio.ensure_future(heartbeat())
    await asyncio.sleep(0)

    async def bound() -> Any:
        bind(budget)
        return await work

    result = await asyncio.ensure_future(bound())
    done = True
    await beat
    return result, turns, budget.slices


def test_a_capture_pauses_through_the_budget_between_slices() -> None:
    files, b = Files(), backend()
    n = 5 * CHUNK + 3
    for k in range(n):
        write(b, k, (k, "x"))
    descriptor, turns, pauses = asyncio.run(_turns_between(files.take(b, 1)))
    slices = -(-n // CHUNK)
    assert pauses >= slices  # a full capture: every slice of the table ends in a pause
    assert turns >= slices  # ... and the loop ran in each
    assert files.restore(descriptor)._tables["v"] == b._tables["v"]


def test_a_seal_during_a_paused_capture_leaves_its_dicts_alone() -> None:
    """Another task's pause runs the budget's chores (seal_dirty of every task) while this
    capture is paused between two slices of the very dicts the seal would move."""
    files, b = Files(), backend()
    write(b, "seed", 0)
    asyncio.run(files.take(b, 1))
    for k in range(3 * CHUNK):
        write(b, k, k)
        if k % CHUNK == CHUNK - 1:
            b.seal_dirty()
    for k in range(CHUNK):
        write(b, ("live", k), k)  # a full live dict: seal_dirty would move it

    async def capture_while_sealing() -> dict:
        take = asyncio.ensure_future(files.take(b, 2))
        await asyncio.sleep(0)  # the capture starts (and pauses after its first slice)
        assert b._capturing
        while not take.done():
            b.seal_dirty()  # what a chore does from another task's pause
            await asyncio.sleep(0)
        return await take

    descriptor, _turns, pauses = asyncio.run(_turns_between(capture_while_sealing()))
    assert pauses >= 4
    assert files.restore(descriptor)._tables["v"] == b._tables["v"]


class TickingClock(SystemClock):
    """Real timers; a monotonic clock that moves 1 ms per reading (as in test_loop_budget)."""

    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        self.t += 0.001
        return self.t


async def test_a_restored_chain_is_decoded_in_slices_after_the_job_started(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """The job is built (execute_async returns) with its state read but not decoded; the task
    then decodes one frame per budget check, and the loop runs between slices: a heartbeat
    sees at most a slice's worth of frames (10 clock readings) at a time, never all of them."""

    monkeypatch.setattr(incremental, "CHUNK", 1_000)  # frames of 1,000 keys: 60 of them
    keys = 60_000

    release = asyncio.Event()
    emitted = 0

    async def records() -> Any:  # every key, then (first run) held open until cancelled
        nonlocal emitted
        for i in range(keys):
            emitted += 1
            yield (i, 1)
        await release.wait()

    def job(clock: Any = None) -> sf.StreamExecutionEnvironment:
        env = sf.StreamExecutionEnvironment(clock=clock).enable_checkpointing(60_000)
        env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path))
        source = env.from_async_iterable(records).uid("src")  # restored: at its end
        source.key_by(lambda e: e[0]).sum(1).uid("sum").add_sink(lambda _v: None)
        return env

    # a checkpoint of the running job holds every key (the final checkpoint of a finished job
    # holds no keyed state: FLIP-147)
    first = await job().execute_async("restored")
    sums = [b for t in first.execution.tasks for b in t._keyed_backends()]

    def ready() -> bool:
        return emitted >= keys and sum(len(t) for b in sums for t in b._tables.values()) >= keys

    await checkpoint_then_cancel(first, ready)
    release.set()
    client = await job(TickingClock()).execute_async("restored")
    assert client.execution.restore is not None
    backends = [b for t in client.execution.tasks for b in t._keyed_backends()]
    pending = [b._restoring for b in backends if b.restore_pending]
    assert len(pending) == 1 and pending[0].frames == 0  # read and checked, not decoded
    restoring = pending[0]
    done = client.get_job_execution_result()
    result = asyncio.ensure_future(done)
    worst, last = 0, 0
    while not result.done():
        await asyncio.sleep(0)
        worst, last = max(worst, restoring.frames - last), restoring.frames
    await result
    assert restoring.frames >= keys // 1_000
    assert worst <= 12, worst
    restored = backends[0]
    assert restored._tables["reduce"] == {i: (i, 1) for i in range(keys)}


class Count(sf.SinkFunction):
    seen = 0

    def write_batch(self, values: list) -> None:
        Count.seen += len(values)


async def _most_between_turns(env: Any) -> int:
    """Run the job beside a coroutine that yields every iteration: the most records the sink
    got between two of its turns."""
    Count.seen = 0
    client = await env.execute_async("panes")
    done = asyncio.ensure_future(client.get_job_execution_result())
    worst, last = 0, 0
    while not done.done():
        await asyncio.sleep(0)
        worst, last = max(worst, Count.seen - last), Count.seen
    await done
    return worst


async def test_a_window_closing_over_many_keys_fires_in_slices() -> None:
    """Every key's tumbling window closes at the final watermark: the firing pauses through the
    job's budget (a slice is ~10 clock readings of the ticking clock) instead of emitting all
    keys in one step."""

    keys = 30_000
    for fast in (True, False):  # the built-in reduce's pane path, and a process function's timers
        env = sf.StreamExecutionEnvironment(clock=TickingClock()).set_batch_size(1_000)
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _ts: e[1])
        windowed = (
            env.from_collection([(k, 1) for k in range(keys)])
            .assign_timestamps_and_watermarks(strategy)
            .key_by(lambda e: e[0])
            .window(TumblingEventTimeWindows.of(Duration.of_seconds(10)))
        )
        if fast:
            windowed.reduce(lambda a, b: (a[0], a[1] + b[1])).add_sink(Count())
        else:
            windowed.process(AllOfWindow()).add_sink(Count())
        worst = await _most_between_turns(env)
        assert Count.seen == keys
        assert worst <= keys // 3, (fast, worst)


class AllOfWindow(sf.ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield from elements


async def test_each_pause_of_a_keyed_job_collects_the_young_generation() -> None:
    """Free-list objects are tracked without counting towards the collector's threshold, so a
    keyed job's young generation could grow for a long time between automatic collections; a
    loop budget chore collects it at every pause instead."""
    import gc

    young: list[int] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 0:
            young.append(1)

    env = sf.StreamExecutionEnvironment(clock=TickingClock()).set_batch_size(100)
    data = [(k % 1_000, 1) for k in range(50_000)]
    env.from_collection(data).key_by(lambda e: e[0]).sum(1).add_sink(Count())
    gc.callbacks.append(on_gc)
    try:
        client = await env.execute_async("young")
        metrics = (await client.get_job_execution_result()).metrics
    finally:
        gc.callbacks.remove(on_gc)
    assert metrics["job.numLoopYields"] >= 50
    assert len(young) >= metrics["job.numLoopYields"]
