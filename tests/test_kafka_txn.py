"""Table tests of the exactly-once Kafka sink's pure bookkeeping (``connectors.kafka_txn``)."""

from __future__ import annotations

import pytest

from streamflow.connectors.kafka_txn import (
    HISTORY_RUNS,
    CommitHistory,
    Group,
    TransactionBook,
    pack_groups,
    recovery_plan,
    unpack_groups,
)


def g(*values: str) -> Group:
    return Group("out", 0, [v.encode() for v in values])


def names(groups: list[Group]) -> list[str]:
    return [v.decode() for grp in groups for v in grp.values]


def test_records_flow_into_the_open_transaction_until_a_barrier():
    book = TransactionBook("r")
    assert book.on_records(g("a")) is True  # sent at once
    book.on_barrier(1)
    assert book.on_records(g("b")) is False  # after barrier 1: waits until T_1 commits
    plan = book.on_complete(1)
    assert plan is not None
    assert (names(plan.send_first), plan.marker_checkpoint, plan.marker_token, names(plan.send_after)) == (
        [], 1, "r/1", ["b"])
    assert book.on_records(g("c")) is True  # the next transaction is open again
    assert book.pending == []


def test_a_lost_notification_is_subsumed_by_the_next_completed_checkpoint():
    book = TransactionBook("r")
    book.on_records(g("a"))
    book.on_barrier(1)
    book.on_records(g("b"))
    book.on_abort(1)
    book.on_barrier(2)
    assert [e.checkpoint_id for e in book.pending] == [1, 2]
    plan = book.on_complete(2)
    assert plan is not None
    assert (names(plan.send_first), plan.marker_checkpoint, names(plan.send_after)) == (["b"], 2, [])
    assert book.pending == []


def test_a_barrier_before_the_previous_notification_keeps_the_newer_epoch_out_of_the_commit():
    book = TransactionBook("r")
    book.on_records(g("a"))
    book.on_barrier(1)
    book.on_records(g("b"))
    book.on_barrier(2)
    book.on_records(g("c"))
    plan = book.on_complete(1)
    assert plan is not None
    assert (names(plan.send_first), names(plan.send_after)) == ([], ["b"])  # c waits for T_2
    assert book.on_records(g("d")) is False
    plan = book.on_complete(2)
    assert plan is not None
    assert (plan.marker_token, names(plan.send_first), names(plan.send_after)) == ("r/2", [], ["c", "d"])


def test_empty_epochs_commit_nothing():
    book = TransactionBook("r")
    book.on_barrier(1)
    assert book.snapshot() == []
    assert book.on_complete(1) is None
    assert book.on_records(g("a")) is True


def test_stale_barrier_is_refused():
    book = TransactionBook("r")
    book.on_records(g("a"))
    book.on_barrier(3)
    with pytest.raises(ValueError):
        book.on_barrier(2)


@pytest.mark.parametrize(
    ("marker", "resend"),
    [
        (None, [4, 5]),  # nothing committed: re-send all
        ("other-run/9", [4, 5]),  # a marker of another run says nothing about these
        ("r/4", [5]),  # T_4 committed, T_5 not (the single-token marker written before the history)
        ("r/5", []),  # all committed
        ("r/7", []),  # an older savepoint of the run: its epochs committed since
        ("r/3 b/5", [4, 5]),  # a branch restored from checkpoint 3 reused ids 4 and 5: not these
        ("r/4 b/9", [5]),
        ("~ b/9", [4, 5]),  # r dropped from the history: re-sent (with a warning)
    ],
)
def test_recovery_plan(marker, resend):
    pending = [[4, "r/4", b"x"], [5, "r/5", b"y"]]
    todo = recovery_plan(pending, CommitHistory.parse(marker))
    assert [e[0] for e in todo] == resend


def test_commit_history_keeps_the_last_runs_and_says_when_it_dropped_some():
    h = CommitHistory.parse("a/3").with_commit("b/2").with_commit("a/5")
    assert h.text() == "b/2 a/5"  # per run its highest id; the run committed last, last
    assert CommitHistory.parse(h.text()) == h
    assert h.with_commit("b/1").text() == "a/5 b/2"  # a recovery never lowers a run's id
    for i in range(HISTORY_RUNS):
        h = h.with_commit(f"run{i}/1")
    assert h.truncated and len(h.last) == HISTORY_RUNS and h.text().startswith("~ ")
    assert not h.knows("a/1") and h.knows(f"run{HISTORY_RUNS - 1}/9")
    for i in range(HISTORY_RUNS):  # the longest: 12-hex runs at checkpoint ids of 10 digits
        h = h.with_commit(f"{i:012x}/{10**10 - 1}")
    assert len(h.text()) < 1024  # far under Kafka's offset.metadata.max.bytes (4096)
    with pytest.raises(ValueError, match="malformed"):
        CommitHistory.parse("no-slash")


def test_pack_round_trip():
    groups = [
        Group("a", 0, [b"v1", None, b""], [b"k", None, b"kk"], [1, 2, 3], [[("h", b"\xff\x00")], [], []]),
        Group("b", 3, [b"x" * 1000]),
    ]
    back = unpack_groups(pack_groups(groups))
    assert back == groups
