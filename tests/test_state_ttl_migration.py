"""A state's TTL switched off or on between a savepoint and its restore (state/ttl_migration.py),
through the DataStream API on the heap backend and on RocksDB.

Ported from Flink's flink-runtime/src/test/java/org/apache/flink/runtime/state/ttl/
TtlStateTestBase.java#testRestoreTtlAndRegisterNonTtlStateCompatFailure (current Flink: the
state registered without its TTL is restored, its values the user's) and the migration rule
TtlAwareSerializer#migrateValueFromPriorSerializer tested by TtlAwareSerializerTest (TTL
switched on: each value stamped with the restore's current time).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

from streamflow.api.environment import set_default_configuration
from streamflow.common import Time, Types
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.functions import AggregateFunction, KeyedProcessFunction
from streamflow.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from streamflow.testing import ListSink, ManualClock, Record, ScriptedSource

TTL = 100


class _Agg(AggregateFunction):
    """TtlAggregatingStateTestContext.AGGREGATE: a sum starting at 3, shown as a string."""

    def create_accumulator(self) -> int:
        return 3

    def add(self, value: int, accumulator: int) -> int:
        return accumulator + value

    def get_result(self, accumulator: int) -> str:
        return str(accumulator)

    def merge(self, a: int, b: int) -> int:
        return a + b


# kind -> (descriptor factory, getter, writer, the value read after writing 5, the empty value)
KINDS: dict[str, tuple[Any, Any, Any, Any, Any]] = {
    "value": (lambda: ValueStateDescriptor("s", Types.INT()), lambda s: s.value(),
              lambda s: s.update(5), 5, None),
    "list": (lambda: ListStateDescriptor("s", Types.INT()), lambda s: list(s.get() or []),
             lambda s: s.add_all([5, 7]), [5, 7], []),
    "map": (lambda: MapStateDescriptor("s", Types.INT(), Types.STRING()),
            lambda s: sorted(s.items()), lambda s: s.put_all({1: "a", 2: None}),
            [(1, "a"), (2, None)], []),
    "reducing": (lambda: ReducingStateDescriptor("s", lambda a, b: a + b, Types.INT()),
                 lambda s: s.get(), lambda s: s.add(5), 5, None),
    "aggregating": (lambda: AggregatingStateDescriptor("s", _Agg(), Types.LONG()),
                    lambda s: s.get(), lambda s: s.add(5), "8", None),
}


@pytest.fixture(params=["hashmap", "rocksdb"], autouse=True)
def state_backend(request: pytest.FixtureRequest) -> Any:
    set_default_configuration({"state.backend.type": request.param})
    yield request.param
    set_default_configuration({})


OPENED: list[Any] = []  # the functions opened (after their restore)


class _Fn(KeyedProcessFunction):
    """"write" records write the state, "read" records emit what it holds."""

    def __init__(self, kind: str, ttl: bool) -> None:
        self.kind, self.ttl = kind, ttl

    def open(self, ctx: Any) -> None:
        OPENED.append(self)
        descriptor = KINDS[self.kind][0]()
        if self.ttl:
            descriptor.enable_time_to_live(
                StateTtlConfig.new_builder(Time.milliseconds(TTL)).disable_cleanup_in_background().build()
            )
        self.state = ctx.get_state(descriptor) if self.kind == "value" else {
            "list": ctx.get_list_state, "map": ctx.get_map_state,
            "reducing": ctx.get_reducing_state, "aggregating": ctx.get_aggregating_state,
        }[self.kind](descriptor)

    def process_element(self, value: Any, ctx: Any) -> Any:
        _, get, write, _, _ = KINDS[self.kind]
        if value == "write":
            write(self.state)
        else:
            yield get(self.state)


class _NoState(KeyedProcessFunction):
    """A version of the job whose function registers no state (the restored state is kept)."""

    def open(self, ctx: Any) -> None:
        OPENED.append(self)

    def process_element(self, value: Any, ctx: Any) -> Any:
        return []


async def _phase(clock: ManualClock, fn: Any, savepoint: str | None, reads_at: list[int],
                 take_savepoint: Path | None = None) -> tuple[list, str | None]:
    """One run of the job: restored from ``savepoint`` (its write record already consumed),
    reading the state at each of ``reads_at``; a savepoint to ``take_savepoint`` at the end
    (else the job finishes)."""
    source = ScriptedSource([Record("write")], end=False)
    env = StreamExecutionEnvironment(clock=clock).set_parallelism(1)
    if savepoint is not None:
        env.configure({"execution.savepoint.path": savepoint})
    sink = ListSink()
    keyed = env.from_source(source, None, "src").uid("src").key_by(lambda v: "k")
    keyed.process(fn).uid("op").sink_to(sink)
    client = await env.execute_async("ttl-migration")
    await wait_until(lambda: any(f is fn for f in OPENED))  # restored and opened now
    for _ in range(300):  # the write record (a first run) is processed
        await asyncio.sleep(0)
    for at in reads_at:
        clock.set(at)
        source.push(Record("read"))
        for _ in range(300):
            await asyncio.sleep(0)
    if take_savepoint is not None:
        path = await client.trigger_savepoint(str(take_savepoint))
        await client.cancel()
        return sink.results, path
    source.finish()
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    return sink.results, None


async def _run(kind: str, ttl_before: bool, ttl_after: bool, tmp_path: Path,
               reads_at: list[int]) -> list:
    """Write at time 0 and take a savepoint; restore at time 50 with the other TTL setting and
    read at each of ``reads_at``."""
    clock = ManualClock()
    _, path = await _phase(clock, _Fn(kind, ttl_before), None, [], tmp_path / "sp")
    clock.set(50)
    results, _ = await _phase(clock, _Fn(kind, ttl_after), path, reads_at)
    return results


@pytest.mark.parametrize("kind", list(KINDS))
async def test_restore_ttl_state_without_ttl(kind: str, tmp_path: Path) -> None:
    """TtlStateTestBase#testRestoreTtlAndRegisterNonTtlStateCompatFailure: the values written
    with a TTL are read without one (no timestamps), and never expire."""
    written = KINDS[kind][3]
    assert await _run(kind, True, False, tmp_path, [60, 1_000]) == [written, written]


@pytest.mark.parametrize("kind", list(KINDS))
async def test_restore_plain_state_with_ttl(kind: str, tmp_path: Path) -> None:
    """TtlAwareSerializer#migrateValueFromPriorSerializer (TTL switched on): the restored
    values are stamped with the restore's time (50), so they live until 150, not 100."""
    _, _, _, written, empty = KINDS[kind]
    assert await _run(kind, False, True, tmp_path, [120, 150]) == [written, empty]


@pytest.mark.parametrize("kind", ["value", "list"])
async def test_unchanged_ttl_is_not_migrated(kind: str, tmp_path: Path) -> None:
    """The TTL kept on both sides: the restored entries keep their write time (0)."""
    _, _, _, written, empty = KINDS[kind]
    assert await _run(kind, True, True, tmp_path, [60, 100]) == [written, empty]


async def test_flags_survive_a_savepoint_of_a_job_that_did_not_register_the_state(
    tmp_path: Path,
) -> None:
    """A state restored but not registered again keeps its TTL flag in the next savepoint, so
    a later job registering it without its TTL still gets the user values."""
    clock = ManualClock()
    _, first = await _phase(clock, _Fn("value", True), None, [], tmp_path / "sp1")
    _, second = await _phase(clock, _NoState(), first, [], tmp_path / "sp2")
    results, _ = await _phase(clock, _Fn("value", False), second, [500])
    assert results == [5]
