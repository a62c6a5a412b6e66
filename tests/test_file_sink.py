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
from streamflow.clock import SYSTEM_CLOCK, Clock
from streamflow.connectors.file_sink import (
    Encoder,
    FileSink,
    FileSinkError,
    FileSinkOperator,
    OutputFileConfig,
    RollingPolicy,
)
from streamflow.runtime.context import OperatorContext
from streamflow.runtime.metrics import MetricGroup
from streamflow.runtime.operator import Output
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
) -> FileSinkOperator:
    builder = FileSink.for_row_format(str(base), encoder or Encoder.simple_string_encoder())
    if config is not None:
        builder = builder.with_output_file_config(config)
    if policy is not None:
        builder = builder.with_rolling_policy(policy)
    op = builder.build().create_operator("Sink")
    assert isinstance(op, FileSinkOperator)
    ctx = OperatorContext(
        uid=uid,
        name="Sink",
        task_name="Sink",
        subtask_index=subtask,
        parallelism=2,
        max_parallelism=128,
        clock=clock,
        metrics=MetricGroup(f"{uid}[{subtask}]", {}),
        processing_time=None,  # type: ignore[arg-type]  # the sink never uses timers
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
            self.op.notify_checkpoint_complete(args[0])
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
    script = Script(tmp_path)
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


async def test_file_names_and_state_format(tmp_path: Path) -> None:
    op = make_op(tmp_path, uid="my-sink", subtask=3)
    op.initialize_state(None)
    await op.process_batch(["x"], None)
    assert hidden(tmp_path) == [".part-my-sink-3-0.inprogress"]
    state = op.snapshot_state(7)
    assert state == {"next_part": 1, "pending": [[7, ["part-my-sink-3-0"]]]}
    assert roundtrip(state) == state
    assert hidden(tmp_path) == [".part-my-sink-3-0.pending"]
    await op.process_batch(["y"], None)
    assert op.snapshot_state(8) == {
        "next_part": 2,
        "pending": [[7, ["part-my-sink-3-0"]], [8, ["part-my-sink-3-1"]]],
    }
    assert op.snapshot_state(9)["pending"] == [[7, ["part-my-sink-3-0"]], [8, ["part-my-sink-3-1"]]]
    op.notify_checkpoint_complete(7)
    assert op.snapshot_state(10) == {"next_part": 2, "pending": [[8, ["part-my-sink-3-1"]]]}
    assert (visible(tmp_path), hidden(tmp_path)) == (["part-my-sink-3-0"], [".part-my-sink-3-1.pending"])


async def test_output_file_config(tmp_path: Path) -> None:
    config = OutputFileConfig.builder().with_part_prefix("out").with_part_suffix(".txt").build()
    assert config == OutputFileConfig(part_prefix="out", part_suffix=".txt")
    script = Script(tmp_path, config=config)
    for step in [("write", "ab"), ("snap", 1), ("write", "c"), ("crash", 1), ("write", "d"), ("snap", 2)]:
        await script.run(step)
    script.op.notify_checkpoint_complete(2)
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
    script = Script(tmp_path)
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
    ops = {key: make_op(tmp_path, uid=key[0], subtask=key[1]) for key in [("s", 0), ("s", 1), ("t", 0)]}
    for (uid, sub), op in ops.items():
        op.initialize_state(None)
        await op.process_batch([f"{uid}{sub}-1"], None)
        op.snapshot_state(1)
        await op.process_batch([f"{uid}{sub}-2"], None)
    # ("s", 1) crashes and restarts fresh: only its own hidden files go
    restarted = make_op(tmp_path, uid="s", subtask=1)
    restarted.initialize_state(None)
    assert hidden(tmp_path) == [
        ".part-s-0-0.pending",
        ".part-s-0-1.inprogress",
        ".part-t-0-0.pending",
        ".part-t-0-1.inprogress",
    ]
    ops["s", 0].notify_checkpoint_complete(1)
    ops["t", 0].snapshot_state(2)
    ops["t", 0].notify_checkpoint_complete(2)
    assert visible(tmp_path) == ["part-s-0-0", "part-t-0-0", "part-t-0-1"]
    assert hidden(tmp_path) == [".part-s-0-1.inprogress"]


async def test_json_lines_encoder(tmp_path: Path) -> None:
    records = [{"k": "a", "v": 1}, {"k": "b", "v": [1.5, None]}, "s", 3]
    script = Script(tmp_path, encoder=Encoder.json_lines_encoder())
    for step in [("write", records[:2]), ("write", records[2:]), ("snap", 1), ("complete", 1)]:
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
    for step in [("write", "abc"), ("write", "de"), ("snap", 1), ("complete", 1)]:
        await script.run(step)
    assert calls == [list("abc"), list("de")]
    assert committed(tmp_path) == list("abcde")


@pytest.mark.parametrize(
    ("policy", "advance_ms", "files"),
    [
        (RollingPolicy.on_checkpoint_rolling_policy(), 10**6, 1),
        (RollingPolicy.default_rolling_policy(part_size=4), 0, 3),  # "a\nb\n" fills a file
        (RollingPolicy.default_rolling_policy(rollover_interval=100, inactivity_interval=10**6), 60, 2),
        (RollingPolicy(inactivity_interval=50), 60, 3),
    ],
    ids=["on-checkpoint", "size", "rollover", "inactivity"],
)
async def test_rolling_policy(tmp_path: Path, policy: RollingPolicy, advance_ms: int, files: int) -> None:
    clock = ManualClock(1_000)
    op = make_op(tmp_path, policy=policy, clock=clock)
    op.initialize_state(None)
    for batch in (["a", "b"], ["c", "d"], ["e"]):
        await op.process_batch(batch, None)
        clock.advance(advance_ms)
    assert visible(tmp_path) == []
    op.snapshot_state(1)
    op.notify_checkpoint_complete(1)
    assert (len(visible(tmp_path)), hidden(tmp_path)) == (files, [])
    assert committed(tmp_path) == list("abcde")


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
