"""Random pipelines through the public API against a plain-Python model of their answers.

Each seed builds a pipeline of stages drawn from the common DataStream operations: stateless
ones (map, filter, flat_map, re-keying), exchanges (rebalance, shuffle, rescale, key_by),
unions of two branches, event-time windows (tumbling, sliding and session; reduce, aggregate
and process-window functions), a keyed process function with map state and event-time
timers, and a terminal keyed running sum. Records are ``(key, value, timestamp)`` with
non-negative values; the source's timestamps never decrease, so no record is ever late and
every answer is a function of the input alone: the same at parallelism 1 and 4, with and
without a failure and restart from a checkpoint (``execute_and_collect`` is exactly-once
with checkpointing), and equal to what :func:`model` computes. A window's (or timer's) output
carries the window's max timestamp as its event time, as Flink's do, which the model follows
for the windows after it.

Also window and interval joins of the stream with a stateless variant of itself. What each
seed compares: the multiset of output records; for a running sum (order-dependent between
keys and, after an exchange, within one), the number of outputs per key and each key's final
sum. The failure variant runs with the heap backend and aligned checkpoints, and with
incremental RocksDB and unaligned checkpoints; the batch variant in BATCH mode with a region
failover (a running sum then emits one result per key). ``STREAMFLOW_RANDOM_PIPELINES=400`` runs more
seeds (400 and 200 with failures passed when this was written; the suite runs 40).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.api.joins import ProcessJoinFunction
from streamflow.connectors.base import END, Source, SourceReader
from streamflow.datastream import RuntimeExecutionMode
from streamflow.windowing import EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows

KEYS = 5
Rec = tuple[str, int, int]  # (key, value, timestamp); the model's timestamp is the event time
STATELESS = ("map", "filter", "flat_map", "rekey")
EXCHANGES = ("rebalance", "shuffle", "rescale", "key_by")
WINDOWS = ("tumbling", "sliding", "session", "timers")
JOINS = ("window_join", "interval_join")


def _events(rng: random.Random) -> list[Rec]:
    ts, out = 0, []
    for _ in range(rng.randrange(200, 500)):
        ts += rng.randrange(4)
        out.append((f"k{rng.randrange(KEYS)}", rng.randrange(50), ts))
    return out


def _pipeline(rng: random.Random) -> list[tuple]:
    stages: list[tuple] = []
    for _ in range(rng.randrange(2, 7)):
        kind = rng.choice(("stateless", "stateless", "exchange", "window", "union", "join"))
        if kind == "stateless":
            stages.append((rng.choice(STATELESS), rng.randrange(2, 5)))
        elif kind == "exchange":
            stages.append((rng.choice(EXCHANGES),))
        elif kind == "window":
            stages.append(
                (rng.choice(WINDOWS), rng.choice((10, 20, 40)), rng.choice(("reduce", "agg", "proc")))
            )
        elif kind == "join" and not any(st[0] in JOINS for st in stages):  # one: joins multiply records
            side = (rng.choice(STATELESS), rng.randrange(2, 5))
            if rng.random() < 0.5:
                stages.append(("window_join", *side, rng.choice((10, 20))))
            else:
                lower = rng.randrange(-6, 1)
                stages.append(("interval_join", *side, lower, lower + rng.randrange(0, 7)))
        else:
            stages.append(("union", rng.choice(STATELESS), rng.randrange(2, 5)))
    if rng.random() < 0.4:
        stages.append(("running_sum",))
    return stages


# ---- the stages' record functions, shared by the job and the model ----


def _map(a: int) -> Any:
    return lambda r: (r[0], (r[1] * a + 1) % 1000, r[2])


def _filter(m: int) -> Any:
    return lambda r: r[1] % m != 0


def _flat(m: int) -> Any:
    def flat(r: Rec) -> Any:
        yield r
        if r[1] % m == 0:
            yield (r[0], r[1] // m, r[2])

    return flat


def _rekey(m: int) -> Any:
    return lambda r: (f"k{(int(r[0][1:]) * m + r[1]) % KEYS}", r[1], r[2])


_STATELESS_FNS = {"map": ("map", _map), "filter": ("filter", _filter), "flat_map": ("flat_map", _flat),
                  "rekey": ("map", _rekey)}  # fmt: skip


def _stateless(name: str, arg: int) -> tuple[str, Any]:
    """The DataStream method and the function of a stateless stage."""
    method, factory = _STATELESS_FNS[name]
    return method, factory(arg)


def _sum(a: Rec, b: Rec) -> Rec:
    return (a[0], a[1] + b[1], max(a[2], b[2]))


class _SumAgg(sf.AggregateFunction):
    def create_accumulator(self) -> Any:
        return [None, 0, -1]

    def add(self, value: Rec, acc: Any) -> Any:
        acc[0], acc[1], acc[2] = value[0], acc[1] + value[1], max(acc[2], value[2])
        return acc

    def get_result(self, acc: Any) -> Rec:
        return (acc[0], acc[1], acc[2])

    def merge(self, a: Any, b: Any) -> Any:
        return [a[0] or b[0], a[1] + b[1], max(a[2], b[2])]


class _SumWindow(sf.ProcessWindowFunction):
    def process(self, key: str, context: Any, elements: Any) -> Any:
        items = list(elements)
        yield (key, sum(e[1] for e in items), max(e[2] for e in items))


class _BucketCounts(sf.KeyedProcessFunction):
    """Counts each key's records per bucket of ``size`` ms of event time in map state; the
    bucket's event-time timer emits ``(key, count, bucket max timestamp)`` and forgets it."""

    def __init__(self, size: int) -> None:
        self.size = size

    def open(self, runtime_context: Any) -> None:
        self.counts = runtime_context.get_map_state(sf.MapStateDescriptor("counts", None, None))

    def process_element(self, value: Rec, ctx: Any) -> None:
        end = ctx.timestamp() // self.size * self.size + self.size - 1
        self.counts.put(end, (self.counts.get(end) or 0) + 1)
        ctx.timer_service().register_event_time_timer(end)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield (ctx.get_current_key(), self.counts.get(timestamp), timestamp)
        self.counts.remove(timestamp)


