"""The job the kill tests run in a subprocess: two sources -> keyed running sum -> exactly-once files.

Usage: python tests/kill_job.py OUT_DIR CHECKPOINT_DIR aligned|unaligned N [incremental|full]

Each key comes from one source only, so its running sums are deterministic
whatever the interleaving; the committed output must hold each exactly once.
Restarting the same command resumes from the latest complete checkpoint.

With ``STREAMFLOW_KILL_SNAPSHOT_PROCESS=1`` every heap checkpoint is encoded in a forked
snapshot child (``state/heap_fork.py``), whatever its size.

With ``STREAMFLOW_KILL_COMPACT=1`` the sink rolls a part file at every checkpoint and compacts
them (``enable_compact``: 4 kB or 3 checkpoints, concatenated): the published files are the
compacted ones.

``STREAMFLOW_KILL_PARALLELISM`` sets the job's parallelism (2 by default): a restart at another
one rescales the keyed state, the sink's and (unaligned) the in-flight data.

With ``STREAMFLOW_KILL_TIMERS=1`` the sums go through a keyed process function
that holds them in list state and emits them from timers (a processing-time
timer 2 ms on, and an event-time one that fires at the end of input): the same
output, so timers and their state must survive every kill too.
"""

from __future__ import annotations

import asyncio
import os
import sys

import streamflow as sf

RUNNING = "kill_job: running"  # the first line of stderr, once the imports are done


def data(n: int) -> list[tuple[str, int]]:
    half = n // 2
    return [(f"{'a' if i < half else 'b'}{i % 13}", i % 97) for i in range(n)]


def expected(n: int) -> list[str]:
    sums: dict[str, int] = {}
    out = []
    for key, value in data(n):
        sums[key] = sums.get(key, 0) + value
        out.append(str((key, sums[key])))
    return out


async def throttle(record: tuple[str, int]) -> tuple[str, int]:
    if record[1] % 10 == 0:
        await asyncio.sleep(0.001)
    return record


async def slow_sink_path(record: tuple[str, int]) -> tuple[str, int]:
    if record[1] % 4 == 0:
        await asyncio.sleep(0.0005)
    return record


class HoldForTimers(sf.KeyedProcessFunction):
    """Holds each record in list state until a timer of its key fires, then emits them."""

    def open(self, runtime_context: sf.RuntimeContext) -> None:
        from streamflow.common import Types
        from streamflow.datastream.state import ListStateDescriptor

        held = ListStateDescriptor("held", Types.TUPLE([Types.STRING(), Types.INT()]))
        self.held = runtime_context.get_list_state(held)

    def process_element(self, value: tuple[str, int], ctx: sf.KeyedProcessFunction.Context) -> None:
        self.held.add(value)
        timers = ctx.timer_service()
        timers.register_processing_time_timer(timers.current_processing_time() + 2)
        timers.register_event_time_timer(2**62)  # the end of input's watermark fires it

    def on_timer(self, timestamp: int, ctx: sf.KeyedProcessFunction.OnTimerContext) -> list:
        out = list(self.held.get() or ())
        self.held.clear()
        return out


def main(out_dir: str, checkpoint_dir: str, mode: str, n: int, state: str = "incremental") -> None:
    print(RUNNING, file=sys.stderr, flush=True)  # imports done: a random kill counts from here
    parallelism = int(os.environ.get("STREAMFLOW_KILL_PARALLELISM", "2"))  # a restart may change it
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    env.set_channel_capacity(128)
    env.enable_checkpointing(30)
    if os.environ.get("STREAMFLOW_KILL_BACKEND"):  # e.g. rocksdb (test_rocksdb_backend.py)
        env.configure({"state.backend.type": os.environ["STREAMFLOW_KILL_BACKEND"]})
    if os.environ.get("STREAMFLOW_KILL_SNAPSHOT_PROCESS"):
        env.configure({
            "state.backend.heap.snapshot-process": "on", "state.backend.heap.snapshot-process.min-entries": 1,
        })  # fmt: skip
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(checkpoint_dir)
    # incremental: a short chain, so kills also land while bases are rewritten and retention
    # drops the old ones
    cfg.enable_incremental_checkpoints(state == "incremental", max_chain=2)
    if mode == "unaligned":
        cfg.enable_unaligned_checkpoints()
    records = data(n)
    a = (
        env.from_collection(records[: n // 2])
        .uid("source-a")
        .map(throttle, concurrency=1)
        .uid("throttle-a")
        .set_parallelism(1)
    )
    b = (
        env.from_collection(records[n // 2 :])
        .uid("source-b")
        .map(throttle, concurrency=1)
        .uid("throttle-b")
        .set_parallelism(1)
    )
    summed = a.union(b).key_by(lambda r: r[0]).sum(1).uid("running-sum")
    if os.environ.get("STREAMFLOW_KILL_TIMERS"):
        summed = summed.key_by(lambda r: r[0]).process(HoldForTimers()).uid("hold")
    if mode == "unaligned":  # a slow sink path behind a channel: backpressure, in-flight data
        summed = summed.map(slow_sink_path, concurrency=1).uid("slow").start_new_chain()
    sink = sf.FileSink.for_row_format(out_dir, sf.Encoder.simple_string_encoder())
    if os.environ.get("STREAMFLOW_KILL_COMPACT"):
        from streamflow.datastream.connectors.file_system import FileCompactor, FileCompactStrategy

        strategy = FileCompactStrategy.builder().set_size_threshold(4096).enable_compaction_on_checkpoint(3)
        sink = sink.with_rolling_policy(sf.RollingPolicy.on_checkpoint_rolling_policy()).enable_compact(
            strategy.build(), FileCompactor.concat_file_compactor()
        )
    summed.sink_to(sink.build()).uid("files")
    env.execute("kill-test")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), *sys.argv[5:6])
