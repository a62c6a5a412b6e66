"""Window functions recognised as Spark aggregates: the whole window runs in the JVM.

Theory of operation
-------------------
A natively translated window (:mod:`.windows`) keeps every element of every open window in
Spark's state store (``collect_list``) and applies the user's function in Python when the
window closes. When the function only *aggregates* its elements, that is what a Spark
programmer would not write: they write ``groupBy(window, key).agg(sum(...))``, which keeps one
partial sum per (key, window) and runs in generated code. This module recognises such
functions, on typed columns (:mod:`.native`) with a native key, and translates them to that:

* ``reduce(fn)`` without a window function, where ``fn`` is a plain ``lambda a, b: (...)``
  (or ``lambda a, b: a + b`` on scalar records) whose every output field is ``a[i]`` (the
  first element's field: ``min_by(field, order)``), ``b[i]`` (the last element's:
  ``max_by(field, order)``), ``a[i] + b[i]`` (``sum``), ``max(a[i], b[i])`` or
  ``min(a[i], b[i])`` (``max``/``min``). The fold ``reduce(reduce(e0, e1), e2)...`` in input
  order gives exactly these.
* ``process(fn)`` (a ``ProcessWindowFunction`` whose class defines nothing but ``process``,
  which must not read ``self``, or a plain function ``(key, context, elements)``) whose body
  is ``return [item]``, ``item`` being an expression (or a tuple of them) built from the key,
  ``context.window().start``, ``.end``, ``.max_timestamp()``, ``len(elements)``, and
  ``sum``/``min``/``max`` over a generator or list comprehension ``(expr for e in elements)``
  whose ``expr`` is a recognised expression of the element (:func:`.native.step`), combined
  with the recognised int arithmetic.

Equivalence, as in :mod:`.native`, is proved: every int carries an interval; a sum of at
most ``count`` (the input's record count) values in ``[lo, hi]`` lies in ``[min(lo, lo *
count), max(hi, hi * count)]``, and the translation is refused when any value could leave
64 bits. A fired window is never empty, so ``sum``/``min``/``max`` of its elements are
defined and equal Python's. The builtins must be the real ones (not shadowed by the
function's module). The output record's timestamp is ``window.max_timestamp()``, and its
``order`` is the one :class:`~.windows.WindowFirer` gives, so a sink sees what it saw before.

A declared ``output_type`` that converts the results (``Types.DOUBLE()``, ``Types.FLOAT()``,
``Types.BOOLEAN()``, alone or as ``Types.TUPLE`` fields: PyFlink's serializers make a float of
an int, or a bool of an int, :meth:`~streamflow.types.typeinfo.BasicTypeInfo.convert`) is a
cast of the output column (:func:`output_casts`): an int or bool to ``double``; to ``FLOAT`` by
way of ``double`` then ``float`` (Python's ``float(int)`` then the 32-bit rounding, both round
to nearest even as Java's casts do; an int fits a float's range) and back to ``double`` (exact);
an int to ``boolean`` (``!= 0``). A str field stays as it is (so does its conversion). Any
other converting type (a row, a nested tuple, a list...) is refused.

Anything else (an ``AggregateFunction``, a reduce with a window function, a function that
calls anything else, a branch, a filter in the comprehension, a process function whose class
has ``open``/``close`` or other methods) is not recognised: the window takes the
``collect_list`` path, and the log says why at INFO.
"""

from __future__ import annotations

import builtins
import dataclasses
import dis
import logging
import types
from dataclasses import dataclass
from typing import Any

from ..runtime.window_operator import WindowOperator
from ..types.typeinfo import BasicTypeInfo, TupleTypeInfo
from ..windowing.assigners import SlidingEventTimeWindows
from .harness import TIMER_ORDER
from .native import (
    Expr,
    Field,
    Layout,
    NotRecognised,
    _check,
    _operand,
    record_value,
    step,
    to_column,
)

