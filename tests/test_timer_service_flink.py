"""Flink's timer service tests, ported: flink-streaming-java/src/test/java/org/apache/flink/
streaming/api/operators/InternalTimerServiceImplTest.java (formerly HeapInternalTimerServiceTest).

Flink tests ``InternalTimerServiceImpl`` with a mock ``Triggerable``, a ``TestKeyContext`` and a
``TestProcessingTimeService``. Here the timer store is tested directly (``TimerService`` on the
heap, ``RocksDBTimerService`` on RocksDB: the key is an argument, not a key context), and what
``InternalTimerServiceImpl`` adds around it (the one physical processing-time timer, the
current key while a timer fires, snapshot and restore by key group) through
:class:`TimerOperator` with a :class:`ManualClock` driving the task's
:class:`ProcessingTimeService`, each on both state backends.

Not ported: testKeyGroupStartIndexSetting and testTimerAssignmentToKeyGroups (the layout of
Flink's per-key-group queues), testForEach*TimeTimers (no PyFlink API iterates timers),
the namespace-filtered counts (``numEventTimeTimers(namespace)``: introspection only). The
RocksDB snapshot with rescaling is covered through jobs by test_timers_savepoint_flink.py and
test_rocksdb_timers.py (a RocksDB snapshot needs the checkpoint's shared files).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streamflow.checkpoint.restore import OperatorRestore
from streamflow.runtime.context import OperatorContext
from streamflow.runtime.events import MIN_WATERMARK, Watermark
from streamflow.runtime.metrics import MetricGroup
from streamflow.runtime.operator import Output
from streamflow.runtime.processing_time import ProcessingTimeService
from streamflow.runtime.timer_operator import TimerOperator
from streamflow.runtime.timers import Timer, TimerService
from streamflow.state import codec as _codec
from streamflow.state.key_groups import key_group_of, key_group_range
from streamflow.state.keyed import KeyedStateBackend
from streamflow.state.rocksdb_backend import RocksDBKeyedStateBackend
from streamflow.state.rocksdb_timers import RocksDBTimerService
from streamflow.testing import ManualClock

MAXP = 128


def _rocks_backend(tmp_path: Path) -> RocksDBKeyedStateBackend:
    return RocksDBKeyedStateBackend(
        MAXP, key_group_range(0, MAXP, 1), operator_id="op", subtask=0,
        codec=_codec.MsgpackCodec(), local_dir=str(tmp_path),
    )  # fmt: skip


@pytest.fixture(params=["heap", "rocksdb"])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The timer store of each backend (RocksDB with a tiny head, so it reloads from the DB)."""
    if request.param == "heap":
        yield TimerService()
        return
    backend = _rocks_backend(tmp_path)
    rocks = RocksDBTimerService(backend, lambda ns: ns, lambda ns: ns)
    for queue in rocks.queues:
        queue.head_size = 2
    try:
        yield rocks
    finally:
        backend.close()


def _fired(timers: list[Timer]) -> set[tuple[int, Any, Any]]:
    return {(t.timestamp, t.key, t.namespace) for t in timers}


def test_current_event_time(service: Any) -> None:
    """testCurrentEventTime: the watermark the service reports is the last one advanced to."""
    assert service.current_watermark == MIN_WATERMARK
    service.advance_watermark(17)
    assert service.current_watermark == 17
    service.advance_watermark(42)
    assert service.current_watermark == 42


@pytest.mark.parametrize("domain", ["event", "processing"])
def test_set_and_fire_timers(service: Any, domain: str) -> None:
    """testSetAndFireEventTimeTimers / testSetAndFireProcessingTimeTimers: timers of two keys and
    two namespaces at the same time all fire once, with their own key and namespace (no leakage);
    registering one again is a no-op (a set per key and namespace)."""
    register = getattr(service, f"register_{domain}_time_timer")
    for key in (1, 2):
        for ns in ("ciao", "hello"):
            register(key, ns, 10)
            register(key, ns, 10)  # deduplicated
    assert getattr(service, f"num_{domain}_time_timers") == 4
    advance = service.advance_watermark if domain == "event" else service.advance_processing_time
    assert advance(9) == []
    assert _fired(advance(10)) == {(10, 1, "ciao"), (10, 1, "hello"), (10, 2, "ciao"), (10, 2, "hello")}
    assert getattr(service, f"num_{domain}_time_timers") == 0
    assert advance(11) == []


