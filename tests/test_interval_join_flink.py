"""Ports of Flink's interval-join tests onto streamflow's interval join.

Sources (apache/flink):
flink-streaming-java/src/test/java/org/apache/flink/streaming/api/operators/co/IntervalJoinOperatorTest.java
(an operator-level harness: :class:`JoinHarness` below plays ``KeyedTwoInputStreamOperatorTestHarness``,
with one watermark per input combined as the task's input does) and
flink-tests/src/test/java/org/apache/flink/test/streaming/runtime/IntervalJoinITCase.java (end to end
through the public DataStream API). Flink's tests are parameterized by ``lhsFasterThanRhs``; so are these.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from window_harness import MAX_PARALLELISM, Recorder

import streamflow as sf
from streamflow.api.joins import _IntervalJoinFunction, _IntervalJoinOperator
from streamflow.checkpoint.restore import OperatorRestore
from streamflow.datastream.functions import ProcessJoinFunction
from streamflow.functions import OutputTag
from streamflow.runtime.context import OperatorContext
from streamflow.runtime.events import MIN_WATERMARK, Watermark
from streamflow.runtime.metrics import MetricGroup
from streamflow.runtime.operator import Output
from streamflow.runtime.processing_time import ProcessingTimeService
from streamflow.state import codec
from streamflow.state.keyed import KeyedStateBackend
from streamflow.testing import ListSink, ManualClock, Record, ScriptedSource

LEFT_LATE, RIGHT_LATE = OutputTag("left_late"), OutputTag("right_late")


def _passthrough(left: Any, right: Any, ctx: Any) -> list:
    """Flink's PassthroughFunction: emits the pair (here its two timestamps)."""
    return [(left[1], right[1])]


class JoinHarness:
    """One interval-join operator, keyed by the element's first field, fed per input: elements are
    ``("key", ts)``; ``watermark1``/``watermark2`` advance one input's watermark and the operator
    sees the minimum of both when it rises (Flink's two-input watermark combination)."""

    def __init__(
        self,
        lower: int,
        lower_inclusive: bool,
        upper: int,
        upper_inclusive: bool,
        fn: Any = _passthrough,
        late: bool = False,
    ) -> None:
        if not lower_inclusive:  # IntervalJoinOperator's constructor: move the bound inwards
            lower += 1
        if not upper_inclusive:
            upper -= 1
        self.args = (lower, upper, (LEFT_LATE, RIGHT_LATE) if late else (None, None))
        self.fn_body = fn
        self.clock = ManualClock(0)
        self.main, self.left_late, self.right_late = Recorder(), Recorder("L"), Recorder("R")
        self.wm = [MIN_WATERMARK, MIN_WATERMARK]
        self.combined = MIN_WATERMARK
        self.op, self.fn = self._new_operator(None)

    def _new_operator(self, restored: Any) -> tuple[_IntervalJoinOperator, _IntervalJoinFunction]:
        lower, upper, tags = self.args
        fn = _IntervalJoinFunction(self.fn_body, lower, upper, tags)
        op = _IntervalJoinOperator("IntervalJoin", lambda e: e[0], lambda e: e[0], fn)
        ctx = OperatorContext(
            uid="join",
            name="IntervalJoin",
            task_name="IntervalJoin",
            subtask_index=0,
            parallelism=1,
            max_parallelism=MAX_PARALLELISM,
            clock=self.clock,
            metrics=MetricGroup("join[0]", {}),
            processing_time=ProcessingTimeService(self.clock, lambda: None),
            keyed_backend=KeyedStateBackend(MAX_PARALLELISM),
        )
        sides = {LEFT_LATE.tag_id: [self.left_late], RIGHT_LATE.tag_id: [self.right_late]}
        op.setup(ctx, Output([self.main], sides))
        op.initialize_state(restored)
        return op, fn

    async def open(self) -> JoinHarness:
        await self.op.open()
        return self

    async def element1(self, ts: int | None, key: str = "k") -> None:
        await self.op.process_batch([(key, ts)], None if ts is None else [ts])

    async def element2(self, ts: int | None, key: str = "k") -> None:
        await self.op.process_batch2([(key, ts)], None if ts is None else [ts])

    async def _watermark(self, side: int, ts: int) -> None:
        self.wm[side] = ts
        combined = min(self.wm)
        if combined > self.combined:
            self.combined = combined
            await self.op.process_watermark(Watermark(combined))

    async def watermark1(self, ts: int) -> None:
        await self._watermark(0, ts)

    async def watermark2(self, ts: int) -> None:
        await self._watermark(1, ts)

    async def elements_and_watermarks(self, start: int, end: int, lhs_faster: bool) -> None:
        """Flink's ``processElementsAndWatermarks(from, to)``: one side's elements each with its
        watermark, then the other side's."""
        left = [(self.element1, self.watermark1, i) for i in range(start, end + 1)]
        right = [(self.element2, self.watermark2, i) for i in range(start, end + 1)]
        for element, watermark, i in left + right if lhs_faster else right + left:
            await element(i)
            await watermark(i)

    async def snapshot_and_restore(self) -> None:
        state = codec.decode(codec.encode(self.op.snapshot_state(1)))
        await self.op.close()
        self.main.events.clear()
        self.op, self.fn = self._new_operator(OperatorRestore(state, [state], range(MAX_PARALLELISM)))
        await self.op.open()

    def results(self) -> list[tuple]:
        """The joined records as ``(left ts, right ts, record ts)``, sorted (Flink's assertOutput
        compares as a set of the same size)."""
        return sorted((*r, t) for r, t in self.main.events if r != "wm")

    def assert_no_late_records(self) -> None:
        """Flink's ``TestHarnessUtil.assertNoLateRecords``: no record behind an earlier watermark."""
        watermark = MIN_WATERMARK
        for value, ts in self.main.events:
            if value == "wm":
                watermark = ts
            else:
                assert ts >= watermark, f"record {value} at {ts} behind watermark {watermark}"

    def buffers(self) -> tuple[list[int], list[int]]:
        self.op.backend.current_key = "k"
        return sorted(self.fn.left.keys()), sorted(self.fn.right.keys())

    async def close(self) -> None:
        await self.op.close()


