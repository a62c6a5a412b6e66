"""A job's index of completed checkpoints: Flink's completed checkpoint store, as one file.

Theory of operation
-------------------
``<directory>/_completed-<job key>.json`` holds the job's name, ``latest`` (the id of its
latest completed checkpoint; 0 once the job began and before any completed) and
``completed`` (the ids of the retained completed checkpoints, oldest first). The storage
rewrites it atomically right after a checkpoint's ``_metadata`` is durable: **that write is
the commit point** of a checkpoint. A ``chk-<id>`` of the job that the index does not list
is debris of a write killed before its commit, however intact it looks.

An index without ``completed`` was written by an older version: the storage then counts
every complete ``chk-<id>`` of the job up to ``latest`` (what that version did).
Anything else unexpected in the file raises :class:`DamagedCheckpointError`: the storage
refuses to guess which checkpoint completed last.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ._fs import DamagedCheckpointError
from .metadata import FORMAT_VERSION
from .shared_files import job_key

__all__ = ["INDEX_PREFIX", "encode", "path", "read"]

INDEX_PREFIX = "_completed-"


def path(directory: Path, job_name: str) -> Path:
    return directory / f"{INDEX_PREFIX}{job_key(job_name)}.json"


def encode(job_name: str, latest: int, completed: list[int]) -> bytes:
    index = {"format_version": FORMAT_VERSION, "job_name": job_name, "latest": latest, "completed": completed}
    return orjson.dumps(index, option=orjson.OPT_INDENT_2)


def read(index_path: Path, job_name: str) -> tuple[int, list[int] | None] | None:
    """``(latest, completed ids or None for an older index)``; ``None``: there is no index."""
    try:
        index: Any = orjson.loads(index_path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as e:
        raise DamagedCheckpointError(f"the checkpoint index {index_path} is damaged: {e}", index_path) from e
    latest = index.get("latest") if isinstance(index, dict) else None
    completed = index.get("completed") if isinstance(index, dict) else None
    if (
        not isinstance(index, dict)
        or index.get("job_name") != job_name
        or type(latest) is not int
        or latest < 0
        or not (completed is None or (type(completed) is list and all(type(c) is int for c in completed)))
    ):
        message = f"the checkpoint index {index_path} is damaged: {index!r:.200}"
        raise DamagedCheckpointError(message, index_path)
    return latest, completed
