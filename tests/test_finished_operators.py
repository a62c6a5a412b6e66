"""Checkpoints with finished operators (FLIP-147, issue 12 item 1): a finished task's final
state holds no keyed state and names its operators finished; a restore deploys them finished
(they run nothing, a finished source is never replayed, sinks still commit), an operator that
finished on every subtask stays finished at another parallelism, and a partly finished one
resumes exactly once."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.checkpoint.restore import RestoredCheckpoint
from streamflow.checkpoint.storage import FileSystemCheckpointStorage
from streamflow.connectors.collection import CollectionSource, _IterableReader
from streamflow.state.codec import MsgpackCodec

JOB = "flip147"


def sink(tmp_path: Path) -> Any:
    return sf.FileSink.for_row_format(str(tmp_path / "out"), sf.Encoder.simple_string_encoder()).build()


def committed(tmp_path: Path) -> Counter[str]:
    out: Counter[str] = Counter()
    for f in sorted((tmp_path / "out").iterdir()):
        if f.is_file() and not f.name.startswith("."):
            out.update(f.read_text().splitlines())
    return out


def latest(tmp_path: Path) -> RestoredCheckpoint | None:
    handle = FileSystemCheckpointStorage(tmp_path / "chk").restore_point(JOB)
    return None if handle is None else RestoredCheckpoint.load(handle, MsgpackCodec())


# ---------------------------------------------------------------- a job that ran to its end

DATA = [(f"k{i % 5}", i) for i in range(200)]


def sums_job(tmp_path: Path, parallelism: int = 2) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(8)
    env.enable_checkpointing(20)
    env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    env.from_collection(DATA).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").sink_to(sink(tmp_path)).uid(
        "sink"
    )
    return env


def expected_sums() -> Counter[str]:
    acc: dict[str, int] = {}
    out: Counter[str] = Counter()
    for k, v in DATA:
        acc[k] = acc.get(k, 0) + v
        out[str((k, acc[k]))] += 1
    return out


def test_final_checkpoint_marks_every_operator_finished_and_holds_no_keyed_state(tmp_path: Path) -> None:
    sums_job(tmp_path).execute(JOB)
    assert committed(tmp_path) == expected_sums()
    r = latest(tmp_path)
    assert r is not None
    assert {uid: sorted(subs) for uid, subs in r.finished.items() if uid in ("src", "sum", "sink")} == {
        "src": [0], "sum": [0, 1], "sink": [0, 1],
    }  # fmt: skip
    assert all(r.fully_finished(uid) for uid in ("src", "sum", "sink"))
    assert "sum" not in r.ops, "a finished keyed operator's state is not kept"
    assert r.ops["src"][0] == {"position": len(DATA)}  # operator state stays (sources, sinks)


def test_restore_of_a_finished_job_runs_nothing_and_duplicates_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sums_job(tmp_path).execute(JOB)
    before = committed(tmp_path)
    with caplog.at_level(logging.INFO, logger="streamflow.task"):
        result = sums_job(tmp_path).execute(JOB)
    assert committed(tmp_path) == before == expected_sums()
    stayed = [r for r in caplog.records if "it stays finished" in r.getMessage()]
    assert len(stayed) == 3  # src (1 subtask), sum -> sink (2, chained)
    assert result.metrics.get("job.restoredCheckpointId", 0) > 0
    r = latest(tmp_path)
    assert r is not None and r.fully_finished("sum") and "sum" not in r.ops


def test_rescale_of_fully_finished_operators(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The source's position is non-keyed state of one subtask: a running source could not be
    rescaled, a fully finished one stays finished at any parallelism (Flink's
    FullyFinishedOperatorState)."""
    sums_job(tmp_path, parallelism=2).execute(JOB)
    before = committed(tmp_path)
    with caplog.at_level(logging.INFO, logger="streamflow.task"):
        sums_job(tmp_path, parallelism=3).execute(JOB)
    assert committed(tmp_path) == before == expected_sums()
    assert len([r for r in caplog.records if "it stays finished" in r.getMessage()]) == 4


# ---------------------------------------------------------------- a partly finished source

SHORT, LONG = 6, 240


class Uneven(CollectionSource):
    """Subtask 0 emits SHORT records and finishes at once; subtask 1 emits LONG slowly."""

    supports_parallelism = True

    def __init__(self) -> None:
        super().__init__(list)

    def create_reader(self, subtask_index: int, parallelism: int) -> Any:
        n = SHORT if subtask_index == 0 else LONG
        return _IterableReader(lambda: [(f"s{subtask_index}-{i % 7}", i) for i in range(n)])


