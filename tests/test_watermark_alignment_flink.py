"""Flink's own tests of watermark alignment (FLIP-182, FLIP-217) on streamflow's classes.

Ported scenarios (apache/flink, the newest stored versions), each a table run against the pure
classes of ``runtime/watermark_alignment.py`` or the Kafka reader's ``align_splits``:

* ``SourceCoordinatorAlignmentTest`` (flink-runtime ``.../source/coordinator``): the
  coordinator is an :class:`AlignmentGroup`; its ``reportWatermarkEvent(subtask, w)`` is a
  report of the member for that subtask, ``assertLatestWatermarkAlignmentEvent(subtask, w)``
  its ``max_allowed``. ``testWatermarkAlignment``, ``...WithIdleness``, ``...WithTwoGroups``,
  ``testWatermarkAggregator`` and ``...Randomly`` (seeded). Left out:
  ``testAnnounceCombinedWatermarkWithoutStart`` and ``testSendWatermarkAlignmentEventFailed``
  are about the coordinator's periodic task across a JobManager reset and RPC to a task not
  yet ready: here a report announces at once, in the same process (a member's ``wake`` before
  its task started does nothing).
* ``SourceOperatorAlignmentTest`` (flink-runtime ``.../streaming/api/operators``): the
  operator is an :class:`AlignmentMember`; a ``WatermarkAlignmentEvent(w)`` is an
  announcement giving it ``max_allowed == w``, ``assertLatestReportedWatermarkEvent`` reads
  its group's report. ``testStopWhileWaitingForWatermarkAlignment``: streamflow's
  stop-with-savepoint is a savepoint then a cancel, which a waiting source takes
  (``test_watermark_alignment.test_a_waiting_source_still_takes_checkpoints``).
* ``SourceOperatorSplitWatermarkAlignmentTest``: a ``KafkaSourceReader`` whose consumer is a
  stand-in that records pauses and only "fetches" partitions it has not paused; the task's
  call of ``align_splits(max_allowed)`` before each poll is Flink's pause check on each split
  watermark and each ``WatermarkAlignmentEvent``. ``testBackpressureAndIdleness`` is left out:
  it is about backpressure pausing the idleness clock, not alignment. The main-output case of
  ``testSingleSplitWatermarkAlignmentAndIdleness`` (a source without splits of its own, whose
  idleness clock Flink pauses while it waits) runs end to end at the end.
* ``WatermarkAlignmentITCase.testTaskFinishedWithWatermarkAlignmentExecution`` and
  ``AlignedWatermarksITCase.testAlignment`` (the drift metric): end to end.
"""

from __future__ import annotations

import random
from itertools import pairwise
from typing import Any

import pytest

import streamflow as sf
from streamflow.common.serialization import SimpleStringSchema
from streamflow.common.time import Duration
from streamflow.connectors.kafka_reader import KafkaSourceReader, _Split
from streamflow.connectors.kafka_watermarks import PartitionWatermarks
from streamflow.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource
from streamflow.datastream.connectors.number_seq import NumberSequenceSource
from streamflow.runtime.events import MAX_WATERMARK, MIN_WATERMARK, Watermark, WatermarkStatus
from streamflow.runtime.watermark_alignment import AlignmentMember, WatermarkAlignment
from streamflow.testing import ManualClock

# -- SourceCoordinatorAlignmentTest ------------------------------------------------------


def _coordinator(alignment: WatermarkAlignment, source: str, group: str, drift: int = 1000) -> list:
    """A source's two subtasks in ``group`` (Flink's WatermarkAlignmentParams(drift, group, ..))."""
    return [alignment.member(source, subtask, (group, drift, 1000)) for subtask in (0, 1)]


