"""Sinks for scripts and tests: print, collect into a list (the collect sink that streams to a
consumer is ``queue_sink.py``)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from ..runtime.operator import StreamOperator
from ..types.fast_paths import print_lines
from .base import Sink


class _WriteOperator(StreamOperator):
    def __init__(self, name: str, write: Any) -> None:
        super().__init__(name)
        self._write = write

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        self._write(records)


class PrintSink(Sink):
    """Prints each record on its own line (``identifier> record`` when named)."""

    def __init__(self, sink_identifier: str | None = None, stream: TextIO | None = None) -> None:
        self.prefix = f"{sink_identifier}> " if sink_identifier else ""
        self.stream = stream

    def create_operator(self, name: str) -> StreamOperator:
        prefix = self.prefix

        def write(records: list) -> None:
            (self.stream or sys.stdout).write(print_lines(format, prefix, records))

        return _WriteOperator(name, write)


class CollectSink(Sink):
    """Appends every record to ``self.results`` (all subtasks share the list)."""

    def __init__(self) -> None:
        self.results: list[Any] = []

    def create_operator(self, name: str) -> StreamOperator:
        return _WriteOperator(name, self.results.extend)
