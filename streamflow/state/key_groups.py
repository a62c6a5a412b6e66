"""Key groups: where a key lives, stable across processes and restarts.

Python's ``hash()`` of ``str``/``bytes`` is salted per process, so it cannot
route keys to subtasks or tell a restored subtask which keys it owns. Keys are
hashed with :func:`stable_hash` instead, mapped to one of ``max_parallelism``
key groups, and key groups are assigned to subtasks in contiguous ranges
(Flink's ``KeyGroupRangeAssignment``), so state can be rescaled.

Keys that are equal in Python share keyed state (the state tables are dicts),
so they must also share a key group, or results would depend on parallelism.
:func:`stable_hash` therefore follows Python's equality where Python's own
hash does: ``True``, ``1`` and ``1.0`` (and ``False``, ``0``, ``0.0``, ``-0.0``)
hash alike, as do keys that contain them (tuples, dataclasses), and an Enum
member that is also an ``int``/``str``/``bytes``/``float`` (``IntEnum``,
``StrEnum``) hashes as its value, which it equals. They are normalised, not
refused: JSON parsing yields ``1`` and ``1.0`` for the same number.

Lists, dicts and sets (keys PyFlink accepts, as it pickles keys) hash by their
content, dicts and sets in any order, so a key and its hashable stand-in
(``hashable_keys.py``) share a key group; a ``Row`` hashes as the tuple of its values.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
import zlib
from typing import Any

DEFAULT_MAX_PARALLELISM = 128  # Flink's DEFAULT_LOWER_BOUND_MAX_PARALLELISM
UPPER_BOUND_MAX_PARALLELISM = 1 << 15


def stable_hash(key: Any) -> int:
    """A process-independent 32-bit hash of a key; raises TypeError for other types."""
    t = type(key)
    if t is str:
        return _fmix32(zlib.crc32(key.encode("utf-8", "surrogatepass")))
    if t is int or t is bool:
        return _mix(key & 0xFFFFFFFFFFFFFFFF)
    if t is bytes:
        return _fmix32(zlib.crc32(key))
    if t is tuple:
        h = 0x345678
        for part in key:
            h = ((h * 1000003) ^ stable_hash(part)) & 0xFFFFFFFF
        return _fmix32(h)
    if key is None:
        return 0
    if t is float:
        if key.is_integer():  # equal to an int (1.0 == 1, -0.0 == 0): hash as that int
            return _mix(int(key) & 0xFFFFFFFFFFFFFFFF)
        return _fmix32(zlib.crc32(struct.pack("<d", key)))
    if isinstance(key, enum.Enum):
        if isinstance(key, (int, str, bytes, float)):  # IntEnum, StrEnum: equal to its value
            return stable_hash(key._value_)
        return stable_hash(key.name)
    if dataclasses.is_dataclass(key) and not isinstance(key, type):
        return stable_hash(tuple(getattr(key, f.name) for f in dataclasses.fields(key)))
    if isinstance(key, (str, int, bytes, tuple)):
        return stable_hash(t.__mro__[1](key) if t.__mro__[1] is not object else key)
    if isinstance(key, list):  # a list key (state/hashable_keys.py: ListKey stands in for it)
        return _fmix32(stable_hash(tuple(key)) ^ 0x9E3779B9)
    if isinstance(key, (set, frozenset)):  # in any order, as set equality
        return _fmix32((sum(map(stable_hash, key)) + 0x27D4EB2F) & 0xFFFFFFFF)
    if isinstance(key, dict):  # in any order, as dict equality
        return _fmix32((sum(stable_hash(item) for item in key.items()) + 0x165667B1) & 0xFFFFFFFF)
    if t.__name__ == "Row" and type(getattr(key, "_values", None)) is list:  # streamflow's Row
        return stable_hash(tuple(key._values))
    if isinstance(key, bytearray):
        return stable_hash(bytes(key))
    raise TypeError(
        f"a key of type {t.__name__} has no stable hash; key selectors must return "
        "str, int, bytes, float, bool, None, an Enum, a dataclass, a Row, or a tuple, list, "
        "dict or set of these"
    )


def _fmix32(h: int) -> int:
    """MurmurHash3's 32-bit finalizer. crc32 is linear: keys that differ only in their last
    characters would share high bits and crowd into a few key groups (Flink likewise mixes
    ``hashCode()`` with murmur before choosing a key group)."""
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _mix(x: int) -> int:
    # 64-bit finalizer of MurmurHash3, folded to 32 bits
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 33
    return x & 0xFFFFFFFF


def default_max_parallelism(parallelism: int) -> int:
    """The max parallelism (number of key groups) of an operator that sets none, nor its
    environment: Flink's ``KeyGroupRangeAssignment.computeDefaultMaxParallelism``, the
    parallelism and a half rounded up to a power of two, at least 128, at most 32768."""
    wanted = parallelism + parallelism // 2
    return min(max(1 << (wanted - 1).bit_length(), DEFAULT_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)


def key_group_of(key: Any, max_parallelism: int) -> int:
    return stable_hash(key) % max_parallelism


def subtask_of_key_group(key_group: int, max_parallelism: int, parallelism: int) -> int:
    return key_group * parallelism // max_parallelism


def key_group_range(subtask: int, max_parallelism: int, parallelism: int) -> range:
    """The key groups owned by ``subtask`` (contiguous, as in Flink)."""
    start = (subtask * max_parallelism + parallelism - 1) // parallelism
    end = ((subtask + 1) * max_parallelism + parallelism - 1) // parallelism
    return range(start, end)
