"""The sorted runs a batch job's sort buffer spills to disk, written with the job's codec.

Theory of operation
-------------------
When a keyed operator's sorted input (``sort_buffer.py``) passes its memory
budget, the buffer writes what it holds, in sort order, to a temporary file: a
*run*. A run is a sequence of frames, each an 8-byte big-endian length and a
MessagePack array ``[rows, key ids, timestamps, inputs or None, records,
pickled or None]`` of one chunk of rows (``CHUNK`` at most). Each column is
packed by ``state/heap_columns.pack_column``, the encoder of the heap backend's
incremental checkpoints: the cheapest exact encoder that accepts the column
(msgspec for plain scalars, field-wise columns for same-length tuples, msgpack's
strict packer), else the job's records codec. Records that are all tuples of one
length are written as one such column per field (an array of columns), so a
field the fast encoders refuse (a ``Decimal``, a ``datetime``) sends only its own
column through the codec. Records come back exactly as a checkpoint gives them
back: tuples stay tuples and lists lists, ``True`` stays a bool, dicts keep int
keys, sets, bytes, big ints, NaN, ``datetime``, ``Decimal``, ``UUID``, Enum
members, dataclasses and namedtuples round-trip (and, as in checkpoints, a
``bytearray`` comes back as ``bytes``). A row's key hash and
timestamp sort key are not written: the buffer keeps one hash per key id in
memory, and a missing timestamp sorts as ``NO_TIMESTAMP``. Reading a run rebuilds
the rows ``(hash, key id, timestamp key, input, timestamp, record)`` a frame at a
time with C-level ``zip``/``map`` passes.

**Records the codec refuses.** By default the job fails, naming the operator,
the record's type and the ways out (a supported type, more memory, or opting in
to pickling). A job that opted in to pickling its in-flight records -- the
records codec is a ``PickleCodec`` (``set_records_codec(PickleCodec())``, or
``set_state_codec(PickleCodec())`` with no records codec of its own), or the
operator's input stream is declared ``Types.PICKLED_BYTE_ARRAY()``, the opt-ins
unaligned checkpoints honour for the same records -- has each refused record
pickled on its own (its place in the records column holds ``None``, the frame's
last element lists ``[position, pickle]`` pairs), every other record still goes
through the codec. The first fallback of an operator is logged at WARNING with
its cause (once per operator and job, whatever its parallelism). The runs are
this process's own temporary files, read back only by the buffer that wrote
them; a run holds pickles only when the job opted in.
"""

from __future__ import annotations

import logging
import pickle
import struct
from collections.abc import Iterator
from itertools import repeat
from operator import countOf, itemgetter
from typing import IO, Any

import msgpack

from ..state.codec import Codec, MsgpackCodec, PickleCodec
from ..state.heap_columns import pack_column, packb, types_of, unpack_column

__all__ = ["CHUNK", "NO_TIMESTAMP", "Run", "RunCodec", "spill_opt_in"]

_log = logging.getLogger(__name__)

CHUNK = 4096  # rows per frame of a run
NO_TIMESTAMP = -(2**63)  # a record without a timestamp sorts as Flink's Long.MIN_VALUE
_FRAME = struct.Struct(">Q")
_REFUSED = (TypeError, ValueError, OverflowError, RecursionError)
_Packed = bytes | list[bytes]  # a records column: one column, or same-length tuples' field columns


def spill_opt_in(records_codec: Codec, input_pickled: bool) -> tuple[Codec, str | None]:
    """The codec a keyed operator's runs are written with and why the job may pickle a record
    that codec refuses (None: it may not): see the module doc."""
    if isinstance(records_codec, PickleCodec):
        return MsgpackCodec(), "the job's records codec is PickleCodec()"
    return records_codec, "its input stream is declared Types.PICKLED_BYTE_ARRAY()" if input_pickled else None


def _type_name(t: type) -> str:
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _pack_records(records: list, codec: Codec) -> _Packed:
    """The records column: same-length tuples field by field (a list of field columns: each
    field takes its own cheapest exact encoder, so a ``Decimal`` field does not send the whole
    column through the codec), else one column (``heap_columns``)."""
    if records and types_of(records) == {tuple}:
        arity = len(records[0])
        if arity and countOf(map(len, records), arity) == len(records):
            return [pack_column(list(map(itemgetter(i), records)), codec) for i in range(arity)]
    return pack_column(records, codec)


def _unpack_records(packed: _Packed, codec: Codec) -> list:
    if type(packed) is list:
        return list(zip(*(unpack_column(f, codec) for f in packed), strict=True))
    return unpack_column(packed, codec)  # type: ignore[arg-type]