_log = logging.getLogger(__name__)

_FLAGS = 0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200  # *args, **kwargs, generator, coroutine...


@dataclass(frozen=True)
class WindowAgg:
    """A recognised window function: the aggregates over the elements (column ``a<i>``) and
    the output record, expressions over ``key``, ``start``, ``end`` and the aggregates."""

    aggregates: tuple[tuple[str, Expr], ...]  # (sum|min|max|count|first|last, element expr)
    outputs: tuple[Expr, ...]
    is_tuple: bool
    casts: tuple[str | None, ...] = ()  # per output: None, "double", "float" or "boolean"

    def layout(self, count: int) -> Layout:
        fields = tuple(Field(f"c{i}", _CAST_KIND[c], 0, 0) if c else Field(f"c{i}", e.kind, e.lo, e.hi)
                       for i, (e, c) in enumerate(zip(self.outputs, self._casts(), strict=True)))
        return Layout(fields, self.is_tuple, count)

    def _casts(self) -> tuple[str | None, ...]:
        return self.casts or (None,) * len(self.outputs)


_CAST_KIND = {"double": "float", "float": "float", "boolean": "bool"}


def recognise_window(op: WindowOperator, layout: Layout, key: Expr, ts_range: tuple[int, int] | None,
                     what: str, output_type: Any = None) -> WindowAgg | None:
    """``op``'s window function as Spark aggregates over ``layout``'s columns, or None (logged);
    ``output_type``: the window's declared type (its conversion, if any, becomes casts)."""
    try:
        if ts_range is None:
            raise NotRecognised("the range of its timestamps is unknown (not a recognised assigner)")
        fn = op.fn
        if fn.aggregate is not None:
            raise NotRecognised("an AggregateFunction is not recognised")
        if fn.reduce is not None:
            if fn.process is not None:
                raise NotRecognised("a reduce with a window function is not recognised")
            agg = _reduce(fn.reduce, layout)
        elif fn.process is not None:
            window = _window_columns(op, ts_range)
            agg = _process(fn.process_function or fn.process, layout, key, window)
        else:
            raise NotRecognised("no window function")
        if op.convert_output is not None:
            agg = dataclasses.replace(agg, casts=output_casts(output_type, agg))
    except NotRecognised as exc:
        _log.info("%s: the window function runs in Python (collect_list): %s", what, exc)
        return None
    _log.info("%s: the window function runs as Spark aggregates (%s)", what,
              ", ".join(kind for kind, _e in agg.aggregates))
    return agg


def _window_columns(op: WindowOperator, ts_range: tuple[int, int]) -> dict[str, Expr]:
    assigner = op.assigner
    size = assigner.size
    slide = assigner.slide if isinstance(assigner, SlidingEventTimeWindows) else size
    lo, hi = ts_range  # start = ts - (ts - offset) mod slide: in (ts - slide, ts]
    start_lo, start_hi = _check(lo - slide + 1, hi)
    end_lo, end_hi = _check(start_lo + size, start_hi + size)
    return {"start": Expr(("col", "start"), "int", start_lo, start_hi),
            "end": Expr(("col", "end"), "int", end_lo, end_hi)}


def output_casts(output_type: Any, agg: WindowAgg) -> tuple[str | None, ...]:
    """The casts of ``agg``'s outputs that are ``output_type``'s conversion of the results."""
    what = f"its output_type {output_type!r} converts the results"
    if type(output_type) is TupleTypeInfo:
        if not agg.is_tuple or output_type.get_arity() != len(agg.outputs):
            raise NotRecognised(f"{what}, and they do not have its arity")
        types_ = output_type.get_field_types()
    elif type(output_type) is BasicTypeInfo and not agg.is_tuple:
        types_ = [output_type]
    else:
        raise NotRecognised(f"{what} (only Types.DOUBLE/FLOAT/BOOLEAN, alone or as Types.TUPLE fields, "
                            "are cast natively)")
    casts: list[str | None] = []
    for t, e in zip(types_, agg.outputs, strict=True):
        if not t.converts():
            casts.append(None)
        elif type(t) is not BasicTypeInfo or t.name not in ("Double", "Float", "Boolean"):
            raise NotRecognised(f"{what}: a {t!r} field is not cast natively")
        elif t.name == "Boolean":  # an int becomes `!= 0`; a bool or str stays as it is
            casts.append("boolean" if e.kind == "int" else None)
        else:  # an int or bool becomes a float; a str stays as it is
            casts.append(t.name.lower() if e.kind in ("int", "bool") else None)
    return tuple(casts)


