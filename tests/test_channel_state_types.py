"""A stream's declared type names the codec of its in-flight records in unaligned checkpoints
(``checkpoint/channel_types.py``): ``Types.PICKLED_BYTE_ARRAY()`` streams are pickled per
record, unpickled on restore only where the running job declares them pickled; row types
come back as ``Row`` with their field names."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.checkpoint.channel_types import PickledChannelError, pickle_channels, restored_channels
from streamflow.checkpoint.restore import ChannelStateError, RestoredCheckpoint
from streamflow.checkpoint.storage import FileSystemCheckpointStorage
from streamflow.common import Row, Types


class Opaque:
    """Not a type the default records codec carries: only pickling can."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Opaque({self.n})"


# Unaligned checkpoints hold in-flight records only when a checkpoint finds a channel with data
# queued. The slow map drains 10 ms of input (the loop budget, ~4 batches of 8) per slice; a
# channel of 256 records so stays mostly full while the source (which fills it in its own
# slice) injects the barrier. With 32, the map could drain the channel within one slice, and
# the source then injected every barrier into an empty channel.
CAPACITY = 256


def pickled_checkpoints(directory: Path) -> list[tuple[int, dict[str, Any]]]:
    """(checkpoint id, channel state) of the task entries that list pickled channels."""
    out = []
    for handle in FileSystemCheckpointStorage(directory).complete_checkpoints():
        restored = RestoredCheckpoint.load(handle, sf.CheckpointConfig().codec)
        out += [(handle.checkpoint_id, s) for s in restored.channels.values() if s.get("pickled")]
    return out


def latest_holds_pickled(directory: Path) -> bool:
    handle = FileSystemCheckpointStorage(directory).latest_complete()
    if handle is None:
        return False
    restored = RestoredCheckpoint.load(handle, sf.CheckpointConfig().codec)
    return any(s.get("pickled") for s in restored.channels.values())


class SlowFailOnce(sf.MapFunction):
    """Slow (backpressure upstream: unaligned checkpoints hold in-flight records); fails once, at
    a record >= ``at`` once the latest completed checkpoint holds pickled in-flight records (the
    one the restart restores, unless another completes in between)."""

    failed: set[str] = set()

    def __init__(self, directory: Path, at: int) -> None:
        self.directory, self.at, self.seen = directory, at, 0

    def map(self, value: Opaque) -> Opaque:
        assert type(value) is Opaque, value  # (restored records arrive unpickled)
        time.sleep(0.0003)
        self.seen += 1
        key = str(self.directory)
        due = value.n >= self.at and key not in SlowFailOnce.failed and self.seen % 4 == 0
        if due and latest_holds_pickled(self.directory):
            SlowFailOnce.failed.add(key)
            raise RuntimeError("injected failure")
        return value


