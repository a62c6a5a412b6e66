"""Checkpoints end to end: periodic, failover, savepoints, restore checks, unaligned, alternating."""

from __future__ import annotations

import ast
import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.checkpoint.actions import CheckpointTriggerError
from streamflow.checkpoint.restore import RestoredCheckpoint
from streamflow.checkpoint.storage import FileSystemCheckpointStorage


def committed_lines(directory: Path) -> list[str]:
    out: list[str] = []
    for f in sorted(directory.iterdir()):
        if f.is_file() and not f.name.startswith("."):
            out.extend(f.read_text().splitlines())
    return out


def expected_running_sums(data: list[tuple[str, int]]) -> Counter[str]:
    sums: dict[str, int] = {}
    out: Counter[str] = Counter()
    for key, value in data:
        sums[key] = sums.get(key, 0) + value
        out[str((key, sums[key]))] += 1
    return out


async def slow(record: Any) -> Any:
    if record[1] % 7 == 0:
        await asyncio.sleep(0.001)
    return record


def committed_a_file(directory: Path) -> bool:
    """The job's FileSink (rolling on checkpoints) committed a file: a checkpoint completed."""
    return directory.is_dir() and any(not f.name.startswith(".") for f in directory.iterdir())


def held_until_committed(data: list, poison: Any, directory: Path) -> Callable[[], AsyncIterator[Any]]:
    """A source of ``data`` that holds ``poison`` back until a checkpoint completed (at most
    60 s), so a failure injected there restores a real checkpoint however loaded the machine
    is; the source task stays responsive meanwhile (checkpoints pass it)."""

    async def records() -> AsyncIterator[Any]:
        for record in data:
            if record == poison:
                for _ in range(12_000):
                    if committed_a_file(directory):
                        break
                    await asyncio.sleep(0.005)
            yield record

    return records


class FailOnce(sf.MapFunction):
    """Raises once, the first time it meets ``poison`` (across restarts of the job). With
    ``committed_in``: at the first record from ``poison`` on once the job's FileSink committed a
    file in that directory (it commits when a checkpoint completes), so the restart restores a
    checkpoint on any machine, with checkpoint storage or without."""

    failed: set[str] = set()

    def __init__(self, name: str, poison: Any, committed_in: Path | None = None) -> None:
        self.name, self.poison, self.committed_in = name, poison, committed_in
        self.armed = False

    def map(self, value: Any) -> Any:
        self.armed = self.armed or value == self.poison
        if self.armed and self.name not in FailOnce.failed and self._checkpointed():
            FailOnce.failed.add(self.name)
            raise RuntimeError(f"injected failure at {value!r}")
        return value

    def _checkpointed(self) -> bool:
        return self.committed_in is None or committed_a_file(self.committed_in)


def running_sum_job(
    tmp_path: Path,
    data: list,
    *,
    fail_at: Any = None,
    storage: bool = True,
    unaligned: bool = False,
    parallelism: int = 2,
    interval_ms: int = 15,
    fail_after_checkpoint: bool = False,
) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(8)
    env.enable_checkpointing(interval_ms)
    if storage:
        env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    if unaligned:
        env.get_checkpoint_config().enable_unaligned_checkpoints()
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(3, 0))
    half = len(data) // 2

    def source(part: list) -> sf.DataStream:
        if fail_after_checkpoint:
            return env.from_async_iterable(held_until_committed(part, fail_at, tmp_path / "out"))
        return env.from_collection(part)

    # throttled sources (so checkpoints happen while they run); parallelism 1 before key_by
    # (no rebalancing), so each key keeps its order
    a = (
        source(data[:half])
        .uid("src-a")
        .map(slow, concurrency=1)
        .uid("slow-a")
        .set_parallelism(1)
    )
    b = (
        source(data[half:])
        .uid("src-b")
        .map(slow, concurrency=1)
        .uid("slow-b")
        .set_parallelism(1)
    )
    s = a.union(b)
    if fail_at is not None:
        after = tmp_path / "out" if fail_after_checkpoint else None
        s = s.map(FailOnce(str(tmp_path), fail_at, after)).uid("fail").set_parallelism(1)
    s.key_by(lambda r: r[0]).sum(1).uid("sum").sink_to(
        sf.FileSink.for_row_format(str(tmp_path / "out"), sf.Encoder.simple_string_encoder())
        .with_rolling_policy(sf.RollingPolicy.on_checkpoint_rolling_policy())  # a file per checkpoint
        .build()
    ).uid("sink")
    return env


