"""PyFlink's file connector options that fit streamflow's file connectors
(``connectors/file_options.py``): the file enumerators and the split assigner of a
``FileSource``, the base-path bucket assigner of a ``FileSink``, and the refusals of what the
connectors do not do (compaction), each with its reason. The date-time bucket assigner is
tested in test_file_sink_buckets.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streamflow.common import Encoder
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.connectors.file_system import (
    BucketAssigner,
    FileCompactor,
    FileCompactStrategy,
    FileEnumeratorProvider,
    FileSink,
    FileSource,
    FileSplitAssignerProvider,
    StreamFormat,
)
from streamflow.datastream.state import OperatorStateStore


@pytest.mark.parametrize(
    "enumerator",
    [
        FileEnumeratorProvider.default_splittable_file_enumerator,
        FileEnumeratorProvider.default_non_splittable_file_enumerator,
    ],
)
def test_file_source_takes_pyflink_enumerators_and_split_assigner(tmp_path: Path, enumerator) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("1\n2\n")
    (tmp_path / "in" / "b.txt").write_text("3\n")
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "in"))
        .set_file_enumerator(enumerator())
        .set_split_assigner(FileSplitAssignerProvider.locality_aware_split_assigner())
        .build()
    )
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    sink = (
        FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .disable_compact()
        .build()
    )
    env.from_source(source, None, "files").sink_to(sink)
    env.execute("files")
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert files and all(p.parent == tmp_path / "out" for p in files)  # the base path: no buckets
    assert sorted(line for p in files for line in p.read_text().split()) == ["1", "2", "3"]


def test_a_file_sink_without_a_bucket_assigner_says_its_layout_differs_from_flinks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Flink's default bucket assigner writes into hourly sub-directories; this sink writes into
    the base path: not silently (a warning), unless the base path assigner is asked for."""
    caplog.set_level(logging.WARNING, "streamflow.connectors.file_options")
    FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder()).build()
    assert "Flink's default, DateTimeBucketAssigner" in caplog.text and str(tmp_path) in caplog.text
    caplog.clear()
    (FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
     .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner()).build())
    assert caplog.text == ""


def test_what_the_file_connectors_do_not_do_is_refused_with_its_reason(tmp_path: Path) -> None:
    builder = FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
    with pytest.raises(TypeError, match="expects a FileCompactStrategy"):
        builder.enable_compact(None, FileCompactor.concat_file_compactor())
    with pytest.raises(ValueError, match="At least one trigger condition"):
        FileCompactStrategy.builder().build()
    with pytest.raises(TypeError, match="expects a BucketAssigner"):
        builder.with_bucket_assigner("base")
    with pytest.raises(TypeError, match="expects a FileEnumeratorProvider"):
        FileSource.for_record_stream_format(
            StreamFormat.text_line_format(), str(tmp_path)
        ).set_file_enumerator(None)


def test_operator_state_store_is_pyflinks_interface() -> None:
    with pytest.raises(TypeError):
        OperatorStateStore()  # abstract, as PyFlink's

    class Store(OperatorStateStore):
        def get_broadcast_state(self, state_descriptor):  # type: ignore[no-untyped-def]
            return {"rules": state_descriptor}

    assert Store().get_broadcast_state("d") == {"rules": "d"}
