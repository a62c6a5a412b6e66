"""A keyed ``reduce`` over a batch as one generated loop, the reduce function's body inlined.

A keyed reduce calls the user's function once per record: ``reduce(table[key], record)``.
For the usual shapes, ``lambda a, b: (a[0], a[1] + b[1], b[2])`` or ``lambda a, b: a + b``,
that call (a frame, two argument bindings) costs more than what the function does. This
module writes the batch loop of :class:`~.keyed_operators.ReduceOperator`'s plain-callable
path as Python source with the function's *expression* in place of the call, compiles it
once per shape, and the operator runs it over each batch.

Theory of operation
-------------------
* :func:`inline_expression` rebuilds the function's expression from its bytecode with the
  small stack machine of ``runtime/inline_batch.py`` (``rebuild``: arguments, ``int``/
  ``str``/``bool``/``None`` constants, subscripts, arithmetic, comparisons, unary operators,
  tuples; anything else, a call, a global, an attribute, a closure, a conditional, a default
  or keyword-only argument, a generator, makes it return ``None``). The expression performs
  the same operations on the same operands in the same order (every operation
  parenthesised), so it gives the same result and raises the same errors as the call would;
  only the function's frame is gone from a traceback.
  The framework's own generated functions (``sum(1)`` on tuples: ``keyed_operators.py``)
  declare their expression in an ``inline`` attribute instead, with the names it needs.
* :func:`make_fold` writes ``fold(it, table, key_of, missing) -> (out, new)``: for each
  record of ``it``, the key (``r[k]`` when the key selector is an ``operator.itemgetter`` of
  one item, ``key_of(r)`` otherwise), the accumulator from ``table`` (a plain ``dict``; a
  key's first record is stored as it is), the expression, the store and the output.
  Two variants, as the operator's general loop has: ``try``/``except KeyError`` while
  most keys are known, ``dict.get`` with a sentinel while many are new. ``new`` counts the
  keys seen for the first time. A failure propagates as it is; the caller finds the record
  from the iterator's position (``item_getters.failed_record``).

The generated text comes from the bytecode's own constants (``repr`` of ints and strings)
and fixed names only, never from user-supplied text.
"""

from __future__ import annotations

import builtins
import logging
import operator
from collections.abc import Callable
from types import CodeType, FunctionType
from typing import Any

from .inline_batch import plain_code, rebuild

__all__ = ["inline_expression", "key_expression", "make_fold"]

_log = logging.getLogger(__name__)

ACC, REC = "acc", "r"  # the names the expression uses for the accumulator and the record


def inline_expression(fn: Any) -> tuple[str, dict[str, Any]] | None:
    """``(expression, namespace)`` computing ``fn(acc, r)`` with the names ``acc`` and ``r``,
    or ``None`` when ``fn`` is not a recognised shape (module doc)."""
    declared = getattr(fn, "inline", None)
    if isinstance(declared, tuple) and len(declared) == 2 and isinstance(declared[0], str):
        return declared[0], dict(declared[1])
    code = plain_code(fn, 2)
    if code is None:
        return None
    expression = rebuild(code, {code.co_varnames[0]: ACC, code.co_varnames[1]: REC})
    if expression is None:
        return None
    _log.debug("reduce function %r inlined as %s", fn, expression)
    return expression, {}


def key_expression(key_of: Any) -> str | None:
    """``r[k]`` when ``key_of`` is ``operator.itemgetter(k)`` of one int or str item."""
    if type(key_of) is not operator.itemgetter:
        return None
    items = key_of.__reduce__()[1]
    if len(items) != 1 or type(items[0]) not in (int, str):
        return None
    return f"{REC}[{items[0]!r}]"


# the compiled loop of each shape: a job's own names (``fallback``) bind as a new function's
# globals, so a shape compiles once per process, not once per job (a compile costs 0.1-0.2 ms,
# and a keyed sum builds four or eight loops at its first batch)
_CACHE: dict[str, CodeType] = {}


def make_fold(
    expression: str,
    namespace: dict[str, Any],
    key: str | None,
    known_keys: bool,
    keys: bool = False,
    first: str | None = None,
) -> Callable[..., Any]:
    """``fold(it, table, key_of, missing) -> (out, new)`` (module doc). ``known_keys``: the
    ``try``/``except KeyError`` variant; otherwise ``dict.get`` with ``missing``. ``keys``:
    ``-> (out, new, keys)``, the batch's keys too (for the log of writes of incremental
    checkpoints: one ``append`` per record instead of calling the key selector again).

    ``first``: a condition over ``r`` that every value of ``table`` meets, which the
    ``expression`` relies on (and keeps: what it returns meets it too), so it needs no
    guard of its own. The only values the fold stores without the expression are a key's
    first records, so it tests ``first`` on those: the fold returns one more item, ``True``
    after the whole of ``it``, ``False`` right after storing a first record that fails the
    condition (the rest of ``it`` is then for a fold whose expression has its guard)."""
    key_text = key or f"key_of({REC})"
    done = f"out, new{', keys' if keys else ''}"
    stop = "" if first is None else f"            if not ({first}):\n                return {done}, False\n"
    if known_keys:
        lookup = (
            "        try:\n"
            f"            {ACC} = table[key]\n"
            "        except KeyError:\n"
            "            new += 1\n"
            f"            table[key] = {REC}\n"
            f"            out.append({REC})\n"
            f"{stop}"
            "            continue\n"
        )
    else:
        lookup = (
            f"        {ACC} = get(key, missing)\n"
            f"        if {ACC} is missing:\n"
            "            new += 1\n"
            f"            table[key] = {REC}\n"
            f"            out.append({REC})\n"
            f"{stop}"
            "            continue\n"
        )
    # ``out.append(x)``, not a bound ``append``: CPython 3.11+ runs the method form of
    # list.append without a call (about 40 fewer instructions a record)
    source = (
        "def fold(it, table, key_of, missing):\n"
        "    out = []\n"
        f"{'    keys = []' + chr(10) if keys else ''}"
        "    get = table.get\n"
        "    new = 0\n"
        f"    for {REC} in it:\n"
        f"        key = {key_text}\n"
        f"{'        keys.append(key)' + chr(10) if keys else ''}"
        f"{lookup}"
        f"        {ACC} = {expression}\n"
        f"        table[key] = {ACC}\n"
        f"        out.append({ACC})\n"
        f"    return {done}{'' if first is None else ', True'}\n"
    )
    code = _CACHE.get(source)
    if code is None:
        # the text is built from fixed names, repr() of int/str/bool/None constants and operators
        module = compile(source, "<streamflow reduce fold>", "exec", dont_inherit=True)
        code = next(c for c in module.co_consts if isinstance(c, CodeType))
        if len(_CACHE) < 256:
            _CACHE[source] = code
    scope: dict[str, Any] = {**namespace, "__builtins__": builtins}
    return FunctionType(code, scope, "fold")
