"""Patch frames (state/heap_frames.py): a delta of the keyed sum of a tuple field writes the keys
and the changed field only, and a restore rebuilds exactly the live tuples, at the same or
another parallelism; the log groups batches by patch; a patch the restored state cannot take
fails loudly, naming the key."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgpack
import pytest

import streamflow as sf
from streamflow.checkpoint.storage import FileSystemCheckpointStorage
from streamflow.state import incremental
from streamflow.state.heap_frames import apply_patch, patch_frame
from streamflow.state.key_groups import key_group_of, key_group_range
from streamflow.state.keyed import KeyedStateBackend
from tests.test_incremental_state import CODEC, MAXP, Files, settings

# ---------------------------------------------------------------- apply_patch, table-driven


def frame_of(keys: list, values: list, fields: tuple[int, ...]) -> list:
    """A patch frame of ``fields`` of ``values`` (one field as the capture writes it, more
    fields as a restore reads them)."""
    frame = msgpack.unpackb(
        patch_frame("t", keys, [v[fields[0]] for v in values], fields[0], CODEC, set()),
        raw=False,
        use_list=True,
    )
    for f in fields[1:]:
        more = msgpack.unpackb(patch_frame("t", keys, [v[f] for v in values], f, CODEC, set()), raw=False)
        frame[3] += more[3]
        frame[4] += more[4]
    return frame


PATCHES: list[tuple[str, dict, list, list, tuple[int, ...], dict]] = [
    # name, table before, keys, their new values (live), fields patched, table after
    ("one field", {"a": ("a", 1, 9), "b": ("b", 2, 8)}, ["a", "b"], [("a", 10, 9), ("b", 20, 8)], (1,),
     {"a": ("a", 10, 9), "b": ("b", 20, 8)}),
    ("a key twice: the later wins", {"a": ("a", 1, 9)}, ["a", "a"], [("a", 2, 9), ("a", 3, 9)], (1,),
     {"a": ("a", 3, 9)}),
    ("two fields", {1: (1, 2, 3, 4)}, [1], [(10, 2, 30, 4)], (0, 2), {1: (10, 2, 30, 4)}),
    ("bools stay bools, big ints stay exact", {"k": ("k", 0, None)}, ["k", "k"],
     [("k", True, None), ("k", 2**70, None)], (1,), {"k": ("k", 2**70, None)}),
    ("bool then int", {"k": ("k", 0), "j": ("j", 0)}, ["k", "j"], [("k", True), ("j", 1)], (1,),
     {"k": ("k", True), "j": ("j", 1)}),
    ("tuples of different lengths", {"a": (1, 2), "b": (1, 2, 3)}, ["a", "b"], [(1, 5), (1, 6, 3)], (1,),
     {"a": (1, 5), "b": (1, 6, 3)}),
    ("untouched keys stay", {"a": ("a", 1), "z": ("z", 0)}, ["a"], [("a", 2)], (1,),
     {"a": ("a", 2), "z": ("z", 0)}),
    ("a float field", {"a": ("a", 1.5)}, ["a"], [("a", float("inf"))], (1,), {"a": ("a", float("inf"))}),
]  # fmt: skip


@pytest.mark.parametrize(("before", "keys", "values", "fields", "after"), [p[1:] for p in PATCHES],
                         ids=[p[0] for p in PATCHES])  # fmt: skip
def test_a_patch_frame_rebuilds_the_live_tuples_exactly(
    before: dict, keys: list, values: list, fields: tuple[int, ...], after: dict
) -> None:
    frame = frame_of(keys, values, fields)
    table = dict(before)
    apply_patch(table, incremental.unpack_column(frame[2], CODEC), frame, CODEC, None)
    assert table == after
    assert [list(map(type, v)) for v in table.values()] == [list(map(type, v)) for v in after.values()]


def test_a_patch_applies_only_the_kept_keys() -> None:
    frame = frame_of(["a", "b"], [("a", 5), ("b", 6)], (1,))
    table = {"a": ("a", 1)}  # "b" lies in another subtask's key groups: not here, not applied
    apply_patch(table, ["a", "b"], frame, CODEC, lambda k: k == "a")
    assert table == {"a": ("a", 5)}


BROKEN: list[tuple[str, dict, list, tuple[int, ...], str]] = [
    ("a key the state does not hold", {"a": ("a", 1)}, ["a", "b"], (1,), "'b'"),
    ("a value that is not a tuple", {"a": ("a", 1), "b": ["b", 1]}, ["a", "b"], (1,), "'b'"),
    ("a tuple too short", {"a": ("a", 1), "b": ("b",)}, ["a", "b"], (1,), "'b'"),
]


@pytest.mark.parametrize(
    ("before", "keys", "fields", "named"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN]
)
def test_a_patch_the_state_cannot_take_fails_naming_the_key(
    before: dict, keys: list, fields: tuple[int, ...], named: str
) -> None:
    frame = frame_of(keys, [("x", 2)] * len(keys), fields)
    with pytest.raises(ValueError, match=named):
        apply_patch(dict(before), keys, frame, CODEC, None)


def test_a_patch_frame_with_columns_of_the_wrong_length_is_refused() -> None:
    frame = frame_of(["a", "b"], [("a", 1), ("b", 2)], (1,))
    with pytest.raises(ValueError, match="columns"):
        apply_patch({"a": ("a", 0)}, ["a"], frame, CODEC, None)


# ---------------------------------------------------------------- the log


def test_the_log_yields_consecutive_batches_of_one_patch_together() -> None:
    changes = incremental.Changes({})
    for keys, patch in ((["a"], None), (["b", "c"], 1), (["d"], 1), (["e"], None), (["f"], 2)):
        changes.extend(keys, [(k, 1, 2) for k in keys], patch)
    changes.put("g", 1)
    got = [(keys, values, patch) for keys, values, _unique, patch in changes.columns(consume=True)]
    assert got == [
        (["a"], [("a", 1, 2)], None), (["b", "c", "d"], [1, 1, 1], 1), (["e"], [("e", 1, 2)], None),
        (["f"], [2], 2), (["g"], [1], None),
    ]  # fmt: skip


def test_a_log_of_values_carrying_their_keys_reads_as_one_with_keys() -> None:
    """``extend(None, values, patch)`` (a key-first table: field 0 of each value is its key)
    keeps the values only; read back, it gives the same columns as the same batches logged
    with their keys: the keys from field 0, a patch batch's field from the whole values."""
    batches = [(["a"], None), (["b", "c"], 1), (["d"], 1), (["e"], None), (["f"], 2)]
    with_keys, by_value = incremental.Changes({}), incremental.Changes({})
    for keys, patch in batches:
        values = [(k, 1, 2) for k in keys]
        with_keys.extend(keys, values, patch)
        by_value.extend(None, values, patch)
    assert by_value.batches[1] == (None, (("b", 1, 2), ("c", 1, 2)), 1)  # no keys, whole values
    assert len(by_value) == len(with_keys) == 6

    def read(changes: incremental.Changes) -> list:
        return [(list(k), list(v), u, p) for k, v, u, p in changes.columns(consume=True)]

    assert read(by_value) == read(with_keys)


