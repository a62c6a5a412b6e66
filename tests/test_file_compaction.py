"""FileSink compaction (Flink's FileCompactStrategy / FileCompactor; connectors/file_compaction.py,
file_sink_compaction.py): the trigger and group protocol as table tests ported from Flink's
CompactCoordinatorTest and CompactorOperatorTest, the sink's files through checkpoints and
crashes, and jobs end to end (parallelism 1 and 4, in-process failures at every point)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from pathlib import Path
from typing import IO, Any

import pytest
from test_checkpoint_faults import DATA, committed_lines, expected_running_sums, sum_job_failing_once
from test_file_sink import Script, committed, hidden, make_op, visible

import streamflow as sf
from streamflow.checkpoint.restore import OperatorRestore
from streamflow.connectors.file_compaction import BucketCompaction, FileCompactor, FileCompactStrategy
from streamflow.connectors.file_sink_parts import FileSinkError
from streamflow.datastream.connectors.file_system import BucketAssigner, FileSink, RollingPolicy
from streamflow.testing import faults

ON_CHECKPOINT = RollingPolicy.on_checkpoint_rolling_policy()


def strategy(size: int = -1, checkpoints: int = 0) -> FileCompactStrategy:
    b = FileCompactStrategy.builder()
    if size >= 0:
        b = b.set_size_threshold(size)
    if checkpoints:
        b = b.enable_compaction_on_checkpoint(checkpoints)
    return b.build()


# ---- the builder and the compactors (Flink's FileCompactStrategy.Builder checks) ----


def test_the_builder_refuses_what_flinks_refuses() -> None:
    with pytest.raises(ValueError, match="At least one trigger condition must be configured"):
        FileCompactStrategy.builder().set_num_compact_threads(2).build()
    with pytest.raises(ValueError, match="should be more than 0"):
        FileCompactStrategy.builder().enable_compaction_on_checkpoint(0)
    with pytest.raises(ValueError, match="Compact threads should be more than 0"):
        FileCompactStrategy.builder().set_num_compact_threads(0)
    with pytest.raises(TypeError, match="size_threshold must be an int"):
        FileCompactStrategy.builder().set_size_threshold("1kb")  # type: ignore[arg-type]
    s = FileCompactStrategy.builder().set_size_threshold(0).build()  # 0: every file fires alone
    assert (
        s.get_size_threshold(),
        s.get_num_checkpoints_before_compaction(),
        s.get_num_compact_threads(),
    ) == (
        0,
        -1,
        -1,
    )


def test_concat_writes_the_delimiter_after_every_file_as_flinks_concat_compactor(tmp_path: Path) -> None:
    """ConcatFileCompactor.doCompact writes the delimiter after each input, the last one too."""
    paths = []
    for i, text in enumerate([b"a\n", b"b\n", b""]):
        (tmp_path / str(i)).write_bytes(text)
        paths.append(str(tmp_path / str(i)))
    for compactor, expected in [
        (FileCompactor.concat_file_compactor(), b"a\nb\n"),
        (FileCompactor.concat_file_compactor(b"--"), b"a\n--b\n----"),
    ]:
        with open(tmp_path / "out", "wb") as out:
            compactor.compact(paths, out)
        assert (tmp_path / "out").read_bytes() == expected
    with open(tmp_path / "out", "wb") as out, pytest.raises(ValueError, match="only copy one input file"):
        FileCompactor.identical_file_compactor().compact(paths, out)


# ---- the coordinator's triggers (Flink's CompactCoordinatorTest) ----


def run_coordinator(s: FileCompactStrategy, steps: list) -> list[tuple[str, list[str]]]:
    """Steps: ("file", bucket, name, size), ("checkpoint", id), ("end",). Returns the fired
    groups in order, as (bucket, names): Flink's requests."""
    buckets: dict[str, BucketCompaction] = {}
    fired: list[tuple[str, list[str]]] = []

    def collect() -> None:
        for bucket, c in buckets.items():
            fired.extend((bucket, g) for g in c.collecting)
            c.collecting = []

    for step in steps:
        if step[0] == "file":
            buckets.setdefault(step[1], BucketCompaction(s)).pack(step[2], step[3])
        elif step[0] == "checkpoint":
            for c in buckets.values():
                if c.trigger is not None and c.trigger.on_checkpoint(step[1]):
                    c._fire()
        else:
            for bucket, c in buckets.items():
                fired.extend((bucket, g) for g in c.end_of_input())
        collect()
    return fired