def _pairs(*pairs: tuple[int, int]) -> list[tuple]:
    """Flink's ``streamRecordOf(l, r)``: the pair with timestamp max(l, r)."""
    return sorted((left, right, max(left, right)) for left, right in pairs)


LHS_FASTER = pytest.mark.parametrize("lhs_faster", [True, False], ids=["lhs-faster", "rhs-faster"])


async def _join(lower: int, li: bool, upper: int, ui: bool, lhs_faster: bool) -> list[tuple]:
    h = await JoinHarness(lower, li, upper, ui).open()
    await h.elements_and_watermarks(1, 4, lhs_faster)
    h.assert_no_late_records()
    await h.close()
    return h.results()


@LHS_FASTER
async def test_implementation_mirrors_correctly(lhs_faster: bool) -> None:
    """IntervalJoinOperatorTest.testImplementationMirrorsCorrectly: [1, 3) and its mirror (-3, -1]."""
    assert await _join(1, True, 3, False, lhs_faster) == _pairs((1, 2), (1, 3), (2, 3), (2, 4), (3, 4))
    assert await _join(-3, False, -1, True, lhs_faster) == _pairs((2, 1), (3, 1), (3, 2), (4, 2), (4, 3))


@LHS_FASTER
@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        # testNegativeInclusiveAndNegativeInclusive
        ((-2, True, -1, True), [(2, 1), (3, 1), (3, 2), (4, 2), (4, 3)]),
        # testNegativeInclusiveAndPositiveInclusive
        (
            (-1, True, 1, True),
            [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 2), (3, 3), (3, 4), (4, 3), (4, 4)],
        ),
        # testPositiveInclusiveAndPositiveInclusive
        ((1, True, 2, True), [(1, 2), (1, 3), (2, 3), (2, 4), (3, 4)]),
        # testNegativeExclusiveAndNegativeExlusive
        ((-3, False, -1, False), [(3, 1), (4, 2)]),
        # testNegativeExclusiveAndPositiveExlusive
        ((-1, False, 1, False), [(1, 1), (2, 2), (3, 3), (4, 4)]),
        # testPositiveExclusiveAndPositiveExlusive
        ((1, False, 3, False), [(1, 3), (2, 4)]),
    ],
)
async def test_bounds(bounds: tuple, expected: list, lhs_faster: bool) -> None:
    """IntervalJoinOperatorTest.test{Negative,Positive}{Inclusive,Exclusive}And...: which pairs
    join for each combination of bound signs and inclusiveness."""
    assert await _join(*bounds, lhs_faster) == _pairs(*expected)


