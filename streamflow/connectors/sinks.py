"""Sinks for scripts and tests: print, collect into a list (the collect sink that streams to a
consumer is ``queue_sink.py``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from ..runtime.operator import StreamOperator
from ..types.fast_paths import print_lines
from .base import Sink

if TYPE_CHECKING:
    from ..runtime.context import OperatorContext
    from ..runtime.operator import Output


class _WriteOperator(StreamOperator):
    def __init__(self, name: str, write: Any) -> None:
        super().__init__(name)
        self._write = write

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        self._write(records)


class _PrintOperator(StreamOperator):
    """Writes each record of a batch on its own line, after Flink's prefix: ``identifier> `` when
    named, and the subtask's number when the sink is parallel (``3> `` or ``identifier:3> ``, as
    Flink's PrintSinkOutputWriter)."""

    def __init__(self, name: str, fmt: Callable[[Any], str], identifier: str, stream: TextIO | None) -> None:
        super().__init__(name)
        self._fmt, self._identifier, self._stream = fmt, identifier, stream
        self._prefix = ""

    def setup(self, ctx: OperatorContext, output: Output) -> None:
        super().setup(ctx, output)
        prefix = self._identifier
        if ctx.parallelism > 1:
            prefix = f"{prefix}:{ctx.subtask_index + 1}" if prefix else str(ctx.subtask_index + 1)
        self._prefix = f"{prefix}> " if prefix else ""

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        (self._stream or sys.stdout).write(print_lines(self._fmt, self._prefix, records))


class PrintSink(Sink):
    """Prints each record on its own line, with Flink's ``identifier> `` / ``N> `` prefix."""

    def __init__(self, sink_identifier: str | None = None, stream: TextIO | None = None) -> None:
        self.identifier = sink_identifier or ""
        self.stream = stream

    def create_operator(self, name: str) -> StreamOperator:
        return _PrintOperator(name, self.formatter(), self.identifier, self.stream)

    def formatter(self) -> Callable[[Any], str]:
        """A record's text (``str`` here; ``print()`` of a typed stream formats as PyFlink)."""
        return format


class CollectSink(Sink):
    """Appends every record to ``self.results`` (all subtasks share the list)."""

    def __init__(self) -> None:
        self.results: list[Any] = []

    def create_operator(self, name: str) -> StreamOperator:
        return _WriteOperator(name, self.results.extend)
