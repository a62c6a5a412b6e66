"""Async I/O's in-flight requests are part of the checkpoint (Flink's AsyncWaitOperator):
a checkpoint does not wait for slow calls, and a restore re-issues the requests it holds."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

import streamflow as sf
from streamflow.common import Time, Types
from streamflow.datastream import AsyncDataStream, AsyncFunction
from streamflow.testing import ListSink


def _checkpoint_completed(chk: Path) -> bool:
    indexes = chk.glob("_completed-*.json")
    return any(orjson.loads(p.read_bytes()).get("latest", 0) >= 1 for p in indexes)


def _committed(directory: Path) -> list[str]:
    out: list[str] = []
    for f in sorted(directory.iterdir()):
        if f.is_file() and not f.name.startswith("."):
            out.extend(f.read_text().splitlines())
    return out


async def _throttle(value: int) -> int:
    await asyncio.sleep(0.003)
    return value


class SlowLookup(AsyncFunction):
    """Every 25th call takes 0.2 s (ten checkpoint intervals; was 0.4 s), the others 1 ms."""

    async def async_invoke(self, value: int) -> list[int]:
        await asyncio.sleep(0.2 if value % 25 == 0 else 0.001)
        return [value * 10]


class FailOnceAfterCheckpoint(sf.MapFunction):
    failed: set[str] = set()

    def __init__(self, name: str, poison: int, chk: Path) -> None:
        self.name, self.poison, self.chk, self.armed = name, poison, chk, False

    def map(self, value: int) -> int:
        self.armed = self.armed or value >= self.poison
        if self.armed and self.name not in self.failed and _checkpoint_completed(self.chk):
            self.failed.add(self.name)
            raise RuntimeError(f"injected failure at {value!r}")
        return value


async def _slow_map(value: int) -> int:
    """An ``async def`` map as slow as SlowLookup: it runs on the same operator."""
    await asyncio.sleep(0.2 if value % 25 == 0 else 0.001)
    return value * 10


def throttled_job(tmp_path: Path) -> tuple[sf.StreamExecutionEnvironment, sf.DataStream]:
    """A job checkpointing every 20 ms into ``tmp_path/chk`` that restarts after a failure, and
    its source: 0..299, slowed down so that checkpoints come between its records."""
    env = sf.StreamExecutionEnvironment().set_parallelism(1).set_batch_size(8)
    env.enable_checkpointing(20)
    env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(3, 0))
    return env, env.from_collection(list(range(300))).uid("src").map(_throttle, concurrency=1).uid("throttle")


def run_failing_once(env: sf.StreamExecutionEnvironment, results: sf.DataStream, tmp_path: Path) -> None:
    """Fail the job once after a checkpoint; its file sink holds every result exactly once."""
    chk, out = tmp_path / "chk", tmp_path / "out"
    results.map(FailOnceAfterCheckpoint(str(tmp_path), 1500, chk)).uid("fail").sink_to(
        sf.FileSink.for_row_format(str(out), sf.Encoder.simple_string_encoder()).build()
    ).uid("sink")
    result = env.execute("async-restore")
    assert str(tmp_path) in FailOnceAfterCheckpoint.failed  # the job failed once and was restored
    assert Counter(_committed(out)) == Counter(str(v * 10) for v in range(300))  # exactly once
    assert result.metrics["checkpoints.numCompleted"] >= 2


@pytest.mark.parametrize("ordered", [True, False, "async map"], ids=["ordered", "unordered", "async-map"])
def test_restore_reissues_in_flight_requests_exactly_once(
    tmp_path: Path, ordered: bool | str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="streamflow.runtime.async_wait")
    env, source = throttled_job(tmp_path)
    if ordered == "async map":  # an async def map shares the AsyncWaitOperator (runtime/async_functions.py)
        results = source.map(_slow_map, output_type=Types.INT(), concurrency=20).uid("lookup")
    else:
        wait = AsyncDataStream.ordered_wait if ordered else AsyncDataStream.unordered_wait
        results = wait(source, SlowLookup(), Time.seconds(30), capacity=20, output_type=Types.INT()).uid(
            "lookup"
        )
    run_failing_once(env, results, tmp_path)
    reissued = [r.getMessage() for r in caplog.records if "re-issuing" in r.getMessage()]
    assert reissued  # the checkpoint restored held requests in flight


class BlockedUntilCheckpoint(AsyncFunction):
    """The call for 0 blocks until a checkpoint has completed (gives up after 10 s)."""

    def __init__(self, chk: str) -> None:
        self.chk = chk

    async def async_invoke(self, value: int) -> list[int]:
        if value == 0:
            deadline = time.monotonic() + 10
            while not _checkpoint_completed(Path(self.chk)):
                if time.monotonic() > deadline:
                    raise AssertionError("no checkpoint completed while the call was blocked")
                await asyncio.sleep(0.01)
        return [value]


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
def test_a_checkpoint_completes_while_a_call_is_blocked(tmp_path: Path, ordered: bool) -> None:
    chk = tmp_path / "chk"
    env = sf.StreamExecutionEnvironment().set_parallelism(1).set_batch_size(8)
    env.enable_checkpointing(20)
    env.get_checkpoint_config().set_checkpoint_storage_dir(chk)
    sink = ListSink()
    source = env.from_collection(list(range(40))).map(_throttle, concurrency=1)
    wait = AsyncDataStream.ordered_wait if ordered else AsyncDataStream.unordered_wait
    wait(source, BlockedUntilCheckpoint(str(chk)), Time.seconds(30), capacity=100).sink_to(sink)
    result = env.execute()
    assert sorted(sink.results) == list(range(40))
    if ordered:
        assert sink.results == list(range(40))
    assert result.metrics["checkpoints.numCompleted"] >= 1
