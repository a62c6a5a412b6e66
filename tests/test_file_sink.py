"""FileSink: exactly-once part files driven through the operator lifecycle, plus one job end to end.

Scenarios are scripts: each step is an action and the expected committed records
and hidden-file count right after it. A "crash" drops the operator without
closing it and restores a new one from the state of a checkpoint.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

import streamflow as sf
from streamflow.checkpoint.restore import OperatorRestore
from streamflow.clock import SYSTEM_CLOCK, Clock
from streamflow.connectors.file_buckets import BucketAssigner
from streamflow.connectors.file_sink import (
    DefaultRollingPolicy,
    Encoder,
    FileSink,
    FileSinkError,
    FileSinkOperator,
    OnCheckpointRollingPolicy,
    OutputFileConfig,
    RollingPolicy,
)
from streamflow.runtime.context import OperatorContext
from streamflow.runtime.metrics import MetricGroup
from streamflow.runtime.operator import Output
from streamflow.runtime.processing_time import ProcessingTimeService
from streamflow.state import codec
from streamflow.testing import ManualClock


def make_op(
    base: Path,
    *,
    uid: str = "sink",
    subtask: int = 0,
    checkpointing: bool = True,
    encoder: Encoder | None = None,
    config: OutputFileConfig | None = None,
    policy: RollingPolicy | None = None,
    clock: Clock = SYSTEM_CLOCK,
    parallelism: int = 2,
    timers: ProcessingTimeService | None = None,
    check_interval: int = 60_000,
    bucket_assigner: BucketAssigner | None = None,
    compact: tuple | None = None,
) -> FileSinkOperator:
    builder = FileSink.for_row_format(str(base), encoder or Encoder.simple_string_encoder())
    if compact is not None:  # (strategy, compactor)
        builder = builder.enable_compact(*compact)
    if bucket_assigner is not None:
        builder = builder.with_bucket_assigner(bucket_assigner)
    if config is not None:
        builder = builder.with_output_file_config(config)
    if policy is not None:
        builder = builder.with_rolling_policy(policy)
    op = builder.with_bucket_check_interval(check_interval).build().create_operator("Sink")
    assert isinstance(op, FileSinkOperator)
    ctx = OperatorContext(
        uid=uid,
        name="Sink",
        task_name="Sink",
        subtask_index=subtask,
        parallelism=parallelism,
        max_parallelism=128,
        clock=clock,
        metrics=MetricGroup(f"{uid}[{subtask}]", {}),
        processing_time=timers,  # type: ignore[arg-type]  # None: no idle-file timer
        checkpointing=checkpointing,
    )
    op.setup(ctx, Output([], {}))
    return op


def visible(base: Path) -> list[str]:
    return sorted(n for n in os.listdir(base) if not n.startswith("."))


def hidden(base: Path) -> list[str]:
    return sorted(n for n in os.listdir(base) if n.startswith("."))


def committed(base: Path) -> list[str]:
    """Lines of the visible part files, in part-number order."""

    def key(name: str) -> tuple[int, int]:
        match = re.search(r"-(\d+)-(\d+)\D*$", name)
        assert match is not None, name
        return int(match.group(1)), int(match.group(2))

    names = sorted(visible(base), key=key)
    return [line for n in names for line in (base / n).read_text().splitlines()]


def roundtrip(state: Any) -> Any:
    return codec.decode(codec.encode(state))


class Script:
    """Runs one step at a time against a live operator; a crash replaces the operator."""

    def __init__(self, base: Path, **kw: Any) -> None:
        self.base, self.kw = base, kw
        self.states: dict[int, Any] = {}
        self.op = self._new(None)

    def _new(self, restored: Any) -> FileSinkOperator:
        op = make_op(self.base, **self.kw)
        op.initialize_state(restored)
        return op

    async def run(self, step: tuple) -> None:
        action, *args = step
        if action == "write":
            await self.op.process_batch(list(args[0]), None)
        elif action == "snap":
            self.states[args[0]] = roundtrip(self.op.snapshot_state(args[0]))
        elif action == "complete":
            await self.op.notify_checkpoint_complete(args[0])
        elif action == "abort":
            self.op.notify_checkpoint_aborted(args[0])
        elif action == "crash":  # no close(): restore from the last complete checkpoint (or fresh)
            self.op = self._new(None if args[0] is None else self.states[args[0]])
            await self.op.open()
        elif action == "finish":
            await self.op.finish()
        elif action == "close":
            await self.op.close()
            self.op.dispose()
        else:
            raise AssertionError(action)


# (step, committed records after it, number of hidden files after it)
SCENARIOS = {
    "visible only after notify": [
        (("write", "ab"), [], 1),
        (("snap", 1), [], 1),
        (("write", "c"), [], 2),
        (("complete", 1), ["a", "b"], 1),
        (("snap", 2), ["a", "b"], 1),
        (("complete", 2), ["a", "b", "c"], 0),
        (("close",), ["a", "b", "c"], 0),
    ],
    "only the second checkpoint completes": [
        (("write", "ab"), [], 1),
        (("snap", 1), [], 1),
        (("abort", 1), [], 1),
        (("write", "cd"), [], 2),
        (("snap", 2), [], 2),
        (("complete", 2), ["a", "b", "c", "d"], 0),
    ],
    "crash: pending of an unfinished checkpoint and in-progress are removed": [
        (("write", "ab"), [], 1),
        (("snap", 1), [], 1),
        (("complete", 1), ["a", "b"], 0),
        (("write", "c"), ["a", "b"], 1),
        (("snap", 2), ["a", "b"], 1),
        (("write", "d"), ["a", "b"], 2),
        (("crash", 1), ["a", "b"], 0),
        (("write", "cd"), ["a", "b"], 1),
        (("snap", 3), ["a", "b"], 1),
        (("complete", 3), ["a", "b", "c", "d"], 0),
    ],
    "crash after the checkpoint completed, before the notification": [
        (("write", "ab"), [], 1),
        (("snap", 1), [], 1),
        (("write", "c"), [], 2),
        (("crash", 1), ["a", "b"], 0),
    ],
    "restore commits idempotently": [
        (("write", "ab"), [], 1),
        (("snap", 1), [], 1),
        (("crash", 1), ["a", "b"], 0),
        (("crash", 1), ["a", "b"], 0),
        (("complete", 1), ["a", "b"], 0),
        (("write", "c"), ["a", "b"], 1),
        (("crash", 1), ["a", "b"], 0),
    ],
    "repeated notification is harmless": [
        (("write", "a"), [], 1),
        (("snap", 1), [], 1),
        (("complete", 1), ["a"], 0),
        (("complete", 1), ["a"], 0),
    ],
    "fresh start removes hidden files of this subtask": [
        (("write", "a"), [], 1),
        (("snap", 1), [], 1),
        (("write", "b"), [], 2),
        (("crash", None), [], 0),
    ],
    "checkpointing on: finish leaves the commit to the final checkpoint": [
        (("write", "ab"), [], 1),
        (("finish",), [], 1),
        (("snap", 1), [], 1),
        (("complete", 1), ["a", "b"], 0),
        (("close",), ["a", "b"], 0),
    ],
    "close never deletes": [
        (("write", "ab"), [], 1),
        (("snap", 1), [], 1),
        (("write", "c"), [], 2),
        (("close",), [], 2),
    ],
}


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_scenario(tmp_path: Path, name: str) -> None:
    """The commit protocol, one file per checkpoint (OnCheckpointRollingPolicy)."""
    script = Script(tmp_path, policy=OnCheckpointRollingPolicy())
    await script.op.open()
    for i, (step, records, n_hidden) in enumerate(SCENARIOS[name]):
        await script.run(step)
        assert (committed(tmp_path), len(hidden(tmp_path))) == (records, n_hidden), f"after step {i} {step}"


@pytest.mark.parametrize(
    ("steps", "records"),
    [
        ([("write", "ab"), ("finish",)], ["a", "b"]),
        ([("write", "ab"), ("write", "c"), ("finish",), ("close",)], ["a", "b", "c"]),
        ([("finish",)], []),
        ([("write", "a"), ("snap", 1), ("write", "b"), ("finish",)], ["a", "b"]),
    ],
)
async def test_without_checkpointing_finish_commits(tmp_path: Path, steps: list, records: list) -> None:
    script = Script(tmp_path, checkpointing=False)
    for step in steps:
        await script.run(step)
    assert (committed(tmp_path), hidden(tmp_path)) == (records, [])


def state(next_part: int, pending: list, in_progress: Any = None, subtask: int = 3) -> dict:
    return {
        "subtask": subtask,
        "rescalable": True,
        "next_part": next_part,
        "pending": pending,
        "in_progress": in_progress,
    }


async def test_file_names_and_state_format(tmp_path: Path) -> None:
    op = make_op(tmp_path, uid="my-sink", subtask=3, policy=RollingPolicy.on_checkpoint_rolling_policy())
    op.initialize_state(None)
    await op.process_batch(["x"], None)
    assert hidden(tmp_path) == [".part-my-sink-3-0.inprogress"]
    snap = op.snapshot_state(7)
    assert snap == state(1, [[7, ["part-my-sink-3-0"]]])
    assert roundtrip(snap) == snap
    assert hidden(tmp_path) == [".part-my-sink-3-0.pending"]
    await op.process_batch(["y"], None)
    assert op.snapshot_state(8) == state(2, [[7, ["part-my-sink-3-0"]], [8, ["part-my-sink-3-1"]]])
    assert op.snapshot_state(9)["pending"] == [[7, ["part-my-sink-3-0"]], [8, ["part-my-sink-3-1"]]]
    await op.notify_checkpoint_complete(7)
    assert op.snapshot_state(10) == state(2, [[8, ["part-my-sink-3-1"]]])
    assert (visible(tmp_path), hidden(tmp_path)) == (["part-my-sink-3-0"], [".part-my-sink-3-1.pending"])


async def test_output_file_config(tmp_path: Path) -> None:
    config = OutputFileConfig.builder().with_part_prefix("out").with_part_suffix(".txt").build()
    assert config == OutputFileConfig(part_prefix="out", part_suffix=".txt")
    script = Script(tmp_path, config=config, policy=OnCheckpointRollingPolicy())
    for step in [("write", "ab"), ("snap", 1), ("write", "c"), ("crash", 1), ("write", "d"), ("snap", 2)]:
        await script.run(step)
    await script.op.notify_checkpoint_complete(2)
    assert visible(tmp_path) == ["out-sink-0-0.txt", "out-sink-0-1.txt"]
    assert committed(tmp_path) == ["a", "b", "d"]


@pytest.mark.parametrize(
    ("prefix", "suffix"),
    [("a/b", ""), ("part", "/x"), (".part", "")],
    ids=["sep-prefix", "sep-suffix", "dot"],
)
def test_output_file_config_rejects_bad_names(prefix: str, suffix: str) -> None:
    with pytest.raises(ValueError, match="OutputFileConfig"):
        OutputFileConfig(prefix, suffix)


async def test_names_never_repeat_after_restoring_an_older_checkpoint(tmp_path: Path) -> None:
    script = Script(tmp_path, policy=OnCheckpointRollingPolicy())
    steps = [("write", "a"), ("snap", 1), ("complete", 1), ("write", "b"), ("snap", 2), ("complete", 2)]
    steps += [("crash", 1), ("write", "c"), ("snap", 3), ("complete", 3)]
    for step in steps:
        await script.run(step)
    assert visible(tmp_path) == ["part-sink-0-0", "part-sink-0-1", "part-sink-0-2"]
    assert script.states[3]["next_part"] == 3


async def test_next_part_continues_from_state(tmp_path: Path) -> None:
    op = make_op(tmp_path)
    op.initialize_state({"next_part": 41, "pending": []})
    await op.process_batch(["a"], None)
    assert hidden(tmp_path) == [".part-sink-0-41.inprogress"]


async def test_subtasks_and_uids_in_one_directory_keep_to_their_own_files(tmp_path: Path) -> None:
    policy = OnCheckpointRollingPolicy()
    ops = {
        key: make_op(tmp_path, uid=key[0], subtask=key[1], policy=policy)
        for key in [("s", 0), ("s", 1), ("t", 0)]
    }
    for (uid, sub), op in ops.items():
        op.initialize_state(None)
        await op.process_batch([f"{uid}{sub}-1"], None)
        op.snapshot_state(1)
        await op.process_batch([f"{uid}{sub}-2"], None)
    # ("s", 1) crashes and restarts fresh: only its own hidden files go
    restarted = make_op(tmp_path, uid="s", subtask=1, policy=policy)
    restarted.initialize_state(None)
    assert hidden(tmp_path) == [
        ".part-s-0-0.pending",
        ".part-s-0-1.inprogress",
        ".part-t-0-0.pending",
        ".part-t-0-1.inprogress",
    ]
    await ops["s", 0].notify_checkpoint_complete(1)
    ops["t", 0].snapshot_state(2)
    await ops["t", 0].notify_checkpoint_complete(2)
    assert visible(tmp_path) == ["part-s-0-0", "part-t-0-0", "part-t-0-1"]
    assert hidden(tmp_path) == [".part-s-0-1.inprogress"]


async def test_json_lines_encoder(tmp_path: Path) -> None:
    records = [{"k": "a", "v": 1}, {"k": "b", "v": [1.5, None]}, "s", 3]
    script = Script(tmp_path, encoder=Encoder.json_lines_encoder())
    for step in [("write", records[:2]), ("write", records[2:]), ("finish",), ("snap", 1), ("complete", 1)]:
        await script.run(step)
    assert [orjson.loads(line) for line in committed(tmp_path)] == records


async def test_simple_string_encoder_charset(tmp_path: Path) -> None:
    assert Encoder.simple_string_encoder("latin-1").encode_batch(["é", 1]) == b"\xe9\n1\n"
    assert Encoder.simple_string_encoder(charset="utf-16-le").encode_batch(["a"]) == "a\n".encode("utf-16-le")


async def test_one_encode_and_one_write_per_batch(tmp_path: Path) -> None:
    calls: list[list] = []
    base = Encoder.simple_string_encoder()

    def encode(records: list) -> bytes:
        calls.append(records)
        return base.encode_batch(records)

    script = Script(tmp_path, encoder=Encoder(encode, "counting"))
    for step in [("write", "abc"), ("write", "de"), ("finish",), ("snap", 1), ("complete", 1)]:
        await script.run(step)
    assert calls == [list("abc"), list("de")]
    assert committed(tmp_path) == list("abcde")


@pytest.mark.parametrize(
    ("part_size", "files"),
    [(1, ["a", "b", "c", "d", "e"]), (4, ["abc", "de"]), (5, ["abc", "de"]), (6, ["abcd", "e"])],
)
async def test_part_size_splits_files_where_flink_does_whatever_the_batches(
    tmp_path: Path, part_size: int, files: list[str]
) -> None:
    """Flink asks the policy before every record: a file takes records until one takes it past
    ``part_size`` ("a\n" is 2 bytes). One batch of five records made one file of all five."""
    op = make_op(tmp_path, policy=RollingPolicy.default_rolling_policy(part_size=part_size))
    op.initialize_state(None)
    await op.process_batch(list("abcde"), None)
    await op.finish()
    op.snapshot_state(1)
    await op.notify_checkpoint_complete(1)
    names = sorted(visible(tmp_path), key=lambda n: int(n.rsplit("-", 1)[1]))
    assert ["".join((tmp_path / n).read_text().split()) for n in names] == files


@pytest.mark.parametrize(
    ("policy", "advance_ms", "files"),
    [
        (RollingPolicy.on_checkpoint_rolling_policy(), 10**6, 1),
        (RollingPolicy.default_rolling_policy(part_size=3), 0, 3),  # "a\nb\n" is larger than 3 bytes
        (RollingPolicy.default_rolling_policy(part_size=4), 0, 2),  # Flink: rolls when size > part size
        (RollingPolicy.default_rolling_policy(rollover_interval=100, inactivity_interval=10**6), 60, 2),
        (DefaultRollingPolicy(inactivity_interval=50), 60, 3),
    ],
    ids=["on-checkpoint", "size", "size-exact", "rollover", "inactivity"],
)
async def test_rolling_policy(tmp_path: Path, policy: RollingPolicy, advance_ms: int, files: int) -> None:
    """Size rolls before a write; age and inactivity on the bucket check timer only (Flink's
    ``FileWriterBucket.write`` asks ``shouldRollOnEvent``, ``onProcessingTime`` the rest)."""
    clock = ManualClock(1_000)
    timers = ProcessingTimeService(clock, lambda: None)
    op = make_op(tmp_path, policy=policy, clock=clock, timers=timers, check_interval=10)
    op.initialize_state(None)
    for batch in (["a", "b"], ["c", "d"], ["e"]):
        await op.process_batch(batch, None)
        clock.advance(advance_ms)
        await timers.run_due()
    assert visible(tmp_path) == []
    await op.finish()
    op.snapshot_state(1)
    await op.notify_checkpoint_complete(1)
    assert (len(visible(tmp_path)), hidden(tmp_path)) == (files, [])
    assert committed(tmp_path) == list("abcde")


@pytest.mark.parametrize(
    ("policy", "kept"),
    [(RollingPolicy.default_rolling_policy(), True), (RollingPolicy.on_checkpoint_rolling_policy(), False)],
    ids=["default", "on-checkpoint"],
)
async def test_in_progress_file_is_kept_across_checkpoints(tmp_path: Path, policy: Any, kept: bool) -> None:
    """Issue 9 item 9: the default policy writes one file across many checkpoints."""
    script = Script(tmp_path, policy=policy)
    for i in range(20):
        await script.run(("write", [f"r{i}"]))
        await script.run(("snap", i + 1))
        await script.run(("complete", i + 1))
    await script.run(("finish",))
    await script.run(("snap", 21))
    await script.run(("complete", 21))
    assert committed(tmp_path) == [f"r{i}" for i in range(20)]
    assert len(visible(tmp_path)) == (1 if kept else 20)
    if kept:
        in_progress = script.states[20]["in_progress"]
        assert in_progress["name"] == "part-sink-0-0" and in_progress["length"] == 20 * 3 + 10


async def test_restore_truncates_the_in_progress_file_and_resumes_it(tmp_path: Path) -> None:
    script = Script(tmp_path)
    for step in [("write", "ab"), ("snap", 1), ("complete", 1), ("write", "cd"), ("snap", 2), ("write", "x")]:
        await script.run(step)
    assert hidden(tmp_path) == [".part-sink-0-0.inprogress"]
    await script.op.close()  # the bytes after checkpoint 1 reach the disk before the crash
    assert (tmp_path / ".part-sink-0-0.inprogress").read_text() == "a\nb\nc\nd\nx\n"
    await script.run(("crash", 1))  # checkpoint 2 never completed: back to "a\nb\n"
    assert (tmp_path / ".part-sink-0-0.inprogress").read_text() == "a\nb\n"
    for step in [("write", "cd"), ("snap", 3), ("complete", 3), ("finish",), ("snap", 4), ("complete", 4)]:
        await script.run(step)
    assert (visible(tmp_path), hidden(tmp_path)) == (["part-sink-0-0"], [])
    assert committed(tmp_path) == list("abcd")


async def test_restore_reopens_an_in_progress_file_that_rolled_after_the_checkpoint(tmp_path: Path) -> None:
    clock = ManualClock(0)
    timers = ProcessingTimeService(clock, lambda: None)
    policy = DefaultRollingPolicy(rollover_interval=100)
    script = Script(tmp_path, clock=clock, policy=policy, timers=timers, check_interval=50)
    for step in [("write", "ab"), ("snap", 1), ("complete", 1)]:
        await script.run(step)
    clock.advance(200)
    await timers.run_due()  # rolls the file (too old): pending, not yet in a checkpoint
    await script.run(("write", "c"))
    assert hidden(tmp_path) == [".part-sink-0-0.pending", ".part-sink-0-1.inprogress"]
    await script.run(("crash", 1))
    assert hidden(tmp_path) == [".part-sink-0-0.inprogress"]
    for step in [("write", "c"), ("finish",), ("snap", 2), ("complete", 2)]:
        await script.run(step)
    assert committed(tmp_path) == list("abc")


async def test_an_in_progress_file_committed_since_is_left_alone_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Restoring a checkpoint older than the committed output (an explicit fallback)."""
    script = Script(tmp_path)
    for step in [("write", "ab"), ("snap", 1), ("complete", 1), ("finish",), ("snap", 2), ("complete", 2)]:
        await script.run(step)
    await script.run(("crash", 1))
    assert "committed since" in caplog.text and "twice" in caplog.text
    assert (visible(tmp_path), hidden(tmp_path)) == (["part-sink-0-0"], [])
    for step in [("write", "c"), ("finish",), ("snap", 3), ("complete", 3)]:
        await script.run(step)
    assert committed(tmp_path) == ["a", "b", "c"]  # a new part file; the committed one untouched


