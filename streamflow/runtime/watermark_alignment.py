"""Watermark alignment (Flink's FLIP-182): a source does not read ahead of the slowest source of
its watermark group by more than its allowed drift.

Theory of operation. A source whose ``WatermarkStrategy`` has
``with_watermark_alignment(group, max_drift, update_interval)`` makes each of its subtasks an
:class:`AlignmentMember` of the job's :class:`AlignmentGroup` of that name (sources of different
kinds may share a group). As Flink's ``SourceOperator`` with its ``SourceCoordinator``:

* the member follows its source's latest watermark (``on_watermark``: it only rises, and
  Long.MIN_VALUE is no watermark yet, as the output Flink's ``updateCurrentEffectiveWatermark``
  listens to) and whether its output is idle (``on_status``); it *reports* every update
  interval: its latest watermark, or Long.MAX_VALUE while idle, so an idle source holds no one
  back; nothing before its first watermark. At the end of its input it reports Long.MAX_VALUE
  at once (``finish``);
* the group's combined watermark is the smallest report; each report announces it to every
  member that has reported (Flink's coordinator sends its ``WatermarkAlignmentEvent`` to the
  subtasks whose reports it holds: a member not yet reported has no limit), whose max allowed
  watermark is then the combined one plus its own source's drift (Long.MAX_VALUE on overflow).
  Flink's coordinator announces every update interval; here each report announces at once,
  the same values;
* a member whose latest watermark is above its max allowed one is *waiting*: its source task
  stops polling the reader and only runs its mail (checkpoint triggers, timers, the periodic
  reports) until an announcement lets it go, which wakes the task. A member's own watermark
  going up re-checks at once (Flink's ``updateCurrentEffectiveWatermark``).

The member is checked after each batch its source task emits (its watermark comes with the
batch), so a source stops after the batch that took it past its max allowed watermark; Flink
checks after each record. The group with the smallest report always has a member allowed to
read (the drift is not negative), and a waiting member still reports, so alignment cannot stall
the whole group; but a member with nothing to read and no idleness holds the others back for
as long as that lasts (as in Flink): a member that has waited a minute logs who holds it back,
once a wait. Plain synchronous state: time enters only through the task's processing-time
service, which calls :meth:`AlignmentMember.report`, and the Clock the activity clock wraps.

Inside a subtask, a reader of several splits aligns them itself (FLIP-217,
``SourceReader.align_splits``: the Kafka reader pauses the partitions ahead). As Flink's
``mainInputActivityClock``, the idleness clock of the source's strategy stands still while its
member waits (:meth:`AlignmentMember.activity_clock`, given to the generator by
``timestamps.py``): a source waiting longer than its idle timeout is not idle. Were it marked
idle, an operator downstream that also reads a source outside the group would move its
watermark past the waiting source's, and the records it reads when let go would be late. (A
source with its own per-partition watermarks, Kafka's, judges idleness only when polled, so not
while it waits.) ``drift()`` is Flink's ``watermarkAlignmentDrift`` metric.

Flink's own tests of the feature (``SourceCoordinatorAlignmentTest``,
``SourceOperatorAlignmentTest``, ``SourceOperatorSplitWatermarkAlignmentTest``,
``WatermarkAlignmentITCase``, ``AlignedWatermarksITCase``) run against these classes in
``tests/test_watermark_alignment_flink.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..clock import Cancellable, Clock
from .events import MAX_WATERMARK, MIN_WATERMARK

log = logging.getLogger(__name__)

STALL_WARNING_MS = 60_000  # a member waiting this long (counted in its reports) says why, once a wait


class AlignmentGroup:
    """The reports of a watermark group's members, and the members to announce to."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.reported: dict[str, int] = {}
        self.members: list[AlignmentMember] = []

    def report(self, member_id: str, watermark: int) -> None:
        reported = self.reported
        reported[member_id] = watermark
        combined = self.combined()
        for member in self.members:
            if member.member_id in reported:
                member.announce(combined)

    def combined(self) -> int:
        """The smallest reported watermark (Long.MAX_VALUE before any report: no limit)."""
        return min(self.reported.values(), default=MAX_WATERMARK)

    def slowest(self) -> str:
        return min(self.reported, key=self.reported.__getitem__, default="-")


