"""Ports of Flink's broadcast-state operator tests onto streamflow's broadcast operators.

Sources (apache/flink, flink-streaming-java/src/test/java/org/apache/flink/streaming/api/operators/co/):
CoBroadcastWithKeyedOperatorTest.java and CoBroadcastWithNonKeyedOperatorTest.java.
:class:`BroadcastHarness` plays their ``(Keyed)TwoInputStreamOperatorTestHarness``: one subtask of
:class:`KeyedBroadcastProcessOperator` (input 1 keyed by the element itself, Flink's
``IdentityKeySelector``) or :class:`BroadcastProcessOperator`, with max parallelism 10 as the
scale tests use; one watermark per input, combined as the task's input does. Side outputs are
yielded ``(OutputTag, value)`` pairs (PyFlink's form of ``ctx.output``).
"""

from __future__ import annotations

from typing import Any

import pytest

from streamflow.checkpoint.restore import OperatorRestore
from streamflow.common import Types
from streamflow.datastream.functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction
from streamflow.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from streamflow.functions import OutputTag
from streamflow.runtime.broadcast_operators import BroadcastProcessOperator, KeyedBroadcastProcessOperator
from streamflow.runtime.context import OperatorContext
from streamflow.runtime.events import MIN_WATERMARK, Watermark, WatermarkStatus
from streamflow.runtime.metrics import MetricGroup
from streamflow.runtime.operator import BatchTarget, Output
from streamflow.runtime.processing_time import ProcessingTimeService
from streamflow.state import codec
from streamflow.state.key_groups import key_group_of, key_group_range, subtask_of_key_group
from streamflow.state.keyed import KeyedStateBackend
from streamflow.testing import ManualClock

STATE = MapStateDescriptor("broadcast-state", Types.STRING(), Types.INT())
MAX_PARALLELISM = 10
BROADCAST_TAG, NON_BROADCAST_TAG = OutputTag("br-out"), OutputTag("non-br-out")


class _Collect(BatchTarget):
    def __init__(self) -> None:
        self.events: list[tuple] = []

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        ts: list[Any] = [None] * len(records) if timestamps is None else timestamps
        self.events.extend(zip(records, ts, strict=True))

    async def process_watermark(self, watermark: Watermark) -> None:
        self.events.append(("wm", watermark.timestamp))

    async def process_watermark_status(self, status: WatermarkStatus) -> None:
        pass


class BroadcastHarness:
    def __init__(
        self,
        function: Any,
        *,
        keyed: bool = True,
        descriptors: tuple = (STATE,),
        parallelism: int = 1,
        subtask: int = 0,
        restored: Any = None,
    ) -> None:
        self.keyed, self.parallelism, self.subtask = keyed, parallelism, subtask
        self.clock = ManualClock(0)
        self.main, self.br, self.non_br = _Collect(), _Collect(), _Collect()
        self.wm = [MIN_WATERMARK, MIN_WATERMARK]
        self.combined = MIN_WATERMARK
        groups = key_group_range(subtask, MAX_PARALLELISM, parallelism)
        if keyed:
            self.op: Any = KeyedBroadcastProcessOperator(
                "broadcast", lambda e: e, function, list(descriptors)
            )
        else:
            self.op = BroadcastProcessOperator("broadcast", function, list(descriptors))
        ctx = OperatorContext(
            uid="broadcast",
            name="broadcast",
            task_name="broadcast",
            subtask_index=subtask,
            parallelism=parallelism,
            max_parallelism=MAX_PARALLELISM,
            clock=self.clock,
            metrics=MetricGroup(f"broadcast[{subtask}]", {}),
            processing_time=ProcessingTimeService(self.clock, lambda: None),
            keyed_backend=KeyedStateBackend(MAX_PARALLELISM, key_groups=groups) if keyed else None,
        )
        sides = {BROADCAST_TAG.tag_id: [self.br], NON_BROADCAST_TAG.tag_id: [self.non_br]}
        self.op.setup(ctx, Output([self.main], sides))
        if restored is not None:
            own = restored.get(subtask)
            every = [restored[s] for s in sorted(restored)]
            restored = OperatorRestore(own, every, groups)
        self.op.initialize_state(restored)

    async def open(self) -> BroadcastHarness:
        await self.op.open()
        return self

    async def element1(self, value: Any, ts: int | None = None) -> None:
        await self.op.process_batch([value], None if ts is None else [ts])

    async def element2(self, value: Any, ts: int | None = None) -> None:
        await self.op.process_batch2([value], None if ts is None else [ts])

    async def watermarks(self, ts: int) -> None:
        """``processWatermark1(ts)`` then ``processWatermark2(ts)``: the combined watermark rises."""
        await self.op.process_watermark(Watermark(ts))

    def snapshot(self) -> Any:
        return codec.decode(codec.encode(self.op.snapshot_state(1)))

    def key_of_this_subtask(self) -> str:
        """CoBroadcastWithKeyedOperatorTest.findValidTriggerKey: the first "0", "1", ... whose key
        group this subtask owns."""
        element = 0
        while (
            subtask_of_key_group(
                key_group_of(str(element), MAX_PARALLELISM), MAX_PARALLELISM, self.parallelism
            )
            != self.subtask
        ):
            element += 1
        return str(element)

    async def close(self) -> None:
        await self.op.close()


