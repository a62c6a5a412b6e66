"""A state's declared type names its checkpoint codec (state/typed.py): Types.PICKLED_BYTE_ARRAY()
opts that state in to pickling; other declared types use the job's msgpack codec."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from streamflow.common import Row, Types
from streamflow.datastream import StreamExecutionEnvironment
from streamflow.datastream.functions import KeyedProcessFunction
from streamflow.datastream.state import MapStateDescriptor, ValueStateDescriptor
from streamflow.state.codec import MsgpackCodec
from streamflow.state.keyed import KeyedStateBackend
from streamflow.state.typed import Pickled, declare
from streamflow.testing import ListSink


class Opaque:
    """A plain class: the default codec refuses it (not a dataclass, no import-path rule)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.n == self.n


def _round_trip(descriptor, value, declare_again=None):  # type: ignore[no-untyped-def]
    """Write ``value`` under key "k", snapshot through the msgpack codec, restore elsewhere."""
    backend = KeyedStateBackend(128)
    declare(backend, descriptor)
    backend.current_key = "k"
    state = backend.get_state(descriptor)
    state.update(value) if descriptor.kind == "value" else state.put("u", value)
    codec = MsgpackCodec()
    snap = codec.decode(codec.encode(backend.snapshot()))
    restored = KeyedStateBackend(128)
    restored.restore([snap], lambda group: True)
    declare(restored, declare_again or descriptor)
    restored.current_key = "k"
    again = restored.get_state(declare_again or descriptor)
    return snap, (again.value() if descriptor.kind == "value" else again.get("u"))


@pytest.mark.parametrize(
    ("descriptor", "value", "pickled"),
    [
        (ValueStateDescriptor("s", Types.PICKLED_BYTE_ARRAY()), Opaque(3), True),
        (ValueStateDescriptor("s", Types.PICKLED_BYTE_ARRAY()), 7, True),  # PyFlink pickles ints too
        (MapStateDescriptor("s", Types.STRING(), Types.PICKLED_BYTE_ARRAY()), Opaque(4), True),
        (ValueStateDescriptor("s", Types.ROW([Types.INT(), Types.STRING()])), Row(1, "a"), False),
        (ValueStateDescriptor("s", Types.TUPLE([Types.INT(), Types.STRING()])), (1, "a"), False),
        (ValueStateDescriptor("s", Types.LONG()), 2**40, False),
        (ValueStateDescriptor("s"), {"any": [1, 2.5, None]}, False),  # undeclared: the job's codec
    ],
)
def test_the_declared_type_names_the_codec(descriptor, value, pickled: bool) -> None:  # type: ignore[no-untyped-def]
    snap, back = _round_trip(descriptor, value)
    assert back == value
    assert snap.get("pickled", []) == (["s"] if pickled else [])
    stored = next(iter(snap["groups"].values()))["s"]["k"]
    if pickled:
        assert type(stored) is bytes and pickle.loads(stored) is not None
    else:
        assert type(stored) is not bytes


def test_an_undeclared_or_non_pickled_state_refuses_what_the_codec_cannot_carry() -> None:
    with pytest.raises(TypeError, match=r"cannot encode .*Opaque"):
        _round_trip(ValueStateDescriptor("s", Types.STRING()), Opaque(1))


def test_a_restore_unpickles_only_a_state_the_job_declares_pickled() -> None:
    pickled = ValueStateDescriptor("s", Types.PICKLED_BYTE_ARRAY())
    with pytest.raises(TypeError, match=r"'s' was checkpointed pickled .* now declares"):
        _round_trip(pickled, Opaque(1), declare_again=ValueStateDescriptor("s", Types.STRING()))
    # restored but not (yet) declared: the entries stay bytes, and stay pickled in the next snapshot
    backend = KeyedStateBackend(128)
    declare(backend, pickled)
    backend.current_key = "k"
    backend.get_state(pickled).update(Opaque(2))
    restored = KeyedStateBackend(128)
    restored.restore([backend.snapshot()], lambda group: True)
    assert type(restored.table("s", "value")["k"]) is Pickled
    snap = restored.snapshot()
    assert snap["pickled"] == ["s"]
    assert pickle.loads(next(iter(snap["groups"].values()))["s"]["k"]) == Opaque(2)


@pytest.mark.parametrize("declared", [Types.PICKLED_BYTE_ARRAY(), Types.STRING()])
async def test_a_job_keeps_objects_the_default_codec_refuses_in_a_pickled_state(  # type: ignore[no-untyped-def]
    tmp_path: Path, declared
) -> None:
    """End to end: a savepoint with Opaque values in state, then a restore that reads them."""
    from test_checkpointing import Gate, wait_until

    descriptor = ValueStateDescriptor("last", declared)

    class Remember(KeyedProcessFunction):
        def open(self, ctx):  # type: ignore[no-untyped-def]
            self.last = ctx.get_state(descriptor)

        def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
            previous = self.last.value()
            self.last.update(Opaque(value[1]))
            yield value[0], None if previous is None else previous.n

    def build(env, source, sink) -> None:  # type: ignore[no-untyped-def]
        source.uid("src").key_by(lambda r: r[0]).process(Remember()).uid("remember").sink_to(sink)

    data = [("a", 1), ("b", 2), ("a", 3), ("b", 4)]
    env, sink1, gate = StreamExecutionEnvironment(), ListSink(), Gate(data, 2)
    build(env, env.from_async_iterable(gate.__aiter__), sink1)
    client = await env.execute_async("pickled")
    await wait_until(lambda: len(sink1.results) == 2)
    if declared != Types.PICKLED_BYTE_ARRAY():
        with pytest.raises(Exception, match="Opaque"):  # the default codec refuses the state
            await client.trigger_savepoint(str(tmp_path / "sp"))
        await client.cancel()
        return
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()
    env2, sink2 = StreamExecutionEnvironment(), ListSink()
    env2.configure({"execution.savepoint.path": path})
    build(env2, env2.from_collection(data), sink2)
    await (await env2.execute_async("pickled")).get_job_execution_result()
    assert sorted(sink2.results) == [("a", 1), ("b", 2)]  # the restored objects were read back
