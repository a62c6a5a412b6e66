"""Per-batch fast paths for declared types: converting records and printing them.

:meth:`TypeInformation.convert` and :meth:`TypeInformation.format` work on one
value and handle every shape; called per record they cost more than the rest of
a pipeline (a ``Types.TUPLE`` of three fields: about 9 µs a record to convert,
4 µs to format). The common case needs far less:

* **Conversion.** A tuple type whose fields need no conversion (no float, row,
  tuple, list or map inside) converts a tuple of the declared arity to an
  equal tuple: the record is its own conversion. :func:`batch_converter`
  checks a whole batch for that shape with two passes at C speed
  (``map(type, ...)``, ``map(len, ...)``) and returns the batch itself; any
  other batch is converted record by record as before. A ``Types.DOUBLE()``
  (alone or as tuple fields) converts only an int (to a float, as PyFlink's
  serializer): a batch whose doubles are all floats is returned as it is (one
  more C-speed pass per double field).
* **Printing.** Java's ``toString`` of a ``String`` or of an integer type
  (Byte ... BigInteger) is Python's ``str`` of a ``str`` or an ``int`` (not a
  ``bool``, which prints ``true``/``false``). :func:`formatter` returns, for a
  basic type of those kinds and for tuples of them, a generated function that
  checks the exact types and builds the text in one f-string; any other value
  goes to ``type_info.format`` (so the output is unchanged, only faster).
  :func:`print_lines` formats a batch into one string for one ``write`` call.

The tests (tests/test_type_fast_paths.py) compare every fast path with the
general one on matching and non-matching values.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import countOf, itemgetter
from typing import Any

from .typeinfo import BasicTypeInfo, TupleTypeInfo, TypeInformation

__all__ = ["batch_converter", "formatter", "print_lines"]

# Java toString(x) == str(x) when type(x) is exactly the given Python type
_PLAIN_STR = {
    "String": "str",
    "Character": "str",
    "Byte": "int",
    "Short": "int",
    "Integer": "int",
    "Long": "int",
    "BigInteger": "int",
}


def batch_converter(type_info: Any) -> Callable[[list], list] | None:
    """A function converting a list of values to records of ``type_info`` (may return the
    list itself when every value already is one); ``None`` when the type converts nothing."""
    if not isinstance(type_info, TypeInformation) or not type_info.converts():
        return None
    convert = type_info.convert
    if type(type_info) is BasicTypeInfo and type_info.name == "Double":

        def convert_doubles(values: list) -> list:
            if countOf(map(type, values), float) == len(values):
                return values  # a float is its own double
            return [convert(v) for v in values]

        return convert_doubles
    if type(type_info) is TupleTypeInfo:
        fields = type_info.get_field_types()
        doubles = [i for i, t in enumerate(fields) if _is_double(t)]
        if all(_is_double(t) or not t.converts() for t in fields):
            arity = len(fields)

            def convert_tuples(values: list) -> list:
                n = len(values)  # countOf: no set built (about a quarter fewer instructions)
                if (
                    countOf(map(type, values), tuple) == n
                    and countOf(map(len, values), arity) == n
                    and all(countOf(map(type, map(itemgetter(i), values)), float) == n for i in doubles)
                ):
                    return values
                return [convert(v) for v in values]

            return convert_tuples
    return lambda values: [convert(v) for v in values]


def _is_double(type_info: TypeInformation) -> bool:
    return type(type_info) is BasicTypeInfo and type_info.name == "Double"


def formatter(type_info: Any, general: Callable[[Any], str]) -> Callable[[Any], str]:
    """``general`` (the text PyFlink prints for a value of ``type_info``), faster for the
    values whose text is Python's ``str``."""
    if isinstance(type_info, BasicTypeInfo) and type(type_info) is BasicTypeInfo:
        kind = _PLAIN_STR.get(type_info.name)
        if kind == "str":
            return lambda v: v if type(v) is str else general(v)
        if kind == "int":
            return lambda v: str(v) if type(v) is int else general(v)
        return general
    if type(type_info) is TupleTypeInfo:
        fields = type_info.get_field_types()
        kinds = [_PLAIN_STR.get(t.name) if type(t) is BasicTypeInfo else None for t in fields]
        if not kinds or None in kinds:
            return general
        names = [f"a{i}" for i in range(len(kinds))]
        checks = " and ".join(f"type({n}) is {k}" for n, k in zip(names, kinds, strict=True))
        text = ",".join("{" + n + "}" for n in names)
        # generated from the declared field kinds only (no user text)
        source = (
            "def fmt(v):\n"
            f"    if type(v) is tuple and len(v) == {len(names)}:\n"
            f"        {', '.join(names)}, = v\n"
            f"        if {checks}:\n"
            f"            return f'({text})'\n"
            "    return general(v)\n"
        )
        namespace: dict[str, Any] = {"general": general}
        exec(source, namespace)
        fast: Callable[[Any], str] = namespace["fmt"]
        return fast
    return general


def print_lines(fmt: Callable[[Any], str], prefix: str, records: list) -> str:
    """The lines ``print()`` writes for ``records``: one string, one ``write`` call."""
    if not records:
        return ""
    if prefix:
        return "".join([f"{prefix}{fmt(r)}\n" for r in records])
    return "\n".join(map(fmt, records)) + "\n"