async def test_an_idle_file_rolls_on_the_processing_time_timer(tmp_path: Path) -> None:
    clock = ManualClock(0)
    timers = ProcessingTimeService(clock, lambda: None)
    policy = DefaultRollingPolicy(inactivity_interval=500)
    op = make_op(tmp_path, policy=policy, clock=clock, timers=timers, check_interval=100)
    op.initialize_state(None)
    await op.process_batch(["a"], None)
    for _ in range(4):
        clock.advance(100)
        await timers.run_due()
    assert hidden(tmp_path) == [".part-sink-0-0.inprogress"]
    clock.advance(100)
    await timers.run_due()  # 500 ms without a write: rolled with no record arriving
    assert hidden(tmp_path) == [".part-sink-0-0.pending"]
    op.snapshot_state(1)
    await op.notify_checkpoint_complete(1)
    assert committed(tmp_path) == ["a"]
    clock.advance(1_000)
    await timers.run_due()
    assert not timers.has_due()  # no file open: no timer armed


async def test_crash_drops_rolled_files_of_an_unfinished_checkpoint(tmp_path: Path) -> None:
    script = Script(tmp_path, policy=RollingPolicy.default_rolling_policy(part_size=1))
    for step in [("write", "a"), ("snap", 1), ("complete", 1), ("write", "b"), ("write", "c"), ("crash", 1)]:
        await script.run(step)
    assert (committed(tmp_path), hidden(tmp_path)) == (["a"], [])