# each key comes from one of the two sources, so its running sums do not depend on interleaving
DATA = [(f"{'a' if i < 300 else 'b'}{i % 5}", i) for i in range(600)]


def test_periodic_checkpoints_complete_and_output_is_committed(tmp_path: Path) -> None:
    result = running_sum_job(tmp_path, DATA).execute("sums")
    assert Counter(committed_lines(tmp_path / "out")) == expected_running_sums(DATA)
    assert result.metrics["checkpoints.numCompleted"] >= 2
    dirs = sorted((tmp_path / "chk").glob("chk-*"))
    assert 1 <= len(dirs) <= 3  # retention keeps the last three
    assert all((d / "_metadata").exists() for d in dirs)
    assert not [f for f in (tmp_path / "out").iterdir() if f.name.startswith(".")]  # nothing left pending


@pytest.mark.parametrize("storage", [True, False])
def test_failover_restores_from_last_checkpoint_exactly_once(tmp_path: Path, storage: bool) -> None:
    env = running_sum_job(tmp_path, DATA, fail_at=DATA[450], storage=storage, fail_after_checkpoint=True)
    result = env.execute("sums")
    assert result.metrics["job.numRestarts"] == 1
    assert result.metrics["job.restoredCheckpointId"] >= 1  # restored from a real checkpoint
    assert Counter(committed_lines(tmp_path / "out")) == expected_running_sums(DATA)


def test_unaligned_failover_is_exactly_once(tmp_path: Path) -> None:
    env = running_sum_job(tmp_path, DATA, fail_at=DATA[300], unaligned=True, fail_after_checkpoint=True)
    result = env.execute("sums")
    assert result.metrics["job.numRestarts"] == 1
    assert result.metrics["job.restoredCheckpointId"] >= 1
    assert Counter(committed_lines(tmp_path / "out")) == expected_running_sums(DATA)


def test_without_restarts_a_failure_fails_the_job(tmp_path: Path) -> None:
    env = running_sum_job(tmp_path, DATA, fail_at=DATA[100])
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    with pytest.raises(RuntimeError, match="injected failure"):
        env.execute("sums")


def test_failure_rate_restart_gives_up() -> None:
    strategy = sf.RestartStrategies.failure_rate_restart(2, 1_000, 0)
    assert [strategy.next_delay_ms(t) for t in (0, 10, 20, 2_000)] == [0, 0, None, 0]
    fixed = sf.RestartStrategies.fixed_delay_restart(1, 5)
    assert [fixed.next_delay_ms(0), fixed.next_delay_ms(0)] == [5, None]


class Gate:
    """Async source: yields the first ``stop`` records, then waits until released. ``reached``
    is set when the source asks for the record at ``stop``: it has every record before it, and a
    checkpoint or savepoint barrier triggered then goes out behind them (wait on it instead of
    a fixed sleep before a savepoint)."""

    def __init__(self, data: list, stop: int) -> None:
        self.data, self.stop = data, stop
        self.release = asyncio.Event()
        self.reached = asyncio.Event()

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for i, r in enumerate(self.data):
            if i == self.stop:
                self.reached.set()
                await self.release.wait()
            yield r


async def wait_until(cond: Any, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "condition not reached in time"
        await asyncio.sleep(0.002)


async def checkpoint_then_cancel(client: Any, ready: Callable[[], bool]) -> None:
    """Once ``ready()``, checkpoint the running job (its state is all there, unlike the final
    checkpoint of a finished job, FLIP-147), then cancel it."""
    while not ready():
        await asyncio.sleep(0.01)
    await client.trigger_checkpoint()
    await client.cancel()
    try:
        await client.get_job_execution_result()
    except BaseException:  # cancelled on purpose
        pass


@pytest.mark.parametrize("new_parallelism", [1, 2, 3])
async def test_savepoint_then_restore_with_other_parallelism(tmp_path: Path, new_parallelism: int) -> None:
    data = [(f"k{i % 7}", 1) for i in range(140)]
    gate = Gate(data, 70)
    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    out1: list = []
    env.from_async_iterable(gate.__aiter__).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(
        out1.append
    )
    client = await env.execute_async("sums")
    await wait_until(lambda: len(out1) == 70)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)
    assert (Path(path) / "_metadata").exists()

    env2 = sf.StreamExecutionEnvironment().set_parallelism(new_parallelism)
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    env2.from_collection(data).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(out2.append)
    await (await env2.execute_async("sums")).get_job_execution_result()
    assert len(out2) == 70  # the source resumed at record 70
    final = {k: v for k, v in out1 + out2}
    assert final == {f"k{i}": 20 for i in range(7)}  # state carried over, redistributed by key group


