"""Typed columns and native Spark expressions for recognised user functions.

Theory of operation
-------------------
By default a record travels between Spark stages as one binary column (the job codec's
encoding), and every operator runs in a Python worker. When a bounded source's records are
all plain tuples of the same shape whose fields are ``str``, ``int`` (within 64 bits) or
``bool`` (or all plain scalars of one such type), the source is written as **typed columns**
``c0, c1, ...`` instead (:class:`Layout`, with each int column's minimum and maximum over the
whole input). A Python stage reading typed columns rebuilds each record with
``zip(*columns)``: the same tuple of the same Python values the source produced.

On typed columns, a user function that is a plain function (a lambda or ``def``; for timestamp
assigners also a method that never reads ``self``) whose body is one expression over its
argument is **recognised** by symbolic execution of its bytecode (:func:`compile_function`)
and translated to a Spark column expression, so the stage runs in the JVM with no Python:

* ``map`` -> ``select``; ``filter`` -> ``where``; a key selector -> the grouping column; a
  timestamp assigner -> the ``ts`` column.
* Recognised: the argument, constants (``int``, ``str``, ``bool``), ``e[i]`` with a constant
  index, ``+ - *`` and unary ``-`` on ints, ``//`` and ``%`` by a positive int constant,
  comparisons of two ints or two strs, and tuples built of those.

**Equivalence is proved, not assumed.** Each int expression carries an interval, computed
from the source's column ranges with interval arithmetic; the translation is refused when any
intermediate result could leave the signed 64-bit range (Python ints do not overflow, Spark's
``LongType`` does). ``a % c`` and ``a // c`` for ``c > 0`` are Python's floor semantics, which
are ``pmod(a, c)`` and ``(a - pmod(a, c)) / c`` in Spark (the latter an exact division of a
multiple of ``c``, done in doubles only when ``|a| < 2**53``, where that is exact). String
comparison is by code point in Python and by UTF-8 bytes in Spark: the same order. Anything
else (another opcode, a global or closure variable, a jump, a call, a float, an index out of
range, a comparison of mixed types) is not recognised, and the function runs in Python as
before; the log says so at DEBUG. ``execution.spark.native-expressions: false`` turns both
typed columns and the translation off.
"""

from __future__ import annotations

import dis
import json
import logging
import types
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import StreamflowError

_log = logging.getLogger(__name__)

INT64 = (-(2**63), 2**63 - 1)
EXACT_DOUBLE = 2**53
KINDS = {str: "str", int: "int", bool: "bool"}
# "float": a double column, made only by a cast of an int to a declared Types.DOUBLE/FLOAT
# (window_agg.py); no source and no recognised expression yields one
SPARK_TYPES = {"str": "string", "int": "bigint", "bool": "boolean", "float": "double"}
BASE_DDL = "order array<long>, ts long, tag string, eof boolean"
BASE_COLUMNS = ["order", "ts", "tag", "eof"]
LAYOUT_FILE = "_LAYOUT.json"  # beside a source's chunks: their Layout, when they are typed
# The end-of-input row's record columns hold these, never null: Spark converts a whole Arrow
# batch to pandas before splitting it per key, and one null would turn an int column into floats
ZERO: dict[str, Any] = {"str": "", "int": 0, "bool": False, "float": 0.0}


@dataclass(frozen=True)
class Field:
    name: str  # the column
    kind: str  # "str" | "int" | "bool" | "float"
    lo: int = 0  # int columns: the smallest and largest value of the whole input
    hi: int = 0


@dataclass(frozen=True)
class Layout:
    """How a record is stored in typed columns: a tuple of the fields, or one scalar field."""

    fields: tuple[Field, ...]
    is_tuple: bool
    count: int = 0  # at most this many records (the sources' record counts; 0: unknown)

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.fields]

    def ddl(self) -> str:
        return ", ".join([BASE_DDL, *(f"{f.name} {SPARK_TYPES[f.kind]}" for f in self.fields)])

    def arrow_schema(self) -> Any:
        import pyarrow as pa

        types_ = {"str": pa.string(), "int": pa.int64(), "bool": pa.bool_(), "float": pa.float64()}
        return pa.schema([("order", pa.list_(pa.int64())), ("ts", pa.int64()), ("tag", pa.string()),
                          ("eof", pa.bool_()), *((f.name, types_[f.kind]) for f in self.fields)])

    def to_json(self) -> str:
        return json.dumps({"is_tuple": self.is_tuple, "count": self.count,
                           "fields": [asdict(f) for f in self.fields]})

    @staticmethod
    def from_json(text: str) -> Layout:
        data = json.loads(text)
        fields = tuple(Field(**f) for f in data["fields"])
        return Layout(fields, bool(data["is_tuple"]), int(data.get("count", 0)))


