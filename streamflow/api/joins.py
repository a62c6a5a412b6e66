"""Joins (beyond PyFlink, whose Python DataStream API has none), with Flink Java's semantics.

* **Window join** ``a.join(b).where(ka).equal_to(kb).window(assigner).apply(fn)``
  and **co-group** ``a.co_group(b)...apply(fn)``: as Flink's ``JoinedStreams`` and
  ``CoGroupedStreams`` do, both inputs are tagged and unioned, keyed by their
  key, windowed with the assigner (and optional trigger, evictor, allowed
  lateness), and each fired window calls ``fn(left, right)`` for every pair of
  the key's left and right elements (join; an inner join: a side without
  elements gives no pairs) or ``fn.co_group(lefts, rights)`` once (co-group).
* **Interval join** ``keyed_a.interval_join(keyed_b).between(lower, upper).process(fn)``:
  Flink's ``IntervalJoinOperator``: in event time, a left element at ``t``
  joins the right elements of its key in ``[t + lower, t + upper]``; both
  sides are buffered in keyed map state until the watermark passes the last
  instant they could still join (a cleanup timer: a left element at ``t`` until
  ``t + upper``, a right one at ``t`` until ``t - lower``, never before ``t``
  itself), late elements (behind the watermark) are dropped or, with
  ``side_output_left_late_data(tag)``/``side_output_right_late_data(tag)``,
  sent to that side output (Flink's ``sideOutput*LateData``), and each result
  carries the larger of its two timestamps (as the record's timestamp too:
  :class:`_IntervalJoinOperator`). Bounds are inclusive unless
  ``lower_bound_exclusive()``/``upper_bound_exclusive()``.

Everything runs on the existing keyed window and keyed co-process operators,
so joins are checkpointed like them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..functions import Function, KeyedCoProcessFunction, OutputTag, ProcessWindowFunction
from ..runtime.basic_operators import resolve_function
from ..runtime.events import MIN_WATERMARK
from ..runtime.process_operators import _Emitter
from ..runtime.two_input_operators import KeyedCoProcessOperator
from ..state.keyed import MapStateDescriptor
from .typed import converted

if TYPE_CHECKING:
    from .datastream import DataStream, KeyedStream

__all__ = [
    "CoGroupFunction",
    "CoGroupedStreams",
    "IntervalJoined",
    "JoinFunction",
    "JoinedStreams",
    "ProcessJoinFunction",
]


class JoinFunction(Function):
    def join(self, first: Any, second: Any) -> Any:
        raise NotImplementedError


class FlatJoinFunction(Function):
    def join(self, first: Any, second: Any) -> Iterable[Any]:
        raise NotImplementedError


class CoGroupFunction(Function):
    def co_group(self, first: Iterable[Any], second: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError


class ProcessJoinFunction(Function):
    class Context:
        def get_left_timestamp(self) -> int:
            raise NotImplementedError

        def get_right_timestamp(self) -> int:
            raise NotImplementedError

        def get_timestamp(self) -> int:
            raise NotImplementedError

    def process_element(self, left: Any, right: Any, ctx: Any) -> Iterable[Any] | None:
        raise NotImplementedError


# --------------------------------------------------------------------------- window join / co-group


class _WindowJoinFunction(ProcessWindowFunction):
    """The window function of a join or co-group over the tagged union."""

    def __init__(self, fn: Any, co_group: bool) -> None:
        self.fn = fn
        self.co_group = co_group

    def open(self, runtime_context: Any) -> None:
        if isinstance(self.fn, Function):
            self.fn.open(runtime_context)

    def close(self) -> None:
        if isinstance(self.fn, Function):
            self.fn.close()

    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> list[Any]:
        left = [v for side, v in elements if side == 0]
        right = [v for side, v in elements if side == 1]
        if self.co_group:
            call = getattr(self.fn, "co_group", self.fn)
            return list(call(left, right) or ())
        call = getattr(self.fn, "join", self.fn)
        if isinstance(self.fn, FlatJoinFunction):  # join() yields its results (Flink: a Collector)
            return [r for a in left for b in right for r in call(a, b) or ()]
        return [call(a, b) for a in left for b in right]


class _Windowed:
    def __init__(
        self, first: DataStream, second: DataStream, key1: Any, key2: Any, assigner: Any, co_group: bool
    ) -> None:
        self._first, self._second = first, second
        self._key1, self._key2 = key1, key2
        self._assigner, self._co_group = assigner, co_group
        self._trigger: Any = None
        self._evictor: Any = None
        self._lateness: Any = None

    def trigger(self, trigger: Any) -> _Windowed:
        self._trigger = trigger
        return self

    def evictor(self, evictor: Any) -> _Windowed:
        self._evictor = evictor
        return self

    def allowed_lateness(self, time_ms: Any) -> _Windowed:
        self._lateness = time_ms
        return self

    def apply(self, function: Any, output_type: Any = None) -> DataStream:
        k1, k2 = self._key1, self._key2
        left = self._first.map(lambda v: (0, v))
        right = self._second.map(lambda v: (1, v))
        keyed = left.union(right).key_by(lambda tv: k1(tv[1]) if tv[0] == 0 else k2(tv[1]))
        windowed = keyed.window(self._assigner)
        if self._trigger is not None:
            windowed = windowed.trigger(self._trigger)
        if self._evictor is not None:
            windowed = windowed.evictor(self._evictor)
        if self._lateness is not None:
            windowed = windowed.allowed_lateness(self._lateness)
        name = "CoGroup" if self._co_group else "Join"
        return converted(
            windowed.process(_WindowJoinFunction(function, self._co_group)).name(name), output_type, "apply()"
        )

    with_ = apply


class _Where:
    def __init__(self, first: DataStream, second: DataStream, co_group: bool, key1: Any = None) -> None:
        self._first, self._second, self._co_group, self._key1 = first, second, co_group, key1

    def where(self, key_selector: Any) -> _Where:
        return _Where(
            self._first, self._second, self._co_group, resolve_function(key_selector, "get_key", "where()")
        )

    def equal_to(self, key_selector: Any) -> _EqualTo:
        if self._key1 is None:
            raise ValueError("call where() before equal_to()")
        key2 = resolve_function(key_selector, "get_key", "equal_to()")
        return _EqualTo(self._first, self._second, self._key1, key2, self._co_group)


class _EqualTo:
    def __init__(self, first: DataStream, second: DataStream, key1: Any, key2: Any, co_group: bool) -> None:
        self._args = (first, second, key1, key2)
        self._co_group = co_group

    def window(self, assigner: Any) -> _Windowed:
        return _Windowed(*self._args, assigner, self._co_group)


class JoinedStreams(_Where):
    def __init__(self, first: DataStream, second: DataStream) -> None:
        super().__init__(first, second, co_group=False)


class CoGroupedStreams(_Where):
    def __init__(self, first: DataStream, second: DataStream) -> None:
        super().__init__(first, second, co_group=True)


# --------------------------------------------------------------------------- interval join

_LEFT = MapStateDescriptor("interval-join-left")
_RIGHT = MapStateDescriptor("interval-join-right")


class _JoinContext:
    __slots__ = ("_left", "_right")

    def __init__(self, left: int, right: int) -> None:
        self._left, self._right = left, right

    def get_left_timestamp(self) -> int:
        return self._left

    def get_right_timestamp(self) -> int:
        return self._right

    def get_timestamp(self) -> int:
        return max(self._left, self._right)


class _IntervalJoinFunction(KeyedCoProcessFunction):
    """Flink's IntervalJoinOperator as a keyed co-process function over map state ``{ts: [values]}``."""

    def __init__(
        self,
        fn: Any,
        lower: int,
        upper: int,
        late_tags: tuple[OutputTag | None, OutputTag | None] = (None, None),
    ) -> None:
        self.fn, self.lower, self.upper = fn, lower, upper
        self.late_tags = late_tags  # (left, right): where late elements go (None: dropped)

    def open(self, runtime_context: Any) -> None:
        self.left = runtime_context.get_map_state(_LEFT)
        self.right = runtime_context.get_map_state(_RIGHT)
        if isinstance(self.fn, Function):
            self.fn.open(runtime_context)

    def close(self) -> None:
        if isinstance(self.fn, Function):
            self.fn.close()

    def _process(self, value: Any, ctx: Any, is_left: bool) -> list[tuple[Any, int]]:
        """The joined results with their timestamps, ``(result, max(left ts, right ts))``."""
        ts = ctx.timestamp()
        if ts == MIN_WATERMARK:  # no timestamp (Flink's IntervalJoinOperator refuses Long.MIN_VALUE)
            raise ValueError(
                "interval join needs event-time timestamps: assign_timestamps_and_watermarks() first"
            )
        timers = ctx.timer_service()
        if ts < timers.current_watermark():
            # late: it could only join elements already cleaned up (Flink drops it, or sends it
            # to the side's late-data output)
            tag = self.late_tags[0 if is_left else 1]
            return [] if tag is None else [((tag, value), ts)]
        own, other = (self.left, self.right) if is_left else (self.right, self.left)
        own[ts] = [*(own.get(ts) or []), value]
        low, high = (self.lower, self.upper) if is_left else (-self.upper, -self.lower)
        call = getattr(self.fn, "process_element", self.fn)
        out: list[tuple[Any, int]] = []
        for other_ts, values in other.items():
            if ts + low <= other_ts <= ts + high:
                result_ts = max(ts, other_ts)
                for other_value in values:
                    left, right = (value, other_value) if is_left else (other_value, value)
                    lts, rts = (ts, other_ts) if is_left else (other_ts, ts)
                    out.extend((r, result_ts) for r in call(left, right, _JoinContext(lts, rts)) or ())
        # keep the element until no element of the other side can still join it (Flink's
        # cleanup time: ts + the relative upper bound, not before ts)
        timers.register_event_time_timer(ts + max(high, 0))
        return out

    def process_element1(self, value: Any, ctx: Any) -> list[Any]:
        return self._process(value, ctx, True)

    def process_element2(self, value: Any, ctx: Any) -> list[Any]:
        return self._process(value, ctx, False)

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        # the elements whose cleanup time (see _process) is this timer's: a timer has no side,
        # so each removes the left and the right elements due at its time
        stale_left = timestamp - max(self.upper, 0)
        stale_right = timestamp + min(self.lower, 0)
        for state, stale in ((self.left, stale_left), (self.right, stale_right)):
            if state.contains(stale):
                state.remove(stale)


