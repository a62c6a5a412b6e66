"""The Spark drivers' JVM options of the tests (tests/spark_jvm.py): a class-data archive that is
missing, damaged or made by another JVM only means no sharing, never a failing driver."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import spark_jvm


@pytest.mark.parametrize("content", [b"", b"not an archive" * 1000])
def test_a_damaged_archive_is_ignored_silently(tmp_path: Path, content: bytes) -> None:
    java = shutil.which("java")
    assert java is not None, "the Spark tests need java on PATH"
    archive = tmp_path / "spark.jsa"
    archive.write_bytes(content)
    options = [spark_jvm.C1_ONLY, spark_jvm.CODE_CACHE, spark_jvm.QUIET_CDS,
               f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    done = subprocess.run([java, *options, "-version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "cds" not in (done.stdout + done.stderr).lower()  # nothing printed about it


def test_the_archive_is_named_only_once_it_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "spark.jsa"
    monkeypatch.setattr(spark_jvm, "archive_path", lambda: archive)
    assert "SharedArchiveFile" not in spark_jvm.driver_options(dumpable=True)
    assert "-XX:+RecordDynamicDumpInfo" in spark_jvm.driver_options(dumpable=True)
    assert "-XX:+RecordDynamicDumpInfo" not in spark_jvm.driver_options(dumpable=False)
    archive.write_bytes(b"x")
    assert f"-XX:SharedArchiveFile={archive}" in spark_jvm.driver_options(dumpable=False)
    assert "-XX:+RecordDynamicDumpInfo" not in spark_jvm.driver_options(dumpable=True)