def merge_layouts(layouts: list[Layout | None]) -> Layout | None:
    """One layout for a union: the same shape and kinds, each int range the union of the
    ranges; None when the streams store records differently."""
    first = layouts[0]
    if first is None or any(other is None or other.is_tuple != first.is_tuple or
                            [f.kind for f in other.fields] != [f.kind for f in first.fields]
                            for other in layouts):
        return None
    fields = tuple(Field(f.name, f.kind, min(o.fields[i].lo for o in layouts if o is not None),
                         max(o.fields[i].hi for o in layouts if o is not None))
                   for i, f in enumerate(first.fields))
    count = sum(o.count for o in layouts if o is not None) if all(o and o.count for o in layouts) else 0
    return Layout(fields, first.is_tuple, count)


def records_from_arrow(data: Any, layout: Layout) -> list:
    """The records of an Arrow batch or table (or a struct array's fields) in typed columns."""
    get = data.field if hasattr(data, "field") and not hasattr(data, "column") else data.column
    cols = [get(f.name).to_pylist() for f in layout.fields]
    return list(zip(*cols, strict=True)) if layout.is_tuple else cols[0]


def records_from_pandas(pdf: Any, layout: Layout) -> list:
    cols = []
    for f in layout.fields:
        series = pdf[f.name]
        expected = {"int": "int64", "bool": "bool", "str": "object", "float": "float64"}[f.kind]
        if str(series.dtype) != expected:  # a null would have made ints floats: never exact
            raise RuntimeError(f"typed column {f.name} arrived as {series.dtype}, not {expected}")
        cols.append(series.tolist())
    return list(zip(*cols, strict=True)) if layout.is_tuple else cols[0]


# -- typing a source's records -----------------------------------------------------------
class Typer:
    """Accumulates one chunk's records as columns while they all have the first record's
    shape; ``failed`` says why they could not (then the caller encodes them instead)."""

    def __init__(self) -> None:
        self.shape: tuple[type, ...] | None = None
        self.is_tuple = False
        self.lo: list[int] = []
        self.hi: list[int] = []
        self.failed: str | None = None

    def columns(self, records: list) -> list[list] | None:
        if self.failed is not None or not records:
            return None
        if self.shape is None:
            first = records[0]
            self.is_tuple = type(first) is tuple
            shape = tuple(map(type, first)) if self.is_tuple else (type(first),)
            if not shape or any(t not in KINDS for t in shape):
                self.failed = f"the first record {first!r:.80} is not a tuple of str/int/bool nor one"
                return None
            self.shape = shape
            self.lo = [INT64[1]] * len(shape)
            self.hi = [INT64[0]] * len(shape)
        shape = self.shape
        if self.is_tuple:
            n = len(shape)
            # set(map(...)): the checks run at C speed (a generator costs a Python frame per record)
            if set(map(type, records)) != {tuple} or set(map(len, records)) != {n}:
                self.failed = "the records are not all tuples of the same length"
                return None
            cols = [list(c) for c in zip(*records, strict=True)]
        else:
            cols = [records]
        for i, (t, col) in enumerate(zip(shape, cols, strict=True)):
            if set(map(type, col)) != {t}:
                self.failed = f"field {i} is not always {t.__name__}"
                return None
            if t is int:
                lo, hi = min(col), max(col)
                if lo < INT64[0] or hi > INT64[1]:
                    self.failed = f"field {i} has ints beyond 64 bits"
                    return None
                self.lo[i], self.hi[i] = min(self.lo[i], lo), max(self.hi[i], hi)
        return cols

    def layout(self, ignore_failure: bool = False, count: int = 0) -> Layout | None:
        """The layout of the records typed so far (None if typing failed, unless ``ignore_failure``)."""
        if (self.failed is not None and not ignore_failure) or self.shape is None:
            return None
        # int ranges include 0: the end-of-input row's value (ZERO)
        fields = tuple(Field(f"c{i}", KINDS[t], min(self.lo[i], 0) if t is int else 0,
                             max(self.hi[i], 0) if t is int else 0) for i, t in enumerate(self.shape))
        return Layout(fields, self.is_tuple, count)


# -- recognising functions ------------------------------------------------------------------
class NotRecognised(StreamflowError):
    """A function is not one the translation can prove equivalent (it then runs in Python)."""


@dataclass(frozen=True)
class Expr:
    """A typed expression: ``tree`` is ("col", name) | ("lit", value) | (op, *operands)."""

    tree: tuple
    kind: str
    lo: int = 0
    hi: int = 0


@dataclass(frozen=True)
class Result:
    """A recognised function's result: one expression, or a tuple of them, or the record."""

    exprs: tuple[Expr, ...]
    is_tuple: bool
    identity: bool = False

    def layout(self, input_layout: Layout) -> Layout:
        if self.identity:
            return input_layout
        fields = tuple(Field(f"c{i}", e.kind, e.lo, e.hi) for i, e in enumerate(self.exprs))
        return Layout(fields, self.is_tuple, input_layout.count)