async def test_missing_pending_file_is_an_error_naming_it(tmp_path: Path) -> None:
    op = make_op(tmp_path)
    with pytest.raises(FileSinkError, match=r"\.part-sink-0-5\.pending is missing"):
        op.initialize_state({"next_part": 6, "pending": [[3, ["part-sink-0-5"]]]})


async def test_unencodable_record_names_file_and_record(tmp_path: Path) -> None:
    op = make_op(tmp_path, encoder=Encoder.json_lines_encoder())
    op.initialize_state(None)
    with pytest.raises(TypeError) as info:
        await op.process_batch([1, {2, 3}, 4], None)
    notes = "\n".join(info.value.__notes__)
    assert str(tmp_path / ".part-sink-0-0.inprogress") in notes
    assert "{2, 3}" in notes
    assert hidden(tmp_path) == []


async def test_close_and_dispose_are_idempotent(tmp_path: Path) -> None:
    op = make_op(tmp_path)
    op.initialize_state(None)
    await op.process_batch(["a"], None)
    await op.close()
    op.dispose()
    op.dispose()
    assert hidden(tmp_path) == [".part-sink-0-0.inprogress"]


@pytest.mark.parametrize("parallelism", [1, 3])
def test_end_to_end_without_checkpointing(tmp_path: Path, parallelism: int) -> None:
    out = tmp_path / "out"
    env = sf.StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    records = [f"r{i}" for i in range(1000)]
    env.from_collection(records).sink_to(
        FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()
    )
    env.execute("file sink")
    assert hidden(out) == []
    assert visible(out) and all(n.startswith("part-") for n in visible(out))
    assert sorted(committed(out)) == sorted(records)


