"""The timer queues' sharded layout (runtime/timer_queues.py): a queue that grows past
``SHARD_AT`` timers turns sharded in place and behaves exactly as before, no dict of it grows
past a bounded size, and incremental checkpoints read it as they read the flat one."""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_timer_incremental import CODEC, MAXP, captured, decode, encode, service

from streamflow.runtime import timer_queues
from streamflow.runtime.timer_checkpoints import from_plain, read_chains
from streamflow.runtime.timer_queues import SEQ_RANGE, SHARD_AT, ShardedTimerQueue, TimerQueue
from streamflow.runtime.timers import TimerService
from streamflow.windowing import TimeWindow


class Reference:
    """The queue's contract written the obvious way: live timers with their registration
    number, fired in (timestamp, registration) order."""

    def __init__(self) -> None:
        self.live: dict[tuple, int] = {}
        self.n = 0

    def add(self, ident: tuple) -> bool:
        if ident in self.live:
            return False
        self.live[ident] = self.n
        self.n += 1
        return True

    def remove(self, ident: tuple) -> bool:
        return self.live.pop(ident, None) is not None

    def pop_due(self, time: int) -> tuple | None:
        due = [(ident[0], seq, ident) for ident, seq in self.live.items() if ident[0] <= time]
        if not due:
            return None
        ident = min(due)[2]
        del self.live[ident]
        return ident

    def firing_order(self) -> list[tuple]:
        return [i for _, _, i in sorted((i[0], s, i) for i, s in self.live.items())]


