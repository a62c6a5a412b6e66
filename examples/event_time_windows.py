"""Event time: per-user click counts in 10-second tumbling windows, with late data.

Run: python examples/event_time_windows.py

Watermarks trail the largest timestamp by 1 s; a click up to 2 s late still
updates its window (allowed lateness); a later one goes to a side output.
"""

from __future__ import annotations

from streamflow import (
    OutputTag,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    Watermark,
    WatermarkGenerator,
    WatermarkStrategy,
)
from streamflow.windowing import TumblingEventTimeWindows

CLICKS = [  # (user, timestamp in ms)
    ("alice", 1_000),
    ("bob", 2_000),
    ("alice", 8_500),
    ("bob", 12_000),
    ("alice", 9_500),  # 2.5 s behind the max so far: late, but within the allowed lateness
    ("alice", 25_000),
    ("bob", 3_000),  # far behind: beyond the allowed lateness
]


class EveryClick(WatermarkGenerator):
    """A punctuated generator: a watermark after every event, 1 s behind the largest timestamp
    (a periodic one, the default, would emit every 200 ms of processing time instead)."""

    def __init__(self) -> None:
        self.max_ts = -(2**63)

    def on_event(self, event, event_timestamp, output):
        self.max_ts = max(self.max_ts, event_timestamp)
        output.emit_watermark(Watermark(self.max_ts - 1_000 - 1))

    def on_periodic_emit(self, output):
        pass


class CountClicks(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield f"{key:5s} [{w.start / 1000:4.0f}s, {w.end / 1000:4.0f}s): {sum(1 for _ in elements)} clicks"


def main() -> None:
    env = StreamExecutionEnvironment()
    env.set_batch_size(1)  # one click per batch, so the watermark moves between clicks
    late = OutputTag("late")
    counts = (
        env.from_collection(CLICKS)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy.for_generator(EveryClick).with_timestamp_assigner(lambda c: c[1])
        )
        .key_by(lambda c: c[0])
        .window(TumblingEventTimeWindows.of(10_000))
        .allowed_lateness(2_000)
        .side_output_late_data(late)
        .process(CountClicks())
    )
    counts.print("window")
    counts.get_side_output(late).print("too late")
    env.execute("clicks per window")


if __name__ == "__main__":
    main()
