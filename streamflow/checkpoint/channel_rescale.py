"""Redistributing in-flight data (unaligned channel state) when parallelism changes.

Theory of operation
-------------------
An unaligned checkpoint stores, per task, the records a barrier overtook: those
queued on its input channels (``in``) and those still in its writers' output
channels (``out``). Both halves of one logical channel -- upstream subtask ``j``
of an edge to downstream subtask ``i`` -- are records the consumer had not
processed at the checkpoint, the ``in`` half older than the ``out`` half.

Restored at the same parallelism and chaining, every task takes its own halves
back unchanged (``runtime/channel_restore.py``). When the parallelism of a task
at either end of such a channel changed (or the chaining did), the old channels
no longer exist, and the records are redistributed to the consumer's new
subtasks, as Flink does since 1.13 (FLINK-17979: ``StateAssignmentOperation``
maps the channel state by each partitioner's ``SubtaskStateMapper``, and a new
subtask filters the records of a hash edge by key group):

* each old channel's records, ``in`` then ``out`` (its FIFO order), are replayed
  straight into the consuming operator of the new subtask that owns them, before
  that subtask reads any new input; so a key's in-flight records still precede
  every record of the key produced after the restore;
* hash edges (``key_by``): each record goes to the subtask that owns its key
  group at the new parallelism (Flink: RANGE mapping plus the key-group filter);
  custom partitioning asks the user's partitioner again at the new number of
  channels;
* broadcast edges: every old subtask held its own copy; new subtask ``s``
  replays the copy of old subtask ``s mod old_p`` -- the old subtask whose
  broadcast state it restores (``state/broadcast.py``), so its state and its
  in-flight records stay one consistent view (Flink keeps broadcast channels
  aligned instead, FLINK-22815);
* every other edge (forward, rebalance, rescale, shuffle): an old channel's
  records go whole to new subtask ``i mod new_p`` (Flink's ROUND_ROBIN mapping),
  in their order.

An old channel is named by the *layout* its task recorded beside its channel
state (``runtime/channel_restore.channel_layout``), by operator uids, so the
redistribution does not depend on how the old job was chained. This module is
the pure mapping; finding the new edges and operators is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ChannelKey", "Route", "redistribute"]

Batch = tuple[list[Any], list[int] | None]  # (records, timestamps or None)


@dataclass(frozen=True, order=True)
class ChannelKey:
    """One channel of the old job: the edge into input ``input`` (index in the consumer's
    inputs) of operator ``consumer`` from ``producer``, upstream subtask ``upstream`` to
    downstream subtask ``downstream`` of the ``consumer_parallelism`` the consumer had."""

    consumer: str
    input: int
    producer: str
    upstream: int
    downstream: int
    consumer_parallelism: int


@dataclass(frozen=True)
class Route:
    """How the new job's edge for a :class:`ChannelKey` delivers records."""

    parallelism: int  # of the consumer now
    input_index: int  # which input of the consumer (1: the second of connect())
    pick: Callable[[Any], int] | None = None  # per record: its new subtask (hash, custom)
    broadcast: bool = False


# (consumer uid, new subtask) -> [(input index, batches)] in replay order
Replays = dict[tuple[str, int], list[tuple[int, list[Batch]]]]


def redistribute(channels: dict[ChannelKey, list[Batch]], route_of: Callable[[ChannelKey], Route]) -> Replays:
    """Assign every old channel's batches to the consumer's new subtasks (see the module
    doc); channels in key order, so the result does not depend on the input's order."""
    replays: Replays = {}
    for key in sorted(channels):
        batches = channels[key]
        if not batches:
            continue
        route = route_of(key)
        if route.pick is not None:
            for sub, part in _split(batches, route.pick, route.parallelism).items():
                replays.setdefault((key.consumer, sub), []).append((route.input_index, part))
        elif route.broadcast:
            for sub in range(route.parallelism):
                if sub % key.consumer_parallelism == key.downstream:
                    replays.setdefault((key.consumer, sub), []).append((route.input_index, batches))
        else:
            sub = key.downstream % route.parallelism
            replays.setdefault((key.consumer, sub), []).append((route.input_index, batches))
    return replays


def _split(batches: list[Batch], pick: Callable[[Any], int], parallelism: int) -> dict[int, list[Batch]]:
    """Each batch's records by ``pick`` (order kept within every subtask's share)."""
    out: dict[int, list[Batch]] = {}
    for records, timestamps in batches:
        parts: dict[int, tuple[list[Any], list[int] | None]] = {}
        for n, record in enumerate(records):
            sub = pick(record)
            if not 0 <= sub < parallelism:
                raise ValueError(
                    f"in-flight record {record!r:.100} routed to subtask {sub}, not in 0..{parallelism - 1}"
                )
            part = parts.get(sub)
            if part is None:
                part = parts[sub] = ([], None if timestamps is None else [])
            part[0].append(record)
            if timestamps is not None:
                part[1].append(timestamps[n])  # type: ignore[union-attr]
        for sub, part in parts.items():
            out.setdefault(sub, []).append(part)
    return out