# ---------------------------------------------------------------- CoBroadcastWithKeyedOperatorTest


async def test_key_querying() -> None:
    """CoBroadcastWithKeyedOperatorTest.testKeyQuerying: process_element sees its key."""

    class KeyQuerying(KeyedBroadcastProcessFunction):
        def process_element(self, value, ctx):
            assert ctx.get_current_key() == value[0]
            yield value[1]

        def process_broadcast_element(self, value, ctx):
            return ()

    h = BroadcastHarness(KeyQuerying())
    h.op.key_selector = lambda e: e[0]
    await h.open()
    await h.element1((5, "5"), 12)
    await h.element1((42, "42"), 13)
    assert h.main.events == [("5", 12), ("42", 13)]
    await h.close()


async def test_access_to_keyed_state_iterates_every_key() -> None:
    """CoBroadcastWithKeyedOperatorTest.testAccessToKeyedStateIt: apply_to_keyed_state on the
    broadcast side visits every key's list state with its content."""
    list_state = ListStateDescriptor("listStateTest", Types.STRING())
    visited: dict[str, list] = {}

    class Stateful(KeyedBroadcastProcessFunction):
        def open(self, runtime_context):
            self.runtime_context = runtime_context

        def process_element(self, value, ctx):
            self.runtime_context.get_list_state(list_state).add(value)
            return ()

        def process_broadcast_element(self, value, ctx):
            ctx.apply_to_keyed_state(
                list_state, lambda key, state: visited.__setitem__(key, list(state.get()))
            )
            return ()

    h = await BroadcastHarness(Stateful()).open()
    for value, ts in [("test1", 12)] * 2 + [("test2", 13)] * 3 + [("test3", 14)] * 3 + [("test2", 13)]:
        await h.element1(value, ts)
    await h.element2(1, 13)
    assert visited == {"test1": ["test1"] * 2, "test2": ["test2"] * 4, "test3": ["test3"] * 3}
    await h.close()


class FunctionWithTimerOnKeyed(KeyedBroadcastProcessFunction):
    """CoBroadcastWithKeyedOperatorTest's: a timer per element, watermark and timestamp in the output."""

    def __init__(self, timer_ts: int, expected_key: str, tags: tuple[Any, Any] = (None, None)) -> None:
        self.timer_ts, self.expected_key, self.tags = timer_ts, expected_key, tags

    def process_broadcast_element(self, value, ctx):
        out = f"BR:{value} WM:{ctx.current_watermark()} TS:{ctx.timestamp()}"
        yield out if self.tags[0] is None else (self.tags[0], out)

    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(self.timer_ts)
        out = f"NON-BR:{value} WM:{ctx.current_watermark()} TS:{ctx.timestamp()}"
        yield out if self.tags[1] is None else (self.tags[1], out)

    def on_timer(self, timestamp, ctx):
        assert ctx.get_current_key() == self.expected_key
        yield f"TIMER:{timestamp}"