def _report(member: AlignmentMember, watermark: int) -> None:
    """The coordinator handles the subtask's ReportedWatermarkEvent(watermark)."""
    member.group.report(member.member_id, watermark)


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(  # testWatermarkAlignment
            [(0, 42, {0: 1042}), (1, 44, {0: 1042, 1: 1042}), (0, 5000, {0: 1044, 1: 1044})],
            id="testWatermarkAlignment",
        ),
        pytest.param(  # testWatermarkAlignmentWithIdleness
            [
                (0, 42, {0: 1042}),
                (1, 44, {0: 1042, 1: 1042}),
                (0, MAX_WATERMARK, {0: 1044, 1: 1044}),  # subtask 0 becomes idle
                (0, 42, {0: 1042, 1: 1042}),  # active again
                (0, MAX_WATERMARK, {}),
                (1, MAX_WATERMARK, {0: MAX_WATERMARK, 1: MAX_WATERMARK}),  # all idle: no overflow
                (0, 42, {0: 1042, 1: 1042}),
                (1, 46, {0: 1042, 1: 1042}),
            ],
            id="testWatermarkAlignmentWithIdleness",
        ),
    ],
)
def test_coordinator(steps: list) -> None:
    members = _coordinator(WatermarkAlignment(), "source", "group1")
    for subtask, watermark, expected in steps:
        _report(members[subtask], watermark)
        assert {i: members[i].max_allowed for i in expected} == expected


def test_coordinator_two_groups() -> None:
    """``testWatermarkAlignmentWithTwoGroups``: two sources in groups of their own."""
    alignment = WatermarkAlignment()
    subtask0 = _coordinator(alignment, "source1", "group1")[0]
    subtask1 = _coordinator(alignment, "source2", "group2")[1]
    _report(subtask0, 42)
    assert subtask0.max_allowed == 1042
    _report(subtask1, 44)
    assert (subtask0.max_allowed, subtask1.max_allowed) == (1042, 1044)
    _report(subtask0, 5000)
    assert (subtask0.max_allowed, subtask1.max_allowed) == (6000, 1044)


def test_coordinator_announces_to_the_subtasks_that_reported() -> None:
    """Flink's coordinator sends its WatermarkAlignmentEvent to the subtasks whose reports it
    holds (``combinedWatermark.keySet()``): subtask 1 has no limit before it reports."""
    subtask0, subtask1 = _coordinator(WatermarkAlignment(), "source", "group1")
    subtask1.on_watermark(5000)  # read ahead, not reported yet
    _report(subtask0, 42)
    assert (subtask0.max_allowed, subtask1.max_allowed, subtask1.waiting()) == (1042, MAX_WATERMARK, False)
    subtask1.report()
    assert (subtask1.max_allowed, subtask1.waiting()) == (1042, True)


@pytest.mark.parametrize(
    "steps",
    [
        [
            (0, 10, 10),
            (1, 12, 10),
            (2, 13, 10),
            (1, 9, 9),
            (1, MAX_WATERMARK, 10),  # the watermark of an idle source
            (1, 8, 8),
            (1, 20, 10),
            (0, 23, 13),
            (2, 22, 20),
        ]
    ],
)
def test_watermark_aggregator(steps: list) -> None:
    """``testWatermarkAggregator``: the group's watermark is the smallest latest report."""
    group = WatermarkAlignment().member("s", 0, ("g", 0, 10)).group
    for key, watermark, combined in steps:
        group.report(str(key), watermark)
        assert group.combined() == combined


@pytest.mark.parametrize(("rounds", "keys"), [(20, 100), (10, 500)])
@pytest.mark.parametrize("idle", [True, False])
def test_watermark_aggregator_randomly(rounds: int, keys: int, idle: bool) -> None:
    """``testWatermarkAggregatorRandomly`` (seeded; Flink's sizes go to 10,000 keys)."""
    rng = random.Random(rounds * keys + idle)
    group = WatermarkAlignment().member("s", 0, ("g", 0, 10)).group
    latest: dict[str, int] = {}
    for _ in range(rounds):
        for key in range(keys):
            if idle and rng.randrange(100) == 0:  # an idle source, or the default watermark
                watermark = MAX_WATERMARK if rng.random() < 0.5 else MIN_WATERMARK
            else:
                watermark = 1_700_000_000_000 + rng.randrange(1000)
            group.report(str(key), watermark)
            latest[str(key)] = watermark
            assert group.combined() == min(latest.values())


# -- SourceOperatorAlignmentTest ---------------------------------------------------------


def _operator(drift: int = 100) -> AlignmentMember:
    """A source subtask with ``withWatermarkAlignment("group1", 100 ms, 1 ms)``."""
    return WatermarkAlignment().member("source", 0, ("group1", drift, 1))


