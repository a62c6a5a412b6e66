"""A record once emitted does not change when the function that emitted it changes the object.

Flink's rule: with object reuse disabled (Flink's default, ``ExecutionConfig#enableObjectReuse``
"is disabled by default": records are copied between chained operators and serialized between
tasks), and in PyFlink, where every record a Python function emits is serialized as it goes
out, a function may keep changing an object after emitting it: what went out was a copy.
streamflow hands records on as Python references (``api/execution_config.py``: "chained
operators hand records on as Python references already") and in batches, so a function that
emits an object and changes it later changes the record already emitted. Where the object is
one the function keeps in state, it is fixed on the state side: state keeps its own copy of
every value written (``runtime/detach.py``), so the list a ``KeyedProcessFunction`` keeps in
``ValueState``, appends to, writes back and emits is no longer the object the next element
appends to (below; every state kind, both backends, parallelism and restore:
``test_state_values_detached.py``; the reduce case: ``test_aggregations_flink.py``). A
function reusing its own buffer is not, and is a strict xfail: copying every emitted object
that is not immutable would cost every job a copy per record.

Sources: the contract of Flink's ``ExecutionConfig.enableObjectReuse`` (flink-core) and
PyFlink's ``KeyedProcessFunction`` examples that keep a list in ``ValueState`` and emit it.
"""

from __future__ import annotations

from typing import Any

import pytest

import streamflow as sf

_DIVERGENCE = (
    "streamflow hands emitted records on by reference (as Flink with object reuse enabled): an "
    "object a function emits and then changes (a buffer it reuses) changes the record already "
    "emitted; Flink's default and PyFlink emit copies"
)


class _RunningList(sf.KeyedProcessFunction):
    """Keeps the key's values in a list in ValueState and emits the list after each one."""

    def open(self, runtime_context: Any) -> None:
        self.values = runtime_context.get_state(sf.ValueStateDescriptor("values", None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        current = self.values.value() or []
        current.append(value[1])
        self.values.update(current)
        yield (value[0], current)


def test_a_state_value_emitted_then_changed_by_the_next_element() -> None:
    env = sf.StreamExecutionEnvironment()
    data = [("a", 1), ("a", 2), ("a", 3)]
    got = list(env.from_collection(data).key_by(lambda v: v[0]).process(_RunningList()).execute_and_collect())
    assert got == [("a", [1]), ("a", [1, 2]), ("a", [1, 2, 3])]


class _ReusedBuffer(sf.FlatMapFunction):
    """Emits a growing prefix of its input, reusing one list."""

    def flat_map(self, value: Any) -> Any:
        buffer: list[int] = []
        for v in value:
            buffer.append(v)
            yield buffer


@pytest.mark.xfail(strict=True, reason=_DIVERGENCE)
def test_a_buffer_emitted_then_changed_by_the_function() -> None:
    env = sf.StreamExecutionEnvironment()
    got = list(env.from_collection([[1, 2, 3]]).flat_map(_ReusedBuffer()).execute_and_collect())
    assert got == [[1], [1, 2], [1, 2, 3]]
