"""The Python daemon of the Spark engine's local sessions (streamflow/spark/daemon.py)."""

from __future__ import annotations

import subprocess
import sys


def test_the_daemon_imports_streamflow_without_threads_pandas_or_pyarrow() -> None:
    """pyspark's daemon forks its workers from a single-threaded process (a fork copies no other
    thread, and a lock one held stays locked in the worker): the modules the daemon imports
    before it forks must start no thread, and must not import pandas or pyarrow (both start
    threads when imported)."""
    probe = (
        "import os, sys, threading; import streamflow.spark.daemon; "
        "print(len(os.listdir('/proc/self/task')), threading.active_count(), "
        "'pandas' in sys.modules, 'pyarrow' in sys.modules, 'streamflow.spark.harness' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", "False", "False", "True"]


def test_a_local_session_forks_its_workers_from_the_streamflow_daemon() -> None:
    from streamflow.spark.session import get_session

    conf = get_session().sparkContext.getConf()
    assert conf.get("spark.python.daemon.module") == "streamflow.spark.daemon"