async def test_function_with_timer() -> None:
    """CoBroadcastWithKeyedOperatorTest.testFunctionWithTimer: the keyed side's event-time timer
    fires under its key at the watermark, between the watermarks as Flink orders them."""
    h = await BroadcastHarness(FunctionWithTimerOnKeyed(41, "6")).open()
    await h.watermarks(10)
    await h.element2(5, 12)
    await h.watermarks(40)
    await h.element1("6", 13)
    await h.element1("6", 15)
    await h.watermarks(50)
    assert h.main.events == [
        ("wm", 10),
        ("BR:5 WM:10 TS:12", 12),
        ("wm", 40),
        ("NON-BR:6 WM:40 TS:13", 13),
        ("NON-BR:6 WM:40 TS:15", 15),
        ("TIMER:41", 41),
        ("wm", 50),
    ]
    await h.close()


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "non-keyed"])
async def test_side_output(keyed: bool) -> None:
    """CoBroadcastWithKeyedOperatorTest.testSideOutput and CoBroadcastWithNonKeyedOperatorTest.testSideOutput:
    both sides write to side outputs, with their timestamps and the current watermark."""

    class WithSideOutput(BroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            yield BROADCAST_TAG, f"BR:{value} WM:{ctx.current_watermark()} TS:{ctx.timestamp()}"

        def process_element(self, value, ctx):
            yield NON_BROADCAST_TAG, f"NON-BR:{value} WM:{ctx.current_watermark()} TS:{ctx.timestamp()}"

    h = await BroadcastHarness(WithSideOutput(), keyed=keyed).open()
    await h.watermarks(10)
    await h.element2(5, 12)
    await h.watermarks(40)
    await h.element1("6", 13)
    await h.element1("6", 15)
    await h.watermarks(50)
    assert [e for e in h.br.events if e[0] != "wm"] == [("BR:5 WM:10 TS:12", 12)]
    assert [e for e in h.non_br.events if e[0] != "wm"] == [
        ("NON-BR:6 WM:40 TS:13", 13),
        ("NON-BR:6 WM:40 TS:15", 15),
    ]
    assert h.main.events == [("wm", 10), ("wm", 40), ("wm", 50)]
    await h.close()


async def test_function_with_broadcast_state() -> None:
    """CoBroadcastWithKeyedOperatorTest.testFunctionWithBroadcastState: the keyed side and its
    timer read (only) the broadcast state the broadcast side wrote, including a later put."""
    expected = {f"{v}.key": v for v in (5, 34, 53, 12, 98)}

    class WithBroadcastState(KeyedBroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(STATE).put(f"{value}.key", value)

        def process_element(self, value, ctx):
            state = ctx.get_broadcast_state(STATE)
            assert dict(state.items()) == expected
            assert not hasattr(state, "put")  # read-only on the keyed side
            ctx.timer_service().register_event_time_timer(41)

        def on_timer(self, timestamp, ctx):
            assert ctx.get_current_key() == "trigger"
            yield f"TS:{timestamp} {sorted(ctx.get_broadcast_state(STATE).items())}"

    h = await BroadcastHarness(WithBroadcastState()).open()
    await h.watermarks(10)
    for value, ts in [(5, 10), (34, 12), (53, 15), (12, 16), (98, 19)]:
        await h.element2(value, ts)
    await h.element1("trigger", 13)
    await h.element2(51, 21)
    await h.watermarks(50)
    final = sorted({**expected, "51.key": 51}.items())
    assert h.main.events == [("wm", 10), (f"TS:41 {final}", 41), ("wm", 50)]
    await h.close()


class TestFunctionWithOutput(KeyedBroadcastProcessFunction):
    """CoBroadcastWithKeyedOperatorTest's: the broadcast side puts every key with its value;
    the keyed side emits every broadcast entry as ``key=value``."""

    __test__ = False
    KEYS = ("test1", "test2", "test3")

    def process_broadcast_element(self, value, ctx):
        for key in self.KEYS:
            ctx.get_broadcast_state(STATE).put(key, value)

    def process_element(self, value, ctx):
        for key, entry in ctx.get_broadcast_state(STATE).items():
            yield f"{key}={entry}"


class NonKeyedFunctionWithOutput(BroadcastProcessFunction):
    process_broadcast_element = TestFunctionWithOutput.process_broadcast_element
    process_element = TestFunctionWithOutput.process_element
    KEYS = TestFunctionWithOutput.KEYS


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "non-keyed"])
@pytest.mark.parametrize(("old", "new"), [(2, 3), (3, 2)], ids=["scale-up", "scale-down"])
async def test_scale_up_and_down(keyed: bool, old: int, new: int) -> None:
    """CoBroadcastWithKeyedOperatorTest.testScaleUp / testScaleDown and
    CoBroadcastWithNonKeyedOperatorTest.testScaleUp / testScaleDown: every subtask at the new
    parallelism restores the whole broadcast state."""
    function = TestFunctionWithOutput if keyed else NonKeyedFunctionWithOutput
    snapshots = {}
    for subtask in range(old):
        h = await BroadcastHarness(function(), keyed=keyed, parallelism=old, subtask=subtask).open()
        await h.element2(3)
        snapshots[subtask] = h.snapshot()
        await h.close()
    for subtask in range(new):
        h = BroadcastHarness(function(), keyed=keyed, parallelism=new, subtask=subtask, restored=snapshots)
        await h.open()
        await h.element1(h.key_of_this_subtask())
        assert sorted(v for v, _ in h.main.events) == ["test1=3", "test2=3", "test3=3"], f"subtask {subtask}"
        await h.close()


