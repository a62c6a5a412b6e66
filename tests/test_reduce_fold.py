"""A keyed reduce with a recognised function shape runs as one generated loop (runtime/fold.py):
the same outputs, state and errors as the function called per record."""

from __future__ import annotations

import operator
from typing import Any

import pytest

import streamflow as sf
from streamflow.functions import ReduceFunction
from streamflow.runtime.fold import inline_expression, key_expression, make_fold

OFFSET = 3


def _outside(a: Any, b: Any) -> Any:  # a global name: left alone
    return (a[0], a[1] + b[1] + OFFSET)


def test_recognised_shapes() -> None:
    expected = ("(acc[0], (acc[1] + r[1]), r[2])", {})
    assert inline_expression(lambda a, b: (a[0], a[1] + b[1], b[2])) == expected
    assert inline_expression(lambda x, y: x + y) == ("(acc + r)", {})
    assert inline_expression(lambda a, b: (a["k"], a["n"] * b["n"])) == (
        "(acc['k'], (acc['n'] * r['n']))",
        {},
    )
    assert inline_expression(lambda a, b: (b[0],)) == ("(r[0],)", {})
    assert inline_expression(lambda a, b: a[1] - -1) == ("(acc[1] - (-1))", {})


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: max(a, b),  # a call
        lambda a, b: (a[0], a[1] + OFFSET),  # a global
        lambda a, b: a.x + b.x,  # attributes
        lambda a, b: a if a[1] > b[1] else b,  # a conditional
        lambda a, b, c=1: a + b,  # three arguments
        lambda a, b: (a[0], a[1] + 1.5),  # a float constant
        lambda a, b: (a, [b]),  # a list
        _outside,
        operator.add,  # not a Python function
    ],
)
def test_other_functions_are_left_alone(fn: Any) -> None:
    assert inline_expression(fn) is None


def test_closures_are_left_alone() -> None:
    step = 2

    def fold(a: Any, b: Any) -> Any:
        return a + b + step

    assert inline_expression(fold) is None


def test_key_expression() -> None:
    assert key_expression(operator.itemgetter(0)) == "r[0]"
    assert key_expression(operator.itemgetter("k")) == "r['k']"
    assert key_expression(operator.itemgetter(0, 1)) is None
    assert key_expression(lambda e: e[0]) is None


@pytest.mark.parametrize("keys", [False, True])
@pytest.mark.parametrize("known", [False, True])
@pytest.mark.parametrize("key", [None, "r[0]"])
def test_make_fold_matches_calls(known: bool, key: str | None, keys: bool) -> None:
    def reduce(a: Any, b: Any) -> Any:
        return (a[0], a[1] + b[1], b[2])

    expression, namespace = inline_expression(reduce)  # type: ignore[misc]
    fold = make_fold(expression, namespace, key, known, keys)
    records = [(f"k{i % 7}", i, -i) for i in range(100)]
    table: dict[Any, Any] = {"k3": ("k3", 1000, 0)}
    result = fold(iter(records), table, operator.itemgetter(0), object())
    out, new = result[:2]
    assert len(result) == (3 if keys else 2)
    if keys:  # the batch's keys, in record order (the log of incremental checkpoints)
        assert result[2] == [r[0] for r in records]
    expected_table: dict[Any, Any] = {"k3": ("k3", 1000, 0)}
    expected = []
    for r in records:
        acc = expected_table.get(r[0])
        expected_table[r[0]] = v = r if acc is None else reduce(acc, r)
        expected.append(v)
    assert out == expected and table == expected_table and new == 6


def _run(data: list, fn: Any, key_of: Any = lambda e: e[0]) -> list:
    env = sf.StreamExecutionEnvironment()
    return list(env.from_collection(data).key_by(key_of).reduce(fn).execute_and_collect())


class _Called(ReduceFunction):  # the general path: the function is called per record
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def reduce(self, a: Any, b: Any) -> Any:
        return self.fn(a, b)


@pytest.mark.parametrize("keys", [3, 1000, 50_000])
def test_jobs_give_the_answers_of_the_called_function(keys: int) -> None:
    data = [(f"k{i % keys}", i % 97, i) for i in range(12_000)]
    fn = lambda a, b: (a[0], a[1] + b[1], b[2])  # noqa: E731
    assert inline_expression(fn) is not None
    assert _run(data, fn) == _run(data, _Called(fn))
    ints = [i % 13 for i in range(5000)]
    add = lambda a, b: a + b  # noqa: E731
    assert _run(ints, add, lambda v: v % 4) == _run(ints, _Called(add), lambda v: v % 4)


