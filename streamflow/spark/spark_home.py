"""The Spark home a local session's JVM starts from: pip's pyspark without its Python zips.

Theory of operation
-------------------
Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and ``py4j-*-src.zip`` first on the
``PYTHONPATH`` of every Python process it starts (``PythonUtils.sparkPythonPath``: the worker
daemon, hence every forked worker, and the driver-side planners of Python data sources). In a
pip install ``SPARK_HOME`` is the ``pyspark`` package itself, whose ``python/lib`` zips hold the
same modules as the package, and Python never caches bytecode for modules imported from a zip:
every such process compiles the pyspark modules it imports from source again (measured here:
``import pyspark.worker, pyspark.sql.pandas.serializers, pyspark.sql.conversion`` 1.3-1.5 s from
the zip, 0.3-0.4 s from site-packages, on a loaded 2-core machine), and a micro-batch that
starts Python workers waits for it.

A session this engine starts itself on a ``local`` master is therefore launched with
``SPARK_HOME`` set to a *shadow home*: a directory of symbolic links to every entry of the
package (``bin``, ``jars``, ...) except ``python``. The launch scripts and the JVM's class path
are unchanged; the zip entries Spark puts on the workers' path do not exist, so Python imports
pyspark and py4j where the driver imported them (the workers' ``PYTHONPATH`` is the driver's
``sys.path``, see :mod:`.session`), from cached bytecode, and the workers run exactly the
driver's pyspark. ``SPARK_HOME`` is set only while the JVM starts (it inherits the value).

It is not used when the user set ``SPARK_HOME`` (their Spark distribution is launched as it
is), on another master (the executors' Spark homes are their own), or when the package has no
such zip (then there is nothing to avoid); a shadow home that cannot be made is logged and the
package is launched as it is. The shadow home is made once per user and package path in the
temporary directory and reused (made under a temporary name, then renamed into place, so
concurrent processes never see half of one).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

_log = logging.getLogger(__name__)


def pip_spark_home() -> str | None:
    """The pyspark package's directory when it is the Spark home with the Python zips (a pip
    install) and the user set no ``SPARK_HOME``; else None."""
    if os.environ.get("SPARK_HOME"):
        return None
    import pyspark

    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    if not os.path.isfile(os.path.join(home, "python", "lib", "pyspark.zip")):
        return None
    if not os.path.isfile(os.path.join(home, "bin", "spark-submit")):
        return None
    return home


def shadow_home(home: str, root: str | None = None) -> str:
    """The shadow home of ``home`` (made if missing): links to all of its entries but ``python``."""
    root = root or tempfile.gettempdir()
    entries = sorted(n for n in os.listdir(home) if n not in ("python", "__pycache__"))
    tag = hashlib.sha1("\0".join([home, *entries]).encode()).hexdigest()[:12]
    target = os.path.join(root, f"streamflow-spark-home-{os.getuid()}-{tag}")
    if _is_shadow_of(target, home, entries):
        return target
    work = tempfile.mkdtemp(prefix=".streamflow-spark-home-", dir=root)
    try:
        for name in entries:
            os.symlink(os.path.join(home, name), os.path.join(work, name))
        try:
            os.rename(work, target)
        except OSError:  # another process made it first (or a stale one is in the way)
            if not _is_shadow_of(target, home, entries):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _is_shadow_of(target: str, home: str, entries: list[str]) -> bool:
    def linked(name: str) -> bool:
        link = os.path.join(target, name)
        return os.path.islink(link) and os.readlink(link) == os.path.join(home, name)

    return os.path.isdir(target) and all(linked(n) for n in entries)


@contextmanager
def launched_from_shadow_home(master: str) -> Iterator[None]:
    """``SPARK_HOME`` set to the shadow home of pip's pyspark while the block runs (a local
    session's JVM starts in it), when it applies (see the module's docstring)."""
    home = pip_spark_home() if master.startswith("local") else None
    if home is None:
        yield
        return
    try:
        shadow = shadow_home(home)
    except OSError as exc:
        _log.warning("cannot make a Spark home without pyspark's Python zips (%s); Spark's Python processes "
                     "import pyspark from %s/python/lib/pyspark.zip (compiled anew by each)", exc, home)
        yield
        return
    _log.debug("launching Spark from %s (pyspark %s without its Python zips)", shadow, home)
    os.environ["SPARK_HOME"] = shadow
    try:
        yield
    finally:
        os.environ.pop("SPARK_HOME", None)
