"""Flink's ``SessionWindowITCase`` and ``CoStreamITCase``, end to end through the public API.

Sources (apache/flink): ``flink-tests/src/test/java/org/apache/flink/test/windowing/
sessionwindows/SessionWindowITCase.java`` (``testSessionWindowing``) and
``flink-tests/src/test/java/org/apache/flink/test/streaming/runtime/CoStreamITCase.java``
(``test``).

SessionWindowITCase drives event-time session windows (gap 1 s, allowed lateness 500 ms,
the default accumulating EventTimeTrigger) with a generator of interleaved sessions of many
keys: every session has 10 timely events, then up to 5 events that arrive after the session
fired but within the allowed lateness (each fires the session again, with everything it
holds), then events after the lateness (dropped). Its window function checks every firing:
all 10 timely events, no duplicate, never a dropped one; and in total
``(late + 1) * sessions * 10`` timely and ``sessions * late * (late + 1) / 2`` late events
were seen. Flink's generator (``ParallelSessionsEventGenerator``) is replaced by a seeded one
with the same structure: timely events in timestamp order with the watermark following
them, and the late and dropped events placed by the watermark at their arrival.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

import streamflow as sf
from streamflow.testing import ListSink, Record, ScriptedSource
from streamflow.windowing import EventTimeSessionWindows

GAP = 1_000
LATENESS = 500
EVENTS_PER_SESSION = 10
LATE_EVENTS_PER_SESSION = 5
MAX_DROPPED_EVENTS_PER_SESSION = 5
KEYS = 20
SESSIONS = 400
TIMELY, LATE, DROPPED = "timely", "late", "dropped"


def _script(seed: int) -> list:
    """Records ``(key, session, event id, timing)`` and watermarks, in arrival order."""
    rng = random.Random(seed)
    arrivals: list[tuple[int, int, Any, int]] = []  # (arrival time, order, record, timestamp)
    start = 0
    for session in range(SESSIONS):
        key = session % KEYS  # a key's next session starts >= 20 s later: never merges with this one
        start += 1_000 + rng.randrange(500)
        ts = start
        stamps = []
        for event in range(EVENTS_PER_SESSION):
            if event:
                ts += rng.randrange(GAP)  # closer than the gap: one session
            stamps.append(ts)
            arrivals.append((ts, len(arrivals), (key, session, event, TIMELY), ts))
        fired = stamps[-1] + GAP - 1  # the session window's max timestamp
        for late in range(LATE_EVENTS_PER_SESSION):  # after the firing, before the cleanup
            at = fired + 50 * (late + 1)
            record = (key, session, EVENTS_PER_SESSION + late, LATE)
            arrivals.append((at, len(arrivals), record, rng.randint(stamps[0], stamps[-1])))
        for dropped in range(rng.randrange(MAX_DROPPED_EVENTS_PER_SESSION + 1)):  # after the cleanup
            at = fired + LATENESS + 1 + 10 * dropped
            record = (key, session, 100 + dropped, DROPPED)
            arrivals.append((at, len(arrivals), record, rng.randint(stamps[0], stamps[-1])))
    script: list[Any] = []
    watermark = -1
    for at, _, record, ts in sorted(arrivals):
        # the watermark of the generator: a timely event's own timestamp - 1 before it, a late
        # or dropped event's arrival time (never going back)
        watermark = max(watermark, at - 1 if record[3] == TIMELY else at)
        script.append(sf.Watermark(watermark))
        script.append(Record(record, ts))
    return script


def _validate(key: Any, ctx: Any, events: Any) -> list:
    """SessionWindowITCase.ValidatingWindowFunction, its counters as the result."""
    events = list(events)
    timely = {e[2] for e in events if e[3] == TIMELY}
    late = {e[2] for e in events if e[3] == LATE}
    assert all(e[3] in (TIMELY, LATE) for e in events), f"illegal event in {ctx.window()}: {events}"
    assert len(events) >= EVENTS_PER_SESSION, f"too few events in {ctx.window()}: {events}"
    n_timely = sum(e[3] == TIMELY for e in events)
    n_late = sum(e[3] == LATE for e in events)
    assert n_timely == EVENTS_PER_SESSION and len(timely) == n_timely and len(late) == n_late
    assert len({e[1] for e in events}) == 1, f"sessions merged in {ctx.window()}"
    return [(n_timely, n_late)]


@pytest.mark.parametrize("parallelism", [1, 4])
def test_session_windowing(parallelism: int) -> None:
    """SessionWindowITCase.testSessionWindowing: every session fires once on time and once per
    late event within the allowed lateness, with all its events; dropped events never appear."""
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    sink = ListSink()
    (
        env.from_source(ScriptedSource(_script(1234567)), None, "sessions")
        .set_parallelism(1)
        .key_by(lambda e: e[0])
        .window(EventTimeSessionWindows.with_gap(GAP))
        .allowed_lateness(LATENESS)
        .process(_validate)
        .sink_to(sink)
    )
    env.execute()
    on_time = sum(t for t, _ in sink.results)
    late = sum(n for _, n in sink.results)
    assert len(sink.results) == SESSIONS * (LATE_EVENTS_PER_SESSION + 1)
    assert on_time == (LATE_EVENTS_PER_SESSION + 1) * SESSIONS * EVENTS_PER_SESSION
    assert late == SESSIONS * (LATE_EVENTS_PER_SESSION * (LATE_EVENTS_PER_SESSION + 1) // 2)


class _ToString(sf.CoFlatMapFunction):
    def flat_map1(self, value: Any) -> Any:
        yield str(value)

    def flat_map2(self, value: Any) -> Any:
        yield f"({value[0]},{value[1]})"


@pytest.mark.parametrize("parallelism", [1, 4])
def test_co_stream(parallelism: int) -> None:
    """CoStreamITCase.test: one source feeds both inputs of a keyed co-flat-map, one side keyed
    directly, the other through a rebalance and an unchained filter; every element reaches it
    once from each side."""
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    src = env.from_collection([1, 3, 5])
    filter1 = src.filter(lambda v: True).key_by(lambda v: v)
    filter2 = (
        src.map(lambda v: (v, v + 1))
        .rebalance()
        .filter(lambda v: True)
        .disable_chaining()
        .key_by(lambda v: v[0])
    )
    result = list(filter1.connect(filter2).flat_map(_ToString()).execute_and_collect())
    assert sorted(result) == ["(1,2)", "(3,4)", "(5,6)", "1", "3", "5"]