@pytest.mark.parametrize("domain", ["event", "processing"])
def test_delete_timers(service: Any, domain: str) -> None:
    """testDeleteEventTimeTimers / testDeleteProcessingTimeTimers: a deleted timer does not fire,
    and deleting one key's timer leaves the other key's timer in the same namespace alone."""
    register = getattr(service, f"register_{domain}_time_timer")
    delete = getattr(service, f"delete_{domain}_time_timer")
    for key in (1, 2):
        for ns in ("ciao", "hello"):
            register(key, ns, 10)
    delete(1, "hello", 10)
    delete(2, "ciao", 10)
    assert getattr(service, f"num_{domain}_time_timers") == 2
    advance = service.advance_watermark if domain == "event" else service.advance_processing_time
    assert _fired(advance(10)) == {(10, 1, "ciao"), (10, 2, "hello")}


def test_domains_are_independent(service: Any) -> None:
    """Event-time timers fire by the watermark only, processing-time timers by processing time
    only, even at the same timestamp for the same key and namespace."""
    service.register_event_time_timer("k", None, 10)
    service.register_processing_time_timer("k", None, 10)
    assert service.advance_processing_time(100) and service.num_event_time_timers == 1
    assert _fired(service.advance_watermark(10)) == {(10, "k", None)}


def test_extreme_timestamps_keep_their_order(service: Any) -> None:
    """TimerSerializerTest's timestamps (Long.MIN_VALUE to Long.MAX_VALUE, negative ones): timers
    keep their numeric order in both stores (RocksDB's keys sort by an offset big-endian
    timestamp), and the maximum watermark fires them all."""
    stamps = [2**63 - 1, -(2**63), -1, 0, 1, -(2**62), 2**62]
    for i, ts in enumerate(stamps):
        service.register_event_time_timer(f"k{i}", None, ts)
    assert service.next_event_time() == -(2**63)
    fired = service.advance_watermark(2**63 - 1)
    assert [t.timestamp for t in fired] == sorted(stamps)