# ---------------------------------------------------------------- restored names are validated (9.7)

CRAFTED = [
    "../victim",
    "/tmp/victim",
    "part-sink-0-0/../../victim",
    "part-sink-1-0",  # another subtask's file
    "part-other-0-0",  # another uid's file
    ".part-sink-0-0",
    "part-sink-0-x",
    "notes.txt",
    5,
    None,
]


@pytest.mark.parametrize("name", CRAFTED, ids=[repr(n) for n in CRAFTED])
@pytest.mark.parametrize("where", ["pending", "in_progress"])
async def test_restore_refuses_names_that_are_not_the_sinks_own(
    tmp_path: Path, name: Any, where: str
) -> None:
    out = tmp_path / "out"
    (out / "...").mkdir(parents=True)
    (out / "..." / "victim.pending").write_text("planted")  # what '../victim' would be committed from
    crafted: dict[str, Any] = {"next_part": 1, "pending": [], "in_progress": None}
    if where == "pending":
        crafted["pending"] = [[1, [name]]]
    else:
        crafted["in_progress"] = {"name": name, "length": 0, "created_ms": 0}
    op = make_op(out, subtask=0)
    with pytest.raises(FileSinkError, match=r"not one of this sink's files|malformed"):
        op.initialize_state(crafted)
    assert not (tmp_path / "victim").exists()
    assert (out / "..." / "victim.pending").read_text() == "planted"


