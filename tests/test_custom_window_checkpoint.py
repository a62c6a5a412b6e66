"""A custom assigner's own window type survives a savepoint: written by the assigner's
``get_window_serializer()`` (PyFlink's ``TypeSerializer``), or by the state codec when it has
none; before, any window that was not a time, count or global window came back as the
global window."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from test_checkpointing import Gate, wait_until

import streamflow as sf
from streamflow.common import WatermarkStrategy
from streamflow.common.serializer import TypeSerializer
from streamflow.datastream import WindowAssigner
from streamflow.datastream.functions import ProcessWindowFunction
from streamflow.datastream.window import EventTimeTrigger


class Slot:
    """A window of ten milliseconds, number ``n`` (a plain class: no codec knows it)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def max_timestamp(self) -> int:
        return self.n * 10 + 9

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Slot) and other.n == self.n

    def __hash__(self) -> int:
        return hash(("slot", self.n))


@dataclasses.dataclass(frozen=True)
class DataSlot:
    """The same as a dataclass, which the state codec writes by itself."""

    n: int

    def max_timestamp(self) -> int:
        return self.n * 10 + 9


class SlotSerializer(TypeSerializer[Slot]):
    def serialize(self, element: Slot, stream: BinaryIO) -> None:
        stream.write(struct.pack(">q", element.n))

    def deserialize(self, stream: BinaryIO) -> Slot:
        return Slot(struct.unpack(">q", stream.read(8))[0])


class Slots(WindowAssigner[Any, Any]):
    def __init__(self, window_class: type, serializer: TypeSerializer | None) -> None:
        self.window_class, self.serializer = window_class, serializer

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        return [self.window_class(timestamp // 10)]

    def get_default_trigger(self, env: Any = None) -> Any:
        return EventTimeTrigger.create()

    def get_window_serializer(self) -> Any:
        if self.serializer is None:
            raise NotImplementedError
        return self.serializer

    def is_event_time(self) -> bool:
        return True


class Sum(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield key, context.window().n, sum(e[1] for e in elements)


DATA = [(f"k{i % 2}", i, i) for i in range(40)]  # (key, value, timestamp ms)


@pytest.mark.parametrize(
    ("window_class", "serializer"), [(Slot, SlotSerializer()), (DataSlot, None)], ids=["serializer", "codec"]
)
async def test_custom_windows_survive_a_savepoint(
    tmp_path: Path, window_class: type, serializer: Any
) -> None:
    gate = Gate(DATA, 25)  # the savepoint in the middle of window 2 ([20, 30))

    def build(env: sf.StreamExecutionEnvironment, source: sf.DataStream, out: list) -> None:
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2])
        timed = source.uid("src").assign_timestamps_and_watermarks(strategy).uid("wm").set_parallelism(1)
        windows = timed.key_by(lambda e: e[0]).window(Slots(window_class, serializer))
        windows.process(Sum()).uid("slots").add_sink(out.append)

    env = sf.StreamExecutionEnvironment().set_parallelism(2)
    out1: list = []
    build(env, env.from_async_iterable(gate.__aiter__), out1)
    client = await env.execute_async("slots")
    await wait_until(lambda: len(out1) == 4)  # windows 0 and 1 of both keys fired
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()

    env2 = sf.StreamExecutionEnvironment().set_parallelism(3)
    env2.configure({"execution.savepoint.path": path})
    out2: list = []
    build(env2, env2.from_collection(DATA), out2)  # the source resumes after record 25
    await (await env2.execute_async("slots")).get_job_execution_result()
    expected = sorted(
        (k, n, sum(v for kk, v, ts in DATA if kk == k and ts // 10 == n))
        for k in ("k0", "k1")
        for n in range(4)
    )
    assert sorted(out1 + out2) == expected
