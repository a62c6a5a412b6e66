"""Incremental heap state (streamflow/state/incremental.py): columns round-trip exactly, the capture
is immune to later mutation, deltas record updates and deletions, chains materialise, and a
restore at another parallelism takes exactly its key groups."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime
import decimal
import enum
import gc
import math
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from streamflow.state import incremental
from streamflow.state.codec import MsgpackCodec
from streamflow.state.key_groups import key_group_of, key_group_range
from streamflow.state.keyed import (
    IncrementalSettings,
    KeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)

CODEC = MsgpackCodec()
MAXP = 128
DAY = datetime.timedelta(days=1)


@dataclasses.dataclass
class Point:
    x: int
    tags: list[str]


class Level(enum.IntEnum):
    LOW = 1


class Colour(enum.StrEnum):
    RED = "red"


class Name(str):
    pass


class Plain(enum.Enum):
    A = 1


class Pair(NamedTuple):
    a: int
    b: int


class Ratio(float):
    pass


class Items(list):
    pass


COLUMNS: list[tuple[str, list[Any], bytes]] = [
    ("ints", [1, -2, 2**63 - 1, 2**64 - 1, -(2**63), 0], b"S"),
    ("strs", ["a", "", "ü"], b"S"),
    ("bool_vs_int", [True, 1, False, 0], b"S"),
    ("none_float_bytes", [None, 1.5, float("inf"), -0.0, b"\x00"], b"S"),
    ("lists_and_dicts", [[1, 2], {"a": [3]}, {1: None}], b"P"),
    ("same_tuples", [("k", 1, 2), ("j", 3, 4)], b"T"),
    ("scalar_tuples", [("k", 1, 2.5, True, None, b"x"), ("j", -1, 0.0, False, None, b"")], b"T"),
    ("fields_change_type", [("k", 1), (2, "j"), (None, 1.5)], b"T"),
    ("tuple_int_bounds", [("k", 2**64 - 1, -(2**63)), ("j", True, 1)], b"T"),
    ("tuples_of_lists", [("k", [1]), ("j", [])], b"T"),
    ("tuples_of_str_keyed_dicts", [("k", {"a": [1, None]}), ("j", {})], b"T"),
    ("tuples_of_int_keyed_dicts", [("k", {1: "a"}), ("j", {})], b"T"),
    ("list_of_tuples_in_tuple", [("k", [(1, 2)])], b"C"),
    ("tuple_in_dict_in_tuple", [("k", {"a": (1,)})], b"C"),
    ("namedtuple_in_tuple", [("k", Pair(1, 2))], b"C"),
    ("namedtuples", [Pair(1, 2), Pair(3, 4)], b"C"),
    ("enum_in_tuple", [("k", Plain.A)], b"C"),
    ("str_enum_in_dict_in_tuple", [("k", {"a": Colour.RED})], b"C"),
    ("str_enum_dict_key_in_tuple", [("k", {Colour.RED: 1})], b"C"),
    ("uuid_in_tuple", [("k", uuid.UUID(int=1))], b"C"),
    ("date_time_delta_in_tuple", [("k", datetime.date(2024, 1, 2), datetime.time(1), DAY)], b"C"),
    ("ragged_tuples", [("k", 1), ("j",)], b"U"),
    ("longer_first_tuple", [("k", 1, 2), ("j",), (3, 4, 5, 6)], b"U"),
    ("nested_tuple", [("k", (1, 2))], b"C"),
    ("tuple_in_list", [[(1, 2)]], b"C"),
    ("tuple_dict_key", [{(1, 2): 3}], b"C"),
    ("mixed_tuple_and_int", [(1,), 1], b"C"),
    ("big_int", [2**70, -(2**70)], b"C"),
    ("big_int_in_tuple", [("k", 2**70)], b"C"),
    ("int_enum_in_tuple", [("k", Level.LOW), ("j", 1)], b"C"),
    ("str_enum_in_tuple", [("k", Colour.RED)], b"C"),
    ("int_enum", [Level.LOW, 1], b"C"),
    ("decimal_in_tuple", [("k", decimal.Decimal("1.10"))], b"C"),
    ("set_in_tuple", [("k", {1}), ("j", frozenset())], b"C"),
    ("sets", [{1, 2}, frozenset({3})], b"C"),
    ("common_types", [decimal.Decimal("1.10"), datetime.date(2024, 1, 2)], b"C"),
    ("datetime_in_tuple", [("k", datetime.datetime(2024, 1, 2, 3, 4, 5))], b"C"),
    ("dataclass", [Point(1, ["a"])], b"C"),
    ("empty_tuples", [(), ()], b"U"),
    ("empty", [], b"S"),
]


@pytest.mark.parametrize(("values", "tag"), [c[1:] for c in COLUMNS], ids=[c[0] for c in COLUMNS])
def test_columns_round_trip_exactly(values: list[Any], tag: bytes) -> None:
    packed = incremental.pack_column(values, CODEC)
    assert packed[:1] == tag
    back = incremental.unpack_column(packed, CODEC)
    assert back == values
    assert [type(v) for v in back] == [type(v) for v in values]
    for a, b in zip(back, values, strict=True):
        if isinstance(a, tuple):
            assert [type(x) for x in a] == [type(x) for x in b]


@pytest.mark.parametrize(
    ("values", "name"),
    [
        ([Name("a"), "b"], "Name"),
        ([("k", Name("a"))], "Name"),
        ([("k", {Name("a"): 1})], "Name"),
        ([("k", Ratio(0.5))], "Ratio"),
        ([("k", Items([1]))], "Items"),
        ([("k", collections.OrderedDict(a=1))], "OrderedDict"),
    ],
    ids=["column", "in_tuple", "dict_key_in_tuple", "float_subclass", "list_subclass", "dict_subclass"],
)
def test_a_subclass_is_refused_not_packed_as_its_base(values: list[Any], name: str) -> None:
    with pytest.raises(TypeError, match=name):
        incremental.pack_column(values, CODEC)


def test_nan_round_trips() -> None:
    back = incremental.unpack_column(
        incremental.pack_column([float("nan"), ("k", float("nan"))], CODEC), CODEC
    )
    assert math.isnan(back[0]) and math.isnan(back[1][1])


def settings(sub: int = 0, parallelism: int = 1, max_chain: int = 8) -> IncrementalSettings:
    return IncrementalSettings(f"op#{sub}", key_group_range(sub, MAXP, parallelism), CODEC, max_chain)


def _data(data: bytes | Path) -> bytes:
    """A shared file's bytes: given as bytes, or the file a snapshot child wrote (heap_fork.py)."""
    return data if isinstance(data, bytes) else data.read_bytes()