@pytest.mark.parametrize(
    ("bounds", "after_1", "after_4"),
    [
        # testStateCleanupNegativeInclusiveNegativeInclusive
        ((-1, True, 0, True), ([2, 3, 4, 5], [1, 2, 3, 4, 5]), ([5], [4, 5])),
        # testStateCleanupNegativePositiveNegativeExlusive
        ((-2, False, 1, False), ([2, 3, 4, 5], [1, 2, 3, 4, 5]), ([5], [4, 5])),
        # testStateCleanupPositiveInclusivePositiveInclusive
        ((0, True, 1, True), ([1, 2, 3, 4, 5], [2, 3, 4, 5]), ([4, 5], [5])),
        # testStateCleanupPositiveExlusivePositiveExclusive
        ((-1, False, 2, False), ([1, 2, 3, 4, 5], [2, 3, 4, 5]), ([4, 5], [5])),
    ],
)
async def test_state_cleanup(bounds: tuple, after_1: tuple, after_4: tuple) -> None:
    """IntervalJoinOperatorTest.testStateCleanup*: both buffers hold an element until the common
    watermark reaches its cleanup time (left: ts + upper, right: ts - lower, never before ts)."""
    h = await JoinHarness(*bounds).open()
    for ts in range(1, 6):
        await h.element1(ts)
    for ts in range(1, 6):
        await h.element2(ts)
    for watermark, expected in ((1, after_1), (4, after_4), (6, ([], []))):
        await h.watermark1(watermark)
        await h.watermark2(watermark)
        assert h.buffers() == (expected[0], expected[1]), f"at watermark {watermark}"
    await h.close()


async def test_restore_from_snapshot() -> None:
    """IntervalJoinOperatorTest.testRestoreFromSnapshot: both buffers and the cleanup timers
    survive a snapshot; the restored operator joins the new elements with the buffered ones."""
    h = await JoinHarness(-1, True, 1, True).open()
    for ts in (1, 2, 3):
        await h.element1(ts)
        await h.watermark1(ts)
        await h.element2(ts)
        await h.watermark2(ts)
    assert h.results() == _pairs((1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 2), (3, 3))
    h.assert_no_late_records()
    await h.snapshot_and_restore()
    await h.element1(4)
    await h.watermark1(4)
    await h.element2(4)
    await h.watermark2(4)
    assert h.results() == _pairs((3, 4), (4, 3), (4, 4))
    h.assert_no_late_records()
    assert h.buffers() == ([4], [4])  # the restored timers cleaned up to watermark 4
    await h.close()


async def test_context_timestamps() -> None:
    """IntervalJoinOperatorTest.testContextCorrectLeftTimestamp, testContextCorrectRightTimestamp
    and testReturnsCorrectTimestamp: the context gives each side's timestamp and their maximum."""
    seen: list[tuple] = []

    def check(left: Any, right: Any, ctx: Any) -> list:
        assert ctx.get_left_timestamp() == left[1]
        assert ctx.get_right_timestamp() == right[1]
        assert ctx.get_timestamp() == max(left[1], right[1])
        seen.append((left[1], right[1]))
        return []

    for lhs_faster in (True, False):
        h = await JoinHarness(-1, True, 1, True, fn=check).open()
        await h.elements_and_watermarks(1, 4, lhs_faster)
        await h.close()
    assert len(seen) == 20


@pytest.mark.parametrize("side", [1, 2])
async def test_fails_with_no_timestamps(side: int) -> None:
    """IntervalJoinOperatorTest.testFailsWithNoTimestampsLeft/Right: an element without a
    timestamp is an error (Flink: FlinkException), on either input."""
    h = await JoinHarness(0, True, 0, True).open()
    with pytest.raises(ValueError, match="timestamps"):
        await (h.element1 if side == 1 else h.element2)(None)


async def test_discards_late_data() -> None:
    """IntervalJoinOperatorTest.testDiscardsLateData: an element behind the watermark joins nothing."""
    h = await JoinHarness(-1, True, 1, True).open()
    for ts in (1, 2, 3):
        await h.element1(ts)
        await h.element2(ts)
    await h.watermark1(3)
    await h.watermark2(3)
    await h.element1(1)  # late: not joined again
    for ts in (4, 5):
        await h.element1(ts)
        await h.element2(ts)
    expected = [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 2), (3, 3), (3, 4), (4, 3), (4, 4)]
    assert h.results() == _pairs(*expected, (4, 5), (5, 4), (5, 5))
    h.assert_no_late_records()
    await h.close()


