"""One keyed-state table in RocksDB, used like the heap backend's ``dict``.

Theory of operation
-------------------
Built-in operators use ``backend.table(name)`` as a dict (``get``, ``[k] = v``,
``setdefault``, ``pop``...). :class:`RocksTable` gives them those methods over
RocksDB with a bounded **write-back cache**: the hot keys' *decoded* values
live in a dict; a miss reads RocksDB once (one ``get``, one decode) and keeps
the value; a write only touches the dict and marks the key dirty. Dirty
entries reach RocksDB in one ``WriteBatch`` per flush, so the write path costs
one batch per record batch rather than one RocksDB write per record:

* at the next *safe point* once the dirty set reaches ``flush_entries``
  (see below), and when the cache exceeds ``cache_entries`` (then the oldest
  half of the cache is dropped, dirty entries written first);
* at every checkpoint (``RocksDBKeyedStateBackend.snapshot``) and on close.

A value read from the cache is the live object, and built-in operators
mutate some in place (``table.setdefault(key, []).append(x)``, a window
operator's ``{window: acc}``): so reading a value of a mutable type marks it
dirty too (immutable scalars and tuples do not). A flush must not separate a
read from the caller's mutation of the value it read, so flushes and
evictions triggered by size are deferred to a **safe point**: the next time
the operator sets ``backend.current_key`` (every built-in operator does so
between two records) or a snapshot. As in Flink's RocksDB backend, user code
must write a changed value back (``state.update(v)``); a value mutated in
place without that may be lost once it leaves the cache.

RocksDB keys are ``key group (2 bytes, big-endian) | state id (2 bytes) |
encoded key``: all entries of a key group are contiguous, so a rescaled
restore copies key-group ranges with one seek each. Keys are encoded with the
safe msgpack codec after normalising Python's equal-but-different keys
(``1``, ``1.0``, ``True``; an ``IntEnum`` and its value), which share one
dict entry on the heap backend and so must share one RocksDB key. Values go
through the job's state codec; a table may add a ``to_plain``/``from_plain``
pair for values the codec does not carry (the window operator's window
objects, merging window sets).
"""

from __future__ import annotations

import enum
import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from typing import TYPE_CHECKING, Any, cast

import msgpack

from . import codec as _codec
from .key_groups import key_group_of, stable_hash
from .state_errors import refused_state_value

if TYPE_CHECKING:
    from .rocksdb_backend import RocksDBKeyedStateBackend

log = logging.getLogger(__name__)

_MISS = object()  # not in the cache
_ABSENT = object()  # cached: not in RocksDB either (read, or deleted since the last flush)
_RAISE = object()
# values a caller cannot mutate in place: reading them does not make the key dirty
_IMMUTABLE = frozenset({int, float, str, bytes, bool, type(None), tuple, frozenset})
_PLAIN_KEYS = frozenset({str, int, bytes})  # their own canonical form (the common keys)


def canonical_key(key: Any) -> Any:
    """The representative of ``key``'s equality class (see the module docstring)."""
    t = type(key)
    if t is str or t is int or t is bytes:
        return key
    if t is bool:
        return int(key)
    if t is float:
        return int(key) if key.is_integer() else key
    if t is tuple:
        return tuple(map(canonical_key, key))
    if isinstance(key, enum.Enum) and isinstance(key, (int, str, bytes, float)):
        return canonical_key(key._value_)
    return key


def encode_key(key: Any) -> bytes:
    """Keys always use the safe msgpack codec (whatever the job's state codec): equal keys
    must give equal bytes, which pickle does not promise."""
    try:
        return _codec._pack(key)
    except Exception:
        return _codec.encode(key)  # raises the codec's error naming the type


