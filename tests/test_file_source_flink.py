"""Flink's file source tests, ported to streamflow's public API.

Sources (apache/flink, flink-connectors/flink-connector-files/src/test/java/org/apache/flink/
connector/file/src/): ``FileSourceTextLinesITCase``, ``impl/ContinuousFileSplitEnumeratorTest``,
``impl/StaticFileSplitEnumeratorTest``, ``compression/StandardDeCompressorsTest`` and the line
ends of ``reader/TextLineInputFormat`` (Java's ``BufferedReader.readLine``).

A TaskManager or JobManager failover of Flink's MiniCluster is, in streamflow's one process,
an in-process failure (a map function that raises once) and a restart from the latest
checkpoint (``RestartStrategies.fixed_delay_restart``), as ``tests/test_collect_streaming.py``
does. Flink's bounded ITCase restarts without checkpointing (its collect sink keeps the
results across the restart); streamflow's collect is exactly-once only with checkpoints
(``execute_and_collect`` releases records when a checkpoint covering them completes), so the
ports enable checkpointing.
"""

from __future__ import annotations

import asyncio
import bz2
import gzip
import lzma
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.common import Duration
from streamflow.connectors.base import END

PARALLELISM = 4

FILE_PATHS = [
    "text.2", "nested1/text.1", "text.1", "text.3", "nested2/nested21/text", "nested1/text.2", "nested2/text"
]
HIDDEN_JUNK_PATHS = [
    "_something", ".junk", "nested1/.somefile", "othernested/_ignoredfile", "_nested/file",
    "nested1/.intermediate/somefile",
]
LINES = [f"To be, or not to be, line {i}: that is the question" for i in range(35)]
_PER_FILE = len(LINES) // len(FILE_PATHS)
LINES_PER_FILE = [LINES[i * _PER_FILE : (i + 1) * _PER_FILE] for i in range(len(FILE_PATHS) - 1)]
LINES_PER_FILE.append(LINES[(len(FILE_PATHS) - 1) * _PER_FILE :])


def write_atomically(
    staging: Path, target: Path, lines: list[str], encode: Callable[[bytes], bytes] = bytes
) -> None:
    """Flink's ``writeFileAtomically``: written elsewhere (a hidden staging file), then renamed in."""
    tmp = staging / f".tmp-{uuid.uuid4()}"
    tmp.write_bytes(encode("".join(f"{line}\n" for line in lines).encode()))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(target)


def write_all_files(root: Path, staging: Path) -> None:
    """Half the files plain, half gzip-compressed (``writeAllFiles``), and hidden junk."""
    for i, path in enumerate(FILE_PATHS):
        if i % 2 == 0:
            write_atomically(staging, root / path, LINES_PER_FILE[i])
        else:
            write_atomically(staging, root / f"{path}.gz", LINES_PER_FILE[i], gzip.compress)
    for junk in HIDDEN_JUNK_PATHS:
        junk_lines = ["This should not end up in the test result.", "Foo bar bazzl junk"]
        write_atomically(staging, root / junk, junk_lines)


class FailOnce(sf.MapFunction):
    """Flink's ``RecordCounterToFail``: fails once, after ``after`` records (slow enough that
    checkpoints complete while the files are read)."""

    failed: set[str] = set()
    seen: dict[str, int] = {}  # records of all subtasks (Flink's static AtomicInteger)

    def __init__(self, key: str, after: int) -> None:
        self.key, self.after = key, after

    def map(self, value: Any) -> Any:
        time.sleep(0.003)
        FailOnce.seen[self.key] = FailOnce.seen.get(self.key, 0) + 1
        if FailOnce.seen[self.key] > self.after and self.key not in FailOnce.failed:
            FailOnce.failed.add(self.key)
            raise RuntimeError("injected failover")
        return value


def _env(tmp_path: Path, checkpoint_ms: int = 10) -> sf.StreamExecutionEnvironment:
    env = sf.StreamExecutionEnvironment().set_parallelism(PARALLELISM)
    env.enable_checkpointing(checkpoint_ms)
    env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(1, 0))
    return env


