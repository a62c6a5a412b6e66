"""Event-time windows end to end against a reference model of Flink's ``WindowOperator`` rules.

Source of the rules: apache/flink, flink-streaming-java ``runtime/operators/windowing/
WindowOperator.java`` (``processElement``, ``onEventTime``, ``isWindowLate``,
``isElementLate``, ``registerCleanupTimer``, ``clearAllState``), ``EventTimeTrigger.java``
and ``MergingWindowSet.java`` / ``TimeWindow.mergeWindows``. The model, per key:

* an element's window is dropped if its cleanup time (``max_timestamp + lateness``) is at or
  before the watermark; the element goes to the late side output if all its windows were
  dropped and ``timestamp + lateness <= watermark``;
* otherwise it is added; ``EventTimeTrigger.onElement`` FIREs at once if the window's max
  timestamp is at or before the watermark, else registers a timer there; a cleanup timer
  is registered at ``max_timestamp + lateness``;
* a watermark fires the due timers in time order: the trigger timer emits the window's
  contents (timestamped ``max_timestamp``), the cleanup timer drops the window;
* sessions: a new window merges with every window it intersects (touching counts,
  ``TimeWindow.intersects``); the merged windows' timers are deleted and
  ``EventTimeTrigger.onMerge`` registers one at the result's max timestamp if it is after
  the watermark.

Random scripts (out-of-order elements of five keys, watermarks in between) run through a
``ScriptedSource`` into keyed tumbling, sliding and session windows with allowed lateness 0
and 40 and a late-data side output, at parallelism 1 and 3 with each window function kind;
every window result and every late element must be the model's.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

import streamflow as sf
from streamflow.datastream import OutputTag
from streamflow.testing import ListSink, Record, ScriptedSource
from streamflow.windowing import EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows

MIN = -(2**63)
SIZE, SIZE_SLIDING, SLIDE, GAP = 50, 60, 20, 25


def _script(seed: int) -> list:
    rng = random.Random(seed)
    watermark, t, out = -1, 0, []
    for i in range(rng.randrange(30, 90)):
        t += rng.randrange(0, 30)
        out.append(Record((rng.choice("abcde"), rng.randrange(1, 10), i), max(0, t - rng.randrange(0, 120))))
        if rng.random() < 0.25:
            watermark = max(watermark, t - rng.randrange(0, 60))
            out.append(sf.Watermark(watermark))
    return out


def _assign(kind: str, ts: int) -> list[tuple[int, int]]:
    if kind == "tumbling":
        return [(ts - ts % SIZE, ts - ts % SIZE + SIZE)]
    if kind == "sliding":
        last = ts - ts % SLIDE
        return [(s, s + SIZE_SLIDING) for s in range(last, ts - SIZE_SLIDING, -SLIDE)]
    return [(ts, ts + GAP)]


class _Model:
    """Flink's WindowOperator with EventTimeTrigger, allowed lateness and a late side output."""

    def __init__(self, kind: str, lateness: int) -> None:
        self.kind, self.lateness = kind, lateness
        self.watermark = MIN
        self.windows: dict[str, dict[tuple[int, int], list[int]]] = {}
        self.timers: set[tuple[int, str, tuple[int, int]]] = set()
        self.out: list[tuple] = []
        self.late: list[tuple] = []

    def _fire(self, key: str, w: tuple[int, int]) -> None:
        values = self.windows.get(key, {}).get(w)
        if values:
            self.out.append((key, w[0], w[1], sum(values), len(values)))

    def _merge(self, key: str, new: tuple[int, int]) -> tuple[int, int]:
        """MergingWindowSet.addWindow: the window the element goes to."""
        windows = self.windows.setdefault(key, {})
        start, end = new
        cluster: list[tuple[int, int]] = []
        grown = True
        while grown:
            grown = False
            for w in windows:
                if w not in cluster and w != new and w[0] <= end and w[1] >= start:
                    cluster.append(w)
                    start, end, grown = min(start, w[0]), max(end, w[1]), True
        result = (start, end)
        if cluster and cluster != [result]:
            values: list[int] = []
            for m in cluster:
                values += windows.pop(m)
                self.timers.discard((m[1] - 1, key, m))
                self.timers.discard((m[1] - 1 + self.lateness, key, m))
            windows[result] = values
            if result[1] - 1 > self.watermark:
                self.timers.add((result[1] - 1, key, result))
        return result

    def element(self, record: Record) -> None:
        (key, value, _), ts = record.value, record.timestamp
        assert ts is not None
        skipped = True
        for window in _assign(self.kind, ts):
            if self.kind == "session":
                window = self._merge(key, window)
            max_ts = window[1] - 1
            if max_ts + self.lateness <= self.watermark:  # isWindowLate
                continue
            skipped = False
            self.windows.setdefault(key, {}).setdefault(window, []).append(value)
            if max_ts <= self.watermark:
                self._fire(key, window)
            else:
                self.timers.add((max_ts, key, window))
            self.timers.add((max_ts + self.lateness, key, window))
        if skipped and ts + self.lateness <= self.watermark:  # isElementLate
            self.late.append(record.value)

    def advance(self, watermark: int) -> None:
        if watermark <= self.watermark:
            return
        self.watermark = watermark
        while due := sorted(t for t in self.timers if t[0] <= watermark):
            timer = due[0]
            self.timers.discard(timer)
            time, key, window = timer
            if window not in self.windows.get(key, {}):
                continue
            if time == window[1] - 1:
                self._fire(key, window)
            if time == window[1] - 1 + self.lateness:  # clearAllState
                del self.windows[key][window]
                self.timers.discard((window[1] - 1, key, window))