def test_sum_on_tuples_lists_and_mixed_records() -> None:
    """``sum(1)``: its generated tuple form is inlined with its guard; lists, and tuples of
    another arity, still go to the general aggregation."""
    data: list[Any] = [("a", 1, 0), ("a", 2, 0), ["b", 3, 0], ["b", 4, 0], ("c", 5), ("c", 6), ("a", 7, 9)]
    env = sf.StreamExecutionEnvironment()
    out = list(env.from_collection(data).key_by(lambda e: e[0]).sum(1).execute_and_collect())
    assert out == [("a", 1, 0), ("a", 3, 0), ["b", 3, 0], ["b", 7, 0], ("c", 5), ("c", 11), ("a", 10, 0)]


def test_a_failing_inlined_reduce_names_its_record() -> None:
    data = [("k", 1), ("k", 2), ("k", "x"), ("k", 4)]
    with pytest.raises(TypeError) as info:
        _run(data, lambda a, b: (a[0], a[1] + b[1]))
    assert "while processing record ('k', 'x')" in "\n".join(info.value.__notes__)


def test_list_keys_take_the_inlined_path_with_their_stand_ins() -> None:
    data = [([1], 1), ([2], 5), ([1], 2)]
    assert _run(data, lambda a, b: (a[0], a[1] + b[1])) == [([1], 1), ([2], 5), ([1], 3)]


def test_an_unhashable_key_after_hashable_ones_is_named() -> None:
    data = [((1,), 1), ([1], 2)]
    with pytest.raises(TypeError, match="unhashable key") as info:
        _run(data, lambda a, b: (a[0], a[1] + b[1]))
    assert "while processing record ([1], 2)" in "\n".join(info.value.__notes__)


def test_a_fold_without_the_guard_stops_at_a_first_record_that_fails_the_condition() -> None:
    fold = make_fold("(acc[0], (acc[1] + r[1]),)", {}, "r[0]", True, True, "type(r) is tuple and len(r) == 2")
    table: dict[Any, Any] = {}
    records: list[Any] = [("a", 1), ("a", 2), ["b", 3], ("a", 4)]
    it = iter(records)
    out, new, keys, whole = fold(it, table, None, None)
    assert (out, new, keys, whole) == ([("a", 1), ("a", 3), ["b", 3]], 2, ["a", "a", "b"], False)
    assert list(it) == [("a", 4)]  # the rest, for the fold with the guard
    assert fold(iter([("a", 5), ("c", 1)]), table, None, None) == ([("a", 8), ("c", 1)], 1, ["a", "c"], True)


class _Sum(ReduceFunction):  # the general path, called per record
    def reduce(self, a: Any, b: Any) -> Any:
        if isinstance(a, tuple) and len(a) == 3:
            return (a[0], a[1] + b[1], a[2])
        out = list(a)
        out[1] += b[1]
        return type(a)(out) if isinstance(a, tuple) else out


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("odd_at", [0, 700, 5000])
def test_sum_switches_to_the_guarded_fold_where_a_key_starts_with_another_shape(
    parallelism: int, odd_at: int
) -> None:
    """``sum(1)`` on 3-tuples runs its expression without the per-record guard until a key's
    first record is a list or a tuple of another arity (here mid-batch, in a later batch, or
    the very first record of the stream): from there on the guarded fold, same answers."""
    data: list[Any] = [(f"k{i % 50}", i % 7, i) for i in range(6000)]
    data.insert(odd_at, ["odd", 5, 0])
    data.insert(odd_at + 1, ("short", 1))
    data += [["odd", 2, 0], ("short", 4), ("k1", 1, 1)]

    def run(fn: Any) -> list:
        env = sf.StreamExecutionEnvironment()
        env.set_parallelism(parallelism)
        keyed = env.from_collection(data).key_by(lambda e: e[0])
        stream = keyed.sum(1) if fn is None else keyed.reduce(fn)
        return sorted(map(repr, stream.execute_and_collect()))

    assert run(None) == run(_Sum())
