"""Ports of Flink's ``flink-tests/src/test/java/org/apache/flink/api/datastream/
DataStreamBatchExecutionITCase.java`` and the cases of ``flink-tests/src/test/java/org/apache/
flink/test/streaming/runtime/SortingBoundedInputITCase.java`` not already in
``test_batch_sorted_input.py``, on streamflow's public (PyFlink-named) API.

Flink's ``TwoInputIdentityOperator`` / ``TestMixedTwoInputOperator`` are raw
``TwoInputStreamOperator``s (``transform``), which PyFlink does not expose; the ports use a
``CoProcessFunction`` / ``KeyedCoProcessFunction``, which in Flink's batch mode read their
inputs the same way (the operator is the same two-input operator with sorted inputs).
"""

from __future__ import annotations

from typing import Any

import pytest

from streamflow.common import WatermarkStrategy
from streamflow.common.restart_strategy import RestartStrategies
from streamflow.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from streamflow.datastream.connectors.number_seq import NumberSequenceSource
from streamflow.datastream.functions import (
    BroadcastProcessFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    MapFunction,
)
from streamflow.datastream.state import MapStateDescriptor, ValueStateDescriptor
from streamflow.state.key_groups import stable_hash

STATE_DESCRIPTOR = MapStateDescriptor("bc-input", None, None)
KEYED_STATE_DESCRIPTOR = ValueStateDescriptor("keyed-state", None)


def _failover_env() -> StreamExecutionEnvironment:
    """Flink's ``getExecutionEnvironment()`` of the ITCase: BATCH, parallelism 1, a checkpoint
    interval (ignored in batch mode), and a fixed-delay restart strategy."""
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.enable_checkpointing(42)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(10, 1))
    return env


def _batch_env(parallelism: int = 1) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(parallelism)
    return env.set_runtime_mode(RuntimeExecutionMode.BATCH)


def _tuple(value: tuple) -> str:
    """Flink's ``Tuple2.toString()``: ``(f0,f1)``."""
    return f"({value[0]},{value[1]})"


def _stamped(env: StreamExecutionEnvironment, data: list) -> Any:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])
    return env.from_collection(data).assign_timestamps_and_watermarks(strategy)


class SuffixAttemptId(MapFunction):
    """Flink's ``SuffixAttemptId``: appends ``-<suffix><attempt number>``."""

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix

    def open(self, runtime_context: Any) -> None:
        self.context = runtime_context

    def map(self, value: str) -> str:
        return f"{value}-{self.suffix}{self.context.get_attempt_number()}"


class OnceFailingMapper(SuffixAttemptId):
    """Flink's ``OnceFailingMapper``: fails on attempt 0, then suffixes as ``SuffixAttemptId``."""

    def map(self, value: str) -> str:
        if self.context.get_attempt_number() <= 0:
            raise RuntimeError("FAILING")
        return super().map(value)


def test_batch_failover_with_key_by_barrier() -> None:
    """Flink's ``DataStreamBatchExecutionITCase.batchFailoverWithKeyByBarrier``."""
    env = _failover_env()
    mapped = (
        env.from_collection(["foo", "bar"])
        .map(SuffixAttemptId("a"))
        .map(SuffixAttemptId("b"))
        .key_by(lambda v: v)
        .map(SuffixAttemptId("c"))
        .map(OnceFailingMapper("d"))
    )
    assert sorted(mapped.execute_and_collect()) == ["bar-a0-b0-c1-d1", "foo-a0-b0-c1-d1"]


def test_batch_failover_with_rebalance_barrier() -> None:
    """Flink's ``DataStreamBatchExecutionITCase.batchFailoverWithRebalanceBarrier``."""
    env = _failover_env()
    mapped = (
        env.from_collection(["foo", "bar"])
        .map(SuffixAttemptId("a"))
        .map(SuffixAttemptId("b"))
        .rebalance()
        .map(SuffixAttemptId("c"))
        .map(OnceFailingMapper("d"))
    )
    assert sorted(mapped.execute_and_collect()) == ["bar-a0-b0-c1-d1", "foo-a0-b0-c1-d1"]


def test_batch_failover_with_rescale_barrier() -> None:
    """Flink's ``DataStreamBatchExecutionITCase.batchFailoverWithRescaleBarrier``."""
    env = _failover_env()
    mapped = (
        env.from_collection(["foo", "bar"])
        .map(SuffixAttemptId("a"))
        .map(SuffixAttemptId("b"))
        .rescale()
        .map(SuffixAttemptId("c"))
        .set_parallelism(2)
        .map(OnceFailingMapper("d"))
        .set_parallelism(2)
    )
    assert sorted(mapped.execute_and_collect()) == ["bar-a0-b0-c1-d1", "foo-a0-b0-c1-d1"]