async def test_late_data() -> None:
    """IntervalJoinOperatorTest.testLateData: with late-data output tags, a late element of each
    side goes to its side's tag with its timestamp."""
    h = await JoinHarness(-1, True, 1, True, late=True).open()
    await h.element1(3)
    await h.element2(3)
    await h.watermark1(3)
    await h.watermark2(3)
    await h.element1(4)
    await h.element2(4)
    await h.element1(1)  # late left
    await h.element2(2)  # late right
    await h.element1(5)
    await h.element2(5)
    assert h.results() == _pairs((3, 3), (3, 4), (4, 3), (4, 4), (4, 5), (5, 4), (5, 5))
    assert h.left_late.events == [("L", ("k", 1), 1)]
    assert h.right_late.events == [("R", ("k", 2), 2)]
    await h.close()


# --------------------------------------------------------------------------- IntervalJoinITCase


class CombineToString(ProcessJoinFunction):
    """IntervalJoinITCase's CombineToStringJoinFunction."""

    def process_element(self, left: Any, right: Any, ctx: Any) -> Any:
        yield f"{left}:{right}"


def _ascending(env: Any, data: list) -> Any:
    """IntervalJoinITCase's AscendingTuple2TimestampExtractor: the second field, ascending."""
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])
    return env.from_collection(data).assign_timestamps_and_watermarks(strategy).key_by(lambda e: e[0])


def _run_join(left: list, right: list, lower: int, upper: int, exclusive: bool = False) -> list[str]:
    env = sf.StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    joined = _ascending(env, left).interval_join(_ascending(env, right)).between(lower, upper)
    if exclusive:
        joined = joined.upper_bound_exclusive().lower_bound_exclusive()
    sink = ListSink()
    joined.process(CombineToString()).sink_to(sink)
    env.execute("interval join")
    return sorted(sink.results)


def test_can_join_over_same_key() -> None:
    """IntervalJoinITCase.testCanJoinOverSameKey: between(0, 0) joins equal timestamps only."""
    data = [("key", i) for i in range(6)]
    assert _run_join(data, data, 0, 0) == sorted(f"('key', {i}):('key', {i})" for i in range(6))


def test_joins_correctly_with_multiple_keys() -> None:
    """IntervalJoinITCase.testJoinsCorrectlyWithMultipleKeys: elements join within their key only."""
    data = [("key1", 0), ("key2", 1), ("key1", 2), ("key2", 3), ("key1", 4), ("key2", 5)]
    assert _run_join(data, data, 0, 1) == sorted(f"{e}:{e}" for e in data)


def test_bounds_are_inclusive_by_default_and_can_be_exclusive() -> None:
    """IntervalJoinITCase.testBoundsAreInclusiveByDefault, testBoundsCanBeInclusive and
    testBoundsCanBeExclusive: between(0, 2) joins [0, 2], made exclusive (0, 2)."""
    data = [("key", 0), ("key", 1), ("key", 2)]
    inclusive = [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]
    assert _run_join(data, data, 0, 2) == sorted(f"('key', {a}):('key', {b})" for a, b in inclusive)
    exclusive = [(0, 1), (1, 2)]
    assert _run_join(data, data, 0, 2, True) == sorted(f"('key', {a}):('key', {b})" for a, b in exclusive)


def test_bounded_unordered_streams_still_join_correctly() -> None:
    """IntervalJoinITCase.testBoundedUnorderedStreamsStillJoinCorrectly: out-of-order elements
    before and after watermark 5 join with between(-1, 1); the final watermark ends the input."""

    def source(order: list[int]) -> ScriptedSource:
        script: list[Any] = [Record(("key", t), t) for t in order[:5]]
        return ScriptedSource([*script, sf.Watermark(5), *(Record(("key", t), t) for t in order[5:])])

    env = sf.StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    one = env.from_source(source([5, 1, 4, 3, 2, 9, 8, 7, 6]), None, "one").key_by(lambda e: e[0])
    two = env.from_source(source([2, 1, 3, 4, 5, 8, 7, 9, 6]), None, "two").key_by(lambda e: e[0])
    sink = ListSink()
    one.interval_join(two).between(-1, 1).process(CombineToString()).sink_to(sink)
    env.execute("unordered interval join")
    pairs = [(a, b) for a in range(1, 10) for b in range(1, 10) if abs(a - b) <= 1]
    assert sorted(sink.results) == sorted(f"('key', {a}):('key', {b})" for a, b in pairs)


