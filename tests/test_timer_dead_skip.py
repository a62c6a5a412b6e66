"""A run of deleted timers in front of the live ones is skipped in bounded steps
(``TimerQueue.drop_dead``, ``timer_compaction.py``'s module doc), so the operator firing timers
can pause through its loop budget in between (issue 12 item 4), and which timers fire, and
in what order, does not change.

A table of ``drop_dead`` steps on the pure queue in each layout; the same random operations
on two queues, one of them skipping its dead entries in small steps, fire the same timers;
then a job whose final watermark finds thousands of deleted timers before the live ones: the
loop runs between slices of the skipping (no wall-clock timing: the budget's clock says "the
slice is over" at every reading, and a coroutine that yields every iteration watches the
heap), and the timers fire as a reference says.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Any

import pytest
from test_loop_state import AlwaysDue

import streamflow as sf
from streamflow.datastream.functions import KeyedProcessFunction
from streamflow.runtime import timer_compaction
from streamflow.runtime.timer_operator import TimerOperator
from streamflow.runtime.timer_queues import DEAD_SLICE, TimerQueue
from streamflow.runtime.timers import TimerService


def _queue(layout: str) -> TimerQueue:
    seq = itertools.count()
    queue = TimerQueue(lambda: next(seq))
    if layout.endswith("sharded"):
        queue._to_shards()
    return queue


def _sizes(q: TimerQueue) -> tuple[int, int]:
    return len(q._heap), len(q._old)


@pytest.mark.parametrize("layout", ["flat", "sharded"])
def test_drop_dead_table(layout: str) -> None:
    """Timers 0..99 (one key each), 0..39 deleted (no compaction: 100 entries <= 2 x 60 live).
    Each row: drop_dead(time, limit), what it returns, then (heap entries, old entries)."""
    q = _queue(layout)
    for i in range(100):
        q.add(i, f"k{i}", None)
    for i in range(40):
        assert q.remove(i, f"k{i}", None)
    assert not isinstance(q, timer_compaction._Compacting) and _sizes(q) == (100, 0)
    rows = [
        ((-1, 10), True, (100, 0)),  # the dead head (ts 0) is not due by -1: pop_due would not skip it
        ((100, 10), False, (90, 0)),  # ts 0-9 dropped, the head (ts 10) is dead: more to do
        ((20, 25), True, (79, 0)),  # only those due by 20: ts 10-20, then the head (21) is not due
        ((100, 0), False, (79, 0)),  # nothing dropped, a dead head left
        ((100, 18), False, (61, 0)),  # ts 21-38 dropped: the head (39) is dead and due
        ((100, 1), True, (60, 0)),  # ts 39 dropped: the head (40) is live, exactly at the limit
        ((100, 5), True, (60, 0)),  # a live head: nothing to do
    ]
    for (time, limit), expected, sizes in rows:
        assert q.drop_dead(time, limit) is expected, (time, limit)
        assert _sizes(q) == sizes, (time, limit)
    fired = [q.pop_due(10**9) for _ in range(60)]
    assert [t.timestamp for t in fired if t is not None] == list(range(40, 100))
    assert q.drop_dead(10**9, 1) is True and q.pop_due(10**9) is None  # empty: True


@pytest.mark.parametrize("layout", ["compacting flat", "compacting sharded"])
def test_drop_dead_table_while_compacting(layout: str) -> None:
    """Timers 0..99, 0..50 deleted: the 51st deletion starts a compaction (old heap: all 100
    entries, new heap: empty). While it compacts, drop_dead drops the dead heads of both heaps
    whatever their time, as the compacting pop_due pops them."""
    q = _queue(layout)
    for i in range(100):
        q.add(i, f"k{i}", None)
    for i in range(51):
        assert q.remove(i, f"k{i}", None)
    assert isinstance(q, timer_compaction._Compacting) and _sizes(q) == (0, 100)
    q.add(-5, "early", None)  # new heap: a live head
    q.remove(-5, "early", None)  # now a dead one (and the removal moves the old heap's last 16)
    assert _sizes(q) == (17, 84)  # the 16 moved ones are live (84-99) and the dead -5
    rows = [
        ((-100, 1), False, (16, 84)),  # the new heap's dead head (-5), whatever the time; old: dead
        ((-100, 30), False, (16, 54)),  # 30 of the old heap's dead ts 0-50
        ((-100, 21), True, (16, 33)),  # ts 30-50: the old head (51) is live now
        ((-100, 21), True, (16, 33)),
    ]
    for (time, limit), expected, sizes in rows:
        assert q.drop_dead(time, limit) is expected, (time, limit)
        assert _sizes(q) == sizes, (time, limit)
    fired = [q.pop_due(10**9) for _ in range(49)]
    assert [t.timestamp for t in fired if t is not None] == list(range(51, 100))
    assert q.pop_due(10**9) is None


@pytest.mark.parametrize("layout", ["flat", "sharded"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_skipping_in_steps_fires_the_same_timers_in_the_same_order(layout: str, seed: int) -> None:
    """The same random registrations, deletions (compactions start again and again) and pops
    on two queues; one of them drops its dead entries in steps of 0-3 before every pop."""
    rng = random.Random(seed)
    plain, stepped = _queue(layout), _queue(layout)
    now, steps = 0, 0
    for _ in range(20_000):
        r = rng.random()
        ident = (now + rng.randrange(300), f"k{rng.randrange(200)}", None)
        if r < 0.4:
            assert plain.add(*ident) == stepped.add(*ident)
        elif r < 0.8:
            live = list(plain.table())
            if live:
                victim = rng.choice(live)
                assert plain.remove(*victim) and stepped.remove(*victim)
        else:
            now += rng.randrange(40)
            while True:
                while not stepped.drop_dead(now, rng.randrange(4)):
                    steps += 1
                a, b = plain.pop_due(now), stepped.pop_due(now)
                assert a == b
                if a is None:
                    break
    assert steps > 100  # the steps did stop short of the whole run, again and again
    assert plain.entries() == stepped.entries()


FAR = 10**15  # the timers fire at the end of input only


class Rearm(KeyedProcessFunction):
    """Per record: delete the key's timer of its previous record, register one for this one
    (``bench/timer_hold.py``): a dead heap entry per record, the live ones last."""

    def __init__(self, keys: int) -> None:
        self.keys = keys

    processed = 0

    def process_element(self, value: Any, ctx: Any) -> Any:
        Rearm.processed += 1
        timers = ctx.timer_service()
        if value[1] >= self.keys:
            timers.delete_event_time_timer(FAR + value[1] - self.keys)
        timers.register_event_time_timer(FAR + value[1])
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield (ctx.get_current_key(), timestamp)


async def test_the_final_watermark_skips_deleted_timers_in_slices_and_fires_the_same() -> None:
    keys, records = 12_000, 36_000
    env = sf.StreamExecutionEnvironment(clock=AlwaysDue()).set_batch_size(1_000)
    data = [(i % keys, i) for i in range(records)]
    fired: list[tuple[int, int]] = []
    env.from_collection(data).key_by(lambda e: e[0]).process(Rearm(keys)).add_sink(fired.append)
    client = await env.execute_async("dead-skip")
    ops = [op for t in client.execution.tasks for op in t.operators if isinstance(op, TimerOperator)]
    assert len(ops) == 1
    service: TimerService = ops[0].timers
    queue = service._event
    Rearm.processed = 0
    done = asyncio.ensure_future(client.get_job_execution_result())
    most, before, dead_at_end = 0, -1, 0
    while not done.done():
        await asyncio.sleep(0)  # one loop turn
        if Rearm.processed < records:
            continue  # (a compaction drops dead entries while the input runs: MIGRATE per removal)
        entries = len(queue._heap) + len(queue._old)
        if before < 0:  # the end of input: the deleted timers are all before the live ones
            dead_at_end = entries - len(queue)
        else:
            most = max(most, before - entries)
        before = entries
    await done
    # the deleted timers' entries were popped a bounded step at a time, not all in one turn
    assert dead_at_end > 2 * DEAD_SLICE, dead_at_end  # (the job did leave a long dead run)
    assert most <= DEAD_SLICE + 1, most
    # the live timers (each key's last record's) fire, in timestamp order
    assert fired == [(i % keys, FAR + i) for i in range(records - keys, records)]


async def test_session_windows_closing_after_many_merges_skip_their_deleted_timers_in_slices() -> None:
    """Each element extends its key's session: the merge deletes the old window's timer and
    registers the new one's, so at the final watermark two deleted timers a key sit in front
    of the live ones; the window operator skips them in slices too, and the sessions' sums are
    as without."""
    from streamflow.common import Duration, WatermarkStrategy
    from streamflow.runtime.window_operator import WindowOperator
    from streamflow.windowing.assigners import EventTimeSessionWindows

    keys = 20_000
    env = sf.StreamExecutionEnvironment(clock=AlwaysDue()).set_batch_size(1_000)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _ts: e[1])
    data = [(k, t, 1) for t in range(3) for k in range(keys)]  # three elements a key, 1 ms apart
    fired: list[tuple[int, int, int]] = []
    (
        env.from_collection(data)
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda e: e[0])
        .window(EventTimeSessionWindows.with_gap(Duration.of_millis(10)))
        .reduce(lambda a, b: (a[0], max(a[1], b[1]), a[2] + b[2]))
        .add_sink(fired.append)
    )
    client = await env.execute_async("session-dead-skip")
    ops = [op for t in client.execution.tasks for op in t.operators if isinstance(op, WindowOperator)]
    assert len(ops) == 1
    queue = ops[0].timers._event
    done = asyncio.ensure_future(client.get_job_execution_result())
    most, before, dead_at_end = 0, -1, 0
    while not done.done():
        await asyncio.sleep(0)
        if ops[0].current_watermark < 2**62:
            continue  # (until the final watermark: deleted timers pile up while the input runs)
        entries = len(queue._heap) + len(queue._old)
        if before < 0:
            dead_at_end = entries - len(queue)
        else:
            most = max(most, before - entries)
        before = entries
    await done
    assert dead_at_end > 2 * DEAD_SLICE, dead_at_end  # (after the first slice: the rest of the run)
    assert most <= DEAD_SLICE + 1, most
    assert sorted(fired) == [(k, 2, 3) for k in range(keys)]
