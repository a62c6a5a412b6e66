"""The declared type of a stream names the codec of its in-flight records in checkpoints.

Theory of operation
-------------------
Unaligned checkpoints store the records a barrier overtook (*channel state*):
per input channel of a task (``{channel: [batch]}``) and per output channel of
each of its writers (``{writer: {channel: [batch]}}``), a batch being
``(records, timestamps)``. The task encodes them at its snapshot with the job's
records codec (``restore.encode_channel_state``).

As for keyed state (``state/typed.py``), the type a program declared for the
stream a channel carries (``output_type=`` / ``type_info=``, recorded on the
producing node by ``api/typed.py`` as ``StreamNode.declared_types``) chooses
how its records are checkpointed:

* ``Types.PICKLED_BYTE_ARRAY()`` opts the stream in to pickling, as PyFlink
  pickles such records: each record of the channel is pickled
  (:func:`pickle_channels`) before the records codec sees the batch, and the
  entry lists the channel under ``"pickled"`` (``{"in": [channel...], "out":
  [[writer, channel]...]}``). Any picklable object may then be in flight, also
  one the job's records codec refuses.
* Every other declared type (rows -- ``Row`` with its field names --, tuples,
  primitives, dates...) and an undeclared one use the job's records codec
  (MessagePack with exact extension types unless ``set_records_codec`` chose
  another), as before.

Unpickling runs code chosen by whoever wrote the bytes, so a restore unpickles
a channel's records only when the *running* job declares that channel's stream
pickled (:func:`restored_channels`); a checkpoint that lists a channel as
pickled while the running job declares another type (or none) for it is
refused with an error naming the task and the channel. A checkpoint alone can
never make a job unpickle. Side outputs carry the job's records codec (their
tag's type is not recorded on the node).
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

from ..errors import StreamflowError

__all__ = ["PickledChannelError", "declared_pickled", "pickle_channels", "restored_channels"]


class PickledChannelError(StreamflowError, ValueError):
    """A checkpoint's pickled in-flight records meet a channel the running job does not declare pickled."""


def declared_pickled(type_info: Any) -> bool:
    from ..types.typeinfo import PickledBytesTypeInfo

    return isinstance(type_info, PickledBytesTypeInfo)


def _pickled_batches(batches: list[Any]) -> list[Any]:
    return [([pickle.dumps(r, pickle.HIGHEST_PROTOCOL) for r in records], ts) for records, ts in batches]


def _unpickled_batches(batches: list[Any]) -> list[Any]:
    return [([pickle.loads(r) for r in records], ts) for records, ts in batches]


def pickle_channels(
    inp: dict[int, list[Any]],
    out: dict[int, dict[int, list[Any]]],
    input_types: Sequence[Any],
    writer_types: Sequence[Any],
) -> tuple[dict[int, list[Any]], dict[int, dict[int, list[Any]]], dict[str, list[Any]]]:
    """The channel state with the records of pickled streams pickled, and the ``"pickled"`` listing
    (empty when no channel of the state carries a pickled stream)."""
    listing: dict[str, list[Any]] = {}
    pickled_in = [c for c in inp if c < len(input_types) and declared_pickled(input_types[c])]
    if pickled_in:
        inp = {c: (_pickled_batches(b) if c in pickled_in else b) for c, b in inp.items()}
        listing["in"] = sorted(pickled_in)
    pickled_out = [w for w in out if w < len(writer_types) and declared_pickled(writer_types[w])]
    if pickled_out:
        out = {
            w: ({c: _pickled_batches(b) for c, b in chs.items()} if w in pickled_out else chs)
            for w, chs in out.items()
        }
        listing["out"] = sorted([w, c] for w in pickled_out for c in out[w])
    return inp, out, listing


def restored_channels(
    task_id: str,
    inp: dict[int, list[Any]],
    out: dict[int, dict[int, list[Any]]],
    listing: dict[str, list[Any]] | None,
    input_types: Sequence[Any],
    writer_types: Sequence[Any],
) -> tuple[dict[int, list[Any]], dict[int, dict[int, list[Any]]]]:
    """Unpickle the channels the checkpoint lists as pickled, each only if the running job declares
    its stream ``Types.PICKLED_BYTE_ARRAY()``; refuse otherwise."""
    if not listing:
        return inp, out

    def check(type_info: Any, where: str) -> None:
        if not declared_pickled(type_info):
            declared = "no type" if type_info is None else f"type {type_info}"
            raise PickledChannelError(
                f"the checkpoint holds pickled in-flight records for {where} of task {task_id!r}, but this "
                f"job declares {declared} for that stream: records are unpickled only for a stream the "
                "running job declares Types.PICKLED_BYTE_ARRAY() (unpickling runs code from the checkpoint)"
            )

    inp = dict(inp)
    for c in listing.get("in", []):
        check(input_types[c] if c < len(input_types) else None, f"input channel {c}")
        if c in inp:
            inp[c] = _unpickled_batches(inp[c])
    out = {w: dict(chs) for w, chs in out.items()}
    for w, c in listing.get("out", []):
        check(writer_types[w] if w < len(writer_types) else None, f"output channel {c} of writer {w}")
        if c in out.get(w, {}):
            out[w][c] = _unpickled_batches(out[w][c])
    return inp, out