class _TimedEmitter(_Emitter):
    """Takes ``(result, timestamp)`` pairs: each result keeps its own timestamp."""

    __slots__ = ()

    def add(self, result: Iterable[Any] | None, ts: int | None) -> None:
        for value, value_ts in result or ():
            super().add((value,), value_ts)


class _IntervalJoinOperator(KeyedCoProcessOperator):
    """Emits each joined result with its own timestamp, the larger of its two elements' (Flink's
    IntervalJoinOperator sets it on the collector), not the arriving element's."""

    emitter = _TimedEmitter


class IntervalJoined:
    def __init__(
        self,
        left: KeyedStream,
        right: KeyedStream,
        lower: int,
        upper: int,
        late_tags: tuple[OutputTag | None, OutputTag | None] = (None, None),
    ) -> None:
        self._left, self._right, self._lower, self._upper = left, right, lower, upper
        self._late_tags = late_tags

    def _with(self, **changes: Any) -> IntervalJoined:
        options = {"lower": self._lower, "upper": self._upper, "late_tags": self._late_tags, **changes}
        return IntervalJoined(self._left, self._right, **options)

    def lower_bound_exclusive(self) -> IntervalJoined:
        return self._with(lower=self._lower + 1)

    def upper_bound_exclusive(self) -> IntervalJoined:
        return self._with(upper=self._upper - 1)

    def side_output_left_late_data(self, output_tag: OutputTag) -> IntervalJoined:
        """Left elements behind the watermark go to ``output_tag`` instead of being dropped
        (Flink's ``sideOutputLeftLateData``); read them with ``get_side_output(output_tag)``."""
        return self._with(late_tags=(output_tag, self._late_tags[1]))

    def side_output_right_late_data(self, output_tag: OutputTag) -> IntervalJoined:
        """Right elements behind the watermark go to ``output_tag`` (``sideOutputRightLateData``)."""
        return self._with(late_tags=(self._late_tags[0], output_tag))

    def process(
        self, process_join_function: ProcessJoinFunction | Callable[..., Any], output_type: Any = None
    ) -> DataStream:
        fn = _IntervalJoinFunction(process_join_function, self._lower, self._upper, self._late_tags)
        connected = self._left.connect(self._right)
        stream = connected._keyed_process(fn, output_type, _IntervalJoinOperator, "process()")
        return stream.name("IntervalJoin")


class IntervalJoin:
    def __init__(self, left: KeyedStream, right: KeyedStream) -> None:
        self._left, self._right = left, right

    def between(self, lower_bound: Any, upper_bound: Any) -> IntervalJoined:
        from .environment import to_millis

        lower, upper = to_millis(lower_bound, "lower bound"), to_millis(upper_bound, "upper bound")
        if lower > upper:
            raise ValueError(f"interval join: lower bound {lower} must not be above upper bound {upper}")
        return IntervalJoined(self._left, self._right, lower, upper)