def test_batch_failover_gives_every_record_once() -> None:
    """What the three failover cases above assert besides the attempt numbers: after the
    restart every record comes out exactly once, through every operator, with attempt 1 after
    the exchange and 0 before it (only the failed pipelined region restarted)."""
    env = _failover_env()
    mapped = (
        env.from_collection(["foo", "bar"])
        .map(SuffixAttemptId("a"))
        .key_by(lambda v: v)
        .map(SuffixAttemptId("c"))
        .map(OnceFailingMapper("d"))
    )
    out = sorted(mapped.execute_and_collect())
    assert [v.split("-")[0] for v in out] == ["bar", "foo"]
    assert all(v.endswith("-a0-c1-d1") for v in out)


def _numbers(env: StreamExecutionEnvironment) -> Any:
    return env.from_source(NumberSequenceSource(0, 10), WatermarkStrategy.no_watermarks(), "numbers")


def test_batch_reduce_single_result_per_key() -> None:
    """Flink's ``DataStreamBatchExecutionITCase.batchReduceSingleResultPerKey``: one final sum
    per key, key 0 (30) before key 1 (25) at parallelism 1."""
    env = _failover_env()
    sums = _numbers(env).key_by(lambda i: i % 2).reduce(lambda a, b: a + b)
    out = list(sums.execute_and_collect())
    assert out == [{0: 30, 1: 25}[k] for k in sorted((0, 1), key=stable_hash)]


def test_batch_sum_single_result_per_key() -> None:
    """Flink's ``DataStreamBatchExecutionITCase.batchSumSingleResultPerKey`` (``sum(0)`` of a
    stream of numbers sums the numbers themselves)."""
    env = _failover_env()
    sums = _numbers(env).key_by(lambda i: i % 2).sum(0)
    out = list(sums.execute_and_collect())
    assert out == [{0: 30, 1: 25}[k] for k in sorted((0, 1), key=stable_hash)]


KEYED = [("regular2", 4), ("regular1", 3), ("regular1", 2), ("regular2", 1)]
REGULAR = [("regular4", 4), ("regular3", 3), ("regular3", 2), ("regular4", 1)]


class TwoInputIdentity(CoProcessFunction):
    """Flink's ``TwoInputIdentityOperator``: every record of either input, as a string."""

    def process_element1(self, value: Any, ctx: Any) -> Any:
        yield _tuple(value)

    def process_element2(self, value: Any, ctx: Any) -> Any:
        yield _tuple(value)


def _keyed_part(key_order: list[str]) -> list[str]:
    """The keyed input's records, key by key in the sort order, each key in timestamp order."""
    per_key = {k: sorted((r for r in KEYED if r[0] == k), key=lambda r: r[1]) for k in key_order}
    return [_tuple(r) for k in key_order for r in per_key[k]]


def test_batch_keyed_non_keyed_two_input_operator() -> None:
    """Flink's ``DataStreamBatchExecutionITCase.batchKeyedNonKeyedTwoInputOperator``: the
    non-keyed input is read in full (in arrival order) before the keyed input, which comes key
    by key, each key in timestamp order."""
    env = _batch_env()
    keyed, regular = _stamped(env, KEYED), _stamped(env, REGULAR)
    result = keyed.key_by(lambda r: r[0]).connect(regular).process(TwoInputIdentity())
    out = list(result.execute_and_collect())
    keys = sorted({"regular1", "regular2"}, key=stable_hash)
    assert out == [_tuple(r) for r in REGULAR] + _keyed_part(keys)


def test_batch_non_keyed_keyed_two_input_operator() -> None:
    """Flink's ``DataStreamBatchExecutionITCase.batchNonKeyedKeyedTwoInputOperator``: the same
    with the non-keyed input first."""
    env = _batch_env()
    keyed, regular = _stamped(env, KEYED), _stamped(env, REGULAR)
    result = regular.connect(keyed.key_by(lambda r: r[0])).process(TwoInputIdentity())
    out = list(result.execute_and_collect())
    keys = sorted({"regular1", "regular2"}, key=stable_hash)
    assert out == [_tuple(r) for r in REGULAR] + _keyed_part(keys)


