"""Timers in incremental checkpoints (runtime/timer_checkpoints.py).

End to end through the public API: a KeyedProcessFunction with event-time timers (set,
deleted, set again from on_timer) and a general-path window (a ProcessWindowFunction under a
custom trigger with an early timer) are checkpointed at chosen points (a base, then deltas,
then a new base: max_chain=2), cancelled (the failure), and restored from the chain at the same
or another parallelism: what the two runs emit together is exactly what one run emits, so
every timer fired exactly once. Then table tests of the pure pieces: the plain form of a timer,
the capture (deltas hold what changed; no timer, no file) and the chain read (registration
order, key groups)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_window_incremental import EveryRecord, Gates, wait_until

import streamflow as sf
from streamflow.checkpoint.storage import FileSystemCheckpointStorage
from streamflow.common import Time
from streamflow.runtime.timer_checkpoints import TimerCheckpoints, from_plain, plain_form, read_chains
from streamflow.runtime.timers import TimerService
from streamflow.state.codec import MsgpackCodec
from streamflow.state.incremental import HeapChain
from streamflow.state.key_groups import key_group_of
from streamflow.state.keyed import IncrementalSettings
from streamflow.windowing import SlidingEventTimeWindows, TimeWindow, Trigger, TriggerResult

KEYS = 30
N = 1_500
STOPS = [150, 400, 650, 900, 1_150]  # a checkpoint at each: base, deltas, base, delta
DATA = [(f"k{i % KEYS}", i) for i in range(N)]
SEEN: list[int] = []


def seen(r: tuple[str, int]) -> tuple[str, int]:
    SEEN.append(r[1])
    return r


class Timers(sf.KeyedProcessFunction):
    """Per record (ts = 2i): a timer at ts + 25 that emits what was stored for it, and every
    4th record of a key a timer at ts + 500 that the key's next record deletes (it fires only
    when no record follows); a timer at 4n + 1 sets one more, 3 ms later (set while firing).
    Every output depends on the data alone, not on when watermarks arrive (the records of
    a key arrive in order: one subtask assigns timestamps)."""

    def open(self, ctx: Any) -> None:
        self.due = ctx.get_map_state(sf.MapStateDescriptor("due"))
        self.doomed = ctx.get_state(sf.ValueStateDescriptor("doomed"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        timers, ts = ctx.timer_service(), ctx.timestamp()
        doomed = self.doomed.value()
        if doomed is not None:
            timers.delete_event_time_timer(doomed)
            self.due.remove(doomed)
            self.doomed.clear()
        timers.register_event_time_timer(ts + 25)
        self.due.put(ts + 25, ("rec", value[1]))
        if value[1] % (4 * KEYS) < KEYS:
            timers.register_event_time_timer(ts + 500)
            self.due.put(ts + 500, ("doomed", value[1]))
            self.doomed.update(ts + 500)
        return ()

    def on_timer(self, ts: int, ctx: Any) -> Any:
        what = self.due.get(ts)
        self.due.remove(ts)
        if ts % 4 == 1:
            ctx.timer_service().register_event_time_timer(ts + 3)
            self.due.put(ts + 3, ("echo", what[1]))
        yield (ctx.get_current_key(), ts, *what)


class FarTimers(Timers):
    """Timers, and a timer per key at the end of time set by the key's first record: many
    live timers, few changes between two checkpoints (deltas, not bases)."""

    def open(self, ctx: Any) -> None:
        super().open(ctx)
        self.seen = ctx.get_state(sf.ValueStateDescriptor("seen"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        if self.seen.value() is None:
            self.seen.update(True)
            ctx.timer_service().register_event_time_timer(10**9)
            self.due.put(10**9, ("far", value[1]))
        return super().process_element(value, ctx)


class EarlyAndEnd(Trigger):
    """Fires a window at max_timestamp - 1 (an extra timer; no element of this job lies
    between it and the end, so it sees every element) and at its end (purging)."""

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        ctx.register_event_time_timer(window.max_timestamp() - 1)
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if time == window.max_timestamp() else TriggerResult.FIRE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_merge(self, window: Any, ctx: Any) -> None:
        pass

    def clear(self, window: Any, ctx: Any) -> None:
        ctx.delete_event_time_timer(window.max_timestamp() - 1)
        ctx.delete_event_time_timer(window.max_timestamp())


class Describe(sf.ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        values = sorted(v for _k, v in elements)
        yield (key, context.window().start, context.window().end, len(values), sum(values))


MANY = [(f"k{i % 3_000}", i) for i in range(4_000)]


def pipeline(source: Any, kind: str, out: list) -> None:
    ws = sf.WatermarkStrategy.for_generator(EveryRecord).with_timestamp_assigner(lambda r, _ts: r[1] * 2)
    keyed = (
        source.uid("src").map(seen).uid("seen").set_parallelism(1)
        .assign_timestamps_and_watermarks(ws).uid("wm").set_parallelism(1)
        .key_by(lambda r: r[0])
    )  # fmt: skip
    if kind in ("process", "far"):
        keyed.process(Timers() if kind == "process" else FarTimers()).uid("op").add_sink(out.append)
    else:
        windows = SlidingEventTimeWindows.of(Time.milliseconds(120), Time.milliseconds(40))
        keyed.window(windows).trigger(EarlyAndEnd()).process(Describe()).uid("op").add_sink(out.append)


def env_for(tmp_path: Path, parallelism: int, max_chain: int = 2) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    env.enable_checkpointing(3_600_000)  # only the checkpoints the test triggers
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    cfg.set_max_retained_checkpoints(2).enable_incremental_checkpoints(True, max_chain=max_chain)
    return env


async def reference(kind: str) -> Counter:
    env = sf.StreamExecutionEnvironment().set_parallelism(1)
    out: list = []
    pipeline(env.from_collection(DATA), kind, out)
    await (await env.execute_async("ref")).get_job_execution_result()
    return Counter(out)


async def checkpointed_run(tmp_path: Path, kind: str, parallelism: int) -> tuple[list, set[str]]:
    """Runs to the last stop with a checkpoint at each, then cancels; returns the output and
    the timer files written (every checkpoint's)."""
    env = env_for(tmp_path, parallelism)
    gates, out = Gates(STOPS, DATA), []
    pipeline(env.from_async_iterable(gates.__aiter__), kind, out)
    client = await env.execute_async("timers")
    SEEN.clear()
    files: set[str] = set()
    for stop in STOPS:
        await wait_until(lambda stop=stop: gates.at == stop and len(SEEN) == stop)  # type: ignore[misc]
        await client.trigger_checkpoint()
        files |= set(timer_files(tmp_path))
        if stop != STOPS[-1]:
            gates.release()
    await asyncio.wait_for(client.cancel(), 30)
    return out, files


def timer_files(tmp_path: Path) -> dict[str, int]:
    """The timer files of operator "op" in the shared directory now (sizes by name)."""
    prefixes = tuple(HeapChain(f"op#{sub}#timers", 1).prefix for sub in range(4))
    shared = FileSystemCheckpointStorage(tmp_path / "chk").shared_dir("timers")
    return {p.name: p.stat().st_size for p in shared.iterdir() if p.name.startswith(prefixes)}


async def restored_run(tmp_path: Path, kind: str, parallelism: int) -> list:
    env = env_for(tmp_path, parallelism)
    out: list = []
    pipeline(env.from_async_iterable(Gates([], DATA).__aiter__), kind, out)
    await (await env.execute_async("timers")).get_job_execution_result()
    return out


@pytest.mark.parametrize("kind", ["process", "window"])
@pytest.mark.parametrize(("before", "after"), [(1, 1), (4, 4), (1, 4), (4, 2)])
async def test_timers_restored_from_a_chain_fire_exactly_once(
    tmp_path: Path, kind: str, before: int, after: int
) -> None:
    first, files = await checkpointed_run(tmp_path, kind, before)
    assert any("-delta-" in f for f in files) and any("-base-" in f for f in files), files
    second = await restored_run(tmp_path, kind, after)
    assert second, "the restored run emitted nothing: the test would not see lost timers"
    assert Counter(first) + Counter(second) == await reference(kind)


async def test_a_savepoint_between_incremental_checkpoints(tmp_path: Path) -> None:
    """A savepoint between incremental checkpoints (a delta whose chain the storage copies)
    restores exactly, at another parallelism; and it moves nothing: the checkpoints after it
    still hold every change since the checkpoint before it (3,000 live timers, about 250
    changes between two checkpoints: every checkpoint after the first is a delta)."""
    stops = [3_000, 3_100, 3_200, 3_300, 3_400]
    env = env_for(tmp_path, 2, max_chain=8)
    gates, out = Gates(stops, MANY), []
    pipeline(env.from_async_iterable(gates.__aiter__), "far", out)
    client = await env.execute_async("timers")
    SEEN.clear()
    savepoint, at_savepoint = "", []
    for n, stop in enumerate(stops):
        await wait_until(lambda stop=stop: gates.at == stop and len(SEEN) == stop)  # type: ignore[misc]
        if n == 2:
            savepoint, at_savepoint = await client.trigger_savepoint(str(tmp_path / "sp")), list(out)
        else:
            await client.trigger_checkpoint()
        if stop != stops[-1]:
            gates.release()
    await asyncio.wait_for(client.cancel(), 30)
    files = timer_files(tmp_path)
    assert sum("-delta-" in f for f in files) >= 4, files  # two subtasks, each ending in deltas
    ref_env = sf.StreamExecutionEnvironment().set_parallelism(1)
    reference_out: list = []
    pipeline(ref_env.from_collection(MANY), "far", reference_out)
    await (await ref_env.execute_async("ref")).get_job_execution_result()
    expected = Counter(reference_out)
    for directory, restore_from, before in (
        (tmp_path, None, out),
        (tmp_path / "sp-run", savepoint, at_savepoint),
    ):
        env2 = env_for(directory, 3, max_chain=8)
        if restore_from is not None:
            env2.configure({"execution.savepoint.path": restore_from})
        second: list = []
        pipeline(env2.from_async_iterable(Gates([], MANY).__aiter__), "far", second)
        await (await env2.execute_async("timers")).get_job_execution_result()
        assert Counter(before) + Counter(second) == expected, restore_from


# ------------------------------------------------------------------ table tests


def encode(ns: Any) -> Any:
    if isinstance(ns, TimeWindow):
        return ("w", ns.start, ns.end)
    return ns  # anything else as it is (wrapped by the plain form)


def decode(plain: Any) -> Any:
    if type(plain) is tuple and plain and plain[0] == "w":
        return TimeWindow(plain[1], plain[2])
    return plain


@pytest.mark.parametrize(
    ("timer", "plain"),
    [
        ((5, "k", None), (5, "k", None)),
        ((5, ("a", 1), None), (5, ("a", 1), None)),
        ((5, "k", TimeWindow(0, 10)), (5, "k", "w", 0, 10)),
        ((5, 7, "ns"), (5, 7, "=", "ns")),  # not a tuple: wrapped
        ((5, 7, ("=", 1)), (5, 7, "=", ("=", 1))),  # a tuple starting with the wrap mark
        ((5, 7, (None, 1)), (5, 7, "=", (None, 1))),  # a tuple starting with None
        ((5, 7, ()), (5, 7, "=", ())),  # the empty tuple
        ((5, 7, ("x",)), (5, 7, "x")),
    ],
)
def test_plain_form_round_trips(timer: tuple, plain: tuple) -> None:
    assert plain_form(encode)(timer) == plain
    assert from_plain(plain, decode) == timer
    assert from_plain(list(plain), decode) == timer  # a decoder that gives lists


def test_a_plain_form_without_namespace_parts_is_refused() -> None:
    with pytest.raises(ValueError, match="not a timer"):
        from_plain((5, "k"), decode)


MAXP = 128
CODEC = MsgpackCodec()


async def captured(ck: TimerCheckpoints, cid: int, files: dict[str, bytes]) -> dict[str, Any] | None:
    upload = await ck.capture(cid, False)
    if upload is not None:
        files.update(await upload.produce())
    desc = ck.snapshot()
    ck.confirm(cid)
    return desc


def service(encode_ns: Any = None) -> tuple[TimerService, TimerCheckpoints]:
    timers = TimerService()
    settings = IncrementalSettings("op#0", range(MAXP), CODEC, max_chain=4)
    return timers, TimerCheckpoints(timers, settings, encode_ns)


async def test_deltas_hold_what_changed_and_restore_in_registration_order() -> None:
    timers, ck = service(encode)
    files: dict[str, bytes] = {}
    for i in range(3_000):  # equal timestamps: the order of registration decides
        timers.register_event_time_timer(f"k{i}", TimeWindow(0, 10), 100)
    timers.register_processing_time_timer("p", None, 7)
    first = await captured(ck, 1, files)
    assert first is not None and len(first["chain"]) == 1 and "-base-" in first["chain"][0]
    timers.delete_event_time_timer("k0", TimeWindow(0, 10), 100)
    timers.register_event_time_timer("k0", TimeWindow(0, 10), 100)  # again: now the last
    timers.register_event_time_timer("k5", None, 50)
    assert timers.pop_event_timer(60) is not None  # k5's fires: gone
    second = await captured(ck, 2, files)
    assert second is not None and second["chain"][0] == first["chain"][0] and len(second["chain"]) == 2
    base, delta = (len(files[n]) for n in second["chain"])
    assert delta < base / 50, (base, delta)
    plain = read_chains([second], files.__getitem__, CODEC, range(MAXP), MAXP)
    restored = TimerService()
    restored.restore({d: [from_plain(p, decode) for p in ts] for d, ts in plain.items()})
    assert restored.snapshot() == timers.snapshot()
    keys = [t.key for t in restored.advance_watermark(100)]
    assert keys == [f"k{i}" for i in range(1, 3_000)] + ["k0"]
    assert restored.advance_processing_time(7)[0].key == "p"


async def test_rescaling_reads_the_key_groups_it_owns() -> None:
    timers, ck = service()
    files: dict[str, bytes] = {}
    for i in range(500):
        timers.register_event_time_timer(i, None, i % 17)
    desc = await captured(ck, 1, files)
    assert desc is not None
    halves = [range(0, MAXP // 2), range(MAXP // 2, MAXP)]
    parts = [read_chains([desc], files.__getitem__, CODEC, g, MAXP)["event_time"] for g in halves]
    for part, groups in zip(parts, halves, strict=True):
        assert part and all(key_group_of(t[1], MAXP) in groups for t in part)
    assert sorted(parts[0] + parts[1]) == sorted((i % 17, i, None) for i in range(500))


async def test_no_timer_no_file_and_the_next_checkpoint_is_a_base() -> None:
    timers, ck = service()
    files: dict[str, bytes] = {}
    timers.register_event_time_timer("a", None, 1)
    assert await captured(ck, 1, files) is not None
    timers.advance_watermark(5)  # fired: none left
    assert await captured(ck, 2, files) is None and len(files) == 1
    timers.register_event_time_timer("b", None, 9)
    third = await captured(ck, 3, files)
    assert third is not None and len(third["chain"]) == 1 and "-base-" in third["chain"][0]
    assert read_chains([third], files.__getitem__, CODEC, range(MAXP), MAXP)["event_time"] == [(9, "b", None)]


async def test_a_chain_of_max_chain_deltas_materialises() -> None:
    timers, ck = service()
    files: dict[str, bytes] = {}
    chains = []
    for cid in range(1, 9):
        timers.register_event_time_timer(cid, None, cid)
        desc = await captured(ck, cid, files)
        assert desc is not None
        chains.append(desc["chain"])
    assert max(map(len, chains)) <= 5 and sum(len(c) == 1 for c in chains) >= 2, chains
    plain = read_chains([{"chain": chains[-1]}], files.__getitem__, CODEC, range(MAXP), MAXP)
    assert plain["event_time"] == [(cid, cid, None) for cid in range(1, 9)]


def test_a_damaged_timer_file_names_itself() -> None:
    from streamflow.checkpoint._fs import CorruptCheckpointError

    with pytest.raises(CorruptCheckpointError, match="timer file 'x'"):
        read_chains([{"chain": ["x"]}], {"x": b"\x93garbage"}.__getitem__, CODEC, range(MAXP), MAXP)
