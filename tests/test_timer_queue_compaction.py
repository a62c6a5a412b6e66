"""A timer queue compacts its heap a little at a time (``runtime/timer_queues.py``, module doc):
past twice the live timers the heap becomes the *old* heap, each removal moves ``MIGRATE`` of
its entries (live ones only) to the new heap, and pops and peeks take the smaller head of the
two, in both layouts. A table of operations on the pure queue, then a long random sequence
against the reference model of ``test_timer_shards``."""

from __future__ import annotations

import itertools
import random

import pytest
from test_timer_shards import Reference

from streamflow.runtime import timer_compaction as timer_queues_compaction
from streamflow.runtime import timer_queues
from streamflow.runtime.timer_queues import COMPACT_MIN, ShardedTimerQueue, TimerQueue


def _queue(layout: str) -> TimerQueue:
    seq = itertools.count()
    queue = TimerQueue(lambda: next(seq))
    if layout == "sharded":
        queue._to_shards()  # the sharded layout from the start (its move is tested elsewhere)
        assert type(queue) is ShardedTimerQueue
    return queue


def _sizes(queue: TimerQueue) -> tuple[int, int]:
    return len(queue._heap), len(queue._old)


@pytest.mark.parametrize("layout", ["flat", "sharded"])
def test_compaction_table(layout: str) -> None:
    """Each row: an operation, what it returns, then (live timers, heap entries, old entries)."""
    q = _queue(layout)
    n = 100
    for i in range(n):  # timers 0, 10, ..., 990 on one key each
        assert q.add(i * 10, f"k{i}", None)
    assert (len(q), *_sizes(q)) == (100, 100, 0)
    rows = [
        # 50 removals from the back: 50 live, 100 entries, not more than twice the live ones
        *[(("remove", i * 10, f"k{i}"), True, None) for i in range(99, 49, -1)],
        (("check",), None, (50, 100, 0)),
        # one more: 49 live, 100 entries > 2 * 49: the heap becomes the old heap
        (("remove", 490, "k49"), True, (49, 0, 100)),
        # a removal moves the old heap's last MIGRATE entries (k84-k99: dead), live ones only
        (("remove", 480, "k48"), True, (48, 0, 84)),
        # pushes go to the new heap; a removal of a missing timer moves nothing
        (("add", 5, "early"), True, (49, 1, 84)),
        (("remove", 7, "nothing"), False, (49, 1, 84)),
        # reads move entries too (k68-k83, k52-k67: dead) and take the smaller head of the two
        (("peek",), 0, (49, 1, 68)),
        (("pop", -1), None, (49, 1, 52)),
        # k36-k51 moved (k36-k47 live: 12 to the new heap), then k0 popped from the old heap
        (("pop", 0), (0, "k0", None), (48, 13, 35)),
        (("peek",), 5, (48, 29, 19)),
        (("pop", 5), (5, "early", None), (47, 44, 3)),
        # the last entries move: the old heap is gone
        (("peek",), 10, (47, 47, 0)),
        # the next registration makes the queue its layout again
        (("add", 2000, "late"), True, (48, 48, 0)),
    ]
    for op, expected, sizes in rows:
        if len(q._old):
            assert isinstance(q, timer_queues_compaction._Compacting), op  # its class while it compacts
        if op[0] == "remove":
            got = q.remove(op[1], op[2], None)
        elif op[0] == "add":
            got = q.add(op[1], op[2], None)
        elif op[0] == "peek":
            got = q.peek_timestamp()
        elif op[0] == "pop":
            timer = q.pop_due(op[1])
            got = None if timer is None else (timer.timestamp, timer.key, timer.namespace)
        else:
            got = None
        assert got == expected, (op, got)
        if sizes is not None:
            assert (len(q), *_sizes(q)) == sizes, op
    assert type(q) is (TimerQueue if layout == "flat" else ShardedTimerQueue)  # its layout's class again
    rest = [(i * 10, f"k{i}", None) for i in range(1, 48)] + [(2000, "late", None)]
    assert q.entries() == rest
    fired = [q.pop_due(10**9) for _ in rest]
    assert [(t.timestamp, t.key, t.namespace) for t in fired if t is not None] == rest
    assert q.pop_due(10**9) is None and _sizes(q) == (0, 0)


def test_a_queue_that_only_fires_timers_ends_its_compaction() -> None:
    """Pops move old-heap entries too: a compaction started by removals ends while the timers
    fire (the class changes back at the next registration or removal)."""
    q = _queue("flat")
    for i in range(1000):
        q.add(i, i, None)
    for i in range(999, 498, -1):  # from the back: the last removal starts a compaction
        q.remove(i, i, None)
    assert len(q) == 499 and len(q._old) == 1000
    fired = [q.pop_due(10**9) for _ in range(499)]
    assert [t.timestamp for t in fired if t is not None] == list(range(499))
    assert q._old == [] and isinstance(q, timer_queues_compaction._Compacting)
    assert q.pop_due(10**9) is None and q.peek_timestamp() is None  # (the layout's code, delegated)
    q.add(5000, 1, None)  # the next registration (or removal): the layout's class again
    assert type(q) is TimerQueue and q.pop_due(10**9) is not None


@pytest.mark.parametrize("layout", ["flat", "sharded"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_compacting_queue_behaves_as_the_contract_says(
    layout: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random registrations, deletions (mostly: compactions start again and again), pops and
    peeks, against the reference; the dead timers logged for incremental checkpoints too."""
    monkeypatch.setattr(timer_queues, "_RANGE_BITS", 3)  # sharded: seq ranges dropped and made again
    rng = random.Random(seed)
    q, ref = _queue(layout), Reference()
    seq_of: dict[tuple, int] = {}
    dead: list[tuple] = []
    compactions = 0
    now = 0
    for step in range(15_000):
        if step == 5_000:
            q.mark = max(seq_of.values(), default=-1)  # a checkpoint: deletions before it are logged
        r = rng.random()
        ts, key = now + rng.randrange(500), f"k{rng.randrange(300)}"
        if r < 0.45:
            ident = (ts, key, None)
            added = q.add(*ident)
            assert added == ref.add(ident)
            if added:
                seq_of[ident] = ref.n - 1
        elif r < 0.9 and ref.live:
            ident = rng.choice(list(ref.live)) if rng.random() < 0.9 else (ts, key, None)
            removed = ref.remove(ident)
            starting = not q._old
            assert q.remove(*ident) == removed
            if removed and seq_of[ident] <= q.mark:
                dead.append(ident)
            compactions += starting and bool(q._old)
        elif r < 0.97:
            now += rng.randrange(20)
            timer = q.pop_due(now)
            expected = ref.pop_due(now)
            assert (None if timer is None else (timer.timestamp, timer.key, timer.namespace)) == expected
            if expected is not None and seq_of[expected] <= q.mark:
                dead.append(expected)
        else:
            order = ref.firing_order()
            assert q.peek_timestamp() == (order[0][0] if order else None)
        assert len(q) == len(ref.live)
        heap, old = _sizes(q)
        assert heap + old <= 3 * len(q) + 4 * COMPACT_MIN, (step, heap, old, len(q))
    assert compactions > 10  # the sequence ran many compactions, each one spread over removals
    assert q.entries() == ref.firing_order()
    assert q.dead == dead