async def test_restore_refuses_a_bad_in_progress_length(tmp_path: Path) -> None:
    op = make_op(tmp_path)
    bad = {
        "next_part": 1,
        "pending": [],
        "in_progress": {"name": "part-sink-0-0", "length": -1, "created_ms": 0},
    }
    with pytest.raises(FileSinkError, match="bad in-progress length"):
        op.initialize_state(bad)


# ---------------------------------------------------------------- rescaling (9.9)


async def two_subtask_states(base: Path) -> list[Any]:
    """Subtasks 0 and 1 of a p=2 sink at checkpoint 1: each a pending and an in-progress file,
    plus bytes written after the checkpoint that a restore must cut."""
    states = []
    for sub in (0, 1):
        op = make_op(base, subtask=sub, policy=DefaultRollingPolicy(part_size=3))
        op.initialize_state(None)
        await op.process_batch([f"{sub}a", f"{sub}b"], None)  # 6 bytes > 3: rolls before the next batch
        await op.process_batch([f"{sub}c"], None)
        states.append(roundtrip(op.snapshot_state(1)))
        await op.process_batch([f"{sub}x"], None)  # after the checkpoint: replayed on restore
        await op.close()
    assert states[0]["pending"] == [[1, ["part-sink-0-0"]]]
    assert states[0]["in_progress"] == {
        "name": "part-sink-0-1",
        "length": 3,
        "created_ms": states[0]["in_progress"]["created_ms"],
    }
    return states