async def test_no_keyed_state_on_broadcast_side() -> None:
    """CoBroadcastWithKeyedOperatorTest.testNoKeyedStateOnBroadcastSide: keyed state has no key
    in process_broadcast_element (Flink: NullPointerException "No key set")."""
    value_state = ValueStateDescriptor("any", Types.STRING())
    failures: list[str] = []

    class NoKeyedState(KeyedBroadcastProcessFunction):
        def open(self, runtime_context):
            self.state = runtime_context.get_state(value_state)

        def process_broadcast_element(self, value, ctx):
            try:
                self.state.value()
            except RuntimeError as exc:
                failures.append(str(exc))

        def process_element(self, value, ctx):
            return ()

    h = await BroadcastHarness(NoKeyedState()).open()
    await h.element2(5, 12)
    assert len(failures) == 1 and "no key" in failures[0]
    await h.close()


async def test_broadcast_state_snapshot_and_restore_mid_stream() -> None:
    """AbstractStreamOperatorTestHarness snapshot/initializeState (as in the scale tests at the
    same parallelism): broadcast state, keyed state and the keyed side's timers all survive."""
    h = await BroadcastHarness(FunctionWithTimerOnKeyed(41, "6")).open()
    await h.watermarks(10)
    await h.element1("6", 13)
    snapshot = h.snapshot()
    await h.close()
    h = await BroadcastHarness(FunctionWithTimerOnKeyed(41, "6"), restored={0: snapshot}).open()
    await h.watermarks(50)
    assert h.main.events == [("TIMER:41", 41), ("wm", 50)]
    await h.close()


# ---------------------------------------------------------------- CoBroadcastWithNonKeyedOperatorTest

STATE_2 = MapStateDescriptor("broadcast-state-2", Types.INT(), Types.STRING())


