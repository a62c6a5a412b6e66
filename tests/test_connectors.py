"""File sources (text, JSON lines, dead letters), async iterables, sinks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import streamflow as sf
from streamflow.connectors.files import MalformedRecordError


def test_text_file_source_reads_every_line(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    (tmp_path / "b.txt").write_text("three\r\nfour")  # CRLF and no final newline
    (tmp_path / ".hidden").write_text("skipped\n")
    env = sf.StreamExecutionEnvironment()
    assert list(env.read_text_file(str(tmp_path)).execute_and_collect()) == ["one", "two", "three", "four"]


def test_text_line_format_reads_ascii_compatible_charsets_and_refuses_the_others(tmp_path: Path) -> None:
    """Lines are split on the raw bytes: a charset whose line ends are not those single bytes
    (UTF-16's are two bytes, so a 0x0A byte inside another character split it) is refused when
    the format is made, naming it, instead of reading garbage."""
    (tmp_path / "a.txt").write_bytes("café\nna\u00efve\r\n".encode("latin-1"))
    env = sf.StreamExecutionEnvironment()
    fmt = sf.StreamFormat.text_line_format("ISO-8859-1")
    source = sf.FileSource.for_record_stream_format(fmt, str(tmp_path)).build()
    assert list(env.from_source(source, None, "files").execute_and_collect()) == ["café", "naïve"]
    for charset in ("UTF-16", "utf-32-le", "cp500"):
        with pytest.raises(ValueError, match=f"text_line_format\\('{charset}'\\): this charset does not"):
            sf.StreamFormat.text_line_format(charset)


# Java's BufferedReader.readLine (Flink's TextLineInputFormat): '\n', '\r' and '\r\n' each end a line
_MIXED_ENDS = b"a\rb\r\nc\n\rd\r\r\ne\n\nf"
_MIXED_LINES = [b"a\r", b"b\r\n", b"c\n", b"\r", b"d\r", b"\r\n", b"e\n", b"\n", b"f"]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 64 * 1024])
def test_text_lines_end_at_cr_lf_and_crlf_as_flinks_text_line_format(
    tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every line end of Java's readLine, also a '\r' closing one read chunk before the '\n'
    opening the next (one line end); after each record the checkpointed byte offset and line
    are exact, and a reader restored there reads exactly the rest."""
    import asyncio

    from streamflow.connectors import files

    monkeypatch.setattr(files, "_CHUNK", chunk, raising=False)
    (tmp_path / "in.txt").write_bytes(_MIXED_ENDS)
    want = [line.decode().rstrip("\r\n") for line in _MIXED_LINES]
    assert want == ["a", "b", "c", "", "d", "", "e", "", "f"]
    source = sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(tmp_path)).build()
    reader = source.create_reader(0, 1)
    asyncio.run(reader.start(lambda: None))
    got: list = []
    for n in range(1, len(want) + 1):
        got += reader.poll_batch(1)  # type: ignore[arg-type]
        position = reader.snapshot_position()
        assert position["begun"] == [[str(tmp_path / "in.txt"), len(b"".join(_MIXED_LINES[:n])), n]]
        again = source.create_reader(0, 1)
        again.restore_positions([position])
        asyncio.run(again.start(lambda: None))
        assert got + _drain(again) == want
    assert got == want
    assert reader.poll_batch(1) is sf.connectors.base.END
    env = sf.StreamExecutionEnvironment()
    assert list(env.read_text_file(str(tmp_path)).execute_and_collect()) == want


def test_file_source_skips_hidden_files_and_directories_as_flink_does(tmp_path: Path) -> None:
    """Flink's DefaultFileFilter skips every file and directory whose name starts with '.' or
    '_' (a writer's _SUCCESS marker, its _temporary or .staging directories)."""
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "_SUCCESS").write_text("marker\n")
    for hidden in ("_temporary", ".staging"):
        (tmp_path / hidden / "0").mkdir(parents=True)
        (tmp_path / hidden / "0" / "part-0").write_text(f"{hidden} part\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("b\n")
    (tmp_path / "sub" / "_part-1.tmp").write_text("temporary\n")
    source = sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(tmp_path)).build()
    env = sf.StreamExecutionEnvironment()
    assert list(env.from_source(source, None, "files").execute_and_collect()) == ["a", "b"]


@pytest.mark.parametrize("parallelism", [1, 3])
def test_json_lines_source_with_parallel_readers(tmp_path: Path, parallelism: int) -> None:
    for i in range(4):
        (tmp_path / f"part-{i}.jsonl").write_text("".join(f'{{"file": {i}, "n": {n}}}\n' for n in range(50)))
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    source = sf.FileSource.for_record_stream_format(
        sf.StreamFormat.json_lines_format(), str(tmp_path)
    ).build()
    out = list(env.from_source(source, None, "json").execute_and_collect())
    assert sorted((r["file"], r["n"]) for r in out) == [(f, n) for f in range(4) for n in range(50)]


