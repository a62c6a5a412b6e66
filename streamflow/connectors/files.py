"""File sources: text lines, JSON lines (orjson) and CSV (``csv_file.py``), PyFlink's builder names.

``FileSource.for_record_stream_format(StreamFormat.text_line_format(), path)``
reads every file under ``path`` (a file or a directory, in name order). With
parallelism p, subtask i reads files i, i+p, ... The position in a checkpoint
names the finished files and the byte offset and line of each begun one, so a
restore resumes mid-file, at any parallelism (each subtask is handed every
former subtask's position and keeps the files it owns now) and with files
added to the directory since.

Lines end as with Java's ``BufferedReader.readLine`` (Flink's ``TextLineInputFormat``):
``\n``, ``\r`` and ``\r\n`` each end a line, across read chunks too (:class:`_Lines`).
Files named ``*.deflate``, ``*.gz``, ``*.gzip``, ``*.bz2`` and ``*.xz`` are decompressed, as Flink's
``StandardDeCompressors`` does; their offsets are in the decompressed bytes (``file_compression.py``).

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
from .file_compression import open_input
from .file_options import SourceOptions

#: what a per-file decoder returns for a line that gives no record (a header, a comment)
NO_RECORD: Any = object()


class StreamFormat:
    """How bytes become records (one record per line).

    ``decode`` turns one line into one record. A format whose lines depend on the lines before
    them in the file (CSV: a header line, comments) gives ``open_file(path, line)`` instead: the
    reader calls it when it opens a file (``line``: the lines already read, at a restore) and
    decodes that file's lines with the decoder it returns, which may return :data:`NO_RECORD`."""

    def __init__(
        self,
        decode: Callable[[bytes], Any],
        name: str,
        open_file: Callable[[str, int], Callable[[bytes], Any]] | None = None,
    ) -> None:
        self.decode = decode
        self.name = name
        self.open_file = open_file

    def get_produced_type(self) -> Any:
        """The records' type, when the format declares one (``None``: untyped)."""
        return None

    @staticmethod
    def text_line_format(charset_name: str = "utf-8") -> StreamFormat:
        # lines are split on the raw bytes (\n, \r): a charset must encode them as those bytes
        if "\r\n".encode(charset_name) != b"\r\n":
            raise ValueError(
                f"text_line_format({charset_name!r}): this charset does not encode line ends as the "
                "single bytes \\n and \\r (UTF-16, UTF-32, EBCDIC), which the file source splits "
                "lines on; convert the files to UTF-8 or another ASCII-compatible charset"
            )

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

    def get_produced_type(self) -> Any:
        """The format's record type (a CSV schema's row type), as Flink's source reports it."""
        return self.format.get_produced_type()

    def files(self) -> list[Path]:
        """The files under the paths, skipping hidden ones as Flink's ``DefaultFileFilter`` does:
        a file or directory below a given path whose name starts with ``.`` or ``_`` (``_SUCCESS``
        markers, ``_temporary`` and ``.staging`` directories of a writer at work)."""
        out: list[Path] = []
        for p in map(Path, self.paths):
            if p.is_dir():
                out.extend(sorted(
                    f for f in p.rglob("*")
                    if f.is_file() and not any(part[0] in "._" for part in f.relative_to(p).parts)
                ))
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


_CHUNK = 1 << 16  # bytes read from a file at a time