class RocksTable:
    """A dict-like view of one state (one state id) of a RocksDB keyed backend."""

    __slots__ = (
        "_backend",
        "_cache",
        "_dirty",
        "_from_plain",
        "_prefix",
        "_rkeys",
        "_to_plain",
        "name",
        "sid",
    )

    def __init__(
        self,
        backend: RocksDBKeyedStateBackend,
        name: str,
        sid: int,
        to_plain: Callable[[Any], Any] | None = None,
        from_plain: Callable[[Any], Any] | None = None,
    ) -> None:
        self._backend = backend
        self.name = name
        self.sid = sid
        self._prefix = sid.to_bytes(2, "big")
        self._cache: dict[Any, Any] = {}
        self._dirty: set[Any] = set()
        self._rkeys: dict[Any, bytes] = {}
        self._to_plain = to_plain
        self._from_plain = from_plain

    def set_value_transform(
        self, to_plain: Callable[[Any], Any] | None, from_plain: Callable[[Any], Any] | None
    ) -> None:
        self._to_plain, self._from_plain = to_plain, from_plain

    def renumber(self, sid: int) -> None:
        """Take state id ``sid`` (a restored DB's): the cache is dropped (nothing is dirty
        before a restore)."""
        self.sid = sid
        self._prefix = sid.to_bytes(2, "big")
        self.drop_cache()

    # -- keys ----------------------------------------------------------------
    def rkey(self, key: Any) -> bytes:
        """The RocksDB key of ``key`` (a canonical key), memoised while the key is cached."""
        rk = self._rkeys.get(key)
        if rk is None:
            kg = key_group_of(key, self._backend.max_parallelism)
            rk = self._rkeys[key] = kg.to_bytes(2, "big") + self._prefix + encode_key(key)
        return rk

    # -- the cache -----------------------------------------------------------
    def _load(self, key: Any) -> Any:
        """Read ``key`` from RocksDB into the cache; the value or _ABSENT."""
        raw = self._backend.db_get(self.rkey(key))
        value = _ABSENT if raw is None else self._decode(raw)
        cache = self._cache
        cache[key] = value
        if len(cache) > self._backend.cache_entries:
            self._backend.request_flush(evict=True)
        return value

    def prefetch(self, keys: Iterable[Any]) -> None:
        """Read the uncached ``keys`` of a record batch with one RocksDB multi-get (the read path
        batched per record batch, as the write path is by ``flush``)."""
        cache = self._cache
        missing = []
        for key in keys:
            if type(key) not in _PLAIN_KEYS:
                key = canonical_key(key)
            if key not in cache:
                cache[key] = _ABSENT  # a placeholder; also dedupes the batch's keys
                missing.append(key)
        if not missing:
            return
        rkeys, prefix, maxp = self._rkeys, self._prefix, self._backend.max_parallelism
        wanted = []
        for key in missing:  # self.rkey inlined: a record batch's worth of keys
            rk = rkeys.get(key)
            if rk is None:
                rk = rkeys[key] = (stable_hash(key) % maxp).to_bytes(2, "big") + prefix + encode_key(key)
            wanted.append(rk)
        decode = self._decode
        raws = self._backend.db_multi_get(wanted)
        for key, raw in zip(missing, raws, strict=True):
            if raw is not None:
                cache[key] = decode(raw)
        if len(cache) > self._backend.cache_entries:
            self._backend.request_flush(evict=True)

    def _decode(self, raw: bytes) -> Any:
        value = self._backend.decode(raw)
        return value if self._from_plain is None else self._from_plain(value)

    def _mark(self, key: Any) -> None:
        dirty = self._dirty
        dirty.add(key)
        if len(dirty) >= self._backend.flush_entries:
            self._backend.request_flush(evict=False)

    def flush_into(self, batch: Any, encode: Callable[[Any], bytes], key_types: set[type]) -> int:
        """Put every dirty entry into ``batch``; returns how many (the caller clears the dirty
        set once the batch is written)."""
        dirty, cache, rkey, to_plain = self._dirty, self._cache, self.rkey, self._to_plain
        if not dirty:
            return 0
        n = 0
        for key in dirty:
            value = cache.get(key, _ABSENT)
            if value is _ABSENT:
                batch.delete(rkey(key))
            else:
                key_types.add(type(key))
                rk = rkey(key)
                try:
                    data = encode(value if to_plain is None else to_plain(value))
                except Exception as e:  # names the state and its operator (state_errors.py)
                    b = self._backend
                    pickled, kind = self.name in b.pickled, b._kinds.get(self.name)
                    raise refused_state_value(self.name, b.what, value, e, pickled, kind) from e
                batch.put(rk, data)
            n += 1
        return n

    def clean(self) -> None:
        self._dirty.clear()

    def evict(self, keep: int) -> None:
        """Drop the oldest cached entries (insertion order) down to ``keep``; all clean now."""
        cache, rkeys = self._cache, self._rkeys
        drop = len(cache) - keep
        if drop <= 0:
            return
        for key in list(islice(cache, drop)):
            del cache[key]
            rkeys.pop(key, None)

    def drop_cache(self) -> None:
        self._cache.clear()
        self._rkeys.clear()
        self._dirty.clear()

    # -- the dict methods operators use --------------------------------------
    def get(self, key: Any, default: Any = None) -> Any:
        if type(key) not in _PLAIN_KEYS:
            key = canonical_key(key)
        value = self._cache.get(key, _MISS)
        if value is _MISS:
            value = self._load(key)
        if value is _ABSENT:
            return default
        if type(value) not in _IMMUTABLE:
            self._mark(key)  # the caller may change it in place
        return value

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key, _ABSENT)
        if value is _ABSENT:
            raise KeyError(key)
        return value

    def __contains__(self, key: Any) -> bool:
        if type(key) not in _PLAIN_KEYS:
            key = canonical_key(key)
        value = self._cache.get(key, _MISS)
        if value is _MISS:
            value = self._load(key)
        return value is not _ABSENT

    def __setitem__(self, key: Any, value: Any) -> None:
        if type(key) not in _PLAIN_KEYS:
            key = canonical_key(key)
        cache = self._cache
        cache[key] = value
        dirty = self._dirty
        dirty.add(key)
        backend = self._backend
        if len(dirty) >= backend.flush_entries or len(cache) > backend.cache_entries:
            backend.request_flush(evict=len(cache) > backend.cache_entries)

    def __delitem__(self, key: Any) -> None:
        if self.pop(key, _ABSENT) is _ABSENT:
            raise KeyError(key)

    def pop(self, key: Any, default: Any = _RAISE) -> Any:
        if type(key) not in _PLAIN_KEYS:
            key = canonical_key(key)
        value = self._cache.get(key, _MISS)
        if value is _MISS:
            value = self._load(key)
        if value is _ABSENT:
            if default is _RAISE:
                raise KeyError(key)
            return default
        self._cache[key] = _ABSENT
        self._mark(key)
        return value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if type(key) not in _PLAIN_KEYS:
            key = canonical_key(key)
        value = self._cache.get(key, _MISS)
        if value is _MISS:
            value = self._load(key)
        if value is _ABSENT:
            self._cache[key] = value = default
            self._mark(key)
        elif type(value) not in _IMMUTABLE:
            self._mark(key)
        return value

    def update(self, other: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = ()) -> None:
        items = other.items() if isinstance(other, Mapping) else other
        for key, value in items:
            self[key] = value

    # -- whole-table operations: a scan of RocksDB (rare: broadcast state, batch ends) -----
    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every entry (the cache's view wins over RocksDB's), in no particular order."""
        self._backend.flush()
        decode = self._decode
        for _rk, key, raw in self._backend.scan(self.sid):
            cached = self._cache.get(key, _MISS)
            if cached is _MISS:
                yield key, decode(raw)
            elif cached is not _ABSENT:
                yield key, cached

    def keys(self) -> list[Any]:
        return [k for k, _ in self.items()]

    def values(self) -> list[Any]:
        return [v for _, v in self.items()]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())

    def __len__(self) -> int:
        self._backend.flush()
        return sum(1 for _ in self._backend.scan(self.sid))

    def __bool__(self) -> bool:
        self._backend.flush()
        return any(True for _ in self._backend.scan(self.sid))

    def clear(self) -> None:
        for key in self.keys():
            self.pop(key, None)

    def __repr__(self) -> str:
        return f"<RocksTable {self.name!r} sid={self.sid} cached={len(self._cache)}>"


def fast_decoder(codec: Any) -> Callable[[bytes], Any]:
    """The default codec's unpacker called directly (no GC pause per small value); the codec's
    own ``decode`` for anything it refuses (its error), and for other codecs."""
    if type(codec) is not _codec.MsgpackCodec:
        return cast("Callable[[bytes], Any]", codec.decode)
    unpack = functools.partial(
        msgpack.unpackb,
        ext_hook=_codec._ext_hook,
        list_hook=codec._decoder.list_hook,
        strict_map_key=False,
        raw=False,
        timestamp=0,
    )

    def decode(raw: bytes) -> Any:
        try:
            return unpack(raw)
        except Exception:
            return codec.decode(raw)

    return decode
