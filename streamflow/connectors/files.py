"""File sources: text lines and JSON lines (orjson), with PyFlink's builder names.

``FileSource.for_record_stream_format(StreamFormat.text_line_format(), path)``
reads every file under ``path`` (a file or a directory, in name order). With
parallelism p, subtask i reads files i, i+p, ... The position in a checkpoint
is (file index, byte offset), so a restore resumes mid-file.

A line that does not parse as JSON is never dropped silently: it is counted
(``numRecordsMalformed``) and sent to the ``DEAD_LETTER`` side output as a
:class:`DeadLetter` naming the file and line. Without a consumer of that side
output, the job fails with an error naming the file and line instead.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from .base import DEAD_LETTER as DEAD_LETTER
from .base import END, DeadLetter, Source, SourceReader
from .base import MalformedRecordError as MalformedRecordError
from .file_options import SourceOptions


class StreamFormat:
    """How bytes become records (one record per line)."""

    def __init__(self, decode: Callable[[bytes], Any], name: str) -> None:
        self.decode = decode
        self.name = name

    @staticmethod
    def text_line_format(charset_name: str = "utf-8") -> StreamFormat:
        def decode(line: bytes) -> str:
            return line.decode(charset_name).rstrip("\r\n")

        return StreamFormat(decode, "text")

    @staticmethod
    def json_lines_format() -> StreamFormat:
        return StreamFormat(orjson.loads, "json")


class FileSource(Source):
    supports_parallelism = True

    def __init__(self, paths: list[str], stream_format: StreamFormat) -> None:
        self.paths = paths
        self.format = stream_format

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        return FileSourceBuilder(stream_format, [str(p) for p in paths])

    def files(self) -> list[Path]:
        out: list[Path] = []
        for p in map(Path, self.paths):
            if p.is_dir():
                out.extend(sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith(".")))
            elif p.is_file():
                out.append(p)
            else:
                raise FileNotFoundError(f"file source: no such file or directory: {p}")
        return out

    monitor_interval_ms: int | None = None  # monitor_continuously(): look for new files this often

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        if self.monitor_interval_ms is not None:
            return _MonitoringFileReader(self, subtask_index, parallelism)
        return _FileReader(self, subtask_index, parallelism)


class FileSourceBuilder(SourceOptions):
    def __init__(self, stream_format: StreamFormat, paths: list[str]) -> None:
        self._format = stream_format
        self._paths = paths

    _monitor_interval_ms: int | None = None

    def process_static_file_set(self) -> FileSourceBuilder:
        """Read the files there now, then end (the default: a bounded source)."""
        self._monitor_interval_ms = None
        return self

    def monitor_continuously(self, discovery_interval: Any) -> FileSourceBuilder:
        """Keep watching the paths: files that appear later are read too (an unbounded source).
        ``discovery_interval``: milliseconds, ``Duration`` or ``timedelta``."""
        from ..api.environment import to_millis

        interval = to_millis(discovery_interval, "discovery interval")
        if interval <= 0:
            raise ValueError(f"the discovery interval must be positive, got {interval} ms")
        self._monitor_interval_ms = interval
        return self

    def build(self) -> FileSource:
        if not self._paths:
            raise ValueError("FileSource needs at least one path")
        source = FileSource(self._paths, self._format)
        if self._monitor_interval_ms is not None:
            source.monitor_interval_ms = self._monitor_interval_ms
            source.bounded = False
        return source


class _FileReader(SourceReader):
    def __init__(self, source: FileSource, subtask: int, parallelism: int) -> None:
        self._source = source
        self._subtask = subtask
        self._parallelism = parallelism
        self._file_index = 0  # index into this subtask's files
        self._offset = 0
        self._line = 0
        self._fh: BinaryIO | None = None
        self.dead_letters: list[DeadLetter] = []

    async def start(self, wake: Callable[[], None]) -> None:
        files = self._source.files()
        self._files = files[self._subtask :: self._parallelism]

    def snapshot_position(self) -> list[int]:
        return [self._file_index, self._offset, self._line]

    def restore_position(self, position: Any) -> None:
        self._file_index, self._offset, self._line = (int(x) for x in position)

    def poll_batch(self, max_records: int) -> list | object:
        while self._file_index < len(self._files):
            if self._fh is None:
                self._fh = open(self._files[self._file_index], "rb")  # noqa: SIM115
                self._fh.seek(self._offset)
            lines = []
            fh = self._fh
            for _ in range(max_records):
                line = fh.readline()
                if not line:
                    break
                lines.append(line)
            if lines:
                self._offset = fh.tell()
                return self._decode(lines)
            fh.close()
            self._fh = None
            self._file_index += 1
            self._offset = self._line = 0
        return END

    def _decode(self, lines: list[bytes]) -> list:
        decode = self._source.format.decode
        first_line = self._line
        self._line += len(lines)
        try:
            return [decode(line) for line in lines]
        except Exception:
            pass  # a bad line in the batch: decode line by line below, routing each failure
        out = []
        path = self._files[self._file_index]
        for i, line in enumerate(lines):
            try:
                out.append(decode(line))
            except Exception as exc:
                self.dead_letters.append(
                    DeadLetter(
                        str(path), f"{path}:{first_line + i + 1}", line, f"{type(exc).__name__}: {exc}"
                    )
                )
        return out

    def take_dead_letters(self) -> list[DeadLetter]:
        out = self.dead_letters
        if out:
            self.dead_letters = []
        return out

    async def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class _MonitoringFileReader(_FileReader):
    """``monitor_continuously``: after the files there, look for new ones every interval.

    A file is this subtask's when ``crc32(path) % parallelism == subtask`` (stable as
    files appear). The position is the set of finished files plus the offset in the
    current one, so a restore neither re-reads nor skips a file (Flink's
    ``ContinuousFileSplitEnumerator`` keeps the already-processed paths likewise).
    A file is expected to be complete when it appears (write it elsewhere, then
    move it in, as with Flink's file source)."""

    def __init__(self, source: FileSource, subtask: int, parallelism: int) -> None:
        super().__init__(source, subtask, parallelism)
        self._done: set[str] = set()
        self._resume: tuple[str, int, int] | None = None
        self._next_scan = 0.0
        self._wake_pending = False

    def _mine(self, path: Path) -> bool:
        return zlib.crc32(str(path).encode()) % self._parallelism == self._subtask

    def _scan(self) -> None:
        pending = [f for f in self._source.files() if self._mine(f) and str(f) not in self._done]
        self._files, self._file_index, self._offset, self._line = pending, 0, 0, 0
        if self._resume is not None:
            path, offset, line = self._resume
            self._resume = None
            for i, f in enumerate(pending):
                if str(f) == path:
                    self._files = [f, *pending[:i], *pending[i + 1 :]]
                    self._offset, self._line = offset, line

    async def start(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._scan()

    def snapshot_position(self) -> list[Any]:
        finished = sorted(self._done | {str(f) for f in self._files[: self._file_index]})
        current = str(self._files[self._file_index]) if self._file_index < len(self._files) else ""
        return [finished, current, self._offset, self._line]

    def restore_position(self, position: Any) -> None:
        finished, current, offset, line = position
        self._done = set(finished)
        self._resume = (current, int(offset), int(line)) if current else None

    def poll_batch(self, max_records: int) -> list | object | None:
        out = super().poll_batch(max_records)
        if out is not END:
            return out
        self._done.update(str(f) for f in self._files)
        self._files, self._file_index = [], 0
        loop = asyncio.get_running_loop()
        if loop.time() >= self._next_scan:
            self._next_scan = loop.time() + self._source.monitor_interval_ms / 1000  # type: ignore[operator]
            self._scan()
            if self._files:
                return self.poll_batch(max_records)
        if not self._wake_pending:
            self._wake_pending = True
            loop.call_at(self._next_scan, self._woken)
        return None

    def _woken(self) -> None:
        self._wake_pending = False
        self._wake()
