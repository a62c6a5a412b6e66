"""A restored FileSink subtask state, parsed and validated before any file is touched.

The state's format is in ``file_sink.py`` (the module doc) and ``file_compaction.py`` (the
``"compaction"`` entry of a bucket). Every name in it must be this sink's own part file (of the
subtask that wrote the state; a compaction group may hold files of any of the sink's subtasks,
as a rescale merges them) and every bucket id a sub-directory of the base path, so a crafted
checkpoint cannot make the sink move, truncate or delete other files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .file_buckets import check_bucket_id
from .file_compaction import group_names
from .file_sink_parts import FileSinkError, PartFiles


@dataclass
class Taken:
    """One restored subtask state this subtask is responsible for."""

    subtask: int
    next_part: int
    #: bucket id -> (pending names, in-progress (name, committed length, created ms) or None)
    buckets: dict[str, tuple[list[str], tuple[str, int, int] | None]]
    #: bucket id -> its compaction state (file_compaction.BucketCompaction.snapshot)
    compactions: dict[str, dict[str, Any]]


def validated_state(subtask: int, state: Any, uid: str, parts_of: Callable[[str], PartFiles]) -> Taken:
    """Parse the state of subtask ``subtask``, refusing any name that is not this sink's own."""
    where = f"file sink {uid!r}: restored state of subtask {subtask}"
    try:
        next_part = state["next_part"]
        raw_buckets = {"": state, **state.get("buckets", {})}
        buckets, compactions = {}, {}
        for bucket_id, raw in raw_buckets.items():
            pending = [name for _cid, names in raw["pending"] for name in names]
            ip = raw.get("in_progress")
            in_progress = None if ip is None else (ip["name"], ip["length"], ip["created_ms"])
            buckets[bucket_id] = (pending, in_progress)
            if raw.get("compaction") is not None:
                compactions[bucket_id] = raw["compaction"]
                group_names(raw["compaction"])  # (its shape)
    except (TypeError, KeyError, ValueError, AttributeError) as e:
        raise FileSinkError(f"{where} is malformed: {e!r}") from None
    if type(next_part) is not int or next_part < 0:
        raise FileSinkError(f"{where} has a bad next_part {next_part!r}")
    for bucket_id, (pending, in_progress) in buckets.items():
        try:
            check_bucket_id(bucket_id, where)
        except ValueError as e:
            raise FileSinkError(
                f"{e}: refusing to restore a checkpoint that would touch other files"
            ) from None
        parts = parts_of(bucket_id)
        for name in pending + ([in_progress[0]] if in_progress else []):
            parts.check_name(name, subtask, where)
        for name in group_names(compactions[bucket_id]) if bucket_id in compactions else []:
            parts.check_name(name, None, where)
        if in_progress is not None and not all(type(v) is int and v >= 0 for v in in_progress[1:]):
            raise FileSinkError(f"{where} has a bad in-progress length or time {in_progress!r}")
    return Taken(subtask, next_part, buckets, compactions)
