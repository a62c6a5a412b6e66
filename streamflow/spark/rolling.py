"""Rolling reduces recognised field by field, run column-wise on typed columns.

Theory of operation
-------------------
A rolling reduce emits, for every record, its key's accumulator after folding the record
in. When the records are typed tuples (:mod:`.native`) and the reduce is one whose every
output field is one of

* ``first``: the accumulator's field (``a[i]`` in ``lambda a, b: ...``; every field but the
  summed one of ``sum(i)``): the key's first record's value, forever;
* ``last``: the new record's field (``b[i]``);
* ``sum``: ``a[i] + b[i]`` on an int field (``sum(i)``): the running sum,

then the outputs of a key's rows are columns computed at once: the first value repeated,
the rows' own values, and a cumulative sum, starting from the accumulator kept in Spark's
group state as typed columns. This is :class:`RollingRunner`, under
``applyInPandasWithState``; its outputs stay typed. It gives the values the
:class:`~streamflow.runtime.keyed_operators.ReduceOperator` gives (the first record of a
key is emitted as it is: its sum is its own value), provided no running sum can overflow
64 bits: the sum of a key's values lies within ``[min(lo, lo * count), max(hi, hi *
count)]`` for the field's range ``[lo, hi]`` and the input's record count, and the
recognition is refused when that leaves the signed 64-bit range.

Only a plain function (``lambda a, b: (a[0], a[1] + b[1], b[2])``) or the framework's own
``sum(i)`` is recognised; any other reduce runs through :mod:`.keyed` as before.
"""

from __future__ import annotations

import dis
import logging
import types
from collections.abc import Iterator
from dataclasses import replace
from itertools import accumulate
from typing import Any

from .native import INT64, SPARK_TYPES, ZERO, Field, Layout

_log = logging.getLogger(__name__)


def recognise_rolling(op: Any, layout: Layout, what: str) -> tuple[tuple[str, ...], Layout] | None:
    """The per-field parts of a recognised rolling reduce and its output layout, or None."""
    from ..runtime.keyed_operators import ReduceOperator

    if type(op) is not ReduceOperator or not layout.is_tuple or layout.count <= 0:
        return None
    fn = op.functions[0]
    arity = len(layout.fields)
    parts: tuple[str, ...] | None = None
    aggregation = getattr(fn, "aggregation", None) if callable(fn) else None
    if aggregation is not None and aggregation[0] == "sum" and isinstance(aggregation[1], int):
        i = aggregation[1]
        if 0 <= i < arity:
            parts = tuple("sum" if j == i else "first" for j in range(arity))
    elif isinstance(fn, types.FunctionType):
        parts = _reduce_parts(fn, arity)
    if parts is None:
        _log.debug("%s: the reduce is not a recognised rolling one", what)
        return None
    fields = []
    for f, part in zip(layout.fields, parts, strict=True):
        if part == "sum":
            if f.kind != "int":
                return None
            lo, hi = min(f.lo, f.lo * layout.count), max(f.hi, f.hi * layout.count)
            if lo < INT64[0] or hi > INT64[1]:
                _log.info("%s: a running sum of %d values in [%d, %d] could overflow 64 bits; runs in Python",
                          what, layout.count, f.lo, f.hi)
                return None
            f = replace(f, lo=lo, hi=hi)
        fields.append(f)
    _log.info("%s runs column-wise on Spark (%s)", what, ", ".join(parts))
    return parts, Layout(tuple(fields), True, layout.count)