@pytest.mark.parametrize("bounds", [(0, None), (None, 1)])
def test_fails_without_a_bound(bounds: tuple) -> None:
    """IntervalJoinITCase.testFailsWithoutUpperBound / testFailsWithoutLowerBound (Flink: a
    NullPointerException): a missing bound is refused when the join is declared."""
    env = sf.StreamExecutionEnvironment.get_execution_environment()
    one = env.from_collection([("1", 1)]).key_by(lambda e: e[0])
    two = env.from_collection([("1", 1)]).key_by(lambda e: e[0])
    with pytest.raises((TypeError, ValueError)):
        one.interval_join(two).between(*bounds)


async def test_late_elements_end_to_end_are_dropped_without_tags() -> None:
    """IntervalJoinOperatorTest.testDiscardsLateData through the DataStream API: a left element
    behind the combined watermark neither joins nor reaches any output."""
    sources = {"L": ScriptedSource([], end=False), "R": ScriptedSource([], end=False)}
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    sink = ListSink()
    left = env.from_source(sources["L"], None, "left").key_by(lambda e: e[0])
    right = env.from_source(sources["R"], None, "right").key_by(lambda e: e[0])
    left.interval_join(right).between(-1, 1).process(lambda a, b, ctx: [(a[1], b[1])]).sink_to(sink)
    client = await env.execute_async()
    steps: list[Any] = [("L", 3), ("R", 3), 3, ("L", 1), ("R", 4)]
    for step in steps:
        if isinstance(step, int):
            for s in sources.values():
                s.push(sf.Watermark(step))
        else:
            sources[step[0]].push(Record(("k", step[1]), step[1]))
        for _ in range(200):
            await asyncio.sleep(0)
    for s in sources.values():
        s.finish()
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert sorted(sink.results) == [(3, 3), (3, 4)]


async def test_restore_from_a_savepoint_at_another_parallelism(tmp_path: Any) -> None:
    """IntervalJoinOperatorTest.testRestoreFromSnapshot end to end, at another parallelism: the
    left elements buffered under their keys (and their cleanup timers) go with their key groups
    from 2 to 3 subtasks and join the right elements that arrive after the restore."""
    from test_checkpointing import Gate, wait_until

    keys = [f"k{i}" for i in range(8)]
    left_data = [(k, 10) for k in keys] + [("unmatched", 10)]  # the gate holds the last one back
    right_data = [(k, 12) for k in keys]
    strategy = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])
    seen: list = []

    def build(env: Any, left: Any, right: Any, sink: Any) -> None:
        left = left.uid("left").map(lambda e: seen.append(e) or e).uid("seen")
        joined = (
            left.assign_timestamps_and_watermarks(strategy)
            .uid("left-ts")
            .key_by(lambda e: e[0])
            .interval_join(
                right.uid("right")
                .assign_timestamps_and_watermarks(strategy)
                .uid("right-ts")
                .key_by(lambda e: e[0])
            )
            .between(-5, 5)
            .process(lambda a, b, ctx: [(a[0], a[1], b[1], ctx.get_timestamp())])
            .uid("join")
        )
        joined.sink_to(sink)

    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    left_gate, right_gate = Gate(left_data, len(keys)), Gate(right_data, 0)
    build(
        env,
        env.from_async_iterable(left_gate.__aiter__),
        env.from_async_iterable(right_gate.__aiter__),
        ListSink(),
    )
    client = await env.execute_async("join")
    await wait_until(lambda: len(seen) == len(keys))  # the barrier follows them to the join
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()

    env2 = sf.StreamExecutionEnvironment().set_parallelism(3)
    env2.configure({"execution.savepoint.path": path})
    sink = ListSink()
    build(env2, env2.from_collection(left_data), env2.from_collection(right_data), sink)
    await asyncio.wait_for((await env2.execute_async("join")).get_job_execution_result(), 60)
    assert sorted(sink.results) == [(k, 10, 12, 12) for k in keys]


async def test_the_join_function_writes_side_outputs_with_the_pairs_timestamp() -> None:
    """ProcessJoinFunction.Context#output (IntervalJoinOperator's collector carries the pair's
    timestamp, max of both): a yielded ``(OutputTag, value)`` pair goes to that side output
    with the same timestamp as a main result (PyFlink's form of ``ctx.output``)."""

    def both(left: Any, right: Any, ctx: Any) -> list:
        return [(left[1], right[1]), (LEFT_LATE, ("side", left[1], right[1]))]

    h = await JoinHarness(-1, True, 1, True, fn=both).open()
    await h.element1(5)
    await h.element2(6)
    assert h.results() == [(5, 6, 6)]
    assert h.left_late.events == [("L", ("side", 5, 6), 6)]
    await h.close()
