"""Operators with two inputs (``connect()``): co-map, co-flat-map, co-process, keyed co-process.

The task feeds records of the first input to ``process_batch`` and of the
second to ``process_batch2``; watermarks of both inputs meet in the task's
one valve, so the operator sees the minimum, as Flink's two-input operators do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .basic_operators import FlatMapOperator, MapOperator, is_async, resolve_function
from .process_operators import KeyedProcessOperator, ProcessOperator


class CoMapOperator(MapOperator):
    method = "map1"

    def __init__(self, name: str, function: Any) -> None:
        super().__init__(name, function)
        self.call2 = resolve_function(function, "map2", name)

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        await self.output.push(await self.apply(records, self.call2, is_async(self.call2)), timestamps)


class CoFlatMapOperator(FlatMapOperator):
    method = "flat_map1"

    def __init__(self, name: str, function: Any) -> None:
        super().__init__(name, function)
        self.call2 = resolve_function(function, "flat_map2", name)

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        await self._flat_map(records, timestamps, self.call2, is_async(self.call2))


class CoProcessOperator(ProcessOperator):
    def __init__(self, name: str, function: Any) -> None:
        super().__init__(name, _Renamed(function, "process_element1"))
        self.user_function = function
        self.call2 = resolve_function(function, "process_element2", name)

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        await self._process(records, timestamps, self.call2)


class KeyedCoProcessOperator(KeyedProcessOperator):
    def __init__(
        self,
        name: str,
        key_selector1: Callable[[Any], Any],
        key_selector2: Callable[[Any], Any],
        function: Any,
    ) -> None:
        super().__init__(name, key_selector1, _Renamed(function, "process_element1"))
        self.user_function = function
        self.key_selector2 = key_selector2
        self.call2 = resolve_function(function, "process_element2", name)

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        await self._process(records, timestamps, self.call2, self.key_selector2)


class _Renamed:
    """Presents ``function.<method>`` as ``process_element`` (and keeps ``on_timer``)."""

    def __init__(self, function: Any, method: str) -> None:
        self.process_element = resolve_function(function, method, method)
        self.on_timer = getattr(function, "on_timer", None)