@pytest.mark.parametrize("hot", [False, True])
def test_a_log_of_values_carrying_their_keys_merges_and_restores_exactly(hot: bool) -> None:
    """The keyed sum's log of a key-first table (no keys kept): hot keys make it merge its
    oldest batches (whole values keyed by field 0, no table lookup), and a delta restores
    exactly, with deletions and a key whose first write comes after the base."""
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    changes.shape, changes.key_first = 3, True
    table.update((f"k{i}", (f"k{i}", 0, "x")) for i in range(100))
    files.take(backend, 1)
    for round_ in range(1, 120 if hot else 3):
        keys = [f"k{i}" for i in range(100) if f"k{i}" in table]
        values = [(k, table[k][1] + round_, table[k][2]) for k in keys]
        table.update(zip(keys, values, strict=True))
        changes.extend(None, values, 1)
        if round_ == 2:
            del table["k3"]
            changes.delete("k3")
            table["new"] = ("new", 5, "y")
            changes.extend(None, [table["new"]])
    assert bool(changes.merged) is hot  # the oldest batches were merged
    d2 = files.take(backend, 2)
    assert len(d2["chain"]) == 2 and files.restore([d2])._tables["reduce"] == table


def test_merging_a_patch_batch_takes_the_whole_values_from_the_table() -> None:
    """Hot keys: the log merges its oldest batches into whole values; a patch batch logged
    only its field, so the merge takes each key's value from the table (a deleted key: a
    deletion), and a delta restores exactly."""
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    table.update((f"k{i}", (f"k{i}", 0, "x")) for i in range(100))
    files.take(backend, 1)
    for round_ in range(1, 120):
        sums(backend, [f"k{i}" for i in range(100)], round_, True)
        if round_ == 50:
            del table["k3"]
            changes.delete("k3")
            table["k3"] = ("k3", 0, "again")
            changes.extend(["k3"], [("k3", 0, "again")])
    assert changes.merged  # the oldest batches were merged
    d2 = files.take(backend, 2)
    assert len(d2["chain"]) == 2 and files.restore([d2])._tables["reduce"] == table


