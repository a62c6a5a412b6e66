"""Event time at the sources: timestamp assigners, watermark generators and strategies.

Names follow PyFlink's; rules are ported from Flink's
``flink-core/src/main/java/org/apache/flink/api/common/eventtime/`` (files cited below).

Theory of operation
-------------------
A ``WatermarkStrategy`` is an immutable recipe. Per source split the runtime asks it for a
timestamp assigner and a ``WatermarkGenerator``, wraps the generator in a
``WatermarkEmitter`` (``runtime/watermark_emitter.py``) and, for every batch of records:
computes the timestamps with the assigner; calls ``emitter.on_batch(records, timestamps)``,
which returns where a watermark emitted from ``on_event`` (punctuated) cuts the batch; sends
the batch in those pieces with the watermarks between them, then ``emitter.drain()``
(watermarks and IDLE/ACTIVE); calls ``emitter.on_periodic(now)`` (every auto-watermark
interval, 200 ms by default, this calls ``on_periodic_emit``). At the end of the input it
sends ``emitter.end_of_input()``, which ends with ``Watermark(MAX_WATERMARK)``. Time comes
only from the numbers and the ``Clock`` passed in: no system time, no sleeping, no I/O.
Durations are ``int`` milliseconds or ``datetime.timedelta`` (truncated to milliseconds).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Protocol

from streamflow.clock import Clock
from streamflow.runtime.events import MIN_WATERMARK, Watermark, WatermarkStatus

__all__ = [
    "AscendingTimestampsWatermarks",
    "BoundedOutOfOrdernessWatermarks",
    "Duration",
    "IdlenessTimer",
    "NoWatermarksGenerator",
    "TimestampAssigner",
    "WatermarkGenerator",
    "WatermarkOutput",
    "WatermarkStrategy",
    "WatermarksWithIdleness",
    "monotonic_ms",
    "to_millis",
]

Duration = int | timedelta  # milliseconds, or a timedelta

DEFAULT_INTERVAL_MS = 200  # Flink's default pipeline.auto-watermark-interval

_ACTIVE = WatermarkStatus.ACTIVE
_IDLE = WatermarkStatus.IDLE
_MS = timedelta(milliseconds=1)


def to_millis(duration: Duration, what: str = "duration", minimum: int = MIN_WATERMARK) -> int:
    """``duration`` in whole milliseconds; ``ValueError`` if below ``minimum``."""
    if isinstance(duration, timedelta):
        ms = duration // _MS
    elif isinstance(duration, int) and not isinstance(duration, bool):
        ms = duration
    else:
        raise TypeError(f"a {what} is int milliseconds or a timedelta, not {duration!r}")
    if ms < minimum:
        raise ValueError(f"{what} must be at least {minimum} ms, got {ms} ms")
    return ms


def monotonic_ms(clock: Clock) -> int:
    """The clock's monotonic time in whole milliseconds (the time base for idleness)."""
    return round(clock.monotonic() * 1000)


# -- generators ---------------------------------------------------------------------------


class WatermarkOutput(Protocol):
    """Where a generator sends its watermarks (Flink's ``WatermarkOutput``)."""

    def emit_watermark(self, watermark: Watermark) -> None: ...

    def mark_idle(self) -> None: ...

    def mark_active(self) -> None: ...


class WatermarkGenerator:
    """Generates watermarks from events and/or periodically (Flink's ``WatermarkGenerator``).

    Punctuated generators emit from ``on_event``, periodic ones from ``on_periodic_emit``.
    The runtime calls ``on_batch``, which calls ``on_event`` per record; built-in generators
    override it with O(1) Python calls.
    """

    __slots__ = ()

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        """Called for every event."""

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Called every auto-watermark interval."""

    def on_batch(self, events: list[Any], timestamps: list[int], output: WatermarkOutput) -> None:
        """Called for every batch; ``timestamps[i]`` belongs to ``events[i]``."""
        on_event = self.on_event
        for event, timestamp in zip(events, timestamps, strict=True):
            on_event(event, timestamp, output)


class BoundedOutOfOrdernessWatermarks(WatermarkGenerator):
    """Periodic watermarks ``max_timestamp - bound - 1``.

    Port of ``BoundedOutOfOrdernessWatermarks.java``: after an event with timestamp ``T`` no
    event older than ``T - bound`` is expected. Before any event the watermark is
    ``MIN_WATERMARK`` (the start value is chosen so, as in Flink; Python ints cannot overflow).
    """

    __slots__ = ("_bound", "_max_timestamp")

    def __init__(self, max_out_of_orderness: Duration) -> None:
        self._bound = bound = to_millis(max_out_of_orderness, "max_out_of_orderness", 0)
        # start so that our lowest watermark would be MIN_WATERMARK
        self._max_timestamp = MIN_WATERMARK + bound + 1

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        if event_timestamp > self._max_timestamp:
            self._max_timestamp = event_timestamp

    def on_batch(self, events: list[Any], timestamps: list[int], output: WatermarkOutput) -> None:
        if timestamps:
            high = max(timestamps)
            if high > self._max_timestamp:
                self._max_timestamp = high

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        output.emit_watermark(Watermark(self._max_timestamp - self._bound - 1))


class AscendingTimestampsWatermarks(BoundedOutOfOrdernessWatermarks):
    """Timestamps ascend: the watermark trails the highest one by 1 ms.

    Port of ``AscendingTimestampsWatermarks.java`` (a bound of 0).
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0)


