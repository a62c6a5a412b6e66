"""Window join, co-group and interval join (Flink Java's semantics, snake_case names)."""

from __future__ import annotations

from streamflow.common import WatermarkStrategy
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.window import TumblingEventTimeWindows
from streamflow.testing import ListSink


def _timed(env, data):
    return env.from_collection(data).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])
    )


ORDERS = [("alice", 1, "o1"), ("bob", 2, "o2"), ("alice", 12, "o3"), ("carol", 15, "o4")]
PAYMENTS = [("alice", 3, "p1"), ("alice", 5, "p2"), ("bob", 14, "p3"), ("carol", 16, "p4")]


def test_window_join_pairs_per_key_and_window() -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    sink = ListSink()
    _timed(env, ORDERS).join(_timed(env, PAYMENTS)).where(lambda o: o[0]).equal_to(lambda p: p[0]).window(
        TumblingEventTimeWindows.of(10)
    ).apply(lambda o, p: (o[2], p[2])).sink_to(sink)
    env.execute()
    # bob's order (window 0) and payment (window 10) never meet: an inner join per window
    assert sorted(sink.results) == [("o1", "p1"), ("o1", "p2"), ("o4", "p4")]


def test_co_group_sees_both_sides_even_when_one_is_empty() -> None:
    class Count:
        def co_group(self, orders, payments):
            orders, payments = list(orders), list(payments)
            key = (orders or payments)[0][0]
            return [(key, len(orders), len(payments))]

    env = StreamExecutionEnvironment.get_execution_environment()
    sink = ListSink()
    _timed(env, ORDERS).co_group(_timed(env, PAYMENTS)).where(lambda o: o[0]).equal_to(lambda p: p[0]).window(
        TumblingEventTimeWindows.of(10)
    ).apply(Count()).sink_to(sink)
    env.execute()
    assert sorted(sink.results) == [
        ("alice", 1, 0),
        ("alice", 1, 2),
        ("bob", 0, 1),
        ("bob", 1, 0),
        ("carol", 1, 1),
    ]


def test_interval_join_bounds_and_timestamps() -> None:
    """IntervalJoinOperatorTest's rule: left at t joins right in [t + lower, t + upper]."""
    from streamflow.api.joins import ProcessJoinFunction

    class Pair(ProcessJoinFunction):
        def process_element(self, left, right, ctx):
            yield left[2], right[2], ctx.get_timestamp()

    def run(lower_exclusive: bool) -> list:
        env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
        sink = ListSink()
        payments = [("bob", 1, "p0"), *PAYMENTS]  # exactly on the lower bound of o2 (2 - 1)
        joined = (
            _timed(env, ORDERS)
            .key_by(lambda o: o[0])
            .interval_join(_timed(env, payments).key_by(lambda p: p[0]))
            .between(-1, 4)
        )
        if lower_exclusive:
            joined = joined.lower_bound_exclusive()
        joined.process(Pair()).sink_to(sink)
        env.execute()
        return sorted(sink.results)

    # alice: o1@1 with p1@3, p2@5 (in [0, 5]); o3@12 with nothing; bob: o2@2 with p0@1 only
    # when the lower bound is inclusive;
    # carol: o4@15 with p4@16 (in [14, 19])
    assert run(False) == [("o1", "p1", 3), ("o1", "p2", 5), ("o2", "p0", 2), ("o4", "p4", 16)]
    assert run(True) == [("o1", "p1", 3), ("o1", "p2", 5), ("o4", "p4", 16)]
