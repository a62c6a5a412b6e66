"""TimerService: scripted, table-driven tests (one script = steps + exact expected output)."""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import pytest

from streamflow.runtime.events import MAX_WATERMARK, MIN_WATERMARK
from streamflow.runtime.timers import Timer, TimerService
from streamflow.state.codec import MsgpackCodec

# A step is (operation, *arguments, expected). Operations:
#   "ev+" / "ev-"  key, ns, ts -> bool       register / delete event-time timer
#   "pt+" / "pt-"  key, ns, ts -> bool       register / delete processing-time timer
#   "wm"           watermark -> [(ts, key, ns), ...]   advance_watermark
#   "now"          time -> [(ts, key, ns), ...]        advance_processing_time
#   "next_pt"      -> int | None
#   "next_ev"      -> int | None
#   "count"        -> (num_event_time_timers, num_processing_time_timers)


def _run(service: TimerService, steps: list[tuple[Any, ...]]) -> None:
    for index, (op, *args, expected) in enumerate(steps):
        if op == "ev+":
            got: Any = service.register_event_time_timer(*args)
        elif op == "ev-":
            got = service.delete_event_time_timer(*args)
        elif op == "pt+":
            got = service.register_processing_time_timer(*args)
        elif op == "pt-":
            got = service.delete_processing_time_timer(*args)
        elif op == "wm":
            got = [(t.timestamp, t.key, t.namespace) for t in service.advance_watermark(*args)]
        elif op == "now":
            got = [(t.timestamp, t.key, t.namespace) for t in service.advance_processing_time(*args)]
        elif op == "next_pt":
            got = service.next_processing_time()
        elif op == "next_ev":
            got = service.next_event_time()
        elif op == "count":
            got = (service.num_event_time_timers, service.num_processing_time_timers)
        else:  # pragma: no cover - a typo in a table
            raise AssertionError(f"unknown op {op}")
        assert got == expected, f"step {index}: {op}{tuple(args)} -> {got!r}, want {expected!r}"


