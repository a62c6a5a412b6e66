"""FileSink's date-time bucket assigner (Flink's DateTimeBucketAssigner): a sub-directory per
value of the processing time formatted with a Java pattern, one in-progress part file per
bucket, exactly-once across buckets through a crash (connectors/file_buckets.py,
file_sink_bucket.py)."""

from __future__ import annotations

import asyncio
import calendar
import datetime as dt
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_checkpoint_faults import DATA, committed_lines, expected_running_sums, sum_job_failing_once
from test_file_sink import Script, committed, make_op, roundtrip  # tests/test_file_sink.py

from streamflow.checkpoint.restore import OperatorRestore
from streamflow.common.serialization import Encoder
from streamflow.connectors.file_buckets import BucketAssigner as Assigner
from streamflow.connectors.file_sink_parts import FileSinkError
from streamflow.connectors.file_sink_policy import DefaultRollingPolicy
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.connectors.file_system import BucketAssigner, FileSink
from streamflow.runtime.processing_time import ProcessingTimeService
from streamflow.testing import ManualClock, faults

#: 2026-11-28 14:59:58 UTC, two seconds before an hour boundary
T0 = calendar.timegm((2026, 11, 28, 14, 59, 58)) * 1000
HOURLY = BucketAssigner.date_time_bucket_assigner("yyyy-MM-dd--HH", "UTC")


def tree(base: Path) -> dict[str, list[str]]:
    """Every directory under ``base`` (relative, "" for base) with the files in it."""
    out = {}
    for dirpath, _dirs, files in os.walk(base):
        rel = os.path.relpath(dirpath, base)
        out["" if rel == "." else rel] = sorted(files)
    return out


def hidden_anywhere(base: Path) -> list[str]:
    return [f for files in tree(base).values() for f in files if f.startswith(".")]


class Gated:
    """A finite async source: yields ``first``, waits for ``gate``, yields ``then``."""

    def __init__(self, first: list[str], then: list[str]) -> None:
        self.first, self.then, self.gate = first, then, asyncio.Event()

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for r in self.first:
            yield r
        await self.gate.wait()
        for r in self.then:
            yield r


