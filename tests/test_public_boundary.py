"""The package's public boundary (issue 8): the test kit stays out of production imports,
the runtime knows no specific connector, and every framework error has one base class."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

from child_env import child_env

import streamflow as sf


def test_import_streamflow_does_not_import_the_test_kit() -> None:
    code = (
        "import sys, streamflow, streamflow.runtime.job, streamflow.checkpoint.driver; "
        "print(sorted(m for m in sys.modules if m.startswith('streamflow.testing')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                         env=child_env())
    assert out.stdout.strip() == "[]"


def _modules() -> list[object]:
    names = [m.name for m in pkgutil.walk_packages(sf.__path__, "streamflow.")]
    skip = ("streamflow.testing", "streamflow.__main__")  # the test kit; the command line runs on import
    return [importlib.import_module(n) for n in names if not n.startswith(skip)]


def test_the_runtime_imports_no_specific_connector() -> None:
    for module in _modules():
        name = module.__name__  # type: ignore[attr-defined]
        if not name.startswith(("streamflow.runtime", "streamflow.checkpoint", "streamflow.state")):
            continue
        with open(module.__file__, encoding="utf-8") as f:  # type: ignore[attr-defined]
            source = f.read()
        for line in source.splitlines():
            if "import" in line and "connectors" in line:
                assert "connectors.base" in line, f"{name} imports a connector: {line.strip()}"


def test_every_framework_error_derives_from_streamflow_error() -> None:
    errors = []
    for module in _modules():
        for name, obj in vars(module).items():
            if (
                isinstance(obj, type)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__  # type: ignore[attr-defined]
                and not name.startswith("_")
            ):
                errors.append(obj)
    assert {e.__name__ for e in errors} >= {"GraphError", "StateMismatchError", "CheckpointStorageError"}
    assert [e.__name__ for e in errors if not issubclass(e, sf.StreamflowError)] == []
    assert issubclass(sf.GraphError, ValueError)  # and the builtin it refines, for existing handlers