SCRIPTS: dict[str, list[tuple[Any, ...]]] = {
    "fires in timestamp order, not registration order": [
        ("ev+", "a", "w", 30, True),
        ("ev+", "b", "w", 10, True),
        ("ev+", "c", "w", 20, True),
        ("wm", 25, [(10, "b", "w"), (20, "c", "w")]),
        ("wm", 30, [(30, "a", "w")]),
        ("count", (0, 0)),
    ],
    "a watermark fires timers at ts <= watermark only": [
        ("ev+", "k", None, 10, True),
        ("wm", 9, []),
        ("wm", 10, [(10, "k", None)]),
        ("wm", 10, []),
    ],
    "equal timestamps fire in registration order": [
        ("ev+", "z", 1, 5, True),
        ("ev+", "a", 1, 5, True),
        ("ev+", "m", 0, 5, True),
        ("wm", 5, [(5, "z", 1), (5, "a", 1), (5, "m", 0)]),
    ],
    "registering the same timer twice is one timer": [
        ("ev+", "k", "w", 7, True),
        ("ev+", "k", "w", 7, False),
        ("count", (1, 0)),
        ("wm", 100, [(7, "k", "w")]),
        ("count", (0, 0)),
    ],
    "timers differing in key, namespace or ts are distinct": [
        ("ev+", "k", "w", 7, True),
        ("ev+", "k2", "w", 7, True),
        ("ev+", "k", "w2", 7, True),
        ("ev+", "k", "w", 8, True),
        ("count", (4, 0)),
    ],
    "delete removes; deleting twice or unknown is a no-op": [
        ("ev+", "k", "w", 7, True),
        ("ev+", "k", "w", 8, True),
        ("ev-", "k", "w", 7, True),
        ("ev-", "k", "w", 7, False),
        ("ev-", "nobody", "w", 7, False),
        ("count", (1, 0)),
        ("wm", 100, [(8, "k", "w")]),
    ],
    "delete then re-register fires once, in its new FIFO position": [
        ("ev+", "a", 0, 5, True),
        ("ev+", "b", 0, 5, True),
        ("ev-", "a", 0, 5, True),
        ("ev+", "a", 0, 5, True),
        ("count", (2, 0)),
        ("wm", 5, [(5, "b", 0), (5, "a", 0)]),
        ("count", (0, 0)),
    ],
    "a fired timer can be registered again": [
        ("ev+", "k", 0, 5, True),
        ("wm", 5, [(5, "k", 0)]),
        ("ev+", "k", 0, 5, True),
        ("wm", 6, [(5, "k", 0)]),
    ],
    "event and processing domains are independent": [
        ("ev+", "k", "w", 5, True),
        ("pt+", "k", "w", 5, True),
        ("count", (1, 1)),
        ("now", 10, [(5, "k", "w")]),
        ("count", (1, 0)),
        ("wm", 10, [(5, "k", "w")]),
        ("pt-", "k", "w", 5, False),
    ],
    "processing time: next wake-up and firing": [
        ("next_pt", None),
        ("pt+", "k", "w", 300, True),
        ("pt+", "k", "w", 100, True),
        ("pt+", "j", "w", 200, True),
        ("next_pt", 100),
        ("now", 99, []),
        ("now", 250, [(100, "k", "w"), (200, "j", "w")]),
        ("next_pt", 300),
        ("pt-", "k", "w", 300, True),
        ("next_pt", None),
        ("now", 1000, []),
    ],
    "next wake-up skips deleted timers": [
        ("pt+", "k", 0, 1, True),
        ("pt+", "k", 0, 2, True),
        ("pt-", "k", 0, 1, True),
        ("next_pt", 2),
        ("ev+", "k", 0, 3, True),
        ("ev+", "k", 0, 4, True),
        ("ev-", "k", 0, 3, True),
        ("next_ev", 4),
    ],
    "extreme timestamps (MIN and MAX watermark)": [
        ("ev+", "k", 0, MAX_WATERMARK, True),
        ("ev+", "k", 0, MIN_WATERMARK, True),
        ("wm", MIN_WATERMARK, [(MIN_WATERMARK, "k", 0)]),
        ("wm", MAX_WATERMARK, [(MAX_WATERMARK, "k", 0)]),
    ],
    "negative timestamps": [
        ("ev+", "k", 0, -5, True),
        ("ev+", "k", 0, -10, True),
        ("wm", -6, [(-10, "k", 0)]),
        ("wm", -5, [(-5, "k", 0)]),
    ],
}


@pytest.mark.parametrize("steps", list(SCRIPTS.values()), ids=list(SCRIPTS))
def test_script(steps: list[tuple[Any, ...]]) -> None:
    _run(TimerService(), steps)


# Firing while firing: ``reactions`` maps a fired timer's key to the actions its handler
# performs (("+", key, ts) registers an event timer, ("-", key, ts) deletes one); the
# drain loop must fire every timer due at the watermark, in timestamp order.
FIRE_DURING_FIRING = {
    "handler registers an earlier-due timer, fired next": (
        [("a", 10), ("b", 30)],
        {"a": [("+", "c", 20)]},
        40,
        [("a", 10), ("c", 20), ("b", 30)],
        [],
    ),
    "handler registers a timer in the past, fired next": (
        [("a", 10), ("b", 30)],
        {"a": [("+", "p", 5)]},
        40,
        [("a", 10), ("p", 5), ("b", 30)],
        [],
    ),
    "handler registers a timer beyond the watermark: stays pending": (
        [("a", 10)],
        {"a": [("+", "late", 50)]},
        40,
        [("a", 10)],
        [(50, "late", "w")],
    ),
    "handler deletes a timer that was due": (
        [("a", 10), ("b", 20), ("c", 30)],
        {"a": [("-", "b", 20)]},
        40,
        [("a", 10), ("c", 30)],
        [],
    ),
    "chain of registrations at the same timestamp": (
        [("a", 10)],
        {"a": [("+", "b", 10)], "b": [("+", "c", 10)]},
        10,
        [("a", 10), ("b", 10), ("c", 10)],
        [],
    ),
    "handler re-registers its own timer: fires once per registration": (
        [("a", 10)],
        {"a": [("+", "a", 20)]},
        15,
        [("a", 10)],
        [(20, "a", "w")],
    ),
}