class NoWatermarksGenerator(WatermarkGenerator):
    """Emits no watermarks (``NoWatermarksGenerator.java``), for processing-time pipelines."""

    __slots__ = ()

    def on_batch(self, events: list[Any], timestamps: list[int], output: WatermarkOutput) -> None:
        pass


class IdlenessTimer:
    """Decides when an input is idle. Port of ``WatermarksWithIdleness.IdlenessTimer``.

    Activity bumps a counter. A periodic check that sees the counter changed resets the
    timer; the first one that sees no change starts the countdown; later ones report idle
    once strictly more than the timeout has passed since then (time: ``monotonic_ms``).
    Flink marks "no countdown" with time 0; here it is ``None`` (a manual clock may read 0).
    """

    __slots__ = ("_clock", "_counter", "_last_counter", "_start_of_inactivity", "_timeout_ms")

    def __init__(self, clock: Clock, idle_timeout: Duration) -> None:
        self._clock = clock
        self._timeout_ms = to_millis(idle_timeout, "idle timeout", 1)
        self._counter = 0
        self._last_counter = 0
        self._start_of_inactivity: int | None = None

    def activity(self) -> None:
        self._counter += 1

    def check_if_idle(self) -> bool:
        if self._counter != self._last_counter:
            # activity since the last check: reset the timer
            self._last_counter = self._counter
            self._start_of_inactivity = None
            return False
        if self._start_of_inactivity is None:
            # first check without activity: begin the countdown
            self._start_of_inactivity = monotonic_ms(self._clock)
            return False
        return monotonic_ms(self._clock) - self._start_of_inactivity > self._timeout_ms


class WatermarksWithIdleness(WatermarkGenerator):
    """Adds idleness detection to another generator. Port of ``WatermarksWithIdleness.java``.

    Idleness is evaluated in ``on_periodic_emit`` (see ``IdlenessTimer``); while idle the
    wrapped generator's ``on_periodic_emit`` is not called. As in Flink, an event only resets
    the timer and this wrapper's idle flag: it does not mark the output active. The output
    (``WatermarkEmitter``, Flink's ``WatermarkToDataOutput``) becomes ACTIVE again when the
    next watermark above all earlier ones is emitted, so an idle input whose records do not
    advance its watermark stays IDLE and does not hold back the watermark downstream.
    """

    __slots__ = ("_generator", "_status", "_timer")

    def __init__(self, generator: WatermarkGenerator, idle_timeout: Duration, clock: Clock) -> None:
        self._generator = generator
        self._timer = IdlenessTimer(clock, idle_timeout)
        self._status = _ACTIVE

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        self._generator.on_event(event, event_timestamp, output)
        self._timer.activity()
        self._status = _ACTIVE

    def on_batch(self, events: list[Any], timestamps: list[int], output: WatermarkOutput) -> None:
        if not timestamps:
            return
        self._generator.on_batch(events, timestamps, output)
        self._timer.activity()
        self._status = _ACTIVE

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        if self._timer.check_if_idle():
            if self._status is _ACTIVE:
                output.mark_idle()
                self._status = _IDLE
        else:
            self._generator.on_periodic_emit(output)


# -- timestamp assigners ------------------------------------------------------------------


class TimestampAssigner:
    """Gives each record its event timestamp (PyFlink's ``TimestampAssigner``)."""

    __slots__ = ()

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        """``record_timestamp`` is the record's previous timestamp (from the source), if any."""
        raise NotImplementedError


