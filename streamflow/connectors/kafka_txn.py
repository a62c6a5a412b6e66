"""Two-phase-commit bookkeeping for the exactly-once Kafka sink: a pure, synchronous core.

Theory of operation
-------------------
The sink subtask owns one transactional producer (id ``prefix-uid-subtask``,
stable across restarts) and therefore at most one open transaction. Records
are grouped per batch into :class:`Group` objects (one topic partition each).
The book divides them into *epochs*: the records between two barriers.

* ``on_records(group)`` — the open epoch takes the group. It is sent at once
  (``True``) while the open transaction holds no pre-committed epoch; otherwise
  it waits in memory (``False``) until that epoch's transaction commits, since
  a record after barrier n must not commit with checkpoint n.
* ``on_barrier(n)`` (pre-commit; the sink flushed just before) — the open
  epoch becomes *pending* for checkpoint n and a new open epoch starts. Its
  records, packed once into a compact blob, go into the checkpoint state
  (``snapshot()``), so checkpoint n holds everything needed to redo T_n.
* ``on_complete(n)`` (checkpoint n completed) returns a :class:`CommitPlan`:
  the groups still to send into the open transaction (pending epochs <= n that
  were waiting), the marker (checkpoint id and token of the newest of them),
  and, after the commit, the groups to send into the next transaction. A
  completed checkpoint subsumes older pending epochs (their notifications may
  have been lost or their checkpoints aborted): one transaction commits them all.
* ``on_abort(n)`` changes nothing: the next completed checkpoint subsumes n.

Recovery (the hard case: a crash after checkpoint n completed, before T_n
committed). The producer writes, inside each transaction, a *marker*: the
offset of a per-subtask consumer group (``send_offsets_to_transaction``) whose
metadata is the :class:`CommitHistory` of that subtask; the broker commits the
marker atomically with the records. After a restart, re-initialising the
transactional id aborts whatever transaction was open, and
:func:`recovery_plan` keeps the restored pending epochs the history does not
name as committed; they are re-sent from state in a fresh transaction whose
marker records the newest of them.

The rule that makes this right for any restore (the latest checkpoint, or an
older savepoint taken before later checkpoints committed, or a branch that
restored earlier and reuses checkpoint ids): an epoch is identified by its
token ``run/n``, where ``run`` is random per operator instance (each attempt and
each restore has its own) and ``n`` its checkpoint id, so no two epochs ever
share a token, whatever the lineage. Within a run, committed epochs form a
prefix: the run commits its epochs in checkpoint order (a completed checkpoint
subsumes the older ones), and a recovery commits a checkpoint's whole pending
list, which is every epoch of that run after those committed when it was taken
(the book starts empty after a restore, so a pending list holds one run's
epochs). Hence the committed set is ``{run/n : n <= last[run]}`` and the marker
keeps, per run, the highest checkpoint id committed (``last``): epoch
``run/n`` was committed iff ``n <= last[run]``. Restoring an older savepoint
therefore writes nothing again (as Flink's re-commit by producer id and epoch
changes nothing), and an epoch of a branch that diverged is re-sent even when
another run committed the same checkpoint id. The history is bounded to the
``HISTORY_RUNS`` runs that committed last (a few hundred bytes of metadata,
under Kafka's ``offset.metadata.max.bytes`` of 4096); once older runs were
dropped it says so (``~``), and restoring an epoch of a run it no longer names
re-sends it with a warning (it may have been committed: a savepoint older than
``HISTORY_RUNS`` later runs). A marker of the single-token format written
before the history (``run/n``) reads as a one-run history.
That works on any broker with transactions (no producer id/epoch resumption,
which aiokafka does not offer and the test broker loses on restart); the cost
is that a checkpoint holds the records of its uncommitted epochs.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = [
    "HISTORY_RUNS", "CommitHistory", "CommitPlan", "Epoch", "Group", "TransactionBook", "pack_groups",
    "recovery_plan", "unpack_groups",
]


@dataclass
class Group:
    """Serialized records for one topic partition: parallel lists (keys and timestamps optional)."""

    topic: str
    partition: int
    values: list[Any]  # bytes, or None for a tombstone
    keys: list[Any] | None = None
    timestamps: list[int] | None = None
    headers: list[list[tuple[str, bytes | None]]] | None = None  # a header value may be null

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class Epoch:
    checkpoint_id: int | None  # None: the open epoch
    token: str
    groups: list[Group] = field(default_factory=list)
    sent: bool = False  # its groups went into the open transaction
    blob: bytes | None = None  # packed once, at its barrier

    @property
    def size(self) -> int:
        return sum(len(g) for g in self.groups)


@dataclass(frozen=True)
class CommitPlan:
    send_first: list[Group]  # into the open transaction, before the marker
    marker_checkpoint: int
    marker_token: str
    send_after: list[Group]  # into the next transaction


class TransactionBook:
    """The epochs of one sink subtask (see the module docstring). ``run`` makes tokens unique."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.pending: list[Epoch] = []  # pre-committed, in checkpoint order
        self.open = Epoch(None, "", sent=True)

    def _txn_holds_pending(self) -> bool:
        return any(e.sent for e in self.pending)

    def on_records(self, group: Group) -> bool:
        self.open.groups.append(group)
        return self.open.sent

    def on_barrier(self, checkpoint_id: int) -> None:
        if self.pending and checkpoint_id <= (self.pending[-1].checkpoint_id or 0):
            last = self.pending[-1].checkpoint_id
            raise ValueError(f"barrier {checkpoint_id} after pending checkpoint {last}")
        epoch = self.open
        if epoch.groups:
            epoch.checkpoint_id = checkpoint_id
            epoch.token = f"{self.run}/{checkpoint_id}"
            epoch.blob = pack_groups(epoch.groups)
            self.pending.append(epoch)
            self.open = Epoch(None, "", sent=False)
        else:  # nothing to commit for n; the open epoch carries on
            self.open = Epoch(None, "", sent=not self._txn_holds_pending())

    def on_complete(self, checkpoint_id: int) -> CommitPlan | None:
        """What to do now that checkpoint ``checkpoint_id`` completed; None: nothing to commit."""
        done = [e for e in self.pending if e.checkpoint_id is not None and e.checkpoint_id <= checkpoint_id]
        if not done:
            return None
        self.pending = self.pending[len(done):]
        first = [g for e in done if not e.sent for g in e.groups]
        after: list[Group] = []
        for e in self.pending:  # newer pending epochs (barrier came before this notification)
            after.extend(e.groups)
            e.sent = True
        if not self.pending:
            after.extend(self.open.groups)
            self.open.sent = True
        last = done[-1]
        return CommitPlan(first, int(last.checkpoint_id or 0), last.token, after)

    def on_abort(self, checkpoint_id: int) -> None:
        """Nothing to do: the next completed checkpoint subsumes ``checkpoint_id``."""

    def snapshot(self) -> list[list[Any]]:
        return [[e.checkpoint_id, e.token, e.blob] for e in self.pending]

    def uncommitted_records(self) -> int:
        return sum(e.size for e in self.pending) + self.open.size