# ---------------------------------------------------------------- chains through the backend


def sums(backend: KeyedStateBackend, keys: list, round_: int, patch: bool) -> None:
    """A round of the keyed sum: field 1 of each key's tuple changes, the rest is carried."""
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    values = [(k, table[k][1] + round_, table[k][2]) for k in keys]
    table.update(zip(keys, values, strict=True))
    changes.extend(keys, values, 1 if patch else None)


def frames_of(data: bytes) -> list:
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    return list(unpacker)


@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_chain_with_patch_frames_restores_exactly_at_any_parallelism(parallelism: int) -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    keys = [f"k{i}" for i in range(3_000)]
    table.update((k, (k, i, f"first-{i}")) for i, k in enumerate(keys))
    files.take(backend, 1)  # a base
    sums(backend, keys[::2], 1, True)
    table["new"] = ("new", 0, "n")  # a key's first record: logged whole, then patched
    changes.extend(["new"], [("new", 0, "n")])
    sums(backend, ["new", *keys[:100]], 5, True)
    del table["k7"]
    changes.delete("k7")
    d2 = files.take(backend, 2)
    at_d2 = dict(table)
    sums(backend, [k for k in keys[1::3] if k in table], 2**64, True)  # beyond 64 bits: exact fallback
    d3 = files.take(backend, 3)
    delta = files.files[d3["chain"][-1]]
    ops = [f[1] for f in frames_of(delta)[1:]]
    assert "patch" in ops and "put" not in ops  # the delta writes the changed fields only
    for descriptor, state in ((d2, at_d2), (d3, dict(table))):
        restored = {}
        for sub in range(parallelism):
            part = files.restore([descriptor], sub, parallelism)._tables["reduce"]
            groups = key_group_range(sub, MAXP, parallelism)
            assert all(key_group_of(k, MAXP) in groups for k in part)
            restored.update(part)
        assert restored == state


def test_a_patch_frame_is_smaller_than_whole_values() -> None:
    sizes = []
    for patch in (False, True):
        files, backend = Files(), KeyedStateBackend(MAXP, settings())
        table, _ = backend.tracked_table("reduce", "value")
        keys = [f"key-{i}" for i in range(10_000)]
        table.update((k, (k, i, i)) for i, k in enumerate(keys))
        files.take(backend, 1)
        sums(backend, keys, 1, patch)
        d2 = files.take(backend, 2)
        sizes.append(len(files.files[d2["chain"][-1]]))
        assert files.restore([d2])._tables["reduce"] == table
    assert sizes[1] * 1.5 < sizes[0]


# ---------------------------------------------------------------- the keyed sum through the public API

KEYS = 40
DATA = [(f"k{i % KEYS}", i, f"tag{i % KEYS}") for i in range(1_000)]
STOPS = [60, 200, 400, 600, 800]


def expected() -> list[tuple]:
    acc: dict[str, tuple] = {}
    out = []
    for r in DATA:
        a = acc.get(r[0])
        acc[r[0]] = r if a is None else (a[0], a[1] + r[1], a[2])
        out.append(acc[r[0]])
    return out


class Gates:
    def __init__(self) -> None:
        self.released = asyncio.Event()

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for i, r in enumerate(DATA):
            if i in STOPS:
                await self.released.wait()
                self.released = asyncio.Event()
            yield r


async def checkpoint_at_stops(client: Any, out: list, gates: Any, stops: list[int]) -> None:
    """A checkpoint each time the output reaches a stop (the source waits there), then cancel."""
    for stop in stops:
        await wait_until(lambda stop=stop: len(out) == stop)  # type: ignore[misc]
        await client.trigger_checkpoint()
        if stop != stops[-1]:
            gates.released.set()
    await asyncio.wait_for(client.cancel(), 30)


