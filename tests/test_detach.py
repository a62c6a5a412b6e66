"""``runtime/detach.py``: what state keeps is its own copy, and an immutable value is its own.

A table: each value, and whether ``detached`` returns the value itself (nothing in it can
change in place) or an equal copy sharing no mutable part with it (as a serializer would give
back; an object appearing twice inside the value is copied twice, as serializing does).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from pathlib import Path
from typing import Any

import pytest
from stable_ids import stable_repr  # tests/stable_ids.py

from streamflow.common import Row, RowKind
from streamflow.runtime.detach import detached, detached_all
from streamflow.state.codec import MsgpackCodec
from streamflow.state.keyed import (
    KeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from streamflow.state.rocksdb_backend import RocksDBKeyedStateBackend


class Colour(enum.Enum):
    RED = 1


@dataclasses.dataclass
class Point:
    x: int
    tags: list[str]


IMMUTABLE_VALUES = [
    1, 1.5, True, None, "s", b"b", decimal.Decimal("1.1"), uuid.UUID(int=1), datetime.date(2024, 1, 1),
    Colour.RED, frozenset({1}), ("a", 1, 2.0), (),
]  # fmt: skip
MUTABLE_VALUES = [
    [1, 2], [("a", 1), [2]], {"a": 1}, {"a": [1]}, {1, 2}, ("a", [1]), Row(1, [2]), Row(a=1, b={"c": [2]}),
    Point(1, ["a"]), [[[[1]]]],
]  # fmt: skip


def _mutable_parts(value: Any) -> list[Any]:
    """Every list, dict, set and Row inside ``value`` (and itself)."""
    out: list[Any] = []
    if isinstance(value, list | dict | set | Row | Point):
        out.append(value)
    if isinstance(value, dict):
        children: Any = value.values()
    elif isinstance(value, Row):
        children = list(value)
    elif isinstance(value, Point):
        children = [value.tags]
    elif isinstance(value, list | tuple):
        children = value
    else:
        children = ()
    for child in children:
        out.extend(_mutable_parts(child))
    return out


@pytest.mark.parametrize("value", IMMUTABLE_VALUES, ids=stable_repr)
def test_an_immutable_value_is_its_own_copy(value: Any) -> None:
    assert detached(value) is value


@pytest.mark.parametrize("value", MUTABLE_VALUES, ids=stable_repr)
def test_a_mutable_value_is_copied_sharing_nothing_mutable(value: Any) -> None:
    copy = detached(value)
    assert copy == value and type(copy) is type(value)
    ids = {id(p) for p in _mutable_parts(value)}
    assert ids and not ids & {id(p) for p in _mutable_parts(copy)}


def test_a_row_keeps_its_kind_and_field_names() -> None:
    row = Row(a=1, b=[2])
    row.set_row_kind(RowKind.UPDATE_AFTER)
    copy = detached(row)
    assert copy.get_row_kind() == row.get_row_kind() and copy.as_dict() == {"a": 1, "b": [2]}


def test_a_cycle_or_deep_nesting_goes_to_deepcopy() -> None:
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    copy = detached(cyclic)
    assert copy is not cyclic and copy[1] is copy
    deep: Any = [1]
    for _ in range(100):
        deep = [deep]
    assert detached(deep) == deep


def test_detached_all_copies_only_the_mutable_elements() -> None:
    inner = [1]
    values = [1, ("a", 2), inner]
    out = detached_all(values)
    assert out is values and out[1] == ("a", 2) and out[2] == [1] and out[2] is not inner


WRITES: dict[str, Any] = {
    # (descriptor, write the object, read back what the state holds)
    "value.update": (ValueStateDescriptor("v"), lambda s, o: s.update(o), lambda s: s.value()),
    "list.add": (ListStateDescriptor("l"), lambda s, o: s.add(o), lambda s: s.get()[0]),
    "list.add_all": (ListStateDescriptor("l"), lambda s, o: s.add_all([o]), lambda s: s.get()[0]),
    "list.update": (ListStateDescriptor("l"), lambda s, o: s.update([o]), lambda s: s.get()[0]),
    "map.put": (MapStateDescriptor("m"), lambda s, o: s.put("k", o), lambda s: s.get("k")),
    "map.put_all": (MapStateDescriptor("m"), lambda s, o: s.put_all({"k": o}), lambda s: s.get("k")),
    "map.setitem": (MapStateDescriptor("m"), lambda s, o: s.__setitem__("k", o), lambda s: s.get("k")),
    "reducing.add": (ReducingStateDescriptor("r", lambda a, b: b), lambda s, o: s.add(o), lambda s: s.get()),
}


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
@pytest.mark.parametrize("write", list(WRITES))
def test_every_write_keeps_its_own_copy(write: str, backend: str, tmp_path: Path) -> None:
    """Each write method of the state objects, on both backends: the object written, changed
    afterwards, leaves the state as written."""
    descriptor, put, read = WRITES[write]
    if backend == "heap":
        keyed = KeyedStateBackend(128)
    else:
        keyed = RocksDBKeyedStateBackend(
            128, range(128), operator_id="op", subtask=0, codec=MsgpackCodec(), local_dir=str(tmp_path)
        )
    try:
        keyed.current_key = "key"
        state = keyed.get_state(descriptor)
        obj = {"n": [1]}
        put(state, obj)
        obj["n"].append(2)
        assert read(state) == {"n": [1]}
    finally:
        if backend == "rocksdb":
            keyed.close()