_RECORD = object()  # the function's argument on the symbolic stack


def _check(lo: int, hi: int) -> tuple[int, int]:
    if lo < INT64[0] or hi > INT64[1]:
        raise NotRecognised(f"an int result in [{lo}, {hi}] could overflow Spark's 64-bit longs")
    return lo, hi


def _const(value: Any) -> Expr:
    kind = KINDS.get(type(value))
    if kind is None:
        raise NotRecognised(f"constant {value!r} is not a str, int or bool")
    if kind == "int":
        _check(value, value)
        return Expr(("lit", value), "int", value, value)
    return Expr(("lit", value), kind)


def _int_op(op: str, a: Expr, b: Expr) -> Expr:
    if a.kind != "int" or b.kind != "int":
        raise NotRecognised(f"{op} of {a.kind} and {b.kind}")
    if op == "+":
        lo, hi = _check(a.lo + b.lo, a.hi + b.hi)
        return Expr(("add", a.tree, b.tree), "int", lo, hi)
    if op == "-":
        lo, hi = _check(a.lo - b.hi, a.hi - b.lo)
        return Expr(("sub", a.tree, b.tree), "int", lo, hi)
    if op == "*":
        products = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
        lo, hi = _check(min(products), max(products))
        return Expr(("mul", a.tree, b.tree), "int", lo, hi)
    if op in ("%", "//"):
        if b.tree[0] != "lit" or b.lo <= 0:
            raise NotRecognised(f"{op} by something other than a positive constant")
        c = b.lo
        if op == "%":
            lo, hi = (a.lo, a.hi) if a.lo >= 0 and a.hi < c else (0, c - 1)
            return Expr(("pmod", a.tree, c), "int", lo, hi)
        if max(abs(a.lo), abs(a.hi)) + c >= EXACT_DOUBLE:
            raise NotRecognised("// of ints that doubles cannot hold exactly")
        return Expr(("fdiv", a.tree, c), "int", a.lo // c, a.hi // c)
    raise NotRecognised(f"operator {op!r}")


_COMPARE = {"==", "!=", "<", "<=", ">", ">="}


def _operand(v: Any) -> Expr:
    if v is _RECORD or not isinstance(v, Expr):
        raise NotRecognised("the whole record used in an expression")
    return v


def record_value(layout: Layout) -> Any:
    """The symbolic value of a record argument: the record (a tuple's fields are read by
    subscripts), or a scalar record's one column."""
    if layout.is_tuple:
        return _RECORD
    f = layout.fields[0]
    return Expr(("col", f.name), f.kind, f.lo, f.hi)


def step(ins: dis.Instruction, stack: list[Any], layout: Layout, load: Any) -> bool:
    """Executes one instruction of an expression over records of ``layout`` on the symbolic
    ``stack`` (``load(name)`` gives a local variable's value); False if ``ins`` is not one of
    the expression opcodes (the caller handles it or refuses); NotRecognised if it cannot be
    translated."""
    name = ins.opname
    if name in ("RESUME", "NOP", "CACHE"):
        return True
    if name == "LOAD_FAST":
        stack.append(load(ins.argval))
    elif name == "LOAD_CONST":
        stack.append(_const(ins.argval))
    elif name == "BINARY_SUBSCR":
        index, obj = stack.pop(), stack.pop()
        if not (isinstance(index, Expr) and index.tree[0] == "lit" and index.kind == "int"):
            raise NotRecognised("a subscript that is not a constant int")
        i = index.lo
        if obj is _RECORD:
            if not layout.is_tuple or not -len(layout.fields) <= i < len(layout.fields):
                raise NotRecognised(f"record[{i}] of a {len(layout.fields)}-field record")
            f = layout.fields[i]
            stack.append(Expr(("col", f.name), f.kind, f.lo, f.hi))
        elif isinstance(obj, tuple) and -len(obj) <= i < len(obj):
            stack.append(obj[i])
        else:
            raise NotRecognised("a subscript of something other than the record")
    elif name == "BINARY_OP":
        b, a = _operand(stack.pop()), _operand(stack.pop())
        stack.append(_int_op(ins.argrepr, a, b))
    elif name == "UNARY_NEGATIVE":
        a = _operand(stack.pop())
        if a.kind != "int":
            raise NotRecognised(f"- of {a.kind}")
        lo, hi = _check(-a.hi, -a.lo)
        stack.append(Expr(("neg", a.tree), "int", lo, hi))
    elif name == "COMPARE_OP":
        op = str(ins.argval).removeprefix("bool(").removesuffix(")")
        b, a = _operand(stack.pop()), _operand(stack.pop())
        if op not in _COMPARE or a.kind != b.kind or a.kind in ("bool", "float"):
            raise NotRecognised(f"comparison {op!r} of {a.kind} and {b.kind}")
        stack.append(Expr(("cmp", op, a.tree, b.tree), "bool"))
    elif name == "BUILD_TUPLE":
        items = stack[len(stack) - ins.arg:] if ins.arg else []
        del stack[len(stack) - len(items):]
        stack.append(tuple(_operand(v) for v in items))
    else:
        return False
    return True


def compile_function(fn: Any, layout: Layout, value_arg: int = 0, call_args: int = 1) -> Result:
    """``fn(record)`` as Spark expressions over ``layout``'s columns, or NotRecognised."""
    code, argcount = _code_of(fn, call_args)
    if not 0 <= value_arg < argcount:
        raise NotRecognised("no value argument")
    value_name = code.co_varnames[value_arg]
    stack: list[Any] = []

    def load(name: str) -> Any:
        if name != value_name:
            raise NotRecognised(f"reads {name!r}, not only its argument")
        return record_value(layout)

    for ins in dis.get_instructions(code):
        name = ins.opname
        if step(ins, stack, layout, load):
            continue
        if name in ("RETURN_VALUE", "RETURN_CONST"):
            if name == "RETURN_CONST":
                stack.append(_const(ins.argval))
            result = stack.pop()
            if stack:
                raise NotRecognised("values left on the stack")
            if result is _RECORD:
                return Result((), layout.is_tuple, identity=True)
            if isinstance(result, tuple):
                if not result:
                    raise NotRecognised("an empty tuple")
                return Result(result, True)
            return Result((_operand(result),), False)
        else:
            raise NotRecognised(f"opcode {name}")
    raise NotRecognised("no return")


def _code_of(fn: Any, call_args: int) -> tuple[types.CodeType, int]:
    """The code of a plain function (or of a method, whose ``self`` must then go unread)."""
    func = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if type(func) is not types.FunctionType:
        raise NotRecognised(f"{type(fn).__name__} is not a plain function")
    code = func.__code__
    flags = code.co_flags
    if code.co_freevars or code.co_kwonlyargcount or flags & (0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200):
        raise NotRecognised("closures, *args, **kwargs, generators and coroutines are not recognised")
    offset = 1 if isinstance(fn, types.MethodType) else 0
    if code.co_argcount != offset + call_args:
        raise NotRecognised("not called with its declared arguments")
    return code, code.co_argcount



def recognise(fn: Any, layout: Layout, what: str, value_arg: int | None = None,
              call_args: int = 1) -> Result | None:
    """``compile_function`` that logs and returns None when the function is not recognised."""
    if value_arg is None:
        value_arg = 1 if isinstance(fn, types.MethodType) else 0
    try:
        return compile_function(fn, layout, value_arg, call_args)
    except (NotRecognised, IndexError) as exc:
        _log.debug("%s runs in Python on Spark: %s", what, exc)
        return None


# -- Spark columns --------------------------------------------------------------------------
def to_column(expr: Expr) -> Any:
    from pyspark.sql import functions as F

    def build(tree: tuple) -> Any:
        op = tree[0]
        if op == "col":
            return F.col(tree[1])
        if op == "lit":
            value = tree[1]
            return F.lit(value).cast("long") if type(value) is int else F.lit(value)
        if op == "add":
            return build(tree[1]) + build(tree[2])
        if op == "sub":
            return build(tree[1]) - build(tree[2])
        if op == "mul":
            return build(tree[1]) * build(tree[2])
        if op == "neg":
            return -build(tree[1])
        if op == "pmod":
            return F.pmod(build(tree[1]), F.lit(tree[2]).cast("long"))
        if op == "fdiv":
            a = build(tree[1])
            c = F.lit(tree[2]).cast("long")
            return ((a - F.pmod(a, c)) / c).cast("long")
        if op == "cmp":
            a, b = build(tree[2]), build(tree[3])
            return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[tree[1]]
        raise AssertionError(op)

    return build(expr.tree)


def truthy(result: Result) -> Any | None:
    """A filter's condition: Python's truth of a bool or int result (None: not expressible)."""
    if result.is_tuple or result.identity:
        return None
    (expr,) = result.exprs
    if expr.kind == "bool":
        return to_column(expr)
    if expr.kind == "int":
        return to_column(expr) != 0
    return None


def select_result(df: Any, result: Result) -> Any:
    """``df`` with its record columns replaced by ``result``'s (a map)."""
    from pyspark.sql import functions as F

    if result.identity:
        return df
    cols = [F.col(c) for c in BASE_COLUMNS]
    # the end-of-input row's zeros (see ZERO) go through the expressions too: 0 is in every
    # int range, so the range proofs cover it, and typed columns are never null
    cols.extend(to_column(e).alias(f"c{i}") for i, e in enumerate(result.exprs))
    return df.select(*cols)
