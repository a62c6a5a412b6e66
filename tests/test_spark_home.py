"""The local session's Spark home (streamflow/spark/spark_home.py): Spark's Python processes
import pyspark from the driver's installation (cached bytecode), not from pip's pyspark.zip,
which every one of them compiled anew (measured: 7-9 s of each driver run of the driver-kill
jobs on a loaded 2-core machine)."""

from __future__ import annotations

import os
from pathlib import Path

import py4j
import pyspark  # installed by scripts/install-test-deps; never skipped
import pytest

from streamflow.spark.session import get_session
from streamflow.spark.spark_home import launched_from_shadow_home, pip_spark_home, shadow_home


def _where(_: object) -> list[str]:  # in a Python worker: its own imports of the module's globals
    return [pyspark.__file__ or "", py4j.__file__ or ""]


def test_python_workers_import_pyspark_from_the_drivers_installation_not_a_zip() -> None:
    spark = get_session()
    (files,) = spark.sparkContext.parallelize([0], 1).map(_where).collect()
    assert files == [pyspark.__file__, py4j.__file__]
    assert not any(".zip" in f for f in files), files
    assert os.environ.get("SPARK_HOME") is None  # set only while the JVM starts


def test_the_shadow_home_links_everything_but_the_python_zips(tmp_path: Path) -> None:
    home = tmp_path / "pyspark"
    for d in ("bin", "jars", "python/lib", "sql"):
        (home / d).mkdir(parents=True)
    (home / "python" / "lib" / "pyspark.zip").touch()
    (home / "bin" / "spark-submit").touch()
    first = shadow_home(str(home), str(tmp_path))
    assert sorted(os.listdir(first)) == ["bin", "jars", "sql"]
    assert os.readlink(os.path.join(first, "jars")) == str(home / "jars")
    assert shadow_home(str(home), str(tmp_path)) == first  # made once, then reused
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no half-made ones left
    (home / "examples").mkdir()  # another pyspark at the same path: another shadow home
    assert shadow_home(str(home), str(tmp_path)) != first


def test_a_spark_home_of_the_user_or_another_master_is_used_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    assert pip_spark_home() is not None  # pip's pyspark here
    with launched_from_shadow_home("spark://host:7077"):
        assert os.environ.get("SPARK_HOME") is None
    with launched_from_shadow_home("local[2]"):
        shadow = os.environ["SPARK_HOME"]
        assert os.path.isfile(os.path.join(shadow, "bin", "spark-submit"))
        assert not os.path.exists(os.path.join(shadow, "python"))
    assert os.environ.get("SPARK_HOME") is None
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert pip_spark_home() is None
    with launched_from_shadow_home("local[2]"):
        assert os.environ["SPARK_HOME"] == "/opt/spark"