async def slow(record: tuple[str, int]) -> tuple[str, int]:
    if record[0].startswith("s1"):
        await asyncio.sleep(0.003)
    return record


def uneven_job(tmp_path: Path) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(2).set_batch_size(4).set_channel_capacity(4)
    env.enable_checkpointing(20)
    env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    env.from_source(Uneven(), source_name="uneven").uid("src").map(slow, concurrency=1).uid("slow").key_by(
        lambda r: r[0]
    ).sum(1).uid("sum").sink_to(sink(tmp_path)).uid("sink")
    return env


def uneven_expected() -> Counter[str]:
    out: Counter[str] = Counter()
    for sub, n in ((0, SHORT), (1, LONG)):
        acc: dict[str, int] = {}
        for i in range(n):
            k = f"s{sub}-{i % 7}"
            acc[k] = acc.get(k, 0) + i
            out[str((k, acc[k]))] += 1
    return out


async def run_until_partly_finished(tmp_path: Path) -> None:
    """Cancel the job once a completed checkpoint holds source subtask 0 finished and
    subtask 1 still running."""
    client = await uneven_job(tmp_path).execute_async(JOB)
    try:
        for _ in range(2_000):
            await asyncio.sleep(0.005)
            r = latest(tmp_path)
            if r is not None and 0 in r.finished.get("src", ()) and not r.fully_finished("src"):
                return
        pytest.fail("no checkpoint with a partly finished source")
    finally:
        await client.cancel()
        try:
            await client.get_job_execution_result()
        except BaseException:  # cancelled on purpose
            pass


def test_partly_finished_source_is_not_replayed_and_the_rest_resumes_exactly_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asyncio.run(run_until_partly_finished(tmp_path))
    r = latest(tmp_path)
    assert r is not None and r.finished["src"] == {0} and r.ops["src"][1]["position"] < LONG
    with caplog.at_level(logging.INFO, logger="streamflow.task"):
        uneven_job(tmp_path).execute(JOB)
    assert committed(tmp_path) == uneven_expected()
    stayed = [rec.getMessage() for rec in caplog.records if "it stays finished" in rec.getMessage()]
    assert len(stayed) == 1 and "(1/2)" in stayed[0], stayed  # source subtask 0 (chained with its map)


# ---------------------------------------------------------------- without periodic checkpoints


def test_a_savepoint_without_checkpointing_marks_a_finished_source_finished(tmp_path: Path) -> None:
    """No ``enable_checkpointing``: one source ends, the other still runs, a savepoint is taken.
    The savepoint names the finished source (and its chain) finished, so the restored job does
    not read it again (it did: every record of the finished source appeared twice)."""
    from streamflow.testing import ListSink

    class Open:  # a source that stays open until the job is cancelled
        async def __aiter__(self):  # type: ignore[no-untyped-def]
            yield 9
            await asyncio.Event().wait()

    seen: list[int] = []

    def build(env: sf.StreamExecutionEnvironment, first: Any, second: Any, out: Any) -> None:
        first.uid("a").map(lambda e: seen.append(e) or e).uid("seen").union(second.uid("b")).sink_to(out)

    async def main() -> list[int]:
        env = sf.StreamExecutionEnvironment().set_parallelism(1)
        first = ListSink()
        build(env, env.from_collection([1, 2, 3]), env.from_async_iterable(Open().__aiter__), first)
        client = await env.execute_async("savepoint")
        tasks = client.execution.tasks
        while len(seen) < 3 or 9 not in first.results or not any(
            t.finished for t in tasks if t.task_id == "a#0"
        ):  # source a and its chained map have finished (and told the coordinator so)
            await asyncio.sleep(0.005)
        path = await client.trigger_savepoint(str(tmp_path / "sp"))
        await client.cancel()
        env2 = sf.StreamExecutionEnvironment().set_parallelism(1)
        env2.configure({"execution.savepoint.path": path})
        second = ListSink()
        build(env2, env2.from_collection([1, 2, 3]), env2.from_collection([9, 10]), second)
        await (await env2.execute_async("savepoint")).get_job_execution_result()
        return sorted(second.results)

    # b resumes after its 9; a stays finished (its 1, 2, 3 were emitted before the savepoint)
    assert asyncio.run(asyncio.wait_for(main(), 30)) == [10]
