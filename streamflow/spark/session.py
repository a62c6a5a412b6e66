"""The one SparkSession of a process, with the settings a local run needs.

Settings come from ``../shared/SPARK.md`` (measured on this kind of machine): the Python
workers must run this interpreter (``PYSPARK_PYTHON``), the driver binds loopback, and the
shuffle width is the number of local cores instead of 200 (it is fixed in a stateful
query's checkpoint once the query has started). ``spark.*`` keys of the job's configuration
override these defaults, and ``execution.spark.master`` chooses the master (``local[2]`` by
default; a cluster's master URL when the script is submitted with ``spark-submit``, where
the session already exists and is reused as it is). A local session's JVM starts from a
Spark home without pip's ``pyspark.zip``, so that Spark's Python processes import pyspark from
cached bytecode instead of compiling it anew each (:mod:`.spark_home`), and its Python workers
fork from a daemon that already imported streamflow (:mod:`.daemon`).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .spark_home import launched_from_shadow_home

_log = logging.getLogger(__name__)

DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.driver.memory": "1g",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.worker.reuse": "true",
}


def get_session(configuration: dict[str, Any] | None = None) -> Any:
    """The active SparkSession, or a new local one with the defaults above."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - pyspark is a declared extra
        raise RuntimeError(
            "the Spark engine needs pyspark: pip install 'streamflow[spark]' (pyspark 4.x, Java 17)"
        ) from exc
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    conf = dict(configuration or {})
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers import the user's modules (functions are pickled by reference): give
    # them this process's import path.
    path = os.pathsep.join(p for p in sys.path if p)
    os.environ["PYTHONPATH"] = path
    master = str(conf.pop("execution.spark.master", "local[2]"))
    builder = SparkSession.builder.master(master)
    builder = builder.appName(str(conf.pop("pipeline.name", "streamflow")))
    settings = {**DEFAULTS, "spark.executorEnv.PYTHONPATH": path}
    if master.startswith("local"):  # its workers fork from a daemon that imported streamflow (.daemon)
        settings["spark.python.daemon.module"] = "streamflow.spark.daemon"
    settings.update({k: str(v) for k, v in conf.items() if k.startswith("spark.")})
    for key, value in settings.items():
        builder = builder.config(key, value)
    _log.info("starting a SparkSession (%s)", settings.get("spark.master", "local[2]"))
    # its Python workers import pyspark from cached bytecode (.spark_home)
    with launched_from_shadow_home(settings.get("spark.master", master)):
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextmanager
def session_settings(spark: Any, settings: dict[str, str], what: str) -> Iterator[None]:
    """``settings`` on the session while the block runs (a query started in it keeps them: Spark
    copies the session's settings into a query when it starts), then the values before. A value
    set before that differs is replaced for the block, with a warning naming ``what``."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        if before[key] is not None and str(before[key]).lower() != value.lower():
            _log.warning("%s: %s=%s for its queries (the session has %s)", what, key, value, before[key])
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
