"""The checkpoint codec's wire format: extension codes, markers, class paths.

Shared by the encoding (``codec.py``) and the decoding (``codec_decoding.py``) side:
the extension codes of the table in ``codec.py``'s docstring, the zero-length
marker values that start an encoded non-native value, how a class is named in
checkpoint data (``type_path``) and found again (:class:`ClassResolver`, only in
modules already imported), and the pause of the cyclic collector around a
(un)packing pass.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import msgpack

EXT_TUPLE, EXT_SET, EXT_FROZENSET, EXT_BIGINT = 1, 2, 3, 4
EXT_DATETIME, EXT_DATE, EXT_TIME, EXT_TIMEDELTA = 5, 6, 7, 8
EXT_DECIMAL, EXT_UUID, EXT_ENUM, EXT_DATACLASS, EXT_NAMEDTUPLE, EXT_ROW = 9, 10, 11, 12, 13, 14
EXT_LIST_KEY, EXT_DICT_KEY, EXT_SET_KEY = 15, 16, 17
EXT_PICKLED = 18

MARKS = [msgpack.ExtType(code, b"") for code in range(19)]  # the markers, by code


class Pickled(bytes):
    """A restored entry of a pickled state, not unpickled yet (``state/typed.py``): carried by
    the codec as itself (extension 18), so a state backend that stores values with the codec
    (RocksDB) keeps it apart from a ``bytes`` value until the job declares the state pickled."""


def type_path(cls: type) -> str:
    """``"module:QualName"``: how a class is named in checkpoint data."""
    return f"{cls.__module__}:{cls.__qualname__}"


def is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)


def is_row(cls: type) -> bool:
    return cls.__name__ == "Row" and cls.__module__.startswith("streamflow.")


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic GC while (un)packing: a large state value would otherwise trigger full
    collections that scan every live object again and again (msgpack's own advice for big
    messages). Re-enabled only if it was enabled (nesting and threads are harmless)."""
    enabled = gc.isenabled()
    if enabled:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class ClassResolver:
    """Finds the class a checkpoint names, only in modules already imported (never imports)."""

    def __init__(self, allowed_types: Iterable[type] | None = None) -> None:
        self.allowed = None if allowed_types is None else {type_path(t): t for t in allowed_types}
        self._cache: dict[tuple[str, str], type] = {}

    def resolve(self, path: str, kind: str, check: Callable[[type], bool]) -> type:
        cached = self._cache.get((path, kind))
        if cached is not None:
            return cached
        if self.allowed is not None:
            cls = self.allowed.get(path)
            if cls is None:
                raise ValueError(
                    f"checkpoint data names {kind} {path!r}, which is not among the codec's allowed_types"
                )
        else:
            cls = self._find(str(path), kind)
        if not check(cls):
            raise ValueError(f"checkpoint data names {path!r} as {kind}, but it is not one")
        self._cache[(path, kind)] = cls
        return cls

    @staticmethod
    def _find(path: str, kind: str) -> type:
        module_name, _, qualname = path.partition(":")
        module = sys.modules.get(module_name)
        if module is None:
            raise ValueError(
                f"checkpoint data names {kind} {path!r} but module {module_name!r} is not imported: "
                "the codec never imports modules while decoding; import it before restoring"
            )
        obj: Any = module
        for part in qualname.split("."):
            if not part or part.startswith("__") or part == "<locals>":
                obj = None
                break
            obj = getattr(obj, part, None)
        if not isinstance(obj, type):
            raise ValueError(f"checkpoint data names {kind} {path!r}, which is not a class it can find")
        return obj