@pytest.mark.parametrize(
    ("initial", "reactions", "watermark", "expected", "pending"),
    list(FIRE_DURING_FIRING.values()),
    ids=list(FIRE_DURING_FIRING),
)
def test_fire_during_firing(
    initial: list[tuple[str, int]],
    reactions: dict[str, list[tuple[str, str, int]]],
    watermark: int,
    expected: list[tuple[str, int]],
    pending: list[tuple[int, str, str]],
) -> None:
    service = TimerService()
    for key, ts in initial:
        service.register_event_time_timer(key, "w", ts)
    fired: list[tuple[str, int]] = []
    while (timer := service.pop_event_timer(watermark)) is not None:
        assert service.current_watermark == watermark  # set before the handler runs
        fired.append((timer.key, timer.timestamp))
        for action, key, ts in reactions.pop(timer.key, []):
            if action == "+":
                service.register_event_time_timer(key, "w", ts)
            else:
                service.delete_event_time_timer(key, "w", ts)
    assert fired == expected
    assert service.snapshot()["event_time"] == pending


def test_advance_watermark_then_drain_catches_timers_registered_meanwhile() -> None:
    service = TimerService()
    service.register_event_time_timer("a", "w", 10)
    fired = service.advance_watermark(20)
    assert fired == [Timer(10, "a", "w")]
    service.register_event_time_timer("b", "w", 15)  # the handler of "a" did this
    assert service.pop_event_timer(20) == Timer(15, "b", "w")
    assert service.pop_event_timer(20) is None


@pytest.mark.parametrize(
    ("first", "second"),
    [(10, 9), (0, MIN_WATERMARK), (MAX_WATERMARK, 0)],
)
def test_watermark_never_goes_backwards(first: int, second: int) -> None:
    service = TimerService()
    service.advance_watermark(first)
    with pytest.raises(ValueError, match="backwards"):
        service.advance_watermark(second)
    with pytest.raises(ValueError, match="backwards"):
        service.pop_event_timer(second)
    assert service.current_watermark == first


def test_initial_state() -> None:
    service = TimerService()
    assert service.current_watermark == MIN_WATERMARK
    assert service.num_timers == 0
    assert service.next_processing_time() is None
    assert service.next_event_time() is None
    assert service.snapshot() == {"event_time": [], "processing_time": []}


SNAPSHOTS = {
    "empty": ([], []),
    "mixed domains, keys, namespaces": (
        [(30, "a", ("w", 1)), (10, "b", ("w", 2)), (10, "a", ("w", 1))],
        [(500, 7, None), (100, 8, None)],
    ),
    "ties keep their FIFO order": (
        [(5, "z", 0), (5, "a", 0), (5, "m", 0)],
        [(1, "z", 0), (1, "a", 0)],
    ),
}


@pytest.mark.parametrize(("event", "processing"), list(SNAPSHOTS.values()), ids=list(SNAPSHOTS))
def test_snapshot_restore_round_trip(
    event: list[tuple[int, Any, Any]], processing: list[tuple[int, Any, Any]]
) -> None:
    original = TimerService()
    for ts, key, ns in event:
        original.register_event_time_timer(key, ns, ts)
    for ts, key, ns in processing:
        original.register_processing_time_timer(key, ns, ts)
    original.delete_event_time_timer("nobody", 0, 0)
    data = original.snapshot()
    assert data["event_time"] == sorted(event, key=lambda e: e[0])  # stable: FIFO ties
    assert data["processing_time"] == sorted(processing, key=lambda e: e[0])

    restored = TimerService()
    restored.restore(data)
    assert restored.snapshot() == data
    assert restored.num_timers == original.num_timers
    assert restored.current_watermark == MIN_WATERMARK  # not part of the snapshot
    assert restored.advance_watermark(MAX_WATERMARK) == original.advance_watermark(MAX_WATERMARK)
    assert restored.advance_processing_time(MAX_WATERMARK) == (
        original.advance_processing_time(MAX_WATERMARK)
    )


