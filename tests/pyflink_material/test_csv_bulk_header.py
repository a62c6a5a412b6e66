"""``CsvBulkWriters`` with ``set_use_header``: a header line at the start of every part file.

Flink's ``CsvBulkWriter`` (``flink-formats/flink-csv``) is made per part file by the bulk
format's ``BulkWriter.Factory`` and writes with Jackson's ``CsvGenerator`` for the schema, whose
``withHeader()`` puts the column names first (separator and quoting as the rows). Streamflow's
``BulkEncoder.header`` is written by the file sink when it opens a part file: once per file, in
the files opened after each checkpoint roll and after a restore too. Not ported from a PyFlink
test (``test_csv.py`` writes no header); the read-back uses ``CsvReaderFormat`` with
``set_use_header`` as ``FileSourceCsvReaderFormatTests.test_csv_use_header`` does.
"""

from __future__ import annotations

import asyncio
import glob
import os
from collections import Counter
from pathlib import Path
from typing import Any

from pyflink_harness import DataStreamTestSinkFunction, make_env

import streamflow as sf
from streamflow.common import WatermarkStrategy
from streamflow.datastream.connectors.file_system import FileSink, FileSource
from streamflow.datastream.formats.csv import CsvBulkWriters, CsvReaderFormat, CsvSchema
from streamflow.types.row import Row


def _schema() -> CsvSchema:
    return (
        CsvSchema.builder().add_string_column("na,me").add_number_column("n")
        .set_use_header().build()
    )  # fmt: skip


def _part_files(directory: Path) -> list[str]:
    return sorted(
        f for f in glob.glob(os.path.join(directory, "**/*"), recursive=True)
        if os.path.isfile(f) and not os.path.basename(f).startswith(".")
    )  # fmt: skip


def _read_back(tmp_path: Path, out: Path) -> list[tuple[str, int]]:
    env = make_env()
    env.set_parallelism(1)
    source = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(_schema()), str(out)).build()
    sink = DataStreamTestSinkFunction()
    env.from_source(source, WatermarkStrategy.no_watermarks(), "csv-source").add_sink(sink)
    env.execute("read back")
    return [(r[0], r[1]) for r in sink.get_results(True, False)]


def test_a_bounded_job_writes_the_header_then_the_rows(tmp_path: Path) -> None:
    env = make_env()
    env.set_parallelism(1)
    rows = [Row("a,b", 1), Row("c", 2), Row(None, 3)]
    ds = env.from_collection(rows, type_info=_schema().get_type_info())
    ds.sink_to(FileSink.for_bulk_format(str(tmp_path / "out"), CsvBulkWriters.for_schema(_schema())).build())
    env.execute("csv header")
    files = _part_files(tmp_path / "out")
    assert len(files) == 1
    with open(files[0]) as f:
        assert f.read() == '"na,me",n\n"a,b",1\nc,2\n,3\n'
    assert sorted(_read_back(tmp_path, tmp_path / "out")) == [("", 3), ("a,b", 1), ("c", 2)]


DATA = [(f"k{i}", i) for i in range(300)]
FAILED: set[str] = set()


async def _slow(record: Any) -> Any:
    if record[1] % 10 == 0:  # several checkpoints complete meanwhile: several part files
        await asyncio.sleep(0.01)
    return record


def _fail_once_after_a_commit(out: Path) -> Any:
    def fail(record: Any) -> Any:
        committed = out.is_dir() and any(not f.name.startswith(".") for f in out.iterdir())
        if record[1] >= 150 and committed and "csv" not in FAILED:
            FAILED.add("csv")
            raise RuntimeError(f"injected failure at {record!r}")
        return Row(record[0], record[1])

    return fail


def test_checkpoint_rolls_and_a_restore_give_a_header_per_part_file_and_each_row_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = sf.StreamExecutionEnvironment().set_parallelism(1).set_batch_size(8)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage_dir(tmp_path / "chk")
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(1, 0))
    (
        env.from_collection(DATA).map(_slow, concurrency=1)
        .map(_fail_once_after_a_commit(out), output_type=_schema().get_type_info())
        .sink_to(FileSink.for_bulk_format(str(out), CsvBulkWriters.for_schema(_schema())).build())
    )  # fmt: skip
    result = env.execute("csv header checkpoints")
    assert result.metrics["job.numRestarts"] == 1
    files = _part_files(out)
    assert len(files) >= 3  # rolled on checkpoints, before and after the restore
    rows: Counter[str] = Counter()
    for name in files:
        with open(name) as f:
            lines = f.readlines()
        assert lines[0] == '"na,me",n\n', name  # the header opens every part file
        assert '"na,me",n\n' not in lines[1:], name  # and only once
        rows.update(lines[1:])
    assert rows == Counter(f"{k},{i}\n" for k, i in DATA)  # every row exactly once
    assert sorted(_read_back(tmp_path, out)) == sorted(DATA)
