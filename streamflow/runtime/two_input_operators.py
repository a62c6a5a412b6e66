"""Operators with two inputs (``connect()``): co-map, co-flat-map, co-process, keyed co-process.

The task feeds records of the first input to ``process_batch`` and of the
second to ``process_batch2`` (:class:`TwoInputOperator`); watermarks of both
inputs meet in the task's one valve, so the operator sees the minimum, as
Flink's two-input operators do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .basic_operators import FlatMapOperator, MapOperator, is_async, resolve_function
from .operator import TwoInputOperator
from .process_operators import KeyedProcessOperator, ProcessOperator


class CoMapOperator(MapOperator, TwoInputOperator):
    method = "map1"

    def __init__(self, name: str, function: Any) -> None:
        super().__init__(name, function)
        self.call2 = resolve_function(function, "map2", name)

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        await self.output.push(await self.apply(records, self.call2, is_async(self.call2)), timestamps)


class CoFlatMapOperator(FlatMapOperator, TwoInputOperator):
    method = "flat_map1"

    def __init__(self, name: str, function: Any) -> None:
        super().__init__(name, function)
        self.call2 = resolve_function(function, "flat_map2", name)

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        await self._flat_map(records, timestamps, self.call2, is_async(self.call2))


class CoProcessOperator(ProcessOperator, TwoInputOperator):
    method = "process_element1"

    def __init__(self, name: str, function: Any) -> None:
        super().__init__(name, function)
        self.call2 = resolve_function(function, "process_element2", name)

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        await self._process(records, timestamps, self.call2)


class KeyedCoProcessOperator(KeyedProcessOperator, TwoInputOperator):
    method = "process_element1"

    def __init__(
        self,
        name: str,
        key_selector1: Callable[[Any], Any],
        key_selector2: Callable[[Any], Any],
        function: Any,
    ) -> None:
        super().__init__(name, key_selector1, function)
        self.key_selector2 = key_selector2
        self._check_key_type2 = True  # input 2's first key is probed too (check_key_type)
        self.call2 = resolve_function(function, "process_element2", name)

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        if self._check_key_type2 and records:
            self._check_key_type2 = False
            self.check_key_type(records, "key_selector2")
        await self._process(records, timestamps, self.call2, self.key_selector2)