def _event(member: AlignmentMember, max_watermark: int) -> None:
    """The coordinator's WatermarkAlignmentEvent(max_watermark) to this member."""
    member.announce(max_watermark - member.max_drift_ms if max_watermark < MAX_WATERMARK else MAX_WATERMARK)
    assert member.max_allowed == max_watermark


def _reported(member: AlignmentMember) -> int | None:
    return member.group.reported.get(member.member_id)


def test_operator_watermark_alignment() -> None:
    """``testWatermarkAlignment``: it waits while its watermark is above the max allowed one."""
    member = _operator()
    member.on_watermark(1000)  # record1's watermark
    member.report()
    assert (_reported(member), member.waiting()) == (1000, False)
    _event(member, 1000 - 1)
    assert member.waiting()
    member.report()
    assert _reported(member) == 1000
    _event(member, 1000 + 1)
    assert not member.waiting()
    # streamflow: the task stops after the batch that took it past (module doc), Flink after
    # record2; either way its watermark is then 2000 and it waits
    member.on_watermark(2000)
    assert member.waiting()
    member.report()
    assert _reported(member) == 2000


@pytest.mark.parametrize("all_subtasks_idle", [True, False])
def test_operator_watermark_alignment_with_idleness(all_subtasks_idle: bool) -> None:
    """``testWatermarkAlignmentWithIdleness``: an idle source reports Long.MAX_VALUE; active
    again, it reports its last watermark (record2 has an even timestamp: no watermark)."""
    member = _operator()
    member.on_watermark(1)
    member.report()
    assert _reported(member) == 1
    _event(member, 1 + 100)
    assert not member.waiting()
    member.on_status(True)
    member.report()
    assert _reported(member) == MAX_WATERMARK
    _event(member, MAX_WATERMARK if all_subtasks_idle else 1 + 150)
    member.on_status(False)  # record2 read: active, no new watermark
    member.report()
    assert _reported(member) == 1
    _event(member, 1 + 100)
    assert not member.waiting()


def test_operator_without_split_reports_nothing() -> None:
    """``testWatermarkAlignmentWithoutSplit``: no report before a watermark; Long.MIN_VALUE is
    no watermark (Flink's UNINITIALIZED, which its output never emits)."""
    member = _operator()
    member.report()
    member.report()
    assert _reported(member) is None
    member.on_watermark(MIN_WATERMARK)
    member.report()
    assert _reported(member) is None
    member.on_watermark(10)
    member.report()
    assert _reported(member) == 10


def test_operator_reported_watermark_does_not_decrease() -> None:
    """``testReportedWatermarkDoNotDecrease``: a split added later with older records does not
    take the reported watermark back."""
    member = _operator()
    member.on_watermark(2000)
    member.report()
    assert _reported(member) == 2000
    member.on_watermark(1000)
    member.report()
    assert _reported(member) == 2000


def test_operator_finished_reports_max() -> None:
    """``testWatermarkAlignmentWhileSubtaskFinished``: at its end a source reports
    Long.MAX_VALUE, so it holds no one back."""
    member = _operator()
    member.on_watermark(1)
    member.report()
    member.finish()
    assert _reported(member) == MAX_WATERMARK


def test_operator_alignment_drift_metric() -> None:
    """Flink's ``watermarkAlignmentDrift`` (``InternalSourceReaderMetricGroup``): the last
    watermark minus the max desired one, from the first WatermarkAlignmentEvent on."""
    member = _operator()
    assert member.drift() == 0  # no watermark, no event (Flink: no gauge yet)
    member.on_watermark(1000)
    assert member.drift() == 0  # no event yet
    _event(member, 950)
    assert member.drift() == 50  # waits: 50 ms past its max allowed watermark
    _event(member, 1100)
    assert member.drift() == -100  # may read 100 ms more
    member.finish()
    assert member.drift() == 0


def test_operator_activity_clock_stands_still_while_waiting() -> None:
    """Flink's ``mainInputActivityClock.pause()`` while waiting for alignment: the idleness
    clock of the source does not move while it waits."""
    clock = ManualClock(0)
    member = _operator()
    activity = member.activity_clock(clock)
    member.on_watermark(1000)
    clock.advance(50)
    assert activity.monotonic() == pytest.approx(clock.monotonic())
    _event(member, 900)  # waiting
    clock.advance(500)
    assert activity.monotonic() == pytest.approx(clock.monotonic() - 0.5)
    _event(member, 1000)  # let go
    clock.advance(30)
    assert activity.monotonic() == pytest.approx(clock.monotonic() - 0.5)
    member.on_watermark(1200)  # past 1000: waiting again
    clock.advance(70)
    assert activity.monotonic() == pytest.approx(clock.monotonic() - 0.57)
    assert activity.now_ms() == clock.now_ms()


