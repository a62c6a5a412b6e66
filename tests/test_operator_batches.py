"""Map and filter run their loop in C; an error still names the record it was raised for."""

from __future__ import annotations

from typing import Any

import pytest

import streamflow as sf
from streamflow.common import WatermarkStrategy


def _fail_at(bad: Any) -> Any:
    def fn(v: Any) -> Any:
        if v == bad:
            raise ValueError(f"bad {v!r}")
        return True

    return fn


@pytest.mark.parametrize("method", ["map", "filter"])
@pytest.mark.parametrize("timestamps", [False, True])
@pytest.mark.parametrize(("data", "bad"), [(list(range(2000)), 0), (list(range(2000)), 1999),
                                           (list(range(2000)), 700), ([1, None, 2], None)])
def test_error_names_the_failing_record(method: str, timestamps: bool, data: list, bad: Any) -> None:
    env = sf.StreamExecutionEnvironment()
    ds = env.from_collection(data)
    if timestamps:
        ds = ds.assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v: 0)
        )
    getattr(ds, method)(_fail_at(bad)).add_sink(lambda v: None)
    with pytest.raises(ValueError, match="bad") as info:
        env.execute()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert f"while processing record {bad!r}" in notes


def test_filter_keeps_truthy_and_timestamps() -> None:
    env = sf.StreamExecutionEnvironment()
    ds = env.from_collection([(i, i * 10) for i in range(3000)]).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e: e[1])
    )
    kept = ds.filter(lambda e: e[0] % 3).process(
        lambda value, ctx: [(value[0], ctx.timestamp())]
    )
    out = list(kept.execute_and_collect())
    assert out == [(i, i * 10) for i in range(3000) if i % 3]
    env = sf.StreamExecutionEnvironment()
    out = list(env.from_collection([0, 1, "", "a", None, [], [0]]).filter(lambda v: v).execute_and_collect())
    assert out == [1, "a", [0]]


def test_an_indexing_timestamp_assigner_names_the_failing_record() -> None:
    env = sf.StreamExecutionEnvironment()
    data = [(i, i) for i in range(1000)] + [(5,)]
    env.from_collection(data).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e: e[1])
    ).add_sink(lambda v: None)
    with pytest.raises(IndexError) as info:
        env.execute()
    assert "while processing record (5,)" in "\n".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize("known", [False, True])
def test_a_reduce_raising_key_error_is_not_taken_for_a_new_key(known: bool) -> None:
    """A plain reduce runs under ``try: table[key]``: its own KeyError must fail the job."""

    def fold(a: Any, b: Any) -> Any:
        if b[1] == 1500:
            return {}[b]  # KeyError from the function itself
        return (a[0], a[1] + b[1])

    env = sf.StreamExecutionEnvironment()
    keys = 1000 if known else 7  # mostly new keys per batch, or mostly known
    data = [(f"k{i % keys}", i) for i in range(3000)]
    ds = env.from_collection(data).key_by(lambda e: e[0]).reduce(fold)
    with pytest.raises(KeyError) as info:
        list(ds.execute_and_collect())
    assert f"while processing record ('k{1500 % keys}', 1500)" in "\n".join(info.value.__notes__)


@pytest.mark.parametrize("keys", [3, 600, 100_000])
def test_plain_reduce_over_new_and_known_keys(keys: int) -> None:
    data = [(i % keys, 1) for i in range(5000)] + [(i % keys, 2) for i in range(5000)]
    env = sf.StreamExecutionEnvironment()
    ds = env.from_collection(data).key_by(lambda e: e[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))
    out = list(ds.execute_and_collect())
    expected: list[Any] = []
    sums: dict[int, int] = {}
    for k, v in data:
        sums[k] = sums.get(k, 0) + v
        expected.append((k, sums[k]))
    assert out == expected