async def savepoint_of_sum_job(tmp_path: Path, key: Any = lambda r: r[0]) -> str:
    gate = Gate([("a", 1), ("b", 2), ("a", 3), ("a", 0)], 3)  # stays running after 3
    env = sf.StreamExecutionEnvironment()
    out: list = []
    env.from_async_iterable(gate.__aiter__).uid("src").key_by(key).sum(1).uid("sum").add_sink(out.append)
    client = await env.execute_async("sums")
    await wait_until(lambda: len(out) == 3)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)
    return path


async def test_a_savepoint_of_a_finished_job_fails_at_once(tmp_path: Path) -> None:
    """The job's checkpoint driver has stopped reading requests: asking it must not hang."""
    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(60_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    env.from_collection([("a", 1), ("b", 2)]).key_by(lambda r: r[0]).sum(1).add_sink(lambda r: None)
    client = await env.execute_async("bounded")
    await client.get_job_execution_result()
    with pytest.raises(CheckpointTriggerError, match="cannot trigger: the job's tasks have all finished"):
        await asyncio.wait_for(client.trigger_savepoint(str(tmp_path / "sp")), 10)
    assert not (tmp_path / "sp").exists()


async def test_restore_refuses_state_of_a_missing_uid_unless_allowed(tmp_path: Path) -> None:
    path = await savepoint_of_sum_job(tmp_path)

    def job(allow: bool) -> sf.StreamExecutionEnvironment:
        env = sf.StreamExecutionEnvironment()
        env.configure({"execution.savepoint.path": path, "execution.savepoint.ignore-unclaimed-state": allow})
        env.from_collection([("a", 1)]).uid("src").key_by(lambda r: r[0]).sum(1).uid("renamed").print()
        return env

    with pytest.raises(sf.StateMismatchError, match="'sum'"):
        await (await job(False).execute_async("sums")).get_job_execution_result()
    await (await job(True).execute_async("sums")).get_job_execution_result()


async def test_restore_refuses_a_changed_key_type_naming_the_operator(tmp_path: Path) -> None:
    path = await savepoint_of_sum_job(tmp_path)
    env = sf.StreamExecutionEnvironment()
    env.configure({"execution.savepoint.path": path})
    data = [("a", 1), ("b", 2), ("a", 3), (1, 5)]
    env.from_collection(data).uid("src").key_by(lambda r: len(str(r[0]))).sum(1).uid("sum").print()
    with pytest.raises(TypeError, match="restored with keys of type str") as info:
        await (await env.execute_async("sums")).get_job_execution_result()
    assert "Keyed Sum" in str(info.value)


async def test_window_and_timer_state_survive_a_savepoint(tmp_path: Path) -> None:
    from streamflow.windowing import TumblingEventTimeWindows

    data = [("k", 1, 1_000), ("k", 2, 2_000), ("k", 4, 3_000), ("k", 8, 12_000)]  # gate stops at 2
    strategy = sf.WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(lambda e: e[2])

    def build(env: sf.StreamExecutionEnvironment, src: sf.DataStream, out: list) -> None:
        src.uid("src").assign_timestamps_and_watermarks(strategy).uid("wm").key_by(lambda e: e[0]).window(
            TumblingEventTimeWindows.of(10_000)
        ).reduce(lambda a, b: (a[0], a[1] + b[1], b[2])).uid("win").add_sink(out.append)

    gate = Gate(data, 2)
    env = sf.StreamExecutionEnvironment()
    out1: list = []
    build(env, env.from_async_iterable(gate.__aiter__), out1)
    client = await env.execute_async("win")
    await wait_until(lambda: client.execution.tasks[0].records_out == 2)  # type: ignore[attr-defined]
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)
    assert out1 == []
    env2 = sf.StreamExecutionEnvironment()
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    build(env2, env2.from_collection(data), out2)
    await (await env2.execute_async("win")).get_job_execution_result()
    assert out2 == [("k", 7, 3_000), ("k", 8, 12_000)]