# -- SourceOperatorSplitWatermarkAlignmentTest -------------------------------------------


class EveryRecord(sf.WatermarkGenerator):
    """Flink's TestWatermarkGenerator: a watermark at each new highest timestamp."""

    def on_event(self, event: Any, event_timestamp: int, output: Any) -> None:
        output.emit_watermark(Watermark(event_timestamp))

    def on_periodic_emit(self, output: Any) -> None:
        pass


class Consumer:
    """The aiokafka consumer's pause/resume, recorded."""

    def __init__(self) -> None:
        self.paused: set[int] = set()

    def pause(self, tp: Any) -> None:
        self.paused.add(tp.partition)

    def resume(self, tp: Any) -> None:
        self.paused.discard(tp.partition)


class Reader:
    """A KafkaSourceReader with partitions 0.. of one topic, its consumer a stand-in."""

    def __init__(self, partitions: int, clock: ManualClock, idleness_ms: int | None = None) -> None:
        from aiokafka import TopicPartition  # type: ignore[import-untyped]

        source = (
            KafkaSource.builder()
            .set_bootstrap_servers("localhost:1")
            .set_topics("t")
            .set_starting_offsets(KafkaOffsetsInitializer.earliest())
            .set_value_only_deserializer(SimpleStringSchema())
            .build()
        )
        strategy = sf.WatermarkStrategy.for_generator(EveryRecord)
        if idleness_ms is not None:
            strategy = strategy.with_idleness(Duration.of_millis(idleness_ms))
        self.reader = reader = KafkaSourceReader(source, 0, 1)
        reader._consumer = self.consumer = Consumer()
        reader.watermarks = PartitionWatermarks(strategy, clock, interval_ms=1)
        for p in range(partitions):
            reader.splits[("t", p)] = _Split(TopicPartition("t", p), p, 0, 0)
            reader.watermarks.add_partition(p)
        self.events: list[Any] = []

    def fetch(self, partition: int, *timestamps: int) -> None:
        """The consumer hands over records of a partition it has not paused."""
        if partition in self.consumer.paused:
            return
        split = self.reader.splits[("t", partition)]
        n = len(timestamps)
        offsets = list(range(split.fetched, split.fetched + n))
        records = [str(t) for t in timestamps]
        self.reader._queue.append((split, records, list(timestamps), offsets, offsets[-1] + 1))
        self.reader._queued += n
        split.queued += 1
        split.fetched += n

    def emit_next(self, max_allowed: int) -> Any:
        """The task: align the splits, then poll until a record (or nothing) comes."""
        while True:
            self.reader.align_splits(max_allowed)
            batch = self.reader.poll_batch(1)
            if batch is None:
                return None
            self.events.append(batch)
            if type(batch) is tuple:
                return batch

    def paused(self, max_allowed: int) -> list[int]:
        self.reader.align_splits(max_allowed)
        return sorted(self.consumer.paused)


def test_split_watermark_alignment() -> None:
    """``testSplitWatermarkAlignment``: a split whose watermark is above the max allowed one is
    paused, resumed when the max allowed reaches it."""
    reader = Reader(2, ManualClock(0))
    reader.fetch(0, 5)
    reader.fetch(1, 3)
    reader.fetch(0, 11)
    reader.fetch(1, 12)
    reader.emit_next(MAX_WATERMARK)  # split 0 emits 5
    assert reader.paused(4) == [0]  # pause by coordinator message
    assert reader.paused(5) == []
    reader.emit_next(5)  # split 1 emits 3
    reader.emit_next(5)  # split 0 emits 11
    assert reader.paused(5) == [0]
    reader.emit_next(5)  # split 1 emits 12
    assert reader.paused(5) == [0, 1]