def _expected(script: list, kind: str, lateness: int) -> tuple[list, list]:
    model = _Model(kind, lateness)
    for item in script:
        if isinstance(item, Record):
            model.element(item)
        else:
            model.advance(item.timestamp)
    model.advance(2**63 - 1)
    return sorted(map(repr, model.out)), sorted(map(repr, model.late))


class _Contents(sf.ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        values = [e[1] for e in elements]
        yield (key, context.window().start, context.window().end, sum(values), len(values))


class _Sum(sf.AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: Any, acc: list[int]) -> list[int]:
        return [acc[0] + value[1], acc[1] + 1]

    def get_result(self, acc: list[int]) -> tuple:
        return (None, *acc)

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


class _WithWindow(sf.ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        for _, total, count in elements:
            yield (key, context.window().start, context.window().end, total, count)


def _run(script: list, kind: str, lateness: int, function: str, parallelism: int) -> tuple[list, list]:
    assigner = {
        "tumbling": lambda: TumblingEventTimeWindows.of(SIZE),
        "sliding": lambda: SlidingEventTimeWindows.of(SIZE_SLIDING, SLIDE),
        "session": lambda: EventTimeSessionWindows.with_gap(GAP),
    }[kind]()
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(7)
    tag = OutputTag("late")
    main, late = ListSink(), ListSink()
    windowed = (
        env.from_source(ScriptedSource(script), None, "script")
        .set_parallelism(1)
        .key_by(lambda e: e[0])
        .window(assigner)
        .allowed_lateness(lateness)
        .side_output_late_data(tag)
    )
    if function == "process":
        out = windowed.process(_Contents())
    elif function == "reduce":
        out = windowed.reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2]), window_function=_WithWindow())
    else:
        out = windowed.aggregate(_Sum(), window_function=_WithWindow())
    out.sink_to(main)
    out.get_side_output(tag).sink_to(late)
    env.execute()
    return sorted(map(repr, main.results)), sorted(map(repr, late.results))


CASES = [
    (seed, kind, lateness, function, parallelism)
    for seed, (function, parallelism) in enumerate(
        [("process", 1), ("reduce", 3), ("aggregate", 1), ("process", 3)]
    )
    for kind in ("tumbling", "sliding", "session")
    for lateness in (0, 40)
]


@pytest.mark.parametrize(("seed", "kind", "lateness", "function", "parallelism"), CASES)
def test_windows_follow_flinks_window_operator_rules(
    seed: int, kind: str, lateness: int, function: str, parallelism: int
) -> None:
    """Every window result and late element of a random script is the reference model's."""
    script = _script(seed * 10 + lateness)
    if function == "reduce":  # the reduce counts elements in field 2
        script = [
            Record((r.value[0], r.value[1], 1), r.timestamp) if isinstance(r, Record) else r for r in script
        ]
    got = _run(script, kind, lateness, function, parallelism)
    assert got == _expected(script, kind, lateness)