class Files:
    """Shared files by name, as storage keeps them; checkpoints are taken by :meth:`take`."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def take(
        self, backend: KeyedStateBackend, cid: int, *, savepoint: bool = False, confirm: bool = True
    ) -> dict:
        async def run() -> dict:
            upload = await backend.capture(cid, savepoint)
            assert upload is not None
            descriptor = backend.snapshot()
            produced = await upload.produce()
            assert set(upload.references) <= set(self.files)
            for name, data in produced.items():
                self.files[name] = _data(data)
            return descriptor

        descriptor = asyncio.run(run())
        if confirm and not savepoint:
            backend.checkpoint_complete(cid)
        return descriptor

    def restore(self, descriptors: list[dict], sub: int = 0, parallelism: int = 1) -> KeyedStateBackend:
        groups = key_group_range(sub, MAXP, parallelism)
        backend = KeyedStateBackend(MAXP, settings(sub, parallelism))
        backend.restore_from(descriptors, lambda g: g in groups, groups, self.files.__getitem__, CODEC)
        return backend


VALUE = ValueStateDescriptor("v")
LIST = ListStateDescriptor("l")
MAP = MapStateDescriptor("m")


def write(backend: KeyedStateBackend, key: Any, value: Any) -> None:
    backend.current_key = key
    backend.get_state(VALUE).update(value)


def tables(backend: KeyedStateBackend) -> dict[str, dict]:
    return {name: dict(t) for name, t in backend._tables.items() if t}


def test_chain_of_deltas_with_updates_and_deletions_restores_exactly() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    for k in range(100):
        write(backend, f"k{k}", k)
    base = files.take(backend, 1)
    assert len(base["chain"]) == 1 and "-base-" in base["chain"][0]
    write(backend, "k1", "updated")
    write(backend, "k2", None)  # a deletion
    write(backend, "new", (1, 2))
    d2 = files.take(backend, 2)
    assert d2["chain"][0] == base["chain"][0] and "-delta-" in d2["chain"][1]
    write(backend, "k2", "back")
    write(backend, "k3", None)
    backend.current_key = "k4"
    backend.get_state(LIST).add(1)
    backend.get_state(MAP).put("a", {"x": 1})
    d3 = files.take(backend, 3)
    assert d3["chain"][:2] == d2["chain"] and len(d3["chain"]) == 3
    restored = files.restore([d3])
    assert tables(restored) == tables(backend)
    assert restored.restored_key_types == {"str"}


def test_a_delta_holds_only_what_changed() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    for k in range(10_000):
        write(backend, k, k)
    base = files.take(backend, 1)
    write(backend, 5, -5)
    delta = files.take(backend, 2)
    assert len(files.files[delta["chain"][-1]]) * 100 < len(files.files[base["chain"][0]])
    nothing = files.take(backend, 3)  # nothing changed: an empty delta
    assert len(files.files[nothing["chain"][-1]]) < 200


def test_capture_is_immune_to_later_mutation() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    mutable = {"n": [1]}
    write(backend, "v", mutable)
    write(backend, "p", Point(1, ["a"]))
    backend.current_key = "c"
    backend.get_state(LIST).add_all([1, 2])
    backend.get_state(MAP).put("x", [1])

    async def run() -> dict:
        upload = await backend.capture(1, False)
        assert upload is not None
        descriptor = backend.snapshot()
        # records after the barrier mutate values in place before the upload encodes them
        mutable["n"].append(2)
        backend._tables["v"]["p"].tags.append("b")
        backend.current_key = "c"
        backend.get_state(LIST).add(3)
        backend.get_state(MAP).get("x").append(2)
        backend.get_state(MAP).put("y", 0)
        files.files.update((n, _data(d)) for n, d in (await upload.produce()).items())
        return descriptor

    descriptor = asyncio.run(run())
    restored = files.restore([descriptor])
    assert restored._tables["v"] == {"v": {"n": [1]}, "p": Point(1, ["a"])}
    assert restored._tables["l"] == {"c": [1, 2]}
    assert restored._tables["m"] == {"c": {"x": [1]}}


@pytest.mark.parametrize("incremental_", [True, False], ids=["incremental", "full"])
def test_a_capture_in_slices_is_not_torn_by_a_written_object_changed_meanwhile(incremental_: bool) -> None:
    """A capture encodes in slices and lets the loop run between them (other tasks go on);
    an object a function wrote to state and still holds (it emitted it: another task may hold
    it too) is changed meanwhile. State keeps its own copy of what was written
    (``runtime/detach.py``), so the snapshot is the state as of the barrier; before, later
    slices encoded the changed objects."""
    n = incremental.CHUNK * 2 + 10
    files = Files()
    if incremental_:
        backend = KeyedStateBackend(MAXP, dataclasses.replace(settings(), snapshot_process="off"))
    else:
        backend = KeyedStateBackend(MAXP, codec=CODEC, key_groups=key_group_range(0, MAXP, 1))
    state = backend.get_state(VALUE)
    emitted = []
    for k in range(n):
        backend.current_key = k
        value = [k]
        state.update(value)
        emitted.append(value)

    async def run() -> dict:
        done = False

        async def meanwhile() -> None:  # another task, between the capture's slices
            while not done:
                for value in emitted:
                    value.append(-1)
                await asyncio.sleep(0)

        other = asyncio.ensure_future(meanwhile())  # runs from the capture's first pause
        upload = await backend.capture(1, False)
        done = True
        await other
        assert upload is not None
        descriptor = backend.snapshot()
        files.files.update((name, _data(d)) for name, d in (await upload.produce()).items())
        return descriptor

    descriptor = asyncio.run(run())
    assert max(map(len, emitted)) > 2  # the other task ran during the capture
    restored = files.restore([descriptor])
    assert restored._tables["v"] == {k: [k] for k in range(n)}


def test_chain_materialises_every_max_chain_deltas() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings(max_chain=2))
    lengths = []
    for cid in range(1, 8):
        write(backend, cid, cid)
        lengths.append(len(files.take(backend, cid)["chain"]))
    assert lengths == [1, 2, 3, 1, 2, 3, 1]


def test_chain_materialises_when_deltas_outgrow_the_base() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings(max_chain=100))
    for k in range(1_000):
        write(backend, k, 0)
    lengths = [len(files.take(backend, 1)["chain"])]
    for cid in range(2, 8):
        for k in range(1_000):  # every checkpoint rewrites every key: each delta is a base's size
            write(backend, k, cid)
        lengths.append(len(files.take(backend, cid)["chain"]))
    assert lengths == [1, 2, 3, 4, 1, 2, 3]  # a base once the deltas hold more than two bases


def test_a_growing_state_is_not_rewritten() -> None:
    """The deltas are measured against what a base would take now, not against the first
    (small) base: a state that only grows never writes its keys twice."""
    files, backend = Files(), KeyedStateBackend(MAXP, settings(max_chain=100))
    write(backend, 0, 0)
    lengths = [len(files.take(backend, 1)["chain"])]
    for cid in range(2, 7):
        for k in range(cid * 1_000, (cid + 1) * 1_000):  # new keys only
            write(backend, k, cid)
        lengths.append(len(files.take(backend, cid)["chain"]))
    assert lengths == [1, 2, 3, 4, 5, 6]


def test_unconfirmed_checkpoint_changes_go_into_the_next_delta() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    write(backend, "a", 1)
    files.take(backend, 1)
    write(backend, "b", 2)
    files.take(backend, 2, confirm=False)  # aborted, or not yet confirmed
    write(backend, "c", 3)
    d3 = files.take(backend, 3)
    assert len(d3["chain"]) == 2  # chk-1's base and its own delta, which holds b and c
    assert files.restore([d3])._tables["v"] == {"a": 1, "b": 2, "c": 3}


def test_savepoint_leaves_dirty_keys_and_chain_alone() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    write(backend, "a", 1)
    files.take(backend, 1)
    write(backend, "b", 2)
    sp = files.take(backend, 2, savepoint=True)
    assert "-sp-" in sp["chain"][-1]
    backend.checkpoint_complete(2)  # a savepoint's completion is not a base for checkpoints
    d3 = files.take(backend, 3)
    assert len(d3["chain"]) == 2 and d3["chain"][-1] != sp["chain"][-1]
    assert files.restore([d3])._tables["v"] == {"a": 1, "b": 2}


def test_untracked_table_makes_snapshots_full() -> None:
    backend = KeyedStateBackend(MAXP, settings())
    backend.table("window-contents", "window")["k"] = 1
    assert asyncio.run(backend.capture(1, False)) is None
    assert "groups" in backend.snapshot()


@pytest.mark.parametrize("parallelism", [2, 3, 4])
def test_restore_at_another_parallelism_takes_its_key_groups(parallelism: int) -> None:
    files = Files()
    old = [KeyedStateBackend(MAXP, settings(s, 2)) for s in range(2)]
    expected: dict[int, int] = {}
    descriptors = []
    for k in range(2_000):
        sub = 0 if key_group_of(k, MAXP) in key_group_range(0, MAXP, 2) else 1
        write(old[sub], k, k * 10)
        expected[k] = k * 10
    for b in old:
        files.take(b, 1)
    for k in range(0, 2_000, 3):
        sub = 0 if key_group_of(k, MAXP) in key_group_range(0, MAXP, 2) else 1
        write(old[sub], k, None if k % 2 else -k)
        if k % 2:
            del expected[k]
        else:
            expected[k] = -k
    descriptors = [files.take(b, 2) for b in old]
    merged: dict[int, int] = {}
    for sub in range(parallelism):
        restored = files.restore(descriptors, sub, parallelism)
        groups = key_group_range(sub, MAXP, parallelism)
        assert all(key_group_of(k, MAXP) in groups for k in restored._tables["v"])
        merged.update(restored._tables["v"])
    assert merged == expected


def test_checkpoints_that_keep_failing_end_in_a_base() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    for k in range(100):
        write(backend, k, k)
    files.take(backend, 1)
    lengths = []
    for cid in range(2, 8):  # never confirmed: each delta repeats the ones before
        for k in range(30):
            write(backend, k, cid)
        lengths.append(len(files.take(backend, cid, confirm=False)["chain"]))
    assert lengths[0] == 2 and 1 in lengths  # the repeated deltas outgrew the base: a new one


# ------------------------------------------------------------------ the log of writes


def logged(backend: KeyedStateBackend, name: str = "reduce") -> incremental.Changes:
    _table, changes = backend.tracked_table(name, "value")
    assert changes is not None
    return changes


def test_batches_are_logged_in_order_and_a_later_write_wins() -> None:
    """An operator logs whole batches (no per-key work); a key written in several batches,
    deleted and written again, restores to its last write."""
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    files.take(backend, 1)
    for batch in ([("a", 1), ("b", 1)], [("a", 2), ("c", (1, "x"))], [("b", 3)]):
        keys, values = [k for k, _ in batch], [v for _, v in batch]
        table.update(batch)
        changes.extend(keys, values)
        keys.clear()  # the caller's lists are its own: the log copied them
    del table["c"]
    changes.delete("c")
    table["c"] = ("again",)
    changes.put("c", ("again",))
    table["d"] = 4
    changes.put("d", 4)
    del table["d"]
    changes.delete("d")
    d2 = files.take(backend, 2)
    assert len(d2["chain"]) == 2
    assert files.restore([d2])._tables["reduce"] == {"a": 2, "b": 3, "c": ("again",)}


def test_the_log_merges_its_oldest_writes_when_keys_repeat() -> None:
    """Hot keys: the log stays within twice the table's size (plus SLACK); the oldest writes
    are merged (each key once) and the delta restores exactly."""
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    files.take(backend, 1)
    for round_ in range(60):
        keys = [f"k{i}" for i in range(200)]
        values = [(k, round_) for k in keys]
        table.update(zip(keys, values, strict=True))
        changes.extend(keys, values)
        assert changes.logged <= 2 * len(table) + incremental.SLACK + 400
    assert changes.merged and len(changes) < 60 * 200
    d2 = files.take(backend, 2)
    assert len(d2["chain"]) == 2  # a few hot keys: still a delta, each key once
    assert files.restore([d2])._tables["reduce"] == {f"k{i}": (f"k{i}", 59) for i in range(200)}
    assert len(changes) == 0


def test_a_log_of_writes_spread_over_the_table_gives_up_for_a_base() -> None:
    """Writes that repeat every key of a large table (more than twice its size, over more
    than CHUNK keys): the log stops growing and gives up, the next checkpoint is a base that
    holds every write (deletions and single writes after the log gave up included), a
    savepoint meanwhile is a base too, and the checkpoint after the base is a delta again."""
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    keys = list(range(2 * incremental.CHUNK))
    table.update((k, (k, 0)) for k in keys)
    base = files.take(backend, 1)
    for round_ in range(1, 4):  # every key three times, in operator-sized batches
        for i in range(0, len(keys), 512):
            batch = keys[i : i + 512]
            values = [(k, round_) for k in batch]
            table.update(zip(batch, values, strict=True))
            changes.extend(batch, values)
            assert changes.logged <= 2 * len(table) + incremental.SLACK + 512
    assert changes.full
    for k in range(10):  # after the log gave up: deletions, single writes through state objects
        del table[k]
        changes.delete(k)
    write(backend, "late", 1)
    backend.seal_dirty()
    expected = dict(backend._tables["reduce"]), dict(backend._tables["v"])
    sp = files.take(backend, 2, savepoint=True)
    assert len(sp["chain"]) == 1 and "-base-sp-" in sp["chain"][0]
    b3 = files.take(backend, 3)
    assert len(b3["chain"]) == 1 and b3["chain"] != base["chain"] and "-base-" in b3["chain"][0]
    for descriptor in (sp, b3):
        restored = files.restore([descriptor])
        assert (restored._tables["reduce"], restored._tables["v"]) == expected
    assert not changes.full and len(changes) == 0
    table[5] = "after"
    changes.put(5, "after")
    d4 = files.take(backend, 4)
    assert d4["chain"][0] == b3["chain"][0] and len(d4["chain"]) == 2
    assert files.restore([d4])._tables["reduce"][5] == "after"


def test_a_mutable_value_logged_many_times_is_written_once_per_slice() -> None:
    """Each logged write of a list refers to the same (growing) list: it is encoded once."""
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    files.take(backend, 1)
    acc: list[int] = []
    table["k"] = acc
    for i in range(2_000):
        acc.append(i)
        changes.extend(["k"], [acc])
    d2 = files.take(backend, 2)
    delta = files.files[d2["chain"][-1]]
    assert len(delta) < 20_000  # once: 2,000 small ints; 2,000 times would be megabytes
    assert files.restore([d2])._tables["reduce"] == {"k": list(range(2_000))}


def test_a_savepoint_keeps_the_log() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    files.take(backend, 1)
    table["a"] = 1
    changes.extend(["a"], [1])
    files.take(backend, 2, savepoint=True)
    assert len(changes) == 1
    d3 = files.take(backend, 3)
    assert files.restore([d3])._tables["reduce"] == {"a": 1} and len(changes) == 0


def test_the_log_of_writes_is_not_walked_by_full_collections() -> None:
    """Logged batches are tuples: once a young collection untracked their values (tuples of
    numbers), the collector untracks the batch too, so a full collection never walks a log
    of a million writes (lists stayed tracked: 30+ ms per full collection at 1M keys)."""
    table: dict = {}
    changes = incremental.Changes(table)
    keys = list(range(2_000))
    values = [(k, 1) for k in keys]
    table.update(zip(keys, values, strict=True))
    changes.extend(keys, values)
    for k in keys[:1_500]:  # single writes, closed into batches too
        changes.put(k, (k, 2))
    changes.merged = dict.fromkeys(range(incremental.CHUNK), (0, 0))
    changes.seal()
    # two collections: one untracks a batch only if it examines the batch after its values,
    # and a full collection lists the youngest generation before the older ones (a batch
    # closed after a young collection promoted its values waits for the next collection)
    gc.collect()
    gc.collect()
    assert len(changes.batches) >= 3
    assert not [b for batch in changes.batches for b in batch if gc.is_tracked(b)]