class _JoinPairs(ProcessJoinFunction):
    def process_element(self, left: Rec, right: Rec, ctx: Any) -> Any:
        yield _sum(left, right)


def _assigner(kind: str, size: int) -> Any:
    if kind == "tumbling":
        return TumblingEventTimeWindows.of(size)
    if kind == "sliding":
        return SlidingEventTimeWindows.of(size, size // 2)
    return EventTimeSessionWindows.with_gap(size // 2)


def _apply(stream: Any, stage: tuple) -> Any:
    name = stage[0]
    if name in STATELESS:
        method, fn = _stateless(name, stage[1])
        return getattr(stream, method)(fn)
    if name in ("rebalance", "shuffle", "rescale"):
        return getattr(stream, name)()
    if name == "key_by":
        return stream.key_by(lambda r: r[0]).map(lambda r: r)
    if name == "union":
        method, fn = _stateless(stage[1], stage[2])
        return stream.union(getattr(stream, method)(fn))
    if name == "running_sum":
        return stream.key_by(lambda r: r[0]).reduce(_sum)
    if name in JOINS:
        method, fn = _stateless(stage[1], stage[2])
        other = getattr(stream, method)(fn)
        if name == "window_join":
            joined = stream.join(other).where(lambda r: r[0]).equal_to(lambda r: r[0])
            return joined.window(TumblingEventTimeWindows.of(stage[3])).apply(_sum)
        keyed = stream.key_by(lambda r: r[0]).interval_join(other.key_by(lambda r: r[0]))
        return keyed.between(stage[3], stage[4]).process(_JoinPairs())
    keyed = stream.key_by(lambda r: r[0])
    if name == "timers":
        return keyed.process(_BucketCounts(stage[1]))
    windowed = keyed.window(_assigner(name, stage[1]))
    if stage[2] == "reduce":
        return windowed.reduce(_sum)
    if stage[2] == "agg":
        return windowed.aggregate(_SumAgg())
    return windowed.process(_SumWindow())


# ---- the model ----


def _windows(kind: str, size: int, ts: int) -> list[tuple[int, int]]:
    if kind == "tumbling":
        start = ts // size * size
        return [(start, start + size)]
    slide = size // 2
    last = ts // slide * slide
    return [(s, s + size) for s in range(last, ts - size, -slide) if s <= ts < s + size]


def _sessions(recs: list[tuple[Rec, int]], gap: int) -> list[tuple[list[Rec], int]]:
    """A key's records merged into sessions, each with its end: a record's window is
    ``[t, t + gap)`` for its event time t, and windows that intersect or touch merge (Flink's
    ``TimeWindow.intersects``: ``end >= start``)."""
    out: list[tuple[list[Rec], int]] = []
    for r, ts in sorted(recs, key=lambda rt: rt[1]):
        if not out or ts > out[-1][1]:
            out.append(([], 0))
        group, end = out[-1]
        group.append(r)
        out[-1] = (group, max(end, ts + gap))
    return out


def _model_window(recs: list[tuple[Rec, int]], kind: str, size: int) -> list[tuple[Rec, int]]:
    by_key: dict[str, list[tuple[Rec, int]]] = defaultdict(list)
    for r, ts in recs:
        by_key[r[0]].append((r, ts))
    out = []
    for key, items in by_key.items():
        if kind == "timers":
            buckets = Counter(ts // size * size + size - 1 for _r, ts in items)
            out += [((key, n, end), end) for end, n in buckets.items()]
            continue
        panes: dict[int, list[Rec]] = defaultdict(list)  # window end -> its records
        if kind == "session":
            for group, end in _sessions(items, size // 2):
                panes[end] = group
        else:
            for r, ts in items:
                for _start, end in _windows(kind, size, ts):
                    panes[end].append(r)
        for end, group in panes.items():
            out.append(((key, sum(r[1] for r in group), max(r[2] for r in group)), end - 1))
    return out


def _model_join(recs: list[tuple[Rec, int]], stage: tuple) -> list[tuple[Rec, int]]:
    """Every pair of a key's left and right records in one tumbling window (a window join:
    the window's max timestamp), or with the right one's time in ``[t + lower, t + upper]`` of
    the left one's (an interval join: the later of the two times)."""
    method, fn = _stateless(stage[1], stage[2])
    right = _stateless_model(recs, method, fn)
    out = []
    for lr, lt in recs:
        for rr, rt in right:
            if lr[0] != rr[0]:
                continue
            if stage[0] == "window_join":
                size = stage[3]
                if lt // size == rt // size:
                    out.append((_sum(lr, rr), lt // size * size + size - 1))
            elif lt + stage[3] <= rt <= lt + stage[4]:
                out.append((_sum(lr, rr), max(lt, rt)))
    return out


def _stateless_model(recs: list[tuple[Rec, int]], method: str, fn: Any) -> list[tuple[Rec, int]]:
    if method == "map":
        return [(fn(r), ts) for r, ts in recs]
    if method == "filter":
        return [(r, ts) for r, ts in recs if fn(r)]
    return [(o, ts) for r, ts in recs for o in fn(r)]


def model(events: list[Rec], stages: list[tuple]) -> list[tuple[Rec, int]]:
    """Every stage's output as ``(record, event time)``; the record's own third field is the
    timestamp it was made with (a window's: its newest element's)."""
    recs = [(e, e[2]) for e in events]
    for stage in stages:
        name = stage[0]
        if name in STATELESS or name == "union":
            changed = _stateless_model(recs, *_stateless(*stage[-2:]))
            recs = recs + changed if name == "union" else changed
        elif name in WINDOWS:
            recs = _model_window(recs, name, stage[1])
        elif name in JOINS:
            recs = _model_join(recs, stage)
        elif name == "running_sum":
            raise AssertionError("terminal: see _expected")
        # exchanges change no answer
    return recs


def _expected(events: list[Rec], stages: list[tuple], batch: bool = False) -> Any:
    """The model's answer as :func:`_observed` gives it; in batch mode a running sum emits one
    final result per key (Flink's ``BatchGroupedReduceOperator``)."""
    if stages[-1] == ("running_sum",):
        recs = [r for r, _ in model(events, stages[:-1])]
        keys = {r[0] for r in recs}
        counts = Counter(keys) if batch else Counter(r[0] for r in recs)
        return counts, {k: sum(r[1] for r in recs if r[0] == k) for k in keys}
    return Counter(r for r, _ in model(events, stages))


def _observed(out: list[Rec], stages: list[tuple]) -> Any:
    if stages[-1] == ("running_sum",):
        return Counter(r[0] for r in out), {
            k: max(r[1] for r in out if r[0] == k) for k in {r[0] for r in out}
        }
    return Counter(out)


class _FailOnce(sf.MapFunction):
    """Fails once: at the first record at or after ``at`` once a checkpoint has completed in
    ``chk`` (so the restart restores one); without ``chk`` at the fifth record it sees."""

    failed: set[str] = set()
    seen: Counter[str] = Counter()

    def __init__(self, tag: str, at: int, chk: Path | None = None) -> None:
        self.tag, self.at, self.chk = tag, at, chk

    def map(self, value: Rec) -> Rec:
        if self.tag in _FailOnce.failed:
            return value
        if self.chk is None:
            _FailOnce.seen[self.tag] += 1
            due = _FailOnce.seen[self.tag] == 5
        else:
            due = value[2] >= self.at and any(self.chk.glob("chk-*/_metadata"))
        if due:
            _FailOnce.failed.add(self.tag)
            raise RuntimeError("injected failure")
        return value


class _GatedSource(Source):
    """The events with their timestamps, in batches of 16; after half of them it emits nothing
    until a checkpoint has completed in ``chk`` (its barriers pass meanwhile)."""

    def __init__(self, events: list[Rec], chk: Path) -> None:
        self.events, self.chk = events, chk

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        return _GatedReader(self)


class _GatedReader(SourceReader):
    def __init__(self, source: _GatedSource) -> None:
        self.source, self.position = source, 0
        self.wake: Any = None

    async def start(self, wake: Any) -> None:
        self.wake = wake

    def snapshot_position(self) -> int:
        return self.position

    def restore_position(self, position: Any) -> None:
        self.position = int(position)

    def poll_batch(self, max_records: int) -> Any:
        events, start = self.source.events, self.position
        if start >= len(events):
            return END
        half = len(events) // 2
        if start == half and not any(self.source.chk.glob("chk-*/_metadata")):
            asyncio.get_running_loop().call_later(0.005, self.wake)
            return None
        batch = events[start : min(start + 16, half if start < half else len(events))]
        self.position += len(batch)
        return batch, [e[2] for e in batch]


def _run(
    events: list[Rec], stages: list[tuple], parallelism: int, chk: Path | None = None,
    setup: str = "heap, aligned",
) -> list:  # fmt: skip
    """The pipeline's output; with ``chk``, checkpointed there and failing once half-way."""
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    if chk is not None:
        env.enable_checkpointing(10)
        env.get_checkpoint_config().set_checkpoint_storage_dir(chk)
        env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(2, 0))
        if "unaligned" in setup:
            env.get_checkpoint_config().enable_unaligned_checkpoints()
        if "rocksdb" in setup:
            env.set_state_backend(sf.EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True))
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _ts: e[2])
    source = (
        env.from_collection(events)
        if chk is None
        else env.from_source(_GatedSource(events, chk), None, "gated")
    )
    stream = source.assign_timestamps_and_watermarks(strategy)
    for i, stage in enumerate(stages):
        if chk is not None and i == len(stages) // 2:
            stream = stream.map(_FailOnce(str(chk), events[len(events) // 2][2], chk))
        stream = _apply(stream, stage)
    with stream.execute_and_collect() as results:
        return list(results)


def _run_batch(events: list[Rec], stages: list[tuple], tag: str) -> list:
    """The pipeline in BATCH mode at parallelism 4, failing once (its region restarts)."""
    env = sf.StreamExecutionEnvironment().set_parallelism(4).set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(2, 0))
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _ts: e[2])
    stream = env.from_collection(events).assign_timestamps_and_watermarks(strategy)
    for i, stage in enumerate(stages):
        if i == len(stages) // 2:
            stream = stream.map(_FailOnce(tag, 0))
        stream = _apply(stream, stage)
    with stream.execute_and_collect() as results:
        return list(results)


SEEDS = range(int(os.environ.get("STREAMFLOW_RANDOM_PIPELINES", "40")))


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_pipeline_answers_as_the_model_at_parallelism_1_and_4(seed: int) -> None:
    rng = random.Random(seed)
    events, stages = _events(rng), _pipeline(rng)
    expected = _expected(events, stages)
    for parallelism in (1, 4):
        got = _observed(_run(events, stages, parallelism), stages)
        assert got == expected, f"seed {seed}, parallelism {parallelism}, stages {stages}"


@pytest.mark.parametrize("setup", ["heap, aligned", "rocksdb incremental, unaligned"])
@pytest.mark.parametrize("seed", SEEDS[::8])
def test_a_random_pipeline_answers_as_the_model_across_a_failure(
    seed: int, setup: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same pipelines with checkpoints every 10 ms and one failure after half the input
    and a completed checkpoint (the restart restores it): exactly the model's answer."""
    rng = random.Random(seed)
    events, stages = _events(rng), _pipeline(rng)
    with caplog.at_level(logging.INFO, logger="streamflow"):
        got = _observed(_run(events, stages, 4, tmp_path / "chk", setup), stages)
    assert got == _expected(events, stages), f"seed {seed}, {setup}, stages {stages}"
    assert re.search(r"restarted from \S+chk-\d+", caplog.text)


@pytest.mark.parametrize("seed", SEEDS[::4])
def test_a_random_pipeline_answers_as_the_model_in_batch_mode_across_a_region_failover(
    seed: int, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """BATCH mode (sorted keyed inputs, event time at the end, blocking exchanges) at
    parallelism 4 with one failure: only the failed region restarts, and the answer is the
    model's (a running sum: one final result per key)."""
    rng = random.Random(seed)
    events, stages = _events(rng), _pipeline(rng)
    with caplog.at_level(logging.WARNING, logger="streamflow"):
        got = _observed(_run_batch(events, stages, str(tmp_path)), stages)
    assert got == _expected(events, stages, batch=True), f"seed {seed}, stages {stages}"
    assert str(tmp_path) in _FailOnce.failed and "only its pipelined region restarts" in caplog.text
