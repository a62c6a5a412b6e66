"""The environment of the Python subprocesses the tests start (kill-test jobs, ``streamflow``
CLI runs, examples): the test process's own, with one bytecode cache shared by all of them.

With ``PYTHONDONTWRITEBYTECODE=1`` (set on the CI machines) and a fresh clone, no
``__pycache__`` holds streamflow's bytecode and no process writes any: every subprocess compiled
the whole package again before it could run, about 1 s of CPU each (``import streamflow``: 1.3 s
cold, 0.4 s with bytecode), paid some hundred times by the kill tests alone, and a kill test's
random moment measured from the start of the process mostly landed in that compilation. Its
children write and read their bytecode under one temporary ``PYTHONPYCACHEPREFIX`` instead (the
clone stays free of ``__pycache__``, as the setting asks), created on first use and removed when
the test process exits. Without ``PYTHONDONTWRITEBYTECODE`` the children write their bytecode
where Python always does, and nothing changes.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_prefix: str | None = None


def child_env(base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """``base`` (the test process's environment by default) and ``extra``, with the shared
    bytecode cache when this process was told not to write bytecode."""
    env = dict(os.environ if base is None else base)
    env.update(extra)
    if env.get("PYTHONDONTWRITEBYTECODE") and not env.get("PYTHONPYCACHEPREFIX"):
        env.pop("PYTHONDONTWRITEBYTECODE")
        env["PYTHONPYCACHEPREFIX"] = _cache_prefix()
    return env


def _cache_prefix() -> str:
    global _prefix
    if _prefix is None:
        _prefix = tempfile.mkdtemp(prefix="streamflow-test-pycache-")
        atexit.register(shutil.rmtree, _prefix, True)
    return _prefix