BC = [("bc1", 1), ("bc2", 2), ("bc3", 3)]


class TestKeyedBroadcastFunction(KeyedBroadcastProcessFunction):
    """Flink's ``TestKeyedBroadcastFunction``; ``apply_to_keyed_state`` visits no key in batch
    mode (the broadcast side is read before any keyed record)."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        state = ctx.get_broadcast_state(STATE_DESCRIPTOR)
        yield f"{_tuple(value)}: {sorted(state.items())}"

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(STATE_DESCRIPTOR).put(value[0], value[0])

        def fail(key: Any, state: Any) -> None:
            raise RuntimeError("Shouldn't happen")

        ctx.apply_to_keyed_state(KEYED_STATE_DESCRIPTOR, fail)


class TestBroadcastFunction(BroadcastProcessFunction):
    """Flink's ``TestBroadcastFunction``."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        state = ctx.get_broadcast_state(STATE_DESCRIPTOR)
        yield f"{_tuple(value)}: {sorted(state.items())}"

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(STATE_DESCRIPTOR).put(value[0], value[0])


SEEN = str(sorted((b, b) for b, _ in BC))


def test_batch_keyed_broadcast_execution() -> None:
    """Flink's ``DataStreamBatchExecutionITCase.batchKeyedBroadcastExecution``: all broadcast
    input before any keyed record; keyed records key by key, each in timestamp order."""
    env = _batch_env()
    regular_data = [
        ("regular1", 1), ("regular1", 2), ("regular2", 2), ("regular1", 3), ("regular1", 4),
        ("regular1", 3), ("regular2", 5), ("regular1", 5), ("regular2", 3), ("regular1", 3),
    ]  # fmt: skip
    broadcast = _stamped(env, BC).broadcast(STATE_DESCRIPTOR)
    result = _stamped(env, regular_data).key_by(lambda r: r[0]).connect(broadcast)
    out = list(result.process(TestKeyedBroadcastFunction()).execute_and_collect())
    keys = sorted({"regular1", "regular2"}, key=stable_hash)
    expected = [
        f"{_tuple(r)}: {SEEN}"
        for k in keys
        for r in sorted((r for r in regular_data if r[0] == k), key=lambda r: r[1])
    ]
    assert out == expected


def test_batch_broadcast_execution() -> None:
    """Flink's ``DataStreamBatchExecutionITCase.batchBroadcastExecution``: all broadcast input
    before the (non-keyed) regular input, which keeps its arrival order (not sorted)."""
    env = _batch_env()
    regular_data = [
        ("regular1", 1), ("regular1", 2), ("regular1", 3), ("regular1", 4),
        ("regular1", 3), ("regular1", 5), ("regular1", 3),
    ]  # fmt: skip
    broadcast = _stamped(env, BC).broadcast(STATE_DESCRIPTOR)
    result = _stamped(env, regular_data).connect(broadcast).process(TestBroadcastFunction())
    out = list(result.execute_and_collect())
    assert out == [f"{_tuple(r)}: {SEEN}" for r in regular_data]


class MixedTwoInput(CoProcessFunction):
    """Flink's ``TestMixedTwoInputOperator``: input 2 (a plain ``broadcast()`` stream, not
    keyed) is collected into a list that input 1's keyed records print."""

    def open(self, runtime_context: Any) -> None:
        self.bc: list[str] = []

    def process_element1(self, value: Any, ctx: Any) -> Any:
        yield f"{_tuple(value)}: [{', '.join(self.bc)}]"

    def process_element2(self, value: Any, ctx: Any) -> Any:
        self.bc.append(value[0])
        return iter(())


