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


def rolling_frame(df: Any, key: Any, key_field: str | None, parts: tuple[str, ...], layout: Layout,
                  flat_order: bool, with_ts: bool) -> Any:
    """The rows of ``df`` (typed, :data:`~.native.BASE_DDL` plus ``layout``'s columns) through a
    recognised rolling reduce keyed by the column expression ``key``; rows of the same layout.

    Spark converts every column of a key's rows to pandas on each call, and that conversion,
    not the reduce, is most of a call's cost; so the runner gets only the columns it reads:
    the grouping key (a record field itself when the key is one: ``key_field``, else a ``key``
    column), the input position (``seq``, a long, when every order is one position:
    ``flat_order``; else ``order``), ``ts`` only when data rows may carry one (``with_ts``), and
    the record's fields. End-of-input rows have a null key: their group is passed on. ``tag``
    (typed rows carry none), ``eof`` and a flat ``order`` are rebuilt in the JVM afterwards."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from .harness import EOF_TS

    names = layout.columns
    data = ~F.col("eof")
    cols = [F.when(data, F.col(n)).alias(n) if n == key_field else F.col(n) for n in names]
    if key_field is None:
        cols.append(F.when(data, key).alias("key"))
    position = F.col("order").getItem(0).alias("seq") if flat_order else F.col("order")
    runner = RollingRunner(parts, layout.fields, flat_order, with_ts)
    out = df.select(position, *([F.col("ts")] if with_ts else []), *cols).groupBy(
        key_field or "key").applyInPandasWithState(runner, runner.ddl(), state_ddl(layout), "append",
                                                   GroupStateTimeout.NoTimeout)
    # without timestamps on data rows, only the end-of-input rows have one (the source's)
    ts = F.col("ts") if with_ts else F.when(F.col("eof"), F.lit(EOF_TS))
    return out.select(F.array("seq").alias("order") if flat_order else F.col("order"),
                      ts.cast("long").alias("ts"), F.lit(None).cast("string").alias("tag"), "eof", *names)


class RollingRunner:
    """``applyInPandasWithState``: one key's rows of a recognised rolling reduce, column-wise
    (the columns :func:`rolling_frame` selects)."""

    def __init__(self, parts: tuple[str, ...], fields: tuple[Field, ...], flat_order: bool = False,
                 with_ts: bool = True) -> None:
        self.parts = parts
        self.fields = fields
        self.flat_order = flat_order
        self.with_ts = with_ts

    def ddl(self) -> str:
        """The output rows: the input position, ``ts`` if read, ``eof`` and the fields."""
        return ", ".join(["seq long" if self.flat_order else "order array<long>",
                          *(["ts long"] if self.with_ts else []), "eof boolean",
                          *(f"{f.name} {SPARK_TYPES[f.kind]}" for f in self.fields)])

    def __call__(self, key: tuple[Any], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        # Python lists and one object block: pandas' per-call overheads dominate a call with a
        # handful of rows (see .keyed)
        frames = list(pdfs)
        position = "seq" if self.flat_order else "order"
        orders: list[Any] = []
        tss: list[Any] = []
        if key[0] is None or key[0] != key[0]:  # the end-of-input rows' group (a null key): passed on
            for pdf in frames:
                orders.extend(pdf[position].tolist())
                if self.with_ts:
                    tss.extend(pdf["ts"].tolist())
            n = len(orders)
            yield self._frame(orders, tss, True, [[ZERO[f.kind]] * n for f in self.fields])
            return
        columns: list[list[Any]] = [[] for _ in self.fields]
        for pdf in frames:
            orders.extend(pdf[position].tolist())
            if self.with_ts:
                tss.extend(pdf["ts"].tolist())
            for col, f in zip(columns, self.fields, strict=True):
                series = pdf[f.name]
                if series.dtype.kind != _DTYPE_KINDS[f.kind]:  # a null would make ints floats: never exact
                    raise RuntimeError(f"typed column {f.name} arrived as {series.dtype}, not {f.kind}")
                col.extend(series.tolist())
        n = len(orders)
        if n > 1:
            sort_keys = orders if self.flat_order else [o.tolist() for o in orders]
            idx = sorted(range(n), key=sort_keys.__getitem__)
            if idx != list(range(n)):
                orders = [orders[i] for i in idx]
                tss = [tss[i] for i in idx] if tss else tss
                columns = [[c[i] for i in idx] for c in columns]
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
        yield self._frame(orders, tss, False, out)

    def _frame(self, orders: list, tss: list, eof: bool, columns: list[list[Any]]) -> Any:
        import numpy as np
        import pandas as pd

        n = len(orders)
        names = ["seq" if self.flat_order else "order", *(["ts"] if self.with_ts else []), "eof",
                 *(f.name for f in self.fields)]
        data = np.empty((n, len(names)), dtype=object)
        j = 0
        # (orders that are arrays stay cells)
        data[:, j] = orders if self.flat_order else np.fromiter(orders, dtype=object, count=n)
        if self.with_ts:
            j += 1
            data[:, j] = [_int_or_none(t) for t in tss]
        data[:, j + 1] = eof
        for k, col in enumerate(columns):
            data[:, j + 2 + k] = col
        return pd.DataFrame(data, columns=names, copy=False)


_DTYPE_KINDS = {"int": "i", "bool": "b", "str": "O", "float": "f"}


def _int_or_none(t: Any) -> int | None:
    return None if t is None or t != t else int(t)