def env_for(tmp_path: Path, parallelism: int) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    env.enable_checkpointing(3_600_000)  # only the checkpoints the test triggers
    cfg = env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    cfg.enable_incremental_checkpoints(True)
    return env


def by_key(records: list) -> dict[str, list]:
    grouped: dict[str, list] = {}
    for r in records:
        grouped.setdefault(r[0], []).append(r)
    return grouped


async def wait_until(cond: Any) -> None:
    for _ in range(10_000):
        if cond():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("condition not reached in time")


@pytest.mark.parametrize(("before", "after"), [(1, 1), (1, 4), (4, 1), (4, 4)])
async def test_the_keyed_sum_restores_a_chain_of_patch_frames(
    tmp_path: Path, before: int, after: int
) -> None:
    env, gates, out = env_for(tmp_path, before), Gates(), []
    env.from_async_iterable(gates.__aiter__).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(
        out.append
    )
    await checkpoint_at_stops(await env.execute_async("patch"), out, gates, STOPS)
    want = expected()
    assert by_key(out) == by_key(want[: STOPS[-1]])
    handle = FileSystemCheckpointStorage(tmp_path / "chk").restore_point("patch")
    assert handle is not None
    deltas = [(handle.shared_dir / n).read_bytes() for n in handle.shared if "-delta-" in n]
    ops = {f[1] for data in deltas for f in frames_of(data)[1:]}
    assert "patch" in ops  # the deltas hold patch frames: the path under test ran
    env = env_for(tmp_path, after)
    second: list = []
    env.from_collection(DATA).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(second.append)
    await (await env.execute_async("patch")).get_job_execution_result()
    assert by_key(second) == by_key(want[STOPS[-1] :])  # the restored sums are exact
    assert all(type(r) is tuple and type(r[1]) is int for r in second)


def test_a_table_of_one_tuple_shape_round_trips_without_a_type_pass() -> None:
    """``Changes.shape``: the writer vouches every value is a tuple of that length; bases and
    deltas (deletions and repeated keys in a slice too) restore exactly, bools and big ints
    included (the strict packers still refuse what they cannot give back)."""
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    changes.shape = 3
    table.update({f"k{i}": (f"k{i}", i, True) for i in range(500)} | {"big": ("big", 2**70, None)})
    files.take(backend, 1)
    for k, v in (("k1", ("k1", 5, False)), ("k1", ("k1", 6, False)), ("k2", None), ("n", ("n", 1.5, b"x"))):
        if v is None:
            del table[k]
            changes.delete(k)
        else:
            table[k] = v
            changes.put(k, v)
    d2 = files.take(backend, 2)
    restored = files.restore([d2])._tables["reduce"]
    assert restored == table
    assert [list(map(type, v)) for v in restored.values()] == [list(map(type, v)) for v in table.values()]


MIXED = [(f"k{i % 30}", i, "t") for i in range(300)]
MIXED[150] = ["odd", 7, "list"]  # a new key whose first record is a list: no shape, no patches after
MIXED[200] = ["odd", 1, "list"]
MIXED[280] = ["odd", 2, "list"]  # after the restore: its accumulator must come back a list


async def test_a_first_record_of_another_shape_ends_the_shape_and_the_patches(tmp_path: Path) -> None:
    acc: dict[str, Any] = {}
    want = []
    for r in MIXED:
        a = acc.get(r[0])
        if a is None:
            acc[r[0]] = r
        elif type(a) is tuple:
            acc[r[0]] = (a[0], a[1] + r[1], a[2])
        else:
            acc[r[0]] = [a[0], a[1] + r[1], a[2]]
        want.append(acc[r[0]])
    stops = [100, 180, 250]
    env, out = env_for(tmp_path, 1), []
    gates = Gates()

    async def source():  # type: ignore[no-untyped-def]
        for i, r in enumerate(MIXED):
            if i in stops:
                await gates.released.wait()
                gates.released = asyncio.Event()
            yield r

    env.from_async_iterable(source).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(out.append)
    await checkpoint_at_stops(await env.execute_async("mixed"), out, gates, stops)
    assert out == want[: stops[-1]]
    env = env_for(tmp_path, 1)
    second: list = []
    env.from_collection(MIXED).uid("src").key_by(lambda r: r[0]).sum(1).uid("sum").add_sink(second.append)
    await (await env.execute_async("mixed")).get_job_execution_result()
    assert second == want[stops[-1] :]  # the list accumulator came back a list, the sums exact