class _Lines:
    """The lines of a binary file from its current position, ended as Java's
    ``BufferedReader.readLine`` ends them: ``\n``, ``\r`` or ``\r\n`` (``bytes.splitlines``
    splits on exactly these), the last line with or without an end.

    Theory of operation: the file is read ``_CHUNK`` bytes at a time; a chunk's complete lines
    are queued, each keeping its line end, so the byte offset after a line is the sum of the
    lengths handed out. The unfinished last line of a chunk waits (as pieces, joined once) for
    the next chunk; so does a line ended by a ``\r`` that is a chunk's last byte, because a
    ``\n`` opening the next chunk belongs to the same line end. An offset after a handed-out
    line therefore never falls between a ``\r`` and its ``\n``."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self._lines: list[bytes] = []
        self._next = 0  # index in _lines of the next line to hand out
        self._tail: list[bytes] = []  # pieces of an unfinished line
        self._eof = False

    def take(self, max_lines: int) -> list[bytes]:
        """Up to ``max_lines`` next lines, each with its line end; [] at the end of the file."""
        out: list[bytes] = []
        while len(out) < max_lines:
            if self._next >= len(self._lines):
                if self._eof:
                    break
                self._fill()
                continue
            end = self._next + max_lines - len(out)
            out += self._lines[self._next : end]
            self._next = min(end, len(self._lines))
        return out

    def _fill(self) -> None:
        chunk = self.fh.read(_CHUNK)
        self._lines, self._next = [], 0
        if not chunk:  # the end: whatever waits is the last line(s)
            self._eof = True
            self._lines = b"".join(self._tail).splitlines(keepends=True)
            self._tail = []
        elif b"\n" not in chunk and b"\r" not in chunk:
            self._tail.append(chunk)
        else:
            self._tail.append(chunk)
            lines = b"".join(self._tail).splitlines(keepends=True)
            self._tail = [] if lines[-1].endswith(b"\n") else [lines.pop()]
            self._lines = lines


class _FileReader(SourceReader):
    """Reads its files (the sorted listing's i, i+p, ...) line by line (the module doc)."""

    rescalable_position = True

    def __init__(self, source: FileSource, subtask: int, parallelism: int) -> None:
        self._source = source
        self._subtask = subtask
        self._parallelism = parallelism
        self._files: list[Path] = []
        self._file_index = 0  # index into self._files, the files still to read
        self._offset = 0
        self._line = 0
        self._fh: _Lines | None = None
        self._done: set[str] = set()  # finished files of this subtask (restored ones included)
        self._resume: dict[str, tuple[int, int]] = {}  # restored unfinished file -> (offset, line)
        self._legacy: tuple[int, int, int] | None = None  # a (file index, offset, line) position
        self._mine: set[str] = set()  # the files it reads (set by start)
        self.dead_letters: list[DeadLetter] = []

    def _owns(self, path: str) -> bool:
        return path in self._mine

    def _take(self, files: list[Path]) -> None:
        """Read ``files`` (this subtask's), restored unfinished ones first, finished ones not;
        forget restored files it does not own (another subtask reads them and checkpoints
        them: positions of different subtasks never name the same file)."""
        if self._legacy is not None:  # a checkpoint before per-file positions (same parallelism)
            index, offset, line = self._legacy
            self._legacy = None
            self._done.update(str(f) for f in files[:index])
            if index < len(files):
                self._resume[str(files[index])] = (offset, line)
        self._done = {p for p in self._done if self._owns(p)}
        self._resume = {p: v for p, v in self._resume.items() if self._owns(p)}
        pending = [f for f in files if str(f) not in self._done]
        resumed = [f for f in pending if str(f) in self._resume]
        self._files = resumed + [f for f in pending if str(f) not in self._resume]
        self._file_index = 0

    async def start(self, wake: Callable[[], None]) -> None:
        files = self._source.files()[self._subtask :: self._parallelism]
        self._mine = {str(f) for f in files}
        self._take(files)

    def snapshot_position(self) -> dict[str, Any]:
        """The finished files and, per unfinished file begun, the byte offset and line after the
        last record handed out: no index into a listing, so a restore at any parallelism (or
        with files added since) resumes every file where it was."""
        finished = self._done | {str(f) for f in self._files[: self._file_index]}
        begun = [[path, offset, line] for path, (offset, line) in sorted(self._resume.items())]
        if self._fh is not None:
            begun.append([str(self._files[self._file_index]), self._offset, self._line])
        return {"finished": sorted(finished), "begun": begun}

    def restore_positions(self, positions: list[Any]) -> None:
        """Every former subtask's position: keeps what it will own (all finished files are
        skipped wherever they are listed; a begun file resumes at its offset with its owner)."""
        for position in positions:
            if isinstance(position, dict):
                self._done.update(position["finished"])
                for path, offset, line in position["begun"]:
                    self._resume[str(path)] = (int(offset), int(line))
            elif len(position) == 4:  # the monitoring reader's former [finished, current, offset, line]
                finished, current, offset, line = position
                self._done.update(finished)
                if current:
                    self._resume[str(current)] = (int(offset), int(line))
            elif len(positions) == self._parallelism:  # the former [file index, offset, line]
                own = positions[self._subtask]
                self._legacy = (int(own[0]), int(own[1]), int(own[2]))
            else:
                raise ValueError(
                    f"file source: a checkpoint of {len(positions)} subtasks with positions by file index "
                    f"cannot restore at parallelism {self._parallelism}; restore it at {len(positions)}"
                )
        # files restored as begun are never finished (a file is read by one subtask at a time)
        for path in self._done.intersection(self._resume):
            del self._resume[path]

    def poll_batch(self, max_records: int) -> list | object:
        while self._file_index < len(self._files):
            if self._fh is None:
                path = self._files[self._file_index]
                self._offset, self._line = self._resume.pop(str(path), (0, 0))
                self._fh = _Lines(open_input(path, self._offset))
                fmt = self._source.format
                self._decoder = fmt.decode if fmt.open_file is None else fmt.open_file(str(path), self._line)
            lines = self._fh.take(max_records)
            if lines:
                self._offset += sum(map(len, lines))
                return self._decode(lines)
            self._fh.fh.close()
            self._fh = None
            self._file_index += 1
            self._offset = self._line = 0
        return END

    _decoder: Callable[[bytes], Any]

    def _decode(self, lines: list[bytes]) -> list:
        decode = self._decoder
        first_line = self._line
        self._line += len(lines)
        if self._source.format.open_file is not None:  # a stateful decoder: each line once, in order
            return self._decode_each(lines, first_line)
        try:
            return [decode(line) for line in lines]
        except Exception:
            pass  # a bad line in the batch: decode line by line below, routing each failure
        return self._decode_each(lines, first_line)

    def _decode_each(self, lines: list[bytes], first_line: int) -> list:
        decode = self._decoder
        out = []
        path = self._files[self._file_index]
        for i, line in enumerate(lines):
            try:
                record = decode(line)
                if record is not NO_RECORD:
                    out.append(record)
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
            self._fh.fh.close()
            self._fh = None


class _MonitoringFileReader(_FileReader):
    """``monitor_continuously``: after the files there, look for new ones every interval.

    A file is this subtask's when ``crc32(path) % parallelism == subtask`` (stable as
    files appear). The position is the set of finished files plus the offsets in the
    begun ones, so a restore neither re-reads nor skips a file (Flink's
    ``ContinuousFileSplitEnumerator`` keeps the already-processed paths likewise).
    A file is expected to be complete when it appears (write it elsewhere, then
    move it in, as with Flink's file source)."""

    def __init__(self, source: FileSource, subtask: int, parallelism: int) -> None:
        super().__init__(source, subtask, parallelism)
        self._next_scan = 0.0
        self._wake_pending = False

    def _owns(self, path: str) -> bool:
        return zlib.crc32(path.encode()) % self._parallelism == self._subtask

    def _scan(self) -> None:
        self._take([f for f in self._source.files() if self._owns(str(f))])

    async def start(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._scan()

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