def test_malformed_json_lines_are_counted_and_routed_to_dead_letters(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"a": 1}\n{not json\n{"a": 2}\n[1,\n')
    env = sf.StreamExecutionEnvironment()
    source = sf.FileSource.for_record_stream_format(
        sf.StreamFormat.json_lines_format(), str(tmp_path)
    ).build()
    stream = env.from_source(source, None, "json")
    dead = sf.CollectSink()
    stream.get_side_output(sf.DEAD_LETTER).sink_to(dead)
    good = sf.CollectSink()
    stream.sink_to(good)
    result = env.execute()
    assert good.results == [{"a": 1}, {"a": 2}]
    assert [(d.location.rsplit("/", 1)[1], d.raw) for d in dead.results] == [
        ("in.jsonl:2", b"{not json\n"),
        ("in.jsonl:4", b"[1,\n"),
    ]
    assert all("JSONDecodeError" in d.error for d in dead.results)
    assert [v for k, v in result.metrics.items() if k.endswith("numRecordsMalformed")] == [2]


def test_malformed_line_without_dead_letter_consumer_fails_naming_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"a": 1}\n{oops\n')
    env = sf.StreamExecutionEnvironment()
    source = sf.FileSource.for_record_stream_format(
        sf.StreamFormat.json_lines_format(), str(tmp_path)
    ).build()
    env.from_source(source, None, "json").print()
    with pytest.raises(MalformedRecordError, match=r"in\.jsonl:2"):
        env.execute()


def test_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    env = sf.StreamExecutionEnvironment()
    env.read_text_file(str(tmp_path / "nope")).print()
    with pytest.raises(FileNotFoundError, match="nope"):
        env.execute()


def test_file_source_resumes_mid_file_from_a_savepoint(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("".join(f"line {i}\n" for i in range(100)))
    source = sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(data)).build()
    reader = source.create_reader(0, 1)
    import asyncio

    asyncio.run(reader.start(lambda: None))
    first = reader.poll_batch(30)
    position = reader.snapshot_position()
    again = source.create_reader(0, 1)
    again.restore_positions([position])
    asyncio.run(again.start(lambda: None))
    rest = []
    while (batch := again.poll_batch(30)) is not sf.connectors.base.END:
        rest.extend(batch)  # type: ignore[arg-type]
    assert first + rest == [f"line {i}" for i in range(100)]  # type: ignore[operator]


def test_async_iterable_source_and_generator_function() -> None:
    async def gen():  # type: ignore[no-untyped-def]
        for i in range(5):
            yield i

    env = sf.StreamExecutionEnvironment()
    assert list(env.from_async_iterable(gen).map(lambda x: x * 10).execute_and_collect()) == [
        0,
        10,
        20,
        30,
        40,
    ]


def test_async_source_error_names_the_source() -> None:
    async def broken():  # type: ignore[no-untyped-def]
        yield 1
        raise OSError("connection reset")

    env = sf.StreamExecutionEnvironment()
    env.from_async_iterable(broken).print()
    with pytest.raises(OSError, match="connection reset") as info:
        env.execute()
    assert "source" in "\n".join(info.value.__notes__)


def _drain(reader: Any, limit: int | None = None) -> list:
    """Poll ``reader`` to its end, or for at most ``limit`` batches."""
    out: list = []
    polls = 0
    while limit is None or polls < limit:
        batch = reader.poll_batch(7)
        polls += 1
        if batch is sf.connectors.base.END:
            break
        if batch is not None:
            out.extend(batch)
    return out


@pytest.mark.parametrize("parallelisms", [(2, 3, 1), (3, 1, 2), (1, 4, 3)])
@pytest.mark.parametrize("monitoring", [False, True], ids=["bounded", "monitoring"])
async def test_file_source_positions_restore_at_another_parallelism(
    tmp_path: Path, parallelisms: tuple[int, ...], monitoring: bool
) -> None:
    """Readers stopped mid-file (some files finished) and restored at another parallelism,
    twice, then read to the end, with a file added before each restore: every line is read
    exactly once."""
    data = tmp_path / "data"
    data.mkdir()
    for f in range(5):
        (data / f"f{f}.txt").write_text("".join(f"{f}:{i}\n" for i in range(20)))
    builder = sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(data))
    if monitoring:
        builder = builder.monitor_continuously(60_000)
    source = builder.build()
    read: list = []
    positions: list = []
    for stage, parallelism in enumerate(parallelisms):
        last = stage == len(parallelisms) - 1
        restored, positions = positions, []
        for sub in range(parallelism):
            reader = source.create_reader(sub, parallelism)
            if restored:
                reader.restore_positions(restored)
            await reader.start(lambda: None)
            # each subtask stops at another point; the last stage reads to the end
            read += _drain(reader, (100 if monitoring else None) if last else 1 + 3 * sub)
            positions.append(reader.snapshot_position())
            await reader.close()
        (data / f"new{stage}.txt").write_text("".join(f"n{stage}:{i}\n" for i in range(20)))
    want = [f"{f}:{i}" for f in range(5) for i in range(20)]
    want += [f"n{stage}:{i}" for stage in range(len(parallelisms) - 1) for i in range(20)]
    assert sorted(read) == sorted(want)  # none twice, none missing


def test_file_source_index_positions_of_older_checkpoints(tmp_path: Path) -> None:
    """A checkpoint written before per-file positions ([file index, offset, line]) restores at
    its own parallelism; at another one it is refused with the reason."""
    import asyncio

    data = tmp_path / "data"
    data.mkdir()
    for f in range(3):
        (data / f"f{f}.txt").write_text("".join(f"{f}:{i}\n" for i in range(4)))
    source = sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(data)).build()
    # subtask 0 of 2 reads f0, f2: it finished f0 and read one line (4 bytes) of f2
    reader = source.create_reader(0, 2)
    reader.restore_positions([[1, 4, 1], [0, 0, 0]])
    asyncio.run(reader.start(lambda: None))
    assert _drain(reader) == ["2:1", "2:2", "2:3"]
    with pytest.raises(ValueError, match="by file index cannot restore at parallelism 3"):
        source.create_reader(0, 3).restore_positions([[1, 4, 1], [0, 0, 0]])