@pytest.mark.parametrize("new_parallelism", [1, 2, 3])
async def test_rescaled_restore_commits_pending_and_finishes_in_progress(
    tmp_path: Path, new_parallelism: int
) -> None:
    states = await two_subtask_states(tmp_path)
    ops = []
    for sub in range(new_parallelism):
        op = make_op(tmp_path, subtask=sub, parallelism=new_parallelism)
        op.initialize_state(OperatorRestore(states[sub] if sub < 2 else None, states, range(0)))
        ops.append(op)
    # every record of checkpoint 1 is committed or still in progress with its owner; none after it
    for i, op in enumerate(ops):
        await op.process_batch([f"new{i}"], None)
        await op.finish()
        op.snapshot_state(2)
        await op.notify_checkpoint_complete(2)
    assert hidden(tmp_path) == []
    expected = ["0a", "0b", "0c", "1a", "1b", "1c"] + [f"new{i}" for i in range(new_parallelism)]
    assert sorted(committed(tmp_path)) == sorted(expected)


@pytest.mark.parametrize("new_parallelism", [1, 3])
def test_end_to_end_rescale_of_file_sink_state(tmp_path: Path, new_parallelism: int) -> None:
    """A savepoint with in-progress files at parallelism 2, restored at 1 and 3."""
    import asyncio

    async def main() -> None:
        data = [f"r{i}" for i in range(200)]
        out = tmp_path / "out"

        def build(env: sf.StreamExecutionEnvironment, src: sf.DataStream, parallelism: int) -> None:
            sink = (
                FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
                .with_rolling_policy(RollingPolicy.default_rolling_policy())
                .build()
            )
            src.uid("src").set_parallelism(1).sink_to(sink).uid("sink").set_parallelism(parallelism)

        reached = asyncio.Event()

        async def gate():  # type: ignore[no-untyped-def]
            for i, r in enumerate(data):
                if i == 120:  # the 120 before it are read: a barrier from now on follows them
                    reached.set()
                    await asyncio.Event().wait()
                yield r

        env = sf.StreamExecutionEnvironment().set_parallelism(2)
        env.enable_checkpointing(10_000)
        build(env, env.from_async_iterable(gate), 2)
        client = await env.execute_async("files")
        await asyncio.wait_for(reached.wait(), 10)
        path = await client.trigger_savepoint(str(tmp_path / "sp"))
        await client.cancel()
        assert any(n.endswith(".inprogress") for n in hidden(out))  # in-progress files in the savepoint
        env2 = sf.StreamExecutionEnvironment().set_parallelism(new_parallelism)
        env2.enable_checkpointing(10_000)
        env2.configure({"execution.savepoint.path": path})
        build(env2, env2.from_collection(data), new_parallelism)
        await (await env2.execute_async("files")).get_job_execution_result()
        assert hidden(out) == []
        assert sorted(committed(out)) == sorted(data)  # exactly once across the rescale

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_crafted_checkpoint_cannot_move_a_file_outside_the_output_directory(tmp_path: Path) -> None:
    """9.7 end to end: a savepoint whose sink state names '../victim' is refused on restore."""
    import asyncio

    from streamflow.checkpoint.restore import decode_entry, encode_entry
    from streamflow.checkpoint.storage import FileSystemCheckpointStorage

    out = tmp_path / "out"
    data = [f"r{i}" for i in range(50)]

    def build(env: sf.StreamExecutionEnvironment, src: sf.DataStream) -> None:
        sink = FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()
        src.uid("src").sink_to(sink).uid("sink")

    async def savepoint() -> str:
        release = asyncio.Event()

        reached = asyncio.Event()

        async def gate():  # type: ignore[no-untyped-def]
            for i, r in enumerate(data):
                if i == 20:  # the 20 before it are read: the savepoint's barrier follows them
                    reached.set()
                    await release.wait()
                yield r

        env = sf.StreamExecutionEnvironment()
        env.enable_checkpointing(10_000)
        build(env, env.from_async_iterable(gate))
        client = await env.execute_async("files")
        await asyncio.wait_for(reached.wait(), 10)
        path = await client.trigger_savepoint(str(tmp_path / "sp"))
        await client.cancel()
        return path

    path = asyncio.run(asyncio.wait_for(savepoint(), 30))
    storage = FileSystemCheckpointStorage(tmp_path)
    handle = storage.load(path)
    config = sf.CheckpointConfig()
    entries = {}
    for name in handle.entries:
        entry, reader = decode_entry(config.codec, handle.read(name), name)
        ops: Any = reader.decode(entry["ops"])
        if "sink" in ops:
            ops["sink"]["pending"] = [[1, ["../victim"]]]
        entries[name] = encode_entry(
            config.codec,
            entry["task"],
            {"ops": config.codec.encode(ops), "in": {}, "out": {}},
            entry["parallelism"],
        )
    crafted = storage.write_checkpoint(
        handle.checkpoint_id, handle.job_name, entries, savepoint_path=tmp_path / "evil"
    )
    (out / "...").mkdir()
    (out / "..." / "victim.pending").write_text("planted")  # the source of the crafted commit

    env = sf.StreamExecutionEnvironment()
    env.enable_checkpointing(10_000)
    env.configure({"execution.savepoint.path": str(crafted)})
    build(env, env.from_collection(data))
    with pytest.raises(FileSinkError, match=r"'\.\./victim', which is not one of this sink's files"):
        env.execute("files")
    assert not (tmp_path / "victim").exists()
    assert (out / "..." / "victim.pending").read_text() == "planted"
