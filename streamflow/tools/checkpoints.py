"""Reading checkpoint directories for people: ``streamflow checkpoints list`` and ``inspect``.

Everything here only reads. A checkpoint directory is listed whether or not it
is complete (a ``chk-<id>`` without a valid ``_metadata`` is debris of an
interrupted write and is shown as such); ``inspect`` verifies every entry's
size and sha256 and breaks the state down per task (subtask), per operator uid
and into channel state, the way Flink's checkpoint details page does.

Per-operator sizes are the size of each operator's state re-encoded alone with
the checkpoint's codec: they add up to roughly the entry size, not exactly
(the entry also holds framing). Entries written with the pickle codec are only
decoded when the caller trusts them (``trust_pickle``): unpickling runs code.
"""

from __future__ import annotations

import re
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..checkpoint.storage import (
    METADATA_FILE,
    CheckpointHandle,
    CheckpointStorageError,
    FileSystemCheckpointStorage,
)
from ..state import legacy_json
from ..state.codec import Codec, MsgpackCodec, PickleCodec

_CHK = re.compile(r"chk-(\d+)")


@dataclass
class CheckpointRow:
    """One line of ``checkpoints list``."""

    path: str
    checkpoint_id: int | None
    job_name: str | None
    kind: str | None
    timestamp_ms: int | None
    size_bytes: int
    complete: bool
    problem: str | None = None


@dataclass
class SubtaskDetail:
    task: str
    subtask: int
    parallelism: int
    entry: str
    size_bytes: int
    operators: dict[str, int] = field(default_factory=dict)  # uid -> state bytes
    finished: list[str] = field(default_factory=list)  # uids the subtask had finished (FLIP-147)
    channel_state_bytes: int = 0
    input_channel_batches: int = 0
    output_channel_batches: int = 0


@dataclass
class CheckpointDetail:
    """Everything ``checkpoints inspect`` reports."""

    path: str
    checkpoint_id: int
    job_name: str
    kind: str
    timestamp_ms: int
    size_bytes: int
    complete: bool
    valid: bool
    problems: list[str] = field(default_factory=list)
    codec: str | None = None
    subtasks: list[SubtaskDetail] = field(default_factory=list)
    operators: dict[str, int] = field(default_factory=dict)  # uid -> bytes over all subtasks
    # uids finished on some subtask (FLIP-147: no keyed state kept, deployed finished on restore)
    finished: list[str] = field(default_factory=list)
    channel_state_bytes: int = 0
    stats: dict[str, Any] = field(default_factory=dict)  # durations and alignment, when recorded

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _dir_size(path: Path) -> int:
    """The bytes of the files in ``path``; a checkpoint being written renames its temporary
    files meanwhile (a live job's directory): a file gone between listing and stat counts 0."""
    total = 0
    for f in path.iterdir():
        try:
            st = f.stat()
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            total += st.st_size
    return total


def list_checkpoints(directory: str | Path) -> list[CheckpointRow]:
    """Every ``chk-<id>`` under ``directory`` (or the savepoint ``directory`` itself), by id."""
    root = Path(directory)
    if not root.is_dir():
        raise CheckpointStorageError(f"no checkpoint directory at {root}", root)
    if (root / METADATA_FILE).exists():
        candidates = [root]
    else:
        candidates = sorted(
            (p for p in root.iterdir() if p.is_dir() and _CHK.fullmatch(p.name)),
            key=lambda p: int(p.name[4:]),
        )
    storage = FileSystemCheckpointStorage(root)
    rows = []
    for path in candidates:
        match = _CHK.fullmatch(path.name)
        try:
            h = storage.load(path)
        except CheckpointStorageError as e:
            rows.append(
                CheckpointRow(
                    str(path),
                    int(match.group(1)) if match else None,
                    None,
                    None,
                    None,
                    _dir_size(path),
                    False,
                    str(e),
                )
            )
            continue
        size = sum(i.size for i in h.entry_info.values())
        rows.append(
            CheckpointRow(str(path), h.checkpoint_id, h.job_name, h.kind.value, h.timestamp_ms, size, True)
        )
    return rows


def _codec_named(name: str, trust_pickle: bool) -> Codec | None:
    if name == MsgpackCodec.name:
        return MsgpackCodec()
    if name == legacy_json.NAME:
        return _LegacyJson()
    if name == PickleCodec.name and trust_pickle:
        return PickleCodec()
    return None