@pytest.fixture
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shard at 64 timers, seq ranges of 8: the sharded layout, its ranges dropped and made
    again, in a test of a few thousand operations."""
    monkeypatch.setattr(timer_queues, "SHARD_AT", 64)
    monkeypatch.setattr(timer_queues, "_RANGE_BITS", 3)


@pytest.mark.usefixtures("small_shards")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_sharded_queue_behaves_as_the_contract_says(seed: int) -> None:
    rnd = random.Random(seed)
    timers, ref = TimerService(), Reference()
    watermark = 0
    sharded_at = None
    for step in range(6_000):
        op = rnd.random()
        ident = (watermark + rnd.randrange(40), f"k{rnd.randrange(60)}", rnd.choice([None, TimeWindow(0, 5)]))
        if op < 0.55:
            assert timers.register_event_time_timer(ident[1], ident[2], ident[0]) == ref.add(ident)
        elif op < 0.75:
            assert timers.delete_event_time_timer(ident[1], ident[2], ident[0]) == ref.remove(ident)
        elif op < 0.8:
            assert timers.has_event_time_timer(ident[1], ident[2], ident[0]) == (ident in ref.live)
        else:
            watermark += rnd.randrange(3)
            fired = timers.pop_event_timer(watermark)
            expected = ref.pop_due(watermark)
            assert (None if fired is None else (fired.timestamp, fired.key, fired.namespace)) == expected
        assert timers.num_event_time_timers == len(ref.live)
        if sharded_at is None and isinstance(timers._event, ShardedTimerQueue):
            sharded_at = step
    assert sharded_at is not None  # the layout changed mid-way, and nothing else did
    assert timers.snapshot()["event_time"] == ref.firing_order()
    columns = timers.snapshot_columns()["event_time"]
    assert list(zip(*columns, strict=True)) == sorted(ref.live, key=ref.live.__getitem__)
    assert timers.next_event_time() == (min(ref.live)[0] if ref.live else None)
    assert len(timers.live()["event_time"]) == len(ref.live)
    table = timers.live()["event_time"]
    assert dict(zip(table, table.values(), strict=True)).keys() == ref.live.keys()


def test_a_large_queue_keeps_every_dict_small_and_fires_in_order() -> None:
    n = 3 * SHARD_AT
    timers = TimerService()
    for i in range(n):  # equal timestamps in pairs: registration order breaks the tie
        timers.register_event_time_timer(i, None, (n - i) // 2)
    queue = timers._event
    assert type(queue) is ShardedTimerQueue and len(queue) == n
    assert max(map(len, queue._shards)) < 4 * n // timer_queues.SHARDS
    assert max(map(len, queue._ranges.values())) <= SEQ_RANGE and not queue._live and not queue._timers
    fired = [t.key for t in timers.advance_watermark(n)]
    assert fired == sorted(range(n), key=lambda i: ((n - i) // 2, i))
    assert not queue._ranges and timers.num_timers == 0  # an emptied range is dropped
    assert timers.register_event_time_timer("again", None, 1) and timers.pop_event_timer(n).key == "again"


def test_the_move_to_shards_happens_once_and_in_place() -> None:
    timers = TimerService()
    queue = timers._event
    for i in range(SHARD_AT - 1):
        timers.register_event_time_timer(i, None, i)
    assert type(queue) is TimerQueue
    timers.register_event_time_timer("last", None, 0)
    assert timers._event is queue and type(queue) is ShardedTimerQueue
    assert timers.delete_event_time_timer("last", None, 0) and len(queue) == SHARD_AT - 1
    assert [t.key for t in timers.advance_watermark(2)] == [0, 1, 2]


def _heap_order(timers: TimerService) -> list[Any]:
    return [t.key for t in timers.advance_watermark(10**9)]


@pytest.mark.usefixtures("small_shards")
async def test_checkpoints_read_a_queue_that_turned_sharded_between_them() -> None:
    timers, ck = service(encode)
    files: dict[str, bytes] = {}
    for i in range(40):  # flat at the base
        timers.register_event_time_timer(f"k{i}", TimeWindow(0, 10), 100)
    first = await captured(ck, 1, files)
    assert first is not None and type(timers._event) is TimerQueue
    for i in range(40, 300):  # sharded at the delta
        timers.register_event_time_timer(f"k{i}", TimeWindow(0, 10), 100)
    timers.delete_event_time_timer("k3", TimeWindow(0, 10), 100)
    timers.delete_event_time_timer("k200", TimeWindow(0, 10), 100)
    assert timers.pop_event_timer(99) is None
    assert type(timers._event) is ShardedTimerQueue
    second = await captured(ck, 2, files)
    assert second is not None and len(second["chain"]) == 2
    for i in range(300, 320):
        timers.register_event_time_timer(f"k{i}", TimeWindow(0, 10), 100 + i % 2)
    third = await captured(ck, 3, files)
    assert third is not None and len(third["chain"]) == 3
    expected = timers.snapshot()
    for desc in (third, await _base_of(ck, files)):
        plain = read_chains([desc], files.__getitem__, CODEC, range(MAXP), MAXP)
        restored = TimerService()
        restored.restore({d: [from_plain(p, decode) for p in ts] for d, ts in plain.items()})
        assert restored.snapshot() == expected
    assert _heap_order(restored) == [t[1] for t in expected["event_time"]]


async def _base_of(ck: Any, files: dict[str, bytes]) -> dict[str, Any]:
    """A base of the sharded queue (a savepoint materialises in full)."""
    ck.chain.reset()
    desc = await captured(ck, 4, files)
    assert desc is not None and len(desc["chain"]) == 1 and "-base-" in desc["chain"][0]
    return desc


def test_a_sharded_base_restores_ties_in_registration_order() -> None:
    timers = TimerService()
    keys = [f"k{i}" for i in range(SHARD_AT + 500)]
    for k in keys:
        timers.register_event_time_timer(k, None, 7)
    table = timers.live()["event_time"]
    by_seq = sorted(zip(table, table.values(), strict=True), key=lambda e: e[1])
    assert [ident[1] for ident, _ in by_seq] == keys
    restored = TimerService()
    restored.restore({"event_time": [ident for ident, _ in by_seq]})
    assert _heap_order(restored) == keys


def test_the_newest_seq_and_reversed_by_seq_of_a_sharded_queue() -> None:
    timers = TimerService()
    for i in range(SHARD_AT + 10):
        timers.register_event_time_timer(i, None, i)
    pairs = list(timers.changes("event_time")[1])
    seqs = [seq for seq, _ in pairs]
    assert seqs == sorted(seqs, reverse=True) and len(pairs) == SHARD_AT + 10
    newest = [(SHARD_AT + 9, SHARD_AT + 9, None), (SHARD_AT + 8, SHARD_AT + 8, None)]
    assert [timer for _, timer in pairs[:2]] == newest
    assert timers.set_mark() == seqs[0] == max(timers._event.by_seq())
