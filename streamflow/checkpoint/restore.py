"""Reading a checkpoint back: decoding task entries and handing state to operators.

A checkpoint holds one entry per task: ``{"task": id, "parallelism": n, "ops":
<encoded {uid: state}>, "records_codec": name, "in": <encoded {channel: [batch]}>,
"out": <encoded {writer: {channel: [batch]}}>}``, prefixed by the state codec's
name and a newline. Operator state is encoded with the job's state codec;
in-flight records (unaligned channel state) with its *records codec*
(``set_records_codec``, by default the same safe codec), encoded by the task at
its snapshot so that a record the codec refuses fails the task with an error
naming the record's type and the operator (:func:`encode_channel_state`).
Entries of the former ``json`` codec still restore (read by
:mod:`streamflow.state.legacy_json`); any other codec mismatch is refused.

Operator state is found again by *uid* and subtask index, so chaining may
change between runs; keyed state is handed to every new subtask in full and
each keeps the key groups it owns, so keyed operators may change parallelism.
Channel state (unaligned checkpoints) belongs to a task; its entry lists the
channels' *layout* (which operators and subtasks each channel joined) so that,
when parallelism or chaining changed, ``runtime/channel_restore.py`` can
redistribute the in-flight records (``checkpoint/channel_rescale.py``).

Finished operators (FLIP-147): the entry of a task that had finished lists its
chain's uids under ``"finished"`` and holds no keyed state (a finished subtask
never receives a record again: all its inputs ended). Such a subtask is
deployed finished (``finished_on_restore``): it restores its operator state
(sinks commit what they had pending), runs nothing and ends its outputs. An
operator every subtask of which had finished stays finished at any
parallelism, so its non-keyed state does not block a rescale.

Validation (refusing a graph that no longer fits, with the uid named):
state for a uid that is gone (unless non-restored state is allowed), a
non-keyed stateful operator whose parallelism changed; channel state that
cannot be placed is refused by ``runtime/channel_restore.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import StreamflowError
from ..state import legacy_json
from ..state.codec import Codec, MsgpackCodec
from .storage import CheckpointHandle, CorruptCheckpointError

log = logging.getLogger(__name__)


class StateMismatchError(StreamflowError, ValueError):
    """The checkpoint's state does not fit the job being restored."""


class ChannelStateError(StreamflowError, TypeError):
    """An in-flight record cannot be encoded by the job's records codec."""


def encode_channel_state(codec: Codec, operator: str, channels: dict[Any, Any]) -> Any:
    """Encode in-flight batches (``{channel: [batch]}`` or ``{writer: {channel: [batch]}}``)
    with the records codec; ``{}`` stays ``{}``. A record the codec refuses raises
    :class:`ChannelStateError` naming its type and ``operator``."""
    if not channels:
        return {}
    try:
        return codec.encode(channels)
    except (TypeError, ValueError) as exc:
        raise _channel_state_error(codec, operator, channels, exc) from exc


def _channel_state_error(codec: Codec, operator: str, channels: dict[Any, Any], exc: Exception) -> Exception:
    """Slow path: find the first record the codec refuses, to name its type."""
    nested = channels if all(type(v) is dict for v in channels.values()) else {None: channels}
    for per_channel in nested.values():
        for batches in per_channel.values():
            for records, _ts in batches:
                for record in records:
                    try:
                        codec.encode(record)
                    except (TypeError, ValueError):
                        t = type(record)
                        return ChannelStateError(
                            f"cannot checkpoint in-flight records of type {t.__module__}.{t.__qualname__} "
                            f"at operator {operator}: the records codec {codec.name!r} refuses "
                            f"{record!r:.200} "
                            f"({exc}); make the record a supported type (a dataclass, namedtuple, tuple...), "
                            "or choose a records codec for the job: "
                            "get_checkpoint_config().set_records_codec(PickleCodec())"
                        )
    return ChannelStateError(f"cannot checkpoint in-flight records at operator {operator}: {exc}")


def encode_entry(
    codec: Codec,
    task_id: str,
    state: dict[str, Any],
    parallelism: int,
    records_codec: Codec | None = None,
    max_parallelism: int | None = None,
) -> bytes:
    """``state["in"]``/``["out"]`` come encoded by :func:`encode_channel_state` (or ``{}``),
    ``state["layout"]`` (with channel state) names their channels; ``max_parallelism``: the
    task's number of key groups (see ``max_parallelism.py``)."""
    body = codec.encode(
        {
            "task": task_id,
            "parallelism": parallelism,
            "ops": state["ops"],
            "records_codec": (records_codec or codec).name,
            "in": state["in"],
            "out": state["out"],
            **({"pickled": state["pickled"]} if state.get("pickled") else {}),
            **({"layout": state["layout"]} if state.get("layout") else {}),
            **({"finished": state["finished"]} if state.get("finished") else {}),
            **({"max_parallelism": max_parallelism} if max_parallelism is not None else {}),
        }
    )
    return codec.name.encode() + b"\n" + body