COORDINATOR = {
    "testSizeThreshold": (
        strategy(size=10),
        [("file", "0", ".0", 5), ("file", "0", ".1", 6), ("file", "0", ".2", 5), ("file", "1", ".0", 5)],
        [("0", [".0", ".1"])],
    ),
    "testCompactOnCheckpoint": (
        strategy(checkpoints=1),
        [("file", "0", ".0", 5), ("file", "0", ".1", 6), ("checkpoint", 1),
         ("file", "0", ".2", 5), ("file", "1", ".0", 5), ("checkpoint", 2)],
        [("0", [".0", ".1"]), ("0", [".2"]), ("1", [".0"])],
    ),
    "testCompactOverMultipleCheckpoints": (
        strategy(checkpoints=3),
        [("file", "0", ".0", 5), ("file", "0", ".1", 6), *[("checkpoint", i) for i in (1, 2, 3)]],
        [("0", [".0", ".1"])],
    ),
    "testCompactOnEndOfInput": (
        strategy(size=10),
        [("file", "0", ".0", 5), ("checkpoint", 1), ("end",)],
        [("0", [".0"])],
    ),
    "a checkpoint trigger restarts after it fires": (
        strategy(checkpoints=2),
        [("file", "0", "a", 1), ("checkpoint", 1), ("checkpoint", 2), ("file", "0", "b", 1),
         ("checkpoint", 3), ("checkpoint", 4)],
        [("0", ["a"]), ("0", ["b"])],
    ),
    "size or checkpoint, whichever first": (
        strategy(size=10, checkpoints=2),
        [("file", "0", "a", 4), ("checkpoint", 1), ("file", "0", "b", 7), ("file", "0", "c", 1),
         ("checkpoint", 2), ("checkpoint", 3)],
        [("0", ["a", "b"]), ("0", ["c"])],
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(COORDINATOR))
def test_coordinator(case: str) -> None:
    s, steps, expected = COORDINATOR[case]
    assert run_coordinator(s, steps) == expected


def test_restore_with_changed_strategy_packs_again_with_the_new_one() -> None:
    """CompactCoordinatorTest.testRestoreWithChangedStrategy: five files packed under a 100-byte
    threshold, restored under a 10-byte one, fire in pairs; the last waits for one more file."""
    old = BucketCompaction(strategy(size=100))
    sizes = {".0": 5, ".1": 6, ".2": 7, ".3": 8, ".4": 9, ".5": 2}
    for name in [".0", ".1", ".2", ".3", ".4"]:
        old.pack(name, sizes[name])
    old.prepare(1)
    assert old.requests == {}
    c, to_compact, to_publish = BucketCompaction.restored(
        strategy(size=10), [old.snapshot()], sizes.__getitem__
    )
    assert (to_compact, to_publish, c.collecting) == ([], [], [[".0", ".1"], [".2", ".3"]])
    c.pack(".5", 2)
    assert c.collecting[-1] == [".4", ".5"]


def test_a_group_is_compacted_after_its_checkpoint_and_published_after_the_next() -> None:
    """CompactorOperatorTest.testCompact and testRestore's timeline: a request of checkpoint 1
    is compacted once 1 completed, its result attached at the next pre-barrier step (2) and
    published when 2 completes; a group still compacting at a snapshot is recorded as submitted
    (compacted again on restore), a request of checkpoint 2 waits for 2 (on restore: at once)."""
    c = BucketCompaction(strategy(checkpoints=1))
    c.pack("f0", 5)
    c.pack("f1", 5)
    c.prepare(1)
    assert c.requests == {1: [["f0", "f1"]]}
    assert c.complete(1) == ([["f0", "f1"]], [])
    c.pack("f2", 5)
    c.prepare(2)  # f0+f1 still compacting: not attached
    state = c.snapshot()
    assert state == {"packing": [], "requests": [[2, [["f2"]]]], "submitted": [["f0", "f1"]], "compacted": []}
    c.done(["f0", "f1"])
    c.prepare(3)
    assert c.compacted == {3: [["f0", "f1"]]}
    assert c.complete(3) == ([["f2"]], [["f0", "f1"]])
    restored, to_compact, to_publish = BucketCompaction.restored(strategy(checkpoints=1), [state], len)
    assert (to_compact, to_publish, restored.submitted) == (
        [["f2"], ["f0", "f1"]],
        [],
        [["f2"], ["f0", "f1"]],
    )


# ---- the sink's files ----

COMPACT_EVERY_CHECKPOINT = (strategy(checkpoints=1), FileCompactor.concat_file_compactor())

# (step, committed records after it, hidden files after it); "settle" waits for the compactions
SCENARIOS = {
    "published one checkpoint after the compaction's": [
        (("write", "ab"), [], [".part-sink-0-0.inprogress"]),
        (("snap", 1), [], [".part-sink-0-0.pending"]),
        (("complete", 1), [], None),
        (("settle",), [], [".compacted-part-sink-0-0.pending", ".part-sink-0-0"]),
        (("write", "c"), [], None),
        (("snap", 2), [], None),
        (("complete", 2), ["a", "b"], None),
        (("settle",), ["a", "b"], [".compacted-part-sink-0-1.pending", ".part-sink-0-1"]),
        (("snap", 3), ["a", "b"], None),
        (("complete", 3), ["a", "b", "c"], []),
    ],
    "crash before the compaction: the restore compacts its checkpoint's groups": [
        (("write", "ab"), [], None),
        (("snap", 1), [], None),
        (("write", "x"), [], None),
        (("crash", 1), [], None),
        (("settle",), [], [".compacted-part-sink-0-0.pending", ".part-sink-0-0"]),
        (("snap", 2), [], None),
        (("complete", 2), ["a", "b"], []),
    ],
    "crash after a compaction, before its result was in a checkpoint: compacted again": [
        (("write", "ab"), [], None),
        (("snap", 1), [], None),
        (("complete", 1), [], None),
        (("settle",), [], None),
        (("write", "c"), [], None),
        (("snap", 2), [], None),  # f0's result is attached to 2, which never completes
        (("crash", 1), [], None),
        (("settle",), [], [".compacted-part-sink-0-0.pending", ".part-sink-0-0"]),
        (("snap", 3), [], None),
        (("complete", 3), ["a", "b"], []),
    ],
    "crash after the checkpoint with the result completed: the restore publishes": [
        (("write", "ab"), [], None),
        (("snap", 1), [], None),
        (("complete", 1), [], None),
        (("settle",), [], None),
        (("snap", 2), [], None),
        (("crash", 2), ["a", "b"], []),
        (("crash", 2), ["a", "b"], []),  # idempotent
    ],
    "end of input compacts everything, the final checkpoint publishes": [
        (("write", "ab"), [], None),
        (("snap", 1), [], None),
        (("write", "c"), [], None),
        (("finish",), [], None),
        (("snap", 2), [], None),
        (("complete", 2), ["a", "b", "c"], []),
    ],
}


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_scenario(tmp_path: Path, name: str) -> None:
    script = Script(tmp_path, policy=ON_CHECKPOINT, compact=COMPACT_EVERY_CHECKPOINT)
    await script.op.open()
    for i, (step, records, hidden_files) in enumerate(SCENARIOS[name]):
        if step == ("settle",):
            assert script.op.compaction is not None
            await script.op.compaction.wait()
        else:
            await script.run(step)
        assert committed(tmp_path) == records, f"after step {i} {step}"
        if hidden_files is not None:
            assert hidden(tmp_path) == hidden_files, f"after step {i} {step}"
    assert all(n.startswith("compacted-") for n in visible(tmp_path))


@pytest.mark.parametrize("final_snapshot", [False, True])
async def test_a_restore_after_the_end_of_input_finds_its_packed_files_committed(
    tmp_path: Path, final_snapshot: bool
) -> None:
    """The end of input compacts every packed file at once (Flink's ``CompactorOperator.endInput``),
    committing it hidden, while the latest completed checkpoint still names it packed (pending).
    A failure before the final checkpoint completes restores that checkpoint: the packed file is
    found committed (Flink's ``commitAfterRecovery`` of a pending file is idempotent), packed
    again with its size and compacted again; every record is published once. (The job-level
    flake of test_compaction_in_date_time_buckets_keeps_exactly_once_through_a_failure: one
    subtask reached its end of input while the other failed.)"""
    script = Script(tmp_path, policy=ON_CHECKPOINT,
                    compact=(strategy(checkpoints=2), FileCompactor.concat_file_compactor()))  # fmt: skip
    await script.op.open()
    for step in [("write", "ab"), ("snap", 1), ("complete", 1), ("write", "c"), ("finish",)]:
        await script.run(step)
    assert hidden(tmp_path) == [".compacted-part-sink-0-0.pending", ".part-sink-0-0", ".part-sink-0-1"]
    if final_snapshot:
        await script.run(("snap", 2))  # the final checkpoint, never completed
    await script.run(("crash", 1))  # checkpoint 1 names part-sink-0-0 packed
    assert script.op.compaction is not None
    assert script.op.compaction.buckets[""].packing == ["part-sink-0-0"]
    assert hidden(tmp_path) == [".part-sink-0-0"]
    for step in [("write", "c"), ("finish",), ("snap", 3), ("complete", 3)]:
        await script.run(step)
    assert (visible(tmp_path), hidden(tmp_path)) == (["compacted-part-sink-0-0"], [])
    assert committed(tmp_path) == ["a", "b", "c"]


async def test_without_checkpointing_the_end_of_input_compacts_and_publishes(tmp_path: Path) -> None:
    op = make_op(tmp_path, checkpointing=False, policy=RollingPolicy.default_rolling_policy(part_size=4),
                 compact=(strategy(size=1 << 20), FileCompactor.concat_file_compactor()))  # fmt: skip
    op.initialize_state(None)
    await op.open()
    for batch in (["a1", "b2"], ["c3"], ["d4", "e5"]):
        await op.process_batch(batch, None)
    await op.finish()
    assert (visible(tmp_path), hidden(tmp_path)) == (["compacted-part-sink-0-0"], [])
    assert committed(tmp_path) == ["a1", "b2", "c3", "d4", "e5"]


async def test_a_failed_compaction_fails_the_sink_naming_the_group(tmp_path: Path) -> None:
    """identical_file_compactor with a group of two (Flink: an IllegalStateException); the
    restart compacts the group again, so a fixed job would finish it."""
    script = Script(tmp_path, policy=ON_CHECKPOINT,
                    compact=(strategy(checkpoints=2), FileCompactor.identical_file_compactor()))  # fmt: skip
    for step in [("write", "a"), ("snap", 1), ("write", "b"), ("snap", 2), ("complete", 2)]:
        await script.run(step)
    assert script.op.compaction is not None
    with pytest.raises(ValueError, match="only copy one input file") as e:
        await script.op.compaction.wait()
    assert "compaction of ['part-sink-0-0', 'part-sink-0-1']" in "".join(e.value.__notes__)
    with pytest.raises(ValueError, match="only copy one input file"):
        await script.op.process_batch(["c"], None)


class _BlockingCompactor(FileCompactor):
    """Concatenates once ``release`` is set; ``started`` tells the compaction's thread began."""

    def __init__(self) -> None:
        super().__init__()
        self.started, self.release, self.ended = threading.Event(), threading.Event(), threading.Event()

    def compact(self, inputs: list[str], out: IO[bytes]) -> None:
        self.started.set()
        assert self.release.wait(10)
        super().compact(inputs, out)
        self.ended.set()


async def test_closing_the_sink_waits_for_a_running_compaction(tmp_path: Path, caplog: Any) -> None:
    """A failed attempt's sink is closed while a compaction thread runs: close() returns only
    after the thread ended, so the restore that follows never races it for the same files."""
    caplog.set_level(logging.INFO, "streamflow.connectors.file_sink")
    compactor = _BlockingCompactor()
    script = Script(tmp_path, policy=ON_CHECKPOINT, compact=(strategy(checkpoints=1), compactor))
    await script.op.open()
    for step in [("write", "ab"), ("snap", 1), ("complete", 1)]:
        await script.run(step)
    assert await asyncio.to_thread(compactor.started.wait, 10)
    closing = asyncio.create_task(script.op.close())
    await asyncio.sleep(0.05)
    assert not closing.done(), "close() returned while the compaction thread still ran"
    compactor.release.set()
    await asyncio.wait_for(closing, 10)
    assert compactor.ended.is_set()
    assert "waiting for 1 compactions to end" in caplog.text
    script.op.dispose()
    await script.run(("crash", 1))  # the restore compacts the group again, idempotently
    await script.op.compaction.wait()  # type: ignore[union-attr]
    for step in [("snap", 2), ("complete", 2)]:
        await script.run(step)
    assert committed(tmp_path) == ["a", "b"]
    assert visible(tmp_path) == ["compacted-part-sink-0-0"]


async def test_compaction_turned_off_publishes_the_restored_files_as_they_are(tmp_path: Path) -> None:
    """disable_compact() after a checkpoint taken with compaction (Flink's state handlers): the
    compacted groups are published, every other file the state names becomes visible."""
    script = Script(
        tmp_path,
        policy=ON_CHECKPOINT,
        compact=(strategy(checkpoints=2), FileCompactor.concat_file_compactor()),
    )
    for step in [("write", "ab"), ("snap", 1), ("write", "c"), ("snap", 2), ("complete", 2)]:
        await script.run(step)
    assert script.op.compaction is not None
    await script.op.compaction.wait()
    await script.run(("write", "d"))
    await script.run(("snap", 3))  # ab+c compacted, attached to 3; d packed
    op = make_op(tmp_path, policy=ON_CHECKPOINT)
    op.initialize_state(script.states[3])
    assert hidden(tmp_path) == []
    assert sorted(visible(tmp_path)) == ["compacted-part-sink-0-0", "part-sink-0-2"]
    assert committed(tmp_path) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("new_parallelism", [1, 3])
async def test_a_rescaled_restore_keeps_every_group_and_packed_file(
    tmp_path: Path, new_parallelism: int
) -> None:
    """Two subtasks at checkpoint 2, each with a group compacting and a packed file; restored at
    1 and 3: every record is published once, the groups with files of other subtasks too."""
    states = []
    for sub in (0, 1):
        op = make_op(tmp_path, subtask=sub, policy=ON_CHECKPOINT,
                     compact=(strategy(checkpoints=2), FileCompactor.concat_file_compactor()))  # fmt: skip
        op.initialize_state(None)
        for step, arg in [
            ("w", f"{sub}a"),
            ("s", 1),
            ("w", f"{sub}b"),
            ("s", 2),
            ("c", 2),
            ("w", f"{sub}c"),
            ("s", 3),
        ]:
            if step == "w":
                await op.process_batch([arg], None)
            elif step == "s":
                states.append(op.snapshot_state(arg)) if arg == 3 else op.snapshot_state(arg)
            else:
                await op.notify_checkpoint_complete(arg)
        op.dispose()
    ops = []
    for sub in range(new_parallelism):
        op = make_op(tmp_path, subtask=sub, parallelism=new_parallelism, policy=ON_CHECKPOINT,
                     compact=(strategy(checkpoints=1), FileCompactor.concat_file_compactor()))  # fmt: skip
        op.initialize_state(OperatorRestore(states[sub] if sub < 2 else None, states, range(0)))
        await op.open()
        ops.append(op)
    for op in ops:
        await op.finish()
        op.snapshot_state(4)
        await op.notify_checkpoint_complete(4)
    assert hidden(tmp_path) == []
    assert sorted(committed(tmp_path)) == ["0a", "0b", "0c", "1a", "1b", "1c"]


async def test_a_crafted_compaction_state_cannot_name_other_files(tmp_path: Path) -> None:
    compaction = {"packing": ["../victim"], "requests": [], "submitted": [], "compacted": []}
    state = {"subtask": 0, "next_part": 1, "pending": [], "in_progress": None, "compaction": compaction}
    op = make_op(tmp_path, compact=COMPACT_EVERY_CHECKPOINT)
    with pytest.raises(FileSinkError, match=r"'\.\./victim', which is not one of this sink's files"):
        op.initialize_state(state)
    state["compaction"] = {
        "packing": [],
        "requests": [[1, "part-sink-0-0"]],
        "submitted": [],
        "compacted": [],
    }
    with pytest.raises(FileSinkError, match="malformed"):
        make_op(tmp_path, compact=COMPACT_EVERY_CHECKPOINT).initialize_state(state)


# ---- jobs end to end ----


def compacting_job(out: Path, parallelism: int, data: list[str]) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    env.enable_checkpointing(20)
    sink = (
        FileSink.for_row_format(str(out), sf.Encoder.simple_string_encoder())
        .with_rolling_policy(ON_CHECKPOINT)
        .enable_compact(
            FileCompactStrategy.builder().set_size_threshold(1000).enable_compaction_on_checkpoint(5).build(),
            FileCompactor.concat_file_compactor(),
        )
        .build()
    )

    async def slow(r: str) -> str:
        if r.endswith("0"):  # about 0.6 s in all: dozens of checkpoints meanwhile
            await asyncio.sleep(0.004)
        return r

    source = env.from_collection(data).uid("src").map(slow, concurrency=1).uid("slow").set_parallelism(1)
    source.rebalance().sink_to(sink).uid("sink")
    return env


@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_job_publishes_every_record_once_in_compacted_files(tmp_path: Path, parallelism: int) -> None:
    data = [f"record-{i}" for i in range(1500)]
    out = tmp_path / "out"
    result = compacting_job(out, parallelism, data).execute("compaction")
    names = visible(out)
    assert names and all(n.startswith("compacted-part-") for n in names)
    assert hidden(out) == []
    assert Counter(committed_lines(out)) == Counter(data)
    # every subtask rolls a file per checkpoint; a compacted file holds several of them
    checkpoints = result.metrics["checkpoints.numberOfCompletedCheckpoints"]
    assert checkpoints >= 10 and len(names) < checkpoints * parallelism / 2


@pytest.mark.parametrize("point", [p for p in faults.POINTS if p != "committed"] + ["compact"])
def test_a_failure_at_any_point_keeps_exactly_once_with_compaction(tmp_path: Path, point: str) -> None:
    """test_checkpoint_faults' job (two throttled sources, running sums at parallelism 2,
    restarts) with a compacting sink: a failure at each protocol point, and in a compaction
    between committing its inputs and writing its file; every record is published once."""
    compact = (strategy(size=200, checkpoints=2), FileCompactor.concat_file_compactor())
    sum_job_failing_once(tmp_path, point, compact=compact)
    out = tmp_path / "out"
    assert Counter(committed_lines(out)) == expected_running_sums(DATA)
    assert all(n.startswith("compacted-") for n in visible(out)) and hidden(out) == []


@pytest.mark.parametrize("point", ["snapshot", "commit", "compact"])
def test_compaction_in_date_time_buckets_keeps_exactly_once_through_a_failure(
    tmp_path: Path, point: str
) -> None:
    """The same job with a bucket every 10 ms of processing time (``'b'SS``, reused every
    second): each bucket compacts on its own, a restored attempt compacts into buckets of the
    failed one; every record is published once, in compacted files, nothing left hidden."""
    every_10ms = BucketAssigner.date_time_bucket_assigner("'b'SS", "UTC")
    compact = (strategy(size=100, checkpoints=2), FileCompactor.concat_file_compactor())
    # gated: a short job could end before any compaction started by checkpoint 2 or later
    sum_job_failing_once(tmp_path, point, gate=True, bucket_assigner=every_10ms, compact=compact)
    out = tmp_path / "out"
    buckets = sorted(d for d in out.iterdir() if d.is_dir())
    assert len(buckets) >= 2 and visible(out) == [b.name for b in buckets] and hidden(out) == []
    assert Counter(line for d in buckets for line in committed_lines(d)) == expected_running_sums(DATA)
    assert all(n.startswith("compacted-") for d in buckets for n in visible(d))
    assert not any(hidden(d) for d in buckets)
