"""An endless job with a slow sink, for the REST, CLI and browser tests: its source is
backpressured and it checkpoints every 100 ms. Run it with ``streamflow run --rest-port 0``."""

import asyncio
import itertools

import streamflow as sf


class Slow(sf.MapFunction):
    def open(self, runtime_context: sf.RuntimeContext) -> None:
        group = runtime_context.get_metrics_group()
        self.seen = group.counter("slowRecords")
        self.sizes = group.distribution("valueSize")
        self.meter = group.meter("slowMeter")
        group.gauge("lastValue", lambda: self.last)
        self.last = 0

    async def map(self, value: int) -> int:  # type: ignore[override]
        await asyncio.sleep(0.004)  # a slow sink: the source upstream is backpressured
        self.seen.inc()
        self.meter.mark_event()
        self.sizes.update(len(str(value)))
        self.last = value
        return value


EPOCH_MS = 1_700_000_000_000
env = sf.StreamExecutionEnvironment()
env.enable_checkpointing(100)
env.set_batch_size(8)
env.set_channel_capacity(32)
env.disable_operator_chaining()
(
    env.from_collection(lambda: itertools.count()).uid("numbers")
    .assign_timestamps_and_watermarks(
        sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v: EPOCH_MS + v)
    ).uid("timestamps")
    .map(Slow()).uid("slow").name("slow sink")
    .add_sink(lambda v: None).uid("discard")
)  # fmt: skip
env.execute("slow job")