def _legacy_reader(codec: Codec, name: str) -> Codec | None:
    """The reader of an entry in the former json format, when the job uses the default codec."""
    if name == legacy_json.NAME and isinstance(codec, MsgpackCodec):
        return _LegacyJson()
    return None


class _LegacyJson:
    name = legacy_json.NAME

    def encode(self, obj: object) -> bytes:
        raise NotImplementedError("the legacy json format is read only")

    def decode(self, data: bytes) -> object:
        return legacy_json.decode(data)


def decode_entry(codec: Codec, data: bytes, where: str) -> tuple[dict[str, Any], Codec]:
    """The entry and the codec that reads its operator state."""
    raw, _, body = bytes(data).partition(b"\n")
    name = raw.decode(errors="replace")
    reader = codec if name == codec.name else _legacy_reader(codec, name)
    if reader is None:
        raise StateMismatchError(
            f"{where} was written with the {name!r} state codec, but this job uses {codec.name!r}: "
            "configure the same codec (set_state_codec) to restore it"
        )
    if reader is not codec:
        log.info("%s: reading an entry of the former %r codec", where, name)
    entry = _decoded_dict(reader, body, where)
    if "task" not in entry or "ops" not in entry:
        raise StateMismatchError(f"{where} is damaged: not a checkpoint entry (keys {sorted(entry)[:5]})")
    return entry, reader


def _decoded_dict(codec: Codec, data: bytes, where: str) -> dict[str, Any]:
    value = codec.decode(data)
    if not isinstance(value, dict):
        raise StateMismatchError(f"{where} is damaged: expected a mapping, decoded {type(value).__name__}")
    return value


def _decode_channels(
    entry: dict[str, Any], reader: Codec, records_codec: Codec, where: str
) -> tuple[Any, Any]:
    """Decode an entry's channel state; legacy entries hold it inline, decoded already."""
    written = entry.get("records_codec")
    if written is None:
        return entry["in"], entry["out"]
    if entry["in"] == {} and entry["out"] == {}:
        return {}, {}
    if written != records_codec.name:
        raise StateMismatchError(
            f"{where} holds in-flight records written with the {written!r} records codec, but this job "
            f"uses {records_codec.name!r}: configure the same codec (set_records_codec) to restore it"
        )
    return (
        records_codec.decode(entry["in"]) if entry["in"] != {} else {},
        records_codec.decode(entry["out"]) if entry["out"] != {} else {},
    )


@dataclass
class OperatorRestore:
    """What ``initialize_state`` receives on a restore."""

    own: Any  # the state of the same subtask index, or None
    all: list[Any]  # every subtask's state of this uid (keyed operators take their key groups)
    key_groups: range
    # shared files (incremental heap checkpoints, RocksDB SSTs), verified on read; None without
    read_shared: Callable[[str], bytes] | None = None
    shared_path: Callable[[str], Path] | None = None  # where a shared file of the checkpoint is
    codec: Codec | None = None  # the job's state codec