# -- reduce --------------------------------------------------------------------------------
def _reduce(fn: Any, layout: Layout) -> WindowAgg:
    if type(fn) is not types.FunctionType:
        raise NotRecognised(f"the reduce function is a {type(fn).__name__}, not a plain function")
    code = fn.__code__
    if code.co_argcount != 2 or code.co_freevars or code.co_kwonlyargcount or code.co_flags & _FLAGS:
        raise NotRecognised("the reduce function is not a plain two-argument function")
    a, b = code.co_varnames[:2]
    stack: list[Any] = []
    for ins in dis.get_instructions(code):
        name = ins.opname
        if name in ("RESUME", "NOP", "CACHE", "PRECALL"):
            continue
        if name == "LOAD_FAST" and ins.argval in (a, b):
            stack.append(("rec", ins.argval))
        elif name == "LOAD_CONST" and type(ins.argval) is int:
            stack.append(("const", ins.argval))
        elif name == "LOAD_GLOBAL" and ins.argval in ("min", "max") and ins.arg is not None and ins.arg & 1:
            _builtin(fn, ins.argval)
            stack.extend([None, ("builtin", ins.argval)])
        elif name == "BINARY_SUBSCR":
            index, obj = stack.pop(), stack.pop()
            if obj[0] != "rec" or index[0] != "const":
                raise NotRecognised("a subscript of something other than an argument")
            stack.append(("field", obj[1], index[1]))
        elif name == "BINARY_OP" and ins.argrepr == "+":
            stack.append(_pair("sum", stack.pop(), stack.pop(), a, b))
        elif name == "CALL" and ins.arg == 2 and len(stack) >= 4 and stack[-3][0] == "builtin":
            y, x, (_b, builtin), _null = stack.pop(), stack.pop(), stack.pop(), stack.pop()
            stack.append(_pair(builtin, y, x, a, b))
        elif name == "BUILD_TUPLE" and len(stack) == ins.arg:
            stack[:] = [("tuple", list(stack))]
        elif name == "RETURN_VALUE" and len(stack) == 1:
            return _reduce_result(stack[0], a, b, layout)
        else:
            raise NotRecognised(f"opcode {name} in the reduce function")
    raise NotRecognised("no return")


def _pair(kind: str, y: Any, x: Any, a: str, b: str) -> tuple:
    """``x + y``, ``max(x, y)``, ``min(x, y)`` of the same field (or record) of both arguments."""
    if x[0] == y[0] == "field" and x[2] == y[2] and {x[1], y[1]} == {a, b}:
        return (kind, x[2])
    if x[0] == y[0] == "rec" and {x[1], y[1]} == {a, b}:
        return (kind, None)
    raise NotRecognised(f"{kind} of something other than one field of both arguments")


