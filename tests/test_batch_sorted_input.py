"""Batch mode reads every keyed input sorted: key by key, each key's records in timestamp
order, and fires a key's timers when its records end (Flink's ``SortingDataInput``,
``MultiInputSortingDataInput``, ``BatchExecutionInternalTimeService``; scenarios after
Flink's ``SortingDataInputTest``, ``MultiInputSortingDataInputsTest``,
``BatchExecutionInternalTimeServiceTest`` and ``SortingBoundedInputITCase``). Every job
runs at parallelism 1 and 4 on the same out-of-order input and must give the same
per-key results; at parallelism 1 the whole output order is checked too."""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

import pytest

from streamflow.common import Time, WatermarkStrategy
from streamflow.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from streamflow.datastream.functions import (
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    ProcessWindowFunction,
)
from streamflow.datastream.state import MapStateDescriptor, ValueStateDescriptor
from streamflow.datastream.window import TumblingEventTimeWindows
from streamflow.state.key_groups import stable_hash

MIN, MAX = -(2**63), 2**63 - 1
# (key, timestamp, value): out of order within every key, keys interleaved
DATA = [
    ("b", 30, "b3"), ("a", 20, "a2"), ("c", 5, "c1"), ("a", 40, "a4"), ("b", 10, "b1"),
    ("a", 10, "a1"), ("c", 25, "c3"), ("b", 20, "b2"), ("a", 30, "a3"), ("c", 15, "c2"),
]  # fmt: skip
KEYS_IN_ORDER = sorted("abc", key=stable_hash)  # the documented key order (sort_buffer.py)


def _env(parallelism: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(parallelism)
    return env.set_runtime_mode(RuntimeExecutionMode.BATCH)


def _stamped(env: StreamExecutionEnvironment, data: list = DATA) -> Any:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])
    return env.from_collection(data).assign_timestamps_and_watermarks(strategy)


def _by_key(out: list, key_of: Any = lambda r: r[1]) -> dict[Any, list]:
    per_key: dict[Any, list] = defaultdict(list)
    for r in out:
        per_key[key_of(r)].append(r)
    return dict(per_key)


def _contiguous(out: list, key_of: Any = lambda r: r[1]) -> list:
    """The keys in the order their outputs come, asserting each key's outputs are contiguous."""
    order: list = []
    for r in out:
        k = key_of(r)
        if not order or order[-1] != k:
            assert k not in order, f"key {k!r} comes back after another key: {out}"
            order.append(k)
    return order


@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_non_commutative_reduce_folds_in_timestamp_order(parallelism: int) -> None:
    stream = _stamped(_env(parallelism)).key_by(lambda e: e[0])
    out = list(stream.reduce(lambda a, b: (a[0], b[1], a[2] + b[2])).execute_and_collect())
    assert sorted(out) == [("a", 40, "a1a2a3a4"), ("b", 30, "b1b2b3"), ("c", 25, "c1c2c3")]


@pytest.mark.parametrize("parallelism", [1, 4])
def test_records_without_timestamps_keep_their_order_within_a_key(parallelism: int) -> None:
    """No timestamps: every record counts as Long.MIN_VALUE, so a key keeps arrival order
    (a stable sort), and still comes in one piece."""
    env = _env(parallelism)
    out = list(env.from_collection(DATA).key_by(lambda e: e[0]).reduce(
        lambda a, b: (a[0], b[1], a[2] + b[2])).execute_and_collect())  # fmt: skip
    assert sorted(out) == [("a", 30, "a2a4a1a3"), ("b", 20, "b3b1b2"), ("c", 15, "c1c3c2")]