def inspect_checkpoint(path: str | Path, *, trust_pickle: bool = False) -> CheckpointDetail:
    """Verify and break down one checkpoint or savepoint (its directory or ``_metadata`` file)."""
    handle: CheckpointHandle = FileSystemCheckpointStorage(Path(path).parent).load(path)
    detail = CheckpointDetail(
        path=str(handle.path),
        checkpoint_id=handle.checkpoint_id,
        job_name=handle.job_name,
        kind=handle.kind.value,
        timestamp_ms=handle.timestamp_ms,
        size_bytes=sum(i.size for i in handle.entry_info.values()),
        complete=True,
        valid=True,
        stats=_recorded_stats(handle.path),
    )
    for name in handle.entries:
        try:
            data = handle.read(name)
        except CheckpointStorageError as e:
            detail.valid = False
            detail.problems.append(str(e))
            continue
        codec_name, _, body = data.partition(b"\n")
        detail.codec = codec_name.decode(errors="replace")
        codec = _codec_named(detail.codec, trust_pickle)
        if codec is None:
            detail.problems.append(
                f"entry {name}: written with the {detail.codec!r} codec; per-operator sizes not shown"
                + (" (pass --trust-pickle to decode it)" if detail.codec == PickleCodec.name else "")
            )
            continue
        try:
            detail.subtasks.append(_subtask(codec, name, len(data), body, trust_pickle))
        except Exception as e:  # a decodable-but-malformed entry makes the checkpoint invalid
            detail.valid = False
            detail.problems.append(f"entry {name} cannot be decoded: {e!r}")
    for sub in detail.subtasks:
        detail.channel_state_bytes += sub.channel_state_bytes
        for uid, size in sub.operators.items():
            detail.operators[uid] = detail.operators.get(uid, 0) + size
    detail.finished = sorted({uid for sub in detail.subtasks for uid in sub.finished})
    detail.subtasks.sort(key=lambda s: (s.task, s.subtask))
    return detail


class _LegacyJson:
    """Entries of the former json codec: read with its decoder, sized as msgpack would write them."""

    name = legacy_json.NAME

    def encode(self, obj: object) -> bytes:
        return MsgpackCodec().encode(obj)

    def decode(self, data: bytes) -> object:
        return legacy_json.decode(data)


def _subtask(codec: Codec, entry: str, size: int, body: bytes, trust_pickle: bool = False) -> SubtaskDetail:
    decoded: Any = codec.decode(body)
    task_id = str(decoded["task"])
    head, _, sub = task_id.rpartition("#")
    ops: Any = codec.decode(decoded["ops"]) if decoded["ops"] else {}
    detail = SubtaskDetail(
        task=head,
        subtask=int(sub),
        parallelism=int(decoded.get("parallelism", 1)),
        entry=entry,
        size_bytes=size,
    )
    for uid, state in ops.items():
        detail.operators[str(uid)] = len(codec.encode(state))
    detail.finished = [str(uid) for uid in decoded.get("finished") or ()]
    ins, outs = decoded.get("in") or {}, decoded.get("out") or {}
    records_name = decoded.get("records_codec")
    if records_name is not None:  # channel state comes encoded by the job's records codec
        detail.channel_state_bytes = sum(len(b) for b in (ins, outs) if isinstance(b, bytes))
        records = _codec_named(str(records_name), trust_pickle)
        if records is None:
            return detail
        ins = records.decode(ins) if isinstance(ins, bytes) else ins
        outs = records.decode(outs) if isinstance(outs, bytes) else outs
    elif ins or outs:
        detail.channel_state_bytes = len(codec.encode(ins)) + len(codec.encode(outs))
    detail.input_channel_batches = sum(len(b) for b in ins.values())
    detail.output_channel_batches = sum(len(b) for chs in outs.values() for b in chs.values())
    return detail


def _recorded_stats(path: Path) -> dict[str, Any]:
    """Durations and alignment recorded in ``_metadata`` (``stats``), when the writer recorded them."""
    try:
        meta = orjson.loads((path / METADATA_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    stats = meta.get("stats") if isinstance(meta, dict) else None
    return stats if isinstance(stats, dict) else {}
