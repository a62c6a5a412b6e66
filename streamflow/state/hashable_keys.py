"""Keys that Python cannot hash: lists, dicts, sets (and tuples or Rows holding them).

PyFlink pickles a Python key and compares keys by those bytes, so
``key_by(lambda x: [1])`` works there. streamflow keeps keyed state in dicts
keyed by the key object, so such a key is replaced by a *stand-in*:
:class:`ListKey`, :class:`DictKey` or :class:`SetKey`, subclasses of
``list``/``dict``/``set`` that are equal to the original (``ListKey([1]) == [1]``),
print like it (``[1]``), pass ``isinstance(key, list)``, and hash by their
content (Python's ``hash`` for the state dicts; ``key_groups.stable_hash`` has
a branch for lists, dicts and sets, so the original key and its stand-in go to
the same key group). A stand-in is immutable: its mutating methods raise
``TypeError`` (a changed key would lose its state silently).

Cost: an operator checks the first key it sees (``TimerOperator.probe_keys``);
only when that key is unhashable is its key selector wrapped with
:func:`hashable_key` (one call per record on that operator only). Hashable
keys pay nothing per record.

The checkpoint codec has extension types for the three stand-ins
(``state/codec.py``), so a checkpoint restores them exactly; pickle does too
(``__reduce__``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NoReturn

__all__ = ["DictKey", "ListKey", "SetKey", "hashable_key", "hashable_key_selector", "is_hashable"]

log = logging.getLogger(__name__)


def _immutable(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(
        f"a key is immutable: {type(self).__mro__[1].__name__} key {self!r} stands for the key of keyed "
        "state (changing it would lose that state); copy it first, e.g. list(key)"
    )


class ListKey(list):
    """A list key: equal to the list, hashed by its elements."""

    __slots__ = ("_key_hash",)

    def __init__(self, items: Any = ()) -> None:
        list.__init__(self, items)
        self._key_hash = hash((ListKey, tuple(self)))

    def __hash__(self) -> int:  # type: ignore[override]
        return self._key_hash

    def __reduce__(self) -> tuple[Any, ...]:
        return ListKey, (list(self),)

    append = extend = insert = pop = remove = clear = sort = reverse = _immutable
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _immutable


class DictKey(dict):
    """A dict key: equal to the dict, hashed by its items (in any order, as dict equality)."""

    __slots__ = ("_key_hash",)

    def __init__(self, items: Any = ()) -> None:
        dict.__init__(self, items)
        self._key_hash = hash((DictKey, frozenset(self.items())))

    def __hash__(self) -> int:  # type: ignore[override]
        return self._key_hash

    def __reduce__(self) -> tuple[Any, ...]:
        return DictKey, (dict(self),)

    pop = popitem = clear = update = setdefault = _immutable
    __setitem__ = __delitem__ = __ior__ = _immutable


class SetKey(set):
    """A set key: equal to the set, hashed as the frozenset of its elements."""

    __slots__ = ("_key_hash",)

    def __init__(self, items: Any = ()) -> None:
        set.__init__(self, items)
        self._key_hash = hash(frozenset(self))

    def __hash__(self) -> int:  # type: ignore[override]
        return self._key_hash

    def __repr__(self) -> str:
        return set.__repr__(set(self)) if self else "set()"

    def __reduce__(self) -> tuple[Any, ...]:
        return SetKey, (set(self),)

    add = discard = remove = pop = clear = update = _immutable
    intersection_update = difference_update = symmetric_difference_update = _immutable
    __ior__ = __iand__ = __isub__ = __ixor__ = _immutable


def is_hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


def hashable_key(key: Any) -> Any:
    """``key`` itself if Python can hash it, else its stand-in (recursively: a tuple or Row
    holding a list gets the list's stand-in in its place)."""
    t = type(key)
    if t is list or t is ListKey:
        return key if t is ListKey else ListKey([hashable_key(x) for x in key])
    if t is dict:
        return DictKey({k: hashable_key(v) for k, v in key.items()})
    if t is set:
        return SetKey(key)
    if t is bytearray:
        return bytes(key)  # equal to the bytearray, as PyFlink's pickled bytes compare
    if t is tuple:
        return tuple(hashable_key(x) for x in key)
    if isinstance(key, tuple) and hasattr(t, "_fields"):  # a namedtuple
        return t(*(hashable_key(x) for x in key))
    values = getattr(key, "_values", None)
    if t.__name__ == "Row" and type(values) is list:  # streamflow's Row: names and kind stay
        import copy

        row = copy.copy(key)
        for i, v in enumerate(values):
            row[i] = hashable_key(v)
        return row
    return key


def hashable_key_selector(selector: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``selector`` whose keys are made hashable (one extra call per record)."""

    def select(record: Any) -> Any:
        return hashable_key(selector(record))

    select.__wrapped__ = selector  # type: ignore[attr-defined]
    return select


def probe(selector: Callable[[Any], Any], record: Any, operator: str) -> tuple[Callable[[Any], Any], Any]:
    """``(selector to use, first key)``: the selector as given if its key for ``record`` is
    hashable, else one that returns stand-ins; a key no stand-in fits is refused here."""
    key = selector(record)
    if is_hashable(key):
        return selector, key
    stand_in = hashable_key(key)
    if not is_hashable(stand_in):
        raise TypeError(
            f"operator {operator}: the key selector returned an unhashable key {key!r} "
            f"({type(key).__name__}); keyed state is kept in dicts, so a key must be hashable, or a "
            "list, dict, set (or a tuple or Row of these), which streamflow makes hashable; for your "
            "own class define __eq__ and __hash__ (e.g. @dataclass(frozen=True))"
        )
    log.info(
        "operator %s: keys of type %s are not hashable; they are keyed by an immutable stand-in "
        "equal to them (state/hashable_keys.py)", operator, type(key).__name__
    )  # fmt: skip
    return hashable_key_selector(selector), stand_in