HISTORY_RUNS = 32  # runs a marker remembers (module doc): ~25 bytes each


@dataclass(frozen=True)
class CommitHistory:
    """What a subtask's marker says was committed: per run, the highest checkpoint id committed
    (oldest run first), and whether older runs were dropped (module doc)."""

    last: tuple[tuple[str, int], ...] = ()
    truncated: bool = False

    @staticmethod
    def parse(metadata: str | None, where: str = "marker") -> CommitHistory:
        """The history in a marker's metadata (``[~] run/n run/n ...``; None or "": empty)."""
        last: dict[str, int] = {}
        truncated = False
        for entry in (metadata or "").split():
            if entry == "~":
                truncated = True
                continue
            run, sep, n = entry.rpartition("/")
            if not sep or not run or not n.isdigit():
                raise ValueError(f"{where}: malformed committed-epoch entry {entry!r} in {metadata!r}")
            last.pop(run, None)
            last[run] = int(n)
        return CommitHistory(tuple(last.items()), truncated)

    def text(self) -> str:
        return " ".join((["~"] if self.truncated else []) + [f"{run}/{n}" for run, n in self.last])

    def committed(self, token: str) -> bool:
        run, _, n = token.rpartition("/")
        return int(n) <= dict(self.last).get(run, -1)

    def knows(self, token: str) -> bool:
        """Whether the history can tell about ``token``'s run (not dropped, or nothing dropped)."""
        return not self.truncated or token.rpartition("/")[0] in dict(self.last)

    def with_commit(self, token: str) -> CommitHistory:
        """The history once the epochs of ``token``'s run up to its checkpoint id committed too."""
        run, _, n = token.rpartition("/")
        last = dict(self.last)
        top = max(int(n), last.pop(run, -1))
        items = [*last.items(), (run, top)]
        drop = max(0, len(items) - HISTORY_RUNS)
        return CommitHistory(tuple(items[drop:]), self.truncated or drop > 0)