async def until(cond: Any, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "condition not reached"
        await asyncio.sleep(0.005)


async def test_records_land_in_the_bucket_of_their_hour_through_pyflinks_builder(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    env = StreamExecutionEnvironment(clock=clock)
    source = Gated(["a"], ["b", "c"])  # (one record before the gate: its batch is surely written)
    sink = (
        FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.date_time_bucket_assigner("yyyy-MM-dd--HH", "UTC"))
        .build()
    )
    env.from_async_iterable(source.__aiter__).sink_to(sink)
    client = await env.execute_async("hourly")
    before = tmp_path / "out" / "2026-11-28--14"
    await until(lambda: before.is_dir() and any(f.startswith(".") for f in os.listdir(before)))
    clock.advance(3_000)  # 15:00:01: the next hour's bucket
    source.gate.set()
    await asyncio.wait_for(client.get_job_execution_result(), 60)
    assert sorted(tree(tmp_path / "out")) == ["", "2026-11-28--14", "2026-11-28--15"]
    assert committed(before) == ["a"]
    assert committed(tmp_path / "out" / "2026-11-28--15") == ["b", "c"]
    assert hidden_anywhere(tmp_path / "out") == [] and tree(tmp_path / "out")[""] == []


async def test_a_crash_keeps_exactly_once_across_buckets(tmp_path: Path) -> None:
    """Checkpoint 2 records an in-progress file in two buckets; after it a third bucket is
    opened and the job crashes before the notification: the restore commits and resumes both
    buckets' files, deletes the third bucket's orphan, and the replayed records land once."""
    clock = ManualClock(T0)
    script = Script(tmp_path, clock=clock, bucket_assigner=HOURLY)
    run = script.run
    for step in [("write", "ab"), ("snap", 1), ("complete", 1), ("write", "c")]:
        await run(step)
    clock.advance(3_000)  # 15:00:01
    await run(("write", "d"))
    await run(("snap", 2))  # (its notification is lost in the crash)
    assert sorted(script.states[2]["buckets"]) == ["2026-11-28--14", "2026-11-28--15"]
    await run(("write", "e"))
    clock.advance(3_600_000)  # 16:00:01: a bucket no checkpoint names
    await run(("write", "f"))
    orphan = tmp_path / "2026-11-28--16"
    assert [f for f in os.listdir(orphan) if f.endswith(".inprogress")]
    script.op.dispose()  # an in-process failover disposes the failed subtask first: its buffered
    await run(("crash", 2))  # bytes (e, f) reach the files, after the lengths checkpoint 2 recorded
    assert os.listdir(orphan) == []  # its own orphan, found in a directory the state does not name
    for step in [("write", "e"), ("write", "f"), ("snap", 3), ("complete", 3), ("finish",), ("snap", 4),
                 ("complete", 4)]:  # fmt: skip
        await run(step)
    assert committed(tmp_path / "2026-11-28--14") == ["a", "b", "c"]
    assert committed(tmp_path / "2026-11-28--15") == ["d"]
    assert committed(orphan) == ["e", "f"]
    assert hidden_anywhere(tmp_path) == []


async def test_each_bucket_has_its_own_part_file_and_rolls_on_its_own(tmp_path: Path) -> None:
    """Flink's Buckets: writing into the next hour leaves the last hour's file open; the
    inactivity timer rolls that one, not the busy one."""
    clock = ManualClock(T0)
    timers = ProcessingTimeService(clock, lambda: None)
    policy = DefaultRollingPolicy(inactivity_interval=5_000, rollover_interval=10**9)
    op = make_op(tmp_path, clock=clock, timers=timers, policy=policy, check_interval=1_000,
                 bucket_assigner=HOURLY)  # fmt: skip
    op.initialize_state(None)
    await op.process_batch(["a"], None)
    clock.advance(3_000)
    await op.process_batch(["b"], None)
    assert tree(tmp_path) == {
        "": [],
        "2026-11-28--14": [".part-sink-0-0.inprogress"],
        "2026-11-28--15": [".part-sink-0-1.inprogress"],
    }
    for _ in range(3):  # 14's file idle for 6 s, 15's written every second
        clock.advance(1_000)
        await op.process_batch(["x"], None)
        await timers.run_due()
    assert tree(tmp_path)["2026-11-28--14"] == [".part-sink-0-0.pending"]
    assert tree(tmp_path)["2026-11-28--15"] == [".part-sink-0-1.inprogress"]
    state = op.snapshot_state(1)
    assert state["buckets"]["2026-11-28--14"] == {"pending": [[1, ["part-sink-0-0"]]], "in_progress": None}
    await op.notify_checkpoint_complete(1)
    assert committed(tmp_path / "2026-11-28--14") == ["a"]
    assert "2026-11-28--14" not in op.snapshot_state(2)["buckets"]  # inactive: dropped, as in Flink


@pytest.mark.parametrize("point", [p for p in faults.POINTS if p != "committed"])
def test_a_failure_at_any_point_of_a_checkpoint_keeps_exactly_once_across_buckets(
    tmp_path: Path, point: str
) -> None:
    """test_checkpoint_faults' job (two throttled sources, running sums, restarts) with a bucket
    every 10 ms of processing time (``'b'SS``: a hundredth of a second, so the buckets are
    reused every second and a restored attempt writes into those of the failed one): every
    record is committed once, in some bucket, and nothing is left hidden anywhere."""
    every_10ms = BucketAssigner.date_time_bucket_assigner("'b'SS", "UTC")
    sum_job_failing_once(tmp_path, point, bucket_assigner=every_10ms)
    out = tmp_path / "out"
    buckets = sorted(d for d in out.iterdir() if d.is_dir())
    assert len(buckets) >= 2 and all(d.name.startswith("b") for d in buckets)
    assert Counter(line for d in buckets for line in committed_lines(d)) == expected_running_sums(DATA)
    assert committed_lines(out) == [] and hidden_anywhere(out) == []


@pytest.mark.parametrize("new_parallelism", [1, 3])
async def test_a_rescaled_restore_commits_and_finishes_every_buckets_files(
    tmp_path: Path, new_parallelism: int
) -> None:
    """Two subtasks, each with a pending and an in-progress file in each of two hours, restored
    at another parallelism: every record of the checkpoint committed once, in its own bucket."""
    states = []
    for sub in (0, 1):
        clock = ManualClock(T0)  # both subtasks write the same two hours
        op = make_op(tmp_path, subtask=sub, clock=clock, bucket_assigner=HOURLY,
                     policy=DefaultRollingPolicy(part_size=4))  # fmt: skip
        op.initialize_state(None)
        for hour in (0, 1):
            await op.process_batch([f"{sub}{hour}a", f"{sub}{hour}b"], None)  # 8 bytes: rolls next
            await op.process_batch([f"{sub}{hour}c"], None)
            clock.advance(3_600_000)
        states.append(roundtrip(op.snapshot_state(1)))
        await op.process_batch([f"{sub}x"], None)  # after the checkpoint: replayed on restore
        await op.close()
    for bucket in states[0]["buckets"].values():  # (the base path holds nothing)
        assert bucket["pending"] and bucket["in_progress"]["length"] == 4
    assert sorted(states[0]["buckets"]) == ["2026-11-28--14", "2026-11-28--15"]
    for sub in range(new_parallelism):
        op = make_op(tmp_path, subtask=sub, parallelism=new_parallelism, clock=clock, bucket_assigner=HOURLY)
        op.initialize_state(OperatorRestore(states[sub] if sub < 2 else None, states, range(0)))
        await op.finish()
        op.snapshot_state(2)
        await op.notify_checkpoint_complete(2)
    assert hidden_anywhere(tmp_path) == []
    for hour, bucket in enumerate(["2026-11-28--14", "2026-11-28--15"]):
        lines = [line for f in sorted((tmp_path / bucket).iterdir()) for line in f.read_text().split()]
        assert sorted(lines) == sorted(f"{sub}{hour}{r}" for sub in (0, 1) for r in "abc")


def test_java_patterns_and_zones() -> None:
    at = calendar.timegm((2026, 3, 7, 9, 5, 3)) * 1000 + 42
    cases = {
        ("yyyy-MM-dd--HH", "UTC"): "2026-03-07--09",
        ("yyyy/MM/dd/HH", "Asia/Kolkata"): "2026/03/07/14",
        ("yy-M-d H:m:s.SSS", "UTC"): "26-3-7 9:5:3.042",
        ("EEE MMM dd hh a 'at' ''x''", "UTC"): "Sat Mar 07 09 AM at '+00'",  # '' is a quote
        ("EEEE MMMM D k K", "America/New_York"): "Saturday March 66 4 4",
        ("HH Z XXX", "+05:30"): "14 +0530 +05:30",
        ("HH X", "Z"): "09 Z",
        ("HH", "GMT-2"): "07",
    }
    for (pattern, zone), expected in cases.items():
        assert Assigner.date_time_bucket_assigner(pattern, zone).bucket_id(at) == expected, pattern


def test_without_a_zone_the_system_zone_formats_the_time() -> None:
    at = 1_795_879_511_298
    local = dt.datetime.fromtimestamp(at / 1000).strftime("%Y-%m-%d--%H")
    assert Assigner.date_time_bucket_assigner().bucket_id(at) == local  # Flink's defaults


@pytest.mark.parametrize(
    ("pattern", "zone", "refused"),
    [("yyyy-MM-dd--HHH", None, "too many pattern letters: 'HHH'"),
     ("yyyy-qq", None, "unsupported pattern letter 'q'"),
     ("'open", None, "unterminated quote"),
     ("[yyyy]", None, "reserved character"),
     ("yyyy", "Mars/Olympus", "unknown time zone id 'Mars/Olympus'")],
)
def test_a_pattern_or_zone_it_cannot_use_is_refused_when_made(
    pattern: str, zone: str | None, refused: str
) -> None:
    with pytest.raises(ValueError, match=refused.replace("[", r"\[")):
        BucketAssigner.date_time_bucket_assigner(pattern, zone)


async def test_a_bucket_id_outside_the_base_path_is_refused(tmp_path: Path) -> None:
    op = make_op(tmp_path / "out", bucket_assigner=Assigner.date_time_bucket_assigner("'..'/yyyy", "UTC"))
    op.initialize_state(None)
    with pytest.raises(FileSinkError, match="does not name a sub-directory"):
        await op.process_batch(["a"], None)
    assert os.listdir(tmp_path) == ["out"]


@pytest.mark.parametrize("bucket_id", ["../x", "/abs", "a/../../b", ".hidden", 7])
def test_a_restored_bucket_outside_the_base_path_is_refused(tmp_path: Path, bucket_id: Any) -> None:
    op = make_op(tmp_path, bucket_assigner=HOURLY)
    crafted = {"next_part": 1, "pending": [], "in_progress": None,
               "buckets": {bucket_id: {"pending": [[1, ["part-sink-0-0"]]], "in_progress": None}}}
    with pytest.raises(FileSinkError, match="bucket id"):
        op.initialize_state(crafted)


def test_a_sink_without_buckets_restores_as_before_without_listing_sub_directories(tmp_path: Path) -> None:
    """The default sink (the base path) looks only there: a sub-directory of the base path,
    even one holding a file named like its own, is someone else's."""
    (tmp_path / "other").mkdir()
    foreign = tmp_path / "other" / ".part-sink-0-0.inprogress"
    foreign.write_text("not ours")
    (tmp_path / ".part-sink-0-0.inprogress").write_text("orphan")
    make_op(tmp_path).initialize_state(None)
    assert tree(tmp_path) == {"": [], "other": [".part-sink-0-0.inprogress"]}
    make_op(tmp_path, bucket_assigner=HOURLY).initialize_state(None)  # with buckets it is a bucket
    assert tree(tmp_path) == {"": [], "other": []}