async def test_multi_state_support() -> None:
    """CoBroadcastWithNonKeyedOperatorTest.testMultiStateSupport: two broadcast state
    descriptors, each written and read independently."""

    class MultiState(BroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(STATE).put(str(value), value)
            ctx.get_broadcast_state(STATE_2).put(value, str(value))

        def process_element(self, value, ctx):
            for key, entry in ctx.get_broadcast_state(STATE).items():
                yield f"{value}:{key}->{entry}"
            for key, entry in ctx.get_broadcast_state(STATE_2).items():
                yield f"{value}:{key}->{entry}"

    h = await BroadcastHarness(MultiState(), keyed=False, descriptors=(STATE, STATE_2)).open()
    await h.element2(5, 12)
    await h.element2(6, 13)
    await h.element1(1, 14)
    assert sorted(v for v, _ in h.main.events) == ["1:5->5", "1:5->5", "1:6->6", "1:6->6"]
    snapshot = h.snapshot()
    await h.close()
    h = BroadcastHarness(MultiState(), keyed=False, descriptors=(STATE, STATE_2), restored={0: snapshot})
    await h.open()
    await h.element1(2, 15)
    assert sorted(v for v, _ in h.main.events) == ["2:5->5", "2:5->5", "2:6->6", "2:6->6"]
    await h.close()


async def test_non_keyed_broadcast_state_and_watermarks() -> None:
    """CoBroadcastWithNonKeyedOperatorTest.testBroadcastState and testFunctionWithTimer (without
    its timers, which a non-keyed function cannot set): the data side reads what the broadcast
    side put, both see the current watermark and their record's timestamp."""

    class Function(BroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(STATE).put(str(value), value)
            yield f"BR:{value} WM:{ctx.current_watermark()} TS:{ctx.timestamp()}"

        def process_element(self, value, ctx):
            rules = ctx.get_broadcast_state(STATE).items()
            yield f"NON-BR:{value} WM:{ctx.current_watermark()} TS:{ctx.timestamp()} {rules}"

    h = await BroadcastHarness(Function(), keyed=False).open()
    await h.watermarks(10)
    await h.element2(5, 12)
    await h.watermarks(40)
    await h.element1("6", 13)
    assert h.main.events == [
        ("wm", 10),
        ("BR:5 WM:10 TS:12", 12),
        ("wm", 40),
        ("NON-BR:6 WM:40 TS:13 [('5', 5)]", 13),
    ]
    await h.close()


async def test_no_keyed_state_on_non_keyed_sides() -> None:
    """CoBroadcastWithNonKeyedOperatorTest.testNoKeyedStateOnBroadcastSide /
    testNoKeyedStateOnNonBroadcastSide: a non-keyed broadcast function has no keyed state."""
    value_state = ValueStateDescriptor("any", Types.STRING())

    class NoKeyedState(BroadcastProcessFunction):
        def open(self, runtime_context):
            self.runtime_context = runtime_context

        def process_broadcast_element(self, value, ctx):
            self.runtime_context.get_state(value_state)

        def process_element(self, value, ctx):
            self.runtime_context.get_state(value_state)

    for side in (1, 2):
        h = await BroadcastHarness(NoKeyedState(), keyed=False).open()
        with pytest.raises(Exception):  # noqa: B017 (Flink: NullPointerException)
            await (h.element1 if side == 1 else h.element2)("x", 1)


async def test_processing_time_timer_from_the_keyed_side() -> None:
    """CoBroadcastWithKeyedOperator.onProcessingTime (testFunctionWithTimer's rule in processing
    time): a processing-time timer of the keyed side fires under its key with its time domain,
    reading the broadcast state; its output has no timestamp."""
    from streamflow.functions import TimeDomain

    class ProcessingTimer(KeyedBroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(STATE).put("rule", value)

        def process_element(self, value, ctx):
            ctx.timer_service().register_processing_time_timer(
                ctx.timer_service().current_processing_time() + 10
            )

        def on_timer(self, timestamp, ctx):
            assert ctx.time_domain() == TimeDomain.PROCESSING_TIME
            yield f"{ctx.get_current_key()}@{timestamp} rule={ctx.get_broadcast_state(STATE).get('rule')}"

    h = await BroadcastHarness(ProcessingTimer()).open()
    await h.element2(7, 1)
    await h.element1("k", 2)
    h.clock.set(9)
    await h.op.ctx.processing_time.run_due()
    assert h.main.events == []
    h.clock.set(10)
    await h.op.ctx.processing_time.run_due()
    assert h.main.events == [("k@10 rule=7", None)]
    await h.close()


async def test_apply_to_keyed_state_skips_cleared_keys_and_may_modify_state() -> None:
    """KeyedStateBackend.applyToAllKeys (behind CoBroadcastWithKeyedOperator's
    applyToKeyedState): only keys that hold the state are visited, and the function may update
    or clear each key's state as it goes."""
    counts = ValueStateDescriptor("count", Types.INT())
    visits: list[list] = []

    class Counter(KeyedBroadcastProcessFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(counts)

        def process_element(self, value, ctx):
            if value.startswith("clear-"):
                self.count.clear()
            else:
                self.count.update((self.count.value() or 0) + 1)
            return ()

        def process_broadcast_element(self, value, ctx):
            seen: list = []

            def visit(key, state):
                seen.append((key, state.value()))
                if value == "reset" and key == "b":
                    state.clear()
                elif value == "reset":
                    state.update(100)

            ctx.apply_to_keyed_state(counts, visit)
            visits.append(sorted(seen))

    h = await BroadcastHarness(Counter()).open()
    for value in ("a", "a", "b", "c"):
        await h.element1(value, 1)
    h.op.key_selector = lambda e: e.removeprefix("clear-")
    await h.element1("clear-c", 2)
    await h.element2("reset", 3)
    await h.element2("look", 4)
    assert visits == [[("a", 2), ("b", 1)], [("a", 100)]]
    await h.close()
