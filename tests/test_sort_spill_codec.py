"""Batch mode's sorted inputs spill through the job's records codec (``runtime/sort_runs.py``):
every type checkpoints round-trip comes back exactly from a spilled run, through the public API
(BATCH mode, a 1 KiB budget, parallelism 1 and 4, the same records as without spilling); a
record the codec refuses fails the job naming its type and the operator, unless the job opted
in to pickling, when that record alone is pickled and the fallback is logged once per operator."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import logging
import math
import uuid
from collections import namedtuple
from typing import Any

import pytest
from stable_ids import stable_repr  # tests/stable_ids.py

from streamflow import PickleCodec
from streamflow.common import Types, WatermarkStrategy
from streamflow.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from streamflow.datastream.functions import KeyedProcessFunction
from streamflow.runtime.sort_buffer import SortBuffer


class Color(enum.Enum):
    RED = 1
    BLUE = "blue"


@dataclasses.dataclass
class Reading:
    sensor: str
    at: tuple
    value: decimal.Decimal


Point = namedtuple("Point", "x y")


class Opaque:
    """A plain class: the default codec refuses it; pickle takes it."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return type(other) is Opaque and other.n == self.n

    def __hash__(self) -> int:
        return self.n


UTC2 = datetime.timezone(datetime.timedelta(hours=2), "CEST")
PAYLOADS: list[Any] = [
    (1, "a"), [1, "a"], [(1, 2), [3, (4,)]], (), [],
    {1: "one", (2, 3): [4], None: 0, "s": {5: 6}}, {1, 2, 3}, frozenset({"a", (1, 2)}),
    b"\x00\xffbytes", 2**100, -(2**70), 2**64 - 1, float("nan"), -0.0, float("inf"), True, None, "str",
    datetime.datetime(2026, 11, 27, 12, 30, 1, 5), datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC2),
    datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC), datetime.date(2026, 11, 27),
    datetime.time(23, 59, 58, 1), datetime.timedelta(days=-1, seconds=5, microseconds=7),
    decimal.Decimal("1.10"), decimal.Decimal("-0"), decimal.Decimal("NaN"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"), Color.RED, Color.BLUE,
    Reading("s1", (1, 2.5), decimal.Decimal("3.14")), Point(1, (2, 3)),
]  # fmt: skip
KEYS = [f"k{i}" for i in range(7)]


