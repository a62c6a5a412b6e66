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

With ``STREAMFLOW_KILL_AT=<point>:<id>`` (a run killed at a chosen point) each source's last
records wait while checkpoint ``id`` is not durable (``throttle_with_tail``), so a short job is
still running when the kill comes.

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
from collections.abc import Awaitable, Callable
from typing import Any

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


TAIL = 500  # the records of each source a run killed at a chosen point may hold back
TAIL_SLEEP = 0.01  # seconds each: up to 5 s for the kill's checkpoint to become durable


def throttle_with_tail(records: int, checkpoint_dir: str, kill_id: int) -> Callable[[Any], Awaitable[Any]]:
    """``throttle`` for a run killed at a chosen point of checkpoint ``kill_id``
    (``STREAMFLOW_KILL_AT=<point>:<id>``): while no checkpoint ``>= kill_id`` has its
    ``_metadata``, each of a source's last ``TAIL`` of its ``records`` waits ``TAIL_SLEEP`` more,
    so the job cannot end (for ``TAIL * TAIL_SLEEP``, 5 s) before the kill's checkpoint got that
    far, however few its records or slow its checkpoints (RocksDB's: over a second on an idle
    machine); the kills up to ``complete`` hit by then, the later ones (commit, compact) follow
    at full speed, as in any longer job. Each record waits once, not until the checkpoint is
    durable: a record held in this asynchronous map holds back the barriers behind it, so
    waiting for the checkpoint would deadlock. The records before the tail run as in any run
    (the same backpressure and in-flight data), and the run after the kill, which restores and
    finishes the job, has no tail. Counted from this process's start: the killed runs start
    fresh."""
    seen = 0
    durable = False

    def kill_checkpoint_durable() -> bool:
        if not os.path.isdir(checkpoint_dir):
            return False
        return any(
            e.name[:4] == "chk-" and e.name[4:].isdigit() and int(e.name[4:]) >= kill_id
            and os.path.exists(os.path.join(e.path, "_metadata"))
            for e in os.scandir(checkpoint_dir)
        )  # fmt: skip

    async def tail_throttle(record: Any) -> Any:
        nonlocal seen, durable
        seen += 1
        if seen > records - TAIL and not durable:
            durable = kill_checkpoint_durable()
            if not durable:
                await asyncio.sleep(TAIL_SLEEP)
        return await throttle(record)

    return tail_throttle


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
    kill_at = os.environ.get("STREAMFLOW_KILL_AT", "")
    kill_id = int(kill_at.rpartition(":")[2]) if kill_at.rpartition(":")[2].isdigit() else 0
    a = (
        env.from_collection(records[: n // 2])
        .uid("source-a")
        .map(throttle_with_tail(n // 2, checkpoint_dir, kill_id) if kill_at else throttle, concurrency=1)
        .uid("throttle-a")
        .set_parallelism(1)
    )
    b = (
        env.from_collection(records[n // 2 :])
        .uid("source-b")
        .map(throttle_with_tail(n - n // 2, checkpoint_dir, kill_id) if kill_at else throttle, concurrency=1)
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