def _reduce_parts(fn: types.FunctionType, arity: int) -> tuple[str, ...] | None:
    """``lambda a, b: (x0, x1, ...)`` where each ``xi`` is ``a[i]``, ``b[i]``, ``a[i] + b[i]``
    or ``b[i] + a[i]``: the parts, else None."""
    code = fn.__code__
    if (code.co_argcount != 2 or code.co_freevars or code.co_kwonlyargcount
            or code.co_flags & (0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200)):
        return None
    a, b = code.co_varnames[:2]
    stack: list[Any] = []
    for ins in dis.get_instructions(code):
        name = ins.opname
        if name in ("RESUME", "NOP", "CACHE"):
            continue
        if name == "LOAD_FAST" and ins.argval in (a, b):
            stack.append(("rec", ins.argval))
        elif name == "LOAD_CONST" and type(ins.argval) is int:
            stack.append(("const", ins.argval))
        elif name == "BINARY_SUBSCR":
            index, obj = stack.pop(), stack.pop()
            if obj[0] != "rec" or index[0] != "const":
                return None
            stack.append(("field", obj[1], index[1]))
        elif name == "BINARY_OP" and ins.argrepr == "+":
            y, x = stack.pop(), stack.pop()
            if x[0] != "field" or y[0] != "field" or x[2] != y[2] or {x[1], y[1]} != {a, b}:
                return None
            stack.append(("sum", x[2]))
        elif name == "BUILD_TUPLE" and ins.arg == arity and len(stack) == arity:
            items = list(stack)
            stack[:] = [("tuple", items)]
        elif name == "RETURN_VALUE" and len(stack) == 1 and stack[0][0] == "tuple":
            parts = []
            for i, item in enumerate(stack[0][1]):
                if item == ("field", a, i):
                    parts.append("first")
                elif item == ("field", b, i):
                    parts.append("last")
                elif item == ("sum", i):
                    parts.append("sum")
                else:
                    return None
            return tuple(parts)
        else:
            return None
    return None


def state_ddl(layout: Layout) -> str:
    return ", ".join(f"{f.name} {SPARK_TYPES[f.kind]}" for f in layout.fields)


class RollingRunner:
    """``applyInPandasWithState``: one key's rows of a recognised rolling reduce, column-wise."""

    def __init__(self, parts: tuple[str, ...], fields: tuple[Field, ...]) -> None:
        self.parts = parts
        self.fields = fields

    def __call__(self, key: tuple[Any], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        # Python lists and one object block: pandas' per-call overheads dominate a call with a
        # handful of rows (see .keyed)
        frames = list(pdfs)
        names = [f.name for f in self.fields]
        if key[0] is None:  # the end-of-input rows' group: passed on
            orders: list[Any] = []
            tss: list[int | None] = []
            for pdf in frames:
                eof = pdf[pdf["eof"].to_numpy(dtype=bool)]
                orders.extend(eof["order"].tolist())
                tss.extend(_int_or_none(t) for t in eof["ts"].tolist())
            n = len(orders)
            yield _frame(orders, tss, [True] * n, [[ZERO[f.kind]] * n for f in self.fields], names)
            return
        orders, tss = [], []
        columns: list[list[Any]] = [[] for _ in names]
        for pdf in frames:
            orders.extend(pdf["order"].tolist())
            tss.extend(pdf["ts"].tolist())
            for col, name in zip(columns, names, strict=True):
                col.extend(pdf[name].tolist())
        n = len(orders)
        if all(len(o) == 1 for o in orders):
            firsts = [int(o[0]) for o in orders]
            idx = sorted(range(n), key=firsts.__getitem__)
        else:
            keys = [o.tolist() for o in orders]
            idx = sorted(range(n), key=keys.__getitem__)
        if idx != list(range(n)):
            orders = [orders[i] for i in idx]
            tss = [tss[i] for i in idx]
            columns = [[c[i] for i in idx] for c in columns]
        tss = [_int_or_none(t) for t in tss]
        acc = state.get if state.exists else None
        out: list[list[Any]] = []
        for j, (col, part) in enumerate(zip(columns, self.parts, strict=True)):
            if part == "sum":  # no overflow: the range was proved at translation time
                out.append(list(accumulate(col, initial=int(acc[j]) if acc is not None else 0))[1:])
            elif part == "first":
                out.append([acc[j] if acc is not None else col[0]] * n)
            else:
                out.append(col)
        state.update(tuple(c[-1] for c in out))
        yield _frame(orders, tss, [False] * n, out, names)


def _frame(orders: list, tss: list, eofs: list, columns: list[list[Any]], names: list[str]) -> Any:
    import numpy as np
    import pandas as pd

    n = len(orders)
    data = np.empty((n, 4 + len(columns)), dtype=object)
    data[:, 0] = np.fromiter(orders, dtype=object, count=n)  # arrays stay cells
    data[:, 1] = tss
    data[:, 2] = None
    data[:, 3] = eofs
    for j, col in enumerate(columns):
        data[:, 4 + j] = col
    return pd.DataFrame(data, columns=["order", "ts", "tag", "eof", *names], copy=False)


def _int_or_none(t: Any) -> int | None:
    return None if t is None or t != t else int(t)