def test_multi_split_alignment_and_idleness() -> None:
    """``testMultiSplitWatermarkAlignmentAndIdleness``: a paused split is never idle, so the
    reader's watermark does not pass its watermark however long the other split keeps reading."""
    clock = ManualClock(0)
    reader = Reader(2, clock, idleness_ms=100)
    max_allowed = 4
    reader.fetch(0, max_allowed + 1)
    reader.emit_next(MAX_WATERMARK)  # split 0 emits its record: watermark 5
    assert reader.paused(max_allowed) == [0]
    reader.fetch(0, max_allowed + 1 + 100)  # paused: never fetched
    for _ in range(7):
        reader.fetch(1, 3)
    reader.fetch(1, max_allowed + 1 + 100)
    for _ in range(20):
        clock.advance(100 - 1)  # the active split never idles; the paused one would, twice over
        reader.emit_next(max_allowed)
    assert reader.paused(max_allowed) == [0, 1]
    watermarks = [e.timestamp for e in reader.events if isinstance(e, Watermark)]
    assert watermarks and max(watermarks) <= max_allowed + 1
    assert WatermarkStatus.IDLE not in reader.events


def test_single_split_alignment_and_idleness() -> None:
    """``testSingleSplitWatermarkAlignmentAndIdleness``: a blocked split is not idle."""
    clock = ManualClock(1)
    reader = Reader(1, clock, idleness_ms=100)
    max_allowed = 4
    reader.fetch(0, 1, 1, 1, 1, max_allowed + 1)
    reader.reader.poll_batch(5)
    for _ in range(10):
        reader.fetch(0, max_allowed + 1 + 100)  # split 0 is blocked: never fetched
        reader.emit_next(max_allowed)
        clock.advance(100)
    assert reader.paused(max_allowed) == [0]
    assert WatermarkStatus.IDLE not in reader.events


def test_split_alignment_with_finished_split() -> None:
    """``testSplitWatermarkAlignmentWithFinishedSplit``: a split read to its end is not paused."""
    reader = Reader(2, ManualClock(0))
    split0 = reader.reader.splits[("t", 0)]
    split0.stop, split0.done = 1, True  # bounded: its only record is fetched
    reader.fetch(0, 5)
    reader.fetch(1, 3)
    while reader.emit_next(MAX_WATERMARK) is not None:
        pass
    assert reader.paused(4) == []


# -- WatermarkAlignmentITCase ------------------------------------------------------------


def test_task_finished_with_watermark_alignment() -> None:
    """``testTaskFinishedWithWatermarkAlignmentExecution``: two subtasks of a sequence, 10 ms
    of drift: the subtask that finishes first holds the other back no more (Flink's interval
    is 2 s, so both would end before the first report here: 5 ms)."""
    env = sf.StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    env.get_config().set_auto_watermark_interval(5)
    strategy = (
        sf.WatermarkStrategy.for_monotonous_timestamps()
        .with_timestamp_assigner(lambda value, _ts: value)
        .with_watermark_alignment("g1", Duration.of_millis(10), Duration.of_millis(5))
    )
    stream = env.from_source(NumberSequenceSource(0, 100), strategy, "Sequence Source").filter(
        lambda value: True
    )
    assert sorted(stream.execute_and_collect(limit=101)) == list(range(101))


# -- a waiting source is not idle (the main output of testSingleSplitWatermarkAlignmentAndIdleness)