@pytest.mark.parametrize("parallelism", [1, 3])
def test_sorted_two_input_keyed_co_process_with_timers(parallelism: int) -> None:
    """Flink's ``SortingBoundedInputITCase.testBatchExecutionWithTimersTwoInput``: both inputs
    of a ``KeyedCoProcessFunction`` come key by key in timestamp order, nothing is late despite
    the source's watermarks, and the timer ``on_timer`` registers is ignored (the quiesced
    timer service). Counts are per 10 ms bucket, both inputs together."""
    from streamflow.datastream import OutputTag
    from streamflow.datastream.state import MapStateDescriptor as MSD
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

    class Sums(KeyedCoProcessFunction):
        def open(self, runtime_context: Any) -> None:
            self.counts = runtime_context.get_map_state(MSD("sum", None, None))
            self.previous = runtime_context.get_state(ValueStateDescriptor("previousTimestamp", None))

        def _process(self, value: Any, ctx: Any) -> Any:
            ts = ctx.timestamp()
            next_ten = (ts + 10) // 10 * 10
            ctx.timer_service().register_event_time_timer(next_ten)
            if ts < ctx.timer_service().current_watermark():
                yield late, value
                return
            assert ts >= (self.previous.value() or 0)
            self.previous.update(ts)
            self.counts.put(next_ten, (self.counts.get(next_ten) or 0) + 1)

        def process_element1(self, value: Any, ctx: Any) -> Any:
            return self._process(value, ctx)

        def process_element2(self, value: Any, ctx: Any) -> Any:
            return self._process(value, ctx)

        def on_timer(self, timestamp: int, ctx: Any) -> Any:
            yield timestamp, ctx.get_current_key(), self.counts.get(timestamp)
            self.counts.remove(timestamp)
            ctx.timer_service().register_event_time_timer(timestamp + 1)

    env = _batch_env(parallelism)
    data = [(1, 3), (1, 1), (2, 1), (1, 4), (2, 3), (1, 2), (1, 13), (1, 11), (2, 14), (1, 11)]
    strategy = WatermarkStrategy.for_generator(AfterFourAndFourteen).with_timestamp_assigner(
        lambda e, ts: e[1]
    )

    def elements() -> Any:
        return env.from_collection(data).assign_timestamps_and_watermarks(strategy).map(lambda e: e[0])

    sums = elements().connect(elements()).key_by(lambda e: e, lambda e: e).process(Sums())
    late_sink, sums_sink = ListSink(), ListSink()
    sums.get_side_output(late).sink_to(late_sink)
    sums.sink_to(sums_sink)
    env.execute()
    assert late_sink.results == []
    expected = {1: [(10, 1, 8), (20, 1, 6)], 2: [(10, 2, 4), (20, 2, 2)]}
    if parallelism == 1:
        assert sums_sink.results == [row for key in sorted((1, 2), key=stable_hash) for row in expected[key]]
    else:
        assert sorted(sums_sink.results) == sorted(expected[1] + expected[2])


def test_batch_mixed_keyed_and_non_keyed_two_input_operator() -> None:
    """Flink's ``DataStreamBatchExecutionITCase.batchMixedKeyedAndNonKeyedTwoInputOperator``:
    a keyed input and a plain ``broadcast()`` input into one two-input operator; the broadcast
    input is read in full first (in arrival order), then the keyed one key by key."""
    env = _batch_env()
    bc = _stamped(env, [("bc3", 3), ("bc2", 2), ("bc1", 1)]).broadcast()
    regular_data = [
        ("regular1", 1), ("regular1", 2), ("regular1", 3), ("regular1", 4),
        ("regular2", 3), ("regular2", 5), ("regular1", 3),
    ]  # fmt: skip
    keyed = _stamped(env, regular_data).key_by(lambda r: r[0])
    result = keyed.connect(bc).process(MixedTwoInput())
    out = list(result.execute_and_collect())
    keys = sorted({"regular1", "regular2"}, key=stable_hash)
    expected = [
        f"{_tuple(r)}: [bc3, bc2, bc1]"
        for k in keys
        for r in sorted((r for r in regular_data if r[0] == k), key=lambda r: r[1])
    ]
    assert out == expected


class _OneInput(KeyedProcessFunction):
    """Flink's ``AssertingOperator``: fails on a key that comes back after another key."""

    def open(self, runtime_context: Any) -> None:
        self.seen: set = set()
        self.current: Any = object()

    def process_element(self, value: Any, ctx: Any) -> Any:
        if value[0] != self.current:
            assert value[0] not in self.seen, f"Received an out of order key: {value[0]}"
            self.seen.add(value[0])
            self.current = value[0]
        yield 1