def recovery_plan(pending: list[list[Any]], history: CommitHistory) -> list[list[Any]]:
    """Restored pending epochs ``[[checkpoint id, token, blob], ...]``: those the marker's
    ``history`` does not name as committed (module doc), to re-send; ``[]``: all committed."""
    return [entry for entry in pending if not history.committed(str(entry[1]))]


# -- packing: a compact binary form of groups, built with C-speed joins -----------------
_NONE = -1


def _lengths(items: Sequence[bytes | None]) -> bytes:
    return array("i", [_NONE if b is None else len(b) for b in items]).tobytes()


def pack_groups(groups: list[Group]) -> bytes:
    """``u32 header length, orjson header, then per group: lengths and payload arrays``."""
    header = []
    body: list[bytes] = []
    for g in groups:
        # a header value may be null (Kafka's RecordHeader(key, null)): JSON null
        hdrs = None if g.headers is None else [[[k, None if v is None else v.decode("latin-1")] for k, v in h]
                                               for h in g.headers]
        header.append([g.topic, g.partition, len(g.values), g.keys is not None, g.timestamps is not None,
                       hdrs])
        body.append(_lengths(g.values))
        body.append(b"".join(v for v in g.values if v is not None))
        if g.keys is not None:
            body.append(_lengths(g.keys))
            body.append(b"".join(k for k in g.keys if k is not None))
        if g.timestamps is not None:
            body.append(array("q", g.timestamps).tobytes())
    head = orjson.dumps(header)
    return struct.pack("<I", len(head)) + head + b"".join(body)


def unpack_groups(blob: bytes) -> list[Group]:
    (n_head,) = struct.unpack_from("<I", blob, 0)
    header = orjson.loads(blob[4:4 + n_head])
    view = memoryview(blob)
    pos = 4 + n_head

    def take_items(n: int) -> list[bytes | None]:
        nonlocal pos
        lens = array("i")
        lens.frombytes(view[pos:pos + 4 * n])
        pos += 4 * n
        out: list[bytes | None] = []
        for ln in lens:
            if ln == _NONE:
                out.append(None)
            else:
                out.append(bytes(view[pos:pos + ln]))
                pos += ln
        return out

    groups = []
    for topic, partition, n, has_keys, has_ts, headers in header:
        values = take_items(n)
        keys = take_items(n) if has_keys else None
        timestamps = None
        if has_ts:
            ts = array("q")
            ts.frombytes(view[pos:pos + 8 * n])
            pos += 8 * n
            timestamps = ts.tolist()
        hdrs = None if headers is None else [[(k, None if v is None else v.encode("latin-1")) for k, v in h]
                                             for h in headers]
        groups.append(Group(topic, partition, values, keys, timestamps, hdrs))
    return groups
