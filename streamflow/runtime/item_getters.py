"""Recognise the user functions that only index their argument, and run them in C.

Most key selectors and timestamp assigners are ``lambda e: e[0]`` or a method
``return value[2]``: a Python call per record that does one subscript. Called
from an operator's loop, the call costs more than the subscript (about 60 ns
against 25 ns for the same ``operator.itemgetter``), and the call is most of
what separates a keyed job from the hand-written loop.

:func:`item_getter` returns ``operator.itemgetter(k)`` for such a function, and
``None`` for any other. It decides by comparing the function's bytecode and
constants with a reference function compiled here, ``lambda <args>:
<arg>[k]``, so it never guesses: a function that does anything else (calls,
arithmetic, globals, closures, default-argument tricks, a different argument)
compiles to different bytecode and is left alone. ``itemgetter(k)(x)`` is
``x[k]`` (the same ``__getitem__``, the same exceptions), so results and errors
are unchanged; only the function's own frame is gone from a traceback.

Operators then run such functions (and the user's own) over a batch with
``map``/``filter``, the loop in C; when a call raises, :func:`failed_record`
finds the record it was given from the list iterator's position, so the error
still names it.
"""

from __future__ import annotations

import inspect
import logging
import operator
from collections.abc import Callable, Iterator
from types import FunctionType, MethodType
from typing import Any

__all__ = ["failed_record", "item_getter"]

_log = logging.getLogger(__name__)
_ARGS = ("a0", "a1", "a2", "a3")
# the code's own flags (generator, coroutine, varargs...); the higher bits are __future__
# imports, and CO_NESTED only says the function was defined inside another one
_CO_FLAGS = 0xFFFF & ~inspect.CO_NESTED


def item_getter(fn: Any, given: int = 1, record_arg: int = 0) -> Callable[[Any], Any] | None:
    """``operator.itemgetter(k)`` if ``fn(record, ...)`` returns ``record[k]`` for a constant
    ``k`` (an int or a str) and does nothing else; ``given`` is the number of positional
    arguments the caller passes (``fn`` must take exactly that many, so a call that would
    raise ``TypeError`` is never replaced), ``record_arg`` the record's position among them;
    otherwise ``None``."""
    offset = 0
    if isinstance(fn, MethodType):
        fn, offset = fn.__func__, 1
    if type(fn) is not FunctionType or fn.__closure__ or inspect.isgenerator(fn):
        return None
    code = fn.__code__
    nargs = code.co_argcount
    index = record_arg + offset
    if nargs != given + offset or nargs > len(_ARGS) or index >= nargs:
        return None
    if code.co_kwonlyargcount or code.co_names or code.co_flags & inspect.CO_VARARGS:
        return None
    for key in code.co_consts:
        if type(key) not in (int, str):
            continue
        ref = _reference(nargs, index, key)
        if (
            ref.co_code == code.co_code
            and ref.co_consts[1:] == code.co_consts[1:]
            and ref.co_flags & _CO_FLAGS == code.co_flags & _CO_FLAGS
        ):
            _log.debug("%r runs as operator.itemgetter(%r)", fn, key)
            return operator.itemgetter(key)
    return None


def _reference(nargs: int, index: int, key: int | str) -> Any:
    args = ", ".join(_ARGS[:nargs])
    # compiled from a repr of an int or str constant and fixed argument names only
    ref = eval(compile(f"lambda {args}: {_ARGS[index]}[{key!r}]", "<item_getter>", "eval", dont_inherit=True))
    return ref.__code__


def failed_record(records: list, it: Iterator[Any]) -> Any:
    """The record ``map``/``filter`` over ``it = iter(records)`` was handling when its call
    raised: the one just before the iterator's position."""
    return records[len(records) - it.__length_hint__() - 1]  # type: ignore[attr-defined]