class _ValueAndTimestampAssigner(TimestampAssigner):
    """Calls ``fn(value, record_timestamp)``."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[..., int]) -> None:
        self._fn = fn

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return self._fn(value, record_timestamp)


class _ValueAssigner(_ValueAndTimestampAssigner):
    """Calls ``fn(value)``."""

    __slots__ = ()

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return self._fn(value)


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_REQUIRABLE = (*_POSITIONAL, inspect.Parameter.KEYWORD_ONLY)


def _as_assigner(assigner: TimestampAssigner | Callable[..., int]) -> TimestampAssigner:
    """Wrap a callable, choosing ``fn(value, record_timestamp)`` or ``fn(value)`` once.

    A callable that can take two positional arguments gets both; one that takes exactly one
    gets the value. A callable whose signature Python cannot read (``operator.itemgetter``,
    ``operator.attrgetter``) is called with the value only.
    """
    if isinstance(assigner, TimestampAssigner):
        return assigner
    if not callable(assigner):
        raise TypeError(f"not a TimestampAssigner nor a callable: {assigner!r}")
    try:
        params = list(inspect.signature(assigner).parameters.values())
    except (TypeError, ValueError):
        return _ValueAssigner(assigner)
    positional = [p for p in params if p.kind in _POSITIONAL]
    required = [p for p in params if p.default is p.empty and p.kind in _REQUIRABLE]
    if len(required) > 2 or any(p.kind is p.KEYWORD_ONLY for p in required):
        raise TypeError(f"a timestamp assigner takes (value[, record_timestamp]): {assigner!r}")
    if len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params):
        return _ValueAndTimestampAssigner(assigner)
    if positional:
        return _ValueAssigner(assigner)
    raise TypeError(f"a timestamp assigner takes (value[, record_timestamp]): {assigner!r}")


# -- strategies ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WatermarkStrategy:
    """How a source assigns timestamps and generates watermarks (PyFlink's WatermarkStrategy).

    Immutable: ``with_timestamp_assigner`` and ``with_idleness`` return new strategies.
    """

    generator_factory: Callable[[], WatermarkGenerator]
    timestamp_assigner: TimestampAssigner | None = None
    idle_timeout_ms: int | None = None
    alignment: tuple[str, int, int] | None = None  # (group, max drift ms, update interval ms)

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration) -> WatermarkStrategy:
        bound = to_millis(max_out_of_orderness, "max_out_of_orderness", 0)
        return WatermarkStrategy(lambda: BoundedOutOfOrdernessWatermarks(bound))

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        return WatermarkStrategy(AscendingTimestampsWatermarks)

    @staticmethod
    def no_watermarks() -> WatermarkStrategy:
        return WatermarkStrategy(NoWatermarksGenerator)

    @staticmethod
    def for_generator(factory: Callable[[], WatermarkGenerator]) -> WatermarkStrategy:
        if not callable(factory):
            raise TypeError(f"factory must be callable: {factory!r}")
        return WatermarkStrategy(factory)

    def with_timestamp_assigner(
        self, timestamp_assigner: TimestampAssigner | Callable[..., int]
    ) -> WatermarkStrategy:
        return replace(self, timestamp_assigner=_as_assigner(timestamp_assigner))

    def with_idleness(self, idle_timeout: Duration) -> WatermarkStrategy:
        return replace(self, idle_timeout_ms=to_millis(idle_timeout, "idle timeout", 1))

    def with_watermark_alignment(
        self,
        watermark_group: str,
        max_allowed_watermark_drift: Duration,
        update_interval: Duration | None = None,
    ) -> WatermarkStrategy:
        """Flink's watermark alignment (update interval 1 s unless given): a source given this
        strategy by ``from_source()`` stops reading while its watermark is more than the drift
        ahead of the slowest source of its group (``runtime/watermark_alignment.py``)."""
        if not isinstance(watermark_group, str) or not watermark_group:
            raise ValueError(f"a watermark group must be a non-empty string, got {watermark_group!r}")
        drift = to_millis(max_allowed_watermark_drift, "max allowed watermark drift", 0)
        interval = 1000 if update_interval is None else to_millis(update_interval, "update interval", 1)
        return replace(self, alignment=(watermark_group, drift, interval))

    def create_watermark_generator(self, clock: Clock) -> WatermarkGenerator:
        """A fresh generator, wrapped in ``WatermarksWithIdleness`` if an idle timeout is set."""
        generator = self.generator_factory()
        if not isinstance(generator, WatermarkGenerator):
            raise TypeError(f"the factory returned {generator!r}, not a WatermarkGenerator")
        if self.idle_timeout_ms is None:
            return generator
        return WatermarksWithIdleness(generator, self.idle_timeout_ms, clock)

    def create_timestamp_assigner(self) -> TimestampAssigner | None:
        """The assigner, or ``None``: keep the timestamps the records came with."""
        return self.timestamp_assigner


# -- the runtime's driver -----------------------------------------------------------------