def test_snapshot_and_rebalancing_restore() -> None:
    """testSnapshotAndRestore / testSnapshotAndRebalancingRestore (heap): the timers of a
    snapshot restored into the two halves of the key-group range go each to the half that owns
    its key's key group, and fire there, in both domains."""
    service = TimerService()
    keys = list(range(40))
    for key in keys:
        service.register_processing_time_timer(key, "ciao", 10)
        service.register_event_time_timer(key, "hello", 10)
    snapshot = service.snapshot()
    halves = [range(0, MAXP // 2), range(MAXP // 2, MAXP)]
    fired: list[set] = []
    for groups in halves:
        restored = TimerService()
        restored.restore(snapshot, lambda k, g=groups: key_group_of(k, MAXP) in g)  # type: ignore[misc]
        both = _fired(restored.advance_processing_time(10)) | _fired(restored.advance_watermark(10))
        fired.append(both)
        assert {k for _, k, _ in both} == {k for k in keys if key_group_of(k, MAXP) in groups}
    assert fired[0] and fired[1]  # both halves own some of the keys
    assert len(fired[0]) + len(fired[1]) == 2 * len(keys)


# ---------------------------------------------------------------- the operator around the store


class _Recording(TimerOperator):
    """A Triggerable: records each firing with the current key as the backend has it."""

    def __init__(self) -> None:
        super().__init__("timers", lambda e: e)
        self.fired: list[tuple[str, int, Any, Any]] = []
        self.on_fire: Callable[[_Recording, Timer], None] | None = None

    async def _record(self, domain: str, timer: Timer) -> None:
        self.fired.append((domain, timer.timestamp, self.backend.current_key, timer.namespace))
        if self.on_fire is not None:
            self.on_fire(self, timer)

    async def on_event_timer(self, timer: Timer) -> None:
        await self._record("event", timer)

    async def on_processing_timer(self, timer: Timer) -> None:
        await self._record("processing", timer)


class Harness:
    """One TimerOperator subtask with a manual clock (Flink's TestProcessingTimeService)."""

    def __init__(self, backend: Any, subtask: int = 0, parallelism: int = 1) -> None:
        self.clock = ManualClock(0)
        self.woken = False
        self.pts = ProcessingTimeService(self.clock, self._wake)
        self.op = _Recording()
        ctx = OperatorContext(
            uid="timers", name="timers", task_name="timers", subtask_index=subtask,
            parallelism=parallelism, max_parallelism=MAXP, clock=self.clock,
            metrics=MetricGroup("timers[0]", {}), processing_time=self.pts, keyed_backend=backend,
        )  # fmt: skip
        self.op.setup(ctx, Output([], {}))

    def _wake(self) -> None:
        self.woken = True

    def register_processing(self, key: Any, ns: Any, ts: int) -> None:
        self.op.backend.current_key = key
        self.op.register_processing_timer(key, ns, ts)

    def physical_timers(self) -> list[int]:
        """The processing-time service's pending wake-ups (TestProcessingTimeService's
        getActiveTimerTimestamps)."""
        return self.pts.pending()

    async def set_processing_time(self, ms: int) -> None:
        self.clock.set(ms)
        while self.pts.has_due():
            await self.pts.run_due()

    def fired(self) -> list[tuple[str, int, Any, Any]]:
        out, self.op.fired = self.op.fired, []
        return out


@pytest.fixture(params=["heap", "rocksdb"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    backend = KeyedStateBackend(MAXP) if request.param == "heap" else _rocks_backend(tmp_path)
    h = Harness(backend)
    h.op.initialize_state(None)
    try:
        yield h
    finally:
        h.pts.cancel_all()
        if request.param == "rocksdb":
            backend.close()  # type: ignore[union-attr]


async def test_only_sets_one_physical_processing_time_timer(harness: Harness) -> None:
    """testOnlySetsOnePhysicalProcessingTimeTimer: however many processing-time timers are
    registered, one wake-up is pending at the processing-time service, for the earliest."""
    for ns, ts in (("ciao", 10), ("ciao", 20), ("ciao", 30), ("hello", 10), ("hello", 20)):
        harness.register_processing(1, ns, ts)
    assert harness.op.timers.num_processing_time_timers == 5
    assert harness.physical_timers() == [10]
    await harness.set_processing_time(10)
    assert harness.op.timers.num_processing_time_timers == 3
    assert harness.physical_timers() == [20]
    await harness.set_processing_time(20)
    assert harness.op.timers.num_processing_time_timers == 1
    assert harness.physical_timers() == [30]
    await harness.set_processing_time(30)
    assert harness.op.timers.num_processing_time_timers == 0
    assert harness.physical_timers() == []
    harness.register_processing(1, "ciao", 40)
    assert harness.physical_timers() == [40]
    assert [f[1] for f in harness.fired()] == [10, 10, 20, 20, 30]


async def test_register_earlier_processing_timer_moves_physical_timer(harness: Harness) -> None:
    """testRegisterEarlierProcessingTimerMovesPhysicalProcessingTimer: a timer earlier than every
    registered one replaces the pending wake-up (the later one is cancelled)."""
    harness.register_processing(1, "ciao", 20)
    assert harness.physical_timers() == [20]
    harness.register_processing(1, "ciao", 10)
    assert harness.op.timers.num_processing_time_timers == 2
    assert harness.physical_timers() == [10]
    await harness.set_processing_time(20)
    assert [f[1] for f in harness.fired()] == [10, 20]
    assert harness.physical_timers() == []


async def test_moving_the_wake_up_earlier_leaves_no_trail(harness: Harness) -> None:
    """Timers registered in decreasing order move the one wake-up earlier each time; the
    cancelled wake-ups do not pile up in the processing-time service (it drops them once they
    outnumber the live ones), and every timer still fires, in order."""
    for ts in range(1_000, 0, -1):
        harness.register_processing("k", ts, ts)
    assert harness.physical_timers() == [1]
    assert len(harness.pts._heap) <= 2 * 64 + 2
    await harness.set_processing_time(1_000)
    assert [f[1] for f in harness.fired()] == list(range(1, 1_001))
    assert harness.physical_timers() == []


async def test_registering_in_on_processing_time_does_not_leak_physical_timers(harness: Harness) -> None:
    """testRegisteringProcessingTimeTimerInOnProcessingTimeDoesNotLeakPhysicalTimers: a timer
    registered while one fires leaves one wake-up pending, for it."""
    harness.register_processing(1, "ciao", 10)
    harness.op.on_fire = lambda op, t: op.register_processing_timer(t.key, t.namespace, t.timestamp + 10)
    await harness.set_processing_time(10)
    assert harness.physical_timers() == [20]
    await harness.set_processing_time(20)
    assert harness.op.timers.num_processing_time_timers == 1
    assert harness.physical_timers() == [30]


async def test_current_key_while_timers_fire(harness: Harness) -> None:
    """The key context is the timer's key while it fires (Flink's InternalTimerServiceImpl sets
    ``keyContext.setCurrentKey(timer.getKey())`` before ``triggerTarget.onEventTime``), whatever
    key the last record set; in both domains."""
    op = harness.op
    for key in ("a", "b"):
        op.backend.current_key = key
        op.timers.register_event_time_timer(key, "w", 5)
        harness.register_processing(key, "w", 5)
    op.backend.current_key = "other"
    await op.process_watermark(Watermark(5))
    await harness.set_processing_time(5)
    assert sorted(harness.fired()) == [
        ("event", 5, "a", "w"), ("event", 5, "b", "w"),
        ("processing", 5, "a", "w"), ("processing", 5, "b", "w"),
    ]  # fmt: skip


async def test_event_timers_registered_while_firing_fire_in_the_same_watermark(harness: Harness) -> None:
    """Timers registered by onTimer at or before the watermark being processed fire within the
    same advance, in timestamp order (InternalTimerServiceImpl#advanceWatermark polls its queue
    until the head is past the watermark); a later one waits for its watermark."""
    op = harness.op
    op.backend.current_key = "k"
    op.timers.register_event_time_timer("k", None, 3)

    def chain(o: _Recording, t: Timer) -> None:
        if t.timestamp < 9:
            o.timers.register_event_time_timer(t.key, None, t.timestamp + 3)

    op.on_fire = chain
    await op.process_watermark(Watermark(8))
    assert [f[1] for f in harness.fired()] == [3, 6]
    await op.process_watermark(Watermark(9))
    assert [f[1] for f in harness.fired()] == [9]


async def test_timers_registered_behind_time(harness: Harness) -> None:
    """A timer registered at or behind the current time is not fired by the registration: an
    event-time one fires with the next watermark (Flink's registerEventTimeTimer only queues it;
    advanceWatermark fires it), a processing-time one at the next run of the processing-time
    service, without the clock moving (its physical timer is due at once)."""
    op = harness.op
    await op.process_watermark(Watermark(10))
    await harness.set_processing_time(10)
    op.backend.current_key = "k"
    op.timers.register_event_time_timer("k", None, 5)
    harness.register_processing("k", None, 7)
    assert harness.fired() == []
    assert harness.pts.has_due() and harness.physical_timers() == [7]
    await harness.set_processing_time(10)  # the same time: the service runs what is due
    assert harness.fired() == [("processing", 7, "k", None)]
    await op.process_watermark(Watermark(11))
    assert harness.fired() == [("event", 5, "k", None)]


@pytest.mark.parametrize("new_parallelism", [1, 2, 3])
async def test_processing_timers_restored_with_rescaling_fire(new_parallelism: int) -> None:
    """testSnapshotAndRebalancingRestore through the operator (heap backend), to fewer and more
    subtasks: two subtasks' snapshots restored at another parallelism give each subtask the
    timers of the key groups it owns; its processing-time timers fire after the restore with one
    wake-up pending (Flink's startTimerService schedules the restored head), its event-time
    timers with the watermark."""
    keys = list(range(30))
    snapshots = []
    for subtask in range(2):
        groups = key_group_range(subtask, MAXP, 2)
        h = Harness(KeyedStateBackend(MAXP, key_groups=groups), subtask, 2)
        h.op.initialize_state(None)
        for key in keys:
            if key_group_of(key, MAXP) in groups:
                h.register_processing(key, None, 10 + key)
                h.op.timers.register_event_time_timer(key, "w", 100 + key)
        snapshots.append(_codec.decode(_codec.encode(h.op.snapshot_state(1))))
        h.pts.cancel_all()
    fired: list[tuple[str, int, Any, Any]] = []
    for subtask in range(new_parallelism):
        groups = key_group_range(subtask, MAXP, new_parallelism)
        h = Harness(KeyedStateBackend(MAXP, key_groups=groups), subtask, new_parallelism)
        h.op.initialize_state(OperatorRestore(None, snapshots, groups))
        owned = [k for k in keys if key_group_of(k, MAXP) in groups]
        assert h.physical_timers() == ([10 + min(owned)] if owned else [])
        await h.set_processing_time(10 + max(keys))
        await h.op.process_watermark(Watermark(100 + max(keys)))
        got = h.fired()
        assert sorted(k for _, _, k, _ in got) == sorted(owned * 2)
        fired += got
        h.pts.cancel_all()
    assert sorted(fired) == sorted(
        [("processing", 10 + k, k, None) for k in keys] + [("event", 100 + k, k, "w") for k in keys]
    )