@dataclass
class RestoredCheckpoint:
    checkpoint_id: int
    source: str
    ops: dict[str, dict[int, Any]] = field(default_factory=dict)  # uid -> subtask -> state
    channels: dict[str, dict[str, Any]] = field(default_factory=dict)  # task id -> {"in", "out"}
    task_parallelism: dict[str, int] = field(default_factory=dict)  # task id -> its parallelism (every task)
    used: set[str] = field(default_factory=set)
    shared_path: Callable[[str], Path] | None = None  # the checkpoint's shared files (RocksDB SSTs)
    handle: CheckpointHandle | None = None  # where shared files are read from
    codec: Codec | None = None
    # FLIP-147: uid -> the subtasks whose operator had finished (final state, no keyed state),
    # and uid -> the parallelism it had then
    finished: dict[str, set[int]] = field(default_factory=dict)
    finished_parallelism: dict[str, int] = field(default_factory=dict)
    # uid -> the max parallelism (number of key groups) its task had; absent in older entries
    max_parallelism: dict[str, int] = field(default_factory=dict)
    # decodes the same checkpoint again (from_entries' bytes, or load's handle): see fresh()
    reload: Callable[[], RestoredCheckpoint] | None = field(default=None, repr=False)

    def fresh(self) -> RestoredCheckpoint:
        """The same checkpoint, decoded again. A restore hands the decoded state to the operators,
        which change it as they run (the heap backend adopts the decoded maps of map state), so
        a restart that restores this checkpoint once more (its attempt failed before completing
        a checkpoint of its own) must not reuse this object: it holds what the failed attempt
        left, not what the checkpoint holds."""
        if self.reload is None:
            raise RuntimeError(f"checkpoint {self.checkpoint_id} ({self.source}) cannot be decoded again")
        again = self.reload()
        again.shared_path = again.shared_path or self.shared_path
        return again

    @staticmethod
    def from_entries(
        checkpoint_id: int,
        source: str,
        entries: dict[str, bytes],
        codec: Codec,
        records_codec: Codec | None = None,
    ) -> RestoredCheckpoint:
        r = RestoredCheckpoint(checkpoint_id, source, codec=codec)
        for name, data in entries.items():
            where = f"{source}/{name}"
            try:
                entry, reader = decode_entry(codec, data, where)
                task_id = entry["task"]
                sub = int(task_id.rsplit("#", 1)[1])
                for uid, state in _decoded_dict(reader, entry["ops"], where).items():
                    r.ops.setdefault(uid, {})[sub] = state
                    if entry.get("max_parallelism") is not None:
                        r.max_parallelism[uid] = int(entry["max_parallelism"])
                for uid in entry.get("finished") or ():
                    r.finished.setdefault(uid, set()).add(sub)
                    r.finished_parallelism[uid] = int(entry["parallelism"])
                r.task_parallelism[task_id] = int(entry["parallelism"])
                inp, out = _decode_channels(entry, reader, records_codec or codec, where)
                if inp or out:
                    r.channels[task_id] = {
                        "in": inp, "out": out, "pickled": entry.get("pickled"), "layout": entry.get("layout"),
                    }  # fmt: skip
            except StateMismatchError:
                raise
            except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
                # the error names the file: a decoding error alone would not say which entry
                raise CorruptCheckpointError(
                    f"checkpoint entry {where} is damaged: {type(e).__name__}: {e}", where
                ) from e
        # the bytes are the caller's (a checkpoint kept in memory keeps them anyway)
        r.reload = lambda: RestoredCheckpoint.from_entries(
            checkpoint_id, source, entries, codec, records_codec
        )
        return r

    @staticmethod
    def load(
        handle: CheckpointHandle, codec: Codec, records_codec: Codec | None = None
    ) -> RestoredCheckpoint:
        entries = {name: handle.read(name) for name in handle.entries}
        restored = RestoredCheckpoint.from_entries(
            handle.checkpoint_id, str(handle.path), entries, codec, records_codec
        )
        restored.shared_path = handle.shared_path  # verified (sha256) when asked for
        restored.handle = handle
        restored.reload = lambda: RestoredCheckpoint.load(handle, codec, records_codec)  # read again
        return restored

    def for_operator(self, uid: str, subtask: int, key_groups: range) -> OperatorRestore | None:
        states = self.ops.get(uid)
        if states is None:
            return None
        self.used.add(uid)
        shared_path = self.shared_path
        read_shared: Callable[[str], bytes] | None = None
        if self.handle is not None:
            read_shared = self.handle.read_shared  # verified against the metadata
        elif shared_path is not None:  # kept in memory

            def read_shared(name: str) -> bytes:
                return shared_path(name).read_bytes()

        return OperatorRestore(
            states.get(subtask),
            [states[s] for s in sorted(states)],
            key_groups,
            read_shared=read_shared,
            shared_path=shared_path,
            codec=self.codec,
        )

    def fully_finished(self, uid: str) -> bool:
        """Every subtask of ``uid`` had finished (Flink's ``FullyFinishedOperatorState``): it
        stays finished at any parallelism."""
        subtasks = self.finished.get(uid)
        return subtasks is not None and len(subtasks) == self.finished_parallelism[uid]

    def finished_on_restore(self, uid: str, subtask: int, parallelism: int) -> bool:
        """Whether subtask ``subtask`` of ``uid`` (now at ``parallelism``) is deployed finished:
        its operator fully finished, or this very subtask finished at the same parallelism (a
        partially finished operator that is rescaled runs again, see docs/checkpoints.md)."""
        if self.fully_finished(uid):
            return True
        return self.finished_parallelism.get(uid) == parallelism and subtask in self.finished.get(uid, ())

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
            # an operator that redistributes its own state marks it (the FileSink does)
            rescalable = all(
                s is None or (isinstance(s, dict) and s.get("rescalable") is True) for s in states.values()
            )
            finished = self.fully_finished(uid)  # stays finished whatever its parallelism
            if uid not in keyed and stateful and not rescalable and not finished and before != now:
                raise StateMismatchError(
                    f"operator uid {uid!r} has non-keyed state from {before} subtasks but now runs "
                    f"with parallelism {now}: only keyed state can be rescaled"
                )