async def test_a_waiting_source_does_not_go_idle() -> None:
    """``testSingleSplitWatermarkAlignmentAndIdleness`` for a source without splits of its own
    (Flink pauses ``mainInputActivityClock`` while it waits). The fast source waits on the slow
    one (no idleness) far longer than its own idle timeout; its stream is joined with a source
    outside the group that is far ahead. Were the waiting source idle, the joined watermark would
    jump to the other source's, and the records it reads once let go would be late."""
    from test_watermark_alignment import BATCH, DRIFT, INTERVAL, EveryRecord, _max, settle, tick
    from waiting import wait_until

    from streamflow.testing.scripted import ScriptedSource
    from streamflow.windowing import TumblingEventTimeWindows

    def strategy(idle_ms: int | None) -> sf.WatermarkStrategy:
        s = sf.WatermarkStrategy.for_generator(EveryRecord).with_timestamp_assigner(lambda e: e[1])
        if idle_ms is not None:
            s = s.with_idleness(Duration.of_millis(idle_ms))
        return s.with_watermark_alignment("group", Duration.of_millis(DRIFT), Duration.of_millis(INTERVAL))

    clock = ManualClock(0)
    env = sf.StreamExecutionEnvironment(clock=clock)
    env.set_batch_size(BATCH)
    env.get_config().set_auto_watermark_interval(INTERVAL)
    fast, slow, other = ScriptedSource(end=False), ScriptedSource(end=False), ScriptedSource(end=False)
    out: list = []
    late_tag = sf.OutputTag("late")
    env.from_source(slow, strategy(None), "slow").add_sink(out.append)
    outside = sf.WatermarkStrategy.for_generator(EveryRecord).with_timestamp_assigner(lambda e: e[1])
    seen: list[int] = []
    windows = (
        env.from_source(fast, strategy(3 * INTERVAL), "fast")
        .map(lambda e: seen.append(e[1]) or e)
        .union(env.from_source(other, outside, "other"))
        .key_by(lambda e: 0)
        .window(TumblingEventTimeWindows.of(1000))
        .side_output_late_data(late_tag)
        .reduce(lambda a, b: (a[0], max(a[1], b[1])))
    )
    windows.add_sink(out.append)
    late: list = []
    windows.get_side_output(late_tag).add_sink(late.append)
    client = await env.execute_async()
    fast.push(("a", 0))
    slow.push(("b", 0))
    await wait_until(lambda: _max(out, "b") == 0)
    await settle()
    await tick(clock)  # both report 0
    fast.push(*[("a", t) for t in range(1, 2_000)])
    await wait_until(lambda: max(seen) >= DRIFT)
    other.push(("o", 5_000))
    await tick(clock, 20)  # 200 ms waiting: idle after 30 ms, were the clock not stopped
    assert max(seen) <= DRIFT + BATCH  # it waits
    slow.push(("b", 1_950))  # the slow source catches up: the fast one reads the rest
    await wait_until(lambda: _max(out, "b") == 1_950)
    for _ in range(40):
        await tick(clock)
    fast.finish()
    other.finish()
    slow.finish()
    await client.get_job_execution_result()
    assert late == []
    assert sorted(r for r in out if r[0] == "a") == [("a", 999), ("a", 1_999)]


async def test_aligned_watermarks_drift_metric_only_decreases() -> None:
    """``AlignedWatermarksITCase.testAlignment``: a fast and a slow source of one group (10 ms
    of drift): the fast source's ``watermarkAlignmentDrift``, once there, never grows and comes
    below the drift. Flink's sources are paced by sleeps in a map (1 ms, 10 ms a record); here
    the test hands the fast source 100 records and the slow one 10 every update interval, on a
    manual clock; batches of one record, as Flink checks after each record."""
    from test_watermark_alignment import INTERVAL, EveryRecord, settle, tick

    from streamflow.testing.scripted import ScriptedSource

    max_drift = 10
    strategy = (
        sf.WatermarkStrategy.for_generator(EveryRecord)
        .with_timestamp_assigner(lambda e: e[1])
        .with_watermark_alignment("group-1", Duration.of_millis(max_drift), Duration.of_millis(INTERVAL))
    )
    clock = ManualClock(0)
    env = sf.StreamExecutionEnvironment(clock=clock)
    env.set_batch_size(1)
    env.get_config().set_auto_watermark_interval(0)
    slow, fast = ScriptedSource(end=False), ScriptedSource(end=False)
    out: list = []
    slow_stream = env.from_source(slow, strategy, "SlowSequence")
    slow_stream.union(env.from_source(fast, strategy, "FastSequence")).add_sink(out.append)
    client = await env.execute_async()

    def fast_drift() -> int | None:
        metrics = client.get_metrics()
        names = [k for k in metrics if "FastSequence" in k and k.endswith("AlignmentDrift")]
        return metrics[names[0]] if names else None

    drifts: list[int] = []
    for step in range(60):
        fast.push(*[("f", t) for t in range(100 * step, 100 * (step + 1))])
        slow.push(*[("s", t) for t in range(10 * step, 10 * (step + 1))])
        await settle()
        await tick(clock)
        drift = fast_drift()
        if drift:  # 0: no limit yet
            drifts.append(drift)
            if drift < max_drift:
                break
    await client.cancel()
    assert drifts and drifts[0] > max_drift and drifts[-1] < max_drift, drifts
    assert all(b <= a for a, b in pairwise(drifts)), drifts