def _reduce_result(result: Any, a: str, b: str, layout: Layout) -> WindowAgg:
    fields = layout.fields
    items = result[1] if result[0] == "tuple" else [result]
    if (result[0] == "tuple") != layout.is_tuple or len(items) != len(fields):
        raise NotRecognised("the reduce's result does not have the record's shape")
    aggregates = []
    for i, item in enumerate(items):
        f = fields[i]
        index = i if layout.is_tuple else None
        element = Expr(("col", f.name), f.kind, f.lo, f.hi)
        if item in (("field", a, i), ("rec", a)) and (item[0] == "field") == layout.is_tuple:
            aggregates.append(("first", element))
        elif item in (("field", b, i), ("rec", b)) and (item[0] == "field") == layout.is_tuple:
            aggregates.append(("last", element))
        elif item in (("sum", index), ("max", index), ("min", index)):
            if item[0] == "sum" and f.kind != "int":
                raise NotRecognised(f"+ of {f.kind} fields")
            if f.kind in ("bool", "float"):  # (min/max of floats: NaN and -0.0 are not Spark's)
                raise NotRecognised(f"{item[0]} of bool fields")
            aggregates.append((item[0], element))
        else:
            raise NotRecognised(f"field {i} of the reduce's result is not first, last, sum, min or max")
    outputs = tuple(_aggregate_expr(n, kind, e, layout.count) for n, (kind, e) in enumerate(aggregates))
    return WindowAgg(tuple(aggregates), outputs, layout.is_tuple)


def _aggregate_expr(n: int, kind: str, element: Expr, count: int) -> Expr:
    """The value of aggregate ``n`` (column ``a<n>``) with its range."""
    if kind == "count":
        return Expr(("col", f"a{n}"), "int", *_check(1, max(1, count)))
    if kind == "sum":
        if element.kind != "int":
            raise NotRecognised(f"sum of {element.kind}")
        if count <= 0:
            raise NotRecognised("the input's record count is unknown: a sum cannot be bounded")
        lo, hi = _check(min(element.lo, element.lo * count), max(element.hi, element.hi * count))
        return Expr(("col", f"a{n}"), "int", lo, hi)
    return Expr(("col", f"a{n}"), element.kind, element.lo, element.hi)


# -- process -------------------------------------------------------------------------------
_KEY, _CONTEXT, _ELEMENTS, _WINDOW, _NULL = (object() for _ in range(5))


def _process(fn: Any, layout: Layout, key: Expr, window: dict[str, Expr]) -> WindowAgg:
    code, names = _process_code(fn)
    key_name, context_name, elements_name = names
    locals_ = {key_name: key, context_name: _CONTEXT, elements_name: _ELEMENTS}
    aggregates: list[tuple[str, Expr]] = []
    stack: list[Any] = []

    def load(name: str) -> Any:
        if name not in locals_:
            raise NotRecognised(f"reads {name!r}")
        return locals_[name]

    for ins in dis.get_instructions(code):
        name = ins.opname
        if name == "PRECALL":
            continue
        if name == "LOAD_FAST":
            stack.append(load(ins.argval))
        elif name == "LOAD_CONST" and isinstance(ins.argval, types.CodeType):
            stack.append(("code", ins.argval))
        elif name == "MAKE_FUNCTION" and ins.arg == 0 and stack and isinstance(stack[-1], tuple) \
                and stack[-1][0] == "code":
            stack[-1] = ("comprehension", stack[-1][1])
        elif name == "GET_ITER" and stack and stack[-1] is _ELEMENTS:
            stack[-1] = ("iter",)
        elif name == "LOAD_METHOD" and stack and stack[-1] is _CONTEXT and ins.argval == "window":
            stack[-1:] = [_NULL, ("method", "window")]
        elif name == "LOAD_METHOD" and stack and stack[-1] is _WINDOW and ins.argval == "max_timestamp":
            stack[-1:] = [_NULL, ("method", "max_timestamp")]
        elif name == "LOAD_ATTR" and stack and stack[-1] is _WINDOW and ins.argval in ("start", "end"):
            stack[-1] = window[ins.argval]
        elif name == "LOAD_GLOBAL" and ins.argval in ("sum", "min", "max", "len") and ins.arg is not None \
                and ins.arg & 1:
            _builtin(fn, ins.argval)
            stack.extend([_NULL, ("builtin", ins.argval)])
        elif name == "CALL":  # [NULL, callable, *args] or [callable, self, *args]
            n = ins.arg or 0
            if len(stack) < n + 2:
                raise NotRecognised("a call")
            below = stack[-(n + 2)]
            if below is _NULL:
                callee, args = stack[-(n + 1)], stack[len(stack) - n:]
            else:
                callee, args = below, stack[-(n + 1):]
            del stack[-(n + 2):]
            stack.append(_call(callee, args, layout, aggregates, window))
        elif name == "BUILD_LIST" and ins.arg == 1:
            stack.append(("list", stack.pop()))
        elif name == "RETURN_VALUE":
            result = stack.pop()
            if stack or not (isinstance(result, tuple) and result and result[0] == "list"):
                raise NotRecognised("the body is not one `return [record]`")
            item = result[1]
            is_tuple = isinstance(item, tuple) and not isinstance(item, Expr)
            outputs = tuple(_operand(v) for v in (item if is_tuple else (item,)))
            if not outputs:
                raise NotRecognised("an empty tuple")
            return WindowAgg(tuple(aggregates), outputs, is_tuple)
        elif not step(ins, stack, layout, load):
            raise NotRecognised(f"opcode {name} in the window function")
    raise NotRecognised("no return")


