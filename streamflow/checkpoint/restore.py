"""Reading a checkpoint back: decoding task entries and handing state to operators.

A checkpoint holds one entry per task: ``{"task": id, "ops": <encoded
{uid: state}>, "in": {channel: [batch]}, "out": {writer: {channel: [batch]}}}``,
prefixed by the codec's name. Operator state is found again by *uid* and
subtask index, so chaining may change between runs; keyed state is handed to
every new subtask in full and each keeps the key groups it owns, so keyed
operators may change parallelism. Channel state (unaligned checkpoints)
belongs to a task and needs the same graph and parallelism.

Validation (refusing a graph that no longer fits, with the uid named):
state for a uid that is gone (unless non-restored state is allowed), a
non-keyed stateful operator whose parallelism changed, channel state for a
task that does not exist any more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import StreamflowError
from ..state.codec import Codec
from .storage import CheckpointHandle, CorruptCheckpointError


class StateMismatchError(StreamflowError, ValueError):
    """The checkpoint's state does not fit the job being restored."""


def encode_entry(codec: Codec, task_id: str, state: dict[str, Any], parallelism: int) -> bytes:
    body = codec.encode(
        {
            "task": task_id,
            "parallelism": parallelism,
            "ops": state["ops"],
            "in": state["in"],
            "out": state["out"],
        }
    )
    return codec.name.encode() + b"\n" + body


def decode_entry(codec: Codec, data: bytes, where: str) -> dict[str, Any]:
    name, _, body = bytes(data).partition(b"\n")
    if name.decode(errors="replace") != codec.name:
        raise StateMismatchError(
            f"{where} was written with the {name.decode(errors='replace')!r} state codec, but this job "
            f"uses {codec.name!r}: configure the same codec (set_state_codec) to restore it"
        )
    return _decoded_dict(codec, body, where)


def _decoded_dict(codec: Codec, data: bytes, where: str) -> dict[str, Any]:
    value = codec.decode(data)
    if not isinstance(value, dict):
        raise StateMismatchError(f"{where} is damaged: expected a mapping, decoded {type(value).__name__}")
    return value


@dataclass
class OperatorRestore:
    """What ``initialize_state`` receives on a restore."""

    own: Any  # the state of the same subtask index, or None
    all: list[Any]  # every subtask's state of this uid (keyed operators take their key groups)
    key_groups: range


@dataclass
class RestoredCheckpoint:
    checkpoint_id: int
    source: str
    ops: dict[str, dict[int, Any]] = field(default_factory=dict)  # uid -> subtask -> state
    channels: dict[str, dict[str, Any]] = field(default_factory=dict)  # task id -> {"in", "out"}
    task_parallelism: dict[str, int] = field(default_factory=dict)  # task id -> its parallelism
    used: set[str] = field(default_factory=set)

    @staticmethod
    def from_entries(
        checkpoint_id: int, source: str, entries: dict[str, bytes], codec: Codec
    ) -> RestoredCheckpoint:
        r = RestoredCheckpoint(checkpoint_id, source)
        for name, data in entries.items():
            where = f"{source}/{name}"
            try:
                entry = decode_entry(codec, data, where)
                task_id = entry["task"]
                sub = int(task_id.rsplit("#", 1)[1])
                for uid, state in _decoded_dict(codec, entry["ops"], where).items():
                    r.ops.setdefault(uid, {})[sub] = state
                if entry["in"] or entry["out"]:
                    r.channels[task_id] = {"in": entry["in"], "out": entry["out"]}
                    r.task_parallelism[task_id] = int(entry["parallelism"])
            except StateMismatchError:
                raise
            except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
                # the error names the file: a decoding error alone would not say which entry
                raise CorruptCheckpointError(
                    f"checkpoint entry {where} is damaged: {type(e).__name__}: {e}", where
                ) from e
        return r

    @staticmethod
    def load(handle: CheckpointHandle, codec: Codec) -> RestoredCheckpoint:
        entries = {name: handle.read(name) for name in handle.entries}
        return RestoredCheckpoint.from_entries(handle.checkpoint_id, str(handle.path), entries, codec)

    def for_operator(self, uid: str, subtask: int, key_groups: range) -> OperatorRestore | None:
        states = self.ops.get(uid)
        if states is None:
            return None
        self.used.add(uid)
        return OperatorRestore(states.get(subtask), [states[s] for s in sorted(states)], key_groups)

    def check_fits(self, parallelism_of: dict[str, int], keyed: set[str], allow_non_restored: bool) -> None:
        for uid, states in self.ops.items():
            if uid not in parallelism_of:
                if allow_non_restored:
                    continue
                raise StateMismatchError(
                    f"checkpoint {self.source} holds state for operator uid {uid!r}, which is not in "
                    "this job: set the same uid() on the operator, or allow non-restored state "
                    "(execution.savepoint.ignore-unclaimed-state)"
                )
            before, now = len(states), parallelism_of[uid]
            stateful = any(s is not None for s in states.values())
            if uid not in keyed and stateful and before != now:
                raise StateMismatchError(
                    f"operator uid {uid!r} has non-keyed state from {before} subtasks but now runs "
                    f"with parallelism {now}: only keyed state can be rescaled"
                )
        for task_id, before in self.task_parallelism.items():
            head = task_id.rsplit("#", 1)[0]
            if parallelism_of.get(head) != before:
                raise StateMismatchError(
                    f"checkpoint {self.source} holds in-flight data (unaligned channel state) of task "
                    f"{task_id!r} at parallelism {before}, which this job does not have: in-flight "
                    "records cannot be redistributed; restore from an aligned savepoint to rescale"
                )
