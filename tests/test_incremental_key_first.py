"""Key-first frames (state/heap_frames.py "putk"): the keyed sum keyed by field 0 writes each key
once in bases and whole-value deltas, and a restore rebuilds the tuples with the key itself as
field 0, exactly, at the same or another parallelism; a key selector that is not field 0, a sum
of field 0, or a field the strict packers refuse write whole values instead; a malformed frame
fails loudly."""

from __future__ import annotations

import asyncio
import enum
from pathlib import Path

import msgpack
import pytest

from streamflow.checkpoint.storage import FileSystemCheckpointStorage
from streamflow.state import incremental
from streamflow.state.heap_frames import key_first_values, slice_frames
from streamflow.state.key_groups import key_group_of, key_group_range
from streamflow.state.keyed import KeyedStateBackend
from tests.test_incremental_patch import by_key, env_for, frames_of, wait_until
from tests.test_incremental_state import CODEC, MAXP, Files, settings


class Colour(enum.Enum):
    RED = 1


def ops_of(files: Files, descriptor: dict) -> list[str]:
    return [f[1] for f in frames_of(files.files[descriptor["chain"][-1]])[1:-1]]


@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_chain_of_key_first_frames_restores_exactly_at_any_parallelism(parallelism: int) -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    changes.shape, changes.key_first = 3, True  # what the keyed sum keyed by field 0 vouches
    keys = [f"k{i}" for i in range(3_000)] + [7, 2**70, -1.5, True, b"b", None]
    table.update((k, (k, i, f"first-{i}")) for i, k in enumerate(keys))
    d1 = files.take(backend, 1)  # a base
    assert ops_of(files, d1) == ["putk"]
    for i, k in enumerate(keys[::3]):  # whole values: a key's first write, a key twice, a deletion
        table[k] = (k, -i, True)
        changes.put(k, table[k])
    for k in ("new", "new", "k5"):
        table[k] = (k, 2**63 + 1, None)  # beyond int64: the msgpack packer takes it exactly
        changes.put(k, table[k])
    del table["k8"]
    changes.delete("k8")
    d2 = files.take(backend, 2)
    assert ops_of(files, d2) == ["del", "putk"]
    for descriptor, state in ((d1, None), (d2, dict(table))):
        restored: dict = {}
        for sub in range(parallelism):
            part = files.restore([descriptor], sub, parallelism)._tables["reduce"]
            groups = key_group_range(sub, MAXP, parallelism)
            assert all(key_group_of(k, MAXP) in groups for k in part)
            restored.update(part)
        if state is not None:
            assert restored == state
            assert [list(map(type, v)) for v in restored.values()] == [
                list(map(type, state[k])) for k in restored
            ]
        # field 0 is the key (the same object, unless a later frame rewrote a key the dict kept)
        assert all(
            type(v) is tuple and len(v) == 3 and type(v[0]) is type(k) and v[0] == k
            for k, v in restored.items()
        )


def test_a_field_the_strict_packers_refuse_writes_whole_values() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    changes.shape, changes.key_first = 3, True
    table.update((k, (k, 1, Colour.RED if k == "k3" else "x")) for k in (f"k{i}" for i in range(10)))
    d1 = files.take(backend, 1)
    assert ops_of(files, d1) == ["put"]  # the Enum: the codec packs the whole values
    restored = files.restore([d1])._tables["reduce"]
    assert restored == table and restored["k3"][2] is Colour.RED


def test_a_key_first_frame_is_smaller_than_whole_values() -> None:
    keys = [f"key-{i}" for i in range(10_000)]
    values = [(k, i, i) for i, k in enumerate(keys)]
    whole = slice_frames("t", keys, values, False, True, CODEC, set(), 3)
    once = slice_frames("t", keys, values, False, True, CODEC, set(), 3, True)
    assert len(once[0]) + 8 * len(keys) < len(whole[0])


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ([[1, 2]], "a putk frame of 3 keys with fields of \\[2\\]"),
        ([[1, 2, 3], [4]], "fields of \\[3, 1\\]"),
        ([], "a putk frame of 3 keys with fields of \\[\\]"),
    ],
)
def test_a_malformed_key_first_frame_is_refused(fields: list, error: str) -> None:
    frame = ["t", "putk", b"", b"T" + msgpack.packb(fields)]
    with pytest.raises(ValueError, match=error):
        key_first_values(["a", "b", "c"], frame)
    with pytest.raises(ValueError, match="a field column tagged b'S'"):
        key_first_values(["a"], ["t", "putk", b"", b"S" + msgpack.packb([[1]])])


