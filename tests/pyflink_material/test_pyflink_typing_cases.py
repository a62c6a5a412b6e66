"""The cases of Apache Flink's ``pyflink/datastream/tests/test_typing.py`` (apache/flink
``3983366``, the newest stored version): PyFlink's functions are generic
(``MapFunction[int, str]``), so a user's typed subclass works as it is. Nothing is left out.
"""

from __future__ import annotations

from collections.abc import Iterator

from streamflow.datastream.functions import FilterFunction, FlatMapFunction, KeySelector, MapFunction


class TypedMapFunction(MapFunction[int, str]):
    def map(self, value: int) -> str:
        return str(value)


class TypedFlatMapFunction(FlatMapFunction[int, str]):
    def flat_map(self, value: int) -> Iterator[str]:
        yield str(value)


class TypedFilterFunction(FilterFunction[int]):
    def filter(self, value: int) -> bool:
        return value > 0


class TypedKeySelector(KeySelector[int, str]):
    def get_key(self, value: int) -> str:
        return str(value)


def test_map_function_generics() -> None:
    assert TypedMapFunction().map(1) == "1"


def test_flat_map_function_generics() -> None:
    assert list(TypedFlatMapFunction().flat_map(1)) == ["1"]


def test_filter_function_generics() -> None:
    f = TypedFilterFunction()
    assert f.filter(1)
    assert not f.filter(-1)


def test_key_selector_generics() -> None:
    assert TypedKeySelector().get_key(1) == "1"