@pytest.mark.parametrize("parallelism", [1, 3])
def test_one_and_two_input_keyed_operators_see_each_key_once(parallelism: int) -> None:
    """Flink's ``SortingBoundedInputITCase.testOneInputOperator`` / ``testTwoInputOperator``
    (smaller): a keyed operator in batch mode sees every key in one contiguous run (a key
    never comes back), on one input and across two connected inputs; every record counted."""
    import random

    from streamflow.testing import ListSink

    rnd = random.Random(7)
    n = 20_000
    data = [(rnd.randrange(500), bytes(4)) for _ in range(n)]

    class Asserting(KeyedCoProcessFunction):
        def open(self, runtime_context: Any) -> None:
            self.seen: set = set()
            self.current: Any = object()

        def _see(self, value: Any) -> Any:
            if value[0] != self.current:
                assert value[0] not in self.seen, f"Received an out of order key: {value[0]}"
                self.seen.add(value[0])
                self.current = value[0]
            yield 1

        def process_element1(self, value: Any, ctx: Any) -> Any:
            return self._see(value)

        def process_element2(self, value: Any, ctx: Any) -> Any:
            return self._see(value)

    env = _batch_env(parallelism)
    one, two = ListSink(), ListSink()
    first = env.from_collection(data)
    second = env.from_collection(list(reversed(data)))
    first.key_by(lambda e: e[0]).process(_OneInput()).sink_to(one)
    first.connect(second).key_by(lambda e: e[0], lambda e: e[0]).process(Asserting()).sink_to(two)
    env.execute()
    assert sum(one.results) == n
    assert sum(two.results) == 2 * n


class _SlowBroadcastSide:
    """The broadcast input of the tests below, arriving slowly (after the regular input)."""

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        import asyncio

        for b in BC:
            await asyncio.sleep(0.02)
            yield b


@pytest.mark.parametrize("keyed", [False, True])
def test_the_broadcast_side_is_read_first_even_when_it_arrives_last(keyed: bool) -> None:
    """``DataStreamBatchExecutionITCase.batchBroadcastExecution`` / ``batchKeyedBroadcastExecution``
    with the broadcast source slower than the regular one: Flink's batch broadcast operators
    (``BatchCoBroadcastWithNonKeyedOperator``, ``BatchCoBroadcastWithKeyedOperator``) read the
    broadcast input to its end before any regular record, whatever the arrival order. The
    keyed one did (its sorted input waits for the end); the non-keyed one processed regular
    records as they came, with the broadcast state still empty."""
    env = _batch_env()
    broadcast = env.from_async_iterable(_SlowBroadcastSide().__aiter__).broadcast(STATE_DESCRIPTOR)
    regular = env.from_collection([("regular1", i) for i in range(5)])
    if keyed:
        connected = regular.key_by(lambda r: r[0]).connect(broadcast)
        out = list(connected.process(TestKeyedBroadcastFunction()).execute_and_collect())
    else:
        out = list(regular.connect(broadcast).process(TestBroadcastFunction()).execute_and_collect())
    assert out == [f"{_tuple(('regular1', i))}: {SEEN}" for i in range(5)]


def test_a_list_key_of_the_one_keyed_input_sorts_as_any_key() -> None:
    """A key selector returning a list (PyFlink allows it; streamflow's keyed operators use
    hashable stand-ins) on the keyed input of ``keyed.connect(plain)`` in batch mode: sorted
    like any key, not refused."""
    env = _batch_env()
    keyed, regular = _stamped(env, KEYED), _stamped(env, REGULAR)
    result = keyed.key_by(lambda r: [r[0]]).connect(regular).process(TwoInputIdentity())
    out = list(result.execute_and_collect())
    assert out[:4] == [_tuple(r) for r in REGULAR]
    assert sorted(out[4:]) == sorted(_tuple(r) for r in KEYED)
    assert _tuple(("regular1", 2)) in out[4:] and out.index("(regular1,2)") < out.index("(regular1,3)")


async def _until(done: Any) -> None:
    import asyncio

    while not done():
        await asyncio.sleep(0.002)


