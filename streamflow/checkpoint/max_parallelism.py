"""Restoring keyed state at another max parallelism (Flink's
``StateAssignmentOperation.checkParallelismPreconditions``).

Keyed state is split into key groups, ``max parallelism`` of them: a key belongs to key
group ``murmur(hash(key)) % max_parallelism`` and every subtask owns a contiguous range of
groups (``state/key_groups.py``). A snapshot stores its state by key group, and a restore
hands each new subtask the groups of its range. Both sides must therefore count the same
groups: a restore at another max parallelism would select groups by numbers that mean other
keys, and keys would silently lose their state.

Each checkpoint entry records its task's max parallelism; before the tasks are built, for every
keyed operator with state in the checkpoint:

* the checkpoint's max parallelism below the new parallelism is refused (some subtask would
  own no key group);
* a different max parallelism is adopted by the operator's job vertex when the user did not
  configure one (neither ``env.set_max_parallelism`` nor the operator's
  ``set_max_parallelism``: Flink's ``canRescaleMaxParallelism``), and refused naming the
  operator when the user did.

Entries written before max parallelism was recorded are not checked.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .restore import RestoredCheckpoint, StateMismatchError

if TYPE_CHECKING:
    from ..graph import JobGraph

log = logging.getLogger(__name__)


def fit_max_parallelism(restore: RestoredCheckpoint, graph: JobGraph, keyed: set[str]) -> None:
    """Check, and where allowed adopt, the checkpoint's max parallelism of each keyed uid."""
    adopted: dict[int, int] = {}  # vertex id -> the max parallelism it took from the checkpoint
    for node in graph.nodes:
        uid = graph.uid_of(node)
        stored = restore.max_parallelism.get(uid)
        if uid not in keyed or stored is None or restore.fully_finished(uid):
            continue
        vertex = graph.vertex_of[node.id]
        parallelism = graph.parallelism[node.id]
        if stored < parallelism:
            raise StateMismatchError(
                f"the state of operator uid {uid!r} cannot be restored: the maximum parallelism "
                f"({stored}) of the restored state is lower than the configured parallelism "
                f"({parallelism}); reduce the operator's parallelism to at most {stored}"
            )
        if stored == vertex.max_parallelism:
            continue
        if vertex.max_parallelism_configured or vertex.id in adopted:
            raise StateMismatchError(
                f"the maximum parallelism ({stored}) with which checkpoint {restore.source} was "
                f"taken for operator uid {uid!r} differs from its current maximum parallelism "
                f"({vertex.max_parallelism}): keyed state is stored by key group, so the number of "
                "key groups cannot change; set the same max parallelism (or none, to take the "
                "checkpoint's)"
            )
        log.info(
            "operator uid %r: max parallelism %d taken from checkpoint %s (none configured; was %d)",
            uid, stored, restore.source, vertex.max_parallelism,
        )
        vertex.max_parallelism = adopted[vertex.id] = stored