def opaque_job(
    tmp_path: Path, n: int, declare: bool = True, fail: bool = True, out: list[str] | None = None
) -> sf.StreamExecutionEnvironment:
    """``out``: collect the output in this list (a sink without state) instead of the file sink."""
    env = sf.StreamExecutionEnvironment().set_parallelism(2).set_batch_size(8).set_channel_capacity(CAPACITY)
    env.enable_checkpointing(10)
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    cfg.set_max_retained_checkpoints(1000).enable_unaligned_checkpoints()
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(3, 0))
    pickled = Types.PICKLED_BYTE_ARRAY() if declare else None
    lines = (
        env.from_collection([Opaque(i) for i in range(n)], type_info=pickled)
        .uid("src")
        .key_by(lambda o: o.n % 5)
        .map(SlowFailOnce(tmp_path / "chk", n // 2 if fail else n), output_type=pickled)
        .uid("slow")
        .map(lambda o: str(o.n), output_type=Types.STRING())
    )
    if out is not None:
        lines.add_sink(out.append)
    else:
        sink = sf.FileSink.for_row_format(str(tmp_path / "out"), sf.Encoder.simple_string_encoder()).build()
        lines.sink_to(sink).uid("sink")
    return env


def committed(directory: Path) -> Counter[str]:
    lines: Counter[str] = Counter()
    for f in sorted(directory.iterdir()):
        if f.is_file() and not f.name.startswith("."):
            lines.update(f.read_text().splitlines())
    return lines


def test_a_pickled_stream_checkpoints_its_in_flight_records_and_restores_them(tmp_path: Path) -> None:
    """No records codec chosen: the declared type alone lets unaligned checkpoints carry the
    objects; the job fails after such a checkpoint, restores it (from the files) and the
    output is exactly once."""
    n = 1200
    result = opaque_job(tmp_path, n).execute("opaque")
    assert result.metrics["job.numRestarts"] == 1
    restored = result.metrics["job.restoredCheckpointId"]
    assert restored >= 1
    assert committed(tmp_path / "out") == Counter(str(i) for i in range(n))
    held = pickled_checkpoints(tmp_path / "chk")
    assert held, "no checkpoint held pickled in-flight records"
    for _cid, state in held:  # stored as pickled bytes, listed per channel
        for c in state["pickled"].get("in", []):
            assert all(type(r) is bytes for records, _ in state["in"][c] for r in records)
        for w, c in state["pickled"].get("out", []):
            assert all(type(r) is bytes for records, _ in state["out"][w][c] for r in records)
    assert restored >= min(cid for cid, _ in held)  # (it is one of them unless another completed meanwhile)


def test_restore_unpickles_only_where_the_running_job_declares_it(tmp_path: Path) -> None:
    """A checkpoint holding pickled in-flight records, restored by a new job (as after a kill):
    the job that declares the stream pickled gets the objects back (its map asserts every
    record is an ``Opaque``); one that does not declare it is refused naming the channel, as the
    checkpoint alone never makes a job unpickle."""
    result = opaque_job(tmp_path, 1200).execute("opaque")
    assert result.metrics["job.numRestarts"] == 1
    cid, _state = pickled_checkpoints(tmp_path / "chk")[-1]
    path = next(
        h.path
        for h in FileSystemCheckpointStorage(tmp_path / "chk").complete_checkpoints()
        if h.checkpoint_id == cid
    )
    out: list[str] = []
    again = opaque_job(tmp_path / "again", 1200, fail=False, out=out)
    # (the file sink's state is left behind: its files belong to the first run)
    again.configure(
        {"execution.savepoint.path": str(path), "execution.savepoint.ignore-unclaimed-state": True}
    )
    assert again.execute("opaque").metrics["job.restoredCheckpointId"] == cid
    assert out and len(out) == len(set(out))
    refused = opaque_job(tmp_path / "refused", 1200, declare=False)
    refused.configure({"execution.savepoint.path": str(path)})
    with pytest.raises(PickledChannelError, match="declares no type for that stream"):
        refused.execute("opaque")


def test_undeclared_opaque_records_are_still_refused_by_the_default_codec(tmp_path: Path) -> None:
    env = opaque_job(tmp_path, 1200, declare=False)
    env.set_restart_strategy(sf.RestartStrategies.no_restart())
    with pytest.raises(ChannelStateError, match="Opaque"):
        env.execute("opaque")


def test_channel_state_listing_round_trip() -> None:
    """The helpers alone: only declared channels are pickled; restore checks each listed one."""
    pickled, plain = Types.PICKLED_BYTE_ARRAY(), Types.STRING()
    inp = {0: [([Opaque(1)], None)], 1: [(["a"], None)]}
    out = {0: {1: [([Opaque(2)], [5])]}, 1: {0: [(["b"], None)]}}
    enc_in, enc_out, listing = pickle_channels(inp, out, [pickled, plain], [pickled, None])
    assert listing == {"in": [0], "out": [[0, 1]]}
    assert type(enc_in[0][0][0][0]) is bytes and enc_in[1] == inp[1] and enc_out[1] == out[1]
    back_in, back_out = restored_channels("t#0", enc_in, enc_out, listing, [pickled, plain], [pickled, None])
    assert back_in[0][0][0][0].n == 1 and back_out[0][1][0][0][0].n == 2 and back_out[0][1][0][1] == [5]
    with pytest.raises(PickledChannelError, match="input channel 0 of task 't#0'"):
        restored_channels("t#0", enc_in, enc_out, listing, [plain, plain], [pickled, None])
    assert pickle_channels(inp, {}, [plain, plain], []) == (inp, {}, {})


ROW = Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()])


class SlowRows(sf.MapFunction):
    failed: set[str] = set()

    def __init__(self, key: str) -> None:
        self.key = key

    def map(self, value: Any) -> Any:
        time.sleep(0.0003)
        assert type(value) is Row and value.name == f"n{value.id}", value
        if value.id == 700 and self.key not in SlowRows.failed:
            SlowRows.failed.add(self.key)
            raise RuntimeError("injected failure")
        return value


def test_a_row_named_stream_restores_rows_with_their_names(tmp_path: Path) -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(2).set_batch_size(8).set_channel_capacity(CAPACITY)
    env.enable_checkpointing(10)
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    cfg.set_max_retained_checkpoints(1000).enable_unaligned_checkpoints()
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(3, 0))
    rows = env.from_collection([(i, f"n{i}") for i in range(1000)], type_info=ROW).uid("src")
    out: list[Any] = []
    rows.key_by(lambda r: r.id % 5).map(SlowRows(str(tmp_path)), output_type=ROW).uid("slow").map(
        lambda r: f"{r.id}:{r.name}", output_type=Types.STRING()
    ).sink_to(
        sf.FileSink.for_row_format(str(tmp_path / "out"), sf.Encoder.simple_string_encoder()).build()
    ).uid("sink")
    result = env.execute("rows")
    assert result.metrics["job.numRestarts"] == 1
    assert committed(tmp_path / "out") == Counter(f"{i}:n{i}" for i in range(1000))
    in_flight = []
    for handle in FileSystemCheckpointStorage(tmp_path / "chk").complete_checkpoints():
        for state in RestoredCheckpoint.load(handle, sf.CheckpointConfig().codec).channels.values():
            assert not state.get("pickled")
            in_flight += [r for batches in state["in"].values() for records, _ in batches for r in records]
            in_flight += [
                r
                for chs in state["out"].values()
                for batches in chs.values()
                for records, _ in batches
                for r in records
            ]
    assert in_flight and all(type(r) is Row and r.name == f"n{r.id}" for r in in_flight)
    del out