def _process_code(fn: Any) -> tuple[types.CodeType, tuple[str, str, str]]:
    """The code of ``process`` and its three argument names; refuses anything with state."""
    from ..functions import ProcessWindowFunction

    if isinstance(fn, ProcessWindowFunction):
        for cls in type(fn).__mro__:
            if cls.__module__.startswith("streamflow.") or cls is object:
                continue
            extra = [n for n, v in vars(cls).items() if callable(v) and n != "process"]
            if extra:
                raise NotRecognised(f"{cls.__name__} defines {', '.join(sorted(extra))} beside process")
        fn = fn.process
    func = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if type(func) is not types.FunctionType:
        raise NotRecognised(f"{type(fn).__name__} is not a plain function")
    code = func.__code__
    offset = 1 if isinstance(fn, types.MethodType) else 0
    if code.co_argcount != offset + 3 or code.co_freevars or code.co_kwonlyargcount or code.co_flags & _FLAGS:
        raise NotRecognised("not a plain (key, context, elements) function")
    names = code.co_varnames[offset:offset + 3]
    return code, (names[0], names[1], names[2])


def _call(callee: Any, args: list[Any], layout: Layout, aggregates: list[tuple[str, Expr]],
          window: dict[str, Expr]) -> Any:
    if callee == ("method", "window") and not args:
        return _WINDOW
    if callee == ("method", "max_timestamp") and not args:
        end = window["end"]
        return Expr(("sub", end.tree, ("lit", 1)), "int", *_check(end.lo - 1, end.hi - 1))
    if isinstance(callee, tuple) and callee[0] == "comprehension":
        if args != [("iter",)]:
            raise NotRecognised("a comprehension over something other than the elements")
        return ("elements", _comprehension(callee[1], layout))
    if not (isinstance(callee, tuple) and callee[0] == "builtin" and len(args) == 1):
        raise NotRecognised("a call of something other than sum/min/max/len of the elements")
    builtin, (arg,) = callee[1], args
    if builtin == "len":
        if arg is not _ELEMENTS:
            raise NotRecognised("len of something other than the elements")
        kind, element = "count", Expr(("lit", 1), "int", 1, 1)
    else:
        if not (isinstance(arg, tuple) and arg and arg[0] == "elements"):
            raise NotRecognised(f"{builtin} of something other than a comprehension over the elements")
        kind, element = builtin, arg[1]
        if element.kind in ("bool", "float") or (kind == "sum" and element.kind != "int"):
            raise NotRecognised(f"{kind} of {element.kind}")
    aggregates.append((kind, element))
    return _aggregate_expr(len(aggregates) - 1, kind, element, layout.count)