@pytest.mark.parametrize("failover", [False, True], ids=["none", "failover"])
def test_bounded_text_file_source(tmp_path: Path, failover: bool) -> None:
    """FileSourceTextLinesITCase#testBoundedTextFileSource and
    #testBoundedTextFileSourceWithTaskManagerFailover: nested directories, half the files
    gzip-compressed, hidden junk skipped; a failure in the middle: every line exactly once."""
    root = tmp_path / "in"
    root.mkdir()
    write_all_files(root, tmp_path)
    env = _env(tmp_path)
    source = sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(root)).build()
    stream = env.from_source(source, sf.WatermarkStrategy.no_watermarks(), "file-source")
    if failover:
        stream = stream.map(FailOnce(str(tmp_path), len(LINES) // 2))
    result = list(stream.execute_and_collect("Bounded TextFiles Test"))
    assert sorted(result) == sorted(LINES)
    if failover:
        assert str(tmp_path) in FailOnce.failed


class FailWhenAsked(sf.MapFunction):
    """Raises once, at the first record after the test set ``armed`` (Flink's failover of the
    continuous ITCase, triggered after half the files were written)."""

    armed: set[str] = set()

    def __init__(self, key: str) -> None:
        self.key = key

    def map(self, value: Any) -> Any:
        if self.key in FailWhenAsked.armed:
            FailWhenAsked.armed.discard(self.key)
            raise RuntimeError("injected failover")
        return value


@pytest.mark.parametrize("failover", [False, True], ids=["none", "failover"])
async def test_continuous_text_file_source(tmp_path: Path, failover: bool) -> None:
    """FileSourceTextLinesITCase#testContinuousTextFileSource and
    #testContinuousTextFileSourceWithTaskManagerFailover: files appear over time (written
    elsewhere, renamed in), discovered every 5 ms; a failure after half of them: every line
    exactly once, files read before the restore not read again."""
    root = tmp_path / "in"
    root.mkdir()
    key = str(tmp_path)
    env = _env(tmp_path)
    source = (
        sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(root))
        .monitor_continuously(Duration.of_millis(5))
        .build()
    )
    stream = env.from_source(source, sf.WatermarkStrategy.no_watermarks(), "file-source")
    stream = stream.map(FailWhenAsked(key))
    write_atomically(tmp_path, root / FILE_PATHS[0], LINES_PER_FILE[0])
    result: list[str] = []

    async def writer() -> None:
        while len(result) < len(LINES_PER_FILE[0]):
            await asyncio.sleep(0.005)
        for i in range(1, len(FILE_PATHS)):
            await asyncio.sleep(0.01)
            write_atomically(tmp_path, root / FILE_PATHS[i], LINES_PER_FILE[i])
            if failover and i == len(FILE_PATHS) // 2:
                FailWhenAsked.armed.add(key)

    task = asyncio.create_task(writer())
    async with asyncio.timeout(30):
        name = "Continuous TextFiles Monitoring Test"
        async for line in stream.execute_and_collect_async(name, limit=len(LINES)):
            result.append(line)
    await task
    assert sorted(result) == sorted(LINES)
    assert key not in FailWhenAsked.armed  # (the failover happened)


def _drain(reader: Any) -> list:
    out: list = []
    while (batch := reader.poll_batch(3)) is not END:
        if batch is None:
            break
        out.extend(batch)
    return out


async def test_files_processed_before_a_restore_are_not_read_again(tmp_path: Path) -> None:
    """ContinuousFileSplitEnumeratorTest#testDiscoverSplitWhenNoReaderRegistered /
    #testDiscoverWhenReaderRegistered and StaticFileSplitEnumeratorTest#testRestoreEnumerator:
    a file that appears after the start is discovered; the checkpointed state holds the
    processed paths, so a reader restored from it reads only files new since (none twice)."""
    root = tmp_path / "in"
    root.mkdir()
    write_atomically(tmp_path, root / "a", ["a1", "a2"])
    source = (
        sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(root))
        .monitor_continuously(1)
        .build()
    )
    reader = source.create_reader(0, 1)
    await reader.start(lambda: None)
    assert _drain(reader) == ["a1", "a2"]
    write_atomically(tmp_path, root / "b", ["b1"])
    await asyncio.sleep(0.01)
    assert _drain(reader) == ["b1"]  # discovered
    position = reader.snapshot_position()
    await reader.close()
    write_atomically(tmp_path, root / "c", ["c1"])
    again = source.create_reader(0, 1)
    again.restore_positions([position])
    await again.start(lambda: None)
    assert _drain(again) == ["c1"]  # a and b were processed: not re-read


