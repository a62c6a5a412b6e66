"""``map`` and ``filter`` over a batch as one generated comprehension, the function inlined.

A stateless ``map(lambda e: e[1] * 2)`` or ``filter(lambda v: v % 3 != 0)`` runs its function
once per record from ``list(map(fn, it))``: the loop is in C, but each call still builds a
frame and enters the interpreter, about 550 machine instructions a record (cachegrind, 512-
record batches) for a function whose own work is a subscript and a multiplication (60-100).
A hand-written loop has the expression in its body and pays none of it. This module writes
the batch loop as a list comprehension with the function's *expression* in place of the call
(``[(r[1] * 2) for r in it]``, ``[r for r in it if ((r % 3) != 0)]``), compiles it once per
expression, and the operator runs it over each batch (W1 of bench/run.py: 1,421 -> about 600
instructions a record for the map and the filter together).

Theory of operation
-------------------
* :func:`rebuild` reads a function's bytecode (``dis``) with a small stack machine that knows
  only: loading an argument, loading an ``int``/``str``/``bool``/``None`` constant,
  subscripting, a binary arithmetic operator, a comparison (``<``, ``==``, ``is``, ``in``
  and their negations; no chains, which compile to jumps), a unary ``-``/``~``/``not``,
  building a tuple, and returning. Anything else (a call, a global, an attribute, a
  closure, a conditional, a default or keyword-only argument, a generator) makes it return
  ``None`` and the function is called as before. What it rebuilds is the same operations on
  the same operands in the same order, every operation parenthesised, so the expression
  gives the same result and raises the same errors as the call; only the function's frame
  is gone from a traceback (the generated code's file name says which function it inlines).
  ``runtime/fold.py`` inlines a keyed reduce's two-argument function with the same machine.
* :func:`batch_map` / :func:`batch_filter` return ``run(it) -> list`` for a one-argument
  function it recognises. ``run`` iterates ``it`` (the operator passes ``iter(records)``),
  so when the expression raises, the list iterator's position names the record, exactly as
  with ``map``/``filter`` (``item_getters.failed_record``). ``filter`` keeps a record when
  the expression is true as ``if`` tests it: the truth test ``filter()`` applies.

The generated text comes from the bytecode's own constants (``repr`` of ints and strings)
and fixed names only, never from user-supplied text.
"""

from __future__ import annotations

import dis
import inspect
import logging
from collections.abc import Callable, Iterator
from types import CodeType, FunctionType
from typing import Any

__all__ = ["batch_filter", "batch_map", "rebuild"]

_log = logging.getLogger(__name__)

