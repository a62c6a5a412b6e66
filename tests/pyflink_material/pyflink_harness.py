"""Stand-ins for PyFlink's test scaffolding, so Flink's own test cases run on streamflow.

* :class:`DataStreamTestSinkFunction` replaces ``pyflink.datastream.tests.test_util``'s
  JVM sink: it gathers the records of every subtask and returns them as strings,
  the JVM's ``toString`` of the converted record (``(a,1)``, ``+I[a, 1]``) or,
  for Python objects (``get_results(True)``), ``str(record)``.
* ``make_env(batch)`` is what ``PyFlinkStreamingTestCase`` / ``PyFlinkBatchTestCase``
  set up: a fresh environment, parallelism 2 (PyFlink's test default), in
  streaming or batch runtime mode.
"""

from __future__ import annotations

from typing import Any

import pytest

from streamflow.connectors.sinks import CollectSink
from streamflow.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from streamflow.types.typeinfo import TypeInformation, java_string


class DataStreamTestSinkFunction(CollectSink):
    type_info: Any = None

    def set_input_type(self, type_info: Any, execution_config: Any) -> None:
        """Flink's InputTypeConfigurable: the declared type of the stream this sink reads."""
        self.type_info = type_info

    def get_results(self, is_python_object: bool = False, stringify: bool = True) -> list[Any]:
        if is_python_object:  # PyFlink: the unpickled objects, or their str
            return [str(v) for v in self.results] if stringify else list(self.results)
        fmt = self.type_info.format if isinstance(self.type_info, TypeInformation) else java_string
        return [fmt(v) for v in self.results]

    def clear(self) -> None:
        self.results.clear()


def make_env(batch: bool = False, parallelism: int = 2) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH if batch else RuntimeExecutionMode.STREAMING)
    return env


def assert_equals_sorted(expected: list[Any], actual: list[Any]) -> None:
    assert sorted(expected, key=str) == sorted(actual, key=str)


def known_failures(failing: dict[str, str]) -> Any:
    """An autouse fixture: a case listed in ``failing`` (by its name, or ``name[param]``) is a
    strict xfail with its reason, so a case that starts passing fails until it is taken off."""

    @pytest.fixture(autouse=True)
    def _known_failure(request: pytest.FixtureRequest) -> None:
        node = request.node
        reason = failing.get(node.name) or failing.get(getattr(node, "originalname", node.name))
        if reason:
            node.add_marker(pytest.mark.xfail(strict=True, reason=reason))

    return _known_failure