async def test_the_regular_input_is_not_read_until_the_broadcast_input_ends() -> None:
    """Flink's ``BatchCoBroadcastWithNonKeyedOperator`` is ``InputSelectable``: until the
    broadcast input has ended the task does not read the regular input at all, so its producer
    is backpressured by the channels' bounded queues and nothing is held in memory. Here the
    broadcast source does not end until the test lets it; meanwhile the regular source (far
    more records than a channel holds) stops, its channel full, and nothing reaches the sink.
    Before, the operator read the regular input and held every batch in memory: the regular
    source ran to its end. (With pipelined exchanges, ``ALL_EXCHANGES_PIPELINED``: with the
    default blocking ones the regular source writes its whole result before the operator runs,
    as in Flink: ``test_batch_region_failover.py``.)"""
    import asyncio

    n, produced, out = 200_000, [0], []
    release = asyncio.Event()

    def regular_records():  # type: ignore[no-untyped-def]
        for i in range(n):
            produced[0] += 1
            yield ("r", i)

    async def broadcast_side():  # type: ignore[no-untyped-def]
        for b in BC:
            yield b
        await release.wait()

    env = _batch_env()
    env.configure({"execution.batch-shuffle-mode": "ALL_EXCHANGES_PIPELINED"})
    broadcast = env.from_async_iterable(broadcast_side).broadcast(STATE_DESCRIPTOR)
    regular = env.from_iterable(regular_records)
    regular.connect(broadcast).process(TestBroadcastFunction()).add_sink(out.append)
    client = await env.execute_async("input-selection")

    full: list[dict[str, Any]] = []

    def blocked_or_done() -> bool:  # the regular input's channel full, or the source at its end
        full[:] = [c for c in client.get_metrics_snapshot()["channels"]
                   if "BroadcastProcess" in c["name"] and c["queued"] >= c["capacity"]]
        return bool(full) or produced[0] == n

    await _until(blocked_or_done)
    for _ in range(100):  # let every task run on: a source that is blocked stays where it is
        await asyncio.sleep(0)
    assert blocked_or_done()
    assert produced[0] < n // 10, "the regular source ran on: its records were read and held"
    assert out == []
    (channel,) = full  # the regular source's, blocked at the channel's capacity
    assert produced[0] - channel["queued"] <= 2 * 512  # what the source holds, in a batch
    release.set()
    await client.get_job_execution_result()
    assert len(out) == n and out[-1] == f"{_tuple(('r', n - 1))}: {SEEN}"


def _shared_source_job(n: int, out: list) -> StreamExecutionEnvironment:
    """Both inputs of a non-keyed broadcast operator fed by one source task (the broadcast side
    through a chained filter and map)."""
    env = _batch_env()
    source = env.from_iterable(lambda: (("r", i) for i in range(n)))
    broadcast = source.filter(lambda r: r[1] < 3).map(lambda r: (f"bc{r[1]}", r[1]))
    source.connect(broadcast.broadcast(STATE_DESCRIPTOR)).process(TestBroadcastFunction()).add_sink(out.append)
    return env


async def test_input_selection_falls_back_to_holding_when_one_task_feeds_both_inputs(caplog: Any) -> None:
    """Input selection would deadlock when the task feeding the regular input also feeds the
    broadcast input: blocked on the full regular channel, it never ends the broadcast input
    (Flink's batch exchanges are blocking, so Flink has no such case). streamflow then holds
    the regular input in the operator, with a logged reason, and the job completes; every
    regular record still sees the whole broadcast state."""
    import logging

    import anyio

    n, out = 50_000, []
    env = _shared_source_job(n, out)
    with caplog.at_level(logging.WARNING, "streamflow.runtime.input_selection"):
        with anyio.fail_after(60):  # (a deadlock would hang here)
            await (await env.execute_async("shared-source")).get_job_execution_result()
    assert "'BroadcastProcess': input 2 is not read first" in caplog.text
    assert "deadlock" in caplog.text
    seen = str(sorted((f"bc{i}", f"bc{i}") for i in range(3)))
    assert len(out) == n and out[0] == f"{_tuple(('r', 0))}: {seen}" and out[-1].endswith(seen)


async def test_crossed_broadcast_operators_fall_back_to_holding(caplog: Any) -> None:
    """Two non-keyed broadcast operators with crossed inputs (A: regular s1, broadcast s2; B:
    regular s2, broadcast s1): selecting in both would stop s1 at A's full regular channel
    while B waits for s1's end, and s2 at B's while A waits for s2's. Neither selects (logged);
    both complete with the full broadcast state."""
    import logging

    import anyio

    n, out_a, out_b = 20_000, [], []
    env = _batch_env()
    s1 = env.from_iterable(lambda: (("a", i) for i in range(n)))
    s2 = env.from_iterable(lambda: (("b", i) for i in range(n)))
    s1.connect(s2.broadcast(STATE_DESCRIPTOR)).process(TestBroadcastFunction()).add_sink(out_a.append)
    s2.connect(s1.broadcast(STATE_DESCRIPTOR)).process(TestBroadcastFunction()).add_sink(out_b.append)
    with caplog.at_level(logging.WARNING, "streamflow.runtime.input_selection"):
        with anyio.fail_after(60):  # (a deadlock would hang here)
            await (await env.execute_async("crossed")).get_job_execution_result()
    assert caplog.text.count("is not read first") == 2
    assert len(out_a) == len(out_b) == n
    assert out_a[0].endswith(str([("b", "b")])) and out_b[0].endswith(str([("a", "a")]))