class AlignmentMember:
    """One source subtask in its group (module doc)."""

    def __init__(
        self, group: AlignmentGroup, member_id: str, max_drift_ms: int, update_interval_ms: int
    ) -> None:
        self.group = group
        self.member_id = member_id
        self.max_drift_ms = max_drift_ms
        self.update_interval_ms = update_interval_ms
        self.latest: int | None = None  # no watermark yet
        self.idle = False
        self.max_allowed = MAX_WATERMARK
        self.wake: Callable[[], None] = _nothing
        self.activity: PausedWhileWaiting | None = None  # its source's idleness clock
        self.waiting_reports = 0  # consecutive reports made while waiting
        self._stall_reports = max(1, -(-STALL_WARNING_MS // update_interval_ms))  # (ceiling)
        group.members.append(self)

    def activity_clock(self, clock: Clock) -> PausedWhileWaiting:
        """``clock`` standing still while this member waits: the idleness clock of its source."""
        self.activity = PausedWhileWaiting(clock)
        self._track()
        return self.activity

    def _track(self) -> None:
        activity = self.activity
        if activity is not None:
            activity.pause(self.waiting())

    def on_watermark(self, timestamp: int) -> None:
        latest = self.latest
        if timestamp > (MIN_WATERMARK if latest is None else latest):
            self.latest = timestamp
            self._track()

    def on_status(self, idle: bool) -> None:
        self.idle = idle

    def report(self) -> None:
        if self.latest is not None:
            self.group.report(self.member_id, MAX_WATERMARK if self.idle else self.latest)
        self.waiting_reports = self.waiting_reports + 1 if self.waiting() else 0
        if self.waiting_reports == self._stall_reports:
            log.warning(
                "%s has not read for %d s: its watermark %d is more than %d ms ahead of watermark group "
                "%r, held back by %s at %d (a source with nothing to read holds its group back unless "
                "its WatermarkStrategy has with_idleness())", self.member_id, STALL_WARNING_MS // 1000,
                self.latest, self.max_drift_ms, self.group.name, self.group.slowest(), self.group.combined(),
            )  # fmt: skip

    def finish(self) -> None:
        self.latest = MAX_WATERMARK
        self.report()

    def announce(self, combined: int) -> None:
        was_waiting = self.waiting()
        drift = self.max_drift_ms
        self.max_allowed = MAX_WATERMARK if combined > MAX_WATERMARK - drift else combined + drift
        self._track()
        if was_waiting and not self.waiting():
            log.debug("%s resumes: max allowed watermark %d", self.member_id, self.max_allowed)
            self.wake()

    def drift(self) -> int:
        """Flink's ``watermarkAlignmentDrift`` metric: its watermark minus its max allowed one
        (``lastWatermark - currentMaxDesiredWatermark``: negative while it may read, positive
        by how far past it it waits). 0 while it has no limit (before its first announcement,
        where Flink has no such gauge yet, or every other member idle) and after its end."""
        latest, allowed = self.latest, self.max_allowed
        if latest is None or latest >= MAX_WATERMARK or allowed >= MAX_WATERMARK:
            return 0
        return latest - allowed

    def waiting(self) -> bool:
        latest = self.latest
        return latest is not None and latest > self.max_allowed


def _nothing() -> None:
    pass


class PausedWhileWaiting:
    """A :class:`~streamflow.clock.Clock` whose monotonic time stands still while paused (Flink's
    ``PausableRelativeClock``); wall-clock time and timers are the wrapped clock's."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.paused_since: float | None = None
        self.paused_total = 0.0

    def pause(self, paused: bool) -> None:
        since = self.paused_since
        if paused and since is None:
            self.paused_since = self.clock.monotonic()
        elif not paused and since is not None:
            self.paused_total += self.clock.monotonic() - since
            self.paused_since = None

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def monotonic(self) -> float:
        since = self.paused_since
        return (self.clock.monotonic() if since is None else since) - self.paused_total

    def call_at_ms(self, at_ms: int, callback: Callable[[], None]) -> Cancellable:
        return self.clock.call_at_ms(at_ms, callback)


class WatermarkAlignment:
    """A job's groups by name, and its members by source and subtask."""

    def __init__(self) -> None:
        self.groups: dict[str, AlignmentGroup] = {}
        self.members: dict[tuple[str, int], AlignmentMember] = {}

    def member(self, source_uid: str, subtask: int, params: tuple[str, int, int]) -> AlignmentMember:
        """The member of ``source_uid``'s subtask (made on first use; the source task and the
        operator that generates its watermarks share it). ``params`` is the strategy's
        ``(group, max drift ms, update interval ms)``."""
        key = (source_uid, subtask)
        member = self.members.get(key)
        if member is None:
            name, drift, interval = params
            group = self.groups.get(name)
            if group is None:
                group = self.groups[name] = AlignmentGroup(name)
            member = self.members[key] = AlignmentMember(group, f"{source_uid}#{subtask}", drift, interval)
        return member