def test_snapshot_excludes_deleted_and_fired_timers() -> None:
    service = TimerService()
    for ts in (1, 2, 3, 4):
        service.register_event_time_timer("k", 0, ts)
    service.delete_event_time_timer("k", 0, 3)
    service.advance_watermark(1)
    assert service.snapshot()["event_time"] == [(2, "k", 0), (4, "k", 0)]


def test_restore_with_key_filter_unions_snapshots() -> None:
    left, right = TimerService(), TimerService()
    left.register_event_time_timer(1, "w", 10)
    left.register_event_time_timer(2, "w", 20)
    right.register_event_time_timer(3, "w", 15)
    right.register_processing_time_timer(4, "w", 5)
    right.register_event_time_timer(1, "w", 10)  # duplicate across snapshots: one timer
    merged = TimerService()
    for data in (left.snapshot(), right.snapshot()):
        merged.restore(data, key_filter=lambda key: key != 2)
    assert merged.snapshot() == {
        "event_time": [(10, 1, "w"), (15, 3, "w")],
        "processing_time": [(5, 4, "w")],
    }


def test_snapshot_is_plain_data() -> None:
    service = TimerService()
    service.register_event_time_timer("k", "w", 1)
    data = service.snapshot()
    assert type(data) is dict
    assert all(type(v) is list and all(type(t) is tuple for t in v) for v in data.values())


def test_lazy_deletion_compacts_the_heap() -> None:
    service = TimerService()
    for ts in range(10_000):
        service.register_event_time_timer("k", 0, ts)
    for ts in range(0, 10_000, 2):
        service.delete_event_time_timer("k", 0, ts)
    for ts in range(1, 9_000, 2):
        service.delete_event_time_timer("k", 0, ts)
    assert service.num_event_time_timers == 500
    assert len(service._event._heap) <= 2 * 500 + 64  # dead entries do not pile up
    assert [t.timestamp for t in service.advance_watermark(MAX_WATERMARK)] == list(range(9_001, 10_000, 2))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_matches_a_naive_model(seed: int) -> None:
    """Random register/delete/advance against a plain-set model (ordered by (ts, seq))."""
    rng = random.Random(seed)
    service = TimerService()
    model: dict[tuple[int, str, int], int] = {}
    seq = 0
    watermark = MIN_WATERMARK
    for _ in range(3_000):
        ident = (rng.randrange(0, 200), rng.choice("abc"), rng.randrange(3))
        roll = rng.random()
        if roll < 0.5:
            assert service.register_event_time_timer(ident[1], ident[2], ident[0]) == (ident not in model)
            if ident not in model:
                model[ident] = seq
                seq += 1
        elif roll < 0.8:
            assert service.delete_event_time_timer(ident[1], ident[2], ident[0]) == (
                model.pop(ident, None) is not None
            )
        else:
            watermark = max(watermark, rng.randrange(0, 200))
            due = sorted((s, i) for i, s in model.items() if i[0] <= watermark)
            due.sort(key=lambda pair: (pair[1][0], pair[0]))
            expected = [Timer(i[0], i[1], i[2]) for _, i in due]
            for _, i in due:
                del model[i]
            assert service.advance_watermark(watermark) == expected
        assert service.num_event_time_timers == len(model)


@pytest.mark.parametrize("bad", [1.5, "10", None])
def test_timestamps_must_be_ints(bad: Any) -> None:
    service = TimerService()
    with pytest.raises(TypeError):
        service.register_event_time_timer("k", "w", bad)
    assert service.num_timers == 0


