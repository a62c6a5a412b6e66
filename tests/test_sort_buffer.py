"""The sort buffer of batch mode's keyed inputs (``runtime/sort_buffer.py``), synchronously:
Flink's ``SortingDataInputTest`` and ``MultiInputSortingDataInputsTest`` scenarios, the key
order, spilling beyond the memory budget, and its errors."""

from __future__ import annotations

import tempfile
import threading

import msgpack
import pytest

from streamflow.runtime.sort_buffer import NO_TIMESTAMP, SortBuffer
from streamflow.state.codec import MsgpackCodec
from streamflow.state.heap_columns import unpack_column
from streamflow.state.key_groups import stable_hash

# Flink's SortingDataInputTest: (value, timestamp) records keyed by their value
FLINK_RECORDS = [(1, 3), (1, 1), (2, 1), (2, 3), (1, 2), (2, 2)]


def _add(buffer: SortBuffer, records: list, input_index: int = 0, key_of=lambda r: r[0]) -> None:
    buffer.add(input_index, [key_of(r) for r in records], [r for r in records], [r[1] for r in records])


def _drained(buffer: SortBuffer, chunk: int = 512) -> list[tuple]:
    """``(key, input, record)`` in the order the buffer hands them out."""
    return [(key, i, r) for _, key, i, recs, _ in buffer.drain(chunk) for r in recs]


def test_one_input_comes_back_key_by_key_in_timestamp_order() -> None:
    buffer = SortBuffer("test")
    _add(buffer, FLINK_RECORDS)
    out = [r for _, _, r in _drained(buffer)]
    expected = {1: [(1, 1), (1, 2), (1, 3)], 2: [(2, 1), (2, 2), (2, 3)]}
    assert out == [r for k in sorted(expected, key=stable_hash) for r in expected[k]]


def test_variable_length_keys_sort_the_same_way() -> None:
    buffer = SortBuffer("test")
    _add(buffer, FLINK_RECORDS, key_of=lambda r: str(r[0]))
    out = _drained(buffer)
    assert [k for k, _, _ in out] == [k for k in sorted("12", key=stable_hash) for _ in range(3)]
    assert [r[1] for _, _, r in out] == [1, 2, 3, 1, 2, 3]


def test_two_inputs_are_interleaved_per_key_input_one_first_on_equal_timestamps() -> None:
    """MultiInputSortingDataInputsTest.simpleFixedLengthKeySorting: the same records on both
    inputs come back pairwise (Flink leaves the tie unspecified; here input 1 goes first)."""
    buffer = SortBuffer("test")
    _add(buffer, FLINK_RECORDS, 0)
    _add(buffer, FLINK_RECORDS, 1)
    out = _drained(buffer, chunk=1)
    keys = sorted((1, 2), key=stable_hash)
    assert out == [(k, i, (k, t)) for k in keys for t in (1, 2, 3) for i in (0, 1)]


def test_chunks_never_mix_inputs_or_grow_past_the_chunk_size() -> None:
    buffer = SortBuffer("test")
    _add(buffer, [("a", t) for t in range(10)], 0)
    _add(buffer, [("a", t) for t in range(5, 8)], 1)
    chunks = [(i, len(recs)) for _, _, i, recs, _ in buffer.drain(4)]
    assert chunks == [(0, 4), (0, 2), (1, 1), (0, 1), (1, 1), (0, 1), (1, 1), (0, 2)]


def test_records_without_timestamps_come_first_as_long_min_value() -> None:
    buffer = SortBuffer("test")
    buffer.add(0, ["k", "k"], ["late", "later"], [5, 7])
    buffer.add(0, ["k", "k"], ["bare1", "bare2"], None)
    out = list(buffer.drain(512))
    # a chunk with timestamps and one without are never merged: None means "no timestamps"
    assert [(recs, stamps) for _, _, _, recs, stamps in out] == [
        (["bare1", "bare2"], None),
        (["late", "later"], [5, 7]),
    ]
    assert NO_TIMESTAMP == -(2**63)