class LastValue(KeyedProcessFunction):
    """Keeps the last value of its key and registers an event-time timer per record."""

    def open(self, runtime_context: Any) -> None:
        self.last = runtime_context.get_state(ValueStateDescriptor("last", None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        service = ctx.timer_service()
        yield "element", ctx.get_current_key(), value[2], self.last.value(), service.current_watermark()
        self.last.update(value[2])
        service.register_event_time_timer(value[1] + 1000)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield (
            "timer",
            ctx.get_current_key(),
            timestamp,
            self.last.value(),
            ctx.timer_service().current_watermark(),
        )


@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_keyed_process_function_sees_each_key_in_timestamp_order_then_its_timers(parallelism: int) -> None:
    out = list(_stamped(_env(parallelism)).key_by(lambda e: e[0]).process(LastValue()).execute_and_collect())
    per_key = _by_key(out)
    assert per_key["a"] == [
        ("element", "a", "a1", None, MIN),  # the watermark is MIN while a key's records go in
        ("element", "a", "a2", "a1", MIN),
        ("element", "a", "a3", "a2", MIN),
        ("element", "a", "a4", "a3", MIN),
        ("timer", "a", 1010, "a4", MAX),  # then MAX while its timers fire, in timestamp order
        ("timer", "a", 1020, "a4", MAX),
        ("timer", "a", 1030, "a4", MAX),
        ("timer", "a", 1040, "a4", MAX),
    ]
    assert [r[2] for r in per_key["b"]] == ["b1", "b2", "b3", 1010, 1020, 1030]
    assert [r[2] for r in per_key["c"]] == ["c1", "c2", "c3", 1005, 1015, 1025]
    if parallelism == 1:  # one subtask: key after key, each key's timers right after its records
        assert _contiguous(out) == KEYS_IN_ORDER


class Rescheduling(KeyedProcessFunction):
    """Registers more timers from on_timer: Flink's batch timer service is quiesced then."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        ctx.timer_service().register_event_time_timer(value[1])
        ctx.timer_service().register_processing_time_timer(
            ctx.timer_service().current_processing_time() + 10**9
        )
        return []

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        service = ctx.timer_service()
        service.register_event_time_timer(timestamp + 1)
        service.register_processing_time_timer(service.current_processing_time() + 1)
        yield ctx.time_domain().name, ctx.get_current_key(), timestamp if ctx.time_domain() == 0 else None


@pytest.mark.parametrize("parallelism", [1, 4])
def test_timers_registered_while_a_keys_timers_fire_are_ignored_and_logged(
    parallelism: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Flink's ``testIgnoringEventTimeTimersFromWithinCallback`` and its processing-time twin:
    the event-time timers fire in timestamp order, then the processing-time timer(s), per key;
    what on_timer registers is ignored with a warning."""
    with caplog.at_level(logging.DEBUG, logger="streamflow.runtime.sorting_input"):
        out = list(
            _stamped(_env(parallelism)).key_by(lambda e: e[0]).process(Rescheduling()).execute_and_collect()
        )
    per_key = _by_key(out)
    assert [r for r in per_key["a"] if r[0] == "EVENT_TIME"] == [
        ("EVENT_TIME", "a", t) for t in (10, 20, 30, 40)
    ]
    for key, rows in per_key.items():
        domains = [r[0] for r in rows]
        first_processing = domains.index("PROCESSING_TIME")
        assert set(domains[first_processing:]) == {"PROCESSING_TIME"}, f"{key}: {rows}"
        assert domains.count("EVENT_TIME") == len([d for d in DATA if d[0] == key])
    assert "event time timer for timestamp 11 ignored" in caplog.text
    assert "processing time timer" in caplog.text and "ignored" in caplog.text
    # a warning once per operator subtask, the next ones at DEBUG (a trigger may re-register each time)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "quiesced" in r.getMessage()]
    assert len(warnings) == parallelism if parallelism == 1 else 1 <= len(warnings) <= parallelism
    if parallelism == 1:
        assert _contiguous(out) == KEYS_IN_ORDER


class Sessions(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield key, context.window().start, "".join(e[2] for e in elements)


@pytest.mark.parametrize("parallelism", [1, 4])
def test_windows_fire_key_by_key_with_their_elements_in_timestamp_order(parallelism: int) -> None:
    keyed = _stamped(_env(parallelism)).key_by(lambda e: e[0])
    out = list(
        keyed.window(TumblingEventTimeWindows.of(Time.milliseconds(25)))
        .process(Sessions())
        .execute_and_collect()
    )
    assert sorted(out) == [
        ("a", 0, "a1a2"),
        ("a", 25, "a3a4"),
        ("b", 0, "b1b2"),
        ("b", 25, "b3"),
        ("c", 0, "c1c2"),
        ("c", 25, "c3"),
    ]
    if parallelism == 1:
        assert _contiguous(out, lambda r: r[0]) == KEYS_IN_ORDER


@pytest.mark.parametrize("parallelism", [1, 4])
def test_window_reduce_fast_path_fires_key_by_key(parallelism: int) -> None:
    keyed = _stamped(_env(parallelism)).key_by(lambda e: e[0])
    windows = keyed.window(TumblingEventTimeWindows.of(Time.milliseconds(25)))
    out = list(windows.reduce(lambda a, b: (a[0], b[1], a[2] + b[2])).execute_and_collect())
    assert sorted(out) == [
        ("a", 20, "a1a2"),
        ("a", 40, "a3a4"),
        ("b", 20, "b1b2"),
        ("b", 30, "b3"),
        ("c", 15, "c1c2"),
        ("c", 25, "c3"),
    ]
    if parallelism == 1:
        assert _contiguous(out, lambda r: r[0]) == KEYS_IN_ORDER


class Interleaved(KeyedCoProcessFunction):
    """Both inputs of one key, in timestamp order (input 1 first on a tie), then the timer."""

    def open(self, runtime_context: Any) -> None:
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", None))

    def _element(self, side: int, value: Any, ctx: Any) -> Any:
        seen = (self.seen.value() or ()) + (f"{side}:{value[2]}",)
        self.seen.update(seen)
        ctx.timer_service().register_event_time_timer(100)
        return []

    def process_element1(self, value: Any, ctx: Any) -> Any:
        return self._element(1, value, ctx)

    def process_element2(self, value: Any, ctx: Any) -> Any:
        return self._element(2, value, ctx)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ctx.get_current_key(), self.seen.value()


@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_two_input_keyed_operator_gets_both_inputs_interleaved_key_by_key(parallelism: int) -> None:
    env = _env(parallelism)
    first = _stamped(env, [("a", 30, "x3"), ("b", 5, "x1"), ("a", 10, "x1"), ("a", 20, "x2")])
    second = _stamped(env, [("a", 20, "y2"), ("b", 1, "y0"), ("a", 5, "y0"), ("c", 7, "y1"), ("a", 25, "y3")])
    stream = first.connect(second).key_by(lambda e: e[0], lambda e: e[0]).process(Interleaved())
    out = sorted(stream.execute_and_collect())
    assert out == [
        ("a", ("2:y0", "1:x1", "1:x2", "2:y2", "2:y3", "1:x3")),  # 20 on both: input 1 first
        ("b", ("2:y0", "1:x1")),
        ("c", ("2:y1",)),
    ]


class Rules(KeyedBroadcastProcessFunction):
    RULES = MapStateDescriptor("rules", None, None)

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(self.RULES).put(value, True)

    def process_element(self, value: Any, ctx: Any) -> Any:
        rules = ctx.get_broadcast_state(self.RULES)
        yield value[2], sorted(rules.keys())


@pytest.mark.parametrize("parallelism", [1, 4])
def test_the_broadcast_side_is_read_in_full_before_any_keyed_record(parallelism: int) -> None:
    env = _env(parallelism)
    rules = env.from_collection(["r1", "r2", "r3"]).broadcast(Rules.RULES)
    keyed = _stamped(env).key_by(lambda e: e[0])
    out = list(keyed.connect(rules).process(Rules()).execute_and_collect())
    assert len(out) == len(DATA)
    assert all(seen == ["r1", "r2", "r3"] for _, seen in out)
    if parallelism == 1:
        assert _contiguous(out, lambda r: r[0][0]) == KEYS_IN_ORDER


@pytest.mark.parametrize("parallelism", [1, 4])
def test_processing_time_timers_fire_at_their_keys_end(parallelism: int) -> None:
    class Processing(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            service = ctx.timer_service()
            service.register_processing_time_timer(service.current_processing_time() + 3_600_000)
            yield "element", value[0]

        def on_timer(self, timestamp: int, ctx: Any) -> Any:
            yield "timer", ctx.get_current_key()

    out = list(_stamped(_env(parallelism)).key_by(lambda e: e[0]).process(Processing()).execute_and_collect())
    per_key = _by_key(out)
    for key, rows in per_key.items():
        n = len([d for d in DATA if d[0] == key])
        assert rows[:n] == [("element", key)] * n
        assert rows[n:] and set(rows[n:]) == {("timer", key)}  # one per distinct millisecond
    if parallelism == 1:
        assert _contiguous(out) == KEYS_IN_ORDER


@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_sorted_input_larger_than_its_memory_spills_and_gives_the_same_results(parallelism: int) -> None:
    """``execution.sorted-inputs.memory`` of 1 KiB: the sort buffer writes sorted runs to disk
    and merges them (Flink's ``LargeSortingDataInputITCase``, small)."""
    data = [(f"k{i % 37}", (i * 7919) % 1000, f"{i:04d}") for i in range(3000)]
    expected: dict[str, str] = {}
    for key, _, value in sorted(data, key=lambda d: d[1]):  # a stable sort: arrival breaks ties
        expected[key] = expected.get(key, "") + value
    env = _env(parallelism)
    env.configure({"execution.sorted-inputs.memory": "1 kb"})
    stream = _stamped(env, data).key_by(lambda e: e[0])
    out = list(stream.reduce(lambda a, b: (a[0], b[1], a[2] + b[2])).execute_and_collect())
    assert {k: v for k, _, v in out} == expected


def test_an_unsortable_key_fails_naming_the_operator() -> None:
    class Opaque:
        def __hash__(self) -> int:
            return 1

    env = _env(1)
    stream = (
        env.from_collection([1, 2])
        .key_by(lambda e: Opaque())
        .reduce(lambda a, b: a + b)
        .name("opaque-reduce")
    )
    with pytest.raises(TypeError, match="cannot sort key") as info:
        list(stream.execute_and_collect())
    assert "opaque-reduce" in str(info.value) + "".join(getattr(info.value, "__notes__", []))


def test_word_count_keeps_one_count_per_word_in_key_order() -> None:
    env = _env(1)
    words = ["to", "be", "or", "not", "to", "be", "that", "is", "the", "question"]
    out = list(
        env.from_collection(words).map(lambda w: (w, 1)).key_by(lambda t: t[0]).sum(1).execute_and_collect()
    )
    assert [w for w, _ in out] == sorted(set(words), key=stable_hash)
    assert dict(out) == {"to": 2, "be": 2, "or": 1, "not": 1, "that": 1, "is": 1, "the": 1, "question": 1}


def test_sorted_inputs_can_be_turned_off_as_in_flink() -> None:
    """``execution.sorted-inputs.enabled: false`` (Flink's key): arrival order, every key's
    timers at the end of input, one final result per key all the same."""
    env = _env(1)
    env.configure({"execution.sorted-inputs.enabled": "false"})
    stream = _stamped(env).key_by(lambda e: e[0])
    out = list(stream.reduce(lambda a, b: (a[0], b[1], a[2] + b[2])).execute_and_collect())
    assert sorted(out) == [("a", 30, "a2a4a1a3"), ("b", 20, "b3b1b2"), ("c", 15, "c1c3c2")]


def test_a_failing_reduce_names_its_operator_and_record() -> None:
    def reduce(a: Any, b: Any) -> Any:
        if b[2] == "a3":
            raise ValueError("bad record")
        return (a[0], b[1], a[2] + b[2])

    stream = _stamped(_env(1)).key_by(lambda e: e[0]).reduce(reduce).name("failing-reduce")
    with pytest.raises(ValueError, match="bad record") as info:
        list(stream.execute_and_collect())
    notes = "".join(getattr(info.value, "__notes__", []))
    assert "failing-reduce" in notes and "('a', 30, 'a3')" in notes


ORDERS = [("alice", 12, "o3"), ("bob", 2, "o2"), ("alice", 1, "o1"), ("carol", 15, "o4"), ("bob", 9, "o5")]
PAYMENTS = [("alice", 5, "p2"), ("carol", 16, "p4"), ("alice", 3, "p1"), ("bob", 14, "p3"), ("bob", 1, "p0")]


def _mode(parallelism: int, mode: RuntimeExecutionMode) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(parallelism)
    return env.set_runtime_mode(mode)


def _in_order(data: list) -> list:
    return sorted(data, key=lambda d: d[1])  # the streaming run gets its input in time order


@pytest.mark.parametrize("parallelism", [1, 4])
def test_an_interval_join_in_batch_mode_finds_the_streaming_pairs(parallelism: int) -> None:
    """Both keyed inputs of the join interleaved by timestamp per key: every pair the streaming
    join finds (on the same records in time order), nothing dropped as late."""
    from streamflow.api.joins import ProcessJoinFunction

    class Pair(ProcessJoinFunction):
        def process_element(self, left: Any, right: Any, ctx: Any) -> Any:
            yield left[2], right[2], ctx.get_timestamp()

    def run(mode: RuntimeExecutionMode, orders: list, payments: list) -> list:
        env = _mode(parallelism, mode)
        left = _stamped(env, orders).key_by(lambda o: o[0])
        right = _stamped(env, payments).key_by(lambda p: p[0])
        return sorted(left.interval_join(right).between(-1, 4).process(Pair()).execute_and_collect())

    streaming = run(RuntimeExecutionMode.STREAMING, _in_order(ORDERS), _in_order(PAYMENTS))
    assert streaming == [("o1", "p1", 3), ("o1", "p2", 5), ("o2", "p0", 2), ("o4", "p4", 16)]
    assert run(RuntimeExecutionMode.BATCH, ORDERS, PAYMENTS) == streaming


@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_window_join_and_co_group_in_batch_mode_give_the_streaming_results(parallelism: int) -> None:
    def joined(mode: RuntimeExecutionMode, orders: list, payments: list) -> list:
        env = _mode(parallelism, mode)
        join = (
            _stamped(env, orders).join(_stamped(env, payments)).where(lambda o: o[0]).equal_to(lambda p: p[0])
        )
        windows = join.window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
        return sorted(windows.apply(lambda o, p: (o[2], p[2])).execute_and_collect())

    class Count:
        def co_group(self, orders: Any, payments: Any) -> Any:
            orders, payments = [o[2] for o in orders], [p[2] for p in payments]
            return [(tuple(orders), tuple(payments))]

    def grouped(mode: RuntimeExecutionMode, orders: list, payments: list) -> list:
        env = _mode(parallelism, mode)
        group = (
            _stamped(env, orders)
            .co_group(_stamped(env, payments))
            .where(lambda o: o[0])
            .equal_to(lambda p: p[0])
        )
        return sorted(
            group.window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
            .apply(Count())
            .execute_and_collect()
        )

    assert (
        joined(RuntimeExecutionMode.BATCH, ORDERS, PAYMENTS)
        == joined(RuntimeExecutionMode.STREAMING, _in_order(ORDERS), _in_order(PAYMENTS))
        == [("o1", "p1"), ("o1", "p2"), ("o2", "p0"), ("o4", "p4"), ("o5", "p0")]
    )
    # a key's elements reach the window in timestamp order in batch mode, whatever their arrival
    assert grouped(RuntimeExecutionMode.BATCH, ORDERS, PAYMENTS) == grouped(
        RuntimeExecutionMode.STREAMING, _in_order(ORDERS), _in_order(PAYMENTS)
    )


def test_a_failing_key_selector_names_its_operator_and_record() -> None:
    env = _env(1)
    stream = env.from_collection([("a", 1), ("b", 2)]).key_by(lambda e: e[0] + e[1]).reduce(lambda a, b: a)
    with pytest.raises(TypeError) as info:
        list(stream.name("bad-key").execute_and_collect())
    assert "('a', 1)" in "".join(getattr(info.value, "__notes__", []))


def test_flinks_batch_execution_with_timers_one_input() -> None:
    """Flink's ``SortingBoundedInputITCase.testBatchExecutionWithTimersOneInput``: watermarks
    the source's generator emits (5 after timestamp 4, 15 after 14) make nothing late in batch
    mode, every key's records come in timestamp order, and the timer on_timer registers
    (``timestamp + 1``, an endless loop without the quiesced timer service) is ignored."""
    from streamflow.datastream import OutputTag
    from streamflow.eventtime import WatermarkGenerator
    from streamflow.runtime.events import Watermark
    from streamflow.testing import ListSink

    class AfterFourAndFourteen(WatermarkGenerator):
        def on_event(self, event: Any, event_timestamp: int, output: Any) -> None:
            if event_timestamp == 4:
                output.emit_watermark(Watermark(5))
            elif event_timestamp == 14:
                output.emit_watermark(Watermark(15))

    late = OutputTag("late_elements")

    class Sums(KeyedProcessFunction):
        def open(self, runtime_context: Any) -> None:
            self.counts = runtime_context.get_map_state(MapStateDescriptor("sum", None, None))
            self.previous = runtime_context.get_state(ValueStateDescriptor("previousTimestamp", None))

        def process_element(self, value: Any, ctx: Any) -> Any:
            ts = ctx.timestamp()
            next_ten = (ts + 10) // 10 * 10
            ctx.timer_service().register_event_time_timer(next_ten)
            if ts < ctx.timer_service().current_watermark():
                yield late, value
                return
            assert ts >= (self.previous.value() or 0)
            self.previous.update(ts)
            self.counts.put(next_ten, (self.counts.get(next_ten) or 0) + 1)

        def on_timer(self, timestamp: int, ctx: Any) -> Any:
            yield timestamp, ctx.get_current_key(), self.counts.get(timestamp)
            self.counts.remove(timestamp)
            ctx.timer_service().register_event_time_timer(timestamp + 1)

    env = _env(1)
    data = [(1, 3), (1, 1), (2, 1), (1, 4), (2, 3), (1, 2), (1, 13), (1, 11), (2, 14), (1, 11)]
    strategy = WatermarkStrategy.for_generator(AfterFourAndFourteen).with_timestamp_assigner(
        lambda e, ts: e[1]
    )
    elements = env.from_collection(data).assign_timestamps_and_watermarks(strategy).map(lambda e: e[0])
    sums = elements.key_by(lambda e: e).process(Sums())
    late_sink, sums_sink = ListSink(), ListSink()
    sums.get_side_output(late).sink_to(late_sink)
    sums.sink_to(sums_sink)
    env.execute()
    assert late_sink.results == []
    expected = {1: [(10, 1, 4), (20, 1, 3)], 2: [(10, 2, 2), (20, 2, 1)]}
    assert sums_sink.results == [row for key in sorted((1, 2), key=stable_hash) for row in expected[key]]