def test_a_reader_names_a_frame_kind_it_does_not_know() -> None:
    """What a build before "putk" frames did on one (it raised the same way): a clear error."""
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None
    changes.shape, changes.key_first = 2, True
    table.update({"a": ("a", 1)})
    d1 = files.take(backend, 1)
    data = files.files[d1["chain"][-1]].replace(b"\xa4putk", b"\xa4putz")
    with pytest.raises(ValueError, match="unknown frame 'putz'"):
        incremental.apply_file(data, lambda name, kind: {}, CODEC, range(MAXP), lambda k: 0)


# ---------------------------------------------------------------- the keyed sum through the public API

KEYS = 40
DATA = [(f"k{i % KEYS}", i, f"tag{i % KEYS}", i % 3) for i in range(1_000)]
STOPS = [30, 60, 400, 700]  # keys first seen after the first checkpoint: whole values in a delta


# selectors the operator recognises as ``itemgetter`` (a lambda closing over the field is not one)
SELECTORS = {0: lambda r: r[0], 2: lambda r: r[2], 3: lambda r: r[3]}


def expected(key_field: int, field: int) -> list[tuple]:
    acc: dict = {}
    out = []
    for r in DATA:
        k = r[key_field]
        a = acc.get(k)
        acc[k] = r if a is None else tuple(a[i] + r[i] if i == field else a[i] for i in range(4))
        out.append(acc[k])
    return out


@pytest.mark.parametrize(
    ("before", "after", "key_field", "field"),
    [(1, 1, 0, 1), (1, 4, 0, 1), (4, 1, 0, 1), (4, 4, 0, 1), (1, 4, 2, 1), (4, 1, 3, 1), (4, 4, 3, 3)],
)
async def test_the_keyed_sum_restores_a_chain_of_key_first_frames(
    tmp_path: Path, before: int, after: int, key_field: int, field: int
) -> None:
    """Keyed by field 0 the chain holds "putk" frames; keyed by another field (field 0 is not
    the key), or summing the key field itself, it holds none: either way the restore is exact."""
    gates: list[asyncio.Event] = [asyncio.Event() for _ in STOPS]

    async def source():  # type: ignore[no-untyped-def]
        for i, r in enumerate(DATA):
            if i in STOPS:
                await gates[STOPS.index(i)].wait()
            yield r

    env, out = env_for(tmp_path, before), []
    env.from_async_iterable(source).uid("src").key_by(SELECTORS[key_field]).sum(field).uid("sum").add_sink(
        out.append
    )
    client = await env.execute_async("putk")
    for n, stop in enumerate(STOPS):
        await wait_until(lambda stop=stop: len(out) == stop)  # type: ignore[misc]
        await client.trigger_checkpoint()
        if stop != STOPS[-1]:
            gates[n].set()
    await asyncio.wait_for(client.cancel(), 30)
    want = expected(key_field, field)

    def group(records: list) -> dict:
        if field == key_field:  # the output no longer holds the key: compare as multisets
            return {None: sorted(records)}
        grouped: dict = {}
        for r in records:
            grouped.setdefault(r[key_field], []).append(r)
        return grouped

    assert group(out) == group(want[: STOPS[-1]])
    handle = FileSystemCheckpointStorage(tmp_path / "chk").restore_point("putk")
    assert handle is not None
    ops = {f[1] for n in handle.shared for f in frames_of((handle.shared_dir / n).read_bytes())[1:]}
    assert ("putk" in ops) == (key_field == 0)
    assert ("put" in ops) == (key_field != 0)
    env = env_for(tmp_path, after)
    second: list = []
    env.from_collection(DATA).uid("src").key_by(SELECTORS[key_field]).sum(field).uid("sum").add_sink(
        second.append
    )
    await (await env.execute_async("putk")).get_job_execution_result()
    assert group(second) == group(want[STOPS[-1] :])  # the restored sums are exact
    assert all(type(r) is tuple and list(map(type, r)) == [str, int, str, int] for r in second)
    if key_field == 0:
        assert by_key(second).keys() == by_key(want).keys()