def test_equal_timestamps_keep_their_arrival_order() -> None:
    buffer = SortBuffer("test")
    buffer.add(0, ["k"] * 5, list("abcde"), [3, 1, 3, 1, 3])
    assert [r for _, _, r in _drained(buffer)] == list("bdace")


def test_equal_keys_are_one_key_as_they_share_state() -> None:
    buffer = SortBuffer("test")
    buffer.add(0, [1, 1.0, True], ["int", "float", "bool"], [3, 2, 1])
    out = list(buffer.drain(512))
    assert len(out) == 1 and out[0][3] == ["bool", "float", "int"]


def test_key_order_is_the_stable_hash_then_first_arrival() -> None:
    keys = [f"key{i}" for i in range(200)]
    buffer = SortBuffer("test")
    buffer.add(0, keys[::-1], keys[::-1], None)
    assert [k for _, k, _, _, _ in buffer.drain(512)] == sorted(keys, key=stable_hash)


def test_beyond_its_memory_it_spills_sorted_runs_and_merges_them() -> None:
    records = [(f"k{i % 13}", (i * 7919) % 500, i) for i in range(5000)]
    expected = SortBuffer("test")
    _add(expected, records)
    in_memory = _drained(expected)
    with tempfile.TemporaryDirectory() as spill_dir:
        buffer = SortBuffer("test", memory=2048, spill_dir=spill_dir)
        for start in range(0, len(records), 100):
            _add(buffer, records[start : start + 100])
        assert len(buffer._runs) > 10 and buffer.spilled_bytes > 0
        merged = _drained(buffer, chunk=64)
        assert merged == in_memory  # the same order: runs merge stably, as arrival order
        assert buffer._runs == []  # drained: the runs are closed (and deleted by the system)


def test_a_record_the_codec_refuses_fails_the_spill_naming_the_operator_its_type_and_the_budget() -> None:
    buffer = SortBuffer("operator 'x' (uid 'x')", memory=1)
    with pytest.raises(
        TypeError,
        match=r"operator 'x'.*sorted-inputs.memory \(1 bytes\).*refuses a record of type _thread.lock",
    ):
        buffer.add(0, ["k"], [threading.Lock()], None)


def test_a_record_neither_the_codec_nor_pickle_takes_fails_naming_both() -> None:
    buffer = SortBuffer("operator 'x' (uid 'x')", memory=1, pickle_reason="opted in")
    with pytest.raises(TypeError, match=r"operator 'x'.*_thread.lock.*cannot be pickled either"):
        buffer.add(0, ["k"], [threading.Lock()], None)


def test_a_key_without_a_stable_hash_fails_naming_the_operator() -> None:
    class Opaque:
        def __hash__(self) -> int:
            return 1

    buffer = SortBuffer("operator 'x' (uid 'x')")
    with pytest.raises(TypeError, match=r"operator 'x' \(uid 'x'\): cannot sort key .*Opaque"):
        buffer.add(0, [Opaque()], [1], None)


def test_runs_hold_rows_not_keys() -> None:
    """A run's rows name their key by id (the buffer keeps the keys and their hashes): what
    reaches the disk is a frame of columns, the ids, the timestamps and the records
    (``sort_runs.py``), packed by the heap backend's column encoders, no pickle."""
    buffer = SortBuffer("test", memory=1)
    buffer.add(0, ["key"], ["record"], [7])
    run = buffer._runs[0]
    run.file.seek(0)
    data = run.file.read()
    assert b"key" not in data and not data[8:].startswith(b"\x80")  # (a pickle starts with PROTO)
    n, kids, stamps, inputs, records, pickles = msgpack.unpackb(data[8:])
    codec = MsgpackCodec()
    assert (n, inputs, pickles) == (1, None, None)
    assert [unpack_column(c, codec) for c in (kids, stamps, records)] == [[0], [7], ["record"]]
    assert list(run.read(buffer._hashes)) == [(stable_hash("key"), 0, 7, 0, 7, "record")]
    buffer.close()
