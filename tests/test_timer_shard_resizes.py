"""A sharded timer queue's dicts hold different shares of the keys (``timer_queues.py``,
module doc), so with evenly spread keys they do not reach a dict's resize point together: no
batch of registrations pays more than a few of the 64 resizes. Counted, not timed: after each
batch of 512 registrations, how many dicts changed their allocated size."""

from __future__ import annotations

import sys

from streamflow.runtime import timer_queues
from streamflow.runtime.timers import TimerService


def test_the_shards_resize_at_different_registrations() -> None:
    timers = TimerService()
    queue = timers._event
    n, batch = 200_000, 512  # past 64 x 1,365 and 64 x 2,730 entries: two resize points a dict
    sizes: dict[int, int] = {}
    most = resized = 0
    for start in range(0, n, batch):
        for i in range(start, start + batch):
            timers.register_event_time_timer(i, None, i)
        if type(queue) is not timer_queues.ShardedTimerQueue:
            continue
        dicts = {id(d): d for d in queue._shards}
        assert len(dicts) == timer_queues.SHARDS
        now = {k: sys.getsizeof(d) for k, d in dicts.items()}
        if sizes:
            changed = sum(now[k] != sizes[k] for k in now)
            most, resized = max(most, changed), resized + changed
        sizes = now
    assert resized >= 2 * timer_queues.SHARDS  # every dict did resize, twice
    assert most <= 4, most  # (equal shares: all 64 in the batch that crossed 64 x 2,730)
    shares = sorted(map(len, {id(d): d for d in queue._shards}.values()))
    assert 1.8 < shares[-1] / shares[0] < 2.2  # spread over an octave
