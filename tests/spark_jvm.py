"""JVM options for the Spark drivers the tests start: this process's session and the subprocess
drivers of the kill tests (``SPARK_SUBMIT_OPTS``, which Spark's launcher puts on the driver JVM's
command line only, not on its own launcher JVM's).

Theory of operation
-------------------
A Spark driver in these tests lives for seconds to minutes and runs small jobs, so its start and
its warm-up dominate: loading and verifying ~17,000 classes from 250 jars, and JIT compiling
them on a 2-core machine shared with the Python workers. Three options cut that without changing
what any test runs or checks:

* ``-XX:TieredStopAtLevel=1``: C1 only. C2's compiler threads spend more CPU on code that runs
  for seconds than they save (measured on the Kafka kill job's driver: 48-49 s with C2, 22-40 s
  with C1 only, on a loaded 2-core machine).
* ``-XX:ReservedCodeCacheSize=240m``: C1 alone sizes the compiled-code cache as a non-tiered
  JVM does, 48 MB, which a session running the whole suite's queries can fill ("CodeCache is
  full. Compiler has been disabled", seen running test_spark.py's workloads twice in one
  session): from then on the JVM interprets. This gives it the tiered default back (reserved
  address space; memory is committed only as code is compiled).
* Class-data sharing (AppCDS): a dynamic archive of the classes a driver loaded, mapped by later
  drivers instead of loading and verifying those classes from their jars (session start 15-17 s
  -> 9-13 s there). Java 17 has no ``-XX:+AutoCreateSharedArchive`` (Java 19), so the archive is
  made from this process's session: it starts with ``-XX:+RecordDynamicDumpInfo`` while no
  archive exists, and :func:`share_classes` (called before a test starts a subprocess driver, by
  then the session has run the earlier tests' queries) dumps it through the JVM's
  ``DiagnosticCommand`` MBean (``jcmd VM.cds dynamic_dump``, which needs no JDK tools) into a
  temporary file that is then renamed into place, so no driver ever sees a partial archive.

The archive lives in a cache directory of the temporary directory, named by a hash of the Java
installation and the jars (another JDK or pyspark gets another archive instead of a stale one).
A missing archive only means no sharing; one the JVM refuses (stale, damaged) is ignored by the
JVM (``-Xshare:auto``, its CDS log lines off), so no test can fail because of it: it only runs
slower. A dump that fails is logged and the tests go on without an archive.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

_log = logging.getLogger(__name__)

C1_ONLY = "-XX:TieredStopAtLevel=1"
CODE_CACHE = "-XX:ReservedCodeCacheSize=240m"
QUIET_CDS = "-Xlog:cds=off,cds+dynamic=off"
USER_OPTIONS = os.environ.get("SPARK_SUBMIT_OPTS", "")  # as the tests found it


def _java_home() -> Path | None:
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"]).resolve()
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def archive_path() -> Path | None:
    """The archive for this Java and these Spark jars (it may not exist yet); None without Java
    or pyspark."""
    home = _java_home()
    try:
        import pyspark
    except ImportError:
        return None
    if home is None:
        return None
    jars = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent) / "jars"
    digest = hashlib.sha1(f"{home}\0{USER_OPTIONS}".encode())
    for path in [home / "lib" / "server" / "libjvm.so", *sorted(jars.glob("*.jar"))]:
        try:
            st = path.stat()
        except OSError:
            continue
        digest.update(f"\0{path.name}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    cache = Path(tempfile.gettempdir()) / f"streamflow-test-jvm-{os.getuid()}"
    return cache / f"spark-{digest.hexdigest()[:16]}.jsa"


def driver_options(dumpable: bool) -> str:
    """``SPARK_SUBMIT_OPTS`` for a driver: the user's, C1 only, and the archive when it exists
    (else, when ``dumpable``, what a later dump needs)."""
    options = [USER_OPTIONS, C1_ONLY, CODE_CACHE, QUIET_CDS]
    archive = archive_path()
    if archive is not None and archive.is_file():
        options += [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    elif dumpable:
        options.append("-XX:+RecordDynamicDumpInfo")
    return " ".join(o for o in options if o)


def driver_env() -> dict[str, str]:
    """The environment of a subprocess driver: this process's import path, and the driver
    options with the archive (dumped from this process's session first if there is none)."""
    share_classes()
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            "SPARK_SUBMIT_OPTS": driver_options(dumpable=False)}


def share_classes() -> None:
    """Dumps the archive from this process's Spark session if there is none yet and the session's
    JVM recorded what a dump needs; else does nothing. Never raises (a failure is logged)."""
    archive = archive_path()
    if archive is None or archive.is_file() or "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    context = SparkContext._active_spark_context  # the session may be another thread's active one
    if context is None:
        return
    try:
        jvm = context._jvm
        runtime = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
        if "-XX:+RecordDynamicDumpInfo" not in list(runtime.getInputArguments()):
            return
        archive.parent.mkdir(parents=True, exist_ok=True)
        part = archive.with_name(f".{archive.name}.{os.getpid()}")
        _dynamic_dump(context, str(part))
        os.replace(part, archive)
    except Exception:  # no archive: the drivers start as they would without one
        _log.warning("no class-data sharing archive for the Spark drivers (dump to %s failed)", archive,
                     exc_info=True)


def _dynamic_dump(context: Any, path: str) -> None:
    """``jcmd <this JVM> VM.cds dynamic_dump path``, through the platform MBean server's
    ``DiagnosticCommand`` MBean. Called by reflection on the public ``MBeanServerConnection``
    interface: py4j's own lookup goes through the server's class, which the module system hides."""
    gateway, jvm = context._gateway, context._jvm
    server = jvm.java.lang.management.ManagementFactory.getPlatformMBeanServer()
    command = jvm.javax.management.ObjectName("com.sun.management:type=DiagnosticCommand")

    def array(kind: Any, *items: Any) -> Any:
        out = gateway.new_array(kind, len(items))
        for i, item in enumerate(items):
            out[i] = item
        return out

    cls = jvm.java.lang.Class
    args = array(jvm.java.lang.String, "dynamic_dump", path)
    signature = array(jvm.java.lang.String, "[Ljava.lang.String;")
    invoke = cls.forName("javax.management.MBeanServerConnection").getMethod("invoke", array(
        jvm.java.lang.Class, cls.forName("javax.management.ObjectName"), cls.forName("java.lang.String"),
        cls.forName("[Ljava.lang.Object;"), cls.forName("[Ljava.lang.String;")))
    invoke.invoke(server, array(jvm.java.lang.Object, command, "vmCds", array(jvm.java.lang.Object, args),
                                signature))
    if not os.path.isfile(path):
        raise RuntimeError(f"VM.cds dynamic_dump wrote no {path}")