class RunCodec:
    """How one operator subtask's sort buffer writes its runs (module doc).

    ``where`` names the operator in errors and logs; ``pickle_reason`` is why the job may
    pickle a refused record (None: it may not); ``logged``: the operators whose fallback was
    logged, shared by the subtasks of a job."""

    def __init__(
        self,
        where: str,
        memory: int,
        codec: Codec | None = None,
        pickle_reason: str | None = None,
        logged: set[str] | None = None,
        *,
        what: str = "the sorted input",
        memory_key: str = "execution.sorted-inputs.memory",
    ) -> None:
        self.where = where
        self.memory = memory
        self.what = what  # what spills, in errors and logs
        self.memory_key = memory_key  # the configuration key of ``memory``
        self.codec: Codec = codec if codec is not None else MsgpackCodec()
        self.pickle_reason = pickle_reason
        self._logged = logged if logged is not None else set()
        self.pickled = 0  # records written pickled

    def frame(self, kids: list[int], stamps: list, inputs: list[int] | None, records: list) -> bytes:
        """One frame of a run: its length and the packed columns (module doc)."""
        codec = self.codec
        try:
            packed, pickled = _pack_records(records, codec), None
        except _REFUSED as exc:
            packed, pickled = self._with_pickles(records, exc)
        body = packb(
            [
                len(kids),
                pack_column(kids, codec),
                pack_column(stamps, codec),
                None if inputs is None else pack_column(inputs, codec),
                packed,
                pickled,
            ]
        )
        return _FRAME.pack(len(body)) + body

    def pack_records(self, records: list) -> tuple[_Packed, list | None]:
        """A records column as a run writes it, with the pickled records the job opted in to
        (``[position, pickle]`` pairs, or None): for other spill files of a batch job (a blocking
        exchange's result, ``blocking_result.py``)."""
        try:
            return _pack_records(records, self.codec), None
        except _REFUSED as exc:
            return self._with_pickles(records, exc)

    def unpack_records(self, packed: _Packed, pickles: list | None) -> list:
        """The records :meth:`pack_records` packed."""
        records = _unpack_records(packed, self.codec)
        if pickles:
            if self.pickle_reason is None:  # never: only a job that opted in writes them
                raise ValueError(f"{self.where}: a spill file holds pickles the job did not opt in to")
            for i, data in pickles:
                records[i] = pickle.loads(data)  # this process's own spill file (module doc)
        return records

    def _with_pickles(
        self, records: list, column_error: Exception
    ) -> tuple[bytes | list[bytes], list | None]:
        """Slow path, after the codec refused the column: find the records it refuses; fail
        naming the first, or pickle each (the job opted in) and pack the rest with the codec."""
        refused: list[tuple[int, Exception]] = []
        for i, record in enumerate(records):
            try:
                self.codec.encode(record)
            except _REFUSED as exc:
                refused.append((i, exc))
        if not refused:  # no single record is refused: the column as a whole (e.g. too deep)
            raise TypeError(f"{self.where}: cannot spill {self.what}: {column_error}") from column_error
        first, cause = refused[0]
        record = records[first]
        if self.pickle_reason is None:
            raise TypeError(
                f"{self.where}: batch mode spills {self.what} to disk beyond "
                f"{self.memory_key} ({self.memory} bytes) with the job's records codec "
                f"{self.codec.name!r}, which refuses a record of type {_type_name(type(record))} "
                f"({record!r:.200}): {cause}. Make the records a supported type (a tuple, dataclass, "
                f"namedtuple, Row...), raise {self.memory_key}, or opt in to pickling: "
                "env.get_checkpoint_config().set_records_codec(PickleCodec()), or declare the stream "
                "Types.PICKLED_BYTE_ARRAY()"
            ) from None
        if self.where not in self._logged:
            self._logged.add(self.where)
            _log.warning(
                "%s: the spill codec %r refuses records of type %s (%s): %s spills such records "
                "pickled, since %s (logged once per operator)",
                self.where, self.codec.name, _type_name(type(record)), cause, self.what, self.pickle_reason,
            )  # fmt: skip
        kept = list(records)
        pickles: list[list] = []
        for i, _ in refused:
            try:
                pickles.append([i, pickle.dumps(records[i], pickle.HIGHEST_PROTOCOL)])
            except Exception as exc:
                raise TypeError(
                    f"{self.where}: batch mode spills {self.what} to disk beyond "
                    f"{self.memory_key} ({self.memory} bytes); a record of type "
                    f"{_type_name(type(records[i]))} ({records[i]!r:.200}) is refused by the records "
                    f"codec {self.codec.name!r} and cannot be pickled either ({exc}); raise "
                    f"{self.memory_key} or make the records picklable"
                ) from exc
            kept[i] = None
        self.pickled += len(pickles)
        return _pack_records(kept, self.codec), pickles


class Run:
    """One sorted run on disk (module doc), read back a frame at a time."""

    def __init__(self, file: IO[bytes], rows: int, codec: RunCodec) -> None:
        self.file = file
        self.rows = rows
        self._codec = codec

    def read(self, hashes: list[int]) -> Iterator[tuple]:
        """The run's rows ``(hash, key id, timestamp key, input, timestamp, record)``;
        ``hashes``: the stable hash of each key id."""
        file, codec = self.file, self._codec.codec
        may_unpickle = self._codec.pickle_reason is not None
        hash_of = hashes.__getitem__
        file.seek(0)
        while header := file.read(_FRAME.size):
            (size,) = _FRAME.unpack(header)
            n, kids_b, stamps_b, inputs_b, records_b, pickles = msgpack.unpackb(
                file.read(size), raw=False, use_list=True
            )
            kids = unpack_column(kids_b, codec)
            stamps = unpack_column(stamps_b, codec)
            records = _unpack_records(records_b, codec)
            if not n == len(kids) == len(stamps) == len(records):
                raise ValueError(f"{self._codec.where}: a sorted run's frame is damaged")
            if pickles:
                if not may_unpickle:  # never: only a job that opted in writes them
                    raise ValueError(
                        f"{self._codec.where}: a sorted run holds pickles the job did not opt in to"
                    )
                for i, data in pickles:
                    records[i] = pickle.loads(data)  # this process's own run file (module doc)
            keys = stamps if None not in stamps else [NO_TIMESTAMP if t is None else t for t in stamps]
            inputs: Any = repeat(0) if inputs_b is None else unpack_column(inputs_b, codec)
            yield from zip(map(hash_of, kids), kids, keys, inputs, stamps, records, strict=False)  # repeat(0)