REC = "r"  # the name a one-argument expression uses for its record
_BINARY = {"+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "@"}
_COMPARE = {"<", "<=", "==", "!=", ">", ">="}
_UNARY = {"UNARY_NEGATIVE": "-", "UNARY_INVERT": "~", "UNARY_NOT": "not "}
_CONSTANTS = (int, str, bool, type(None))
_SKIP = {"RESUME", "NOP", "CACHE", "EXTENDED_ARG"}
_UNSUPPORTED_FLAGS = (
    inspect.CO_VARARGS
    | inspect.CO_VARKEYWORDS
    | inspect.CO_GENERATOR
    | inspect.CO_COROUTINE
    | inspect.CO_ASYNC_GENERATOR
)


def plain_code(fn: Any, argcount: int) -> CodeType | None:
    """``fn``'s code when it is a plain Python function of exactly ``argcount`` positional
    arguments with no closure, globals, cells, keyword-only or variable arguments."""
    if type(fn) is not FunctionType or fn.__closure__:
        return None
    code = fn.__code__
    if (
        code.co_argcount != argcount
        or code.co_kwonlyargcount
        or code.co_flags & _UNSUPPORTED_FLAGS
        or code.co_names
        or code.co_freevars
        or code.co_cellvars
    ):
        return None
    return code


def rebuild(code: CodeType, names: dict[str, str]) -> str | None:
    """The expression ``code`` returns, its arguments renamed by ``names`` (module doc), or
    ``None`` for any other shape."""
    stack: list[str] = []
    try:
        for ins in dis.get_instructions(code):
            op = ins.opname
            if op in _SKIP:
                continue
            if op == "LOAD_FAST":
                if ins.argval not in names:
                    return None
                stack.append(names[ins.argval])
            elif op == "LOAD_FAST_LOAD_FAST":  # 3.13: two locals at once
                first, second = ins.argval
                if first not in names or second not in names:
                    return None
                stack += [names[first], names[second]]
            elif op == "LOAD_CONST":
                if type(ins.argval) not in _CONSTANTS:
                    return None
                value = ins.argval
                # a negative number in parentheses: ``(-1) ** x`` is not ``-1 ** x``
                stack.append(f"({value!r})" if type(value) is int and value < 0 else repr(value))
            elif op == "BINARY_SUBSCR" or (op == "BINARY_OP" and ins.argrepr == "[]"):
                key = stack.pop()
                stack.append(f"{stack.pop()}[{key}]")
            elif (op == "BINARY_OP" and ins.argrepr in _BINARY) or (
                op == "COMPARE_OP" and ins.argrepr in _COMPARE
            ):
                right = stack.pop()
                stack.append(f"({stack.pop()} {ins.argrepr} {right})")
            elif op in ("IS_OP", "CONTAINS_OP") and ins.arg in (0, 1):
                word = "is" if op == "IS_OP" else "in"
                word = word if ins.arg == 0 else ("is not" if op == "IS_OP" else "not in")
                right = stack.pop()
                stack.append(f"({stack.pop()} {word} {right})")
            elif op in _UNARY:
                stack.append(f"({_UNARY[op]}{stack.pop()})")
            elif op == "BUILD_TUPLE":
                n = ins.arg or 0
                if n > len(stack):
                    return None
                items = stack[len(stack) - n :]
                del stack[len(stack) - n :]
                stack.append(f"({', '.join(items)}{',' if n == 1 else ''})")
            elif op == "RETURN_VALUE":
                return stack.pop() if len(stack) == 1 else None
            else:  # RETURN_CONST (3.12), jumps, calls, globals, attributes...
                return None
    except IndexError:  # a stack shape the machine does not know
        return None
    return None


def expression_of(fn: Any) -> str | None:
    """``fn(r)`` as an expression over the name ``r``, or ``None`` (module doc)."""
    code = plain_code(fn, 1)
    return None if code is None else rebuild(code, {code.co_varnames[0]: REC})


_CACHE: dict[tuple[str, str, str], Callable[[Iterator[Any]], list]] = {}


def _compiled(kind: str, expression: str, fn: Any) -> Callable[[Iterator[Any]], list]:
    code = fn.__code__
    where = f"<streamflow {kind}: {code.co_filename}:{code.co_firstlineno} inlined>"
    run = _CACHE.get((kind, expression, where))
    if run is not None:
        return run
    if kind == "filter":
        body = f"[{REC} for {REC} in it if {expression}]"
    else:
        body = f"[{expression} for {REC} in it]"
    source = f"def run(it):\n    return {body}\n"
    scope: dict[str, Any] = {}
    # the text is built from fixed names, repr() of int/str/bool/None constants and operators
    exec(compile(source, where, "exec", dont_inherit=True), scope)
    run = scope["run"]
    if len(_CACHE) < 256:
        _CACHE[(kind, expression, where)] = run
    _log.debug("%s function %r inlined as %s", kind, fn, body)
    return run


def batch_map(fn: Any) -> Callable[[Iterator[Any]], list] | None:
    """``run(it)``, the list ``[fn(r) for r in it]`` with ``fn`` inlined, or ``None``."""
    expression = expression_of(fn)
    return None if expression is None else _compiled("map", expression, fn)


def batch_filter(fn: Any) -> Callable[[Iterator[Any]], list] | None:
    """``run(it)``, the list of the records of ``it`` for which ``fn`` is true, with ``fn``
    inlined, or ``None``."""
    expression = expression_of(fn)
    return None if expression is None else _compiled("filter", expression, fn)