def checkpoint_channel_state(directory: Path) -> int:
    """How many batches of in-flight data the retained checkpoints hold."""
    storage = FileSystemCheckpointStorage(directory)
    total = 0
    for handle in storage.complete_checkpoints():
        restored = RestoredCheckpoint.load(handle, sf.CheckpointConfig().codec)
        for state in restored.channels.values():
            total += sum(len(b) for b in state["in"].values())
            total += sum(len(b) for chs in state["out"].values() for b in chs.values())
    return total


class SlowSink(sf.Sink):
    """Slow, and shared by all subtasks (a SinkFunction object would be copied per subtask)."""

    def __init__(self) -> None:
        self.seen: list = []

    def create_operator(self, name: str) -> Any:
        from streamflow.runtime.operator import StreamOperator

        seen = self.seen

        class Slow(StreamOperator):
            async def process_batch(self, records: list, timestamps: Any) -> None:
                await asyncio.sleep(0.004)
                seen.extend(records)

        return Slow(name)


@pytest.mark.parametrize("mode", ["unaligned", "alternating"])
def test_backpressure_checkpoints_store_in_flight_data(tmp_path: Path, mode: str) -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(2).set_batch_size(16).set_channel_capacity(64)
    env.enable_checkpointing(10)
    cfg = (
        env.get_checkpoint_config()
        .set_checkpoint_storage_dir(tmp_path / "chk")
        .set_max_retained_checkpoints(50)
    )
    cfg.enable_unaligned_checkpoints()
    if mode == "alternating":
        cfg.set_aligned_checkpoint_timeout(1)
    data = [(f"k{i % 10}", 1) for i in range(3_000)]
    sink = SlowSink()
    a, b = env.from_collection(data[:1500]), env.from_collection(data[1500:])
    a.union(b).key_by(lambda r: r[0]).sum(1).sink_to(sink).disable_chaining()
    result = env.execute("backpressure")
    assert result.metrics["checkpoints.numCompleted"] >= 2
    assert checkpoint_channel_state(tmp_path / "chk") > 0
    assert {k: v for k, v in sink.seen} == {f"k{i}": 300 for i in range(10)}


class Point:
    def __init__(self, x: int) -> None:
        self.x = x


