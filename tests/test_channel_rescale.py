"""Table tests of ``checkpoint/channel_rescale.redistribute``: where in-flight records of an
unaligned checkpoint go when the consumer's parallelism changed (Flink's
``SubtaskStateMapper`` rules, FLINK-17979; ``StateAssignmentOperationTest`` checks the same
mappings on Flink's side: RANGE for hash edges plus the key-group filter, ROUND_ROBIN for
rebalance/shuffle/rescale, and, here, broadcast copies from ``s mod old_p``)."""

from __future__ import annotations

from typing import Any

import pytest

from streamflow.checkpoint.channel_rescale import ChannelKey, Route, redistribute


def key(i: int, j: int = 0, *, old_p: int = 2, consumer: str = "op", input: int = 0) -> ChannelKey:
    return ChannelKey(consumer, input, "up", j, i, old_p)


def records_by_sub(replays: dict[tuple[str, int], list[tuple[int, list[Any]]]]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for (_uid, sub), parts in replays.items():
        for _input, batches in parts:
            for records, _ts in batches:
                out.setdefault(sub, []).extend(records)
    return out


@pytest.mark.parametrize(
    ("old_p", "new_p", "expected"),
    [
        (2, 1, {0: ["a0", "a1", "b0", "b1"]}),  # down: everything to the one subtask, channel order
        (2, 3, {0: ["a0", "a1"], 1: ["b0", "b1"]}),  # up: i mod new_p, subtask 2 gets none
        (3, 2, {0: ["a0", "a1", "c0", "c1"], 1: ["b0", "b1"]}),  # 2 mod 2 = 0 joins subtask 0 after 0's own
        (2, 2, {0: ["a0", "a1"], 1: ["b0", "b1"]}),
    ],
)
def test_round_robin_edges_move_whole_channels_in_order(old_p: int, new_p: int, expected: dict) -> None:
    channels = {
        key(i, old_p=old_p): [([f"{c}0", f"{c}1"], None)] for i, c in zip(range(old_p), "abc", strict=False)
    }
    replays = redistribute(channels, lambda k: Route(new_p, 0))
    assert records_by_sub(replays) == expected


@pytest.mark.parametrize("new_p", [1, 2, 3, 5])
def test_hash_edges_split_records_by_their_new_owner_keeping_order_and_timestamps(new_p: int) -> None:
    records = [(n % 7, n) for n in range(40)]
    batches = [
        (records[:25], [r[1] * 10 for r in records[:25]]),
        (records[25:], [r[1] * 10 for r in records[25:]]),
    ]
    owner = lambda r: r[0] % new_p  # noqa: E731  (stands for the key group's subtask)
    replays = redistribute({key(0): batches}, lambda k: Route(new_p, 0, pick=owner))
    got = records_by_sub(replays)
    assert sorted(r for rs in got.values() for r in rs) == sorted(records)  # none lost, none doubled
    for sub, rs in got.items():
        assert all(owner(r) == sub for r in rs)
        assert [r[1] for r in rs] == sorted(r[1] for r in rs)  # input order kept per subtask
    for (_uid, _sub), parts in replays.items():
        for _input, bs in parts:
            for rs, ts in bs:
                assert ts == [r[1] * 10 for r in rs]  # timestamps travel with their records


def test_hash_split_refuses_a_subtask_out_of_range() -> None:
    with pytest.raises(ValueError, match="routed to subtask 4"):
        redistribute({key(0): [([1], None)]}, lambda k: Route(2, 0, pick=lambda r: 4))


@pytest.mark.parametrize(
    ("old_p", "new_p", "copies"),
    [
        (2, 4, {0: 0, 1: 1, 2: 0, 3: 1}),  # new s replays old s mod old_p's copy (as its broadcast state)
        (3, 2, {0: 0, 1: 1}),  # old subtask 2's copy is the surplus one
        (2, 1, {0: 0}),
        (1, 3, {0: 0, 1: 0, 2: 0}),
    ],
)
def test_broadcast_edges_give_every_new_subtask_exactly_one_copy(
    old_p: int, new_p: int, copies: dict
) -> None:
    # each old subtask i had its own copy; their progress differed (i records already processed)
    channels = {key(i, old_p=old_p): [([f"r{n}" for n in range(i, 4)], None)] for i in range(old_p)}
    replays = redistribute(channels, lambda k: Route(new_p, 1, broadcast=True))
    got = records_by_sub(replays)
    assert set(got) == set(range(new_p))
    for sub, old in copies.items():
        assert got[sub] == [f"r{n}" for n in range(old, 4)]
    assert {parts[0][0] for parts in replays.values()} == {1}  # the broadcast (second) input


def test_channels_of_several_upstream_subtasks_and_inputs_keep_their_input_index() -> None:
    channels = {
        key(0, 0, input=0): [(["x"], None)],
        key(0, 1, input=0): [(["y"], None)],
        key(1, 0, input=1): [(["z"], None)],
    }
    replays = redistribute(channels, lambda k: Route(1, k.input))
    assert replays == {("op", 0): [(0, [(["x"], None)]), (0, [(["y"], None)]), (1, [(["z"], None)])]}


def test_empty_channels_are_skipped_and_the_result_does_not_depend_on_input_order() -> None:
    a = {key(1): [(["b"], None)], key(0): [(["a"], None)], key(0, 1): []}
    b = dict(reversed(list(a.items())))
    route = lambda k: Route(1, 0)  # noqa: E731
    assert (
        redistribute(a, route)
        == redistribute(b, route)
        == {("op", 0): [(0, [(["a"], None)]), (0, [(["b"], None)])]}
    )