# a comprehension's code: this prefix, STORE_FAST of the element, the expression, this suffix
_GENERATOR = (["RETURN_GENERATOR", "POP_TOP", "RESUME", "LOAD_FAST", "FOR_ITER"],
              ["YIELD_VALUE", "RESUME", "POP_TOP", "JUMP_BACKWARD", "LOAD_CONST", "RETURN_VALUE"])
_LIST = (["RESUME", "BUILD_LIST", "LOAD_FAST", "FOR_ITER"], ["LIST_APPEND", "JUMP_BACKWARD", "RETURN_VALUE"])


def _comprehension(code: types.CodeType, layout: Layout) -> Expr:
    """The element expression of ``(expr for e in elements)`` or ``[expr for e in elements]``."""
    ins = [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "NOP")]
    names = [i.opname for i in ins]
    for prefix, suffix in (_GENERATOR, _LIST):
        n, m = len(prefix), len(suffix)
        if names[:n] == prefix and len(names) > n + m and names[n] == "STORE_FAST" and names[-m:] == suffix:
            element_name = ins[n].argval
            body = ins[n + 1:-m]
            break
    else:
        raise NotRecognised("a comprehension with a condition or several loops")
    stack: list[Any] = []

    def load(name: str) -> Any:
        if name != element_name:
            raise NotRecognised(f"the comprehension reads {name!r}")
        return record_value(layout)

    for i in body:
        if not step(i, stack, layout, load):
            raise NotRecognised(f"opcode {i.opname} in the comprehension")
    if len(stack) != 1:
        raise NotRecognised("the comprehension's expression")
    return _operand(stack[0])


def _builtin(fn: Any, name: str) -> None:
    func = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if name in getattr(func, "__globals__", {}) or getattr(builtins, name, None) is not vars(builtins)[name]:
        raise NotRecognised(f"{name!r} is not the builtin")


# -- Spark ---------------------------------------------------------------------------------
def aggregate_columns(agg: WindowAgg) -> list[Any]:
    """The ``agg(...)`` columns ``a0, a1, ...`` over the rows (``order``: a long, or the whole
    array when orders have several positions: :func:`~.windows.window_frame`)."""
    from pyspark.sql import functions as F

    out = []
    for n, (kind, element) in enumerate(agg.aggregates):
        col = to_column(element)
        if kind == "count":
            c = F.count(F.lit(1))
        elif kind == "first":
            c = F.min_by(col, F.col("order"))
        elif kind == "last":
            c = F.max_by(col, F.col("order"))
        else:
            c = {"sum": F.sum, "min": F.min, "max": F.max}[kind](col)
        out.append(c.alias(f"a{n}"))
    return out


def output_frame(windows: Any, agg: WindowAgg) -> Any:
    """Closed windows (``start``, ``end``, ``key``, ``a<n>``) as rows of the typed layout:
    ``order`` and ``ts`` as :class:`~.windows.WindowFirer` gives them."""
    from pyspark.sql import functions as F

    max_ts = F.col("end") - F.lit(1).cast("long")
    base = [F.array(F.lit(TIMER_ORDER).cast("long"), max_ts, F.lit(0).cast("long")).alias("order"),
            max_ts.alias("ts"), F.lit(None).cast("string").alias("tag"), F.lit(False).alias("eof")]
    return windows.select(*base, *(_cast(to_column(e), c).alias(f"c{i}")
                                   for i, (e, c) in enumerate(zip(agg.outputs, agg._casts(), strict=True))))


def _cast(col: Any, cast: str | None) -> Any:
    """``col`` converted as the declared type converts it (see the module's docstring)."""
    if cast == "float":  # float(int), then the 32-bit rounding; held as a double (exactly)
        return col.cast("double").cast("float").cast("double")
    return col if cast is None else col.cast(cast)