class KeepPoints(sf.KeyedProcessFunction):
    def open(self, ctx: sf.RuntimeContext) -> None:
        self.last = ctx.get_state(sf.ValueStateDescriptor("last"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.last.update(Point(value[1]))
        yield value


async def test_state_codec_refuses_arbitrary_objects_unless_pickle_is_opted_in(tmp_path: Path) -> None:
    async def run(codec: Any) -> Any:
        gate = Gate([("a", 1), ("a", 2), ("a", 3)], 2)
        env = sf.StreamExecutionEnvironment()
        if codec is not None:
            env.get_checkpoint_config().set_state_codec(codec)
        out: list = []
        env.from_async_iterable(gate.__aiter__).key_by(lambda r: r[0]).process(KeepPoints()).add_sink(
            out.append
        )
        client = await env.execute_async("points")
        await wait_until(lambda: len(out) == 2)
        try:
            return await client.trigger_savepoint(str(tmp_path / f"sp-{codec is not None}"))
        finally:
            await asyncio.wait_for(client.cancel(), 30)

    with pytest.raises(RuntimeError, match="PickleCodec") as info:
        await run(None)
    assert isinstance(info.value.__cause__, TypeError)
    path = await run(sf.PickleCodec())
    assert (Path(path) / "_metadata").exists()
    env = sf.StreamExecutionEnvironment()  # a pickled savepoint is refused without the opt-in
    env.configure({"execution.savepoint.path": path})
    env.from_collection([("a", 1)]).key_by(lambda r: r[0]).process(KeepPoints()).print()
    with pytest.raises(sf.StateMismatchError, match="pickle"):
        await (await env.execute_async("points")).get_job_execution_result()


def test_in_flight_channel_state_without_a_layout_is_not_rescaled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Channel state written before entries named their channels (no ``layout``) restores at
    the parallelism it was taken with, and is refused at another: it cannot be redistributed
    (tests/test_unaligned_rescale_flink.py: with a layout it is)."""
    env = sf.StreamExecutionEnvironment().set_parallelism(2).set_batch_size(16).set_channel_capacity(64)
    env.enable_checkpointing(10)
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    cfg.set_max_retained_checkpoints(50).enable_unaligned_checkpoints()
    data = [(f"k{i % 10}", 1) for i in range(3_000)]
    a, b = env.from_collection(data[:1500]).uid("a"), env.from_collection(data[1500:]).uid("b")
    a.union(b).key_by(lambda r: r[0]).sum(1).uid("sum").sink_to(SlowSink()).uid("sink").disable_chaining()
    env.execute("backpressure")
    storage = FileSystemCheckpointStorage(tmp_path / "chk")
    with_state = [
        h
        for h in storage.complete_checkpoints()
        if any(t.startswith("sum#") for t in RestoredCheckpoint.load(h, sf.CheckpointConfig().codec).channels)
    ]
    assert with_state
    loaded = RestoredCheckpoint.from_entries

    def without_layout(*args: Any, **kwargs: Any) -> RestoredCheckpoint:
        restored = loaded(*args, **kwargs)
        for state in restored.channels.values():
            assert state["layout"], "a new checkpoint names its channels"
            state["layout"] = None
        return restored

    monkeypatch.setattr(RestoredCheckpoint, "from_entries", staticmethod(without_layout))
    for parallelism in (2, 3):
        env2 = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
        env2.configure({"execution.savepoint.path": str(with_state[0].path)})
        a, b = env2.from_collection(data[:1500]).uid("a"), env2.from_collection(data[1500:]).uid("b")
        sink = SlowSink()
        a.union(b).key_by(lambda r: r[0]).sum(1).uid("sum").sink_to(sink).uid("sink").disable_chaining()
        if parallelism == 2:
            env2.execute("backpressure")
            assert {r[0]: r[1] for r in sink.seen} == {f"k{i}": 300 for i in range(10)}
        else:
            with pytest.raises(sf.StateMismatchError, match="without its channel layout"):
                env2.execute("backpressure")


@pytest.mark.parametrize("mode", [sf.CheckpointingMode.EXACTLY_ONCE, sf.CheckpointingMode.AT_LEAST_ONCE])
def test_at_least_once_never_blocks_a_channel(tmp_path: Path, mode: sf.CheckpointingMode) -> None:
    from streamflow.runtime.channel import InputGate
    from streamflow.runtime.events import EndOfInput
    from streamflow.runtime.task import InputTask

    # the failure waits for a completed checkpoint (on a loaded machine none may complete by 450)
    env = running_sum_job(tmp_path, DATA, fail_at=DATA[300], interval_ms=10, fail_after_checkpoint=True)
    env.get_checkpoint_config().set_checkpointing_mode(mode)
    pauses, ends = [0], [0]
    pause, on_event = InputGate.pause, InputTask._on_event

    def spy_pause(self: InputGate, index: int) -> None:
        pauses[0] += 1
        pause(self, index)

    async def spy_event(self: InputTask, channel: int, event: Any) -> None:
        ends[0] += type(event) is EndOfInput
        await on_event(self, channel, event)

    InputGate.pause, InputTask._on_event = spy_pause, spy_event  # type: ignore[method-assign]
    try:
        result = env.execute("sums")
    finally:
        InputGate.pause, InputTask._on_event = pause, on_event  # type: ignore[method-assign]
    assert result.metrics["job.restoredCheckpointId"] >= 1
    lines, expected = Counter(committed_lines(tmp_path / "out")), expected_running_sums(DATA)
    if mode is sf.CheckpointingMode.EXACTLY_ONCE:
        assert pauses[0] > ends[0]  # barriers paused channels (alignment)
        assert lines == expected
    else:
        assert pauses[0] == ends[0]  # only ended channels are paused, never by a barrier
        # every record counted at least once: records after a barrier may be in the restored sums
        # and are counted again on replay (Flink's at-least-once), so a key's sums can only be higher
        totals: dict[str, int] = {}
        for key, value in DATA:
            totals[key] = totals.get(key, 0) + value
        highest: dict[str, int] = {}
        for line in lines:
            key, value = ast.literal_eval(line)
            highest[key] = max(highest.get(key, 0), value)
        assert highest.keys() == totals.keys()
        assert all(highest[k] >= totals[k] for k in totals), (highest, totals)
    with (
        pytest.raises(ValueError, match="EXACTLY_ONCE")
        if mode is not sf.CheckpointingMode.EXACTLY_ONCE
        else _ok()
    ):
        env.get_checkpoint_config().enable_unaligned_checkpoints()


class _ok:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None