def test_static_enumerator_restored_reads_only_the_unprocessed_files(tmp_path: Path) -> None:
    """StaticFileSplitEnumeratorTest#testRestoreEnumerator / #testNoMoreSplits: a bounded
    source restored from a checkpoint reads the remaining splits, then ends."""
    root = tmp_path / "in"
    root.mkdir()
    for name in ("f0", "f1", "f2"):
        write_atomically(tmp_path, root / name, [f"{name}:{i}" for i in range(3)])
    source = sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(root)).build()
    reader = source.create_reader(0, 1)
    asyncio.run(reader.start(lambda: None))
    first = reader.poll_batch(3) + reader.poll_batch(1)  # type: ignore[operator]
    position = reader.snapshot_position()
    again = source.create_reader(0, 1)
    again.restore_positions([position])
    asyncio.run(again.start(lambda: None))
    rest = _drain(again)
    assert first + rest == [f"f{f}:{i}" for f in range(3) for i in range(3)]
    assert again.poll_batch(3) is END


_COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gz": gzip.compress,
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
}


@pytest.mark.parametrize("extension", sorted(_COMPRESSORS))
def test_compressed_files_are_read_by_their_extension(tmp_path: Path, extension: str) -> None:
    """StandardDeCompressorsTest (deflate, gz, gzip, bz2, xz by file extension) as the file
    source uses them (FileSourceTextLinesITCase reads gzip files): the decompressed lines."""
    root = tmp_path / "in"
    root.mkdir()
    write_atomically(tmp_path, root / f"data.{extension}", ["x", "y", "z"], _COMPRESSORS[extension])
    env = sf.StreamExecutionEnvironment()
    source = sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(root)).build()
    assert list(env.from_source(source, None, "files").execute_and_collect()) == ["x", "y", "z"]


@pytest.mark.parametrize("extension", ["gz", "deflate", "xz"])
def test_a_compressed_file_resumes_mid_file(tmp_path: Path, extension: str) -> None:
    """Flink's StreamFormatAdapter checkpoints a compressed (non-splittable) file as the
    records read so far and skips them on restore; here the position of a compressed file
    is in its decompressed bytes: a restored reader reads exactly the rest."""
    root = tmp_path / "in"
    root.mkdir()
    lines = [f"line {i}" for i in range(50)]
    write_atomically(tmp_path, root / f"data.{extension}", lines, _COMPRESSORS[extension])
    source = sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(root)).build()
    reader = source.create_reader(0, 1)
    asyncio.run(reader.start(lambda: None))
    first = reader.poll_batch(17)
    position = reader.snapshot_position()
    asyncio.run(reader.close())
    again = source.create_reader(0, 1)
    again.restore_positions([position])
    asyncio.run(again.start(lambda: None))
    assert first + _drain(again) == lines  # type: ignore[operator]


@pytest.mark.parametrize(
    ("content", "lines"),
    [
        (b"a\nb\n", ["a", "b"]),  # a final line end makes no empty last line
        (b"a\nb", ["a", "b"]),  # nor does its absence lose the last line
        (b"a\r\nb\r\n", ["a", "b"]),
        (b"a\rb\r", ["a", "b"]),
        (b"\n\n", ["", ""]),  # empty lines are records
        (b"", []),  # an empty file has no record
        (b"\r\n", [""]),
        (b"a\n\r\nb", ["a", "", "b"]),
    ],
)
def test_text_line_format_line_ends(tmp_path: Path, content: bytes, lines: list[str]) -> None:
    """TextLineInputFormat (TextLineInputFormat.Reader#read is BufferedReader#readLine): a line
    ends at '\\n', '\\r' or '\\r\\n'; the end is not part of the record; the last line needs none."""
    root = tmp_path / "in"
    root.mkdir()
    (root / "f").write_bytes(content)
    env = sf.StreamExecutionEnvironment()
    source = sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(root)).build()
    assert list(env.from_source(source, None, "files").execute_and_collect()) == lines