def same(a: Any, b: Any) -> bool:
    """Exactly the same value: the same types all the way down, NaN equal to NaN, -0.0 apart."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if type(a) is decimal.Decimal:
        return str(a) == str(b)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb) for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if type(a) in (set, frozenset):
        return a == b and sorted(map(repr, a)) == sorted(map(repr, b))
    if dataclasses.is_dataclass(a):
        return same(dataclasses.astuple(a), dataclasses.astuple(b))  # type: ignore[arg-type]
    return bool(a == b) and (type(a) is not datetime.datetime or a.tzinfo == b.tzinfo)


def _data(payloads: list[Any], repeat: int) -> list[tuple[str, int, Any]]:
    """``(key, timestamp, payload)``: every payload under several keys, timestamps distinct."""
    out = []
    for r in range(repeat):
        for i, payload in enumerate(payloads):
            n = r * len(payloads) + i
            out.append((KEYS[n % len(KEYS)], (n * 7919) % 100_003, payload))
    return out


class Echo(KeyedProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value


def _run(data: list, parallelism: int, memory: str | None, configure: Any = None) -> list:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(parallelism)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    if memory is not None:
        env.configure({"execution.sorted-inputs.memory": memory})
    if configure is not None:
        configure(env)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])
    stream = env.from_collection(data).assign_timestamps_and_watermarks(strategy)
    return list(stream.key_by(lambda e: e[0]).process(Echo()).name("echo").execute_and_collect())


def _spilled(caplog: pytest.LogCaptureFixture) -> bool:
    return any("spilling sorted runs" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("parallelism", [1, 4])
def test_every_checkpoint_type_round_trips_exactly_through_a_spilled_run(
    parallelism: int, caplog: pytest.LogCaptureFixture
) -> None:
    data = _data(PAYLOADS, 6)
    unspilled = _run(data, parallelism, None)
    assert not _spilled(caplog)
    with caplog.at_level(logging.INFO, logger="streamflow.runtime.sort_buffer"):
        spilled = _run(data, parallelism, "1 kb")
    assert _spilled(caplog)  # the 1 KiB budget made the buffer write runs
    by_stamp = {ts: payload for _, ts, payload in data}
    assert len(spilled) == len(unspilled) == len(data)
    for key, ts, payload in spilled:
        assert same(payload, by_stamp[ts]), (key, ts, payload, by_stamp[ts])
    # the same records in the same order as without spilling (per key at parallelism 4)
    order = sorted if parallelism > 1 else list
    assert order([(k, ts) for k, ts, _ in spilled]) == order([(k, ts) for k, ts, _ in unspilled])
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # no pickle fallback


@pytest.mark.parametrize("payload", PAYLOADS, ids=stable_repr)
def test_a_column_of_one_type_round_trips_exactly(payload: Any) -> None:
    """A run's column of one type takes the cheapest exact encoder (``heap_columns``): the
    sort buffer itself, every row spilled, each type alone and inside a same-length tuple."""
    buffer = SortBuffer("test", memory=1)
    records = [payload, payload, (payload, 1), ("k", payload)]
    for i, record in enumerate(records):
        buffer.add(0, [f"k{i % 2}"], [record], [i])
    assert len(buffer._runs) == len(records)  # each record spilled on its own
    out = {ts[0]: recs[0] for _, _, _, recs, ts in buffer.drain(1)}
    for i, record in enumerate(records):
        assert same(out[i], record), (out[i], record)


def test_a_record_the_codec_refuses_fails_naming_its_type_and_the_operator() -> None:
    data = [(KEYS[i % 3], i, Opaque(i)) for i in range(200)]
    with pytest.raises(TypeError) as info:
        _run(data, 1, "1 kb")
    message = str(info.value)
    assert "operator 'echo'" in message
    assert "test_sort_spill_codec.Opaque" in message
    assert "execution.sorted-inputs.memory (1024 bytes)" in message
    assert "set_records_codec(PickleCodec())" in message


@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_job_that_opted_in_pickles_the_refused_records_and_logs_it_once(
    parallelism: int, caplog: pytest.LogCaptureFixture
) -> None:
    data = [(KEYS[i % 5], i, Opaque(i) if i % 3 == 0 else (i, str(i))) for i in range(600)]

    def opt_in(env: StreamExecutionEnvironment) -> None:
        env.get_checkpoint_config().set_records_codec(PickleCodec())

    with caplog.at_level(logging.INFO):
        out = _run(data, parallelism, "1 kb", opt_in)
    assert _spilled(caplog)
    assert sorted(out, key=lambda r: r[1]) == data
    fallbacks = [r for r in caplog.records if "spills such records pickled" in r.getMessage()]
    assert len(fallbacks) == 1, [r.getMessage() for r in fallbacks]  # once per operator, not per subtask
    message = fallbacks[0].getMessage()
    assert fallbacks[0].levelno == logging.WARNING
    assert "operator 'echo'" in message and "test_sort_spill_codec.Opaque" in message
    assert "PickleCodec()" in message


def test_a_stream_declared_pickled_opts_its_sorted_input_in(caplog: pytest.LogCaptureFixture) -> None:
    data = [(KEYS[i % 5], i, Opaque(i)) for i in range(300)]
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.configure({"execution.sorted-inputs.memory": "1 kb"})
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])
    stream = (
        env.from_collection(data)
        .assign_timestamps_and_watermarks(strategy)
        .map(lambda e: e, output_type=Types.PICKLED_BYTE_ARRAY())
    )
    with caplog.at_level(logging.WARNING):
        out = list(stream.key_by(lambda e: e[0]).process(Echo()).name("echo").execute_and_collect())
    assert sorted(out, key=lambda r: r[1]) == data
    assert any("Types.PICKLED_BYTE_ARRAY()" in r.getMessage() for r in caplog.records)


def test_only_the_refused_records_are_pickled() -> None:
    buffer = SortBuffer("operator 'x' (uid 'x')", memory=1, pickle_reason="the test opted in")
    records = [Opaque(1), (1, "a"), Opaque(2), {1: 2}]
    buffer.add(0, ["a", "b", "a", "b"], records, [1, 2, 3, 4])
    assert buffer.run_codec.pickled == 2
    out = {ts[0]: recs[0] for _, _, _, recs, ts in buffer.drain(1)}
    assert [out[i] for i in (1, 2, 3, 4)] == records
    assert type(out[2]) is tuple and type(out[4]) is dict