@pytest.mark.parametrize(("event", "processing"), list(SNAPSHOTS.values()), ids=list(SNAPSHOTS))
def test_columns_restore_the_same_timers_in_the_same_firing_order(
    event: list[tuple[int, Any, Any]], processing: list[tuple[int, Any, Any]]
) -> None:
    """The checkpoint form (``snapshot_columns``: registration order, no sort): re-registered
    in that order, the timers fire as the original's, FIFO ties included, after deletions too."""
    original = TimerService()
    for ts, key, ns in event:
        original.register_event_time_timer(key, ns, ts)
        original.register_event_time_timer("gone", ns, ts)
    for ts, key, ns in processing:
        original.register_processing_time_timer(key, ns, ts)
    for ts, _key, ns in event:
        original.delete_event_time_timer("gone", ns, ts)
    columns = original.snapshot_columns()
    assert set(columns) == {d for d, e in (("event_time", event), ("processing_time", processing)) if e}
    restored = TimerService()
    restored.restore({d: zip(*c, strict=True) for d, c in columns.items()})
    assert restored.snapshot() == original.snapshot()
    assert restored.advance_watermark(MAX_WATERMARK) == original.advance_watermark(MAX_WATERMARK)
    assert restored.advance_processing_time(MAX_WATERMARK) == original.advance_processing_time(MAX_WATERMARK)


@pytest.mark.parametrize("sharded", [False, True])
def test_full_snapshot_columns_are_read_in_slices_in_registration_order(
    monkeypatch: pytest.MonkeyPatch, sharded: bool
) -> None:
    """``timer_columns`` (a full snapshot's timers, captured at the barrier) yields after every
    slice of ``FULL_SLICE`` timers, and its columns are ``snapshot_columns``' with each
    namespace encoded (None kept), whatever the queue's layout; deletions and ties included."""
    from streamflow.runtime import timer_checkpoints, timer_queues

    monkeypatch.setattr(timer_checkpoints, "FULL_SLICE", 7)
    if sharded:
        monkeypatch.setattr(timer_queues, "SHARD_AT", 16)
    service = TimerService()
    for i in range(100):
        service.register_event_time_timer(f"k{i % 13}", ("w", i % 5) if i % 3 else None, i // 4)
        service.register_processing_time_timer(f"k{i}", None, i)
    for i in range(0, 100, 9):
        service.delete_event_time_timer(f"k{i % 13}", ("w", i % 5) if i % 3 else None, i // 4)
    out: dict[str, Any] = {}
    slices = sum(1 for _ in timer_checkpoints.timer_columns(service, lambda ns: ["enc", *ns], out))
    expected = {}
    for domain, (ts, keys, namespaces) in service.snapshot_columns().items():
        if namespaces.count(None) != len(namespaces):
            namespaces = [None if ns is None else ["enc", *ns] for ns in namespaces]
        expected[domain] = {"ts": ts, "key": keys, "ns": namespaces}
    live = {d: len(c[0]) for d, c in service.snapshot_columns().items()}
    assert out == expected and slices == sum(-(-n // 7) for n in live.values())
    # with the state codec: a part per slice, read back by columns_of as the same columns
    codec, parts = MsgpackCodec(), {}
    deque(timer_checkpoints.timer_columns(service, lambda ns: ["enc", *ns], parts, codec), maxlen=0)
    assert {d: len(p["parts"]) for d, p in parts.items()} == {d: -(-n // 7) for d, n in live.items()}
    for domain, columns in expected.items():
        want = (columns["ts"], columns["key"], columns["ns"])
        assert timer_checkpoints.columns_of(parts[domain], codec) == want
        assert timer_checkpoints.columns_of(columns, None) == want
    with pytest.raises(ValueError, match="needs the state codec"):
        timer_checkpoints.columns_of(parts["event_time"], None)
